"""Scale by ten (issue 29): a batched send (`needlecast send --batch`) and the archives' rotation
(docs/formats.md, "Rotation"), each exactly once, including under kill -9 of the sidecar."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import BIN, run_cli
from helpers import killed_at, wait_for

from needlecast import mailbox, shared_file
from needlecast import message as msg
from needlecast.mailbox import Mailbox
from needlecast.message import Message
from needlecast.router import Router
from needlecast.sidecar import read_runtime

TOKEN = re.compile(r"token: (\S+)")


def nc(*args: str, cwd: Path, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("needlecast", *args, cwd=cwd, input=input)


def envoy(tmp_path: Path, layout: str, names: tuple[str, ...] = ("alice", "bob", "carol")) -> Path:
    root = tmp_path / "envoy"
    for name in names:
        mailbox.init_mailbox(root / name, layout)
    return root


def error_of(result: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(result.stderr.strip().splitlines()[-1])["error"]


def tokens(entries: list[mailbox.Entry]) -> Counter[str]:
    found: Counter[str] = Counter()
    for entry in entries:
        assert entry.problem is None, entry.problem
        assert entry.message is not None
        found.update(TOKEN.findall(entry.message.body))
    return found


# --------------------------------------------------------------------------- send --batch


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_send_batch_writes_each_line_as_one_message(tmp_path: Path, layout: str) -> None:
    root = envoy(tmp_path, layout)
    lines = [
        {"to": "bob", "body": "token: one"},
        {"to": ["bob", "carol"], "body": "token: two\n\nsecond paragraph\n---\nnot a header", "type": "question", "thread": "t1"},
        {"to": "carol, bob", "body": "token: three"},
    ]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    result = nc("send", "--batch", str(batch), "--json", cwd=root / "alice")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["count"] == 3
    assert len({m["id"] for m in data["messages"]}) == 3
    assert [m["to"] for m in data["messages"]] == [["bob"], ["bob", "carol"], ["carol", "bob"]]
    assert data["messages"][1]["type"] == "question" and data["messages"][1]["thread"] == "t1"
    # From stdin, without --json: the ids, one a line.
    plain = nc("send", "--batch", "-", cwd=root / "alice", input=json.dumps({"to": "bob", "body": "token: four"}) + "\n")
    assert plain.returncode == 0, plain.stderr
    assert re.fullmatch(r"msg-\S+\n", plain.stdout)
    assert len(mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries) == 4

    Router(root).route_all()
    assert tokens(mailbox.read_inbox(Mailbox(root / "bob"))) == Counter({"one": 1, "two": 1, "three": 1, "four": 1})
    assert tokens(mailbox.read_inbox(Mailbox(root / "carol"))) == Counter({"two": 1, "three": 1})
    two = next(e.message for e in mailbox.read_inbox(Mailbox(root / "carol")) if e.message and "two" in e.message.body)
    assert two.body.rstrip("\n") == lines[1]["body"]  # the body's `---` line survives the block format
    assert not mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_a_bad_batch_is_refused_whole_naming_its_line(tmp_path: Path, layout: str) -> None:
    root = envoy(tmp_path, layout)
    sleeve = root / "alice"
    good = json.dumps({"to": "bob", "body": "fine"})
    cases = {
        "not json": (f"{good}\n{{to: bob\n", "line 2"),
        "no recipient": (f"{good}\n\n{json.dumps({'body': 'for nobody'})}\n", "message 2"),
        "empty body": (f"{good}\n{json.dumps({'to': 'bob', 'body': '  '})}\n", "message 2"),
        "unknown key": (f"{json.dumps({'to': 'bob', 'body': 'x', 'priority': 'high'})}\n", "unknown keys priority"),
        "not an object": (f"{good}\n[1, 2]\n", "message 2"),
        "a number for a name": (f"{json.dumps({'to': ['bob', 3], 'body': 'x'})}\n", "message 1"),
    }
    for label, (text, where) in cases.items():
        batch = tmp_path / "batch.jsonl"
        batch.write_text(text)
        result = nc("send", "--batch", str(batch), "--json", cwd=sleeve)
        assert result.returncode == 2, (label, result.stdout, result.stderr)
        error = error_of(result)
        assert error["code"] == "INVALID_REQUEST", label
        assert where in error["message"], (label, error["message"])
        assert "Traceback" not in result.stderr
    with_options = nc("send", "--batch", str(batch), "--to", "bob", cwd=sleeve)
    assert with_options.returncode == 2 and "--batch" in with_options.stderr
    missing = nc("send", "--batch", str(tmp_path / "absent.jsonl"), "--json", cwd=sleeve)
    assert missing.returncode == 3 and error_of(missing)["code"] == "NOT_FOUND"
    # Nothing of any refused batch was written.
    assert not mailbox.read_outbox(Mailbox(sleeve), "alice").entries


def test_a_batch_reusing_an_id_of_the_outbox_writes_nothing(tmp_path: Path) -> None:
    root = envoy(tmp_path, "v2")
    box = Mailbox(root / "alice")
    now = datetime.now(UTC)
    first = [Message(id=f"m{n}", sender="alice", to=("bob",), type="task", body=f"token: m{n}\n") for n in range(3)]
    mailbox.append_outbox_many(box, first, now)
    before = sorted(p.name for p in box.outbox_dir.iterdir())
    again = [Message(id="new", sender="alice", to=("bob",), type="task", body="token: new\n"), first[1]]
    with pytest.raises(mailbox.Conflict):
        mailbox.append_outbox_many(box, again, now)
    assert sorted(p.name for p in box.outbox_dir.iterdir()) == before


@pytest.mark.slow  # a batch and two routing passes per crash point
@pytest.mark.parametrize("chunk", [None, 4], ids=["send-batch", "in-parts-from-4"])
def test_a_v2_batch_killed_at_any_durable_step_leaves_whole_messages_each_delivered_once(tmp_path: Path, chunk: int | None) -> None:
    """`send --batch` (v2) killed before each of its durable calls, the renames that name its
    files included: the outbox holds whole messages only (the batch's first ones, never a
    temporary under a message's name), no temporary survives the next pass, and routing
    delivers each message written exactly once. `send --batch` names its files in parts
    (mailbox.SEND_CHUNK_FILES, then twice as many each time); the second sweep writes the same
    batch in parts of 4 and 8, so that kills land between parts."""
    batch = [Message(id=f"m{n}", sender="alice", to=("bob",), type="task", time="2026-03-01T10:00:00Z", body=f"token: m{n}\n") for n in range(12)]
    now = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)

    def write(box: Mailbox) -> object:
        if chunk is None:
            return mailbox.append_outbox_many(box, batch, now)
        files = [(mailbox.message_file_name(m, now), msg.render_message_document(m).encode()) for m in batch]
        return shared_file.create_many(box.outbox_dir, files, chunk=chunk)

    step = 0
    while True:
        step += 1
        root = envoy(tmp_path / f"run-{step}", "v2")
        box = Mailbox(root / "alice")
        crashed = killed_at(step, DURABLE_CALLS, lambda b=box: write(b))  # type: ignore[misc]
        written = [entry.key for entry in mailbox.read_outbox(box, "alice").entries]
        assert all(entry.problem is None for entry in mailbox.read_outbox(box, "alice").entries), f"a torn message after a kill at step {step}"
        assert set(written) == {f"m{n}" for n in range(len(written))}, f"not the batch's first messages after a kill at step {step}: {written}"
        if not crashed:
            assert len(written) == len(batch)
        Router(root).route_all()
        Router(root).route_all()
        assert sorted(tokens(mailbox.read_inbox(Mailbox(root / "bob"))).elements()) == sorted(written), f"after a kill at step {step}"
        assert sorted(tokens(mailbox.read_archive(box, "alice")).elements()) == sorted(written)
        assert mailbox.read_outbox(box, "alice").entries == ()
        assert [p.name for p in box.dir.rglob("*") if ".tmp-" in p.name] == [], f"litter after a kill at step {step}"
        shutil.rmtree(tmp_path / f"run-{step}")
        if not crashed:
            break
    assert step > len(batch)  # every name of the batch was a crash point


# --------------------------------------------------------------------------- kill -9 of the sidecar


def start_sidecar(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--port", "0", "--no-index-watch", "--sweep", "0.5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def prefill_archive(box: Mailbox, sender: str, layout: str, count: int, *, size: int = 0) -> set[str]:
    """Give `sender`'s archive `count` routed messages (or, v1, at least `size` bytes of them),
    each dated a month apart over two years; returns their tokens."""
    first = datetime(2025, 1, 1, tzinfo=UTC)
    copies: list[Message] = []
    number = 0
    while number < count or (layout == "v1" and len(copies) * 120 < size):
        when = (first + timedelta(days=30 * (number % 24), seconds=number)).strftime("%Y-%m-%dT%H:%M:%SZ")
        copies.append(
            Message(
                id=f"old-{sender}-{number}", sender=sender, to=("bob",), type="task", time=when, body=f"token: old-{sender}-{number}\n", extra={"routed": when}
            )
        )
        number += 1
    if layout == "v2":
        box.archive_dir.mkdir(exist_ok=True)
        for copy in copies:
            (box.archive_dir / mailbox.message_file_name(copy, first)).write_bytes(msg.render_message_document(copy).encode())
    else:
        box.archive_file.write_text("# Archive\n\n" + "".join(msg.render_block(copy) for copy in copies))
    return {f"old-{sender}-{n}" for n in range(number)}


@pytest.mark.slow  # kill -9 of real sidecars
@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_a_batch_under_kill_9_of_the_sidecar_is_delivered_exactly_once(tmp_path: Path, layout: str) -> None:
    names = ("alice", "bob", "carol")
    root = envoy(tmp_path, layout, names)
    # Archives just below the rotation points, so the kills also land in rotations.
    old = {
        sender: prefill_archive(Mailbox(root / sender), sender, layout, mailbox.ARCHIVE_TOP_FILES - 10, size=mailbox.ARCHIVE_SEGMENT_BYTES - 20_000)
        for sender in ("alice", "bob")
    }
    per_sender = 300
    rng = random.Random(f"batch-{layout}")
    expected: dict[str, set[str]] = {name: set() for name in names}
    batches: list[subprocess.Popen[str]] = []
    for sender in ("alice", "bob"):
        others = [n for n in names if n != sender]
        lines = []
        for number in range(per_sender):
            to = rng.sample(others, rng.choice((1, 2)))
            for recipient in to:
                expected[recipient].add(f"{sender}-{number}")
            lines.append(json.dumps({"to": to, "body": f"token: {sender}-{number}\n\nsecond paragraph\n"}))
        (tmp_path / f"{sender}.jsonl").write_text("\n".join(lines) + "\n")
    sidecar = start_sidecar(root)
    try:
        for sender in ("alice", "bob"):
            batches.append(
                subprocess.Popen(
                    [str(BIN / "needlecast"), "send", "--batch", str(tmp_path / f"{sender}.jsonl"), "--json", "--root", str(root / sender)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for _kill in range(8):
            wait_for(lambda: sidecar.poll() is None and (read_runtime(root) or {}).get("pid") == sidecar.pid, timeout=60, message="sidecar ready")
            # Random instants while the batches are routed, some right after start-up.
            time.sleep(rng.uniform(0.02, 0.4))  # a kill instant, not a wait for a condition
            os.killpg(sidecar.pid, signal.SIGKILL)
            sidecar.wait(timeout=10)
            sidecar = start_sidecar(root)
        for process in batches:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            assert json.loads(out)["count"] == per_sender
        wait_for(lambda: all(not mailbox.read_outbox(Mailbox(root / s), s).entries for s in names), timeout=120, message="outboxes drained")
        if layout == "v2":
            # A burst's passes put the rotation off while more mail waits; a pass with time for
            # it (at the latest the next sweep) makes it.
            wait_for(
                lambda: all(any(p.is_dir() for p in Mailbox(root / s).archive_dir.iterdir()) for s in ("alice", "bob")), timeout=60, message="archives rotated"
            )
    finally:
        os.killpg(sidecar.pid, signal.SIGTERM)
        sidecar.wait(timeout=30)

    for name in names:
        got = tokens(mailbox.read_inbox(Mailbox(root / name)))
        assert [t for t, n in got.items() if n > 1] == [], f"{name} got duplicates"
        assert set(got) == expected[name], f"{name}: missing {sorted(expected[name] - set(got))[:5]} extra {sorted(set(got) - expected[name])[:5]}"
        assert mailbox.read_dead_letters(Mailbox(root / name)) == []
    for sender in ("alice", "bob"):
        box = Mailbox(root / sender)
        archived = tokens(mailbox.read_archive(box, sender))
        assert max(archived.values()) == 1, "a message was archived twice"
        assert set(archived) == old[sender] | {f"{sender}-{n}" for n in range(per_sender)}
        # The rotation ran: the working set is bounded.
        if layout == "v2":
            assert len(mailbox.message_names(box.archive_dir)) <= mailbox.ARCHIVE_TOP_FILES + per_sender
            assert any(p.is_dir() for p in box.archive_dir.iterdir())
        else:
            assert list(box.segments_dir.glob("*.md"))
            assert box.archive_file.stat().st_size < mailbox.ARCHIVE_SEGMENT_BYTES
        assert [p.name for p in box.dir.rglob("*") if ".tmp-" in p.name] == []


# --------------------------------------------------------------------------- rotation at every crash point

DURABLE_CALLS = ("fsync", "write", "rename", "replace", "link", "unlink", "renameat2")
TOP, SEGMENT = 4, 900


def _rotation_scenario(root: Path) -> None:
    """alice (v1) with an archive.md past the segment size; bob (v2) with an archive top past
    its limit; both with mail to send."""
    mailbox.init_mailbox(root / "alice", "v1")
    mailbox.init_mailbox(root / "bob", "v2")
    mailbox.init_mailbox(root / "carol", "v1")
    prefill_archive(Mailbox(root / "alice"), "alice", "v1", 8)
    prefill_archive(Mailbox(root / "bob"), "bob", "v2", 9)
    with open(Mailbox(root / "alice").outbox_file, "a") as handle:
        handle.write("".join(f"---\nid: a{n}\nto: [bob, carol]\ntype: task\n---\ntoken: a{n}\n\n" for n in range(5)))
    for n in range(5):
        (Mailbox(root / "bob").outbox_dir / f"000{n}_b{n}.md").write_text(f"---\nid: b{n}\nto: carol\n---\ntoken: b{n}\n")


def _outcome_routed_twice(start: Path, reference: Path) -> dict[str, object]:
    """What two plain router passes over a copy of `start` leave (`_rotation_outcome`): the
    answer a kill sweep's every crash point must end at."""
    shutil.copytree(start, reference)
    _route(reference)
    _route(reference)
    return _rotation_outcome(reference)


def _rotation_outcome(root: Path) -> dict[str, object]:
    result: dict[str, object] = {}
    for name in ("alice", "bob", "carol"):
        box = Mailbox(root / name)
        result[f"{name}:inbox"] = sorted(tokens(mailbox.read_inbox(box)).elements())
        result[f"{name}:outbox"] = [e.key for e in mailbox.read_outbox(box, name).entries]
        result[f"{name}:archived"] = sorted(tokens(mailbox.read_archive(box, name)).elements())
        result[f"{name}:dead"] = len(mailbox.read_dead_letters(box))
        result[f"{name}:litter"] = sorted(p.name for p in box.dir.rglob("*") if ".tmp-" in p.name)
    return result


def _route(root: Path) -> None:
    Router(root, archive_top_files=TOP, archive_segment_bytes=SEGMENT).route_all()


def _crash_at(root: Path, step: int) -> bool:
    """One routing pass (rotating at TOP and SEGMENT) killed just before its `step`-th durable
    system call; True if it died there."""
    return killed_at(step, DURABLE_CALLS, lambda: _route(root))


@pytest.mark.slow  # a routing pass per crash point
def test_a_rotation_killed_at_any_durable_step_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    start = tmp_path / "start"
    _rotation_scenario(start)
    reference = tmp_path / "reference"
    expected = _outcome_routed_twice(start, reference)
    assert expected["carol:inbox"] == sorted([f"a{n}" for n in range(5)] + [f"b{n}" for n in range(5)])
    assert expected["alice:archived"] == sorted([f"old-alice-{n}" for n in range(8)] + [f"a{n}" for n in range(5)])
    assert expected["bob:archived"] == sorted([f"old-bob-{n}" for n in range(9)] + [f"b{n}" for n in range(5)])
    # The reference really rotated: a segment of alice's archive.md, bob's months in folders.
    assert list(Mailbox(reference / "alice").segments_dir.glob("*.md"))
    # (The top keeps the messages of the last pass: a copy a killed pass archived is looked for there.)
    assert [name for name in mailbox.message_names(Mailbox(reference / "bob").archive_dir) if "_old-" in name] == []
    step = 0
    while True:
        step += 1
        run = tmp_path / f"run-{step}"
        shutil.copytree(start, run)
        crashed = _crash_at(run, step)
        if crashed:
            _crash_at(run, step)  # a second kill at the same point of the recovery pass
        _route(run)
        _route(run)
        assert _rotation_outcome(run) == expected, f"outcome differs after a kill at durable step {step}"
        shutil.rmtree(run)
        if not crashed:
            break
    assert step > 20  # the scenario really exercised many crash points


def test_a_busy_router_puts_rotation_off_within_its_bound_and_then_rotates(tmp_path: Path) -> None:
    """While more mail waits (the sidecar's hint), a pass leaves the archive top unrotated, up
    to ROTATION_PUT_OFF times its limit; the first pass with time for it, one with nothing to
    route included, makes the same moves: the archive then equals a router's that never waited."""
    from needlecast.router import ROTATION_PUT_OFF

    def run(root: Path, busy: list[bool]) -> list[int]:
        router = Router(root, archive_top_files=TOP, more_waiting=lambda: busy[0])
        tops = []
        for number in range(5):
            mailbox.append_outbox_many(
                Mailbox(root / "bob"),
                [Message(id=f"b{number}-{n}", sender="bob", to=("carol",), type="task", body=f"token: b{number}-{n}\n") for n in range(5)],
                datetime.now(UTC),
            )
            router.route_all() if number == 0 else router.route_names({"bob"})
            tops.append(len(mailbox.message_names(Mailbox(root / "bob").archive_dir)))
        busy[0] = False
        router.route_names({"bob"})  # nothing to route: the rotation owed is made here
        tops.append(len(mailbox.message_names(Mailbox(root / "bob").archive_dir)))
        return tops

    busy_root, plain_root = envoy(tmp_path / "busy", "v2", ("bob", "carol")), envoy(tmp_path / "plain", "v2", ("bob", "carol"))
    for root in (busy_root, plain_root):
        prefill_archive(Mailbox(root / "bob"), "bob", "v2", TOP)
    busy_tops, plain_tops = run(busy_root, [True]), run(plain_root, [False])
    assert max(plain_tops) <= TOP + 5  # rotated at every pass
    assert max(busy_tops) > TOP + 5  # put off while busy ...
    assert max(busy_tops) <= ROTATION_PUT_OFF * TOP + 5  # ... within its bound
    assert busy_tops[-2] > TOP + 5 and busy_tops[-1] == 0  # and made once there was time, by a pass with nothing to route
    for root in (busy_root, plain_root):
        box = Mailbox(root / "bob")
        assert sorted(tokens(mailbox.read_archive(box, "bob")).elements()) == sorted(
            [f"old-bob-{n}" for n in range(TOP)] + [f"b{number}-{n}" for number in range(5) for n in range(5)]
        )
    folders = {
        name: sorted(
            str(p.relative_to(root / "bob" / ".needlecast" / "archive")).split("/")[0] for p in (root / "bob" / ".needlecast" / "archive").rglob("*_old-*")
        )
        for name, root in (("busy", busy_root), ("plain", plain_root))
    }
    assert folders["busy"] == folders["plain"]  # the old messages went to the same month folders


def test_a_rotated_message_file_keeps_its_git_history(tmp_path: Path) -> None:
    root = envoy(tmp_path, "v2", ("alice", "bob"))
    sleeve = root / "alice"
    git = ["git", "-C", str(sleeve), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    prefill_archive(Mailbox(sleeve), "alice", "v2", 6)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "archived"], check=True)
    (Mailbox(sleeve).outbox_dir / "0001_new.md").write_text("---\nid: new\nto: bob\n---\ntoken: new\n")
    _route(root)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "rotated"], check=True)
    moved = sorted(p for p in Mailbox(sleeve).archive_dir.glob("*/*.md"))
    assert moved
    log = subprocess.run([*git, "log", "--follow", "--format=%s", "--", str(moved[0].relative_to(sleeve))], capture_output=True, text=True, check=True)
    assert log.stdout.split() == ["rotated", "archived"]


# --------------------------------------------------------------------------- the archive top a router keeps


def _listed(box: Mailbox) -> set[str]:
    return set(mailbox.message_names(box.archive_dir))


def test_the_archive_top_kept_in_memory_equals_a_listing_after_every_change(tmp_path: Path) -> None:
    root = envoy(tmp_path, "v2", ("alice", "bob"))
    box = Mailbox(root / "alice")
    now = datetime(2026, 3, 1, tzinfo=UTC)
    prefill_archive(box, "alice", "v2", 6)
    top = mailbox.archive_top(box)
    assert top.names == _listed(box)
    # Our own changes keep it up to date (and it is not listed again: same object, same names).
    copies = [Message(id=f"new-{n}", sender="alice", to=("bob",), type="task", time="2026-03-01T10:00:00Z", body=f"token: new-{n}\n") for n in range(3)]
    mailbox.archive(box, copies, now, files=True, top=top)
    assert mailbox.archive_top(box, top) is top and top.names == _listed(box)
    # A second archiving of the same ids writes nothing: the index knows them.
    mailbox.archive(box, copies, now, files=True, top=top)
    assert top.names == _listed(box) and len(top.names) == 9
    moved = mailbox.rotate_archive_folder(box, [], "alice", top_files=2, top=top)
    assert moved == 9 and top.names == _listed(box) == set()
    # Changes by others (a git pull, a person) are seen: the folder's signature changed.
    hand = box.archive_dir / "2026-03-02T00-00-00Z_alice_by-hand.md"
    hand.write_text("---\nid: by-hand\nfrom: alice\nto: bob\n---\ntoken: by-hand\n")
    assert mailbox.archive_top(box, top).names == _listed(box) == {hand.name}
    assert "_alice_by-hand.md" in top.suffixes
    hand.unlink()
    assert mailbox.archive_top(box, top).names == _listed(box) == set()
    assert top.suffixes == {}


def test_a_copy_another_clone_archived_meanwhile_is_not_archived_twice(tmp_path: Path) -> None:
    """A long-lived router keeps its senders' archive tops in memory; a copy that appears in the
    top by other means (a git pull of another clone's routing) between its passes is seen."""
    root = envoy(tmp_path, "v2", ("alice", "bob"))
    box = Mailbox(root / "alice")
    router = Router(root, archive_top_files=4)
    router.route_all()
    now = datetime.now(UTC)
    for round_number in range(3):
        batch = [Message(id=f"r{round_number}-{n}", sender="alice", to=("bob",), type="task", body=f"token: r{round_number}-{n}\n") for n in range(3)]
        mailbox.append_outbox_many(box, batch, now)
        router.route_names({"alice"})
    # The other clone routed `pulled` (written without a time, so each router dates it by its own
    # pass, and the copies' names differ) already: its archive copy arrives before our pass.
    (box.outbox_dir / "0001_pulled.md").write_text("---\nid: pulled\nto: bob\ntype: task\n---\ntoken: pulled\n")
    pulled = Message(id="pulled", sender="alice", to=("bob",), type="task", time="2026-03-01T10:00:00Z", body="token: pulled\n")
    copy = msg.with_changes(pulled, extra={"routed": "2026-03-01T10:00:01Z", "delivered_to": ["bob"]})
    (box.archive_dir / mailbox.message_file_name(copy, now)).write_bytes(msg.render_message_document(copy).encode())
    router.route_names({"alice"})
    archived = tokens(mailbox.read_archive(box, "alice"))
    assert archived == Counter({f"r{r}-{n}": 1 for r in range(3) for n in range(3)} | {"pulled": 1})
    assert tokens(mailbox.read_inbox(Mailbox(root / "bob"))) == Counter({f"r{r}-{n}": 1 for r in range(3) for n in range(3)} | {"pulled": 1})
    assert not mailbox.read_outbox(box, "alice").entries


def test_a_rotation_leaves_a_name_its_month_folder_holds_already(tmp_path: Path) -> None:
    root = envoy(tmp_path, "v2", ("alice", "bob"))
    box = Mailbox(root / "alice")
    prefill_archive(box, "alice", "v2", 6)
    first = mailbox.message_names(box.archive_dir)[0]
    month = box.archive_dir / first[:7]
    month.mkdir()
    (month / first).write_text("---\nid: other\nfrom: alice\nto: bob\n---\ntoken: merged in\n")
    moved = mailbox.rotate_archive_folder(box, [], "alice", top_files=2)
    assert moved == 5
    assert mailbox.message_names(box.archive_dir) == [first]  # nothing replaced: both stay
    assert (month / first).read_text().endswith("token: merged in\n")


# --------------------------------------------------------------------------- archive copies a busy pass puts off

FIXED = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)


def _burst_scenario(root: Path, count: int = 12) -> None:
    """bob (v2, archive top one short of TOP) with `count` messages written as `send --batch`
    writes them, to carol and some to alice as well; alice and carol v2."""
    for name in ("alice", "bob", "carol"):
        mailbox.init_mailbox(root / name, "v2")
    prefill_archive(Mailbox(root / "bob"), "bob", "v2", TOP - 1)
    batch = [
        Message(id=f"b{n}", sender="bob", to=("carol", "alice") if n % 3 == 0 else ("carol",), type="task", time="2026-03-01T09:00:00Z", body=f"token: b{n}\n")
        for n in range(count)
    ]
    mailbox.append_outbox_many(Mailbox(root / "bob"), batch, FIXED)


def _archive_files(root: Path, name: str) -> dict[str, bytes]:
    folder = Mailbox(root / name).archive_dir
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.md"))}


def _busy_then_quiet(root: Path) -> None:
    """A pass while more mail waits (it puts its archive copies off), then the pass once quiet."""
    busy = [True]
    router = Router(root, archive_top_files=TOP, clock=lambda: FIXED, more_waiting=lambda: busy[0])
    router.route_names({"bob"})
    busy[0] = False
    router.route_owed()


def test_a_busy_pass_delivers_first_and_a_quiet_one_archives_as_a_plain_pass_would(tmp_path: Path) -> None:
    plain, deferred = tmp_path / "plain", tmp_path / "deferred"
    _burst_scenario(plain)
    _burst_scenario(deferred)
    Router(plain, archive_top_files=TOP, clock=lambda: FIXED).route_all()

    busy = [True]
    router = Router(deferred, archive_top_files=TOP, clock=lambda: FIXED, more_waiting=lambda: busy[0])
    router.route_all()  # the first pass of a process (a full one)
    bob = Mailbox(deferred / "bob")
    # Delivered (and journaled) while busy; the outbox files wait aside for their archive copies.
    assert sorted(tokens(mailbox.read_inbox(Mailbox(deferred / "carol"))).elements()) == sorted(f"b{n}" for n in range(12))
    assert sorted(tokens(mailbox.read_archive(bob, "bob"))) == sorted(f"old-bob-{n}" for n in range(TOP - 1))
    assert mailbox.read_outbox(bob, "bob").entries == ()
    assert len([n for n in os.listdir(bob.outbox_dir) if ".tmp-aside-" in n]) == 12
    assert router.owes()
    # Another pass while still busy, for another sender, keeps them aside (recovery leaves them).
    router.route_names({"bob", "carol"})
    assert len([n for n in os.listdir(bob.outbox_dir) if ".tmp-aside-" in n]) == 12
    busy[0] = False
    router.route_owed()
    assert not router.owes()
    for name in ("alice", "bob", "carol"):
        assert _rotation_outcome(deferred)[f"{name}:inbox"] == _rotation_outcome(plain)[f"{name}:inbox"]
    assert _rotation_outcome(deferred) == _rotation_outcome(plain)
    # The same archive files, byte for byte and in the same folders (the rotation ran too).
    assert _archive_files(deferred, "bob") == _archive_files(plain, "bob")
    assert any("/" in name for name in _archive_files(deferred, "bob"))


def test_a_router_in_another_process_routes_what_a_busy_pass_set_aside_exactly_once(tmp_path: Path) -> None:
    """`route --once` beside a sidecar whose busy pass left archive copies to write: it puts the
    files set aside back and routes them (each inbox and the archive take them once); the
    sidecar's pass that then writes what it owed writes nothing twice."""
    root = tmp_path / "envoy"
    _burst_scenario(root)
    busy = [True]
    sidecar_router = Router(root, archive_top_files=TOP, clock=lambda: FIXED, more_waiting=lambda: busy[0])
    sidecar_router.route_names({"bob"})
    assert sidecar_router.owes()
    Router(root, archive_top_files=TOP).route_all()  # another process: it knows nothing owed
    busy[0] = False
    sidecar_router.route_owed()
    outcome = _rotation_outcome(root)
    assert outcome["carol:inbox"] == sorted(f"b{n}" for n in range(12))
    assert outcome["alice:inbox"] == sorted(f"b{n}" for n in range(0, 12, 3))
    assert outcome["bob:archived"] == sorted([f"old-bob-{n}" for n in range(TOP - 1)] + [f"b{n}" for n in range(12)])
    assert outcome["bob:outbox"] == [] and outcome["bob:litter"] == [] and outcome["bob:dead"] == 0


@pytest.mark.slow  # two routing passes per crash point
def test_a_put_off_archive_killed_at_any_durable_step_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """The busy pass (deliveries only) and the quiet pass that archives, killed before each of
    their durable system calls (and again at the same point of the recovery): after a plain
    router's recovery passes, everything is where a router that never put anything off leaves
    it, each message once."""
    start = tmp_path / "start"
    _burst_scenario(start)
    expected = _outcome_routed_twice(start, tmp_path / "reference")
    assert expected["carol:inbox"] == sorted(f"b{n}" for n in range(12))
    step = 0
    while True:
        step += 1
        run = tmp_path / f"run-{step}"
        shutil.copytree(start, run)
        crashed = killed_at(step, DURABLE_CALLS, lambda r=run: _busy_then_quiet(r))  # type: ignore[misc]
        if crashed:
            killed_at(step, DURABLE_CALLS, lambda r=run: _busy_then_quiet(r))  # type: ignore[misc]
        _route(run)
        _route(run)
        assert _rotation_outcome(run) == expected, f"outcome differs after a kill at durable step {step}"
        shutil.rmtree(run)
        if not crashed:
            break
    assert step > 40  # both passes' steps were crash points


def _aside(box: Mailbox) -> list[str]:
    return [name for name in os.listdir(box.outbox_dir) if ".tmp-aside-" in name]


@pytest.mark.slow  # a real sidecar routing two batches
def test_a_sidecar_archives_what_a_burst_put_off_once_the_burst_is_over_and_before_it_stops(tmp_path: Path) -> None:
    """No sweep comes (60 s): the pass that writes the archive copies a busy pass put off is
    the sidecar's own, once no new mail has come for a moment; a sidecar stopped while it still
    owes some writes them before it exits."""
    root = envoy(tmp_path, "v2", ("alice", "bob"))
    alice = Mailbox(root / "alice")
    sidecar = subprocess.Popen(
        [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--port", "0", "--no-index-watch", "--sweep", "60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: (read_runtime(root) or {}).get("pid") == sidecar.pid, timeout=60, message="sidecar ready")
        for round_number in range(2):
            lines = [json.dumps({"to": ["bob"], "body": f"token: r{round_number}-{n}\n"}) for n in range(400)]
            (tmp_path / "batch.jsonl").write_text("\n".join(lines) + "\n")
            result = nc("send", "--batch", str(tmp_path / "batch.jsonl"), "--root", str(root / "alice"), cwd=tmp_path)
            assert result.returncode == 0, result.stderr
            if round_number == 0:
                # (Read until equal: a read racing the rotation that follows can miss a file moving.)
                first = Counter({f"r0-{n}": 1 for n in range(400)})
                wait_for(
                    lambda: not _aside(alice) and not mailbox.read_outbox(alice, "alice").entries and tokens(mailbox.read_archive(alice, "alice")) == first,
                    timeout=60,
                    message="the burst archived without a sweep",
                )
        wait_for(lambda: len(tokens(mailbox.read_inbox(Mailbox(root / "bob")))) == 800, timeout=60, message="the second burst delivered")
    finally:
        os.killpg(sidecar.pid, signal.SIGTERM)
        sidecar.wait(timeout=30)
    assert sidecar.returncode == 0
    assert _aside(alice) == [] and not mailbox.read_outbox(alice, "alice").entries
    archived = tokens(mailbox.read_archive(alice, "alice"))
    assert max(archived.values()) == 1 and set(archived) == {f"r{r}-{n}" for r in range(2) for n in range(400)}
    got = tokens(mailbox.read_inbox(Mailbox(root / "bob")))
    assert max(got.values()) == 1 and len(got) == 800


def test_the_sidecars_inotify_hears_new_mail_and_writers_not_messages_leaving(tmp_path: Path) -> None:
    """The sidecar's own inotify reader (a real descriptor, real files): a message named in an
    outbox calls a pass for its sender; a writer's temporary there says more mail is on its way
    without calling one; a message renamed aside or deleted calls none."""
    from needlecast.sidecar import Sidecar

    root = envoy(tmp_path, "v2", ("alice", "bob"))
    outbox = Mailbox(root / "alice").outbox_dir
    sidecar = Sidecar(root, serve_http=False, workspace_stats=lambda _root: None)
    sidecar._refresh()
    sidecar._start_observer(polling=False)

    def writer_heard(name: str) -> None:
        # A temporary written: once it is heard, every event before it was (one ordered queue).
        before = sidecar._writing_at
        (outbox / name).write_text("---\nid: t\nto: bob\n---\nhello\n")
        wait_for(lambda: sidecar._writing_at > before, message="a writer's temporary heard")

    try:
        assert sidecar.watcher == "inotify"
        writer_heard(".0001_a.md.tmp-1-ab")
        assert not sidecar._pending  # more mail on its way, nothing to route yet
        (outbox / ".0001_a.md.tmp-1-ab").rename(outbox / "0001_a.md")
        wait_for(lambda: sidecar._pending == {"alice"}, message="a new message heard")
        sidecar._pending.clear()
        (outbox / "0001_a.md").rename(outbox / ".0001_a.md.tmp-aside-1-cd")  # a router setting it aside
        (outbox / ".0001_a.md.tmp-aside-1-cd").unlink()
        writer_heard(".0002_b.md.tmp-1-ef")
        assert not sidecar._pending
        (outbox / ".0002_b.md.tmp-1-ef").rename(outbox / "0002_b.md")
        wait_for(lambda: sidecar._pending == {"alice"}, message="the next message heard")
        sidecar._pending.clear()
        (outbox / "0002_b.md").unlink()  # by hand
        writer_heard(".0003_c.md.tmp-1-01")
        assert not sidecar._pending
    finally:
        sidecar._stop_observer()

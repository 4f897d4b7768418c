"""A routed v2 outbox file that holds exactly its inbox copy's bytes becomes that copy by a link
(issue 29's burst): the same messages arrive, each exactly once, including under kill -9 at
every durable step of the pass, and no inbox file stays one file with an outbox file."""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from helpers import killed_at

from moss_files.foundation import fs
from needlecast import mailbox
from needlecast import message as msg
from needlecast.mailbox import Mailbox
from needlecast.message import Message
from needlecast.router import Router
from needlecast.routing import delivered_copy

TOKEN = re.compile(r"token: (\S+)")
DURABLE_CALLS = ("fsync", "write", "rename", "replace", "link", "unlink")
TIME = "2026-03-01T10:00:00Z"
TOP = 4  # archive top files before rotation, for these tests


def send(root: Path, sender: str, messages: list[tuple[str, tuple[str, ...]]]) -> list[Path]:
    """Write `(id, recipients)` messages the way `needlecast send --batch` does (with a time)."""
    batch = [Message(id=ident, sender=sender, to=to, type="task", time=TIME, body=f"token: {ident}\n") for ident, to in messages]
    return mailbox.append_outbox_many(Mailbox(root / sender), batch, mailbox_now())


def mailbox_now():  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    return datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def scenario(root: Path) -> None:
    """alice and bob (v2) send to bob, carol (v2) and dave (v1): messages to one v2 inbox
    (linked), to two (linked into one, written into the other), to a v1 inbox, and a
    hand-written file without a time (its copy differs from it: written)."""
    for name in ("alice", "bob", "carol"):
        mailbox.init_mailbox(root / name, "v2")
    mailbox.init_mailbox(root / "dave", "v1")
    send(root, "alice", [("a0", ("bob",)), ("a1", ("bob",)), ("a2", ("bob", "carol")), ("a3", ("dave",)), ("a4", ("carol",))])
    send(root, "bob", [("b0", ("carol",)), ("b1", ("alice",))])
    (Mailbox(root / "bob").outbox_dir / "0000_b2.md").write_text("---\nid: b2\nto: carol\n---\ntoken: b2\n")
    # Archive tops past TOP, so that each pass also rotates (docs/formats.md, "Rotation").
    for sender in ("alice", "bob"):
        box = Mailbox(root / sender)
        box.archive_dir.mkdir(exist_ok=True)
        for number in range(TOP + 2):
            when = f"2025-{number % 12 + 1:02d}-01T00:00:00Z"
            copy = Message(
                id=f"old-{sender}-{number}",
                sender=sender,
                to=("carol",),
                type="task",
                time=when,
                body=f"token: old-{sender}-{number}\n",
                extra={"routed": when},
            )
            (box.archive_dir / mailbox.message_file_name(copy, mailbox_now())).write_bytes(msg.render_message_document(copy).encode())


def outcome(root: Path) -> dict[str, object]:
    result: dict[str, object] = {}
    for name in ("alice", "bob", "carol", "dave"):
        box = Mailbox(root / name)
        inbox = Counter(token for entry in mailbox.read_inbox(box) if entry.message is not None for token in TOKEN.findall(entry.message.body))
        archived = Counter(token for entry in mailbox.read_archive(box, name) if entry.message is not None for token in TOKEN.findall(entry.message.body))
        result[f"{name}:inbox"] = sorted(inbox.elements())
        result[f"{name}:archived"] = sorted(archived.elements())
        result[f"{name}:outbox"] = [entry.key for entry in mailbox.read_outbox(box, name).entries]
        result[f"{name}:dead"] = len(mailbox.read_dead_letters(box))
        result[f"{name}:litter"] = sorted(p.name for p in box.dir.rglob("*") if ".tmp-" in p.name)
        result[f"{name}:shared"] = sorted(p.name for p in box.dir.rglob("*.md") if p.is_file() and p.stat().st_nlink > 1)
        # Rotation ran: no message of an earlier month is left at the archive's top.
        result[f"{name}:unrotated"] = sorted(n for n in mailbox.message_names(box.archive_dir) if "_old-" in n) if box.archive_dir.is_dir() else []
    return result


def route(root: Path) -> None:
    Router(root, archive_top_files=TOP).route_all()


def test_a_message_written_as_send_writes_it_is_linked_into_its_inbox(tmp_path: Path) -> None:
    root = tmp_path / "envoy"
    scenario(root)
    sent = {path.name.split("_", 1)[1]: (path.stat().st_ino, path.read_bytes()) for path in Mailbox(root / "alice").outbox_dir.glob("*.md")}
    route(root)
    bob, carol = Mailbox(root / "bob"), Mailbox(root / "carol")
    inbox = {path.name.rsplit("_", 1)[1]: path for path in bob.inbox_dir.glob("*.md")}
    # a0 and a1 are alice's outbox files themselves, now only in bob's inbox.
    for ident in ("a0", "a1"):
        inode, data = sent[f"{ident}.md"]
        assert inbox[f"{ident}.md"].stat().st_ino == inode
        assert inbox[f"{ident}.md"].read_bytes() == data
        assert inbox[f"{ident}.md"].stat().st_nlink == 1
    # a2 went to bob and carol: linked into one inbox, written into the other, the same bytes.
    carol_a2 = next(carol.inbox_dir.glob("*_alice_a2.md"))
    assert {inbox["a2.md"].stat().st_ino, carol_a2.stat().st_ino} & {sent["a2.md"][0]}
    assert inbox["a2.md"].stat().st_ino != carol_a2.stat().st_ino
    assert inbox["a2.md"].read_bytes() == carol_a2.read_bytes() == sent["a2.md"][1]
    # Every inbox file holds what the router writes for a delivered copy (the plain answer).
    for box in (bob, carol):
        for path in box.inbox_dir.glob("*.md"):
            entry = mailbox.scan_message_file(path.read_bytes(), path, "")
            assert entry.message is not None and entry.message.sender is not None
            copy = delivered_copy(entry.message, entry.key, entry.message.sender, TIME)
            assert path.read_bytes() == msg.render_message_document(copy).encode()
    assert outcome(root) == {
        "alice:inbox": ["b1"],
        "alice:archived": ["a0", "a1", "a2", "a3", "a4"] + [f"old-alice-{n}" for n in range(TOP + 2)],
        "alice:outbox": [],
        "alice:dead": 0,
        "alice:litter": [],
        "alice:shared": [],
        "alice:unrotated": [],
        "bob:inbox": ["a0", "a1", "a2"],
        "bob:archived": ["b0", "b1", "b2"] + [f"old-bob-{n}" for n in range(TOP + 2)],
        "bob:outbox": [],
        "bob:dead": 0,
        "bob:litter": [],
        "bob:shared": [],
        "bob:unrotated": [],
        "carol:inbox": ["a2", "a4", "b0", "b2"],
        "carol:archived": [],
        "carol:outbox": [],
        "carol:dead": 0,
        "carol:litter": [],
        "carol:shared": [],
        "carol:unrotated": [],
        "dave:inbox": ["a3"],
        "dave:archived": [],
        "dave:outbox": [],
        "dave:dead": 0,
        "dave:litter": [],
        "dave:shared": [],
        "dave:unrotated": [],
    }
    # The archive copy is still a file of its own, with what the router adds.
    archived = next(Mailbox(root / "alice").archive_dir.glob("*_alice_a0.md"))
    assert archived.stat().st_ino != sent["a0.md"][0]
    text = archived.read_text()
    assert "routed: " in text and "delivered_to: [bob]" in text


def test_a_file_set_aside_and_linked_is_put_back_as_a_file_of_its_own(tmp_path: Path) -> None:
    """What a pass killed after its link leaves (the outbox file aside, one file with the
    inbox copy), put back by the recovery: the outbox gets a copy of its own."""
    root = tmp_path / "envoy"
    for name in ("alice", "bob"):
        mailbox.init_mailbox(root / name, "v2")
    [path] = send(root, "alice", [("m1", ("bob",))])
    box = Mailbox(root / "alice")
    entry = mailbox.read_outbox(box, "alice").entries[0]
    aside = mailbox.set_aside_outbox_files(box, [entry])
    assert not path.exists()
    delivered = Mailbox(root / "bob").inbox_dir / "2026-03-01T10-00-00Z_alice_m1.md"
    os.link(box.outbox_dir / aside[entry.source], delivered)
    mailbox.recover_mailbox(box, lambda _entry: False, "alice")
    assert path.read_bytes() == delivered.read_bytes()
    assert path.stat().st_ino != delivered.stat().st_ino
    assert path.stat().st_nlink == delivered.stat().st_nlink == 1
    path.write_text(path.read_text().replace("token: m1", "token: changed"))  # an edit reaches one file only
    assert "token: m1" in delivered.read_text()
    route(root)
    assert [e.key for e in mailbox.read_inbox(Mailbox(root / "bob"))] == ["m1"]


def test_an_outbox_file_changed_before_it_is_set_aside_is_not_linked(tmp_path: Path) -> None:
    """An outbox file that no longer holds what was routed is put back, never linked."""
    root = tmp_path / "envoy"
    for name in ("alice", "bob"):
        mailbox.init_mailbox(root / name, "v2")
    [path] = send(root, "alice", [("m1", ("bob",))])
    box = Mailbox(root / "alice")
    entry = mailbox.read_outbox(box, "alice").entries[0]
    path.write_bytes(path.read_bytes().replace(b"token: m1", b"token: m2"))  # edited in place
    assert mailbox.set_aside_outbox_files(box, [entry]) == {}
    assert path.read_bytes() != entry.raw and "token: m2" in path.read_text()
    assert [p.name for p in box.outbox_dir.iterdir() if ".tmp-" in p.name] == []


def test_an_outbox_file_with_another_name_or_wider_rights_is_written_not_linked(tmp_path: Path) -> None:
    """An inbox copy is never a file the sender could still change through another name, or
    with rights a file the router creates would not have."""
    root = tmp_path / "envoy"
    for name in ("alice", "bob"):
        mailbox.init_mailbox(root / name, "v2")
    kept, wide = send(root, "alice", [("m1", ("bob",)), ("m2", ("bob",))])
    alias = tmp_path / "alias.md"
    os.link(kept, alias)
    wide.chmod(0o666 if fs.new_file_mode() != 0o666 else 0o600)
    wide_inode = wide.stat().st_ino
    route(root)
    inbox = {path.name.rsplit("_", 1)[1]: path for path in Mailbox(root / "bob").inbox_dir.glob("*.md")}
    assert sorted(inbox) == ["m1.md", "m2.md"]
    assert inbox["m1.md"].stat().st_ino != alias.stat().st_ino and inbox["m2.md"].stat().st_ino != wide_inode
    alias.write_text(alias.read_text().replace("token: m1", "token: changed"))
    assert "token: m1" in inbox["m1.md"].read_text()
    assert outcome(root)["alice:outbox"] == [] and outcome(root)["alice:archived"] == ["m1", "m2"]


@pytest.mark.slow  # a routing pass per crash point
@pytest.mark.parametrize("calls", [DURABLE_CALLS, ("renameat2",)], ids=["os-calls", "renameat2"])
def test_a_linked_delivery_killed_at_any_durable_step_loses_and_duplicates_nothing(tmp_path: Path, calls: tuple[str, ...]) -> None:
    """Killed before each durable `os` call, then (a second sweep) before each renameat2: the
    names a batch's files take (`shared_file.create_in_folders`) and the rotation's moves. A
    rotation killed midway can leave the top under its limit with old messages still there:
    they move with the next rotation, so that sweep checks the top's bound, not its emptiness."""
    start = tmp_path / "start"
    scenario(start)
    reference = tmp_path / "reference"
    shutil.copytree(start, reference)
    route(reference)
    route(reference)
    expected = outcome(reference)
    assert expected["bob:inbox"] == ["a0", "a1", "a2"] and expected["carol:inbox"] == ["a2", "a4", "b0", "b2"]
    step = 0
    while True:
        step += 1
        run = tmp_path / f"run-{step}"
        shutil.copytree(start, run)
        crashed = killed_at(step, calls, lambda r=run: route(r))  # type: ignore[misc]
        if crashed:
            killed_at(step, calls, lambda r=run: route(r))  # type: ignore[misc]  # again, during the recovery pass
            # A recovery that lost the journal (a cache) puts every file set aside back: none
            # of them may stay one file with the inbox copy it was linked as.
            for name in ("alice", "bob"):
                box = Mailbox(run / name)
                mailbox.recover_mailbox(box, lambda _entry: False, name)
                assert [p.name for p in box.outbox_dir.glob("*.md") if p.stat().st_nlink > 1] == [], f"shared after a kill at step {step}"
        route(run)
        route(run)
        found, want = outcome(run), dict(expected)
        if "renameat2" in calls:
            for name in ("alice", "bob"):
                assert len(found.pop(f"{name}:unrotated")) <= TOP, f"{name}'s archive top past its limit after a kill at renameat2 {step}"
                del want[f"{name}:unrotated"]
        assert found == want, f"outcome differs after a kill at durable step {step}"
        shutil.rmtree(run)
        if not crashed:
            break
    assert step > (20 if calls == DURABLE_CALLS else 10)  # the scenario really exercised many crash points

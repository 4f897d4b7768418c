"""Routing between real workspaces in tmp_path: delivery, archive, dead letters, registry, recovery."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from moss_files.foundation.errors import InvalidDocument, InvalidRequest
from needlecast import mailbox, shared_file
from needlecast.mailbox import Mailbox
from needlecast.message import Message, render_block
from needlecast.router import Router
from needlecast.sleeves import load_directory

NOW = datetime(2026, 1, 21, 10, 0, 0, tzinfo=UTC)


def clock() -> datetime:
    return NOW


def envoy(tmp_path: Path, layouts: dict[str, str]) -> Path:
    root = tmp_path / "envoy"
    root.mkdir()
    for name, layout in layouts.items():
        mailbox.init_mailbox(root / name, layout)
    return root


def inbox_of(root: Path, name: str) -> list[Message]:
    return [e.message for e in mailbox.read_inbox(Mailbox(root / name)) if e.message is not None]


def bodies(root: Path, name: str) -> list[str]:
    return [m.body.strip() for m in inbox_of(root, name) if m.sender != "needlecast"]


_sent = [0]


def send(root: Path, sender: str, to: tuple[str, ...], body: str, ident: str | None = None, **extra: str) -> None:
    # Distinct times, so file-per-message inboxes (sorted by time) list them in sending order.
    _sent[0] += 1
    stamp = f"2026-01-21T09:{_sent[0] // 60 % 60:02d}:{_sent[0] % 60:02d}Z"
    message = Message(id=ident or f"m-{body}", sender=sender, to=to, type="task", time=stamp, body=body, extra=extra)
    mailbox.append_outbox(Mailbox(root / sender), message, NOW)


def route(root: Path) -> dict[str, object]:
    from needlecast.router import report_to_dict

    return report_to_dict(Router(root, clock=clock).route_all())


@pytest.mark.parametrize(("sender_layout", "recipient_layout"), [("v1", "v1"), ("v1", "v2"), ("v2", "v1"), ("v2", "v2")])
def test_delivers_once_archives_and_empties_the_outbox(tmp_path: Path, sender_layout: str, recipient_layout: str) -> None:
    root = envoy(tmp_path, {"alice": sender_layout, "bob": recipient_layout, "carol": recipient_layout})
    send(root, "alice", ("bob",), "one")
    send(root, "alice", ("bob", "carol"), "two")
    send(root, "alice", ("all",), "three")
    report = route(root)
    assert report["delivered"] == 5 and report["removed"] == 3 and report["problems"] == []
    assert bodies(root, "bob") == ["one", "two", "three"]
    assert bodies(root, "carol") == ["two", "three"]
    assert bodies(root, "alice") == []  # `all` is everyone but the sender
    assert mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries == ()
    archived = Mailbox(root / "alice")
    text = archived.archive_file.read_text() if sender_layout == "v1" else "".join(p.read_text() for p in sorted(archived.archive_dir.iterdir()))
    assert text.count("routed: 2026-01-21T10:00:00Z") == 3
    assert "delivered_to: [bob, carol]" in text
    # A second pass finds nothing to do and changes nothing.
    before = {p: p.read_bytes() for p in root.rglob("*.md")}
    assert route(root)["delivered"] == 0
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == before


def test_one_pass_routes_a_burst_of_many_senders_once(tmp_path: Path) -> None:
    # Enough files for the grouped fsyncs and for one syncfs (more than 256 new files).
    names = [f"s{n}" for n in range(6)]
    root = envoy(tmp_path, dict.fromkeys(names, "v2"))
    expected: dict[str, list[str]] = {name: [] for name in names}
    for number in range(180):
        sender, recipient = names[number % 6], names[(number * 5 + 1) % 6]
        recipient = recipient if recipient != sender else names[(number + 2) % 6]
        send(root, sender, (recipient,), f"b{number}")
        expected[recipient].append(f"b{number}")
    report = route(root)
    assert report["delivered"] == 180 and report["archived"] == 180 and report["removed"] == 180 and report["problems"] == []
    for name in names:
        assert sorted(bodies(root, name)) == sorted(expected[name])
        box = Mailbox(root / name)
        assert mailbox.read_outbox(box, name).entries == ()
        assert len(mailbox.read_archive(box, name)) == sum(1 for number in range(180) if names[number % 6] == name)
        assert not [p.name for p in box.dir.rglob("*") if ".tmp-" in p.name]
    again = route(root)
    assert again["delivered"] == 0 and again["removed"] == 0


def test_an_archive_that_cannot_be_written_keeps_the_messages_until_it_can(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v2", "bob": "v2", "carol": "v2"})
    send(root, "alice", ("bob",), "one")
    send(root, "carol", ("bob",), "two")
    blocked = Mailbox(root / "alice").archive_dir
    blocked.write_text("a file where alice's archive folder belongs\n")
    report = route(root)
    # carol's message is routed in the same pass; alice's waits in her outbox.
    assert bodies(root, "bob") == ["two"]
    assert {p["sleeve"] for p in report["problems"]} == {"alice"}
    assert [e.message.body.strip() for e in mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries if e.message] == ["one"]
    assert mailbox.read_outbox(Mailbox(root / "carol"), "carol").entries == ()
    blocked.unlink()
    report = route(root)
    assert report["delivered"] == 1 and report["archived"] == 1 and report["removed"] == 1 and report["problems"] == []
    assert sorted(bodies(root, "bob")) == ["one", "two"]  # still once each
    assert mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries == ()


def test_envoy_recipient_and_sender_stamping(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1"})
    with open(Mailbox(root / "alice").outbox_file, "a") as handle:
        handle.write("---\nfrom: someone-else\nto: envoy\ntype: blocked\n---\nneed a key\n")
    route(root)
    (got,) = inbox_of(root, ".")
    assert got.sender == "alice"  # the router knows who really sent it
    assert got.time == "2026-01-21T10:00:00Z"  # filled in when the writer gave none
    assert got.id is not None and got.id.startswith("nc-")


def test_id_less_blocks_keep_their_identity_across_retries(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    outbox = Mailbox(root / "alice").outbox_file
    with open(outbox, "a") as handle:
        handle.write("---\nto: bob\n---\nsame words\n\n---\nto: bob\n---\nsame words\n")
    route(root)
    first_ids = [m.id for m in inbox_of(root, "bob")]
    assert len(first_ids) == 2 and len(set(first_ids)) == 2
    # The same two blocks put back (an editor's stale save) are recognised, not re-delivered.
    with open(outbox, "a") as handle:
        handle.write("---\nto: bob\n---\nsame words\n\n---\nto: bob\n---\nsame words\n")
    route(root)
    assert [m.id for m in inbox_of(root, "bob")] == first_ids


def test_a_later_twin_keeps_its_own_id_when_the_first_leaves(tmp_path: Path) -> None:
    """An id-less block that waits (its recipient is down) keeps its rank-derived id when an
    identical block before it is routed and removed."""
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    registry = root / ".needlecast" / "sleeves.toml"
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text('carol = "missing-carol"\n')
    outbox = Mailbox(root / "alice").outbox_file
    with open(outbox, "a") as handle:
        handle.write("---\nto: bob\n---\nping\n\n---\nto: [bob, carol]\n---\nping\n")
    report = route(root)
    assert report["pending"] == 1 and report["held"][0]["code"] == "SLEEVE_UNAVAILABLE"
    assert len(inbox_of(root, "bob")) == 2
    mailbox.init_mailbox(root / "missing-carol")
    route(root)
    assert len(inbox_of(root, "bob")) == 2
    assert len(inbox_of(root, "missing-carol")) == 1
    assert mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries == ()


def test_unknown_recipient_is_dead_lettered_byte_for_byte_and_bounced(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    block = b"---\nid: q1\nto: [bob, zed]\ntype: question\n---\nhello \xc3\xa9\n\n---\nbody line that looks like a fence\n"
    with open(Mailbox(root / "alice").outbox_file, "ab") as handle:
        handle.write(block)
    report = route(root)
    assert report["dead_letters"] == 1 and report["bounces"] == 1
    assert bodies(root, "bob") == ["hello é\n\n---\nbody line that looks like a fence"]
    (letter,) = mailbox.read_dead_letters(Mailbox(root / "alice"))
    assert letter.raw == block
    assert letter.meta["code"] == "UNKNOWN_RECIPIENT" and letter.meta["recipients"] == ["zed"]
    (notice,) = inbox_of(root, "alice")
    assert notice.sender == "needlecast" and notice.type == "bounce" and notice.extra["reply_to"] == "q1"
    assert "zed" in notice.body and letter.path.name in notice.body
    route(root)  # nothing doubles on a second pass
    assert len(mailbox.read_dead_letters(Mailbox(root / "alice"))) == 1
    assert len(inbox_of(root, "alice")) == 1


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_unparseable_blocks_are_dead_lettered_not_skipped(tmp_path: Path, layout: str) -> None:
    root = envoy(tmp_path, {"alice": layout, "bob": "v1"})
    box = Mailbox(root / "alice")
    bad = b"---\nto: [bob\ntype: task\n---\nbroken header\n"
    if layout == "v1":
        with open(box.outbox_file, "ab") as handle:
            handle.write(bad + b"\n---\nto: bob\n---\nfine\n")
    else:
        (box.outbox_dir / "2026-01-21T09-00-00Z_bad.md").write_bytes(bad)
        (box.outbox_dir / "2026-01-21T09-00-01Z_nul.md").write_bytes(b"---\nto: bob\n---\n\x00binary\n")
        (box.outbox_dir / "2026-01-21T09-00-02Z_ok.md").write_bytes(b"---\nto: bob\n---\nfine\n")
    report = route(root)
    letters = mailbox.read_dead_letters(box)
    assert {letter.meta["code"] for letter in letters} == ({"FRONTMATTER_SYNTAX"} if layout == "v1" else {"FRONTMATTER_SYNTAX", "BINARY_FILE"})
    # The exact bytes the file held for that block (in v1, up to the next block's fence).
    assert (bad + b"\n" if layout == "v1" else bad) in [letter.raw for letter in letters]
    assert bodies(root, "bob") == ["fine"]
    assert report["bounces"] == len(letters)
    assert mailbox.read_outbox(box, "alice").entries == ()


def test_only_the_bad_block_of_an_outbox_is_dead_lettered(tmp_path: Path) -> None:
    """A NUL byte or bytes that are not UTF-8 in one block cost that block alone: the blocks
    beside it are delivered (once), the bad ones kept byte for byte with a bounce each."""
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    box = Mailbox(root / "alice")
    nul = b"---\nid: n1\nto: bob\n---\nhas a \x00 byte\n\n"
    latin = b"---\nid: l1\nto: bob\n---\n\xff\xfe latin-1 bytes\n\n"
    good = [b"---\nid: g%d\nto: bob\n---\nfine %d\n\n" % (n, n) for n in range(3)]
    box.outbox_file.write_bytes(good[0] + nul + good[1] + latin + good[2])
    report = route(root)
    assert bodies(root, "bob") == ["fine 0", "fine 1", "fine 2"]
    letters = {letter.meta["code"]: letter for letter in mailbox.read_dead_letters(box)}
    assert set(letters) == {"BINARY_FILE", "INVALID_ENCODING"}
    assert letters["BINARY_FILE"].raw == nul and letters["INVALID_ENCODING"].raw == latin
    assert letters["BINARY_FILE"].meta["line"] == 7 and letters["INVALID_ENCODING"].meta["line"] == 19  # where each block starts
    # Emptied by the router's rewrite, which adds no format marker (Protectorate's tools read it too).
    assert report["bounces"] == 2 and box.outbox_file.read_bytes() == b""
    route(root)
    assert bodies(root, "bob") == ["fine 0", "fine 1", "fine 2"] and len(mailbox.read_dead_letters(box)) == 2


def test_a_bad_block_in_an_inbox_costs_that_block_alone(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    inbox = Mailbox(root / "bob").inbox_file
    inbox.write_bytes(inbox.read_bytes() + b"\n---\nid: x1\nfrom: carol\nto: bob\n---\n\xff bad\n\n")
    send(root, "alice", ("bob",), "after the bad block")
    route(root)
    entries = mailbox.read_inbox(Mailbox(root / "bob"))
    assert [e.problem.code for e in entries if e.problem is not None] == ["INVALID_ENCODING"]
    assert bodies(root, "bob") == ["after the bad block"]
    assert b"\xff bad" in inbox.read_bytes()  # kept as it was


def test_messages_over_the_size_limit_are_refused_and_dead_lettered(tmp_path: Path) -> None:
    """Two 5 MB messages once grew bob's inbox past its reader's limit, after which bob could
    read nothing and every later delivery to him was held."""
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1", "carol": "v2"})
    huge = "x" * (5 * 1024 * 1024)
    with pytest.raises(InvalidRequest) as caught:
        send(root, "alice", ("bob",), huge)
    assert caught.value.code == "MESSAGE_TOO_LARGE" and caught.value.status == 413
    box = Mailbox(root / "alice")
    for number in range(2):  # written by hand, or by an older version: the router refuses them
        with open(box.outbox_file, "a") as handle:
            handle.write(f"---\nid: big{number}\nto: bob\n---\n{huge}\n\n")
    (Mailbox(root / "carol").outbox_dir / "2026-01-21T09-00-00Z_big.md").write_text(f"---\nid: big2\nto: bob\n---\n{huge}\n")
    send(root, "alice", ("bob",), "small and fine")
    report = route(root)
    assert bodies(root, "bob") == ["small and fine"]
    codes = [letter.meta["code"] for name in ("alice", "carol") for letter in mailbox.read_dead_letters(Mailbox(root / name))]
    assert codes == ["MESSAGE_TOO_LARGE"] * 3 and report["bounces"] == 3
    send(root, "alice", ("bob",), "later ones still arrive")
    route(root)
    assert bodies(root, "bob") == ["small and fine", "later ones still arrive"]
    assert Mailbox(root / "bob").inbox_file.stat().st_size < 100_000


def test_a_full_v1_inbox_holds_deliveries_and_stays_readable(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    inbox = Mailbox(root / "bob").inbox_file
    filler = b"<!-- " + b"f" * (mailbox.MAX_MAILBOX_BYTES - 200_000) + b" -->\n"
    inbox.write_bytes(inbox.read_bytes() + filler)
    send(root, "alice", ("bob",), "y" * 300_000, ident="too-many")
    report = route(root)
    assert report["delivered"] == 0 and [held["code"] for held in report["held"]] == ["INBOX_FULL"]
    assert mailbox.read_inbox(Mailbox(root / "bob")) == []  # still readable: not grown past the limit
    assert len(mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries) == 1  # it waits
    inbox.write_text("# Inbox\n")  # bob clears his inbox
    route(root)
    assert [m.id for m in inbox_of(root, "bob")] == ["too-many"]


def test_reused_id_with_different_content_is_a_dead_letter(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    send(root, "alice", ("bob",), "original", ident="dup")
    route(root)
    send(root, "alice", ("bob",), "impostor", ident="dup")
    route(root)
    assert bodies(root, "bob") == ["original"]
    (letter,) = mailbox.read_dead_letters(Mailbox(root / "alice"))
    assert letter.meta["code"] == "DUPLICATE_MESSAGE_ID"


def test_losing_the_journal_does_not_duplicate(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v2"})
    send(root, "alice", ("bob",), "kept")
    box = Mailbox(root / "alice")
    before = box.outbox_file.read_bytes()
    route(root)
    box.journal.unlink()
    box.outbox_file.write_bytes(before)  # as if the router died before removing it
    route(root)
    assert bodies(root, "bob") == ["kept"]


def test_registry_overrides_and_remote_entries(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    elsewhere = root / "work" / "dave-repo"  # deeper than a child folder, still inside the root
    mailbox.init_mailbox(elsewhere)
    registry = root / ".needlecast" / "sleeves.toml"
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(f'dave = "{elsewhere}"\n\n[remote-eve]\nurl = "http://10.0.0.9:7471"\ntoken_env = "EVE_TOKEN"\n')
    directory = load_directory(root)
    assert set(directory.sleeves) == {"envoy", "alice", "bob", "dave", "remote-eve"}
    assert directory.sleeves["remote-eve"].remote
    send(root, "alice", ("dave",), "far")
    route(root)
    assert [m.body.strip() for m in inbox_of(elsewhere.parent, elsewhere.name)] == ["far"]


@pytest.mark.parametrize("entry", ['eve = "../outside"', 'eve = "{outside}"', 'eve = "linked"'])
def test_a_sleeve_outside_the_envoy_root_is_never_delivered_to(tmp_path: Path, entry: str) -> None:
    root = envoy(tmp_path, {"alice": "v1"})
    outside = tmp_path / "outside"
    mailbox.init_mailbox(outside)
    (root / "linked").symlink_to(outside, target_is_directory=True)  # a link planted in the root
    before = outside.joinpath(".needlecast", "inbox.md").read_bytes()
    registry = root / ".needlecast" / "sleeves.toml"
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(f"# sleeves\n{entry.format(outside=outside)}\n")
    directory = load_directory(root)
    problem = directory.sleeves["eve"].problem
    assert problem is not None and problem.code == "OUTSIDE_ROOT" and problem.path == str(registry) and problem.line == 2
    linked = directory.sleeves["linked"].problem  # found as a child folder: refused the same way
    assert linked is not None and linked.code == "OUTSIDE_ROOT"
    send(root, "alice", ("eve",), "secret plans")
    send(root, "alice", ("linked",), "more plans")
    report = route(root)
    assert report["delivered"] == 0 and {held["code"] for held in report["held"]} == {"OUTSIDE_ROOT"}
    assert outside.joinpath(".needlecast", "inbox.md").read_bytes() == before
    assert len(mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries) == 2  # they wait


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("alice = \n", 1),
        ('ok = "a"\n[bad name]\npath = "x"\n', None),
        ('[bob]\npath = "a"\nurl = "http://x"\n', 1),
        ('[bob]\ncolour = "red"\npath = "a"\n', 1),
        ('all = "somewhere"\n', 1),
    ],
)
def test_bad_registry_is_a_clear_error(tmp_path: Path, text: str, line: int | None) -> None:
    root = envoy(tmp_path, {"alice": "v1"})
    registry = root / ".needlecast" / "sleeves.toml"
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(text)
    with pytest.raises(InvalidDocument) as caught:
        load_directory(root)
    assert caught.value.code == "REGISTRY_INVALID"
    assert caught.value.path == str(registry)
    if line is not None:
        assert caught.value.line == line


def test_interrupted_rewrite_is_folded_back(tmp_path: Path) -> None:
    """A `ready` or `prev` temporary left by a killed rewrite loses nothing and doubles nothing."""
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    send(root, "alice", ("bob",), "routed-before")
    route(root)
    box = Mailbox(root / "alice")
    # What a router killed between the exchange and the clean-up leaves: the displaced file,
    # holding the routed block plus a block an agent appended meanwhile.
    displaced = box.outbox_file.read_bytes() + b"---\nid: late\nto: bob\n---\nappended during the swap\n"
    leftover = box.dir / f".outbox.md.tmp-prev-{os.getpid()}-0badc0de"
    archived = mailbox.read_inbox(Mailbox(root / "bob"))[0].message
    assert archived is not None
    routed_block = render_block(archived.__class__(**{**{f: getattr(archived, f) for f in archived.__slots__}, "capitalised": False})).encode()
    leftover.write_bytes(displaced + b"\n" + routed_block)
    route(root)
    assert not leftover.exists()
    assert bodies(root, "bob") == ["routed-before", "appended during the swap"]


def test_inbox_with_a_broken_block_still_takes_deliveries(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    inbox = Mailbox(root / "bob").inbox_file
    with open(inbox, "a") as handle:
        handle.write("---\nfrom: x\nto: [bob\n---\nhand-made mess\n")
    send(root, "alice", ("bob",), "still arrives")
    route(root)
    entries = mailbox.read_inbox(Mailbox(root / "bob"))
    assert [e.problem.code for e in entries if e.problem is not None] == ["FRONTMATTER_SYNTAX"]
    assert "hand-made mess" in inbox.read_text()  # the user's bytes stay
    assert bodies(root, "bob") == ["still arrives"]


EDITOR = textwrap.dedent(
    """
    import os, sys, time
    path, count = sys.argv[1], int(sys.argv[2])
    for number in range(count):
        # Read the whole file, add a block, save through a temporary and a rename, the way
        # editors and agents' write tools do; no lock is taken.
        with open(path, "rb") as handle:
            data = handle.read()
        if data and not data.endswith(b"\\n"):
            data += b"\\n"
        data += f"\\n---\\nid: ed-{number}\\nto: bob\\ntype: task\\n---\\nedit {number}\\n".encode()
        temp = path + ".swp"
        with open(temp, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
        time.sleep(0.002)
    """
)


def test_editor_rewrites_racing_the_router_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    outbox = Mailbox(root / "alice").outbox_file
    count = 150
    editor = subprocess.Popen([sys.executable, "-c", EDITOR, str(outbox), str(count)])
    router = Router(root, clock=clock)
    try:
        while editor.poll() is None:
            router.route_all()
    finally:
        editor.wait(timeout=60)
    for _ in range(3):
        router.route_all()
    ids = [m.id for m in inbox_of(root, "bob")]
    assert sorted(ids) == sorted(f"ed-{n}" for n in range(count))  # each exactly once
    assert mailbox.read_outbox(Mailbox(root / "alice"), "alice").entries == ()
    assert not [p for p in outbox.parent.iterdir() if ".tmp-" in p.name]


def _editor_save(path: Path, data: bytes) -> None:
    """Save `data` the way an editor does: a temporary, then a rename over the file."""
    temp = path.with_name(path.name + ".swp")
    temp.write_bytes(data)
    os.replace(temp, path)


def _outbox_block(ident: str) -> bytes:
    return f"\n---\nid: {ident}\nto: bob\ntype: task\n---\n{ident}\n".encode()


def _side_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".tmp-" in p.name]


def test_a_block_folded_back_survives_an_editor_save_that_raced_the_fold(tmp_path: Path) -> None:
    # The interleaving behind a rare loss in the editor race above: an editor saves while the
    # router rewrites the outbox (its version is displaced, and its new block folded back in),
    # and then saves again from a read made before that fold, writing the folded block away.
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    box = Mailbox(root / "alice")
    outbox = box.outbox_file
    base = outbox.read_bytes() + _outbox_block("a")
    outbox.write_bytes(base)
    read_before_fold: list[bytes] = []

    def transform(data: bytes | None) -> bytes | None:
        assert data is not None
        read_before_fold.append(data)
        _editor_save(outbox, data + _outbox_block("b"))  # lands between our read and our swap
        return data + b"\n"

    never_done = lambda entry: False  # noqa: E731 - nothing was routed yet
    merge, settled = mailbox.outbox_merge(never_done, "alice"), mailbox.outbox_settled(never_done, "alice")
    assert shared_file.rewrite(outbox, transform, merge, settled=settled)
    assert b"id: b" in outbox.read_bytes()  # folded back in
    assert len(_side_files(outbox.parent)) == 1  # and kept aside: b is not routed yet

    _editor_save(outbox, read_before_fold[0] + _outbox_block("c"))  # made from a read without b
    assert b"id: b" not in outbox.read_bytes()
    for _ in range(3):
        route(root)
    assert sorted(m.id for m in inbox_of(root, "bob")) == ["a", "b", "c"]  # each exactly once
    assert mailbox.read_outbox(box, "alice").entries == ()
    assert _side_files(outbox.parent) == []  # routed, so the displaced version went


def test_an_unsettled_displaced_outbox_goes_after_its_grace_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = envoy(tmp_path, {"alice": "v1"})
    outbox = Mailbox(root / "alice").outbox_file
    outbox.write_bytes(outbox.read_bytes() + _outbox_block("held"))  # to bob, who is not a sleeve
    merge, settled = mailbox.outbox_merge(lambda entry: False, "alice"), mailbox.outbox_settled(lambda entry: False, "alice")

    def transform(data: bytes | None) -> bytes | None:
        assert data is not None
        if not _side_files(outbox.parent):
            _editor_save(outbox, data + _outbox_block("late"))
        return data + b"\n"

    shared_file.rewrite(outbox, transform, merge, settled=settled)
    assert len(_side_files(outbox.parent)) == 1
    shared_file.fold_leftovers(outbox, merge, settled)
    assert len(_side_files(outbox.parent)) == 1  # its messages are not routed
    monkeypatch.setattr(shared_file, "KEEP_UNSETTLED_SECONDS", 0.0)
    shared_file.fold_leftovers(outbox, merge, settled)
    assert _side_files(outbox.parent) == []
    text = outbox.read_bytes()
    assert text.count(b"id: held") == 1 and text.count(b"id: late") == 1  # nothing lost, nothing doubled


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "fallback"])
def test_rewrite_keeps_an_append_made_between_read_and_swap(tmp_path: Path, exchange: bool) -> None:
    path = tmp_path / "outbox.md"
    path.write_bytes(b"A\nB\n")

    def transform(data: bytes | None) -> bytes | None:
        assert data is not None
        if b"late" not in data:
            with open(path, "ab") as handle:  # an agent appends while the router works
                handle.write(b"late\n")
        return data.replace(b"A\n", b"")

    assert shared_file.rewrite(path, transform, mailbox.inbox_merge, exchange=exchange)
    assert path.read_bytes() == b"B\nlate\n"
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "fallback"])
def test_rewrite_carries_over_a_half_written_line_as_it_is(tmp_path: Path, exchange: bool) -> None:
    path = tmp_path / "outbox.md"
    path.write_bytes(b"A\nB\n")

    def transform(data: bytes | None) -> bytes | None:
        assert data is not None
        if b"hal" not in data:
            with open(path, "ab") as handle:  # a writer between two write calls
                handle.write(b"hal")
        return data.replace(b"A\n", b"")

    assert shared_file.rewrite(path, transform, mailbox.inbox_merge, exchange=exchange)
    with open(path, "ab") as handle:  # the writer's second write lands after it, in the same line
        handle.write(b"f a line\n")
    assert path.read_bytes() == b"B\nhalf a line\n"


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "fallback"])
def test_rewrite_keeps_an_editor_save_made_between_read_and_swap(tmp_path: Path, exchange: bool) -> None:
    path = tmp_path / "inbox.md"
    first = render_block(Message(id="1", sender="a", to=("b",), body="one"))
    second = render_block(Message(id="2", sender="a", to=("b",), body="two"))
    path.write_text(first)
    saves = []

    def transform(data: bytes | None) -> bytes | None:
        assert data is not None
        if not saves:  # an editor saves a new version through a temporary and a rename
            temp = tmp_path / "inbox.md~"
            temp.write_text(first + second)
            os.replace(temp, path)
            saves.append(1)
        return data + render_block(Message(id="3", sender="a", to=("b",), body="three")).encode()

    shared_file.rewrite(path, transform, mailbox.inbox_merge, exchange=exchange)
    ids = sorted(m.id for m in (e.message for e in mailbox.scan_mailfile(path.read_bytes(), path, "")[0]) if m is not None)
    assert ids == ["1", "2", "3"]


def _blocks(*idents: str) -> bytes:
    return b"".join(b"---\nid: %s\nfrom: p\nto: bob\n---\nbody of %s\n\n" % (ident.encode(), ident.encode()) for ident in idents)


def test_a_merge_is_brought_into_a_mailbox_file_with_what_was_written_since(tmp_path: Path) -> None:
    """What a git sync does with a merge's version of a shared file (`apply_merged`): a file
    unchanged since the sync's commit takes the merge; one written since keeps that writing
    (appends, and a routing pass's removals) and gains what the merge brought."""
    box = mailbox.init_mailbox(tmp_path / "w")
    head = box.inbox_file.read_bytes()
    base = head + _blocks("a", "b")
    merged = base + _blocks("theirs")
    box.inbox_file.write_bytes(base)
    mailbox.apply_merged(box.inbox_file, base, merged)
    assert box.inbox_file.read_bytes() == merged
    # Appended since the commit (a delivery): kept after the merge's blocks.
    box.inbox_file.write_bytes(base + _blocks("late"))
    mailbox.apply_merged(box.inbox_file, base, merged)
    assert box.inbox_file.read_bytes() == merged + _blocks("late")
    # A routing pass removed `a` from the outbox and a send appended `c`: both stay so.
    box.outbox_file.write_bytes(head + _blocks("b", "c"))
    mailbox.apply_merged(box.outbox_file, head + _blocks("a", "b"), head + _blocks("a", "b", "theirs"))
    assert [e.key for e in mailbox.read_outbox(box, "alice").entries] == ["b", "c", "theirs"]
    # read.log merges as git's union driver does.
    box.read_log.write_bytes(b'{"id": "a"}\n{"id": "mine"}\n')
    mailbox.apply_merged(box.read_log, b'{"id": "a"}\n', b'{"id": "a"}\n{"id": "theirs"}\n')
    assert box.read_log.read_bytes() == b'{"id": "a"}\n{"id": "theirs"}\n{"id": "mine"}\n'


def test_bringing_a_merge_in_leaves_the_routers_kept_outbox_alone(tmp_path: Path) -> None:
    """The router keeps a displaced outbox version until its messages are routed, and folds it
    back by what its journal knows; the sync, which cannot know that, must not fold it (it
    would bring routed messages back into the outbox)."""
    box = mailbox.init_mailbox(tmp_path / "w")
    head = box.outbox_file.read_bytes()
    kept = box.dir / ".outbox.md.tmp-prev-4242-0a1b2c3d"
    kept.write_bytes(head + _blocks("routed-already"))
    mailbox.apply_merged(box.outbox_file, head, head + _blocks("theirs"))
    assert [e.key for e in mailbox.read_outbox(box, "alice").entries] == ["theirs"]
    assert kept.exists()


def test_an_empty_message_file_just_created_is_a_write_in_progress(tmp_path: Path) -> None:
    """git checks a pulled file out by creating it empty, then writing it: a router that read
    the empty file then dead-lettered a message that was on its way (the git-sync storm found
    it). A fresh empty file waits, as a fresh v1 tail without a line break does; an old one is
    dead-lettered."""
    root = envoy(tmp_path, {"alice": "v2", "bob": "v2"})
    outbox = Mailbox(root / "alice").outbox_dir
    arriving = outbox / "2026-01-21T09-00-00Z_m-arriving.md"
    arriving.write_bytes(b"")
    report = route(root)
    assert (report["dead_letters"], report["unsettled"]) == (0, True)
    arriving.write_text("---\nid: m-arriving\nfrom: alice\nto: bob\n---\narrived\n")
    assert route(root)["delivered"] == 1
    assert bodies(root, "bob") == ["arrived"]
    abandoned = outbox / "2026-01-21T09-00-01Z_m-abandoned.md"
    abandoned.write_bytes(b"")
    old = abandoned.stat().st_mtime - 2 * mailbox.TAIL_SETTLE_SECONDS
    os.utime(abandoned, (old, old))
    report = route(root)
    assert (report["dead_letters"], report["unsettled"]) == (1, False)
    assert [letter.meta["code"] for letter in mailbox.read_dead_letters(Mailbox(root / "alice"))] == ["MESSAGE_INVALID"]


def test_a_fresh_unclosed_header_at_the_end_of_an_outbox_waits_for_the_rest(tmp_path: Path) -> None:
    """An outbox that ends in a header without its closing `---` may be a writer between two
    writes: left alone a moment (as a tail without a line break is), then dead-lettered."""
    root = envoy(tmp_path, {"alice": "v1", "bob": "v1"})
    box = Mailbox(root / "alice")
    with open(box.outbox_file, "a") as handle:
        handle.write("---\nid: m-half\nto: bob\n")
    report = route(root)
    assert (report["dead_letters"], report["unsettled"]) == (0, True)
    with open(box.outbox_file, "a") as handle:
        handle.write("---\nthe rest arrived\n")
    assert route(root)["delivered"] == 1 and bodies(root, "bob") == ["the rest arrived"]
    with open(box.outbox_file, "a") as handle:
        handle.write("---\nid: m-never\nto: bob\n")
    old = box.outbox_file.stat().st_mtime - 2 * mailbox.TAIL_SETTLE_SECONDS
    os.utime(box.outbox_file, (old, old))
    report = route(root)
    assert (report["dead_letters"], report["unsettled"]) == (1, False)
    assert [letter.meta["code"] for letter in mailbox.read_dead_letters(box)] == ["FRONTMATTER_UNCLOSED"]

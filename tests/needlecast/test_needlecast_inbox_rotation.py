"""A recipient's inbox has a bounded working set (issue 29): once its top is full, a reader's
`needlecast read` moves the read messages over a week old into month folders and read.log
drops their marks (`mailbox.rotate_inbox`; docs/formats.md, "Rotation"). What the inbox says
(every message once, and which are read) is the same before and after, after a kill at any
durable step, after a retried delivery and after a git merge with a clone that kept reading."""

from __future__ import annotations

import json
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import run_cli
from helpers import killed_at

from moss_files.foundation.context import Context
from needlecast import layout, mailbox, service
from needlecast.mailbox import Mailbox
from needlecast.message import Message

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
SENDERS = ("amy", "ben", "cal")
DURABLE_CALLS = ("fsync", "write", "rename", "replace", "link", "unlink", "renameat2")


def message(number: int, *, days_ago: float) -> Message:
    moment = NOW - timedelta(days=days_ago)
    return Message(
        id=f"m{number:04d}", sender=SENDERS[number % 3], to=("me",), time=moment.strftime("%Y-%m-%dT%H:%M:%SZ"), body=f"note {number} on the deploy\n"
    )


def filled_inbox(root: Path, count: int, *, read_below: int, recent_from: int) -> list[Message]:
    """A file-per-message inbox of `count` messages, one every few hours; those numbered from
    `recent_from` on arrived in the last week; those below `read_below` are marked read."""
    box = mailbox.init_mailbox(root, "v2")
    messages = [message(n, days_ago=3.0 if n >= recent_from else 60.0 - n * 0.1) for n in range(count)]
    mailbox.deliver(box, messages, NOW)
    for item in messages[:read_below]:
        mailbox.mark_read(box, item.sender or "", item.id or "", NOW - timedelta(days=1))
    return messages


def what_it_says(root: Path) -> dict[tuple[str, str], tuple[bool, str]]:
    """Every message of the inbox: (from, id) -> (read, body); fails on a message listed twice."""
    rows = service.list_inbox(Context(root))["messages"]
    said = {(row["message"]["from"], row["key"]): (row["read"], row["message"]["body"]) for row in rows}
    assert len(said) == len(rows), "a message is listed twice"
    return said


def top_names(root: Path) -> list[str]:
    return mailbox.message_names(Mailbox(root).inbox_dir)


def marked(root: Path) -> set[tuple[str, str]]:
    return mailbox.read_marks(Mailbox(root))


def test_a_read_moves_read_messages_over_a_week_old_out_of_a_full_top_and_the_inbox_says_the_same(tmp_path: Path) -> None:
    root = tmp_path / "me"
    filled_inbox(root, 300, read_below=250, recent_from=280)
    before = what_it_says(root)
    unread_before = service.list_inbox(Context(root), unread=True)

    # The reader reads an old unread message: its mark lets the rotation run.
    answer = service.read_message(Context(root, clock=lambda: NOW), key="m0260")
    assert answer["read"] is True

    box = Mailbox(root)
    names = top_names(root)
    # The top keeps the unread messages (250..279 but the one just read) and the last week's (280..299).
    assert sorted(int(name.rsplit("_m", 1)[1][:-3]) for name in names) == [n for n in range(250, 300) if n != 260]
    months = sorted(path.parent.name for path in mailbox.rotated_inbox_files(box))
    assert len(months) == 251 and set(months) == {"2026-01", "2026-02"}
    # read.log keeps no mark of a moved message, and every mark of the top.
    assert marked(root) == set()
    after = what_it_says(root)
    assert after == {**before, ("cal", "m0260"): (True, before[("cal", "m0260")][1])}
    assert service.list_inbox(Context(root), unread=True)["messages"] == [row for row in unread_before["messages"] if row["key"] != "m0260"]
    # A rotated message is still found by its id, as read, and reading it again marks nothing.
    again = service.read_message(Context(root, clock=lambda: NOW), key="m0007")
    assert again["read"] is True and again["source"] == "2026-01/2026-01-20T04-48-00Z_ben_m0007.md"
    assert marked(root) == set()
    # The index reads rotated messages too.
    assert sum(1 for where, _entry in service.iter_messages(root) if where == "inbox") == 300


def test_a_top_within_its_bound_and_recent_read_mail_stay_where_they_are(tmp_path: Path) -> None:
    small = tmp_path / "small"
    filled_inbox(small, 40, read_below=39, recent_from=40)
    service.read_message(Context(small, clock=lambda: NOW), key="m0039")
    assert len(top_names(small)) == 40 and mailbox.rotated_inbox_files(Mailbox(small)) == []
    assert len(marked(small)) == 40

    recent = tmp_path / "recent"
    filled_inbox(recent, 300, read_below=299, recent_from=0)  # everything arrived this week
    service.read_message(Context(recent, clock=lambda: NOW), key="m0299")
    assert len(top_names(recent)) == 300 and len(marked(recent)) == 300


def test_a_message_named_otherwise_than_by_its_id_stays_at_the_top(tmp_path: Path) -> None:
    root = tmp_path / "me"
    filled_inbox(root, 300, read_below=300, recent_from=300)
    box = Mailbox(root)
    odd = box.inbox_dir / top_names(root)[0]
    renamed = odd.with_name(odd.name.replace("_m0000.md", "_by-hand.md"))
    odd.rename(renamed)
    assert mailbox.rotate_inbox(box, NOW) == 299
    assert top_names(root) == [renamed.name]
    assert marked(root) == {("amy", "m0000")}
    assert what_it_says(root)[("amy", "m0000")][0] is True


def test_a_retried_delivery_of_a_rotated_message_finds_it_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "me"
    messages = filled_inbox(root, 300, read_below=300, recent_from=300)
    box = Mailbox(root)
    assert mailbox.rotate_inbox(box, NOW) == 300
    changed = Message(**{**{f: getattr(messages[5], f) for f in ("id", "sender", "to", "time")}, "body": "another text under the same id\n"})
    assert mailbox.deliver(box, [messages[5], changed, messages[6]], NOW) == [mailbox.PRESENT, mailbox.CONFLICT, mailbox.PRESENT]
    assert top_names(root) == []
    assert len(what_it_says(root)) == 300


def test_a_rotation_killed_at_any_durable_step_loses_nothing_and_changes_no_answer(tmp_path: Path) -> None:
    """Killed before each of its durable calls (the renames into month folders, their fsyncs,
    read.log's rewrite): every message is listed once with the same read state; the next
    rotation finishes the moves, and the next one that moves anything drops the marks a
    killed one left behind. (A top of 8 keeps the crash points few.)"""
    source = tmp_path / "source"
    filled_inbox(source, 30, read_below=24, recent_from=27)
    expected = what_it_says(source)
    later = [message(n, days_ago=40.0) for n in range(100, 104)]
    step = 0
    while True:
        step += 1
        root = tmp_path / f"run-{step}"
        subprocess.run(["cp", "-a", str(source), str(root)], check=True)
        box = Mailbox(root)
        crashed = killed_at(step, DURABLE_CALLS, lambda b=box: mailbox.rotate_inbox(b, NOW, top_files=8, batch=4))  # type: ignore[misc]
        assert what_it_says(root) == expected, f"after a kill at step {step}"
        mailbox.rotate_inbox(box, NOW, top_files=0, batch=1)
        assert what_it_says(root) == expected, f"after the rotation that follows a kill at step {step}"
        assert len(top_names(root)) == 6, f"after a kill at step {step}"
        rotated = {(SENDERS[n % 3], f"m{n:04d}") for n in range(24)}
        assert marked(root) <= rotated, f"a mark of a message at the top lost after a kill at step {step}"
        mailbox.deliver(box, later, NOW)
        for item in later:
            mailbox.mark_read(box, item.sender or "", item.id or "", NOW)
        assert mailbox.rotate_inbox(box, NOW, top_files=0, batch=1) == 4
        assert marked(root) == set()
        # A rewrite of read.log killed midway left a temporary, which the next rewrite folded back.
        assert [p.name for p in box.dir.rglob("*") if ".tmp" in p.name] == [], f"litter after a kill at step {step}"
        if not crashed:
            break
    assert step > 10  # the moves, the fsyncs and read.log's rewrite were each a crash point


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def test_a_merge_with_a_clone_that_kept_reading_and_receiving_loses_nothing(tmp_path: Path) -> None:
    """Clone A rotates; clone B marks other messages read and receives new mail; after git
    merges, every message is in one place, and every message either clone read is read."""
    origin = tmp_path / "a"
    filled_inbox(origin, 300, read_below=250, recent_from=290)
    (origin / ".gitattributes").write_text("**/.needlecast/read.log merge=union\n")
    git(origin, "init", "-q")
    git(origin, "add", "-A")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "inbox")
    subprocess.run(["git", "clone", "-q", str(origin), str(tmp_path / "b")], check=True)
    clone = tmp_path / "b"

    assert mailbox.rotate_inbox(Mailbox(origin), NOW) == 250
    git(origin, "add", "-A")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "rotated")

    box_b = Mailbox(clone)
    for number in (255, 256):  # marked as a release without rotation did: read.log grows at its end
        mailbox.mark_read(box_b, SENDERS[number % 3], f"m{number:04d}", NOW)
    mailbox.deliver(box_b, [message(900, days_ago=0.5)], NOW)
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "read and received")
    git(clone, "-c", "user.name=t", "-c", "user.email=t@x", "pull", "-q", "--no-rebase", "--no-edit")

    said = what_it_says(clone)
    assert len(said) == 301
    assert {key for key, (read, _body) in said.items() if read} == {(SENDERS[n % 3], f"m{n:04d}") for n in [*range(250), 255, 256]}
    assert "<<<<<<<" not in (clone / ".needlecast" / "read.log").read_text()
    # git's union merge of read.log may bring back the marks A dropped: harmless (those
    # messages are read where they are), and the next rotation that moves anything drops them.
    assert {("amy", "m0255"), ("ben", "m0256")} <= marked(clone)
    for number in range(257, 290):
        mailbox.mark_read(box_b, SENDERS[number % 3], f"m{number:04d}", NOW)
    assert mailbox.rotate_inbox(box_b, NOW, top_files=0) == 35
    assert marked(clone) == set()
    assert what_it_says(clone) == {key: (read or "m0257" <= key[1] < "m0290", body) for key, (read, body) in said.items()}


def test_a_read_log_with_conflict_markers_stops_the_rotation_not_the_read(tmp_path: Path) -> None:
    root = tmp_path / "me"
    filled_inbox(root, 300, read_below=298, recent_from=300)
    log = Mailbox(root).read_log
    log.write_bytes(b"<<<<<<< ours\n" + log.read_bytes() + b"=======\n>>>>>>> theirs\n")
    done = run_cli("needlecast", "read", "m0298", "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["read"] is True and [problem["code"] for problem in answer["problems"]] == ["MERGE_CONFLICT"]
    assert len(top_names(root)) == 300 and mailbox.rotated_inbox_files(Mailbox(root)) == []
    shown = run_cli("needlecast", "read", "m0299", cwd=root)
    assert shown.returncode == 0 and "warning: old mail was not moved out of the inbox" in shown.stderr and "MERGE_CONFLICT" in shown.stderr


def test_switching_a_rotated_inbox_to_layout_v1_keeps_every_message_and_what_is_read(tmp_path: Path) -> None:
    root = tmp_path / "me"
    filled_inbox(root, 300, read_below=250, recent_from=290)
    assert mailbox.rotate_inbox(Mailbox(root), NOW) == 250
    before = {key: read for key, (read, _body) in what_it_says(root).items()}
    switch = layout.apply_switch(root, "v1", NOW, lambda paths: None)
    assert len(switch.marks) == 250
    assert not (root / ".needlecast" / "inbox").exists()
    assert {key: read for key, (read, _body) in what_it_says(root).items()} == before


def test_a_listing_while_a_rotation_runs_names_every_message_once(tmp_path: Path) -> None:
    """The top is listed before the month folders, and a file gone from the top by the time it
    is read is read in its month folder: a message moving meanwhile is never missed nor
    listed twice (`what_it_says` fails on a message listed twice)."""
    root = tmp_path / "me"
    filled_inbox(root, 900, read_below=890, recent_from=900)
    expected = what_it_says(root)
    done = threading.Event()

    def rotate() -> None:
        try:
            mailbox.rotate_inbox(Mailbox(root), NOW)
        finally:
            done.set()

    rotation = threading.Thread(target=rotate)
    rotation.start()
    looks = 0
    while not done.is_set() or looks == 0:
        assert set(what_it_says(root)) == set(expected), f"at look {looks}"
        looks += 1
    rotation.join()
    # Moved: the read messages over a week old (the first 530; the rest arrived this week).
    assert what_it_says(root) == expected and len(mailbox.rotated_inbox_files(Mailbox(root))) == 530


def test_a_large_first_rotation_says_what_it_does_before_it_takes_its_time(tmp_path: Path) -> None:
    root = tmp_path / "me"
    filled_inbox(root, mailbox.LOUD_ROTATION + 10, read_below=mailbox.LOUD_ROTATION + 5, recent_from=mailbox.LOUD_ROTATION + 10)
    done = run_cli("needlecast", "read", f"m{mailbox.LOUD_ROTATION + 6:04d}", "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    assert f"moving up to {mailbox.LOUD_ROTATION + 6:,} read messages over 7 days old into the inbox's month folders (once)" in done.stderr
    assert json.loads(done.stdout)["read"] is True and len(top_names(root)) == 4

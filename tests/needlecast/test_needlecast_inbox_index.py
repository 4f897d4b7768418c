"""The index a process keeps of each v1 inbox it delivers into (`mailbox._INDEXES`): a few bytes
a message, never the inbox's text, and every answer it gives equals a fresh reading of the file:
nothing delivered twice, nothing held back as present that the inbox does not hold."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

from needlecast import mailbox
from needlecast import message as msg
from needlecast.mailbox import Mailbox
from needlecast.message import Message

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def message(sender: str, ident: str, body: str) -> Message:
    return Message(id=ident, sender=sender, to=("bob",), type="task", time="2026-03-01T10:00:00Z", body=body)


def fresh_reading(box: Mailbox) -> dict[tuple[str, str], str]:
    """(from, id) -> digest of every message of the inbox, read whole (the slow answer)."""
    return {(e.message.sender or "", e.key): e.digest for e in mailbox.read_inbox(box) if e.message is not None}


def expected_result(reading: dict[tuple[str, str], str], m: Message) -> str:
    held = reading.get((m.sender or "", m.id or ""))
    if held is None:
        return mailbox.DELIVERED
    return mailbox.PRESENT if held == msg.content_digest(m) else mailbox.CONFLICT


def test_every_delivery_answer_equals_a_fresh_reading_of_the_inbox(tmp_path: Path) -> None:
    box = mailbox.init_mailbox(tmp_path / "bob", "v1")
    rng = random.Random(29)
    sent: list[Message] = []
    for round_number in range(40):
        batch: list[Message] = []
        for _ in range(rng.randint(1, 6)):
            choice = rng.random()
            if sent and choice < 0.25:
                batch.append(rng.choice(sent))  # a repeat (a router's retry after a crash)
            elif sent and choice < 0.35:
                old = rng.choice(sent)
                batch.append(msg.with_changes(old, body=old.body + "changed\n"))  # same id, other content
            else:
                batch.append(message(rng.choice(["alice", "carol"]), f"m{round_number}-{len(batch)}", f"token {round_number}\n"))
        if round_number % 7 == 3:
            # A person appends a block by hand (`>>`), as agents may.
            with open(box.inbox_file, "a") as handle:
                handle.write(f"\n---\nid: hand-{round_number}\nfrom: dave\nto: bob\n---\nby hand\n")
        if round_number % 11 == 5:
            # An editor rewrites the file in place, deleting a message in the middle.
            blocks = box.inbox_file.read_text().split("\n---\nid: ")
            if len(blocks) > 3:
                del blocks[2]
                box.inbox_file.write_text("\n---\nid: ".join(blocks))
        reading = fresh_reading(box)
        seen: dict[tuple[str, str], str] = {}
        wanted = []
        for m in batch:
            identity = (m.sender or "", m.id or "")
            if identity in seen:  # twice in one batch: the first one decides
                wanted.append(mailbox.PRESENT if seen[identity] == msg.content_digest(m) else mailbox.CONFLICT)
                continue
            wanted.append(expected_result(reading, m))
            if wanted[-1] == mailbox.DELIVERED:
                seen[identity] = msg.content_digest(m)
        assert mailbox.deliver(box, batch, NOW) == wanted, f"round {round_number}"
        sent.extend(m for m, result in zip(batch, wanted, strict=True) if result == mailbox.DELIVERED)
    # Each message is in the inbox once.
    keys = [(e.message.sender, e.key) for e in mailbox.read_inbox(box) if e.message is not None]
    assert len(keys) == len(set(keys))
    # The index holds no copy of the inbox: a few numbers a message.
    index = mailbox._INDEXES[box.inbox_file]
    assert not any(isinstance(getattr(index, name), str) for name in index.__slots__)


def test_a_shared_hash_is_settled_by_reading_the_whole_inbox(tmp_path: Path) -> None:
    """Two identities whose hashes meet: the index points at another message's block; the
    answer still comes from the file."""
    box = mailbox.init_mailbox(tmp_path / "bob", "v1")
    first, second = message("alice", "one", "first\n"), message("alice", "two", "second\n")
    mailbox.deliver(box, [first, second, message("alice", "three", "last\n")], NOW)
    text = box.inbox_file.read_text()
    start = text.index("---\nid: one")
    length = text.index("---\nid: two") - start
    # `two`'s hash pointing at `one`'s block, and an absent identity's at it too.
    before = {mailbox._identity_hash(("alice", "two")): start << 32 | length, mailbox._identity_hash(("alice", "absent")): start << 32 | length}
    lookup = mailbox._InboxIdentities(text, box.inbox_file, before, {})
    assert lookup.get(("alice", "two")) == msg.content_digest(second)
    assert lookup.get(("alice", "absent")) is None
    assert mailbox.deliver(box, [first, second, message("alice", "four", "new\n")], NOW) == [mailbox.PRESENT, mailbox.PRESENT, mailbox.DELIVERED]


def test_a_large_inbox_is_indexed_in_a_few_dozen_bytes_a_message_and_answers_as_its_file(tmp_path: Path) -> None:
    """3,000 messages delivered in batches (the index's newest spots merged into its sorted
    arrays several times): every answer, for messages held, absent and reused ids, equals a
    fresh reading, and the index a router keeps holds ~16-30 bytes a message (a dict of
    Python numbers held ~180)."""
    import gc
    import tracemalloc

    box = mailbox.init_mailbox(tmp_path / "bob", "v1")
    sent = [message(("alice", "carol")[n % 2], f"m{n}", f"token {n}\n") for n in range(3000)]
    for start in range(0, len(sent), 150):
        assert mailbox.deliver(box, sent[start : start + 150], NOW) == [mailbox.DELIVERED] * 150
    rng = random.Random(29)
    probe = rng.sample(sent, 200)
    asked = [*probe, *(msg.with_changes(m, body="other\n") for m in probe[:50]), *(message("alice", f"absent-{n}", "x\n") for n in range(50))]
    reading = fresh_reading(box)
    assert mailbox.deliver(box, asked, NOW) == [expected_result(reading, m) for m in asked]
    assert fresh_reading(box).keys() == reading.keys() | {("alice", f"absent-{n}") for n in range(50)}

    text = box.inbox_file.read_text()
    mailbox._INDEXES.pop(box.inbox_file, None)
    gc.collect()
    tracemalloc.start()
    try:
        lookup = mailbox._identities(text, box.inbox_file)
        del lookup
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # What the index holds (what parsing the messages caches elsewhere, e.g. their scalars, not).
    held = sum(stat.size for stat in snapshot.filter_traces([tracemalloc.Filter(True, mailbox.__file__)]).statistics("filename"))
    assert held / 3050 < 40


def test_every_delivery_into_a_message_folder_answers_as_a_fresh_reading(tmp_path: Path) -> None:
    """Layout v2: repeats, reused ids, a file a person adds under another time with the same
    (from, id), deleted files and dot files: each answer equals a fresh reading of the folder."""
    box = mailbox.init_mailbox(tmp_path / "bob", "v2")
    rng = random.Random(30)
    sent: list[Message] = []
    for round_number in range(30):
        batch: list[Message] = []
        for _ in range(rng.randint(1, 6)):
            choice = rng.random()
            if sent and choice < 0.25:
                batch.append(rng.choice(sent))
            elif sent and choice < 0.35:
                old = rng.choice(sent)
                batch.append(msg.with_changes(old, body=old.body + "changed\n"))
            else:
                batch.append(message(rng.choice(["alice", "carol"]), f"m{round_number}-{len(batch)}", f"token {round_number}\n"))
        names = mailbox.message_names(box.inbox_dir)
        if round_number % 5 == 2 and names:
            # Another copy of a message under a later time (a merge): the newest one answers.
            victim = rng.choice(names)
            (box.inbox_dir / ("2027" + victim[4:])).write_text((box.inbox_dir / victim).read_text().replace("token", "other"))
        if round_number % 7 == 4 and names:
            (box.inbox_dir / rng.choice(names)).unlink()  # read and deleted by hand
        (box.inbox_dir / f".{round_number}_alice_m0-0.md.swp").write_text("an editor's swap file\n")
        reading = fresh_reading(box)
        seen: dict[tuple[str, str], str] = {}
        wanted = []
        for m in batch:
            identity = (m.sender or "", m.id or "")
            if identity in seen:
                wanted.append(mailbox.PRESENT if seen[identity] == msg.content_digest(m) else mailbox.CONFLICT)
                continue
            wanted.append(expected_result(reading, m))
            if wanted[-1] == mailbox.DELIVERED:
                seen[identity] = msg.content_digest(m)
        assert mailbox.deliver(box, batch, NOW) == wanted, f"round {round_number}"
        sent.extend(m for m, result in zip(batch, wanted, strict=True) if result == mailbox.DELIVERED)


def test_a_delivery_into_a_large_message_folder_holds_no_list_of_it(tmp_path: Path) -> None:
    """Deciding a delivery into a folder of 3,000 messages holds what the batch needs, not a list
    and an index of every name (~600 KB at the peak before)."""
    import tracemalloc
    from contextlib import ExitStack

    box = mailbox.init_mailbox(tmp_path / "bob", "v2")
    mailbox.create_files(
        box.inbox_dir,
        [(mailbox.message_file_name(m, NOW), msg.render_message_document(m).encode()) for m in (message("alice", f"m{n}", f"{n}\n") for n in range(3000))],
    )
    batch = [message("alice", "m17", "17\n"), message("alice", "m18", "other\n"), message("carol", "new", "new\n")]
    tracemalloc.start()
    try:
        with ExitStack() as stack:
            planned = mailbox.plan_folder_deliveries([(box, batch)], NOW, stack)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert planned.results == [[mailbox.PRESENT, mailbox.CONFLICT, mailbox.DELIVERED]]
    assert peak < 100_000


def test_checking_an_unchanged_inbox_against_its_index_copies_no_text(tmp_path: Path) -> None:
    """The check that an inbox only grew since its last reading hashes its text a piece at a
    time: the bytes of the whole text (and a copy of the text once it had grown) were held at
    each delivery (5 MB at the peak for this 4 MB inbox)."""
    import tracemalloc

    path = tmp_path / "inbox.md"
    blocks = [msg.render_block(message("alice", f"m{n}", "x" * 200 + "\n")) for n in range(16000)]
    text = mailbox.template("inbox.md") + "".join(blocks)
    assert len(text) > 4_000_000
    first = mailbox._identities(text, path)
    assert first.get(("alice", "m9")) is not None
    tracemalloc.start()
    try:
        again = mailbox._identities(text, path)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert again.get(("alice", "m15998")) == first.get(("alice", "m15998")) is not None
    assert peak < 3_000_000

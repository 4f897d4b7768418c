"""The router's delivery journal on real files: appends seen by a second reader, torn lines,
compaction that keeps what the router still needs, and links refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from moss_files.foundation.errors import InvalidDocument
from needlecast import journal
from needlecast.journal import Journal, archived_event, dead_event, delivered_event, merge_deliveries

NOW = datetime(2026, 1, 21, 10, 0, tzinfo=UTC)
OLD = "2026-01-01T00:00:00Z"  # more than journal.KEEP before NOW
RECENT = "2026-01-20T00:00:00Z"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "alice" / ".needlecast" / ".state" / "journal.jsonl"


def test_a_second_reader_sees_appends_and_skips_a_torn_line(path: Path) -> None:
    writer = Journal(path).load()
    writer.write([delivered_event("m1", "d1", ["bob"], RECENT), dead_event("m2", "d2", "UNKNOWN_RECIPIENT", RECENT)])
    with path.open("ab") as handle:
        handle.write(b'{"k": "m3", "d": "d3", "op": "arch')  # a power cut mid-append
    reader = Journal(path).load()
    assert reader.get("m1") is not None and reader.get("m1").delivered == {"bob"}
    assert reader.get("m2") is not None and reader.get("m2").dead == {"UNKNOWN_RECIPIENT"} and reader.get("m2").settled()
    assert reader.get("m3") is None
    writer.write([archived_event("m1", "d1", RECENT)])
    assert reader.load().get("m1").archived  # re-read because the file grew


def test_a_new_digest_under_an_old_key_starts_a_new_record(path: Path) -> None:
    log = Journal(path).load()
    log.write([delivered_event("m1", "d1", ["bob"], RECENT), archived_event("m1", "d1", RECENT)])
    log.write([delivered_event("m1", "d2", ["carol"], RECENT)])
    record = Journal(path).load().get("m1")
    assert record is not None and (record.digest, record.delivered, record.archived) == ("d2", {"carol"}, False)


def test_deliveries_of_one_pass_merge_into_one_event_per_entry() -> None:
    events = [delivered_event("m1", "d1", ["bob"], RECENT), delivered_event("m2", "d2", ["bob"], RECENT), delivered_event("m1", "d1", ["carol"], RECENT)]
    assert merge_deliveries(events) == [delivered_event("m1", "d1", ["bob", "carol"], RECENT), delivered_event("m2", "d2", ["bob"], RECENT)]


def test_compaction_keeps_pending_and_recent_records_only(path: Path) -> None:
    log = Journal(path).load()
    log.write(
        [
            delivered_event("old-routed", "d1", ["bob"], OLD),
            archived_event("old-routed", "d1", OLD),
            delivered_event("old-pending", "d2", ["bob", "carol"], OLD),
            dead_event("old-pending", "d2", "UNKNOWN_RECIPIENT", OLD),
            delivered_event("recent", "d3", ["bob"], RECENT),
            archived_event("recent", "d3", RECENT),
        ]
    )
    assert not log.oversized()
    log.compact({"old-pending"}, NOW)
    assert set(log.records) == {"old-pending", "recent"}
    again = Journal(path).load()
    assert again.get("old-pending") is not None and again.get("old-pending").delivered == {"bob", "carol"}
    assert again.get("old-pending").dead == {"UNKNOWN_RECIPIENT"} and again.get("recent").archived
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert {line["k"] for line in lines} == {"old-pending", "recent"}


def test_a_journal_past_the_limit_is_oversized(path: Path) -> None:
    log = Journal(path).load()
    log.write([delivered_event(f"m{n}", "d" * 32, ["bob"], RECENT) for n in range(journal.COMPACT_BYTES // 80 + 1)])
    assert log.oversized()


def test_a_journal_of_recent_records_only_is_not_compacted_again_until_it_doubles(path: Path) -> None:
    # The records that must stay can fill more than COMPACT_BYTES: compacting after every pass would
    # rewrite them all each time (a cost growing with what was routed).
    log = Journal(path).load()
    log.write([delivered_event(f"m{n}", "d" * 32, ["bob"], RECENT) for n in range(journal.COMPACT_BYTES // 80 + 1)])
    assert log.oversized()
    log.compact(set(log.records), NOW)
    kept = path.stat().st_size
    assert kept >= journal.COMPACT_BYTES  # every record is of a pending entry: all kept
    assert not log.oversized()
    log.write([delivered_event(f"n{n}", "d" * 32, ["bob"], RECENT) for n in range(kept // 80 + 1)])
    assert log.oversized()


def test_compaction_keeps_the_newest_records_of_routed_entries_up_to_a_count(path: Path) -> None:
    # A busy week must not make the journal (and a router's memory) grow with it.
    log = Journal(path).load()
    count = journal.KEEP_RECORDS + 50
    times = [f"2026-01-20T10:{n // 60:02d}:{n % 60:02d}Z" for n in range(count)]  # all within KEEP of NOW
    log.write([delivered_event(f"m{n}", "d" * 32, ["bob"], at) for n, at in enumerate(times)])
    log.write([delivered_event("pending", "e" * 32, ["bob"], OLD)])
    log.compact({"pending"}, NOW)
    fresh = Journal(path).load()
    assert set(fresh.records) == {f"m{n}" for n in range(50, count)} | {"pending"}


def test_a_linked_journal_is_refused(path: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text(json.dumps(delivered_event("m1", "d1", ["bob"], RECENT)) + "\n")
    path.parent.mkdir(parents=True)
    path.symlink_to(elsewhere)
    with pytest.raises(InvalidDocument) as caught:
        Journal(path).load()
    assert caught.value.code == "SYMLINK_REFUSED"
    with pytest.raises(InvalidDocument):
        Journal(path).write([archived_event("m1", "d1", RECENT)])
    assert elsewhere.read_text().count("\n") == 1


def test_a_journal_holds_its_records_in_a_few_hundred_bytes_each(path: Path) -> None:
    """A router keeps a sender's journal in memory (up to about 2 × KEEP_RECORDS records between
    compactions, for each sender): records share their recipient sets and pass times rather
    than each holding a set and a string of its own (785 bytes a record before, about 230 now)."""
    import gc
    import tracemalloc

    writer = Journal(path)
    names = ["bob", "carol", "dave"]
    for start in range(0, 2000, 100):
        at = f"2026-01-20T00:{start // 100:02d}:00Z"
        writer.write(
            [
                event
                for n in range(start, start + 100)
                for event in (delivered_event(f"r{n}-alice-{n}", f"{n:020x}", [names[n % 3]], at), archived_event(f"r{n}-alice-{n}", f"{n:020x}", at))
            ],
            durable=False,
        )
    gc.collect()
    tracemalloc.start()
    try:
        reader = Journal(path).load()
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(reader.records) == 2000
    assert held / len(reader.records) < 400
    # The shared sets answer as the sets did.
    assert reader.get("r4-alice-4") is not None and reader.get("r4-alice-4").delivered == {"carol"} and reader.get("r4-alice-4").archived
    assert reader.get("r5-alice-5").delivered is reader.get("r2-alice-2").delivered

"""The pure planner every migration shares: times, derived ids, provenance keys, decisions."""

from __future__ import annotations

import pytest

from moss_files.board import files as board_files
from moss_files.board.model import Task
from moss_files.foundation import document
from moss_files.foundation.errors import Conflict
from moss_files.foundation.ids import PREFIXED_RE
from moss_files.migrate.model import CREATE, SKIP, Candidate, Where, decide, derived_id, iso_time, provenance_of, source_error, with_provenance


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-02-03T11:19:51.668611800Z", "2026-02-03T11:19:51Z"),  # Moe: seven fraction digits
        ("2026-01-22T08:48:53.156Z", "2026-01-22T08:48:53Z"),
        ("2026-01-17", "2026-01-17T00:00:00Z"),  # LoopFlow 0.1: a day alone
        ("2026-08-17 07:26", "2026-08-17T07:26:00Z"),  # Backlog.md
        ("2026-03-02T09:00:00+02:00", "2026-03-02T07:00:00Z"),
        (1737260000, "2025-01-19T04:13:20Z"),  # Moss: unix seconds
        (1737260000123, "2025-01-19T04:13:20Z"),  # milliseconds
        ("next tuesday", None),
        ("", None),
        (None, None),
        (True, None),
    ],
)
def test_times_from_every_source_read_as_rfc3339_utc(value: object, expected: str | None) -> None:
    assert iso_time(value) == expected


def test_derived_ids_are_our_id_form_and_the_same_in_every_clone() -> None:
    first = derived_id("TASK", "moe:proj-1", "task", "task-f3b6132e", "20260206")
    assert PREFIXED_RE.match(first)
    assert first == derived_id("TASK", "moe:proj-1", "task", "task-f3b6132e", "20260206")
    assert first.startswith("TASK-20260206-")
    others = {
        derived_id("TASK", "moe:proj-2", "task", "task-f3b6132e", "20260206"),
        derived_id("TASK", "moe:proj-1", "epic", "task-f3b6132e", "20260206"),
        derived_id("TASK", "moe:proj-1", "task", "task-f3b6132f", "20260206"),
    }
    assert first not in others and len(others) == 3


def test_provenance_keys_go_at_the_end_and_the_board_still_reads_the_file() -> None:
    task = Task(id="TASK-20260101-aaaaaaaa", epic="EPIC-20260101-bbbbbbbb", title="A: with a colon", description="Body\n\nsecond paragraph")
    text = with_provenance(board_files.render_task(task), "moe:proj-1", "task-1", {"branch": "x", "comments": [{"author": "human"}]})
    doc = document.parse(text)
    assert list(doc.meta)[-3:] == ["imported_from", "source_id", "source_fields"]
    assert provenance_of(doc.meta) == ("moe:proj-1", "task-1")
    assert doc.meta["source_fields"] == {"branch": "x", "comments": [{"author": "human"}]}
    assert board_files.parse_task(doc, fallback_id=task.id) == task


def _candidate(old: str, path: str) -> Candidate:
    return Candidate("task", old, path.rsplit("/", 1)[-1][:-3], path, b"x", Where("src.json", None, "tasks[0]"))


def test_decide_skips_what_was_imported_and_a_second_copy_of_an_id() -> None:
    imported = {("task", "a"): ".moss/board/tasks/TASK-1.md"}
    items, writes = decide([_candidate("a", "t/A.md"), _candidate("b", "t/B.md"), _candidate("b", "t/B2.md")], imported, set())
    assert [(item.old_id, item.action) for item in items] == [("a", SKIP), ("b", CREATE), ("b", SKIP)]
    assert items[0].path == ".moss/board/tasks/TASK-1.md" and items[0].reason == "already imported"
    assert "twice" in (items[2].reason or "")
    assert [write.path for write in writes] == ["t/B.md"]


def test_decide_refuses_a_place_held_by_a_file_it_did_not_import() -> None:
    with pytest.raises(Conflict) as caught:
        decide([_candidate("a", "t/A.md")], {}, {"t/A.md"})
    assert caught.value.code == "ALREADY_EXISTS" and caught.value.details["paths"] == ["t/A.md"]


def test_a_source_error_names_the_file_and_line_or_json_path() -> None:
    by_line = source_error("bad", Where("a.jsonl", 3))
    assert (by_line.code, by_line.path, by_line.line, by_line.exit_code) == ("SOURCE_INVALID", "a.jsonl", 3, 4)
    by_path = source_error("bad", Where("b.json", None, "tasks[2].status"))
    assert by_path.details["json_path"] == "tasks[2].status" and "tasks[2].status" in by_path.message

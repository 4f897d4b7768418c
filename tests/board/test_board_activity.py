"""The activity log on disk: a file per UTC day, and queries that read only the files that can
hold their answer, whose answer is always the one a read of every file gives."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moss_files.board import activity, files, rules
from moss_files.board.model import Event
from moss_files.board.rules import EventQuery

TASKS = ("TASK-1", "TASK-2", "TASK-3")
EPICS = ("EPIC-1", "EPIC-2")
WORKERS = ("w1", "w2")
KINDS = ("TASK_CLAIMED", "step_completed", "EPIC_CREATED")
FILES = ("activity.jsonl", *(f"activity/2026-01-0{day}.jsonl" for day in range(1, 6)))


def event_line(event: Event) -> str:
    return json.dumps(files.event_to_dict(event), separators=(",", ":"))


def write_log(base: Path, contents: dict[str, list[str]], *, age: float = 60.0) -> None:
    """Write each log file, its time set `age` seconds back (a summary read from a file
    changed in the last two seconds is not kept)."""
    for name, lines in contents.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        past = time.time() - age
        os.utime(path, (past, past))


def oracle(log: activity.ActivityLog, query: EventQuery, limit: int) -> tuple[list[str], list[tuple[str | None, int | None, str]]]:
    """The answer from every event of every file: `rules.filter_events` over all of them."""
    events, problems = log.everything()
    kinds = sorted(query.kinds) if query.kinds else None
    chosen = rules.filter_events(events, task_id=query.task, epic_id=query.epic, worker_id=query.worker, event_types=kinds, limit=limit)
    return [e.id for e in chosen], [(p.path, p.line, p.code) for p in problems]


def answer(log: activity.ActivityLog, query: EventQuery, limit: int) -> tuple[list[str], list[tuple[str | None, int | None, str]]]:
    events, problems = log.newest(query, limit)
    return [e.id for e in events], [(p.path, p.line, p.code) for p in problems]


@st.composite
def corpora(draw: st.DrawFn) -> dict[str, list[str]]:
    """Log files as a union merge and hand edits may leave them: events whose times are not
    their file's day, equal times, and lines that are not events."""
    numbers = iter(range(1, 10_000))
    contents: dict[str, list[str]] = {}
    for name in draw(st.lists(st.sampled_from(FILES), min_size=1, max_size=len(FILES), unique=True)):
        lines = []
        for _ in range(draw(st.integers(0, 8))):
            if draw(st.integers(0, 9)) == 0:
                lines.append(draw(st.sampled_from(["{not json", "[1, 2]", '{"id": "EVT-x"}'])))
                continue
            day, second = draw(st.integers(1, 5)), draw(st.integers(0, 3))
            event = Event(
                id=f"EVT-{next(numbers):04d}",
                timestamp=f"2026-01-0{day}T10:00:0{second}.000Z",
                event=draw(st.sampled_from(KINDS)),
                project="PROJ-1",
                epic=draw(st.sampled_from((*EPICS, None))),
                task=draw(st.sampled_from((*TASKS, None))),
                worker=draw(st.sampled_from((*WORKERS, None))),
            )
            lines.append(event_line(event))
        contents[name] = lines
    return contents


queries = st.builds(
    EventQuery,
    task=st.sampled_from((*TASKS, "TASK-none", None)),
    epic=st.sampled_from((*EPICS, None)),
    worker=st.sampled_from((*WORKERS, None)),
    kinds=st.sampled_from((None, frozenset({"TASK_CLAIMED"}), frozenset({"STEP_COMPLETED", "EPIC_CREATED"}))),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents=corpora(), query=queries, limit=st.integers(1, 6), grown=st.sampled_from(FILES))
def test_a_query_answers_what_a_read_of_every_file_answers_cold_warm_and_after_a_change(
    contents: dict[str, list[str]], query: EventQuery, limit: int, grown: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        base = root / ".moss" / "board"
        write_log(base, contents)
        first = activity.ActivityLog(root, base)
        expected = oracle(first, query, limit)
        assert answer(first, query, limit) == expected  # no summary known
        assert answer(first, query, limit) == expected  # this store's summaries
        assert answer(activity.ActivityLog(root, base), query, limit) == expected  # the cache file's

        # An old file gains an event newer than any other, matching the query: its stat
        # changed, so its summary no longer stands for it.
        added = Event(
            id="EVT-9999",
            timestamp="2026-01-09T00:00:00.000Z",
            event=sorted(query.kinds)[0] if query.kinds else "TASK_CLAIMED",
            project="PROJ-1",
            epic=query.epic,
            task=query.task,
            worker=query.worker,
        )
        write_log(base, {grown: [*contents.get(grown, []), event_line(added)]}, age=30.0)
        changed = oracle(activity.ActivityLog(root, base, persist=False), query, limit)
        assert changed[0][0] == "EVT-9999"
        assert answer(first, query, limit) == changed
        assert answer(activity.ActivityLog(root, base), query, limit) == changed


def days_of_events(base: Path, days: int, per_day: int) -> None:
    """A log of `days` days, each with `per_day` events of its own task."""
    contents = {}
    for day in range(days):
        date = f"2026-0{1 + day // 28}-{1 + day % 28:02d}"
        contents[f"activity/{date}.jsonl"] = [
            event_line(
                Event(id=f"EVT-{day:03d}-{n:03d}", timestamp=f"{date}T09:{n // 60:02d}:{n % 60:02d}.000Z", event="STEP_COMPLETED", task=f"TASK-day{day}")
            )
            for n in range(per_day)
        ]
    write_log(base, contents)


def test_once_summaries_are_known_a_query_reads_only_the_files_that_can_hold_its_answer(tmp_path: Path) -> None:
    base = tmp_path / ".moss" / "board"
    days_of_events(base, 40, 20)
    log = activity.ActivityLog(tmp_path, base)
    newest, _ = log.newest(EventQuery(), 5)
    assert len(log.files_read) == 40  # the first query learns every file's summary
    assert [e.id for e in newest] == [f"EVT-039-{n:03d}" for n in (19, 18, 17, 16, 15)]

    later = activity.ActivityLog(tmp_path, base)  # the next process, from the cache file
    assert [e.id for e in later.newest(EventQuery(), 5)[0]] == [e.id for e in newest]
    assert later.files_read == ["activity/2026-02-12.jsonl"]
    assert [e.id for e in later.newest(EventQuery(), 30)[0]][-1] == "EVT-038-010"
    assert later.files_read == ["activity/2026-02-12.jsonl", "activity/2026-02-11.jsonl"]
    assert [e.id for e in later.newest(EventQuery(task="TASK-day3"), 50)[0]] == [f"EVT-003-{n:03d}" for n in reversed(range(20))]
    assert later.files_read == ["activity/2026-01-04.jsonl"]
    assert later.newest(EventQuery(task="TASK-none"), 50) == ([], [])
    assert later.files_read == []

    # Today's file, written a moment ago, is read at every query: its stat may not show the
    # next append within the same tick.
    today = Event(id="EVT-now", timestamp="2026-03-01T00:00:00.000Z", event="TASK_CLAIMED", task="TASK-day3")
    later.append(today, None)
    assert [e.id for e in later.newest(EventQuery(task="TASK-day3"), 2)[0]] == ["EVT-now", "EVT-003-019"]
    assert later.files_read == ["activity/2026-03-01.jsonl", "activity/2026-01-04.jsonl"]
    assert [e.id for e in later.newest(EventQuery(), 1)[0]] == ["EVT-now"]
    assert later.files_read == ["activity/2026-03-01.jsonl"]


def test_a_line_that_is_not_an_event_is_reported_from_a_file_the_query_does_not_read(tmp_path: Path) -> None:
    base = tmp_path / ".moss" / "board"
    days_of_events(base, 3, 4)
    with (base / "activity" / "2026-01-01.jsonl").open("a") as handle:
        handle.write("{not json\n")
    os.utime(base / "activity" / "2026-01-01.jsonl", (time.time() - 60, time.time() - 60))
    activity.ActivityLog(tmp_path, base).newest(EventQuery(), 1)
    later = activity.ActivityLog(tmp_path, base)
    events, problems = later.newest(EventQuery(), 1)
    assert later.files_read == ["activity/2026-01-03.jsonl"]
    assert [(p.path, p.line, p.code) for p in problems] == [(".moss/board/activity/2026-01-01.jsonl", 5, "INVALID_DOCUMENT")]
    assert "not JSON" in problems[0].message

    # A merge left unfinished (no union merge configured) is reported at its markers' lines;
    # the events between them are read.
    day = base / "activity" / "2026-01-02.jsonl"
    lines = day.read_text().splitlines()
    day.write_text("\n".join(["<<<<<<< HEAD", lines[0], "=======", lines[1], ">>>>>>> theirs", *lines[2:]]) + "\n")
    events, problems = activity.ActivityLog(tmp_path, base).newest(EventQuery(task="TASK-day1"), 10)
    assert len(events) == 4
    assert [(p.line, p.code) for p in problems if p.path and p.path.endswith("02.jsonl")] == [
        (1, "MERGE_CONFLICT"),
        (3, "MERGE_CONFLICT"),
        (5, "MERGE_CONFLICT"),
    ]


def test_an_event_goes_to_the_file_of_its_own_day_and_the_legacy_file_is_read_first(tmp_path: Path) -> None:
    base = tmp_path / ".moss" / "board"
    write_log(base, {"activity.jsonl": [event_line(Event(id="EVT-old", timestamp="2026-01-02T10:00:00.000Z", event="TASK_CLAIMED"))]})
    log = activity.ActivityLog(tmp_path, base)
    log.append(Event(id="EVT-new", timestamp="2026-01-02T10:00:00.000Z", event="TASK_CLAIMED"), None)
    log.append(Event(id="EVT-odd", timestamp="yesterday", event="TASK_CLAIMED"), None)
    assert (base / "activity" / "2026-01-02.jsonl").read_text().count("\n") == 1
    assert json.loads((base / "activity.jsonl").read_text().splitlines()[-1])["id"] == "EVT-odd"
    # The same time: the later position (the day's file, after the legacy file) reads first.
    assert [e.id for e in log.newest(EventQuery(), 3)[0]] == ["EVT-odd", "EVT-new", "EVT-old"]
    assert activity.day_file("2026-11-29T17:00:00Z") == "activity/2026-11-29.jsonl"
    assert activity.day_file("") == activity.day_file("29/11/2026") == "activity.jsonl"


def test_the_cache_file_is_derived_an_unreadable_one_is_read_again_from_the_log(tmp_path: Path) -> None:
    base = tmp_path / ".moss" / "board"
    days_of_events(base, 3, 2)
    activity.ActivityLog(tmp_path, base, persist=False).newest(EventQuery(), 1)
    cache = tmp_path / activity.CACHE_FILE
    assert not cache.exists()  # a store that keeps no cache files writes none
    activity.ActivityLog(tmp_path, base).newest(EventQuery(), 1)
    assert json.loads(cache.read_text())["version"] == activity.CACHE_VERSION
    for broken in ("{", '{"version": 1, "files": {"activity/2026-01-01.jsonl": {"key": [1]}}}', "[]"):
        cache.write_text(broken)
        log = activity.ActivityLog(tmp_path, base)
        assert [e.id for e in log.newest(EventQuery(), 3)[0]] == ["EVT-002-001", "EVT-002-000", "EVT-001-001"]
        assert len(log.files_read) == 3
    (base / "activity" / "2026-01-02.jsonl").unlink()
    log = activity.ActivityLog(tmp_path, base)
    assert [e.id for e in log.newest(EventQuery(), 3)[0]] == ["EVT-002-001", "EVT-002-000", "EVT-000-001"]
    assert "2026-01-02" not in cache.read_text()  # a file gone is dropped from the cache file


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def test_two_clones_append_to_the_same_day_and_a_merge_keeps_every_event_once(repo: Path, tmp_path: Path) -> None:
    (repo / ".gitattributes").write_text(".moss/**/*.jsonl merge=union\n")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    here = activity.ActivityLog(repo, repo / ".moss" / "board")
    here.append(Event(id="EVT-base", timestamp="2026-01-02T09:00:00.000Z", event="EPIC_CREATED"), None)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(repo), str(other)], check=True)
    git(other, "config", "user.email", "t@example.com")
    git(other, "config", "user.name", "t")
    there = activity.ActivityLog(other, other / ".moss" / "board")
    for n in range(3):
        here.append(Event(id=f"EVT-here-{n}", timestamp=f"2026-01-02T10:00:0{n}.000Z", event="TASK_CLAIMED"), None)
        there.append(Event(id=f"EVT-there-{n}", timestamp=f"2026-01-02T10:00:0{n}.500Z", event="TASK_CLAIMED"), None)
    there.append(Event(id="EVT-there-next-day", timestamp="2026-01-03T08:00:00.000Z", event="TASK_CLAIMED"), None)
    for root, message in ((repo, "here"), (other, "there")):
        git(root, "add", "-A")
        git(root, "commit", "-qm", message)
    git(repo, "pull", "-q", "--no-rebase", "--no-edit", str(other), "main")
    assert git(repo, "status", "--porcelain") == ""
    events, problems = activity.ActivityLog(repo, repo / ".moss" / "board").newest(EventQuery(), 50)
    assert problems == []
    assert [e.id for e in events] == [
        "EVT-there-next-day",
        *(f"EVT-{who}-{n}" for n in (2, 1, 0) for who in ("there", "here")),
        "EVT-base",
    ]


@pytest.mark.parametrize("limit", [0, 1])
def test_a_limit_of_nothing_reads_only_the_files_whose_problems_are_unknown(tmp_path: Path, limit: int) -> None:
    base = tmp_path / ".moss" / "board"
    days_of_events(base, 4, 2)
    activity.ActivityLog(tmp_path, base).newest(EventQuery(), 1)
    later = activity.ActivityLog(tmp_path, base)
    assert len(later.newest(EventQuery(), limit)[0]) == limit
    assert later.files_read == ([] if limit == 0 else ["activity/2026-01-04.jsonl"])


def test_a_long_lived_log_watches_its_files_and_sees_every_change_to_them(tmp_path: Path) -> None:
    base = tmp_path / ".moss" / "board"
    log = activity.ActivityLog(tmp_path, base)

    def check(query: EventQuery | None = None, limit: int = 4) -> None:
        query = query or EventQuery()
        assert answer(log, query, limit) == oracle(activity.ActivityLog(tmp_path, base, persist=False), query, limit)

    check()
    check()  # no board folder yet: nothing to watch, listed again at every query
    days_of_events(base, 5, 3)
    check()
    assert log.watching
    check(EventQuery(task="TASK-day1"))
    assert log.files_read == ["activity/2026-01-02.jsonl"]  # every summary known: only the task's day

    # An old day's file grows in place, its time set back: the watch names it.
    old = base / "activity" / "2026-01-02.jsonl"
    with old.open("a") as handle:
        handle.write(event_line(Event(id="EVT-late", timestamp="2026-02-01T00:00:00.000Z", event="TASK_CLAIMED", task="TASK-day1")) + "\n")
    os.utime(old, (time.time() - 60, time.time() - 60))
    check()
    check(EventQuery(task="TASK-day1"))
    assert answer(log, EventQuery(), 1)[0] == ["EVT-late"]

    # A day's file comes, one goes, the legacy file comes and changes.
    write_log(base, {"activity/2026-01-09.jsonl": [event_line(Event(id="EVT-ninth", timestamp="2026-01-09T00:00:00.000Z", event="X"))]})
    check()
    (base / "activity" / "2026-01-02.jsonl").unlink()
    check()
    check(EventQuery(task="TASK-day1"))
    write_log(base, {"activity.jsonl": [event_line(Event(id="EVT-legacy", timestamp="2026-03-01T00:00:00.000Z", event="X"))]})
    check()
    with (base / "activity.jsonl").open("a") as handle:
        handle.write("{torn\n")
    check()
    assert [p.line for p in log.newest(EventQuery(), 1)[1]] == [2]

    # The folder is replaced whole (a checkout of another branch may do that).
    os.rename(base / "activity", tmp_path / "away")
    check()
    write_log(base, {"activity/2026-01-03.jsonl": [event_line(Event(id="EVT-back", timestamp="2026-01-03T00:00:00.000Z", event="X"))]})
    check()
    assert "EVT-back" in answer(log, EventQuery(), 10)[0]
    assert log.watching
    log.close()
    assert not log.watching
    check()

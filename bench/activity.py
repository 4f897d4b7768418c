"""Activity log bench: `moss board log` on a year of history against the same query on a log of
one day.

    .venv/bin/python bench/activity.py [--sizes 10000 100000] [--repeat 9] [--baseline MOSS] [--json PATH]

At corpus size N the log holds 10 N events (100,000 at 10k, a million at 100k: the issue's
"activity log with a million lines") spread over 365 days, 50 events a task, each task's events
in one or two days, written as this checkout writes them (`activity/<day>.jsonl`, a file per
day). The floor is the same query in the same run on a log holding only the newest day of the
same corpus and the days of the task queried: what the query costs with no history. Each figure is the median of `--repeat`
runs, after one run that fills the summaries' cache (`.moss/cache/activity.json`), as every
query after the first finds it:

* `moss board log -n 50 --json` (the newest events) and `moss board log --task T -n 50 --json`
  (a task from the middle of the year: the web view's task page asks for one task's events),
  each a whole process;
* the same two queries in one long-lived process (`queries.get_activity_log` on one context:
  `moss serve`, the web view), in milliseconds.

`--baseline MOSS` measures another installation the same way, on the log as earlier versions
wrote it: the same events in one `activity.jsonl` (which this checkout also reads). Each row's
target is the issue's wording for history: the figure with a year of history within 20% of
the figure with none. `--rows-only [--sizes ...] [--json PATH] [--quick] [--baseline MOSS]`
writes the rows for bench/all.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TextIO

import rows as shared

ROWS_ARGS = ["--rows-only"]
EVENTS_PER_SIZE = 10  # events of history per artifact of the corpus size
EVENTS_PER_TASK = 50
DAYS = 365
KINDS = ("TASK_CLAIMED", "STEP_STARTED", "STEP_COMPLETED", "TASK_STATUS_CHANGED", "PLAN_SUBMITTED", "TASK_COMPLETED")
START = time.mktime((2026, 1, 1, 0, 0, 0, 0, 0, 0)) - time.timezone  # 2026-01-01T00:00:00Z


def event_record(number: int, total: int) -> dict[str, object]:
    """Event `number` of `total`, in time order over DAYS days."""
    moment = START + number * (DAYS * 86_400) / total
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{number % 1000:03d}Z"
    task = number // EVENTS_PER_TASK
    return {
        "id": f"EVT-{number:010d}",
        "timestamp": stamp,
        "projectId": "PROJ-bench",
        "epicId": f"EPIC-{task // 40:05d}",
        "taskId": f"TASK-{task:07d}",
        "workerId": f"w{task % 20:02d}",
        "event": KINDS[number % len(KINDS)],
        "payload": {"step": number % 7, "note": "bench"},
    }


def floor_days(total: int) -> set[str]:
    """The days a log without history keeps: the newest, and those of `middle_task`'s events."""
    first = total // 2 // EVENTS_PER_TASK * EVENTS_PER_TASK
    return {str(event_record(number, total)["timestamp"])[:10] for number in (total - 1, *range(first, first + EVENTS_PER_TASK))}


def make_log(folder: Path, total: int, *, layout: str, days: set[str] | None = None) -> None:
    """A board folder with `total` events in `layout` ("days": a file per day; "one": one
    activity.jsonl); with `days`, only the events of those days (the floor)."""
    board = folder / ".moss" / "board"
    (board / "activity").mkdir(parents=True)
    # Events come in time order, so each file is written whole before the next is opened.
    current: tuple[str, TextIO] | None = None
    try:
        for number in range(total):
            record = event_record(number, total)
            day = str(record["timestamp"])[:10]
            if days is not None and day not in days:
                continue
            name = f"activity/{day}.jsonl" if layout == "days" else "activity.jsonl"
            if current is None or current[0] != name:
                if current is not None:
                    current[1].close()
                current = (name, (board / name).open("a", encoding="utf-8"))
            current[1].write(json.dumps(record, separators=(",", ":")) + "\n")
    finally:
        if current is not None:
            current[1].close()
    # The files were written long ago: a summary of a file changed in the last two seconds is
    # not kept, and a real year's files are old.
    past = time.time() - 86_400
    for path in board.rglob("*.jsonl"):
        os.utime(path, (past, past))


def middle_task(total: int) -> str:
    return str(event_record(total // 2, total)["taskId"])


IN_PROCESS = """
import json, statistics, sys, time
from pathlib import Path
from moss_files.board import queries
from moss_files.foundation.context import Context
root, task, repeat = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = Context(root)
out = {}
for name, filters in (("newest", {}), ("task", {"task_id": task})):
    queries.get_activity_log(ctx, limit=50, **filters)  # the first query fills the summaries
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = queries.get_activity_log(ctx, limit=50, **filters)
        runs.append((time.perf_counter() - started) * 1000)
    out[name] = {"ms": statistics.median(runs), "count": result["count"]}
print(json.dumps(out))
"""


def measure(moss: str, root: Path, task: str, repeat: int, env: dict[str, str]) -> dict[str, dict[str, float]]:
    """One installation's four figures on one log (medians, ms)."""
    python = str(Path(moss).with_name("python"))
    figures: dict[str, dict[str, float]] = {}
    for name, extra in (("newest", []), ("task", ["--task", task])):
        command = [moss, "board", "log", "-n", "50", "--json", *extra]
        first = shared.run_process(command, cwd=root, env=env, capture=True)
        try:
            count = len(json.loads(first.stdout)["events"])
        except ValueError:
            raise SystemExit(f"{moss} board log in {root}: not JSON: {first.stdout[:300]!r}") from None
        runs = [shared.run_process(command, cwd=root, env=env) for _ in range(repeat)]
        figures[f"process {name}"] = shared.medians(runs, count=count)
    inside = json.loads(shared.run_process([python, "-c", IN_PROCESS, str(root), task, str(repeat * 3)], cwd=root, env=env, capture=True).stdout)
    for name, figure in inside.items():
        figures[f"long-lived {name}"] = figure
    return figures


MEASURES = {
    "process newest": "moss board log -n 50, a year's log",
    "process task": "moss board log --task, a year's log",
    "long-lived newest": "log, newest 50, long-lived, a year's log",
    "long-lived task": "log, one task, long-lived, a year's log",
}


def issue_rows(size: int, *, repeat: int, baseline: str | None = None) -> list[shared.Row]:
    """The activity log rows at corpus size `size` for this checkout and, if given, `baseline`."""
    total = size * EVENTS_PER_SIZE
    task = middle_task(total)
    installs = {"this": (str(Path(sys.executable).with_name("moss")), "days"), **({"baseline": (baseline, "one")} if baseline else {})}
    out: list[shared.Row] = []
    with shared.scratch("moss-bench-activity-") as temp:
        env = shared.process_env(temp / "pycache")
        for label, (moss, layout) in installs.items():
            history = shared.cached(
                f"activity-{layout}", total, 0, lambda folder, layout=layout: make_log(folder, total, layout=layout), sources=[Path(__file__)]
            )
            floor = shared.cached(
                f"activity-{layout}-floor",
                total,
                0,
                lambda folder, layout=layout: make_log(folder, total, layout=layout, days=floor_days(total)),
                sources=[Path(__file__)],
            )
            year = shared.copy_of(history, temp / f"{label}-year")
            day = shared.copy_of(floor, temp / f"{label}-floor")
            # A repository, as `moss` looks for one; its cache folder is the toolkit's own.
            for root in (year, day):
                (root / ".git").mkdir()
            with_history, without = measure(moss, year, task, repeat, env), measure(moss, day, task, repeat, env)
            out += shared.history_rows(
                MEASURES,
                with_history,
                without,
                size=size,
                build=label,
                floor_name="the same query, the newest day and the task's only",
                note=lambda figure, layout=layout: f"{total:,} events over {DAYS} days ({layout}); {figure['count']:.0f} events answered",
            )
            shutil.rmtree(year, ignore_errors=True)
            shutil.rmtree(day, ignore_errors=True)
    return out


def main() -> None:
    shared.history_main(__doc__ or "", "activity log rows", issue_rows)


if __name__ == "__main__":
    main()

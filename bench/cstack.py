"""cstack with a long history: `cstack status`, `add`, `done` and `remember` as whole processes
on a PLAN.md holding thousands of closed tasks and a MEMORY.md holding thousands of entries,
beside the start-up of the same command (`cstack --version`) measured in the same run.

Run: .venv/bin/python bench/cstack.py [--sizes 500:1000,5000:10000] [--repeat 15]
     [--baseline /tmp/base/.venv/bin/cstack] [--json]
     .venv/bin/python bench/cstack.py --rows-only [--sizes 10000] [--quick] [--json ROWS]
     (issue 29's rows, for bench/all.py: size 10000 is 5,000 closed tasks and 10,000 memory
     entries; `rows(size)` gives them as dicts)

A size is CLOSED:ENTRIES: PLAN.md gets CLOSED finished or dropped tasks (in Completed and
Closed, as a year of `cstack done` leaves them) beside 40 open ones, MEMORY.md gets ENTRIES
dated entries spread over its categories, and `.cstack/.locks/` is there, as after any write.
The corpus is generated once per size into a cache folder (`$TMPDIR/moss-bench-cache/`, kept
between runs); each timed run works on a fresh copy, synced to disk before the command starts,
so `add` and `done` always meet the same files.
Every figure is the median of `--repeat` whole processes (wall / CPU of the child, from its
rusage), with a bytecode cache in the temporary folder, as an installed tool runs. With
`--baseline`, another installation's `cstack` runs alternately with this checkout's, so both
see the same machine load.

The figure that matters is a command's cost above start-up: target `<= start-up + 30 ms`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared

ROWS_ARGS = ["--rows-only"]
KEEPS_ITS_FILES = True  # what it writes stays in rows.scratch() folders until bench/all.py ends
OPEN_TASKS = 40
CATEGORIES = ("Decisions", "Gotchas", "Preferences", "Facts")


def cache_root() -> Path:
    """Where generated corpora are kept between runs, keyed by size."""
    return Path(os.environ.get("MOSS_BENCH_CACHE") or Path(tempfile.gettempdir()) / "moss-bench-cache")


def plan_text(closed: int) -> str:
    """A PLAN.md as months of work leave it: open tasks, then `closed` finished or dropped ones."""
    open_lines = []
    for n in range(OPEN_TASKS):
        status = " >!"[n % 3] if n < 6 else " "
        extra = " | blocked: waiting for the vendor" if status == "!" else ""
        deps = f", depends: o{n - 1}" if n % 5 == 4 else ""
        open_lines.append(
            f"- [{status}] P{n % 4}: Open work item {n} on the billing service #area{n % 7} (id: o{n}{deps}){extra} | modified: 2026-01-{1 + n % 28:02d}"
        )
    done, dropped = [], []
    for n in range(closed):
        day = f"2025-{1 + n % 12:02d}-{1 + n % 28:02d}"
        line = f"P{n % 4}: Finished item {n}: rounding in invoice module {n % 97} #area{n % 13} #release{n // 200} (id: c{n}) | modified: {day} | closed: {day}"
        if n % 10 == 9:
            dropped.append(f"- [~] {line} | reason: superseded by a later design")
        else:
            done.append(f"- [x] {line} | reason: shipped in release {n // 200}, covered by tests")
    return (
        "# Plan\n\n> **Updated:** 2026-01-20\n\n## Legend\n`- [ ]` Pending | `- [>]` In Progress | `- [x]` Completed | `- [!]` Blocked | `- [~]` Closed\n"
        "Priority: P0=Critical P1=High P2=Medium P3=Low\n\n---\n\n## Tasks\n\n"
        + "\n".join(open_lines)
        + "\n\n---\n\n## Notes\n\n- Open work item 3: the vendor answers on Fridays.\n\n---\n\n## Completed\n\n"
        + "\n".join(done)
        + "\n\n---\n\n## Closed\n\n"
        + "\n".join(dropped)
        + "\n\n---\n\n## Backlog\n\n### Bugs\n_None._\n\n### Debt\n_None._\n\n### Ideas\n_None._\n"
    )


def memory_text(entries: int) -> str:
    """A MEMORY.md with `entries` dated entries over its four categories (decisions as table rows)."""
    parts = ["# Memory\n\n> Lasting knowledge about this project. It outlives sessions and context resets.\n"]
    share = -(-entries // len(CATEGORIES))
    for number, category in enumerate(CATEGORIES):
        count = max(0, min(share, entries - number * share))
        parts.append(f"\n## {category}\n\n")
        if category == "Decisions":
            parts.append("| Decision | Choice | Why | Date |\n|----------|--------|-----|------|\n")
            parts.extend(f"| Store for cache {n} | SQLite | one file, no server | 2025-{1 + n % 12:02d}-{1 + n % 28:02d} |\n" for n in range(count))
        else:
            parts.extend(
                f"- **2025-{1 + n % 12:02d}-{1 + n % 28:02d}**: Lesson {n} about module {n % 97}: keep the lock short and the write atomic\n"
                for n in range(count)
            )
    return "".join(parts)


CURRENT = """# Current Context

> **Last Updated:** 2026-01-20 | **Active Task:** Open work item 1 on the billing service

## Now

- Rounding per invoice.

## Next Steps

1. Write the property test.
2. Ship it.

## Active Task

**Task:** Open work item 1 on the billing service | **Status:** In progress | **Started:** 2026-01-19

### Goal
Round once.

---

## Context

- Key files: src/billing/invoice.py
- Blockers: _none_

## Notes

_Session started._
"""


def corpus(closed: int, entries: int) -> Path:
    """The project folder of one size, generated once and kept in the cache folder.

    It holds `.cstack/.locks/` (made by the toolkit's own `fs.ensure_ignored`), as every
    workspace does after its first write: a PLAN.md that thousands of `cstack done` closed has
    one. Without it each timed write also made the lock folder and durably wrote its
    `.gitignore` (two more fsyncs), a cost a clone pays once, not each command."""
    from moss_files.foundation import fs

    folder = cache_root() / f"cstack-{closed}-{entries}-v2"
    if (folder / ".done").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    (folder / ".cstack").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / ".cstack" / "PLAN.md").write_text(plan_text(closed), encoding="utf-8")
    (folder / ".cstack" / "MEMORY.md").write_text(memory_text(entries), encoding="utf-8")
    (folder / ".cstack" / "CURRENT.md").write_text(CURRENT, encoding="utf-8")
    fs.ensure_ignored(fs.lock_path_for(folder / ".cstack" / "PLAN.md").parent)
    (folder / ".done").touch()
    return folder


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one whole process, CPU from the change in the children's rusage."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-400:]}")
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def fresh_copy(source: Path, target: Path) -> None:
    """A fresh copy of the corpus, on disk before the timed command starts: a copy left unsynced
    is partly written back by the command's own fsyncs (the file system's journal commits the
    copy's new files with them), which timed the bench's set-up inside `add` and `done`."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, symlinks=True)
    os.sync()


def measure(installs: dict[str, str], sizes: list[tuple[int, int]], repeat: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with shared.scratch("moss-bench-cstack-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        env.update(PYTHONPYCACHEPREFIX=str(tmp / "pycache"), HOME=str(tmp), MOSS_NOW="2026-01-21", GIT_CONFIG_NOSYSTEM="1")
        for closed, entries in sizes:
            source = corpus(closed, entries)
            plan_bytes = (source / ".cstack" / "PLAN.md").stat().st_size
            memory_bytes = (source / ".cstack" / "MEMORY.md").stat().st_size
            work = tmp / "work"
            cases: dict[str, tuple[list[str], bool]] = {
                "start-up (cstack --version)": (["--version"], False),
                "cstack --help": (["--help"], False),
                "cstack status": (["status"], False),
                "cstack add": (["add", "P2: Round totals once per invoice #billing"], True),
                "cstack done": (["done", "o7", "--reason", "shipped"], True),
                "cstack remember": (["remember", "Gotcha: flock locks are per open file description", "--category", "gotchas"], True),
            }
            times: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for cstack in installs.values():  # warm each bytecode cache
                fresh_copy(source, work)
                for args, _writes in cases.values():
                    timed([cstack, *args], work, env)
            for _ in range(repeat):
                for case, (args, writes) in cases.items():
                    for label, cstack in installs.items():  # alternate, so load hits all alike
                        if writes or not work.exists():
                            fresh_copy(source, work)
                        times.setdefault((case, label), []).append(timed([cstack, *args], work, env))
            for (case, label), values in times.items():
                rows.append(
                    {
                        "at": {"closed_tasks": closed, "memory_entries": entries, "plan_bytes": plan_bytes, "memory_bytes": memory_bytes},
                        "measure": case,
                        "install": label,
                        "wall_ms": statistics.median(v[0] for v in values),
                        "cpu_ms": statistics.median(v[1] for v in values),
                    }
                )
    for row in rows:
        floor = next(r for r in rows if r["at"] == row["at"] and r["install"] == row["install"] and r["measure"].startswith("start-up"))
        row["floor"] = {"measure": floor["measure"], "wall_ms": floor["wall_ms"], "cpu_ms": floor["cpu_ms"]}
        row["over_floor_cpu_ms"] = row["cpu_ms"] - floor["cpu_ms"]
        row["over_floor_wall_ms"] = row["wall_ms"] - floor["wall_ms"]
        row["target"] = "<= start-up + 30 ms" if row["measure"] in ("cstack status", "cstack add", "cstack done") else None
    return rows


def print_table(rows: list[dict[str, Any]], installs: list[str], repeat: int) -> None:
    print(f"cstack bench; median of {repeat} whole processes, wall / CPU ms (CPU from rusage); load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cpus")
    sizes = list(dict.fromkeys(json.dumps(row["at"], sort_keys=True) for row in rows))
    for size in sizes:
        at = json.loads(size)
        print(
            f"\nPLAN.md: {at['closed_tasks']} closed tasks + {OPEN_TASKS} open ({at['plan_bytes'] // 1024} KiB); "
            f"MEMORY.md: {at['memory_entries']} entries ({at['memory_bytes'] // 1024} KiB)"
        )
        print(f"  {'':<30}" + "".join(f"{label + ' (wall / CPU, CPU over start-up)':>44}" for label in installs))
        for measure in dict.fromkeys(row["measure"] for row in rows):
            cells = []
            for label in installs:
                row = next(r for r in rows if json.dumps(r["at"], sort_keys=True) == size and r["measure"] == measure and r["install"] == label)
                cells.append(f"{row['wall_ms']:>12.1f} / {row['cpu_ms']:>6.1f}   (+{row['over_floor_cpu_ms']:>6.1f})")
            print(f"  {measure:<30}" + "".join(f"{cell:>44}" for cell in cells))
    print("\ntarget: status, add, done <= start-up + 30 ms")


def issue_rows(size: int, *, repeat: int = 5, baseline: str | None = None) -> list[shared.Row]:
    """Issue 29's cstack row at a corpus of `size` (10,000-class: PLAN.md with 5,000 closed tasks,
    MEMORY.md with 10,000 entries): status, add and done as processes beside `cstack --version`
    of the same installation, measured alternately with `baseline` (another `cstack`) if given."""
    installs = {"this": str(Path(sys.executable).with_name("cstack")), **({"baseline": baseline} if baseline else {})}
    out = []
    for row in measure(installs, [(size // 2, size)], repeat):
        if row["target"] is None:
            continue
        out.append(
            shared.Row(
                measure=row["measure"],
                size=size,
                value=row["wall_ms"],
                unit="ms",
                compare=shared.OVER,
                limit=30,
                floor=row["floor"]["wall_ms"],
                floor_name="start-up: cstack --version",
                build=row["install"],
                cpu=row["cpu_ms"],
                note=f"PLAN.md {size // 2} closed tasks, MEMORY.md {size} entries",
            )
        )
    return out


def rows_main() -> None:
    """`--rows-only`: issue 29's rows at each `--sizes`, for `bench/all.py` (see bench/rows.py)."""
    parser = argparse.ArgumentParser(description="issue 29's cstack rows")
    shared.add_common_arguments(parser, default_sizes=(10_000,))
    parser.add_argument("--rows-only", action="store_true", required=True)
    args = parser.parse_args()
    moss = shared.baseline_moss(args.baseline)
    baseline = str(Path(moss).with_name("cstack")) if moss else None
    found = [row for size in shared.sizes(args.sizes, (10_000,)) for row in issue_rows(size, repeat=3 if args.quick else 7, baseline=baseline)]
    print(f"cstack rows; medians of whole processes, wall ms; {shared.load()} (a shared machine: noisy)")
    shared.print_rows(found)
    shared.write_rows(args.json, found)


def main() -> None:
    if "--rows-only" in sys.argv[1:]:
        rows_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="500:1000,5000:10000", help="CLOSED:ENTRIES pairs, comma-separated")
    parser.add_argument("--repeat", type=int, default=15, help="whole processes per figure")
    parser.add_argument("--baseline", default=None, help="another installation's cstack (the 'before'), run alternately")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON document")
    args = parser.parse_args()
    installs = {"after": str(Path(sys.executable).with_name("cstack")), **({"before": args.baseline} if args.baseline else {})}
    sizes = [(int(a), int(b)) for a, b in (part.split(":") for part in args.sizes.split(","))]
    found = measure(installs, sizes, args.repeat)
    if args.json:
        print(json.dumps({"bench": "cstack", "load": os.getloadavg()[0], "rows": found}, indent=1))
    else:
        print_table(found, list(installs), args.repeat)


if __name__ == "__main__":
    main()

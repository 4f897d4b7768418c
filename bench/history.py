"""History views on a long git history: `moss history NAME` and `moss fetch NAME --at REV` as
whole processes in a repository of tens of thousands of commits touching `.moss/`, beside
floors measured in the same run.

Run: .venv/bin/python bench/history.py [--commits 10000,50000] [--repeat 9]
     [--baseline /tmp/base/.venv/bin/moss] [--json]
     .venv/bin/python bench/history.py --rows-only [--sizes 10000] [--quick] [--json ROWS]
     (issue 29's rows, for bench/all.py: size 10000 is 50,000 commits; `rows(size)` gives
     them as dicts)

The repository is written with `git fast-import` (seconds for 50,000 commits), given the
commit graph that `git gc --auto` writes in a repository that grew a commit at a time (without
it, each walk back through the history parses every commit: `git rev-parse HEAD~49960` takes
about 200 ms instead of 10), and kept in a cache folder keyed by its size
(`$TMPDIR/moss-bench-cache/`), then cloned (hard links) for each run. Its history is a year of a workspace: 2,000 capsules, each commit changing one capsule and
appending a line to the board's activity log; one capsule (`handoff`) changes in one commit of
every 25, so it has thousands of versions, another (`quiet note`) changed twice, early on.

Measures (median of `--repeat` whole processes; wall / CPU of the child from its rusage):
- `moss history handoff` (every version, the default) and `--limit 20`;
- `moss history "quiet note"`: two versions, both deep in the history;
- `moss fetch handoff --at HEAD~N` for an N near the start, and `moss fetch --id ID --at ...`;
- `moss history handoff --limit 20` cold: with the history record (`.moss/cache/history.db`,
  which the views above find made by the warm-up run) deleted before each run, so each run
  builds it from the whole history.
Floors, same run: `moss version` (start-up), `git log -n 20 -- PATH` and `git log --follow --
PATH` for the hot capsule (what git itself costs for the walk), `git rev-parse`, and for the
cold build `git rev-list HEAD | git diff-tree --stdin` (git reading every commit's change once).
Target: each history view <= 300 ms; the cold build <= 1.5x its floor.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
CAPSULES = 2000
HOT_EVERY = 25
TEXT = "## Objective\nKeep the invoice pipeline correct.\n\n## Current status\nStep {n} of the rollout.\n\n## Decisions\n- Round once per invoice.\n\n## Next actions\n- Check step {n}.\n\n## Key locations\n- src/billing/invoice.py\n\n## Open questions\n- none\n"


def cache_root() -> Path:
    return Path(os.environ.get("MOSS_BENCH_CACHE") or Path(tempfile.gettempdir()) / "moss-bench-cache")


def ulid_of(number: int) -> str:
    return f"01KF{number:022d}"


def capsule_file(name: str, number: int, step: int) -> bytes:
    stamp = f"2025-{1 + step // 4500 % 12:02d}-{1 + step % 28:02d}T{step % 24:02d}:00:00Z"
    head = f"---\nid: {ulid_of(number)}\nworkspace: default\nname: {name}\ncreated_at: 2025-01-01T00:00:00Z\nupdated_at: {stamp}\n---\n"
    return (head + TEXT.format(n=step)).encode()


def slot(name: str) -> str:
    return ".moss/capsules/default/" + name.replace(" ", "+") + ".md"


def build_repo(commits: int) -> Path:
    """The repository with `commits` commits, generated once per size into the cache folder."""
    folder = cache_root() / f"history-{commits}-v2"
    if (folder / ".git" / "bench-done").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True, env=env)
    started = time.perf_counter()
    importer = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=folder, stdin=subprocess.PIPE, env=env)
    assert importer.stdin is not None
    out = importer.stdin
    log_lines: list[bytes] = []
    when = 1735689600  # 2025-01-01
    for step in range(commits):
        when += 630  # about 50,000 commits a year
        changes: list[tuple[str, bytes]] = []
        if step % HOT_EVERY == 0:
            changes.append((slot("handoff"), capsule_file("handoff", 0, step)))
            summary = f"handoff: step {step}"
        elif step in (7, 11):
            changes.append((slot("quiet note"), capsule_file("quiet note", 1, step)))
            summary = f"quiet note: step {step}"
        else:
            number = 2 + step % CAPSULES
            changes.append((slot(f"note {number}"), capsule_file(f"note {number}", number, step)))
            summary = f"note {number}: step {step}"
        log_lines.append(b'{"ts":"%d","event":"NOTE_SAVED","step":%d}\n' % (when, step))
        if len(log_lines) > 200:
            del log_lines[:100]  # the blob stays small; the history is what matters here
        changes.append((".moss/board/activity.jsonl", b"".join(log_lines)))
        message = summary.encode()
        out.write(b"commit refs/heads/main\n")
        out.write(b"committer Bench <bench@example.invalid> %d +0000\n" % when)
        out.write(b"data %d\n%s\n" % (len(message), message))
        if step == 0:
            out.write(b"deleteall\n")
        for path, data in changes:
            out.write(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
        out.write(b"\n")
    out.close()
    if importer.wait() != 0:
        raise SystemExit("git fast-import failed")
    subprocess.run(["git", "checkout", "-q", "main"], cwd=folder, check=True, env=env)
    subprocess.run(["git", "reset", "-q", "--hard"], cwd=folder, check=True, env=env)
    # What `git gc --auto` leaves in any repository that grew commit by commit (it runs every
    # few thousand loose objects, and writes the commit graph by default since git 2.24).
    subprocess.run(["git", "commit-graph", "write", "--reachable"], cwd=folder, check=True, env=env, stdout=subprocess.DEVNULL)
    (folder / ".git" / "bench-done").touch()
    print(f"(generated {commits} commits in {time.perf_counter() - started:.1f} s into {folder})", file=sys.stderr)
    return folder


COLD = "cold: "  # a case whose label starts so runs with no history record


def timed(command: list[str], cwd: Path, env: dict[str, str], *, cold: bool = False) -> tuple[float, float]:
    """(wall ms, CPU ms) of one whole process (CPU: the change in the children's rusage).
    `cold`: the history record is deleted first, so the process builds it."""
    if cold:
        for leftover in (cwd / ".moss" / "cache").glob("history.db*"):
            leftover.unlink()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-400:]}")
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


# The floors beside a view's fixed target (<= 300 ms): they say what git itself costs, and
# the row is met or not without them. `--quick` times them once; the two walk the whole history.
FLOORS_FOR_SHOW = ("floor: git log --follow -- PATH", "floor: git log --follow -- QUIET")
COLD_FLOOR = "floor: git rev-list HEAD | git diff-tree --stdin"


def measure(installs: dict[str, str], sizes: list[int], repeat: int, *, quick: bool = False) -> list[dict[str, Any]]:
    """Median wall and CPU ms of every case, `repeat` runs each after one warm-up run. With
    `quick`, the floors only shown (FLOORS_FOR_SHOW) run once, and the cases that read the
    whole history on every run (the cold builds and their floor) get no warm-up run: the
    bytecode and git's pages are warm from the other cases by then."""
    measured: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="moss-bench-history-") as name:
        tmp = Path(name)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        env.update(PYTHONPYCACHEPREFIX=str(tmp / "pycache"), HOME=str(tmp), GIT_CONFIG_NOSYSTEM="1")
        for commits in sizes:
            source = build_repo(commits)
            work = tmp / f"repo-{commits}"
            subprocess.run(["git", "clone", "-q", "--local", str(source), str(work)], check=True, env=env)
            early = commits - 40  # HEAD~early: the first handoff versions
            cases: dict[str, list[str]] = {
                "floor: git rev-parse HEAD": ["git", "rev-parse", "HEAD"],
                f"floor: git rev-parse HEAD~{early}": ["git", "rev-parse", f"HEAD~{early}"],
                "floor: git log -n 20 --follow -- PATH": ["git", "log", "-n", "20", "--follow", "--format=%H", "--", slot("handoff")],
                "floor: git log --follow -- PATH": ["git", "log", "--follow", "--format=%H", "--", slot("handoff")],
                "floor: git log --follow -- QUIET": ["git", "log", "--follow", "--format=%H", "--", slot("quiet note")],
                COLD_FLOOR: [
                    "sh",
                    "-c",
                    "git rev-list HEAD | git diff-tree --stdin -r --root --no-renames -z -- .moss/capsules/",
                ],
            }
            for label, moss in installs.items():
                cases[f"start-up: moss version ({label})"] = [moss, "version"]
                cases[f"moss history handoff ({label})"] = [moss, "history", "handoff", "--json"]
                cases[f"moss history handoff --limit 20 ({label})"] = [moss, "history", "handoff", "--limit", "20", "--json"]
                cases[f"moss history 'quiet note' ({label})"] = [moss, "history", "quiet note", "--json"]
                cases[f"moss fetch handoff --at HEAD~{early} ({label})"] = [moss, "fetch", "handoff", "--at", f"HEAD~{early}", "--json"]
                cases[f"moss fetch --id ID --at HEAD~{early} ({label})"] = [moss, "fetch", "--id", ulid_of(0), "--at", f"HEAD~{early}", "--json"]
                cases[f"{COLD}moss history handoff --limit 20 ({label})"] = [moss, "history", "handoff", "--limit", "20", "--json"]
            whole_history = {case for case in cases if case.startswith(COLD) or case == COLD_FLOOR}
            for case, command in cases.items():  # warm the bytecode cache, git's object cache and the history record
                if not (quick and case in whole_history):
                    timed(command, work, env, cold=case.startswith(COLD))
            rewarm = [str(Path(sys.executable).with_name("moss")), "history", "handoff", "--json"]
            timed(rewarm, work, env)  # the record as the views find it after a first use
            times: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
            for turn in range(repeat):
                for case, command in cases.items():  # alternate, so load hits all alike
                    if quick and turn > 0 and case in FLOORS_FOR_SHOW:
                        continue
                    times[case].append(timed(command, work, env, cold=case.startswith(COLD)))
                    if case.startswith(COLD):
                        timed(rewarm, work, env)  # the warm views again find every version's id kept
            for case, values in times.items():
                measured.append(
                    {
                        "at": {"commits": commits, "versions_of_handoff": -(-commits // HOT_EVERY)},
                        "measure": case,
                        "wall_ms": statistics.median(v[0] for v in values),
                        "cpu_ms": statistics.median(v[1] for v in values),
                        "target": "<= 300 ms" if case.startswith(("moss history", "moss fetch")) else "<= 1.5x floor" if case.startswith(COLD) else None,
                    }
                )
    return measured


def issue_rows(size: int, *, repeat: int = 3, baseline: str | None = None, quick: bool = False) -> list[shared.Row]:
    """Issue 29's history row at a corpus of `size` (10,000-class: 50,000 commits touching
    `.moss/`), each view beside git's own cost of the same walk, measured in the same run
    (alternately with `baseline`, another installation's `moss`, if given)."""
    commits = 5 * size
    installs = {"this": str(Path(sys.executable).with_name("moss")), **({"baseline": baseline} if baseline else {})}
    found = {row["measure"]: row for row in measure(installs, [commits], repeat, quick=quick)}
    early = commits - 40
    views = [
        ("moss history NAME (every version: 1 commit in 25)", "moss history handoff", "floor: git log --follow -- PATH"),
        ("moss history NAME --limit 20", "moss history handoff --limit 20", "floor: git log -n 20 --follow -- PATH"),
        ("moss history NAME (2 versions, deep)", "moss history 'quiet note'", "floor: git log --follow -- QUIET"),
        ("moss fetch NAME --at (near the root)", f"moss fetch handoff --at HEAD~{early}", f"floor: git rev-parse HEAD~{early}"),
        ("moss fetch --id ID --at (near the root)", f"moss fetch --id ID --at HEAD~{early}", f"floor: git rev-parse HEAD~{early}"),
    ]
    out = []
    for label in installs:
        cold = found[f"{COLD}moss history handoff --limit 20 ({label})"]
        floor_case = COLD_FLOOR
        out.append(
            shared.Row(
                measure="moss history NAME --limit 20, cold (first build of the history record)",
                size=size,
                value=cold["wall_ms"],
                unit="ms",
                compare=shared.RATIO,
                limit=1.5,
                floor=found[floor_case]["wall_ms"],
                floor_name=floor_case.removeprefix("floor: "),
                build=label,
                cpu=cold["cpu_ms"],
                note=f"{commits} commits touching .moss/",
            )
        )
        for measure_name, case, floor in views:
            row = found[f"{case} ({label})"]
            out.append(
                shared.Row(
                    measure=measure_name,
                    size=size,
                    value=row["wall_ms"],
                    unit="ms",
                    compare=shared.AT_MOST,
                    limit=300,
                    floor=found[floor]["wall_ms"],
                    floor_name=floor.removeprefix("floor: "),
                    build=label,
                    cpu=row["cpu_ms"],
                    note=f"{commits} commits touching .moss/",
                )
            )
    return out


def rows_main() -> None:
    """`--rows-only`: issue 29's rows at each `--sizes`, for `bench/all.py` (see bench/rows.py)."""
    parser = argparse.ArgumentParser(description="issue 29's history rows")
    shared.add_common_arguments(parser, default_sizes=(10_000,))
    parser.add_argument("--rows-only", action="store_true", required=True)
    args = parser.parse_args()
    baseline = shared.baseline_moss(args.baseline)
    found = [
        row for size in shared.sizes(args.sizes, (10_000,)) for row in issue_rows(size, repeat=3 if args.quick else 7, baseline=baseline, quick=args.quick)
    ]
    print(f"history rows; medians of whole processes, wall ms; {shared.load()} (a shared machine: noisy)")
    shared.print_rows(found)
    shared.write_rows(args.json, found)


def main() -> None:
    if "--rows-only" in sys.argv[1:]:
        rows_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--commits", default="10000,50000", help="history sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=9, help="whole processes per figure")
    parser.add_argument("--baseline", default=None, help="another installation's moss (the 'before'), run alternately")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON document")
    args = parser.parse_args()
    installs = {"after": str(Path(sys.executable).with_name("moss")), **({"before": args.baseline} if args.baseline else {})}
    found = measure(installs, [int(part) for part in args.commits.split(",")], args.repeat)
    if args.json:
        print(json.dumps({"bench": "history", "load": os.getloadavg()[0], "rows": found}, indent=1))
        return
    print(f"history bench; median of {args.repeat} whole processes, wall / CPU ms; load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cpus")
    for commits in dict.fromkeys(row["at"]["commits"] for row in found):
        chosen = [row for row in found if row["at"]["commits"] == commits]
        print(f"\n{commits} commits touching .moss/ (handoff: {chosen[0]['at']['versions_of_handoff']} versions)")
        for row in chosen:
            print(f"  {row['measure']:<52} {row['wall_ms']:>9.1f} / {row['cpu_ms']:>7.1f}")
    print("\ntarget: each history view <= 300 ms")


if __name__ == "__main__":
    main()

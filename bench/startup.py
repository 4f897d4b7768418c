"""Start-up of the `moss` command as whole processes: `moss version`, `moss fetch`, `moss --help`,
beside the floors of the same run.

Run: .venv/bin/python bench/startup.py [--sizes 1000,10000] [--repeat 30] [--baseline /work/main/.venv/bin/moss]
     .venv/bin/python bench/startup.py --rows-only [--quick] [--json ROWS]  (issue 29's help rows)

Each figure is the median of `--repeat` runs of a whole process with a bytecode cache in the
temporary folder (PYTHONPYCACHEPREFIX, warmed once; this environment otherwise sets
PYTHONDONTWRITEBYTECODE). With `--baseline`, that installation's `moss` runs alternately with
this checkout's, so both see the same machine load. `moss fetch` reads one capsule by name in a
workspace of each corpus size. Floors: `python -c pass` and `python -c "import typer"`.
`--rows-only` measures issue 29's rows: `moss --help` and `cstack --help` (no corpus: the size
is 0) beside the interpreter's start-up `python -c pass`, best of the runs taken in turns.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared

# bench/all.py runs this script with these arguments for its rows of issue 29's table.
ROWS_ARGS = ["--rows-only"]
KEEPS_ITS_FILES = True  # what it writes stays in rows.scratch() folders until bench/all.py ends

TEXT = "## Objective\nShip.\n\n## Current status\nHalf.\n\n## Decisions\n- a\n\n## Next actions\n- b\n\n## Key locations\n- c.py\n\n## Open questions\n- none\n"


def build(root: Path, count: int) -> None:
    """A project with `count` capsule files in the workspace `default`, written directly."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    folder = root / ".moss" / "capsules" / "default"
    folder.mkdir(parents=True)
    for index in range(count):
        ulid = f"01KF{index:022d}"
        head = f"---\nid: {ulid}\nworkspace: default\nname: note {index}\ncreated_at: 2026-01-19T10:00:00Z\nupdated_at: 2026-01-19T10:00:00Z\n---\n"
        (folder / f"note+{index}.md").write_text(head + TEXT)


def once(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def help_rows(repeat: int, baseline: str | None) -> list[shared.Row]:
    """Issue 29's rows `moss --help` and `cstack --help` as whole processes (bytecode cached,
    warmed once), of this installation and the baseline's, beside the interpreter's start-up
    measured in the same run; best wall time of `repeat` runs taken in turns."""
    bins = {"this": Path(sys.executable).parent, **({"baseline": Path(baseline).parent} if baseline else {})}
    with shared.scratch("bench-startup-rows-") as tmp:
        env = {**shared.process_env(tmp / "pycache"), "HOME": str(tmp)}
        cases = {"floor": [sys.executable, "-c", "pass"]}
        for build, folder in bins.items():
            for tool in ("moss", "cstack"):
                cases[f"{build} {tool}"] = [str(folder / tool), "--help"]
        for command in cases.values():  # warm the bytecode cache
            shared.run_process(command, cwd=tmp, env=env)
        runs: dict[str, list[shared.Run]] = {label: [] for label in cases}
        for _ in range(repeat):
            for label, command in cases.items():  # alternate, so load hits all alike
                runs[label].append(shared.run_process(command, cwd=tmp, env=env))
    floor = min(run.wall for run in runs["floor"])
    print(f"{shared.load()}; best of {repeat} whole processes, ms wall: python -c pass {floor:.0f}")
    found = []
    for label, done in runs.items():
        if label == "floor":
            continue
        build, tool = label.split(" ")
        best = min(done, key=lambda run: run.wall)
        print(f"  {tool} --help ({build}) {best.wall:.0f} (CPU {best.cpu:.0f}), median {statistics.median(run.wall for run in done):.0f}")
        found.append(
            shared.Row(
                f"{tool} --help",
                size=0,
                build=build,
                value=best.wall,
                cpu=best.cpu,
                unit="ms",
                compare=shared.OVER,
                limit=50,
                floor=floor,
                floor_name="python -c pass",
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared.add_common_arguments(parser, default_sizes=(1000, 10000))
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--rows-only", action="store_true", help="only issue 29's rows: moss --help and cstack --help (no corpus)")
    args = parser.parse_args()
    args.baseline = shared.baseline_moss(args.baseline)
    if args.rows_only:
        found = help_rows(5 if args.quick else min(args.repeat, 15), args.baseline)
        shared.print_rows(found)
        shared.write_rows(args.json, found)
        return
    installs = {"after": str(Path(sys.executable).with_name("moss")), **({"before": args.baseline} if args.baseline else {})}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as name:
        tmp = Path(name)
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "HOME": str(tmp)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        floors = {"python -c pass": [sys.executable, "-c", "pass"], "python -c 'import typer'": [sys.executable, "-c", "import typer"]}
        for size in shared.sizes(args.sizes, (1000, 10000)):
            root = tmp / f"project-{size}"
            build(root, size)
            cases: dict[str, list[str]] = dict(floors)
            for label, moss in installs.items():
                cases[f"moss version ({label})"] = [moss, "version"]
                cases[f"moss fetch ({label})"] = [moss, "fetch", f"note {size // 2}"]
                cases[f"moss --help ({label})"] = [moss, "--help"]
            for command in cases.values():  # warm the bytecode cache
                once(command, root, env)
            times: dict[str, list[float]] = {label: [] for label in cases}
            for _ in range(args.repeat):
                for label, command in cases.items():  # alternate, so load hits all alike
                    times[label].append(once(command, root, env))
            print(f"corpus: {size} capsules; median of {args.repeat} whole processes, bytecode cached")
            for label, values in times.items():
                print(f"  {label:<30} {statistics.median(values):7.1f} ms")


if __name__ == "__main__":
    main()

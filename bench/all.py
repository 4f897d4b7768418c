"""Every row of issue 29's table in one run: each bench below measures its rows at each size
beside floors from the same run, and this prints one table with the growth exponent of each
row between sizes.

Run: .venv/bin/python bench/all.py [--quick] [--sizes 10000 100000] [--baseline /path/to/other/checkout/.venv/bin/moss] [--only NAME ...] [--json rows.json]

`--quick` runs every row at 10,000 only, with fewer repetitions (a few minutes). `--sizes`
(or `--size`) picks the corpus sizes: `--size 100000` runs the 100k corpus, `--size 200` a tiny
one (the test suite's smoke run). `--json PATH` also writes every row as one JSON list (`-`:
to stdout, the progress then going to stderr), each row with the name of its bench added. `--baseline` names another installation's
`moss` (or its `python`, or its checkout): the benches measure it beside this one, and the
table shows both ("before" and "after"). The growth exponent of a row is log(value at the
larger size / value at the smaller) / log(larger / smaller): 1.0 grows as the corpus does; a
rate is turned into time per run first. Each bench prints its own figures as it goes; the
table follows at the end. The first and last lines give the machine's speed as one fixed
pure-Python loop (`rows.reference_ms`): rows with an absolute target move with it between
runs on different machines or days, rows against a floor of the same run mostly do not.

HOW A BENCH JOINS THIS TABLE (the convention; no edit of this file is needed). A script
`bench/NAME.py` takes part when it assigns, at its top level, a literal list of strings to
`ROWS_ARGS`: the arguments that make it measure only its rows of issue 29's table, e.g.

    ROWS_ARGS = ["--rows-only"]

This script finds such scripts by reading their source (it imports none of them) and runs
each as its own process, in three groups, each in the order of the names (`run_order`):
first the scripts that also assign `KEEPS_ITS_FILES = True` (they write their many files only
in `rows.scratch()` folders, so they free no inodes before the run ends), then those whose
ROWS_ARGS hold `--settle` (they time the creation of thousands of files, once a minute has
passed since this script started with nothing deleted: on ext4 without a journal, freed inodes
tax every create nearby for a minute; the first group fills that minute), then the rest:

    python bench/NAME.py *ROWS_ARGS --sizes N [N ...] --json PATH [--quick] [--baseline MOSS]

The script measures each size beside its floors from the same run, writes its rows to PATH
as one JSON list (`rows.write_rows`; a row is `rows.Row`: measure, size, build, value, unit,
floor, floor_name, ratio, over, target, met, cpu, note) and exits 0. A bench that writes many
files writes them in `rows.scratch()`, which this script removes only when the run ends.
`rows.add_common_arguments`
adds those four options; `rows.cached` and `rows.copy_of` give it a corpus generated once per
size; `rows.run_process(..., peak=True)` times a child with its own peak memory. A bench that
fails (non-zero exit, no PATH written) is reported as failed and the others still run.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared


class Bench(NamedTuple):
    name: str
    script: Path
    rows_args: list[str]
    keeps_its_files: bool = False


def discover(folder: Path = shared.BENCH) -> list[Bench]:
    """The benches that take part (see the module's docstring), in the order of their names.
    A script is read, never imported."""
    found = []
    for script in sorted(folder.glob("*.py")):
        try:
            tree = ast.parse(script.read_text(encoding="utf-8"), filename=str(script))
        except SyntaxError:
            continue
        assigned: dict[str, object] = {}
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id in ("ROWS_ARGS", "KEEPS_ITS_FILES"):
                    assigned[target.id] = ast.literal_eval(node.value)  # type: ignore[arg-type]
        if "ROWS_ARGS" not in assigned:
            continue
        value, keeps = assigned["ROWS_ARGS"], assigned.get("KEEPS_ITS_FILES", False)
        if not (isinstance(value, list) and all(isinstance(word, str) for word in value)):
            raise SystemExit(f"{script}: ROWS_ARGS must be a list of strings")
        if not isinstance(keeps, bool):
            raise SystemExit(f"{script}: KEEPS_ITS_FILES must be True or False")
        found.append(Bench(script.stem, script, value, keeps))
    return found


def run_order(benches: list[Bench]) -> list[Bench]:
    """The order to run `benches` in: first those that keep what they write until the run ends
    (`KEEPS_ITS_FILES`), then those that wait out earlier deletions before they time the
    creation of thousands of files (`--settle` in their ROWS_ARGS, bench/import.py), so they
    find the settling minute spent and nothing deleted in it; then the rest. Each group in
    name order."""

    def group(bench: Bench) -> int:
        return 0 if bench.keeps_its_files else 1 if "--settle" in bench.rows_args else 2

    return sorted(benches, key=group)


def exponent(small: dict, large: dict) -> float | None:
    """The growth exponent of one row between two sizes (of time: a rate is inverted)."""
    a, b = small["value"], large["value"]
    if not a or not b or large["size"] == small["size"]:
        return None
    if small["compare"] == shared.AT_LEAST:  # items/s: time per run is size / rate
        a, b = small["size"] / a, large["size"] / b
    return math.log(b / a) / math.log(large["size"] / small["size"])


def table(found: list[dict]) -> None:
    """One line per (measure, size, build): figure, floor, ratio and excess over the floor,
    target and whether it is met; then the growth exponent per (measure, build)."""
    builds = list(dict.fromkeys(row["build"] for row in found))
    order = list(dict.fromkeys(row["measure"] for row in found))
    width = max([len(m) for m in order] + [len("measure")])
    build_head = f" {'build':<8}" if len(builds) > 1 else ""
    print(f"\n{'measure':<{width}} {'size':>7}{build_head} {'figure':>12} {'floor':>12} {'ratio':>6} {'over':>9}  {'target':<22} met?  floor is")
    for measure in order:
        mine = [row for row in found if row["measure"] == measure]
        for size in sorted({row["size"] for row in mine}):
            for build in builds:
                row = next((r for r in mine if r["size"] == size and r["build"] == build), None)
                if row is None:
                    continue
                unit = row["unit"]
                floor = "-" if row["floor"] is None else f"{row['floor']:.1f} {unit}"
                ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
                over = "-" if row["over"] is None or row["compare"] != shared.OVER else f"{row['over']:+.0f} {unit}"
                build_cell = f" {build:<8}" if len(builds) > 1 else ""
                print(
                    f"{measure:<{width}} {size or '-':>7}{build_cell} {row['value']:>9.1f} {unit:<2} {floor:>12} {ratio:>6} {over:>9}  {row['target']:<22} "
                    f"{'yes ' if row['met'] else 'NO  '}  {row['floor_name']}"
                )
        for build in builds:
            series = sorted((r for r in mine if r["build"] == build), key=lambda r: r["size"])
            if len(series) >= 2:
                grown = exponent(series[0], series[-1])
                if grown is not None:
                    label = f"{build} " if len(builds) > 1 else ""
                    print(f"{'':<{width}} {'growth':>7} {label}exponent {grown:.2f} ({series[0]['size']} -> {series[-1]['size']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every row at 10,000 only, fewer repetitions")
    parser.add_argument("--sizes", "--size", nargs="+", default=None, help="corpus sizes (default 10000 100000; --quick: 10000)")
    parser.add_argument("--baseline", default=None, help="another checkout's moss or python (its .venv/bin/...), measured beside this one")
    benches = discover()
    parser.add_argument("--only", nargs="+", default=None, help="only these benches: " + ", ".join(bench.name for bench in benches))
    parser.add_argument("--json", type=str, default=None, help="also write every row to this file as one JSON list ('-': stdout)")
    args = parser.parse_args()
    # With --json -, stdout carries the JSON only: the progress and the table go to stderr.
    say = sys.stderr if args.json == "-" else sys.stdout
    sizes = shared.sizes(args.sizes, shared.QUICK_SIZES if args.quick else shared.DEFAULT_SIZES)
    baseline = shared.baseline_moss(args.baseline)
    unknown = set(args.only or ()) - {bench.name for bench in benches}
    if unknown:
        raise SystemExit(f"--only: no bench named {', '.join(sorted(unknown))} (there are: {', '.join(bench.name for bench in benches)})")
    chosen = run_order([bench for bench in benches if args.only is None or bench.name in args.only])
    print(f"bench/all.py: sizes {', '.join(map(str, sizes))}; {shared.load()}; python {sys.version.split()[0]}; {shared.speed()}", file=say, flush=True)
    found: list[dict] = []
    failed: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="moss-bench-all-") as name:
        kept = Path(name) / "kept"
        kept.mkdir()
        bench_env = {**os.environ, shared.KEEP_ENV: str(kept), shared.QUIET_SINCE_ENV: repr(time.time())}
        for bench, script, extra, _keeps in chosen:
            out = Path(name) / f"{bench}.json"
            command = [sys.executable, str(script), *extra, "--sizes", *map(str, sizes), "--json", str(out)]
            if args.quick:
                command.append("--quick")
            if baseline:
                command += ["--baseline", baseline]
            print(f"\n=== {bench}: {' '.join(command[1:])}   ({shared.load()})", file=say, flush=True)
            began = time.perf_counter()
            done = subprocess.run(command, check=False, stdout=say, env=bench_env)
            if done.returncode != 0 or not out.exists():
                print(f"=== {bench} failed (exit {done.returncode})", file=say, flush=True)
                failed.append(bench)
                continue
            found.extend({**row, "bench": bench} for row in json.loads(out.read_text(encoding="utf-8")))
            print(f"=== {bench}: {time.perf_counter() - began:.0f}s", file=say, flush=True)
    print(f"\nall rows, {time.perf_counter() - started:.0f}s in all; {shared.load()} at the end; {shared.speed()}", file=say)
    with contextlib.redirect_stdout(say):
        table(found)
    if failed:
        print(f"\nfailed benches: {', '.join(failed)}", file=say)
    if args.json == "-":
        print(json.dumps(found, indent=1))
    elif args.json:
        Path(args.json).write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

"""Every row of issue 29's table in one run: each bench below measures its rows at each size
beside floors from the same run, and this prints one table with the growth exponent of each
row between sizes.

Run: .venv/bin/python bench/all.py [--quick] [--sizes 10000 100000] [--baseline /path/to/other/checkout/.venv/bin/moss] [--only NAME ...] [--out rows.json]

`--quick` runs every row at 10,000 only, with fewer repetitions (a few minutes). `--baseline`
names another installation's `moss` (or its `python`, or its checkout): the benches measure it
beside this one, and the table shows both ("before" and "after"). The growth exponent of a
row is log(value at the larger size / value at the smaller) / log(larger / smaller): 1.0 grows
as the corpus does; a rate is turned into time per run first. Each bench prints its own figures
as it goes; the table follows at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared

# The benches, one entry each: (name, script in bench/, arguments). This script adds `--sizes`,
# `--json PATH`, and `--quick` and `--baseline` when given; each script writes its rows to PATH.
BENCHES: list[tuple[str, str, list[str]]] = [
    ("index", "index.py", ["--rows-only"]),
    ("listing", "capsules.py", ["--rows-only"]),
    ("import", "import.py", ["--rows-only"]),
    ("migrate", "migrate.py", ["--rows-only"]),
]


def exponent(small: dict, large: dict) -> float | None:
    """The growth exponent of one row between two sizes (of time: a rate is inverted)."""
    a, b = small["value"], large["value"]
    if not a or not b or large["size"] == small["size"]:
        return None
    if small["compare"] == shared.AT_LEAST:  # items/s: time per run is size / rate
        a, b = small["size"] / a, large["size"] / b
    return math.log(b / a) / math.log(large["size"] / small["size"])


def table(found: list[dict]) -> None:
    """One line per (measure, build, size), then the exponent per (measure, build)."""
    builds = list(dict.fromkeys(row["build"] for row in found))
    order = list(dict.fromkeys(row["measure"] for row in found))
    print(f"\n{'measure':<48} {'size':>7} " + " ".join(f"{b + ' value':>16} {b + ' ratio':>14}" for b in builds) + "   floor            target")
    for measure in order:
        mine = [row for row in found if row["measure"] == measure]
        for size in sorted({row["size"] for row in mine}):
            cells = []
            floor_text = target = ""
            for build in builds:
                row = next((r for r in mine if r["size"] == size and r["build"] == build), None)
                if row is None:
                    cells.append(f"{'-':>16} {'-':>14}")
                    continue
                value = f"{row['value']:.1f} {row['unit']}"
                ratio = "-"
                if row["compare"] == shared.OVER and row["over"] is not None:
                    ratio = f"{row['over']:+.0f} {row['unit']}"
                elif row["ratio"] is not None:
                    ratio = f"{row['ratio']:.2f}x"
                cells.append(f"{value:>16} {ratio + (' ok' if row['met'] else ' NO'):>14}")
                if row["floor"] is not None and build == "this":
                    floor_text = f"{row['floor']:.1f} {row['unit']} {row['floor_name']}"
                target = row["target"]
            print(f"{measure:<48} {size:>7} " + " ".join(cells) + f"   {floor_text:<16} {target}")
        for build in builds:
            series = sorted((r for r in mine if r["build"] == build), key=lambda r: r["size"])
            if len(series) >= 2:
                grown = exponent(series[0], series[-1])
                if grown is not None:
                    print(f"{'':<48} {'growth':>7} {build}: exponent {grown:.2f} ({series[0]['size']} -> {series[-1]['size']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every row at 10,000 only, fewer repetitions")
    parser.add_argument("--sizes", nargs="+", default=None, help="corpus sizes (default 10000 100000; --quick: 10000)")
    parser.add_argument("--baseline", default=None, help="another checkout's moss or python (its .venv/bin/...), measured beside this one")
    parser.add_argument("--only", nargs="+", default=None, help="only these benches: " + ", ".join(name for name, _, _ in BENCHES))
    parser.add_argument("--out", type=Path, default=None, help="also write every row to this JSON file")
    args = parser.parse_args()
    sizes = shared.sizes(args.sizes, shared.QUICK_SIZES if args.quick else shared.DEFAULT_SIZES)
    baseline = shared.baseline_moss(args.baseline)
    chosen = [bench for bench in BENCHES if args.only is None or bench[0] in args.only]
    print(f"bench/all.py: sizes {', '.join(map(str, sizes))}; {shared.load()}; python {sys.version.split()[0]}", flush=True)
    found: list[dict] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="moss-bench-all-") as name:
        for bench, script, extra in chosen:
            out = Path(name) / f"{bench}.json"
            command = [sys.executable, str(shared.BENCH / script), *extra, "--sizes", *map(str, sizes), "--json", str(out)]
            if args.quick:
                command.append("--quick")
            if baseline:
                command += ["--baseline", baseline]
            print(f"\n=== {bench}: {' '.join(command[1:])}   ({shared.load()})", flush=True)
            began = time.perf_counter()
            done = subprocess.run(command, check=False)
            if done.returncode != 0 or not out.exists():
                print(f"=== {bench} failed (exit {done.returncode})", flush=True)
                continue
            found.extend(json.loads(out.read_text(encoding="utf-8")))
            print(f"=== {bench}: {time.perf_counter() - began:.0f}s", flush=True)
    print(f"\nall rows, {time.perf_counter() - started:.0f}s in all; {shared.load()} at the end")
    table(found)
    if args.out:
        args.out.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

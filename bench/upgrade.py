"""`moss upgrade` on a workspace of older files, beside the floor of rewriting them durably.

For each size, `corpus.generate_workspace` lays out insights, sessions, capsules, messages and
the cstack files as an older version wrote them (no format marker: version 1). Each command
runs as a whole process with a bytecode cache, wall and CPU time (user + system) in ms:

- `moss upgrade --dry-run`: reads and checks every file, writes nothing;
- `moss upgrade`: every older file rewritten at its kind's current version, one guarded,
  durable write each (on a fresh copy of the workspace for every run);
- `moss upgrade` again: nothing left to do, so every file read and found current;
- floor: a process that writes each file the upgrade rewrote back with its own bytes through
  `fs.write_atomic` (a temporary, fsync, rename, folder fsync): what any per-file durable
  rewrite costs on this disk, whatever it computes.

Usage: `.venv/bin/python bench/upgrade.py [--sizes 1000,10000] [--repeat 3]`
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import generate_workspace

BIN = Path(sys.executable).parent
REWRITE_SCRIPT = """
import sys
from pathlib import Path
from moss_files.foundation import fs
root = Path(sys.argv[1])
for line in Path(sys.argv[2]).read_text().splitlines():
    path = root / line
    fs.write_atomic(path, path.read_bytes())
"""

Cost = tuple[float, float]  # (wall ms, CPU ms)


def run(command: list[str], env: dict[str, str]) -> tuple[Cost, str]:
    """One whole process: its wall and CPU time, and what it printed."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    out = process.stdout.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code})")
    return ((time.perf_counter() - started) * 1000, (usage.ru_utime + usage.ru_stime) * 1000), out


def median(costs: list[Cost]) -> Cost:
    return statistics.median(c[0] for c in costs), statistics.median(c[1] for c in costs)


def measure(size: int, repeat: int, env: dict[str, str]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="moss-upgrade-bench-"))
    try:
        pristine = tmp / "pristine"
        generate_workspace(pristine, size, 42)
        moss = str(BIN / "moss")
        run([moss, "version"], env)  # the bytecode cache
        dry: list[Cost] = []
        for _ in range(repeat):
            cost, out = run([moss, "upgrade", "--dry-run", "--json", "--root", str(pristine)], env)
            dry.append(cost)
        planned = [entry["path"] for entry in json.loads(out)["files"]]
        listing = tmp / "paths.txt"
        listing.write_text("\n".join(planned) + "\n")
        floor: list[Cost] = []
        upgrade: list[Cost] = []
        again: list[Cost] = []
        for number in range(repeat):
            copy = tmp / f"copy-{number}"
            shutil.copytree(pristine, copy, symlinks=True)
            floor.append(run([sys.executable, "-c", REWRITE_SCRIPT, str(copy), str(listing)], env)[0])
            shutil.rmtree(copy)
            shutil.copytree(pristine, copy, symlinks=True)
            cost, out = run([moss, "upgrade", "--json", "--root", str(copy)], env)
            upgrade.append(cost)
            upgraded = sum(sum(kind["upgraded"].values()) for kind in json.loads(out)["kinds"].values())
            if upgraded != len(planned):
                raise SystemExit(f"upgraded {upgraded} files, the dry run planned {len(planned)}")
            again.append(run([moss, "upgrade", "--json", "--root", str(copy)], env)[0])
            shutil.rmtree(copy)
        print(f"corpus: {size} artifacts, {len(planned)} files at format 1; medians of {repeat}, ms wall / ms CPU")
        rows = (
            ("moss upgrade --dry-run", dry),
            ("moss upgrade", upgrade),
            ("moss upgrade, nothing left", again),
            ("floor: rewrite each file durably", floor),
        )
        for label, costs in rows:
            wall, cpu = median(costs)
            print(f"  {label:<34} {wall:>10,.0f} / {cpu:>8,.0f}   {len(planned) / (wall / 1000):>8,.0f} files/s")
        ratio = median(upgrade)[0] / median(floor)[0]
        print(f"  moss upgrade / floor: {ratio:.2f}x wall")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000", help="workspace sizes (artifacts), comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each process (medians)")
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")
    for size in (int(part) for part in args.sizes.split(",")):
        measure(size, args.repeat, env)


if __name__ == "__main__":
    main()

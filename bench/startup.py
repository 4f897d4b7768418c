"""Start-up of the `moss` command as whole processes: `moss version`, `moss fetch`, `moss --help`,
beside the floors of the same run.

Run: .venv/bin/python bench/startup.py [--sizes 1000,10000] [--repeat 30] [--baseline /work/main/.venv/bin/moss]

Each figure is the median of `--repeat` runs of a whole process with a bytecode cache in the
temporary folder (PYTHONPYCACHEPREFIX, warmed once; this environment otherwise sets
PYTHONDONTWRITEBYTECODE). With `--baseline`, that installation's `moss` runs alternately with
this checkout's, so both see the same machine load. `moss fetch` reads one capsule by name in a
workspace of each corpus size. Floors: `python -c pass` and `python -c "import typer"`.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--baseline", default=None, help="another installation's moss (the 'before'), run alternately")
    args = parser.parse_args()
    installs = {"after": str(Path(sys.executable).with_name("moss")), **({"before": args.baseline} if args.baseline else {})}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as name:
        tmp = Path(name)
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "HOME": str(tmp)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        floors = {"python -c pass": [sys.executable, "-c", "pass"], "python -c 'import typer'": [sys.executable, "-c", "import typer"]}
        for size in (int(s) for s in args.sizes.split(",")):
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

"""What the walk without a watcher costs, beside the barest walks that could replace it, in one
run: the floor under `moss search`, `list`, `inventory` and `latest` when no watcher runs.

Run: .venv/bin/python bench/walk.py [--sizes 10000 100000] [--seed 42] [--repeat 9]

On the cached workspace corpus of each size (bench/index.py's, generated once; read only, so
walked where it is cached), in this one process, the walks take turns `--repeat` times and the
least CPU (user + system) and wall time of each count:
- this walk: `scan.walk` of every folder the index reads, with each file's stat, and the
  fingerprint a no-change refresh compares (what a walking query pays beyond start-up);
- the bare scandir + stat walk by path (the floor bench/index.py's refresh rows use);
- the bare walk with each folder listed through a descriptor of its own (each stat resolves
  one name: the least a Python walk can do, one fstatat per file);
- a C walk: GNU find's stat of every file (`-printf '%C@'`), its CPU from the children's
  times: what is left when Python's share is gone, the kernel's stat of every file (find
  counts folders and files of no source too, so its count is a little higher);
- two C walks at once, each over half of the folders: the least a walk split over two
  threads or processes could take in wall time, if two cores are free.
Not a row of issue 29's table (bench/all.py does not run it): it says why the walking rows of
`search` and `inventory` at 100k are over their target however the walk is written.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared
from index import workspace_corpus

from moss_files.index import scan, sources

_LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
TOPS = (".moss", ".needlecast", ".cstack")


def this_walk(root: Path) -> int:
    tree = scan.walk(root, sources.default_registry())
    tree.fingerprint()
    return len(tree.paths)


def bare_by_path(root: Path) -> int:
    count = 0
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    entry.stat(follow_symlinks=False)
                    count += 1
    return count


def bare_by_descriptor(root: Path) -> int:
    count = 0
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        fd = os.open(folder, _LIST_FLAGS)
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(f"{folder}/{entry.name}")
                    else:
                        entry.stat(follow_symlinks=False)
                        count += 1
        finally:
            os.close(fd)
    return count


def halves(root: Path) -> list[list[str]]:
    """The folders below the toolkit's top folders, largest first, dealt into two halves of
    about equal file counts."""
    folders: list[tuple[int, str]] = []
    for top in TOPS:
        if not (root / top).is_dir():
            continue
        for entry in os.scandir(root / top):
            if entry.is_dir(follow_symlinks=False):
                folders.append((sum(len(files) for _, _, files in os.walk(entry.path)), entry.path))
    split: list[list[str]] = [[], []]
    sizes = [0, 0]
    for count, folder in sorted(folders, reverse=True):
        side = sizes.index(min(sizes))
        split[side].append(folder)
        sizes[side] += count
    return split


def c_walk(folders: list[list[str]]) -> Callable[[Path], int]:
    def run(root: Path) -> int:
        finds = [subprocess.Popen(["find", *part, "-printf", "%C@\n"], stdout=subprocess.PIPE) for part in folders if part]
        count = 0
        for find in finds:
            assert find.stdout is not None
            count += find.stdout.read().count(b"\n")
            find.wait()
        return count

    return run


def cpu_seconds() -> float:
    """User and system CPU of this process and of its waited-for children, so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(root: Path, repeat: int) -> None:
    walks: dict[str, Callable[[Path], int]] = {
        "this walk (scan.walk + fingerprint)": this_walk,
        "bare scandir + stat, by path": bare_by_path,
        "bare scandir + stat, by folder descriptor": bare_by_descriptor,
    }
    if shutil.which("find") and b"GNU" in subprocess.run(["find", "--version"], capture_output=True).stdout:
        split = halves(root)
        walks["C walk (GNU find), one process"] = c_walk([[folder for part in split for folder in part]])
        walks["two C walks at once, half the folders each"] = c_walk(split)
    best: dict[str, tuple[float, float, int]] = {}
    for _ in range(repeat):
        for name, walk in walks.items():
            before, started = cpu_seconds(), time.perf_counter()
            files = walk(root)
            wall = time.perf_counter() - started
            cpu = cpu_seconds() - before
            old = best.get(name)
            best[name] = (min(old[0], cpu) if old else cpu, min(old[1], wall) if old else wall, files)
    print(f"  {'walk':<44} {'CPU ms':>7} {'wall ms':>8} {'files':>7}")
    for name, (cpu, wall, files) in best.items():
        print(f"  {name:<44} {cpu * 1000:>7.0f} {wall * 1000:>8.0f} {files:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["10000", "100000"])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    for size in shared.sizes(args.sizes):
        root = workspace_corpus(size, args.seed, False)
        print(f"{size} artifacts ({root}); {shared.load()}; least of {args.repeat} turns")
        measure(root, args.repeat)


if __name__ == "__main__":
    main()

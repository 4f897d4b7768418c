"""`moss import` of a Moss JSONL export as a whole process: capsules per second, with floors.

Run: .venv/bin/python bench/import.py [--sizes 1000,10000] [--repeat 2] [--baseline /work/main/.venv/bin/moss]

Writes a deterministic export (capsules of about 1.7 KB in 10 workspaces) into a temporary
folder, then imports it into fresh git projects with this checkout's `moss` and, when
`--baseline` names another installation's `moss`, with that one too, alternating the two.
Floors measured in the same run: a process that writes the same number of files of the same
size with one fsync each (what a durable write per file costs), and one that writes them and
makes them durable with one syncfs. Whole processes use a bytecode cache in the temp folder
(PYTHONPYCACHEPREFIX), warmed once. Prints the best of `--repeat` runs per figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
WORDS = "auth token session cache index router inbox capsule plan task review deploy schema retry lock queue handoff decision risk test".split()


def _ulid(rng: random.Random, ms: int) -> str:
    stamp = "".join(CROCKFORD[(ms >> (5 * (9 - i))) & 31] for i in range(10))
    return stamp + "".join(rng.choice(CROCKFORD) for _ in range(16))


def _text(rng: random.Random) -> str:
    def line() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 14))).capitalize() + "."

    sections = ("Objective", "Current status", "Decisions", "Next actions", "Key locations", "Open questions")
    return "\n\n".join(f"## {title}\n" + "\n".join(f"- {line()}" for _ in range(3)) for title in sections) + "\n"


def write_export(path: Path, count: int, seed: int = 18) -> int:
    """A Moss export of `count` named capsules spread over 10 workspaces; returns its size."""
    rng = random.Random(seed)
    base = 1_768_816_800
    lines = [json.dumps({"_moss_export": True, "schema_version": 1, "exported_at": base + count})]
    for index in range(count):
        moment = base + index
        text = _text(rng)
        lines.append(
            json.dumps(
                {
                    "id": _ulid(rng, moment * 1000),
                    "workspace_raw": f"project-{index % 10}",
                    "name_raw": f"handoff {index:05d}",
                    "title": f"Handoff {index}",
                    "capsule_text": text,
                    "tags": ["bench", rng.choice(WORDS)],
                    "source": "bench",
                    "created_at": moment,
                    "updated_at": moment,
                    "deleted_at": None,
                },
                separators=(",", ":"),
            )
        )
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(data)
    return len(data)


FLOOR = r"""
import ctypes, os, sys, time
root, count, size, sync = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
data = b"x" * size
start = time.perf_counter()
folders = [os.path.join(root, f"w{i}") for i in range(10)]
for folder in folders:
    os.makedirs(folder)
for index in range(count):
    fd = os.open(os.path.join(folders[index % 10], f"{index}.md"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, data)
    if sync == "each":
        os.fsync(fd)
    os.close(fd)
if sync == "once":
    fd = os.open(root, os.O_RDONLY)
    ctypes.CDLL(None, use_errno=True).syncfs(fd)
    os.close(fd)
for folder in folders:
    fd = os.open(folder, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
print(time.perf_counter() - start)
"""


def fresh_project(tmp: Path, label: str, moss: str, env: dict[str, str]) -> Path:
    project = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=tmp))
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run([moss, "init", str(project), "--json"], check=True, env=env, capture_output=True)
    return project


def import_seconds(tmp: Path, label: str, moss: str, export: Path, env: dict[str, str], count: int) -> float:
    project = fresh_project(tmp, label, moss, env)
    start = time.perf_counter()
    done = subprocess.run([moss, "import", "--path", str(export), "--json"], cwd=project, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or json.loads(done.stdout)["imported"] != count:
        raise SystemExit(f"{label}: import failed ({done.returncode}): {done.stdout[-500:]} {done.stderr[-500:]}")
    shutil.rmtree(project)
    return elapsed


def floor_seconds(tmp: Path, count: int, size: int, sync: str) -> float:
    folder = Path(tempfile.mkdtemp(prefix="floor-", dir=tmp))
    done = subprocess.run([sys.executable, "-c", FLOOR, str(folder / "w"), str(count), str(size), sync], check=True, capture_output=True, text=True)
    shutil.rmtree(folder)
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--baseline", default=None, help="another installation's moss, measured alternately (the 'before')")
    args = parser.parse_args()
    ours = str(Path(sys.executable).with_name("moss"))
    commands = {"after": ours, **({"before": args.baseline} if args.baseline else {})}
    with tempfile.TemporaryDirectory(prefix="bench-import-") as name:
        tmp = Path(name)
        (tmp / "home").mkdir()
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "HOME": str(tmp / "home")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        (tmp / "home" / ".moss").mkdir()
        for size in (int(s) for s in args.sizes.split(",")):
            export = tmp / "home" / ".moss" / "exports" / f"bench-{size}.jsonl"
            export.parent.mkdir(parents=True, exist_ok=True)
            total = write_export(export, size)
            for label, moss in commands.items():  # warm the bytecode cache once
                import_seconds(tmp, label, moss, export, env, size)
            best: dict[str, float] = {}
            for _ in range(args.repeat):
                for label, moss in commands.items():
                    best[label] = min(best.get(label, float("inf")), import_seconds(tmp, label, moss, export, env, size))
            each = min(floor_seconds(tmp, size, total // size, "each") for _ in range(args.repeat))
            once = min(floor_seconds(tmp, size, total // size, "once") for _ in range(args.repeat))
            print(f"corpus: {size} capsules, export {total / 1e6:.1f} MB ({total // size} bytes a record)")
            for label, seconds in best.items():
                print(f"  moss import ({label:<6})       {seconds:7.2f} s  {size / seconds:8.0f} capsules/s")
            print(f"  floor: write + fsync each file {each:7.2f} s  {size / each:8.0f} files/s")
            print(f"  floor: write + one syncfs      {once:7.2f} s  {size / once:8.0f} files/s")


if __name__ == "__main__":
    main()

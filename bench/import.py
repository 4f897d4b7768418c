"""`moss import` of a Moss JSONL export as a whole process: capsules per second, with floors.

Run: .venv/bin/python bench/import.py [--sizes 1000,10000] [--repeat 2] [--baseline /work/main/.venv/bin/moss] [--rows-only] [--settle 60] [--json ROWS]

Writes a deterministic export (capsules of about 1.7 KB in 10 workspaces) into a temporary
folder, then imports it into fresh git projects with this checkout's `moss` and, when
`--baseline` names another installation's `moss`, with that one too, alternating the two.
Floors measured in the same run: a process that writes the same number of files of the same
size with one fsync each (what a durable write per file costs), and one that writes them and
makes them durable with one syncfs; and `moss version`, the start-up every `moss` command pays.
Every round runs each command and each floor once, in turn (the order reversed every other
round), so the machine's load hits all alike. Whole processes use a bytecode cache in the
temp folder (PYTHONPYCACHEPREFIX), warmed once. Prints the median (and best) of `--repeat`
rounds: wall time, and the process's own CPU time (user and system, from `os.wait4`);
creating files costs system time, which is most of an import and all of its floor.

Creating files is most of an import's cost, and on ext4 without a journal (the 2-core machine
of issue 29) a create costs more the more inodes were freed in the last minute nearby: the
kernel avoids reusing an inode freed within 60 s (`recently_deleted` in fs/ext4/ialloc.c; 300 s
more while its inode-table block is unwritten) by checking every free inode of the block group
it allocates from, from the group's start, for every file created. Measured (perf): an import
right after the previous project's 10,000 files were deleted spent 82% of its 7 s of CPU in
that scan, against 1.2 s with none freed nearby. So nothing a measured command wrote is deleted
before the run ends (the temporary folder goes then, with all of it; under bench/all.py only
when the whole table is done, `rows.scratch`, and this bench runs first): each command would
otherwise pay for the one before it, and which one pays most depends on where the kernel puts
their folders, not on their code. Files other processes delete (test runs, the bench before)
still tax whichever command creates files in their block groups at that moment: on that
machine the same floor took 0.22 s or 3.85 s of system time minutes apart. `--settle 60`
(bench/all.py passes it) times nothing in the first minute of the run (of this bench, or of
bench/all.py when it started earlier) on such a file system, past the deletions of what ran before (after a sync: the 300 s more apply only until
the inode-table blocks are written). Compare builds within one run, and read the
system time beside the wall time.

`moss import` refuses a file over 25 MB (FILE_TOO_LARGE): an export past that (100,000
capsules make 168 MB) is imported as parts of at most 24 MB, one after another into the same
project, timed together (the sum of their wall and CPU times, the largest peak); the row says
so in its note, beside the refusal of the whole file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared

# bench/all.py runs this script with these arguments for its rows of issue 29's table.
ROWS_ARGS = ["--rows-only", "--settle", "60"]

# Where new files skip the inodes freed in the last minute (see the module's docstring), the
# first timed command waits until a minute after the bench started: the bench run before it
# (bench/all.py runs them one after another) deletes its files as it ends. Smaller runs (the
# test suite's smoke run) do not wait.
SETTLE_FROM = 1000

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
"""


@dataclass
class Runs:
    """Whole-process runs of one command: wall seconds, and user and system CPU seconds."""

    wall: list[float] = field(default_factory=list)
    user: list[float] = field(default_factory=list)
    system: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)

    def add(self, wall: float, usage: resource.struct_rusage) -> None:
        self.wall.append(wall)
        self.user.append(usage.ru_utime)
        self.system.append(usage.ru_stime)
        self.peak_mb.append(usage.ru_maxrss / 1024)

    def rows(self, subject: str, items: str, size: int, build: str, floor_wall: float, note: str = "") -> list[shared.Row]:
        """Issue 29's two rows of a bulk write (`moss import`, `moss migrate`): `items`/s beside
        the write + one syncfs floor (at least 5,000/s), and the peak memory (at most 300 MB)."""
        wall = statistics.median(self.wall)
        cpu = (statistics.median(self.user) + statistics.median(self.system)) * 1000
        rate = shared.Row(
            f"{subject}, {items}/s",
            size=size,
            build=build,
            value=size / wall,
            cpu=cpu,
            unit="/s",
            compare=shared.AT_LEAST,
            limit=5000,
            floor=size / floor_wall,
            floor_name="write + one syncfs process",
            note=note,
        )
        peak = shared.Row(f"{subject}, peak memory", size=size, build=build, value=max(self.peak_mb), unit="MB", compare=shared.AT_MOST, limit=300, note=note)
        return [rate, peak]

    def line(self, label: str, count: int) -> str:
        wall = statistics.median(self.wall)
        return (
            f"  {label:<34} {wall:7.2f} s (best {min(self.wall):5.2f})  {count / wall:6.0f}/s   "
            f"cpu user {statistics.median(self.user):5.2f} + sys {statistics.median(self.system):5.2f} s, peak {max(self.peak_mb):.0f} MB"
        )


def timed(command: list[str], cwd: Path | None, env: dict[str, str]) -> tuple[float, resource.struct_rusage, bytes]:
    """Run a process; its wall time, its own rusage (its peak memory its own: see
    rows.run_process) and its stdout."""
    done = shared.run_process(command, cwd=cwd, env=env, capture=True, peak=True)
    usage = resource.struct_rusage((done.user / 1000, done.system / 1000, int(done.peak_mb * 1024), *([0] * 13)))
    return done.wall / 1000, usage, done.stdout


def fresh_project(tmp: Path, label: str, moss: str, env: dict[str, str]) -> Path:
    project = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=tmp))
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run([moss, "init", str(project), "--json"], check=True, env=env, capture_output=True)
    return project


def run_import(tmp: Path, label: str, moss: str, export: Path, env: dict[str, str], count: int) -> tuple[float, resource.struct_rusage] | str:
    """One import into a fresh project: (wall seconds, rusage), or why it was refused (an
    older build refuses an export over its size limit)."""
    project = fresh_project(tmp, label, moss, env)
    try:
        elapsed, usage, out = timed([moss, "import", "--path", str(export), "--json"], project, env)
    except SystemExit as refused:
        return str(refused)[:300]
    # The project stays until the run ends (see the module's docstring: deleting it would slow the next command).
    if json.loads(out)["imported"] != count:
        raise SystemExit(f"{label}: imported {json.loads(out)['imported']} of {count}")
    return elapsed, usage


PART_BYTES = 24 * 1024 * 1024  # under `moss import`'s 25 MB limit


def write_parts(export: Path, limit: int = PART_BYTES) -> list[Path]:
    """The records of `export` as exports of at most `limit` bytes each (each with the header
    line), beside it: `<stem>.part<N>.jsonl`."""
    header, *records = export.read_bytes().splitlines(keepends=True)
    parts: list[list[bytes]] = [[]]
    used = len(header)
    for record in records:
        if parts[-1] and used + len(record) > limit:
            parts.append([])
            used = len(header)
        parts[-1].append(record)
        used += len(record)
    paths = []
    for number, lines in enumerate(parts):
        path = export.with_name(f"{export.stem}.part{number}.jsonl")
        path.write_bytes(header + b"".join(lines))
        paths.append(path)
    return paths


def run_import_parts(tmp: Path, label: str, moss: str, parts: list[Path], env: dict[str, str], count: int) -> tuple[float, resource.struct_rusage]:
    """The parts imported one after another into one fresh project: their summed wall and CPU
    seconds and their largest peak memory, as one rusage."""
    project = fresh_project(tmp, label, moss, env)
    wall = user = system = 0.0
    peak = imported = 0
    for part in parts:
        elapsed, usage, out = timed([moss, "import", "--path", str(part), "--json"], project, env)
        wall, user, system, peak = wall + elapsed, user + usage.ru_utime, system + usage.ru_stime, max(peak, usage.ru_maxrss)
        imported += json.loads(out)["imported"]
    # The project stays until the run ends (see the module's docstring: deleting it would slow the next command).
    if imported != count:
        raise SystemExit(f"{label}: imported {imported} of {count} in {len(parts)} parts")
    return wall, resource.struct_rusage((user, system, peak, *([0] * 13)))


def freed_inodes_linger(folder: Path) -> bool:
    """Whether `folder` is on ext4 without a journal (its device's `journal_task` in sysfs
    says `<none>`), where each new file skips the inodes freed in the last minute in its block
    group, one by one (see the module's docstring)."""
    device = os.stat(folder).st_dev
    try:
        name = Path(os.path.realpath(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}")).name
        return Path(f"/sys/fs/ext4/{name}/journal_task").read_text().strip() == "<none>"
    except OSError:
        return False


def settle(folder: Path, size: int, seconds: float, started: float) -> None:
    """Where files freed in the last minute slow every create (`freed_inodes_linger`), time
    nothing until `seconds` after `started` (time.monotonic), or after bench/all.py's start if
    that was earlier (no bench of its run deletes files before the end: `rows.scratch`), for
    sizes from SETTLE_FROM: a fixed settling time, not a wait for a condition. It syncs first:
    clean inode-table blocks count a freed inode for 60 s, dirty ones for 360 s."""
    if size < SETTLE_FROM or seconds <= 0 or not freed_inodes_linger(folder):
        return
    quiet = min(started, shared.quiet_since())
    wait = max(0.0, seconds - (time.monotonic() - quiet))
    print(f"waiting {wait:.0f} s: ext4 without a journal, where files deleted in the last minute (by the bench before) slow every create")
    os.sync()
    time.sleep(wait)


def run_floor(tmp: Path, count: int, size: int, sync: str) -> tuple[float, resource.struct_rusage]:
    folder = Path(tempfile.mkdtemp(prefix="floor-", dir=tmp))
    elapsed, usage, _out = timed([sys.executable, "-c", FLOOR, str(folder / "w"), str(count), str(size), sync], None, dict(os.environ))
    # The folder stays until the run ends (see the module's docstring: deleting it would slow the next command).
    return elapsed, usage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared.add_common_arguments(parser, default_sizes=(1000, 10000))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-fsync-floor", action="store_true", help="leave out the slow floor of one fsync per file")
    parser.add_argument("--rows-only", action="store_true", help="issue 29's rows only: no fsync-per-file floor, one round from 50,000 on")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help=f"where ext4 runs without a journal, time nothing until this many seconds after the start (sizes from {SETTLE_FROM:,})",
    )
    args = parser.parse_args()
    started = time.monotonic()
    ours = str(Path(sys.executable).with_name("moss"))
    baseline = shared.baseline_moss(args.baseline)
    commands = {"after": ours, **({"before": baseline} if baseline else {})}
    found: list[shared.Row] = []
    with shared.scratch("bench-import-") as tmp:
        (tmp / "home").mkdir()
        env = {**shared.process_env(tmp / "pycache"), "HOME": str(tmp / "home")}
        (tmp / "home" / ".moss").mkdir()
        for size in shared.sizes(args.sizes, (1000, 10000)):
            repeat = 1 if args.quick or (args.rows_only and size >= 50_000) else args.repeat
            export = tmp / "home" / ".moss" / "exports" / f"bench-{size}.jsonl"
            export.parent.mkdir(parents=True, exist_ok=True)
            total = write_export(export, size)
            refused: dict[str, str] = {}
            parts: list[Path] = []  # the export in parts under the limit, once a build refused it whole
            for label, moss in commands.items():  # warm the bytecode cache once (a small import)
                small = tmp / "home" / ".moss" / "exports" / "warm.jsonl"
                write_export(small, 10)
                run_import(tmp, label, moss, small, env, 10)
            runs: dict[str, Runs] = {}
            no_fsync_floor = args.no_fsync_floor or args.rows_only
            floors = {"once": "floor: write + one syncfs", **({} if no_fsync_floor else {"each": "floor: write + fsync each file"})}
            steps = [*(("import", label) for label in commands), *(("floor", sync) for sync in floors)]
            settle(tmp, size, args.settle, started)
            for round_number in range(repeat):
                # Every import and floor once a round, in turn, the order reversed every other
                # round, so the machine's load and what ran just before hit all alike.
                for kind, label in steps if round_number % 2 == 0 else reversed(steps):
                    if kind == "floor":
                        runs.setdefault(floors[label], Runs()).add(*run_floor(tmp, size, total // size, label))
                        continue
                    moss = commands[label]
                    done: tuple[float, resource.struct_rusage] | str = "refused"
                    if label not in refused:
                        done = run_import(tmp, label, moss, export, env, size)
                        if isinstance(done, str):
                            refused[label] = done
                    if isinstance(done, str):
                        if "FILE_TOO_LARGE" not in refused[label]:
                            continue
                        parts = parts or write_parts(export)
                        done = run_import_parts(tmp, label, moss, parts, env, size)
                    runs.setdefault(f"moss import ({label})", Runs()).add(*done)
                elapsed, usage, _out = timed([ours, "version"], tmp, env)
                runs.setdefault("start-up: moss version", Runs()).add(elapsed, usage)
            print(f"corpus: {size} capsules, export {total / 1e6:.1f} MB ({total // size} bytes a record); median of {repeat} (best); {shared.load()}")
            for label, measured in runs.items():
                print(measured.line(label, size))
            for label, why in refused.items():
                print(f"  moss import ({label}) refused the whole file: {why}")
                if "FILE_TOO_LARGE" in why:
                    print(f"  moss import ({label}) above: the export in {len(parts)} parts of at most {PART_BYTES >> 20} MB, into one project")
            floor = statistics.median(runs["floor: write + one syncfs"].wall)
            if "moss import (after)" in runs:
                print(f"  moss import / syncfs floor: {statistics.median(runs['moss import (after)'].wall) / floor:.2f}x wall")
            for label, build in (("after", "this"), ("before", "baseline")):
                if f"moss import ({label})" not in runs:
                    continue
                note = f"refused whole (FILE_TOO_LARGE): {len(parts)} files of <= {PART_BYTES >> 20} MB, one after another" if label in refused else ""
                found += runs[f"moss import ({label})"].rows("moss import", "capsules", size, build, floor, note)
    shared.print_rows(found)
    shared.write_rows(args.json, found)


if __name__ == "__main__":
    main()

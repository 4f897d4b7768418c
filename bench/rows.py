"""What the benches share: a row of issue 29's table (a measure at one size beside the floor of the
same run, and whether it meets its target), the corpus sizes, corpora cached across runs, and
whole processes timed with their peak memory.

A bench that takes `--json PATH` writes its rows there as one JSON list (`write_rows`), which
`bench/all.py` collects into one table. A row's fields: `measure`, `size`, `build` ("this", or
"baseline" for the `--baseline` installation), `value` and `floor` in `unit`, `ratio`
(value / floor) and `over` (value - floor), the `target` in words, whether it is `met`, and
`cpu` (the CPU milliseconds of a process, where measured).

Corpora: `cached(kind, size, seed, make)` builds a corpus once per (kind, generator source,
seed, size) in `$MOSS_BENCH_CACHE` (default: `<tmp>/moss-bench-corpora`), and `copy_of` copies
it into a bench's own temporary folder (`cp -a`, with reflinks where the file system has them),
so a 100,000-file corpus costs its generation once, not once per run.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
DEFAULT_SIZES = (10_000, 100_000)
QUICK_SIZES = (10_000,)

# How a row's value compares with its target: at most `limit` over the floor (ms), at most
# `limit` times the floor, at least `limit` (a rate), at most `limit` (memory, ms).
OVER, RATIO, AT_LEAST, AT_MOST = "over", "ratio", "at_least", "at_most"


@dataclass
class Row:
    """One measure at one size, beside the floor measured in the same run."""

    measure: str
    size: int
    value: float
    unit: str
    compare: str  # OVER, RATIO, AT_LEAST or AT_MOST
    limit: float
    floor: float | None = None
    floor_name: str = ""
    build: str = "this"
    cpu: float | None = None
    note: str = ""
    ratio: float | None = field(init=False, default=None)
    over: float | None = field(init=False, default=None)
    target: str = field(init=False, default="")
    met: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if self.floor:
            self.ratio = round(self.value / self.floor, 3)
            self.over = round(self.value - self.floor, 3)
        unit = f" {self.unit}" if self.unit else ""
        if self.compare == OVER:
            self.target = f"<= floor + {self.limit:g}{unit}"
            self.met = self.over is not None and self.over <= self.limit
        elif self.compare == RATIO:
            self.target = f"<= {self.limit:g}x floor"
            self.met = self.ratio is not None and self.ratio <= self.limit
        elif self.compare == AT_LEAST:
            self.target = f">= {self.limit:g}{unit}"
            self.met = self.value >= self.limit
        elif self.compare == AT_MOST:
            self.target = f"<= {self.limit:g}{unit}"
            self.met = self.value <= self.limit
        else:
            raise ValueError(f"unknown comparison {self.compare!r}")
        self.value = round(self.value, 3)


def write_rows(path: Path | None, rows: Sequence[Row]) -> None:
    """Write `rows` as one JSON list to `path` (nothing without one)."""
    if path is not None:
        path.write_text(json.dumps([asdict(row) for row in rows], indent=1) + "\n", encoding="utf-8")


def history_rows(
    measures: Mapping[str, str],
    with_history: Mapping[str, Mapping[str, float]],
    without: Mapping[str, Mapping[str, float]],
    *,
    size: int,
    build: str,
    floor_name: str,
    note: Callable[[Mapping[str, float]], str],
) -> list[Row]:
    """The rows of figures taken with history (`with_history`: key -> {ms, cpu?, ...}) beside
    the same taken with none (`without`), each named by `measures` (key -> measure) and held
    to the issue's wording for history: within 20% of its floor. `note(figure)` says what the
    figure covered."""
    return [
        Row(
            measure=measure, size=size, build=build, value=with_history[key]["ms"], unit="ms", compare=RATIO, limit=1.2,
            floor=without[key]["ms"], floor_name=floor_name, cpu=with_history[key].get("cpu"), note=note(with_history[key]),
        )
        for key, measure in measures.items()
    ]  # fmt: skip


def history_main(doc: str, title: str, issue_rows: Callable[..., list[Row]], *, repeat: int = 9, quick_repeat: int = 5) -> None:
    """The command line of a bench of history rows (`issue_rows(size, repeat=, baseline=)`):
    the common arguments, `--rows-only` and `--repeat`; prints the rows, each row's note, and
    writes them for bench/all.py."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    add_common_arguments(parser)
    parser.add_argument("--rows-only", action="store_true", help="as bench/all.py runs it")
    parser.add_argument("--repeat", type=int, default=None, help=f"runs per figure (default {repeat}; {quick_repeat} with --quick)")
    args = parser.parse_args()
    runs = args.repeat or (quick_repeat if args.quick else repeat)
    baseline = baseline_moss(args.baseline)
    print(f"{title}; medians, wall ms; {load()}; {speed()}", flush=True)
    found = [row for size in sizes(args.sizes) for row in issue_rows(size, repeat=runs, baseline=baseline)]
    print_rows(found)
    for row in found:
        print(f"  {row.measure} ({row.build}, {row.size}): {row.note}" + (f"; {row.cpu:.0f} ms CPU" if row.cpu else ""))
    write_rows(args.json, found)


def print_rows(rows: Sequence[Row]) -> None:
    """The rows as a small table on stdout, as `bench/all.py` prints them."""
    if not rows:
        return
    print(f"\n  {'measure':<44} {'size':>7} {'build':<8} {'value':>16} {'floor':>10} {'ratio':>6} {'over':>8}  target")
    for row in rows:
        floor = "-" if row.floor is None else f"{row.floor:.1f}"
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
        over = "-" if row.over is None else f"{row.over:+.1f}"
        print(
            f"  {row.measure:<44} {row.size:>7} {row.build:<8} {f'{row.value:.1f} {row.unit}':>16} {floor:>10} {ratio:>6} {over:>8}  "
            f"{row.target} {'met' if row.met else 'NOT MET'}"
        )


def sizes(text: str | Sequence[str] | None, default: Sequence[int] = DEFAULT_SIZES) -> list[int]:
    """Corpus sizes from `--sizes`: `10000,100000`, `10000 100000` (nargs) or `10k 100k`."""
    if text is None:
        return list(default)
    parts = [text] if isinstance(text, str) else list(text)
    out: list[int] = []
    for part in parts:
        for word in part.replace(",", " ").split():
            word = word.lower().replace("_", "")
            out.append(int(float(word[:-1]) * 1000) if word.endswith("k") else int(word))
    return out


def add_common_arguments(parser: object, *, default_sizes: Sequence[int] = DEFAULT_SIZES) -> None:
    """`--sizes`, `--json PATH`, `--quick` and `--baseline MOSS`, as `bench/all.py` passes them."""
    add = parser.add_argument  # type: ignore[attr-defined]
    add("--sizes", nargs="+", default=None, help=f"corpus sizes (default: {' '.join(map(str, default_sizes))}; 10000,100000 or 10k 100k)")
    add("--json", type=Path, default=None, help="write the rows of issue 29's table to this file (a JSON list)")
    add("--quick", action="store_true", help="fewer repetitions (bench/all.py --quick)")
    add("--baseline", default=None, help="another installation's moss (or its python): its figures too, as 'baseline'")


def baseline_moss(value: str | None) -> str | None:
    """The `moss` of the installation `--baseline` names (its `moss` or its `python`)."""
    if not value:
        return None
    path = Path(value)
    if path.is_dir():
        for candidate in (path / ".venv" / "bin" / "moss", path / "bin" / "moss", path / "moss"):
            if candidate.exists():
                return str(candidate)
        raise SystemExit(f"--baseline {value}: no moss found in it")
    if path.name.startswith("python"):
        path = path.with_name("moss")
    if not path.exists():
        raise SystemExit(f"--baseline {value}: {path} does not exist")
    return str(path)


# --------------------------------------------------------------------------- scratch folders

# Set by bench/all.py: a folder it removes only when the whole run ends (see `scratch`), and
# the time (time.time()) it started, since when no bench of its run has deleted what it wrote.
KEEP_ENV = "MOSS_BENCH_KEEP"
QUIET_SINCE_ENV = "MOSS_BENCH_QUIET_SINCE"


def quiet_since() -> float:
    """When (time.monotonic) bench/all.py's run started, since when its benches have deleted
    nothing they wrote (`scratch`); now, outside such a run."""
    started = os.environ.get(QUIET_SINCE_ENV)
    now = time.monotonic()
    return now if not started else now - max(0.0, time.time() - float(started))


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder for what a bench writes, removed when the bench is done; under
    bench/all.py (MOSS_BENCH_KEEP set), a folder in one that all.py removes only when the
    whole run ends. On ext4 without a journal, removing thousands of files slows every file
    created nearby for minutes after (bench/import.py's docstring): a bench that writes many
    files must not leave that tax to the benches after it."""
    keep = os.environ.get(KEEP_ENV)
    if keep:
        yield Path(tempfile.mkdtemp(prefix=prefix, dir=keep))
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        yield Path(name)


# --------------------------------------------------------------------------- corpora


def cache_root() -> Path:
    return Path(os.environ.get("MOSS_BENCH_CACHE") or Path(tempfile.gettempdir()) / "moss-bench-corpora")


def cached(kind: str, size: int, seed: int, make: Callable[[Path], object], *, sources: Sequence[Path | Callable[..., object]] = ()) -> Path:
    """The folder of a corpus, made by `make(folder)` on first use and kept for later runs. The
    key holds the kind, seed, size and a digest of the generator's source (corpus.py, plus
    `sources`: files, or functions whose own source counts), so a change to a generator makes
    a new corpus, and an edit elsewhere in a bench keeps the one already made."""
    digest = hashlib.sha256()
    for source in (BENCH / "corpus.py", *sources):
        digest.update(Path(source).read_bytes() if isinstance(source, Path) else inspect.getsource(source).encode())
    folder = cache_root() / f"{kind}-seed{seed}-n{size}-{digest.hexdigest()[:10]}"
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    started = time.perf_counter()
    try:
        make(building)
        os.rename(building, folder)
    except OSError:
        if not folder.is_dir():  # another run made it meanwhile: use that one
            raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    print(f"  (corpus {folder.name} generated in {time.perf_counter() - started:.1f}s, cached in {folder.parent})", flush=True)
    return folder


def copy_of(corpus: Path, destination: Path) -> Path:
    """A private copy of a cached corpus at `destination` (which must not exist yet)."""
    subprocess.run(["cp", "-a", "--reflink=auto", str(corpus), str(destination)], check=True)
    return destination


# --------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class Run:
    """One whole process: wall, user and system CPU milliseconds, and peak memory in MB."""

    wall: float
    user: float
    system: float
    peak_mb: float
    stdout: bytes = b""

    @property
    def cpu(self) -> float:
        return self.user + self.system


def medians(runs: Sequence[Run], **extra: float) -> dict[str, float]:
    """A figure of whole processes: the median wall (`ms`) and CPU (`cpu`) milliseconds of
    `runs`, with `extra` (what the figure covered, such as `count`)."""
    return {"ms": statistics.median(run.wall for run in runs), "cpu": statistics.median(run.cpu for run in runs), **extra}


# Linux keeps a process's peak resident set across fork and exec: a child of this (large)
# process would report at least this process's size. So a process whose peak counts is started
# by a small launcher (`python -S`, a few MB), which forks, execs it and reports its rusage.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
os.write(int(sys.argv[1]), f"{usage.ru_maxrss} {usage.ru_utime} {usage.ru_stime}".encode())
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_process(command: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, capture: bool = False, peak: bool = False) -> Run:
    """Run a process to its end; raise SystemExit when it fails. With `peak`, it is started
    through a small launcher so that its peak memory (its largest resident set, or its
    largest waited-for child's) is its own (the launcher's start-up is then in the wall
    time); without, `peak_mb` is not measured (0)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        read_end, write_end = os.pipe() if peak else (-1, -1)
        argv = [sys.executable, "-S", "-c", _LAUNCHER, str(write_end), *command] if peak else list(command)
        started = time.perf_counter()
        try:
            process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out if capture else subprocess.DEVNULL, stderr=err, pass_fds=(write_end,) if peak else ())
            _, status, usage = os.wait4(process.pid, 0)
            wall = (time.perf_counter() - started) * 1000
        finally:
            if peak:
                os.close(write_end)
        process.returncode = os.waitstatus_to_exitcode(status)
        user, system, peak_mb = usage.ru_utime * 1000, usage.ru_stime * 1000, 0.0
        if peak:
            with os.fdopen(read_end, "rb") as reported:
                words = reported.read().split()
            if len(words) == 3:
                peak_mb, user, system = int(words[0]) / 1024, float(words[1]) * 1000, float(words[2]) * 1000
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {err.read()[-800:].decode(errors='replace')}")
        out.seek(0)
        return Run(wall, user, system, peak_mb, out.read() if capture else b"")


def process_env(cache: Path) -> dict[str, str]:
    """The environment of a measured process: a bytecode cache in `cache`, as an installed tool
    has (this environment may disable writing .pyc files)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def load() -> str:
    """The machine's load averages and core count, for the header of a run."""
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f}), {os.cpu_count()} cpus"


REFERENCE_LOOP = 1_000_000  # additions in `reference_ms`'s loop


def reference_ms(rounds: int = 5) -> float:
    """The machine's speed in this run: the best of `rounds` runs of one fixed pure-Python loop
    (REFERENCE_LOOP additions), in ms. A row against a floor of the same run mostly keeps its
    ratio from one machine (or day) to the next; a row with an absolute target (claims/s,
    items/s, ms) moves with this figure, which is how two runs' tables compare."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        total = 0
        for number in range(REFERENCE_LOOP):
            total += number
        best = min(best, time.perf_counter() - started)
    return best * 1000


def speed() -> str:
    """`reference_ms`, said for the header or the end of a run."""
    return f"reference loop ({REFERENCE_LOOP:,} additions in Python) {reference_ms():.0f} ms"

"""Board latency and claim throughput: claim_next_task and list_tasks with 10 and 5,000 tasks,
and claims per second from claimer processes at once; wall and CPU time, beside floors
measured in the same run.

Run: .venv/bin/python bench/board.py [--sizes 10,5000] [--repeat 20] [--claimers 8]
     [--baseline /work/wt/baseline/.venv/bin/python]
     .venv/bin/python bench/board.py --rows-only [--sizes 10000] [--quick] [--json ROWS]
     (issue 29's rows, for bench/all.py: size 10000 is 20,000 tasks with 15,000 DONE, generated
     once into $TMPDIR/moss-bench-cache/; `rows(size)` gives them as dicts)

Builds each board in a temporary folder (files written directly, as a git checkout would:
epics of 100 tasks, a mix of statuses, three-step plans, definitions of done; a fifth of the
tasks WORKING and free). Prints medians in milliseconds, wall / CPU, with the board size:
- warm: one long-lived context, as `moss serve` keeps (the store's memory, and its file
  watches where it has them);
- fresh: a new context per call, as each `moss` command starts (the cache file under
  .moss/cache/, every board file's stat taken);
- first read: a new context with no cache file (every frontmatter parsed), as after a clone;
- process: the whole `moss task ...` command, interpreter start-up included (CPU from the
  child's rusage).
Floors, same run: `moss version` as a process, and one pass of os.stat over every board file
in process (what any answer that must see a hand edit made just before it costs at least,
without file watches). A claim is timed alone; the task is released (untimed) so every claim
sees the same board.

Claims/s: N processes start together (pre-registered worker ids, all in one team so the
solo-worker rule does not serialize them by epic) and claim with fresh worker ids until
nothing is left, each on one long-lived context (as agents' `moss serve`), or on a new
context per claim (as `moss task claim` calls); afterwards no task may have two owners.

With `--baseline PYTHON`, another installation's Python runs the same measurements (this
script, in a child process, through that installation's code) on its own copy of each board,
alternating with this checkout's, so both see the same machine load.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared

ROWS_ARGS = ["--rows-only"]
EPIC_SIZE = 100
STAMP = "2026-01-21T10:00:00Z"


def build_board(root: Path, count: int, *, claimable: int, done: int = 0, seed: int = 7) -> list[str]:
    """Write `count` tasks (the first `claimable` WORKING and free, the next `done` DONE, as a
    year of finished work leaves a board); return the task ids."""
    from moss_files.board import files
    from moss_files.board.model import PRIORITIES, Epic, Step, Task
    from moss_files.foundation.ids import IdSource, seeded_random

    ids = IdSource(random_bytes=seeded_random(seed))
    base = root / ".moss" / "board"
    for folder in ("epics", "tasks", "workers", "teams"):
        (base / folder).mkdir(parents=True, exist_ok=True)
    epics = [ids.prefixed("EPIC") for _ in range(max(1, -(-count // EPIC_SIZE)))]
    for order, epic_id in enumerate(epics, start=1):
        epic = Epic(
            id=epic_id,
            title=f"Epic {order}",
            description="Group of related work on the billing service.",
            status="ACTIVE",
            order=order,
            epic_rails=("no secrets in logs",),
            created=STAMP,
            updated=STAMP,
        )
        (base / "epics" / f"{epic_id}.md").write_text(files.render_epic(epic))
    others = ("BACKLOG", "BACKLOG", "DONE", "PLANNING", "REVIEW", "DONE")
    made: list[str] = []
    for index in range(count):
        task_id = ids.prefixed("TASK")
        status = "WORKING" if index < claimable else "DONE" if index < claimable + done else others[index % len(others)]
        plan = tuple(
            Step(
                f"step-{n}",
                f"Change module {n} of the invoice pipeline and cover it with tests",
                status="COMPLETED" if status in ("REVIEW", "DONE") else "PENDING",
                affected_files=(f"src/billing/part_{n}.py",),
            )
            for n in (1, 2, 3)
        )
        task = Task(
            id=task_id,
            epic=epics[index % len(epics)],
            title=f"Invoice rounding fix {index}",
            description="Totals are rounded per line instead of per invoice.\n\nRound once, at the end, half-even.",
            status=status,
            priority=PRIORITIES[index % 4],
            order=index // len(epics) + 1,
            definition_of_done=("totals match the ledger", "property test for rounding"),
            plan=plan if status != "BACKLOG" else (),
            created=STAMP,
            updated=STAMP,
        )
        (base / "tasks" / f"{task_id}.md").write_text(files.render_task(task))
        made.append(task_id)
    return made


def register_team(root: Path, workers: list[str]) -> None:
    from moss_files.board import files
    from moss_files.board.model import Team, Worker

    base = root / ".moss" / "board"
    for worker in workers:
        (base / "workers" / f"{worker}.md").write_text(files.render_worker(Worker(id=worker, type="worker", created=STAMP, updated=STAMP)))
    team = Team(id="TEAM-20260121-benchtea", name="Bench", role="worker", max_size=len(workers) + 1, members=tuple(workers), created=STAMP, updated=STAMP)
    (base / "teams" / f"{team.id}.md").write_text(files.render_team(team))


def copy_board(source: Path, target: Path) -> None:
    """A copy of a generated workspace without its cache (each installation writes its own)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("cache"))
    # Files as old as the original's, past the racy window, as after a checkout.
    for path in (target / ".moss" / "board").rglob("*.md"):
        info = (source / path.relative_to(target)).stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    time.sleep(0.06)  # let the copies' change times age past the racy window too
    settle_disk()


def settle_disk() -> None:
    """Write every dirty page out before measuring, as a checkout long done has. Right after
    a copy of 20,000 files, the kernel is still writing them back, and meanwhile every file a
    claim creates costs ~350 µs of kernel CPU instead of ~20 (measured on ext4 here), and
    every fsync waits behind the copy: the figures would be the copy's, not the claims'."""
    os.sync()


# --------------------------------------------------------------------------- measuring


def timed(action: Callable[[int], object], repeat: int, *, after: Callable[[int], object] | None = None) -> dict[str, float]:
    """Median wall and CPU milliseconds of `action` (its process's CPU: every thread's)."""
    walls, cpus = [], []
    for index in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        action(index)
        cpus.append((time.process_time() - cpu) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
        if after is not None:
            after(index)
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus)}


def run_process(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, bytes]:
    """One whole process: wall ms, CPU ms (its rusage), stdout."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode})")
    return (time.perf_counter() - started) * 1000, (usage.ru_utime + usage.ru_stime) * 1000, out


def process_figure(command: list[str], cwd: Path, env: dict[str, str], repeat: int) -> dict[str, float]:
    runs = [run_process(command, cwd, env) for _ in range(repeat)]
    return {"wall": statistics.median(r[0] for r in runs), "cpu": statistics.median(r[1] for r in runs)}


def stat_floor(root: Path, repeat: int) -> dict[str, float]:
    """One pass of os.stat over every board file, by name in its folder's descriptor."""
    folders = [root / ".moss" / "board" / name for name in ("epics", "tasks", "workers", "teams")]

    def one(_: int) -> None:
        for folder in folders:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                for name in os.listdir(fd):
                    os.stat(name, dir_fd=fd, follow_symlinks=False)
            finally:
                os.close(fd)

    return timed(one, repeat)


def latency(root: Path, repeat: int, *, claims_only: bool = False) -> dict[str, dict[str, float]]:
    """The in-process figures on one board (run inside the installation being measured);
    `claims_only`: only what issue 29's rows use (the claims and the stat floor), leaving out
    the listings and the first read (every task file parsed, three times: most of the time)."""
    from moss_files.board import claims, queries
    from moss_files.board.store import BoardStore
    from moss_files.board.usecase import STORE_KEY, board_store
    from moss_files.foundation.context import AGENT, Context

    def without_cache_file() -> Context:
        ctx = Context(root)
        ctx.resource(STORE_KEY, lambda: BoardStore(root, persist=False))
        return ctx

    figures: dict[str, dict[str, float]] = {}
    if not claims_only:
        figures["first read"] = timed(lambda _: queries.list_tasks(without_cache_file()), 3)
    queries.list_tasks(Context(root))  # the cache file, as the first command after a clone leaves it
    warm = Context(root, actor=AGENT)
    board_store(warm).load()

    def release(_: int) -> None:
        for task in queries.list_tasks(warm, statuses=["WORKING"])["tasks"]:
            if task["assignedWorkerId"]:
                claims.release_task(warm, task_id=task["id"])

    if not claims_only:
        figures["list warm"] = timed(lambda _: queries.list_tasks(warm), repeat)
        figures["list fresh"] = timed(lambda _: queries.list_tasks(Context(root)), max(3, repeat // 2))
    figures["claim warm"] = timed(lambda n: claims.claim_next_task(warm, statuses=["WORKING"], worker_id=f"solo{n % 2}"), repeat, after=release)
    figures["claim fresh"] = timed(lambda _: claims.claim_next_task(Context(root, actor=AGENT), statuses=["WORKING"], worker_id="solo0"), repeat, after=release)
    figures["stat floor"] = stat_floor(root, repeat)
    return figures


CACHE_WRITER = r"""
import sys
from pathlib import Path
from moss_files.board import queries
from moss_files.foundation.context import Context
queries.list_tasks(Context(Path(sys.argv[1])))
"""

CLAIMER = r"""
import json, os, sys, time
from pathlib import Path
from moss_files.board import claims, queries
from moss_files.foundation.context import Context
root, prefix, count, go, mode = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]), sys.argv[6]
ctx = Context(root, actor="agent")
queries.list_tasks(ctx)
queries.list_tasks(ctx)
Path(sys.argv[5]).touch()
while not go.exists():
    time.sleep(0.0005)
claimed = []
cpu = time.process_time()
for n in range(count):
    result = claims.claim_next_task(ctx if mode == "long-lived" else Context(root, actor="agent"), statuses=["WORKING"], worker_id=f"{prefix}{n:04d}")
    if not result["hasNext"]:
        break
    claimed.append(result["task"]["id"])
import moss_files
print(json.dumps({"claimed": claimed, "done": time.time(), "cpu": time.process_time() - cpu, "code": moss_files.__file__}))
"""


def concurrent_claims(python: str, root: Path, claimers: int, per_claimer: int, mode: str, env: dict[str, str]) -> dict[str, float]:
    """Claims per second with `claimers` processes started together; checks one owner per task.
    They run in the board's parent folder: `python -c` puts its working folder first on the
    import path, and a checkout there would shadow the installation being measured."""
    # The board's cache file, as the first command after a clone leaves it: each claimer then
    # starts from it instead of all of them parsing every task file at once.
    subprocess.run([python, "-c", CACHE_WRITER, str(root)], cwd=root.parent, env=env, check=True)
    settle_disk()  # the worker files and the cache file just written
    ready = root.parent / f"{root.name}-ready"
    ready.mkdir()
    go = root.parent / f"{root.name}-go"
    procs = [
        subprocess.Popen(
            [python, "-c", CLAIMER, str(root), f"c{p}-", str(per_claimer), str(go), str(ready / str(p)), mode],
            stdout=subprocess.PIPE,
            text=True,
            cwd=root.parent,
            env=env,
        )
        for p in range(claimers)
    ]
    deadline = time.monotonic() + 300
    while len(list(ready.iterdir())) < claimers:
        if time.monotonic() > deadline:
            raise SystemExit("claimers did not start")
        time.sleep(0.01)
    started = time.time()
    go.touch()
    results = [json.loads(proc.communicate(timeout=900)[0]) for proc in procs]
    for result in results:
        check_code(python, result["code"])
    elapsed = max(r["done"] for r in results) - started
    claimed = [task for r in results for task in r["claimed"]]
    if len(claimed) != len(set(claimed)):
        raise SystemExit("a task was claimed twice")
    owners = [path for path in (root / ".moss" / "board" / "tasks").glob("*.md") if "\nassigned_worker: " in path.read_text()]
    if len(owners) != len(claimed):
        raise SystemExit("the files disagree with the claims")
    return {"rate": len(claimed) / elapsed, "claims": len(claimed), "cpu_per_claim": sum(r["cpu"] for r in results) * 1000 / max(1, len(claimed))}


# --------------------------------------------------------------------------- the run


def child(args: argparse.Namespace) -> None:
    import moss_files

    print(json.dumps({"code": moss_files.__file__, **latency(Path(args.root), args.repeat, claims_only=args.claims_only)}))


def check_code(python: str, code: str) -> None:
    """Refuse figures measured with another installation's code than `python`'s own."""
    expected = subprocess.run([python, "-c", "import moss_files; print(moss_files.__file__)"], cwd="/", capture_output=True, text=True, check=True).stdout
    if code.strip() != expected.strip():
        raise SystemExit(f"{python} measured {code}, not its own {expected.strip()}")


def measure_install(python: str, moss: str, root: Path, repeat: int, env: dict[str, str]) -> dict[str, Any]:
    command = [python, str(Path(__file__).resolve()), "--child", "--root", str(root), "--repeat", str(repeat)]
    figures = json.loads(run_process(command, root, env)[2])
    check_code(python, figures.pop("code"))
    figures["moss task list"] = process_figure([moss, "task", "list", "--json"], root, env, 3)
    figures["moss task claim"] = process_figure([moss, "task", "claim", "-w", "cli0", "--json"], root, env, 1)
    return figures


def cache_root() -> Path:
    """Where generated boards are kept between runs (building 20,000 task files takes a minute)."""
    return Path(os.environ.get("MOSS_BENCH_CACHE") or Path(tempfile.gettempdir()) / "moss-bench-cache")


def cached_board(count: int, *, claimable: int, done: int, seed: int = 7) -> Path:
    """A workspace with a generated board of this shape, built once into the cache folder."""
    folder = cache_root() / f"board-{count}-{claimable}-{done}-{seed}-v1"
    if (folder / ".bench-done").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    build_board(folder, count, claimable=claimable, done=done, seed=seed)
    (folder / ".bench-done").touch()
    return folder


def durable_write_floor(folder: Path, repeat: int) -> dict[str, float]:
    """One atomic durable write of a task-sized file: what any claim that records its owner costs."""
    from moss_files.foundation import fs

    data = b"x" * 900
    return timed(lambda n: fs.write_atomic(folder / f"floor-{n % 2}.md", data), repeat)


def issue_rows(size: int, *, quick: bool = False, baseline: str | None = None) -> list[shared.Row]:
    """Issue 29's board-claim row at a corpus of `size` (10,000-class: 20,000 tasks, three
    quarters DONE, a twentieth WORKING and free): a claim in a fresh context and in a long-lived
    one, and claims/s from 8 processes at once (each task exactly one owner, or SystemExit);
    for this installation and, if given, `baseline` (another installation's python)."""
    tasks = 2 * size
    claimable, done = max(8, tasks // 20), tasks * 3 // 4
    source = cached_board(tasks, claimable=claimable, done=done)
    temp = Path(tempfile.mkdtemp(prefix="moss-bench-board-"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["PYTHONPYCACHEPREFIX"] = str(temp / "pycache")
    installs = {"this": sys.executable, **({"baseline": baseline} if baseline else {})}
    claimers = 8
    total = min(480, claimable) // claimers * claimers
    note = f"{tasks} tasks, {done} DONE, {claimable} WORKING and free"
    out: list[shared.Row] = []
    try:
        for label, python in installs.items():
            root = temp / f"board-{label}"
            copy_board(source, root)
            figures = json.loads(
                run_process(
                    [python, str(Path(__file__).resolve()), "--child", "--claims-only", "--root", str(root), "--repeat", "5" if quick else "15"], root, env
                )[2]
            )
            check_code(python, figures.pop("code"))
            write_floor = durable_write_floor(temp, 9)
            rates = {}
            for count in (1, claimers):
                board = temp / f"concurrent-{label}-{count}"
                copy_board(source, board)
                register_team(board, [f"c{p}-{n:04d}" for p in range(count) for n in range(total // count)])
                rates[count] = concurrent_claims(python, board, count, total // count, "long-lived", env)
                shutil.rmtree(board, ignore_errors=True)
            fresh, warm, stat = figures["claim fresh"], figures["claim warm"], figures["stat floor"]
            common = {"size": size, "build": label, "note": note}
            one = f"1 process: {rates[1]['cpu_per_claim']:.2f} ms CPU a claim"  # the floor row's CPU, printed beside
            out += [
                shared.Row(
                    measure="board claim, fresh context", value=fresh["wall"], unit="ms", compare=shared.AT_MOST, limit=20, floor=stat["wall"],
                    floor_name="os.stat of every board file", cpu=fresh["cpu"], **common,
                ),
                shared.Row(
                    measure="board claim, long-lived context", value=warm["wall"], unit="ms", compare=shared.AT_MOST, limit=5, floor=write_floor["wall"],
                    floor_name="one durable file write", cpu=warm["cpu"], **common,
                ),
                shared.Row(
                    measure=f"claims/s, {claimers} processes, one owner each", value=rates[claimers]["rate"], unit="claims/s", compare=shared.AT_LEAST, limit=200,
                    floor=rates[1]["rate"], floor_name="1 process", cpu=rates[claimers]["cpu_per_claim"], **{**common, "note": f"{note}; {one}"},
                ),
            ]  # fmt: skip
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return out


def print_cpu(found: list[shared.Row]) -> None:
    """The CPU beside the rows' wall figures: a claim's (median, its process's every thread),
    and for claims/s the CPU a claim costs summed over every claimer process (the waiters'
    included), on 8 processes and on 1."""
    print(f"\n  {'CPU of the rows above':<44} {'size':>7} {'build':<8} {'CPU':>16}")
    for row in found:
        if row.cpu is None:
            continue
        beside = row.note.rsplit("; ", 1)[1] if row.unit == "claims/s" and "; " in row.note else ""
        cpu = f"{row.cpu:.2f} ms" + (" a claim" if row.unit == "claims/s" else "")
        print(f"  {row.measure:<44} {row.size:>7} {row.build:<8} {cpu:>16}  {beside}")


def rows_main() -> None:
    """`--rows-only`: issue 29's rows at each `--sizes`, for `bench/all.py` (see bench/rows.py)."""
    parser = argparse.ArgumentParser(description="issue 29's board rows")
    shared.add_common_arguments(parser, default_sizes=(10_000,))
    parser.add_argument("--rows-only", action="store_true", required=True)
    args = parser.parse_args()
    moss = shared.baseline_moss(args.baseline)
    baseline = str(Path(moss).with_name("python")) if moss else None
    found = [row for size in shared.sizes(args.sizes, (10_000,)) for row in issue_rows(size, quick=args.quick, baseline=baseline)]
    print(f"board rows; medians, wall ms; {shared.load()} (a shared machine: noisy)")
    shared.print_rows(found)
    print_cpu(found)
    shared.write_rows(args.json, found)


ROWS = ("list warm", "list fresh", "first read", "claim warm", "claim fresh", "moss task list", "moss task claim", "stat floor")


def main() -> None:
    if "--rows-only" in sys.argv[1:]:
        rows_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10,5000", help="board sizes (tasks), comma-separated")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per figure")
    parser.add_argument("--claimers", type=int, default=8, help="concurrent claimer processes")
    parser.add_argument("--per-claimer", type=int, default=60, help="claims each claimer process makes at most")
    parser.add_argument("--baseline", default=None, help="another installation's python (the 'before'), measured alternately")
    parser.add_argument("--skip-throughput", action="store_true", help="latency only")
    # Handled before this parser (rows_main), listed here so that --help shows it.
    parser.add_argument("--rows-only", action="store_true", help="only issue 29's rows, as bench/all.py runs them (`--rows-only --help`: their options)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--claims-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    installs = {"after": sys.executable, **({"before": args.baseline} if args.baseline else {})}
    moss = {label: str(Path(python).parent / "moss") for label, python in installs.items()}
    sizes = [int(part) for part in args.sizes.split(",")]
    temp = Path(tempfile.mkdtemp(prefix="moss-bench-board-"))
    # As an installed tool runs: with a bytecode cache (this environment may disable writing
    # .pyc files, which would make every process recompile every module).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["PYTHONPYCACHEPREFIX"] = str(temp / "pycache")
    try:
        for label in installs:
            run_process([moss[label], "version"], temp, env)  # warm the bytecode cache
        floor = {label: process_figure([moss[label], "version"], temp, env, 5) for label in installs}
        print(f"board bench; medians of {args.repeat} calls; wall / CPU in ms; {', '.join(installs)} measured alternately")
        print("  floors, same run: `moss version` as a process " + "; ".join(f"{label} {f['wall']:.0f} / {f['cpu']:.0f}" for label, f in floor.items()))
        for number, size in enumerate(sizes):
            source = temp / f"board-{size}"
            source.mkdir()
            subprocess.run(["git", "init", "-q", str(source)], check=True)
            build_board(source, size, claimable=max(1, size // 5))
            files = sum(1 for _ in (source / ".moss" / "board").rglob("*.md"))
            figures: dict[str, dict[str, dict[str, float]]] = {}
            for label in list(installs)[:: -1 if number % 2 else 1]:  # who goes first alternates
                root = temp / f"{label}-{size}"
                copy_board(source, root)
                figures[label] = measure_install(installs[label], moss[label], root, args.repeat, env)
            print(f"\n{size} tasks ({files} board files, {max(1, size // 5)} WORKING and free)")
            print(f"  {'':<18}" + "".join(f"{label:>18}" for label in installs))
            for row in ROWS:
                cells = "".join(f"{figures[label][row]['wall']:>10.1f} /{figures[label][row]['cpu']:>6.1f}" for label in installs)
                print(f"  {row:<18}{cells}")
        if args.skip_throughput:
            return
        size = max(sizes)
        claimable = args.claimers * args.per_claimer
        tasks = max(size, claimable)
        print(f"\nclaims/s, {tasks} tasks ({claimable} WORKING and free), fresh worker ids; CPU ms per claim in brackets")
        source = temp / "concurrent"
        source.mkdir()
        subprocess.run(["git", "init", "-q", str(source)], check=True)
        build_board(source, tasks, claimable=claimable, seed=11)
        for mode in ("long-lived", "fresh"):
            for claimers in (1, args.claimers):
                per_claimer = claimable // claimers
                cells = []
                for label in installs:
                    root = temp / f"concurrent-{label}-{mode}-{claimers}"
                    copy_board(source, root)
                    register_team(root, [f"c{p}-{n:04d}" for p in range(claimers) for n in range(per_claimer)])
                    got = concurrent_claims(installs[label], root, claimers, per_claimer, mode, env)
                    cells.append(f"{label} {got['rate']:6.1f} claims/s [{got['cpu_per_claim']:5.1f}]")
                    shutil.rmtree(root, ignore_errors=True)
                what = f"{claimers} process{'es' if claimers > 1 else ''}, {'one context each' if mode == 'long-lived' else 'a new context per claim'}"
                print(f"  {what:<42} " + "   ".join(cells) + "   (each task one owner)")
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()

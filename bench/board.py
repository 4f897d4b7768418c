"""Board latency and claim throughput: claim_next_task and list_tasks with 10 and 5,000 tasks,
and claims per second with 8 claimer processes at once.

Run: .venv/bin/python bench/board.py [--sizes 10,5000] [--repeat 20] [--claimers 8]
Builds each board in a temporary folder (files written directly, as a git checkout would:
epics of 100 tasks, a mix of statuses, three-step plans, definitions of done). Prints medians
in milliseconds with the board size:
- warm: one long-lived context, as `moss serve` keeps (parsed files cached in memory by stat);
- cold: a fresh context per call, as each `moss` command starts (parsed items read from
  .moss/cache/board.json, files stat'ed);
- first read: a fresh context with no cache file (every frontmatter parsed), as after a clone;
- process: the whole `moss task ...` command, interpreter start-up included.
A claim is timed alone; the task is released (untimed) so every claim sees the same board.
The concurrent run starts N processes that each claim with fresh worker ids (pre-registered,
all in one team, so the solo-worker rule does not serialize them by epic) until nothing is
left; it checks afterwards that no task has two owners.
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

from moss_files.board import claims, files, queries
from moss_files.board.model import PRIORITIES, Epic, Step, Task, Team, Worker
from moss_files.board.store import BoardStore
from moss_files.board.usecase import STORE_KEY, board_store
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.ids import IdSource, seeded_random

EPIC_SIZE = 100
STAMP = "2026-01-21T10:00:00Z"


def build_board(root: Path, count: int, *, claimable: int, seed: int = 7) -> list[str]:
    """Write `count` tasks (the first `claimable` WORKING and free); return the task ids."""
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
        status = "WORKING" if index < claimable else others[index % len(others)]
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
    base = root / ".moss" / "board"
    for worker in workers:
        (base / "workers" / f"{worker}.md").write_text(files.render_worker(Worker(id=worker, type="worker", created=STAMP, updated=STAMP)))
    team = Team(id="TEAM-20260121-benchtea", name="Bench", role="worker", max_size=len(workers) + 1, members=tuple(workers), created=STAMP, updated=STAMP)
    (base / "teams" / f"{team.id}.md").write_text(files.render_team(team))


def without_cache_file(root: Path) -> Context:
    """A fresh context whose board store neither reads nor writes .moss/cache/board.json."""
    ctx = Context(root)
    ctx.resource(STORE_KEY, lambda: BoardStore(root, persist=False))
    return ctx


def median_ms(action: Callable[[int], object], repeat: int, *, after: Callable[[int], object] | None = None) -> float:
    times = []
    for index in range(repeat):
        started = time.perf_counter()
        action(index)
        times.append((time.perf_counter() - started) * 1000)
        if after is not None:
            after(index)
    return statistics.median(times)


def process_ms(command: list[str], cwd: Path, repeat: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


CLAIMER = r"""
import json, sys, time
from pathlib import Path
from moss_files.board import claims
from moss_files.board.usecase import board_store
from moss_files.foundation.context import Context
root, prefix, count, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
ctx = Context(root, actor="agent")
board_store(ctx).load()
Path(sys.argv[5]).touch()
while not go.exists():
    time.sleep(0.0005)
claimed = []
for n in range(count):
    result = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=f"{prefix}{n:04d}")
    if not result["hasNext"]:
        break
    claimed.append(result["task"]["id"])
print(json.dumps({"claimed": claimed, "done": time.time()}))
"""


def concurrent_claims(root: Path, claimers: int, per_claimer: int) -> tuple[float, int]:
    """Claims per second with `claimers` processes started together; checks one owner per task."""
    ready = root.parent / f"{root.name}-ready"
    ready.mkdir()
    go = root.parent / f"{root.name}-go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(root), f"c{p}-", str(per_claimer), str(go), str(ready / str(p))], stdout=subprocess.PIPE, text=True
        )
        for p in range(claimers)
    ]
    while len(list(ready.iterdir())) < claimers:
        time.sleep(0.01)
    started = time.time()
    go.touch()
    results = [json.loads(proc.communicate(timeout=600)[0]) for proc in procs]
    elapsed = max(r["done"] for r in results) - started
    claimed = [task for r in results for task in r["claimed"]]
    if len(claimed) != len(set(claimed)):
        raise SystemExit("a task was claimed twice")
    owners = [t["assignedWorkerId"] for t in queries.list_tasks(Context(root), statuses=["WORKING"])["tasks"] if t["assignedWorkerId"]]
    if len(owners) != len(claimed) or len(set(owners)) != len(owners):
        raise SystemExit("the files disagree with the claims")
    return len(claimed) / elapsed, len(claimed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10,5000", help="board sizes (tasks), comma-separated")
    parser.add_argument("--repeat", type=int, default=20, help="timed calls per figure")
    parser.add_argument("--claimers", type=int, default=8, help="concurrent claimer processes")
    parser.add_argument("--per-claimer", type=int, default=60, help="claims each claimer process makes at most")
    args = parser.parse_args()
    sizes = [int(part) for part in args.sizes.split(",")]
    moss = str(Path(sys.executable).parent / "moss")
    temp = Path(tempfile.mkdtemp(prefix="moss-bench-board-"))
    # As an installed tool runs: with a bytecode cache (this environment may disable writing
    # .pyc files, which would make every process recompile every module).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(temp / "pycache")
    try:
        floor = process_ms([moss, "version"], temp, 5, env)
        print(f"board latency, median of {args.repeat} (ms); `moss version` takes {floor:.0f} ms as a process")
        print(
            f"{'tasks':>6}  {'list warm':>9}  {'list cold':>9}  {'first read':>10}  {'claim warm':>10}  {'claim cold':>10}"
            f"  {'moss task list':>14}  {'moss task claim':>15}"
        )
        for size in sizes:
            root = temp / f"board-{size}"
            root.mkdir()
            subprocess.run(["git", "init", "-q", str(root)], check=True)
            build_board(root, size, claimable=max(1, size // 5))
            time.sleep(0.1)  # let the files age past the racy window, as a checkout has
            first = median_ms(lambda _: queries.list_tasks(without_cache_file(root)), 3)
            warm = Context(root, actor=AGENT)
            board_store(warm).load()

            def release(_: int) -> None:
                for task in queries.list_tasks(warm, statuses=["WORKING"])["tasks"]:
                    if task["assignedWorkerId"]:
                        claims.release_task(warm, task_id=task["id"])

            list_warm = median_ms(lambda _: queries.list_tasks(warm), args.repeat)
            list_cold = median_ms(lambda _: queries.list_tasks(Context(root)), max(3, args.repeat // 2))
            claim_warm = median_ms(lambda n: claims.claim_next_task(warm, statuses=["WORKING"], worker_id=f"solo{n % 2}"), args.repeat, after=release)
            claim_cold = median_ms(
                lambda n: claims.claim_next_task(Context(root, actor=AGENT), statuses=["WORKING"], worker_id="solo0"), max(3, args.repeat // 2), after=release
            )
            cli_list = process_ms([moss, "task", "list", "--json"], root, 3, env)
            cli_claim = process_ms([moss, "task", "claim", "-w", "solo0", "--json"], root, 1, env)
            print(
                f"{size:>6}  {list_warm:>9.1f}  {list_cold:>9.1f}  {first:>10.1f}  {claim_warm:>10.1f}  {claim_cold:>10.1f}"
                f"  {cli_list:>14.0f}  {cli_claim:>15.0f}"
            )

        size = max(sizes)
        claimable = args.claimers * args.per_claimer
        tasks = max(size, claimable)
        print(f"\nclaims/s, {tasks} tasks ({claimable} WORKING and free), each claimer process claiming with fresh worker ids")
        for claimers in (1, args.claimers):
            root = temp / f"concurrent-{claimers}"
            root.mkdir()
            subprocess.run(["git", "init", "-q", str(root)], check=True)
            per_claimer = claimable // claimers
            build_board(root, tasks, claimable=claimable, seed=11)
            register_team(root, [f"c{p}-{n:04d}" for p in range(claimers) for n in range(per_claimer)])
            rate, made = concurrent_claims(root, claimers, per_claimer)
            print(f"{claimers:>2} claimer process{'es' if claimers > 1 else '  '}: {rate:6.1f} claims/s ({made} claims, each task one owner)")
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()

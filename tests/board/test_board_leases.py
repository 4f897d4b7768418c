"""Heartbeats and leases: a silent worker's task goes back to its column, unassigned, with an
activity entry; its late heartbeat or step is refused (LEASE_EXPIRED) until it claims again;
a worker killed -9 while holding a task loses it after the lease and exactly one of several
racing claimers gets it; two clones that both released and re-claimed a task meet as a git
conflict on its owner, never as two owners. Deregistration releases everything at once."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from board_support import Calls, Clock, board, connect, moss
from conftest import run_cli
from helpers import wait_for
from mcp_support import anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)

from moss_files.board import claims, editing, leases, plans, queries, rules
from moss_files.board.store import BoardStore
from moss_files.foundation import document
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import MossError


def agent(root: Path, clock: Clock | None = None) -> Context:
    return Context(root, actor=AGENT, **({"clock": clock} if clock else {}))


def held_task(root: Path, clock: Clock, worker: str = "dev") -> str:
    """A WORKING task claimed by `worker` at the clock's time."""
    human = Context(root, clock=clock)
    epic = editing.create_epic(human, title="Checkout")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="Card form", status="WORKING")["task"]["id"]
    assert claims.claim_next_task(agent(root, clock), statuses=["WORKING"], worker_id=worker)["task"]["id"] == task
    return task


def events(root: Path, kind: str, task: str | None = None) -> list[dict[str, Any]]:
    found = queries.get_activity_log(Context(root), event_types=[kind], task_id=task, limit=1000)["events"]
    return list(reversed(found))


def code_of(call: Any) -> str:
    with pytest.raises(MossError) as caught:
        call()
    return caught.value.code


# --------------------------------------------------------------------------- one clone, a clock in hand


def test_heartbeats_keep_the_lease_and_silence_loses_it(tmp_path: Path) -> None:
    clock = Clock()
    root = board(tmp_path / "p", lease_ms=60_000)
    task = held_task(root, clock)
    for _ in range(3):  # a worker that keeps beating keeps its task however long it works
        clock.tick(seconds=50)
        beat = leases.heartbeat(agent(root, clock), worker_id="dev")
        assert (beat["currentTaskId"], beat["leaseExpiresAt"]) == (task, rules.format_moment(clock.now.replace(microsecond=0) + rules.timedelta(seconds=60)))
    clock.tick(seconds=61)
    # Nobody looked yet: the release happens at the next write, any writer's (here a sweep).
    swept = leases.sweep(agent(root, clock))
    assert swept == {"released": [{"taskId": task, "workerId": "dev", "status": "WORKING"}], "count": 1}
    shown = moss(root, "task", "show", task)
    assert (shown["status"], shown["assignedWorkerId"]) == ("WORKING", None)  # back in its column
    assert moss(root, "worker", "show", "dev")["status"] == "STALE"
    stale = events(root, "WORKER_STALE", task)
    assert len(stale) == 1 and stale[0]["payload"]["leaseMs"] == 60_000
    assert [e["payload"]["reason"] for e in events(root, "WORKER_RELEASED", task)] == ["lease expired"]
    note = moss(root, "board", "chat", "read", task)["messages"]
    assert note[0]["sender"] == "system" and "@dev's lease" in note[0]["content"]


def test_the_old_owner_is_refused_until_it_claims_again(tmp_path: Path) -> None:
    clock = Clock()
    root = board(tmp_path / "p", lease_ms=60_000)
    task = held_task(root, clock)
    clock.tick(minutes=5)
    late = agent(root, clock)
    # The lease ran out and nobody swept: the late heartbeat itself settles it, then refuses.
    assert code_of(lambda: leases.heartbeat(late, worker_id="dev")) == "LEASE_EXPIRED"
    assert code_of(lambda: plans.complete_task(late, task_id=task, worker_id="dev")) == "LEASE_EXPIRED"
    assert code_of(lambda: claims.release_task(late, task_id=task, worker_id="dev")) == "LEASE_EXPIRED"
    # Claimed once by another worker; the old owner may not take it back by a heartbeat.
    assert claims.claim_next_task(late, statuses=["WORKING"], worker_id="dev2")["task"]["id"] == task
    assert code_of(lambda: leases.heartbeat(late, worker_id="dev", task_id=task)) == "LEASE_EXPIRED"
    assert claims.claim_next_task(late, statuses=["WORKING"], worker_id="dev")["hasNext"] is False
    # Its claim brought it back to life, with a new lease.
    assert moss(root, "worker", "show", "dev")["status"] == "IDLE"
    assert leases.heartbeat(late, worker_id="dev")["ok"] is True
    assert [e["payload"]["previousStatus"] for e in events(root, "WORKER_CONNECTED")] == ["STALE"]


def test_a_workers_own_calls_renew_its_lease_and_one_without_heartbeats_keeps_its_task(tmp_path: Path) -> None:
    clock = Clock()
    root = board(tmp_path / "p", lease_ms=60_000)
    task = held_task(root, clock)
    for _ in range(3):
        clock.tick(seconds=50)  # asking again is a sign of life too
        assert claims.claim_next_task(agent(root, clock), statuses=["WORKING"], worker_id="dev")["alreadyAssigned"]["taskId"] == task
    assert leases.sweep(agent(root, clock))["count"] == 0
    store = BoardStore(root)
    store.update("worker", "dev", lambda w: replace(w, heartbeat=None))
    clock.tick(hours=10)  # a worker that never sent a heartbeat (registered by hand, an older version) is not leased
    assert leases.sweep(agent(root, clock))["count"] == 0
    assert moss(root, "task", "show", task)["assignedWorkerId"] == "dev"


def test_leases_off_and_the_setting_in_project_md(tmp_path: Path) -> None:
    clock = Clock()
    root = board(tmp_path / "p", lease_ms=0)
    task = held_task(root, clock)
    clock.tick(days=30)
    assert leases.sweep(agent(root, clock))["count"] == 0
    assert moss(root, "task", "show", task)["assignedWorkerId"] == "dev"
    assert moss(root, "board", "status")["project"]["settings"]["staleWorkerTimeoutMs"] == 0


def test_deregister_releases_everything_and_is_idempotent(tmp_path: Path) -> None:
    clock = Clock()
    root = board(tmp_path / "p")
    task = held_task(root, clock)
    gone = moss(root, "worker", "deregister", "dev", "--reason", "terminal closed")
    assert (gone["releasedTaskIds"], gone["alreadyDead"]) == ([task], False)
    assert moss(root, "worker", "deregister", "dev")["alreadyDead"] is True
    assert moss(root, "task", "show", task)["assignedWorkerId"] is None
    assert moss(root, "worker", "heartbeat", "-w", "dev", code=5)["error"]["code"] == "LEASE_EXPIRED"
    assert moss(root, "worker", "deregister", "nobody", code=3)["error"]["code"] == "NOT_FOUND"


def test_the_cli_heartbeat_and_sweep(tmp_path: Path) -> None:
    root = board(tmp_path / "p", lease_ms=600_000)
    task = held_task(root, Clock(Clock().now.replace(year=2099)))  # a claim far in the future: the lease is fresh
    beat = moss(root, "worker", "heartbeat", "-w", "dev", "--task", task)
    assert beat["currentTaskId"] == task and beat["leaseMs"] == 600_000
    assert moss(root, "worker", "heartbeat", "-w", "dev", "--task", "TASK-other", code=5)["error"]["code"] == "LEASE_EXPIRED"
    assert moss(root, "worker", "sweep")["count"] == 0
    assert moss(root, "worker", "list")["workers"][0]["leaseExpiresAt"] is not None


@pytest.mark.anyio
async def test_heartbeat_and_deregister_through_the_client(tmp_path: Path) -> None:
    clock = Clock(Clock().now.replace(year=2099))
    root = board(tmp_path / "p")
    task = held_task(root, clock)
    async with connect(root) as client:
        calls = Calls(client)
        beat = await calls.ok("moe.heartbeat", workerId="dev", taskId=task)
        assert beat["ok"] is True and beat["currentTaskId"] == task
        gone = await calls.ok("moe.deregister_worker", workerId="dev", reason="crashed")
        assert gone["releasedTaskIds"] == [task]
        refused = await calls.error("moe.heartbeat", "LEASE_EXPIRED", workerId="dev")
        assert refused["details"]["status"] == "DEAD"


# --------------------------------------------------------------------------- a crash, real processes

HOLDER = r"""
import json, sys, time
from pathlib import Path
from moss_files.board import claims, leases
from moss_files.foundation.context import Context

ctx = Context(Path(sys.argv[1]), actor="agent")
got = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="crasher")
print(json.dumps({"claimed": got["task"]["id"]}), flush=True)
while True:
    leases.heartbeat(ctx, worker_id="crasher")
    time.sleep(0.1)
"""

CLAIMER = r"""
import json, sys, time
from pathlib import Path
from moss_files.board import claims, waiting
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError

root, worker, stop = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
ctx = Context(root, actor="agent")
got, errors = [], []
deadline = time.monotonic() + 90
while not stop.exists() and time.monotonic() < deadline:
    try:
        answer = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=worker)
    except MossError as err:
        errors.append(err.code)
        answer = {}
    if answer.get("hasNext"):
        got.append(answer["task"]["id"])
        break
    waiting.wait_for_task(ctx, statuses=["WORKING"], worker_id=worker, timeout_ms=3000)
print(json.dumps({"worker": worker, "got": got, "errors": errors}))
"""


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no output in time"
    return proc.stdout.readline()


@pytest.mark.slow
def test_a_holder_killed_9_loses_its_task_after_the_lease_and_one_racer_gets_it(tmp_path: Path) -> None:
    lease_ms = 1500
    root = board(tmp_path / "p", lease_ms=lease_ms)
    human = Context(root)
    epic = editing.create_epic(human, title="Checkout")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="Card form", status="WORKING")["task"]["id"]
    env = dict(os.environ)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    stop = root / ".moss" / "board" / "stop-the-racers"
    racers: list[subprocess.Popen[str]] = []
    try:
        assert json.loads(read_line(holder, 60)) == {"claimed": task}
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", CLAIMER, str(root), f"racer-{n}", str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
            for n in range(5)
        ]
        store = BoardStore(root)
        wait_for(lambda: {f"racer-{n}" for n in range(5)} <= set(store.load().workers), timeout=60, message="racers waiting")
        assert store.get("task", task).assigned_worker == "crasher"  # alive: nobody takes it
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        killed = time.time()
        winner = wait_for(lambda: (store.get("task", task).assigned_worker or "").startswith("racer-") and store.get("task", task).assigned_worker, timeout=60)
        taken = time.time()
    finally:
        stop.touch()
        results = [json.loads(proc.communicate(timeout=60)[0]) for proc in racers]
        if holder.poll() is None:
            holder.kill()
        holder.communicate()  # closes its pipes
    assert [r["worker"] for r in results if r["got"]] == [winner] and all(r["got"] in ([], [task]) for r in results)
    assert all(set(r["errors"]) <= {"CONFLICT"} for r in results)
    # Released once, after the lease measured from the last heartbeat, then claimed once. (The
    # winner exits without heartbeats, so its own lease may run out too before the racers stop.)
    stale = [e for e in events(root, "WORKER_STALE", task) if e["workerId"] == "crasher"]
    assert len(stale) == 1
    last_beat = rules.parse_time(stale[0]["payload"]["lastHeartbeat"])
    released_at = rules.parse_time(stale[0]["timestamp"])
    assert last_beat is not None and released_at is not None and (released_at - last_beat).total_seconds() * 1000 >= lease_ms
    assert [e["workerId"] for e in events(root, "TASK_CLAIMED", task)] == ["crasher", winner]
    assert taken - killed < 30
    # The crashed worker, restarted, is refused until it claims again.
    assert code_of(lambda: leases.heartbeat(agent(root), worker_id="crasher")) == "LEASE_EXPIRED"
    assert code_of(lambda: plans.complete_task(agent(root), task_id=task, worker_id="crasher")) == "LEASE_EXPIRED"


# --------------------------------------------------------------------------- two clones


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stdout}{done.stderr}")
    return done


def commit(cwd: Path, message: str) -> None:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)


def clones(tmp_path: Path, clock: Clock) -> tuple[Path, Path, str]:
    """An origin with a task held by w1 (lease 60 s), committed; two clones of it."""
    origin = tmp_path / "origin"
    git(tmp_path, "init", "-q", "-b", "main", str(origin))
    assert run_cli("moss", "init", cwd=origin).returncode == 0
    board(origin, lease_ms=60_000)
    task = held_task(origin, clock, worker="w1")
    commit(origin, "w1 holds the task")
    made = []
    for name in ("a", "b"):
        git(tmp_path, "clone", "-q", str(origin), name)
        assert run_cli("moss", "merge", "setup", cwd=tmp_path / name).returncode == 0
        made.append(tmp_path / name)
    return made[0], made[1], task


@pytest.mark.slow
def test_two_clones_that_both_released_and_claimed_meet_as_a_conflict_on_the_owner(tmp_path: Path) -> None:
    clock = Clock()
    a, b, task = clones(tmp_path, clock)
    clock.tick(minutes=2)  # w1 went silent in both clones' view
    assert claims.claim_next_task(agent(a, clock), statuses=["WORKING"], worker_id="w2")["task"]["id"] == task
    commit(a, "w2 takes the task")
    assert claims.claim_next_task(agent(b, clock), statuses=["WORKING"], worker_id="w3")["task"]["id"] == task
    commit(b, "w3 takes the task")
    git(a, "fetch", "-q", str(b), "main")
    merged = git(a, "merge", "-q", "FETCH_HEAD", "-m", "merge b", check=False)
    assert merged.returncode != 0
    path = f".moss/board/tasks/{task}.md"
    assert git(a, "diff", "--name-only", "--diff-filter=U").stdout.split() == [path]
    text = (a / path).read_text()
    block = re.search(r"^<<<<<<<.*?^>>>>>>>[^\n]*\n", text, re.S | re.M)
    assert block is not None and text.count("<<<<<<<") == 1  # the only key in conflict: one owner or the other, never both
    assert re.findall(r"^assigned_worker: (\w+)$", block.group(0), re.M) == ["w2", "w1", "w3"]  # ours, the base, theirs
    shown = run_cli("moss", "task", "show", task, "--json", cwd=a)
    assert shown.returncode == 4 and json.loads(shown.stderr)["error"]["code"] == "MERGE_CONFLICT"
    # w1's file merged cleanly: both sides marked it STALE.
    worker = document.parse((a / ".moss/board/workers/w1.md").read_text())
    assert worker.meta["status"] == "STALE"
    # A person resolves for one owner; the board reads again, with one owner.
    (a / path).write_text(text.replace(block.group(0), "assigned_worker: w2\n"))
    commit(a, "w2 keeps it")
    assert json.loads(run_cli("moss", "task", "show", task, "--json", cwd=a).stdout)["assignedWorkerId"] == "w2"


@pytest.mark.slow
def test_a_heartbeat_in_one_clone_and_a_release_in_the_other_merge_cleanly_with_one_owner(tmp_path: Path) -> None:
    clock = Clock()
    a, b, task = clones(tmp_path, clock)
    start = clock.now
    clock.tick(seconds=30)
    leases.heartbeat(agent(b, clock), worker_id="w1")  # w1 is alive in b's clone
    commit(b, "w1 beats")
    later = Clock(start)
    later.tick(minutes=2)  # but a saw nothing of it, and released after the lease
    assert claims.claim_next_task(agent(a, later), statuses=["WORKING"], worker_id="w2")["task"]["id"] == task
    commit(a, "w2 takes the task")
    git(a, "fetch", "-q", str(b), "main")
    git(a, "merge", "-q", "FETCH_HEAD", "-m", "merge b")
    assert json.loads(run_cli("moss", "task", "show", task, "--json", cwd=a).stdout)["assignedWorkerId"] == "w2"
    later.tick(seconds=1)
    assert code_of(lambda: leases.heartbeat(agent(a, later), worker_id="w1")) == "LEASE_EXPIRED"

"""Claims from many OS processes at the same instant: every task has one owner, every worker
at most one task, the solo-worker rule holds under contention, and a killed lock holder
blocks nobody."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from helpers import wait_for

from moss_files.board import claims, editing, queries, teams
from moss_files.foundation.context import AGENT, Context

# Each claimer imports everything and reads the board first, then waits for the go file, so
# all of them reach claim_next_task within a millisecond or so of each other.
CLAIMER = r"""
import json, sys, time
from pathlib import Path
from moss_files.board import claims
from moss_files.board.usecase import board_store
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError

root, worker, go, ready = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
ctx = Context(root, actor="agent")
board_store(ctx).load()
ready.joinpath(worker).touch()
deadline = time.monotonic() + 60
while not go.exists():
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.0002)
results = []
for _ in range(2):
    try:
        results.append(claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=worker))
    except MossError as err:
        results.append({"error": err.code})
print(json.dumps(results))
"""


def run_claimers(repo: Path, tmp_path: Path, workers: list[str]) -> dict[str, list[dict[str, Any]]]:
    go, ready = tmp_path / "go", tmp_path / "ready"
    ready.mkdir()
    procs = {
        worker: subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(repo), worker, str(go), str(ready)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for worker in workers
    }
    wait_for(lambda: len(list(ready.iterdir())) == len(workers), timeout=60, message="claimers ready")
    go.touch()
    results: dict[str, list[dict[str, Any]]] = {}
    for worker, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results[worker] = json.loads(out)
    return results


def owners_on_disk(repo: Path) -> dict[str, str | None]:
    listed = queries.list_tasks(Context(repo))
    return {task["id"]: task["assignedWorkerId"] for task in listed["tasks"]}


def test_many_processes_claim_fewer_tasks_one_owner_each(repo: Path, tmp_path: Path) -> None:
    human = Context(repo)
    workers = [f"w{n:02d}" for n in range(16)]
    team = teams.create_team(human, name="Everyone", role="worker", max_size=len(workers))["team"]["id"]
    for worker in workers:
        teams.join_team(human, team_id=team, worker_id=worker)  # teammates: the solo rule does not apply
    epic_id = editing.create_epic(human, title="Race")["epic"]["id"]
    tasks = {editing.create_task(human, epic_id=epic_id, title=f"t{n}", status="WORKING")["task"]["id"] for n in range(6)}

    results = run_claimers(repo, tmp_path, workers)

    winners = {worker: calls[0]["task"]["id"] for worker, calls in results.items() if calls[0].get("hasNext")}
    assert len(winners) == len(tasks)
    assert set(winners.values()) == tasks  # every task claimed, none twice
    for worker, calls in results.items():
        if worker in winners:
            assert calls[1] == {
                "hasNext": False,
                "alreadyAssigned": {"taskId": winners[worker], "title": calls[1]["alreadyAssigned"]["title"], "status": "WORKING"},
            }
        else:
            assert calls == [{"hasNext": False}, {"hasNext": False}]
    assert owners_on_disk(repo) == {task: worker for worker, task in winners.items()}
    claimed = queries.get_activity_log(human, event_types=["TASK_CLAIMED"], limit=100)["events"]
    assert Counter(e["taskId"] for e in claimed) == Counter(tasks)


def test_solo_rule_holds_under_contention(repo: Path, tmp_path: Path) -> None:
    human = Context(repo)
    epics = [editing.create_epic(human, title=f"E{n}")["epic"]["id"] for n in range(3)]
    for epic_id in epics:
        for n in range(3):
            editing.create_task(human, epic_id=epic_id, title=f"t{n}", status="WORKING")
    workers = [f"solo{n:02d}" for n in range(10)]

    results = run_claimers(repo, tmp_path, workers)

    first_calls = [calls[0] for calls in results.values()]
    winners = [call for call in first_calls if call.get("hasNext")]
    assert len(winners) == len(epics)  # one worker per epic for WORKING
    assert {call["task"]["epicId"] for call in winners} == set(epics)
    assert all(call.get("hasNext") or call.get("error") == "WORKER_CONFLICT" for call in first_calls)
    owners = [owner for owner in owners_on_disk(repo).values() if owner]
    assert len(owners) == len(set(owners)) == len(epics)


def test_a_killed_lock_holder_blocks_nobody(repo: Path, tmp_path: Path) -> None:
    human = Context(repo)
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    task_id = editing.create_task(human, epic_id=epic_id, title="t", status="WORKING")["task"]["id"]
    held = tmp_path / "held"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from moss_files.board.store import BoardStore\n"
            "with BoardStore(Path(sys.argv[1])).writing():\n    Path(sys.argv[2]).touch(); time.sleep(60)\n",
            str(repo),
            str(held),
        ],
    )
    try:
        wait_for(held.exists, timeout=30, message="lock taken")
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        started = time.monotonic()
        claim = claims.claim_next_task(Context(repo, actor=AGENT), statuses=["WORKING"], worker_id="w1")
        assert claim["task"]["id"] == task_id
        assert time.monotonic() - started < 5
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)


def test_threads_sharing_one_context_claim_like_the_mcp_server(repo: Path) -> None:
    # The MCP server runs tools on worker threads over one context (one store and its cache).
    import threading

    human = Context(repo)
    team = teams.create_team(human, name="Threads", role="worker", max_size=12)["team"]["id"]
    workers = [f"t{n:02d}" for n in range(12)]
    for worker in workers:
        teams.join_team(human, team_id=team, worker_id=worker)
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    tasks = {editing.create_task(human, epic_id=epic_id, title=f"t{n}", status="WORKING")["task"]["id"] for n in range(5)}
    shared = Context(repo, actor=AGENT)
    start = threading.Barrier(len(workers))
    results: dict[str, dict[str, Any]] = {}

    def claim(worker: str) -> None:
        start.wait(timeout=30)
        results[worker] = claims.claim_next_task(shared, statuses=["WORKING"], worker_id=worker)

    threads = [threading.Thread(target=claim, args=(worker,)) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    winners = {worker: r["task"]["id"] for worker, r in results.items() if r["hasNext"]}
    assert len(results) == len(workers)
    assert sorted(winners.values()) == sorted(tasks)
    assert owners_on_disk(repo) == {task: worker for worker, task in winners.items()}

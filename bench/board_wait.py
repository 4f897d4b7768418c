"""Board waits and leases: how soon `wait_for_task` wakes after another process frees a task,
and how soon a task held by a worker killed -9 is released once its lease runs out.

Run: .venv/bin/python bench/board_wait.py [--rounds 40] [--lease-ms 2000] [--kills 5]

Wake-up: this process waits (`waiting.wait_for_task`, worker `dev`, a fresh context per
round as each `moss task wait` has); the moment it starts sleeping it tells a second process,
which releases a task its holder had (`claims.release_task`, as `moss task release` does). The
latency is from just before the release call in the other process to the waiter's answer
(the clocks are one machine's). Measured with the inotify watcher, then with the polling
fallback as the baseline of the same run; the release call's own duration is printed beside.

Lease: a holder process claims a task and sends a heartbeat every 100 ms; it is killed -9;
this process waits for the task as another worker. Printed: the lease, the time from the
kill to the waiter getting the task, and how long after the lease ran out (measured from the
last heartbeat the board recorded) the release was written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from moss_files import scaffold
from moss_files.board import claims, editing, queries, rules, waiting
from moss_files.foundation.context import AGENT, Context

RELEASER = r"""
import json, sys, time
from pathlib import Path
from moss_files.board import claims
from moss_files.foundation.context import Context
ctx = Context(Path(sys.argv[1]), actor="agent")
for line in sys.stdin:
    task, holder = line.split()
    before = time.time()
    claims.release_task(ctx, task_id=task, worker_id=holder)
    print(json.dumps({"before": before, "after": time.time()}), flush=True)
"""

HOLDER = r"""
import json, sys, time
from pathlib import Path
from moss_files.board import claims, leases
from moss_files.foundation.context import Context
ctx = Context(Path(sys.argv[1]), actor="agent")
got = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=sys.argv[2])
print(json.dumps({"claimed": got["task"]["id"]}), flush=True)
while True:
    leases.heartbeat(ctx, worker_id=sys.argv[2])
    time.sleep(0.1)
"""


def make_board(root: Path, lease_ms: int) -> None:
    root.mkdir(parents=True)
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    editing.init_board(Context(root))
    project = root / ".moss" / "board" / "project.md"
    project.write_text(project.read_text().replace("stale_worker_timeout_ms: 1800000", f"stale_worker_timeout_ms: {lease_ms}"))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def wake_ups(root: Path, rounds: int, *, poll: bool) -> tuple[list[float], list[float], str]:
    """Latencies (ms) from another process's release to the waiter's answer, and the release
    calls' durations (ms); the watcher the waits used."""
    releaser = subprocess.Popen([sys.executable, "-c", RELEASER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert releaser.stdin is not None and releaser.stdout is not None
    human = Context(root)
    latencies: list[float] = []
    calls: list[float] = []
    watcher = ""
    try:
        for n in range(rounds):
            # A fresh epic per round: the solo-worker rule never hides the freed task.
            epic = editing.create_epic(human, title=f"Round {n}")["epic"]["id"]
            task = editing.create_task(human, epic_id=epic, title=f"Task {n}", status="WORKING")["task"]["id"]
            holder = f"holder-{'p' if poll else 'i'}{n}"
            claims.claim_next_task(Context(root, actor=AGENT), statuses=["WORKING"], worker_id=holder, epic_id=epic)

            def release_now(_: str, task: str = task, holder: str = holder) -> None:
                releaser.stdin.write(f"{task} {holder}\n")  # type: ignore[union-attr]
                releaser.stdin.flush()  # type: ignore[union-attr]

            answer = waiting.wait_for_task(Context(root, actor=AGENT, notify=release_now), statuses=["WORKING"], worker_id="dev", timeout_ms=30_000, poll=poll)
            woke = time.time()
            times = json.loads(releaser.stdout.readline())
            if answer.get("task", {}).get("id") != task:
                raise SystemExit(f"round {n}: the waiter answered {answer}, not {task}")
            latencies.append((woke - times["before"]) * 1000)
            calls.append((times["after"] - times["before"]) * 1000)
            watcher = answer["watcher"]
            claims.set_task_status(human, task_id=task, status="BACKLOG", reason="bench round done")
    finally:
        releaser.stdin.close()
        releaser.wait(timeout=30)
    return latencies, calls, watcher


def lease_release(root: Path, lease_ms: int) -> tuple[float, float]:
    """(kill -> the waiter has the task, release written -> after the lease ran out), in ms."""
    human = Context(root)
    epic = editing.create_epic(human, title="Crash")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="Held by a crasher", status="WORKING")["task"]["id"]
    crasher = f"crasher-{task[-4:]}"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), crasher], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    try:
        claimed = json.loads(holder.stdout.readline())["claimed"]
        if claimed != task:
            raise SystemExit(f"the holder claimed {claimed}, not {task}")
        time.sleep(0.5)  # a few heartbeats
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        killed = time.time()
        answer = waiting.wait_for_task(
            Context(root, actor=AGENT), statuses=["WORKING"], worker_id=f"rescuer-{task[-4:]}", epic_id=epic, timeout_ms=lease_ms * 10
        )
        got = time.time()
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate()
    if answer.get("task", {}).get("id") != task:
        raise SystemExit(f"the task was not released: {answer}")
    stale = [e for e in queries.get_activity_log(human, event_types=["WORKER_STALE"], task_id=task, limit=10)["events"] if e["workerId"] == crasher]
    last_beat = rules.parse_time(stale[0]["payload"]["lastHeartbeat"])
    released = rules.parse_time(stale[0]["timestamp"])
    assert last_beat is not None and released is not None
    claims.set_task_status(human, task_id=task, status="BACKLOG", reason="bench round done")
    return (got - killed) * 1000, (released - last_beat).total_seconds() * 1000 - lease_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=40, help="wake-ups timed per watcher")
    parser.add_argument("--lease-ms", type=int, default=2000, help="the lease (stale_worker_timeout_ms) for the kill -9 runs")
    parser.add_argument("--kills", type=int, default=5, help="holders killed -9")
    args = parser.parse_args()
    temp = Path(tempfile.mkdtemp(prefix="moss-bench-wait-"))
    try:
        root = temp / "p"
        make_board(root, args.lease_ms)
        print(f"wait_for_task wake-up after a release in another process, {args.rounds} rounds each (ms)")
        print(f"{'watcher':>8}  {'p50':>7}  {'p95':>7}  {'max':>7}  {'release call p50':>16}")
        for poll in (False, True):
            latencies, calls, watcher = wake_ups(root, args.rounds, poll=poll)
            print(
                f"{watcher:>8}  {statistics.median(latencies):7.1f}  {percentile(latencies, 0.95):7.1f}  {max(latencies):7.1f}"
                f"  {statistics.median(calls):16.1f}"
            )
        print(f"lease release after kill -9, lease {args.lease_ms} ms, heartbeats every 100 ms, {args.kills} kills (ms)")
        results = [lease_release(root, args.lease_ms) for _ in range(args.kills)]
        to_rescue = [r[0] for r in results]
        overshoot = [r[1] for r in results]
        print(f"kill -> task in another worker's hands: median {statistics.median(to_rescue):.0f}, max {max(to_rescue):.0f}")
        print(f"release written after the lease ran out (from the last heartbeat): median {statistics.median(overshoot):.0f}, max {max(overshoot):.0f}")
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()

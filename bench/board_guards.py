"""What Moe's newest board rules cost: a warm claim with and without the adjacent-epic preference,
get_context's record (its first read writes a line), the disk-state signature, and the claim
of a task whose handoff note is signed (git runs then). CPU time of this process and wall time.

Run: .venv/bin/python bench/board_guards.py [--size 5000] [--repeat 30]
The board is bench/board.py's (epics of 100 tasks, a fifth WORKING and free) in a git repository
with 200 tracked source files; the floor is a warm board load (the stat of every board file),
which every locked operation pays once.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from board import build_board  # bench/board.py, beside this file

from moss_files.board import claims, plans
from moss_files.board.usecase import board_store, disk_state
from moss_files.foundation.context import AGENT, Context


def timed(action: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    action()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def medians(samples: list[tuple[float, float]]) -> str:
    return f"cpu {statistics.median(s[0] for s in samples):6.1f} ms  wall {statistics.median(s[1] for s in samples):6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", type=int, default=5000, help="board size (tasks)")
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per figure")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="moss-bench-guards-")) / "board"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for n in range(200):
        (root / "src" / f"m{n}.py").write_text(f"value = {n}\n")
    subprocess.run(["git", "-C", str(root), "add", "src"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-qm", "src"], check=True)
    build_board(root, args.size, claimable=max(1, args.size // 5))
    time.sleep(0.1)  # past the racy window, as a checkout's files are
    ctx = Context(root, actor=AGENT)
    board_store(ctx).load()
    floor = [timed(lambda: board_store(ctx).load()) for _ in range(args.repeat)]
    first_signature = timed(lambda: disk_state(ctx))
    signature = [timed(lambda: disk_state(ctx)) for _ in range(args.repeat)]
    figures: dict[str, list[tuple[float, float]]] = {"adjacent": [], "priority": [], "first read": [], "next read": [], "signed": []}
    for n in range(args.repeat):
        for label, adjacent in (("adjacent", True), ("priority", False)):
            got: dict[str, object] = {}
            figures[label].append(
                timed(
                    lambda adjacent=adjacent: got.update(claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=f"w{n}", prefer_adjacent_in_epic=adjacent))
                )
            )
            task = str(got["task"]["id"])  # type: ignore[index]
            if label == "priority":
                figures["first read"].append(timed(lambda task=task: plans.get_context(ctx, task_id=task, worker_id=f"w{n}")))
                figures["next read"].append(timed(lambda task=task: plans.get_context(ctx, task_id=task, worker_id=f"w{n}")))
                claims.release_task(ctx, task_id=task, handoff_note={"whatIsDone": "half", "whatRemains": "the rest"}, worker_id=f"w{n}")
                figures["signed"].append(timed(lambda: claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=f"s{n}", prefer_adjacent_in_epic=False)))
                claims.release_task(ctx, task_id=task, worker_id=f"s{n}")
            else:
                claims.release_task(ctx, task_id=task, worker_id=f"w{n}")
    print(f"{args.size} board tasks, 200 tracked source files; medians of {args.repeat}")
    print(f"  floor: warm board load                      {medians(floor)}")
    print(f"  claim, adjacent epic preferred (default)    {medians(figures['adjacent'])}")
    print(f"  claim, priority only (--no-adjacent)        {medians(figures['priority'])}")
    print(f"  get_context by the holder, first read       {medians(figures['first read'])}  (writes context_fetched_by)")
    print(f"  get_context by the holder, next read        {medians(figures['next read'])}")
    print(f"  disk-state signature, first in a process    cpu {first_signature[0]:6.1f} ms  wall {first_signature[1]:6.1f} ms  (loads GitPython)")
    print(f"  disk-state signature                        {medians(signature)}  (git's own CPU not counted)")
    print(f"  claim of a task whose note is signed        {medians(figures['signed'])}  (runs git status)")


if __name__ == "__main__":
    main()

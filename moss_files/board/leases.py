"""Board use cases of workers' lives: heartbeats, the release of tasks whose holder's lease ran
out, and deregistration.

Shell layer: each function takes a Context and typed keyword arguments and returns the JSON
result the `moe.*` tool returns and `moss worker … --json` prints. How leases keep one owner per
task across processes and clones: see `usecase`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from moss_files.board import rules, shapes
from moss_files.board.model import ACTIVE, GONE_WORKER_STATUSES, check_name
from moss_files.board.usecase import board_store, caller, find_worker, guard_live, log, post_system, settle_leases, touch, write_task
from moss_files.foundation import arguments
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidRequest, NotFound


def _worker(ctx: Context, worker_id: str | None) -> str:
    worker = caller(ctx, worker_id)
    if worker is None:
        raise InvalidRequest("workerId is required", details={"field": "workerId"})
    return worker


def heartbeat(ctx: Context, *, worker_id: str | None = None, task_id: str | None = None) -> dict[str, Any]:
    """Moe's heartbeat: the worker is alive; the lease on the task it holds starts again.

    Expired leases are settled first, so a worker whose lease ran out meanwhile is refused:
    Conflict LEASE_EXPIRED when the worker is STALE or DEAD, or when it names a task (`task_id`)
    it no longer holds. A worker seen for the first time is registered.
    """
    worker = _worker(ctx, worker_id)
    wanted = arguments.optional(task_id)
    store = board_store(ctx)
    with store.writing():
        # Outlines of the held tasks are all a heartbeat weighs (the task it names, if held).
        board = settle_leases(ctx, store.outline(()))
        guard_live(board, worker)
        if wanted is not None:
            task = board.tasks.get(wanted)
            if task is None or task.assigned_worker != worker or task.status not in ACTIVE:
                raise Conflict(
                    f"{worker} does not hold {wanted}" + (f"; {task.assigned_worker} does" if task and task.assigned_worker else ""),
                    code="LEASE_EXPIRED",
                    details={"workerId": worker, "taskId": wanted, "assignedWorkerId": task.assigned_worker if task else None},
                    hint="claim a task again (moe.claim_next_task)",
                )
        board = touch(ctx, board, worker, force=True)
    record = board.workers[worker]
    held = board.active_task_of(worker)
    deadline = rules.lease_deadline(record, board.project.settings) if held else None
    return {
        "ok": True,
        "workerId": worker,
        "lastHeartbeat": record.heartbeat,
        "currentTaskId": held.id if held else None,
        "leaseExpiresAt": rules.format_moment(deadline) if deadline else None,
        "leaseMs": board.project.settings.stale_worker_timeout_ms,
    }


def sweep(ctx: Context) -> dict[str, Any]:
    """Release now every task whose holder's lease has run out (what every writer does first
    anyway): `{released [{taskId, workerId, status}], count}`."""
    store = board_store(ctx)
    with store.writing():
        before = store.outline(())
        after = settle_leases(ctx, before)
    released = [
        {"taskId": task_id, "workerId": before.tasks[task_id].assigned_worker, "status": task.status}
        for task_id, task in sorted(after.tasks.items())
        if before.tasks[task_id].assigned_worker and not task.assigned_worker
    ]
    return {"released": released, "count": len(released)}


def deregister_worker(ctx: Context, *, worker_id: str, reason: str | None = None) -> dict[str, Any]:
    """Moe's deregister_worker: the worker is gone (DEAD); every task it held is released to
    its column, unassigned. Idempotent: a DEAD worker answers `alreadyDead`.

    Raises NotFound `Worker not found`.
    """
    worker_id = check_name(worker_id, "workerId")
    why = (arguments.optional(reason) or "deregistered")[:200]
    store = board_store(ctx)
    with store.writing():
        board = store.outline(())
        worker = find_worker(board, worker_id)
        already = worker.status == "DEAD"
        released = []
        now = ctx.stamp()
        for task in sorted(board.tasks.values(), key=lambda t: t.id):
            if task.assigned_worker != worker_id or task.status not in ACTIVE:
                continue
            _old, new = write_task(ctx, task.id, lambda t: rules.released(t, now) if t.assigned_worker == worker_id else t)
            if new.assigned_worker is None:
                released.append(new.id)
                log(ctx, board.project, "WORKER_RELEASED", task=new, worker=worker_id, status=new.status, reason=why)
                post_system(ctx, new.id, f"{worker_id} deregistered ({why}); {new.id} is back in {new.status}, unassigned.")
        if not already:
            store.update("worker", worker_id, lambda w: replace(w, status="DEAD", updated=now))
            log(ctx, board.project, "WORKER_DEREGISTERED", worker=worker_id, reason=why, releasedTaskIds=released)
    message = f"{worker_id} already deregistered" if already and not released else f"{worker_id} deregistered; released {len(released)} task(s)"
    return {"success": True, "workerId": worker_id, "alreadyDead": already, "releasedTaskIds": released, "releasedCount": len(released), "message": message}


def revive(ctx: Context, worker_id: str) -> None:
    """A STALE or DEAD worker that claims again is alive again (call under the board lock)."""
    store = board_store(ctx)
    try:
        worker = store.get("worker", worker_id)
    except NotFound:
        return
    if worker.status in GONE_WORKER_STATUSES:
        now = ctx.stamp()
        store.update("worker", worker_id, lambda w: replace(w, status=None, updated=now) if w.status in GONE_WORKER_STATUSES else w)
        log(ctx, store.read_project(), "WORKER_CONNECTED", worker=worker_id, previousStatus=worker.status)


def worker_row(ctx: Context, worker_id: str) -> dict[str, Any]:
    """One worker as list_workers shows it (for answers that name a worker)."""
    board = board_store(ctx).outline(())
    return shapes.worker_to_dict(board, find_worker(board, worker_id))

"""Board use cases of holding and moving tasks: claiming the next task, releasing it, moving
it through the state machine, and QA's verdicts.

Shell layer: each function takes a Context and typed keyword arguments and returns the JSON
result the `moe.*` tool returns and `moss task … --json` prints. Why two claimers never get one
task: see `usecase`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from moss_files.board import oversight, rules, shapes
from moss_files.board.leases import revive
from moss_files.board.model import CLAIMABLE, GONE_WORKER_STATUSES, Task, check_status, check_statuses
from moss_files.board.usecase import (
    board_store,
    caller,
    ensure_worker,
    find_epic,
    find_task,
    guard,
    log,
    move,
    question_blocked,
    settle_approvals,
    settle_leases,
    touch,
    with_problems,
    write_task,
)
from moss_files.foundation import arguments
from moss_files.foundation.context import HUMAN, Context
from moss_files.foundation.errors import Conflict, InvalidRequest

MAX_HANDOFFS = 20


def claim_next_task(
    ctx: Context, *, statuses: Sequence[str], epic_id: str | None = None, worker_id: str | None = None, replace_existing: bool = False
) -> dict[str, Any]:
    """Moe's claim_next_task: give the worker the next task in `statuses` (see
    `rules.plan_claim` for the order and the solo-worker rule). Without a worker (none named,
    no MOE_WORKER_ID), shows the task it would give.

    Returns `{hasNext: false, alreadyAssigned}` when the worker holds a task already. Raises
    InvalidRequest for bad statuses, Conflict WORKER_CONFLICT under the solo-worker rule.
    """
    wanted = check_statuses(statuses, "statuses")
    worker = caller(ctx, worker_id)
    if not wanted:
        raise InvalidRequest("statuses must list at least one of " + ", ".join(CLAIMABLE), details={"field": "statuses"})
    store = board_store(ctx)
    # The tasks a claim can weigh: the asked columns, plans waiting for an approval the mode
    # may give by itself, and (outline's own) every task held in flight and their dependencies.
    # In outline: the chosen task is read in full when it is written (or shown).
    weighed = (*wanted, "AWAITING_APPROVAL")
    with store.writing():
        board = settle_leases(ctx, store.outline(weighed))
        if epic_id:
            find_epic(board, epic_id.strip())
        board = settle_approvals(ctx, board)
        if worker is not None and worker in board.workers and board.workers[worker].status in GONE_WORKER_STATUSES:
            revive(ctx, worker)  # asking for work again: the worker starts over, with a new lease
            board = store.outline(weighed)
        plan = rules.plan_claim(
            board, wanted, worker, epic_id=epic_id.strip() if epic_id else None, replace_existing=replace_existing, blocked=question_blocked(ctx)
        )
        if plan.already is not None:
            held = plan.already
            touch(ctx, board, worker)  # asking is a sign of life
            return with_problems({"hasNext": False, "alreadyAssigned": {"taskId": held.id, "title": held.title, "status": held.status}}, board.problems)
        if plan.task is None:
            touch(ctx, board, worker)
            return with_problems({"hasNext": False}, board.problems)
        task = plan.task
        if worker is None:
            task = store.get("task", task.id)  # shown, not claimed: read in full
        else:
            ensure_worker(ctx, board, worker, rules.role_for_status(task.status))
            board = touch(ctx, board, worker, force=True)  # the claim starts the lease
            now = ctx.stamp()
            expected = (task.status, task.assigned_worker)

            def decide(current: Task) -> Task:
                # The file is read again under the lock: claim only if nobody took it meanwhile.
                if (current.status, current.assigned_worker) != expected:
                    raise Conflict(
                        f"task {current.id} changed while being claimed; claim again",
                        code="CONFLICT",
                        details={"taskId": current.id, "status": current.status, "assignedWorkerId": current.assigned_worker},
                    )
                return rules.claimed(current, worker, now)

            _old, task = write_task(ctx, task.id, decide)
            if plan.takeover_from:
                log(ctx, board.project, "WORKER_RELEASED", task=task, worker=plan.takeover_from, takenOverBy=worker)
            log(ctx, board.project, "TASK_CLAIMED", task=task, worker=worker, status=task.status, takenOverFrom=plan.takeover_from)
    epic = board.epics.get(task.epic)
    result: dict[str, Any] = {
        "hasNext": True,
        "project": shapes.project_to_dict(board.project),
        "epic": shapes.epic_context(epic) if epic else None,
        "task": shapes.task_for_agent(task),
        "allRails": rules.all_rails(board.project, epic, task),
    }
    if plan.takeover_from:
        result["takenOverFrom"] = plan.takeover_from
    return with_problems(result, board.problems)


def release_task(
    ctx: Context, *, task_id: str, reason: str | None = None, handoff_note: Mapping[str, Any] | None = None, worker_id: str | None = None
) -> dict[str, Any]:
    """Let go of a held task: it keeps its status and becomes claimable by the next worker. A
    handoff note ({whatIsDone, whatRemains, pitfalls?, openQuestions?}) is kept on the task,
    newest first, for whoever claims it next (get_handoff_history)."""
    task_id = arguments.required(task_id, "taskId")
    worker = caller(ctx, worker_id)
    why = arguments.optional(reason)
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.load())
        task = find_task(board, task_id)
        guard(board, task, worker)
        now = ctx.stamp()
        note = oversight.handoff(handoff_note, by=worker or task.assigned_worker, now=now, reason=why) if handoff_note is not None else None

        def decide(current: Task) -> Task:
            if current.status in ("DONE", "ARCHIVED"):
                return current  # finished work is never reopened by a release
            handoffs = ((note, *current.handoffs)[:MAX_HANDOFFS]) if note else current.handoffs
            return replace(current, assigned_worker=None, handoffs=handoffs, updated=now) if (current.assigned_worker or note) else current

        old, new = write_task(ctx, task_id, decide)
        if old.assigned_worker and not new.assigned_worker:
            log(ctx, board.project, "WORKER_RELEASED", task=new, worker=old.assigned_worker, status=new.status, reason=why, handoffNote=bool(note))
    result: dict[str, Any] = {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "releasedWorkerId": old.assigned_worker if not new.assigned_worker else None,
    }
    if note is None and old.assigned_worker:
        result["warning"] = "released without a handoff note: the next worker starts from the task file alone"
    return result


def set_task_status(ctx: Context, *, task_id: str, status: str, reason: str | None = None, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's set_task_status: one move of the state machine (see `rules.TRANSITIONS`).

    Raises INVALID_TRANSITION for a move the table forbids or whose condition fails,
    InvalidRequest for a move back without a reason, NOT_ALLOWED when an agent approves a
    plan that the approval mode leaves to a human, or acts on another worker's task.
    """
    task_id = arguments.required(task_id, "taskId")
    target = check_status(status)
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.load())
        task = find_task(board, task_id)
        guard(board, task, worker)
        rules.check_transition(task, target, reason=reason)
        if (task.status, target) == ("AWAITING_APPROVAL", "WORKING") and ctx.actor != HUMAN and not rules.approval_due(task, board.project.settings, ctx.now()):
            raise Conflict(
                "plans are approved by a human in CONTROL mode (moss task approve)",
                code="NOT_ALLOWED",
                status=403,
                details={"taskId": task_id, "approvalMode": board.project.settings.approval_mode},
            )
        new = move(ctx, board, task, target, reason=reason, actor=worker) if target != task.status else task
    return {"success": True, "taskId": task_id, "status": new.status}


def qa_approve(ctx: Context, *, task_id: str, summary: str | None = None, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's qa_approve: REVIEW -> DONE. Raises INVALID_TRANSITION unless the task is in REVIEW."""
    task_id = arguments.required(task_id, "taskId")
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.load())
        task = find_task(board, task_id)
        if task.status != "REVIEW":
            raise Conflict("Task must be in REVIEW status to approve", code="INVALID_TRANSITION", details={"taskId": task_id, "status": task.status})
        guard(board, task, worker)
        extra = (lambda t: replace(t, review_summary=summary)) if summary and summary.strip() else None
        new = move(ctx, board, task, "DONE", reason=None, actor=worker or task.assigned_worker, extra=extra)
    return {"success": True, "taskId": task_id, "status": new.status, "summary": summary, "message": f"{task_id} approved by QA and DONE."}


def qa_reject(ctx: Context, *, task_id: str, reason: str, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's qa_reject: REVIEW -> WORKING with the reason, counting a reopen; the rejection that
    brings the count to `maxReopens` sends the task back to PLANNING instead (`escalated`)."""
    task_id = arguments.required(task_id, "taskId")
    if not reason.strip():
        raise InvalidRequest("reason is required - explain which DoD items failed and why", details={"field": "reason"})
    why = reason.strip()
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.load())
        task = find_task(board, task_id)
        if task.status != "REVIEW":
            raise Conflict("Task must be in REVIEW status to reject", code="INVALID_TRANSITION", details={"taskId": task_id, "status": task.status})
        guard(board, task, worker)
        target = rules.qa_reject_target(task, board.project.settings)
        new = move(ctx, board, task, target, reason=why, actor=worker or task.assigned_worker)
    escalated = new.status == "PLANNING"
    message = f"{task_id} rejected {new.reopen_count} times: back to PLANNING for a new plan." if escalated else f"{task_id} back to WORKING; fix: {why}"
    return {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "reopenCount": new.reopen_count,
        "reason": why,
        "escalated": escalated,
        "message": message,
    }

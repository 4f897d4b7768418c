"""Board use cases of plan governance: amending a plan's step, sending a plan back for a new one,
governors' critiques and governance mode, task budgets, metrics and handoff history.

Shell layer: each function takes a Context and typed keyword arguments and returns the JSON
result the `moe.*` tool returns and `moss task|board … --json` prints. The rules themselves
(amendments, critiques, budgets, metrics) are pure, in `oversight`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from moss_files.board import oversight, rules, shapes
from moss_files.board.model import ACTIVE, Board, Task
from moss_files.board.usecase import (
    board_store,
    caller,
    find_epic,
    find_task,
    find_worker,
    guard,
    guard_live,
    log,
    move,
    post_system,
    settle_leases,
    touch,
    with_problems,
    write_task,
)
from moss_files.foundation import arguments
from moss_files.foundation.context import HUMAN, Context
from moss_files.foundation.errors import Conflict, InvalidRequest

DEFAULT_METRICS_LIMIT, MAX_METRICS_LIMIT = 100, 1000
GOVERNANCE_DUTIES = (
    "Watch #governors, #general, #architects, #workers and #qa for @mentions, blocks and rejections (moe.chat_wait).",
    "Answer every @mention with moe.chat_send before any other call.",
    "A worker gone quiet is pinged first: quiet is not dead. Leases release a crashed worker's task by themselves.",
    "Critique submitted plans with moe.submit_plan_critique; a block sends the plan back to its architect.",
    "Send a task whose plan is wrong back for a new one with moe.set_task_status PLANNING (and a reason).",
)


def _role(board: Board, worker: str) -> str | None:
    for team in board.teams.values():
        if worker in team.members and team.role:
            return team.role
    record = board.workers.get(worker)
    return record.type if record else None


def _require_role(board: Board, worker: str | None, roles: Sequence[str], action: str) -> None:
    """Agents need one of `roles` (their team's, else their own type); humans do not."""
    if worker is None:
        return
    role = _role(board, worker)
    if role not in roles:
        raise Conflict(
            f"{action} takes the {' or '.join(roles)} role; {worker} is {role or 'without a role'}",
            code="NOT_ALLOWED",
            status=403,
            details={"workerId": worker, "role": role, "roles": list(roles)},
            hint="join a team of that role (moe.join_team)",
        )


# --------------------------------------------------------------------------- amendments


def amend_plan_step(ctx: Context, *, task_id: str, step_id: str, description: str, reason: str, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's amend_plan_step: replace one step's instructions (the full new text) without a new
    plan; the original stays for the record and the reason reaches the holder in the task's
    channel. In CONTROL mode an agent's amendment waits for a human (`moss task approve`), and
    the step cannot be started or completed meanwhile; SPEED and TURBO approve it at once, and
    a human's amendment needs no other approval.

    Who may: a human, the task's holder, or an architect or governor. Raises NOT_ALLOWED,
    LEASE_EXPIRED, NotFound, INVALID_TRANSITION, AMENDMENT_PENDING, RAIL_VIOLATION.
    """
    task_id = arguments.required(task_id, "taskId")
    step_id = arguments.required(step_id, "stepId")
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.load())
        task = find_task(board, task_id)
        guard_live(board, worker)
        if worker is not None and task.assigned_worker != worker:
            _require_role(board, worker, ("architect", "governor"), "amending another worker's plan")
        approved = ctx.actor == HUMAN or board.project.settings.approval_mode != "CONTROL"
        now = ctx.stamp()
        by = worker or ("human" if ctx.actor == HUMAN else "agent")
        amendment_id = ctx.new_id("AMEND")
        before: list[Task] = []

        def decide(current: Task) -> Task:
            before.append(current)
            return oversight.amend_step(
                current,
                step_id,
                description,
                reason,
                amendment_id=amendment_id,
                by=by,
                now=now,
                approved=approved,
                rails=board.project.global_rails,
                actor=ctx.actor,
            )

        _old, new = write_task(ctx, task_id, decide)
        old_step = next(s for s in before[-1].plan if s.id == step_id)
        step = next(s for s in new.plan if s.id == step_id)
        amendment = step.amendments[-1]
        log(ctx, board.project, "STEP_AMENDED", task=new, worker=worker, stepId=step_id, amendmentId=amendment["id"], reason=amendment["reason"])
        if approved:
            log(ctx, board.project, "AMENDMENT_APPROVED", task=new, stepId=step_id, amendmentId=amendment["id"], by="HUMAN" if ctx.actor == HUMAN else "AUTO")
        mention = f"@{new.assigned_worker} " if new.assigned_worker else ""
        state = "in force" if approved else "waiting for a human's approval"
        post_system(ctx, new.id, f"{mention}step {step_id} of {new.id} amended ({amendment['id']}, {state}): {amendment['reason']}")
        touch(ctx, board, worker)
    return {
        "success": True,
        "taskId": task_id,
        "stepId": step_id,
        "amendmentId": amendment["id"],
        "amendmentCount": len(step.amendments),
        "status": amendment["status"],
        "needsApproval": not approved,
        "effectiveDescription": oversight.effective_description(step),
        "previousDescription": oversight.effective_description(old_step),
        "message": f"Step {step_id} amended ({amendment['id']})"
        + ("; the worker's next complete_step shows the new instructions." if approved else "; a human approves it with `moss task approve`."),
    }


# --------------------------------------------------------------------------- re-plans and critiques


def request_replan(ctx: Context, *, task_id: str, reason: str, step_id: str | None = None, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's request_replan: the worker sends a WORKING task back to PLANNING because its plan is
    wrong; the plan and the steps done are kept as `priorAttempt` for the architect.

    Raises INVALID_TRANSITION unless the task is WORKING, NOT_ALLOWED, LEASE_EXPIRED.
    """
    task_id = arguments.required(task_id, "taskId")
    why = arguments.required(reason, "reason")[:2000]
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.load())
        task = find_task(board, task_id)
        if task.status != "WORKING":
            raise Conflict(f"only a WORKING task is re-planned; {task_id} is {task.status}", code="INVALID_TRANSITION", details={"taskId": task_id})
        guard(board, task, worker)
        now = ctx.stamp()
        attempt = oversight.prior_attempt(task, why, arguments.optional(step_id), now)

        def extra(moved: Task) -> Task:
            return replace(moved, plan=(), prior_attempt=attempt)

        new = move(ctx, board, task, "PLANNING", reason=f"re-plan requested: {why}", actor=worker or task.assigned_worker, extra=extra)
        log(ctx, board.project, "REPLAN_REQUESTED", task=new, worker=worker, reason=why, stepId=arguments.optional(step_id))
        post_system(ctx, "architects", f"@architects re-plan requested for {new.id} ({new.title}): {why}")
    return {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "priorAttempt": dict(attempt),
        "message": f"Task {task_id} is back in PLANNING; the architect re-plans with priorAttempt.",
        "nextAction": {"tool": "moe.wait_for_task", "args": {"workerId": worker, "statuses": ["WORKING"]}, "reason": "Wait for the new plan or another task."},
    }


def submit_plan_critique(ctx: Context, *, task_id: str, verdict: str, concerns: Sequence[str] | None = None, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's submit_plan_critique (governors, and humans): record a verdict on a task's plan.
    `block` sends an AWAITING_APPROVAL or WORKING task back to PLANNING with the concerns as the
    reason; a task further on keeps its column (the critique is then advice). Never approves.

    Raises NOT_ALLOWED for an agent that is not a governor, InvalidRequest for a block without
    concerns.
    """
    task_id = arguments.required(task_id, "taskId")
    word = arguments.required(verdict, "verdict").lower()
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.load())
        guard_live(board, worker)
        _require_role(board, worker, ("governor",), "a plan critique")
        task = find_task(board, task_id)
        now = ctx.stamp()
        record = oversight.critique(word, arguments.texts(concerns) or (), by=worker or "human", now=now)
        if word == "block" and task.status in ("AWAITING_APPROVAL", "WORKING"):
            summary = " | ".join(record.get("concerns", ()))[:500]
            new = move(ctx, board, task, "PLANNING", reason=f"plan blocked by critique: {summary}", actor=worker, extra=lambda t: replace(t, critique=record))
        else:
            _old, new = write_task(ctx, task_id, lambda t: replace(t, critique=record, updated=now))
        log(ctx, board.project, "PLAN_CRITIQUED", task=new, worker=worker, verdict=word, concerns=list(record.get("concerns", ())) or None)
        if word == "block":
            post_system(ctx, "architects", f"@architects plan of {new.id} ({new.title}) blocked: " + "; ".join(record.get("concerns", ())))
    return {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "verdict": word,
        "concerns": list(record.get("concerns", ())),
        "planCritiqueResult": oversight.critique_to_dict(record),
    }


def enter_governance(ctx: Context, *, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's enter_governance: a governor's status becomes GOVERNING (it claims no task; any it
    held is released), and it learns which channels to watch.

    Raises InvalidRequest without a worker, NotFound for an unknown one, NOT_ALLOWED for a
    worker without the governor role.
    """
    worker = caller(ctx, worker_id)
    if worker is None:
        raise InvalidRequest("workerId is required", details={"field": "workerId"})
    store = board_store(ctx)
    with store.writing():
        board = settle_leases(ctx, store.load())
        record = find_worker(board, worker)
        _require_role(board, worker, ("governor",), "governance")
        now = ctx.stamp()
        released = []
        for task in sorted(board.tasks.values(), key=lambda t: t.id):
            if task.assigned_worker == worker and task.status in ACTIVE:
                _old, new = write_task(ctx, task.id, lambda t: rules.released(t, now) if t.assigned_worker == worker else t)
                released.append(new.id)
                log(ctx, board.project, "WORKER_RELEASED", task=new, worker=worker, status=new.status, reason="enter_governance")
        already = record.status == "GOVERNING"
        if not already:
            store.update("worker", worker, lambda w: replace(w, status="GOVERNING", updated=now))
            log(ctx, board.project, "WORKER_GOVERNING", worker=worker)
            post_system(ctx, "governors", f"{worker} is now governing: @mention it about stuck workers, rejections or escalations.")
        touch(ctx, board, worker)
    channels = [{"id": name, "name": name} for name in ("general", "architects", "workers", "qa", "governors")]
    return {
        "success": True,
        "workerId": worker,
        "status": "GOVERNING",
        "alreadyGoverning": already,
        "releasedTaskIds": released,
        "channels": channels,
        "governanceDuties": list(GOVERNANCE_DUTIES),
        "nextAction": {
            "tool": "moe.chat_wait",
            "args": {"workerId": worker, "channels": [c["id"] for c in channels], "timeoutMs": 300000},
            "reason": "Watch the channels for blocks, rejections and mentions.",
        },
    }


# --------------------------------------------------------------------------- budgets, metrics, handoffs


def set_task_budget(ctx: Context, *, task_id: str, wall_clock_ms: int | None = None) -> dict[str, Any]:
    """Moe's set_task_budget: a soft cap on a task's time from its first claim to DONE (0 or
    none clears it). Over-budget tasks show in get_context and list_metrics."""
    task_id = arguments.required(task_id, "taskId")
    if wall_clock_ms is not None and (isinstance(wall_clock_ms, bool) or not isinstance(wall_clock_ms, int) or wall_clock_ms < 0):
        raise InvalidRequest("wallClockMs must be a positive number of milliseconds, or 0 to clear", details={"field": "wallClockMs"})
    budget = wall_clock_ms or None
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        find_task(board, task_id)
        now = ctx.stamp()
        _old, new = write_task(ctx, task_id, lambda t: replace(t, budget_ms=budget, updated=now) if t.budget_ms != budget else t)
        log(ctx, board.project, "TASK_BUDGET_SET", task=new, wallClockMs=budget)
    return {"success": True, "taskId": task_id, "budget": oversight.budget_state(new, ctx.now())}


def list_metrics(ctx: Context, *, epic_id: str | None = None, since_iso: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """Moe's list_metrics: per-task metrics, newest first, and their aggregate (always over
    every matching task; `limit` caps only the list)."""
    count = arguments.count(limit, "limit", default=DEFAULT_METRICS_LIMIT, maximum=MAX_METRICS_LIMIT)
    since = arguments.optional(since_iso)
    cutoff = rules.parse_time(since) if since else None
    if since and cutoff is None:
        raise InvalidRequest(f"sinceIso {since!r} is not an ISO 8601 time", details={"field": "sinceIso"})
    board = board_store(ctx).load()
    epic = arguments.optional(epic_id)
    if epic:
        find_epic(board, epic)
    now = ctx.now()
    chosen = [
        task
        for task in board.tasks.values()
        if (not epic or task.epic == epic) and (cutoff is None or ((touched := rules.parse_time(task.updated)) is not None and touched >= cutoff))
    ]
    rows = [oversight.task_metrics(task, now) for task in chosen]
    rows.sort(key=lambda row: (row["doneAt"] or row["firstClaimAt"] or "", row["taskId"]), reverse=True)
    return with_problems({"aggregate": oversight.aggregate(rows), "tasks": rows[:count], "totalMatched": len(rows)}, board.problems)


def get_handoff_history(ctx: Context, *, task_id: str) -> dict[str, Any]:
    """Moe's get_handoff_history: the notes left by workers who released the task (newest
    first) and the plan a re-plan set aside."""
    task_id = arguments.required(task_id, "taskId")
    task = find_task(board_store(ctx).load(), task_id)
    full = shapes.task_to_dict(task)
    return {"taskId": task_id, "priorHandoffs": full["priorHandoffs"], "priorAttempt": full["priorAttempt"]}

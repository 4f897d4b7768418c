"""Board use cases: every `moe.*` tool (and the human-only board operations) over board files.

Shell layer: each public function takes a `Context` and the tool's arguments under Moe's
(camelCase) names, exactly as an MCP client sends them, so one function serves the MCP tool
and the CLI command. It gathers with `board_store`, decides with the pure `board` core and
writes with `board_store`, and returns the seed's result dict. `OPERATIONS` maps tool names
to these functions. Errors are MossErrors; the seed's messages are kept (`Task not found: <id>`).

Why a claim can never give one task to two workers, even when processes claim at the same
instant: every state-changing operation runs inside `store.writing()`, one flock on
`.moss/run/.board.lock` that the kernel grants to one open file at a time, across threads and
processes, and releases if its holder dies. Inside it the claimer (1) reads the board after
taking the lock, so it sees every claim that finished before; (2) chooses a task with the pure
`plan_claim`; (3) re-reads that task's file in the same read-modify-write that assigns it and
refuses unless the holder is still the one it planned from, so even a writer that ignores the
lock (a hand edit) cannot be overwritten; and (4) renames the new file into place and fsyncs
it before the lock is released, so the next claimer's read includes it. Two claimers therefore
run one after the other, and the second sees the first's owner. Across clones there is no lock
to share: two offline claims of one task meet as a git conflict on its `assigned_worker:` line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moss_files.board import model as core
from moss_files.board.model import Board, Epic, Event, Project, Proposal, Task, Team, Worker
from moss_files.board.store import BoardStore
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, NotFound, error_body

if TYPE_CHECKING:
    from moss_files.foundation.ids import Clock, IdSource

HUMAN, AGENT = "human", "agent"
DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT = 20, 500
DEFAULT_LOG_LIMIT, MAX_LOG_LIMIT = 50, 1000


@dataclass(frozen=True, slots=True)
class Context:
    """What every operation needs: the board's store (with its read cache), the clock, the id
    source, who is acting, and the default task and worker an agent's environment names.

    `actor` is "human" for the CLI and "agent" for the MCP server: an agent may not approve a
    plan (that is a human's call unless the approval mode says otherwise).
    """

    store: BoardStore
    clock: Clock | None = None
    ids: IdSource | None = None
    actor: str = HUMAN
    default_task_id: str | None = None  # MOE_TASK_ID, read by the entry point
    default_worker_id: str | None = None  # MOE_WORKER_ID, read by the entry point

    @classmethod
    def for_root(cls, root: Path, **options: Any) -> Context:
        """A context over the board of the workspace at `root`."""
        return cls(store=BoardStore(Path(root)), **options)

    def now(self) -> datetime:
        return self.clock() if self.clock is not None else datetime.now(UTC)

    def stamp(self) -> str:
        """The time written into files: RFC 3339 UTC, seconds."""
        return self.now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def new_id(self, prefix: str) -> str:
        return self.ids_source().prefixed(prefix)

    def ids_source(self) -> IdSource:
        if self.ids is not None:
            return self.ids
        # Loaded on first use: the ULID package costs tens of milliseconds to import.
        from moss_files.foundation.ids import IdSource, system_clock

        return IdSource(clock=self.clock or system_clock)


# --------------------------------------------------------------------------- arguments


def _required(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{name} is required", details={"field": name})
    return value.strip()


def _text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string", details={"field": name})
    return value


def _texts(value: Any, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise InvalidRequest(f"{name} must be a list of strings", details={"field": name})
    return tuple(item.strip() for item in value if item.strip())


def _number(value: Any, name: str) -> int | float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequest(f"{name} must be a number", details={"field": name})
    return value


def _count(value: Any, name: str, default: int, maximum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"{name} must be a positive whole number", details={"field": name})
    return min(value, maximum)


def _flag(value: Any, name: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name} must be true or false", details={"field": name})
    return value


def _statuses(value: Any, name: str = "statuses") -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise InvalidRequest(f"{name} must be a list of statuses", details={"field": name})
    return tuple(dict.fromkeys(core.check_status(item, name) for item in items))


def _caller(ctx: Context, worker_id: Any) -> str | None:
    """The worker on whose behalf a call is made (None: a human, unguarded)."""
    if worker_id is not None:
        return core.check_name(worker_id, "workerId")
    return ctx.default_worker_id


def _task_id(value: Any) -> str:
    return _required(value, "taskId")


# --------------------------------------------------------------------------- shared steps


def _problems(errors: Sequence[MossError]) -> list[dict[str, Any]]:
    return [error_body(err)["error"] for err in errors]


def _with_problems(result: dict[str, Any], errors: Sequence[MossError]) -> dict[str, Any]:
    # Unreadable board files are reported with every answer built without them.
    if errors:
        result["problems"] = _problems(errors)
    return result


def _find_task(board: Board, task_id: str) -> Task:
    task = board.tasks.get(task_id)
    if task is None:
        for err in board.problems:
            if err.path and err.path.endswith(f"/tasks/{task_id}.md"):
                raise err
        raise NotFound(f"Task not found: {task_id}", details={"taskId": task_id})
    return task


def _find_epic(board: Board, epic_id: str) -> Epic:
    epic = board.epics.get(epic_id)
    if epic is None:
        for err in board.problems:
            if err.path and err.path.endswith(f"/epics/{epic_id}.md"):
                raise err
        raise NotFound(f"Epic not found: {epic_id}", details={"epicId": epic_id})
    return epic


def _guard_owner(task: Task, caller: str | None) -> None:
    """Only the task's holder may act on a held task; an unheld task is the human path."""
    if caller is not None and task.assigned_worker is not None and caller != task.assigned_worker:
        raise Conflict(
            f"task {task.id} is held by {task.assigned_worker}, not {caller}",
            code="NOT_ALLOWED",
            status=403,
            details={"taskId": task.id, "assignedWorkerId": task.assigned_worker, "workerId": caller},
        )


def _log(ctx: Context, project: Project, kind: str, *, task: Task | None = None, epic_id: str | None = None,
         worker: str | None = None, **payload: Any) -> None:
    now = ctx.now().astimezone(UTC)
    event = Event(
        id=f"EVT-{ctx.ids_source().ulid()}",
        timestamp=now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
        event=kind,
        project=project.id,
        epic=epic_id if epic_id is not None else (task.epic or None if task else None),
        task=task.id if task else None,
        worker=worker,
        payload={key: value for key, value in payload.items() if value is not None},
    )
    ctx.store.append(event)


def _status_events(ctx: Context, project: Project, old: Task, new: Task, actor: str | None, reason: str | None) -> None:
    """The activity lines every status change writes: the change, and what it means."""
    if old.status == new.status:
        return
    _log(ctx, project, "TASK_STATUS_CHANGED", task=new, worker=actor, **{"from": old.status, "to": new.status, "reason": reason})
    meaning = {
        ("PLANNING", "AWAITING_APPROVAL"): "PLAN_SUBMITTED",
        ("AWAITING_APPROVAL", "WORKING"): "PLAN_APPROVED",
        ("AWAITING_APPROVAL", "PLANNING"): "PLAN_REJECTED",
        ("WORKING", "REVIEW"): "TASK_COMPLETED",
        ("REVIEW", "DONE"): "QA_APPROVED",
        ("REVIEW", "WORKING"): "QA_REJECTED",
        ("REVIEW", "PLANNING"): "QA_REJECTED",
    }.get((old.status, new.status))
    if meaning == "PLAN_SUBMITTED":
        _log(ctx, project, meaning, task=new, worker=actor, stepCount=len(new.plan))
    elif meaning:
        _log(ctx, project, meaning, task=new, worker=actor, reason=reason)
    if new.reopen_count > old.reopen_count:
        _log(ctx, project, "TASK_REOPENED", task=new, worker=actor, reopenCount=new.reopen_count, reason=reason)
    if old.assigned_worker and not new.assigned_worker:
        _log(ctx, project, "WORKER_RELEASED", task=new, worker=old.assigned_worker, status=new.status)


def _update_task(ctx: Context, task_id: str, decide: Callable[[Task], Task]) -> tuple[Task, Task]:
    """Write `decide(task)` over the task's file; return (as read, as written). `decide` runs
    on the file's current content (again, if a hand edit lands meanwhile)."""
    seen: list[Task] = []

    def change(current: Task) -> Task:
        seen.append(current)
        return decide(current)

    new = ctx.store.update("task", task_id, change)
    return seen[-1], new


def _move(ctx: Context, board: Board, task: Task, target: str, *, reason: str | None, actor: str | None,
          extra: Callable[[Task], Task] | None = None) -> Task:
    """Apply one state-machine move to a task's file and log it; return the task as written."""
    now = ctx.stamp()

    def decide(current: Task) -> Task:
        moved = core.apply_transition(current, target, now, reason=reason)
        return extra(moved) if extra else moved

    old, new = _update_task(ctx, task.id, decide)
    _status_events(ctx, board.project, old, new, actor, reason)
    return new


def _settle_approvals(ctx: Context, board: Board, only: str | None = None) -> Board:
    """Approve waiting plans the approval mode approves by itself (TURBO at once, SPEED after
    its delay): done lazily whenever an agent looks, so no timer has to survive a restart."""
    settings = board.project.settings
    if settings.approval_mode == "CONTROL":
        return board
    now = ctx.now()
    due = [t for t in board.tasks.values() if (only is None or t.id == only) and core.approval_due(t, settings, now)]
    if not due:
        return board
    tasks = dict(board.tasks)
    for task in due:
        stamp = ctx.stamp()
        old, new = _update_task(ctx, task.id, lambda current: core.apply_transition(current, "WORKING", stamp)
                                if core.approval_due(current, settings, now) else current)
        if new.status != old.status:
            _log(ctx, board.project, "PLAN_AUTO_APPROVED", task=new, mode=settings.approval_mode)
            _status_events(ctx, board.project, old, new, None, None)
        tasks[task.id] = new
    return replace(board, tasks=tasks)


def _ensure_worker(ctx: Context, board: Board, worker_id: str, role: str | None) -> Worker:
    """The worker's record, registering it (a new file) on first sight."""
    worker = board.workers.get(worker_id)
    if worker is not None:
        return worker
    now = ctx.stamp()
    worker = Worker(id=worker_id, type=role, created=now, updated=now)
    try:
        ctx.store.create("worker", worker)
    except Conflict:
        # Registered by hand, or unreadable: the file that is there stays as it is.
        return worker
    _log(ctx, board.project, "WORKER_REGISTERED", worker=worker_id, type=role)
    return worker


def _task_for_agent(task: Task) -> dict[str, Any]:
    """The task as get_context and claim_next_task give it to the agent working it."""
    return {
        "id": task.id,
        "epicId": task.epic or None,
        "title": task.title,
        "description": task.description,
        "definitionOfDone": list(task.definition_of_done),
        "taskRails": list(task.task_rails),
        "status": task.status,
        "priority": task.priority,
        "assignedWorkerId": task.assigned_worker,
        "implementationPlan": [core.step_to_dict(step) for step in task.plan],
        "dependsOn": list(task.depends_on),
        "reopenCount": task.reopen_count,
        "reopenReason": task.reopen_reason,
        "testFile": task.test_file,
    }


def _task_path(ctx: Context, task_id: str) -> str:
    return ctx.store.display(ctx.store.path("task", task_id))


# --------------------------------------------------------------------------- context and plans


def get_context(ctx: Context, taskId: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's get_context: the project, epic, task, worker and all rails for a task.

    The task is `taskId`, else the context's default task (MOE_TASK_ID), else the task held by
    `workerId` (or MOE_WORKER_ID). Raises NotFound for a task id that does not exist.
    """
    board = ctx.store.load()
    worker_id = _caller(ctx, workerId)
    task_id = _text(taskId, "taskId") or ctx.default_task_id
    task: Task | None = None
    if task_id:
        task = _find_task(board, task_id.strip())
    elif worker_id:
        task = board.active_task_of(worker_id)
    epic = board.epics.get(task.epic) if task else None
    worker = None
    if worker_id and worker_id in board.workers:
        found = core.worker_to_dict(board, board.workers[worker_id])
        worker = {key: found[key] for key in ("id", "type", "status", "currentTaskId", "teamIds", "blockedReason")}
    result = {
        "project": core.project_to_dict(board.project),
        "epic": core.epic_context(epic) if epic else None,
        "task": _task_for_agent(task) if task else None,
        "worker": worker,
        "allRails": core.all_rails(board.project, epic, task),
    }
    return _with_problems(result, board.problems)


def submit_plan(ctx: Context, taskId: Any = None, steps: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's submit_plan: store the plan's steps and move the task to AWAITING_APPROVAL
    (straight on to WORKING in TURBO mode).

    Raises RAIL_VIOLATION (details.violations) when the plan uses a forbidden pattern or lacks
    a required one, INVALID_TRANSITION unless the task is PLANNING (or re-submitting while
    AWAITING_APPROVAL), NOT_ALLOWED for a worker who does not hold the task.
    """
    task_id = _task_id(taskId)
    plan = core.parse_steps(steps)
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        _guard_owner(task, caller)
        violations = core.check_rails(board.project.global_rails, plan)
        if violations:
            _log(ctx, board.project, "RAIL_VIOLATION", task=task, worker=caller, violations=[v.pattern for v in violations])
            raise core.rail_error(violations)
        now = ctx.stamp()

        def decide(current: Task) -> Task:
            if current.status not in ("PLANNING", "AWAITING_APPROVAL"):
                raise Conflict(f"a plan is submitted for a PLANNING task; {current.id} is {current.status}", code="INVALID_TRANSITION",
                               details={"taskId": current.id, "from": current.status, "to": "AWAITING_APPROVAL"})
            _guard_owner(current, caller)
            with_plan = replace(current, plan=plan, updated=now)
            if current.status == "AWAITING_APPROVAL":
                return replace(with_plan, plan_submitted=now)
            return core.apply_transition(with_plan, "AWAITING_APPROVAL", now)

        old, new = _update_task(ctx, task_id, decide)
        if old.status == new.status:
            _log(ctx, board.project, "PLAN_SUBMITTED", task=new, worker=caller, stepCount=len(plan), resubmitted=True)
        _status_events(ctx, board.project, old, new, caller, None)
        board = _settle_approvals(ctx, replace(board, tasks={**board.tasks, task_id: new}), only=task_id)
        new = board.tasks[task_id]
    approved = new.status == "WORKING"
    return {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "stepCount": len(plan),
        "message": "Plan approved automatically (TURBO mode)." if approved else f"Plan submitted; waiting for approval ({board.project.settings.approval_mode} mode).",
    }


def check_approval(ctx: Context, taskId: Any = None) -> dict[str, Any]:
    """Moe's check_approval: whether the task's plan was approved, or rejected (and why)."""
    task_id = _task_id(taskId)
    board = ctx.store.load()
    task = _find_task(board, task_id)
    if core.approval_due(task, board.project.settings, ctx.now()):
        with ctx.store.writing():
            board = _settle_approvals(ctx, ctx.store.load(), only=task_id)
            task = _find_task(board, task_id)
    result: dict[str, Any] = {
        "taskId": task_id,
        "approved": task.status in ("WORKING", "REVIEW", "DONE"),
        "status": task.status,
    }
    if task.status == "PLANNING" and task.reopen_reason:
        result["rejected"] = True
        result["rejectionReason"] = task.reopen_reason
    return result


def approve_plan(ctx: Context, taskId: Any = None) -> dict[str, Any]:
    """A human approves a waiting plan: AWAITING_APPROVAL -> WORKING (the task becomes claimable
    by workers). Raises NOT_ALLOWED for an agent, INVALID_TRANSITION when nothing waits."""
    task_id = _task_id(taskId)
    if ctx.actor != HUMAN:
        raise Conflict("plans are approved by a human (moss task approve)", code="NOT_ALLOWED", status=403, details={"taskId": task_id})
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        if task.status != "AWAITING_APPROVAL":
            raise Conflict(f"task {task_id} is {task.status}, not AWAITING_APPROVAL", code="INVALID_TRANSITION",
                           details={"taskId": task_id, "from": task.status, "to": "WORKING"})
        new = _move(ctx, board, task, "WORKING", reason=None, actor=None)
    return {"success": True, "taskId": task_id, "status": new.status}


def reject_plan(ctx: Context, taskId: Any = None, reason: Any = None) -> dict[str, Any]:
    """A human rejects a waiting plan: back to PLANNING with the reason, for the same architect."""
    task_id = _task_id(taskId)
    why = _required(reason, "reason")
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        if task.status != "AWAITING_APPROVAL":
            raise Conflict(f"task {task_id} is {task.status}, not AWAITING_APPROVAL", code="INVALID_TRANSITION",
                           details={"taskId": task_id, "from": task.status, "to": "PLANNING"})
        new = _move(ctx, board, task, "PLANNING", reason=why, actor=None)
    return {"success": True, "taskId": task_id, "status": new.status, "reason": why}


def _find_step(task: Task, step_id: str) -> int:
    for index, step in enumerate(task.plan):
        if step.id == step_id:
            return index
    raise NotFound(f"Step not found: {step_id} (task {task.id})", details={"taskId": task.id, "stepId": step_id})


def _require_working(task: Task, action: str) -> None:
    if task.status != "WORKING":
        hint = "wait for the plan's approval (moe.check_approval)" if task.status == "AWAITING_APPROVAL" else None
        raise Conflict(f"steps are {action} on a WORKING task; {task.id} is {task.status}", code="INVALID_TRANSITION",
                       details={"taskId": task.id, "status": task.status}, hint=hint)


def start_step(ctx: Context, taskId: Any = None, stepId: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's start_step: mark a plan step IN_PROGRESS on a WORKING task.

    Raises NotFound for the task or step, INVALID_TRANSITION for a task not WORKING or a step
    already completed, NOT_ALLOWED for a worker who does not hold the task.
    """
    task_id = _task_id(taskId)
    step_id = _required(stepId, "stepId")
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = _settle_approvals(ctx, ctx.store.load(), only=task_id)
        task = _find_task(board, task_id)
        _guard_owner(task, caller)
        now = ctx.stamp()

        def decide(current: Task) -> Task:
            _guard_owner(current, caller)
            _require_working(current, "started")
            index = _find_step(current, step_id)
            step = current.plan[index]
            if step.status == "COMPLETED":
                raise Conflict(f"step {step_id} is completed already", code="INVALID_TRANSITION",
                               details={"taskId": current.id, "stepId": step_id, "status": step.status})
            started = replace(step, status="IN_PROGRESS", started=step.started or now)
            plan = (*current.plan[:index], started, *current.plan[index + 1:])
            return replace(current, plan=plan, updated=now) if started != step else current

        old, new = _update_task(ctx, task_id, decide)
        index = _find_step(new, step_id)
        if old.plan[index].status != "IN_PROGRESS":
            _log(ctx, board.project, "STEP_STARTED", task=new, worker=caller or new.assigned_worker, stepId=step_id)
    return {"success": True, "taskId": task_id, "stepId": step_id, "stepNumber": index + 1, "totalSteps": len(new.plan)}


def complete_step(ctx: Context, taskId: Any = None, stepId: Any = None, modifiedFiles: Any = None, note: Any = None,
                  workerId: Any = None) -> dict[str, Any]:
    """Moe's complete_step: mark a step COMPLETED (with the files it changed and a note) and
    report progress and the next step. Completing a completed step changes nothing."""
    task_id = _task_id(taskId)
    step_id = _required(stepId, "stepId")
    files = tuple(dict.fromkeys(core.check_project_path(f) for f in (_texts(modifiedFiles, "modifiedFiles") or ())))
    step_note = _text(note, "note")
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        _guard_owner(task, caller)
        now = ctx.stamp()

        def decide(current: Task) -> Task:
            _guard_owner(current, caller)
            _require_working(current, "completed")
            index = _find_step(current, step_id)
            step = current.plan[index]
            if step.status == "COMPLETED":
                return current
            done = replace(step, status="COMPLETED", started=step.started or now, completed=now,
                           modified_files=tuple(dict.fromkeys((*step.modified_files, *files))),
                           note=step_note if step_note and step_note.strip() else step.note)
            return replace(current, plan=(*current.plan[:index], done, *current.plan[index + 1:]), updated=now)

        old, new = _update_task(ctx, task_id, decide)
        if old.plan[_find_step(old, step_id)].status != "COMPLETED":
            _log(ctx, board.project, "STEP_COMPLETED", task=new, worker=caller or new.assigned_worker, stepId=step_id,
                 modifiedFiles=list(files) or None)
    completed = sum(1 for step in new.plan if step.status == "COMPLETED")
    total = len(new.plan)
    following = next((step for step in new.plan if step.status != "COMPLETED"), None)
    return {
        "success": True,
        "taskId": task_id,
        "stepId": step_id,
        "progress": {"completed": completed, "total": total, "percentage": round(100 * completed / total) if total else 100},
        "nextStep": {"stepId": following.id, "description": following.description} if following else None,
    }


def complete_task(ctx: Context, taskId: Any = None, prLink: Any = None, summary: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's complete_task: WORKING -> REVIEW once every step is completed; the task leaves its
    worker and waits for QA. Raises INVALID_TRANSITION (details.pendingSteps) otherwise."""
    task_id = _task_id(taskId)
    link = _text(prLink, "prLink")
    work_summary = _text(summary, "summary")
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        _guard_owner(task, caller)
        if task.status != "WORKING":
            raise Conflict(f"only a WORKING task is completed; {task_id} is {task.status}", code="INVALID_TRANSITION",
                           details={"taskId": task_id, "from": task.status, "to": "REVIEW"})

        def extra(moved: Task) -> Task:
            return replace(moved, pr_link=link.strip() if link and link.strip() else moved.pr_link,
                           work_summary=work_summary if work_summary and work_summary.strip() else moved.work_summary)

        new = _move(ctx, board, task, "REVIEW", reason=None, actor=caller or task.assigned_worker, extra=extra)
        if link:
            _log(ctx, board.project, "PR_OPENED", task=new, worker=caller or task.assigned_worker, prLink=link.strip())
    files = {path for step in new.plan for path in step.modified_files}
    started, ended = core.parse_time(new.work_started), core.parse_time(new.review_started)
    duration = int((ended - started).total_seconds() * 1000) if started and ended else None
    return {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "stats": {"stepsCompleted": sum(1 for s in new.plan if s.status == "COMPLETED"), "filesModified": len(files), "duration": duration},
    }


def report_blocked(ctx: Context, taskId: Any = None, reason: Any = None, needsFrom: Any = None, currentStepId: Any = None,
                   workerId: Any = None) -> dict[str, Any]:
    """Moe's report_blocked: mark the task's worker BLOCKED with the reason (the task keeps its
    status and holder). Raises InvalidRequest when the task has no worker and none is named."""
    task_id = _task_id(taskId)
    why = _required(reason, "reason")
    needs = _text(needsFrom, "needsFrom")
    step_id = _text(currentStepId, "currentStepId")
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        _guard_owner(task, caller)
        worker_id = task.assigned_worker or caller
        if worker_id is None:
            raise InvalidRequest(f"task {task_id} has no assigned worker; pass workerId", details={"field": "workerId"})
        if step_id:
            _find_step(task, step_id)
        _ensure_worker(ctx, board, worker_id, core.role_for_status(task.status))
        now = ctx.stamp()
        ctx.store.update("worker", worker_id, lambda w: replace(
            w, status="BLOCKED", blocked_reason=why, needs_from=needs, blocked_task=task_id, blocked_step=step_id,
            blocked_since=now, updated=now))
        _log(ctx, board.project, "WORKER_BLOCKED", task=task, worker=worker_id, reason=why, needsFrom=needs, stepId=step_id)
    return {"success": True, "taskId": task_id, "status": "BLOCKED", "workerId": worker_id,
            "message": f"{worker_id} is blocked on {task_id}" + (f"; needs {needs}" if needs else "") + "."}


def unblock_worker(ctx: Context, workerId: Any = None, resolution: Any = None, retryTask: Any = None) -> dict[str, Any]:
    """Moe's unblock_worker: clear a worker's BLOCKED status. Without `retryTask` the worker
    also lets go of its task, which becomes claimable again.

    Raises NotFound (`Worker not found`), INVALID_TRANSITION when the worker is not BLOCKED.
    """
    worker_id = core.check_name(workerId, "workerId")
    resolved = _required(resolution, "resolution")
    retry = _flag(retryTask, "retryTask")
    with ctx.store.writing():
        board = ctx.store.load()
        worker = board.workers.get(worker_id)
        if worker is None:
            raise NotFound(f"Worker not found: {worker_id}", details={"workerId": worker_id})
        if worker.status != "BLOCKED":
            raise Conflict("Worker must be in BLOCKED status", code="INVALID_TRANSITION",
                           details={"workerId": worker_id, "status": core.worker_status(board, worker)})
        now = ctx.stamp()
        ctx.store.update("worker", worker_id, lambda w: replace(
            w, status=None, blocked_reason=None, needs_from=None, blocked_task=None, blocked_step=None, blocked_since=None, updated=now))
        held = board.active_task_of(worker_id)
        if held is not None and not retry:
            old, new = _update_task(ctx, held.id, lambda t: replace(t, assigned_worker=None, updated=now) if t.assigned_worker == worker_id else t)
            if old.assigned_worker and not new.assigned_worker:
                _log(ctx, board.project, "WORKER_RELEASED", task=new, worker=worker_id, status=new.status)
        _log(ctx, board.project, "WORKER_UNBLOCKED", worker=worker_id, resolution=resolved, retryTask=retry,
             task=held if held else None)
        board = ctx.store.load()
    current = board.active_task_of(worker_id)
    return {
        "success": True,
        "workerId": worker_id,
        "status": core.worker_status(board, board.workers[worker_id]) if worker_id in board.workers else "IDLE",
        "currentTaskId": current.id if current else None,
        "resolution": resolved,
        "retryTask": retry,
        "message": f"{worker_id} is unblocked" + (f" and keeps {current.id}." if current else "."),
    }


def propose_rail(ctx: Context, taskId: Any = None, proposalType: Any = None, targetScope: Any = None, currentValue: Any = None,
                 proposedValue: Any = None, reason: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's propose_rail: store a rail change proposal (a file under proposals/) for review."""
    task_id = _task_id(taskId)
    kind = core.check_choice(proposalType, core.PROPOSAL_TYPES, "proposalType")
    scope = core.check_choice(targetScope, core.PROPOSAL_SCOPES, "targetScope")
    proposed = _required(proposedValue, "proposedValue")
    why = _required(reason, "reason")
    current = _text(currentValue, "currentValue")
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        now = ctx.stamp()
        proposal = Proposal(id=ctx.new_id("PROP"), task=task_id, worker=caller or task.assigned_worker, proposal_type=kind,
                            target_scope=scope, current_value=current, proposed_value=proposed, reason=why, created=now)
        ctx.store.create("proposal", proposal)
        _log(ctx, board.project, "PROPOSAL_CREATED", task=task, worker=proposal.worker, proposalId=proposal.id,
             proposalType=kind, targetScope=scope)
    return {"success": True, "proposalId": proposal.id, "status": "PENDING",
            "message": f"Rail proposal {proposal.id} stored for review ({ctx.store.display(ctx.store.path('proposal', proposal.id))})."}


def list_proposals(ctx: Context, status: Any = None) -> dict[str, Any]:
    """Rail proposals, newest first, optionally only those with one status."""
    wanted = core.check_choice(status, core.PROPOSAL_STATUSES, "status") if status is not None else None
    items, problems = ctx.store.load_kind("proposal")
    found = [p for p in items.values() if wanted is None or p.status == wanted]
    found.sort(key=lambda p: (p.created or "", p.id), reverse=True)
    return _with_problems({"proposals": [core.proposal_to_dict(p) for p in found], "count": len(found)}, problems)


def resolve_proposal(ctx: Context, proposalId: Any = None, decision: Any = None) -> dict[str, Any]:
    """A human approves or rejects a rail proposal (the rails themselves are edited by hand)."""
    proposal_id = core.check_name(proposalId, "proposalId")
    verdict = core.check_choice(decision, ("APPROVED", "REJECTED"), "decision")
    if ctx.actor != HUMAN:
        raise Conflict("rail proposals are resolved by a human", code="NOT_ALLOWED", status=403)
    with ctx.store.writing():
        board = ctx.store.load()
        now = ctx.stamp()
        proposal = ctx.store.update("proposal", proposal_id, lambda p: replace(p, status=verdict, resolved_by="HUMAN", resolved=now))
        _log(ctx, board.project, f"PROPOSAL_{verdict}", worker=proposal.worker, proposalId=proposal_id,
             task=board.tasks.get(proposal.task or ""))
    return {"success": True, "proposal": core.proposal_to_dict(proposal)}


# --------------------------------------------------------------------------- queries


def list_tasks(ctx: Context, epicId: Any = None, status: Any = None) -> dict[str, Any]:
    """Moe's list_tasks: an epic's tasks (or all) in board order, with column counts over the
    epic's tasks. ARCHIVED tasks are listed only when asked for by status."""
    epic_id = _text(epicId, "epicId")
    wanted = _statuses(status, "status")
    board = ctx.store.load()
    epic = _find_epic(board, epic_id.strip()) if epic_id else None
    scope = [t for t in board.tasks.values() if epic is None or t.epic == epic.id]
    shown = [t for t in scope if t.status in wanted] if wanted else [t for t in scope if t.status != "ARCHIVED"]
    shown.sort(key=lambda t: core.board_key(t, board.epics))
    result = {
        "epicId": epic.id if epic else None,
        "epicTitle": epic.title if epic else None,
        "tasks": [core.task_brief(t) for t in shown],
        "counts": core.list_counts(scope),
    }
    return _with_problems(result, board.problems)


def search_tasks(ctx: Context, query: Any = None, filters: Any = None, limit: Any = None) -> dict[str, Any]:
    """Moe's search_tasks: filters first (status, epicId, assignedWorkerId), then relevance to
    the query (title matches weigh twice description matches); full task records."""
    text = _text(query, "query")
    if filters is not None and not isinstance(filters, dict):
        raise InvalidRequest("filters must be an object {status?, epicId?, assignedWorkerId?}", details={"field": "filters"})
    given = dict(filters or {})
    unknown = sorted(set(given) - {"status", "epicId", "assignedWorkerId"})
    if unknown:
        raise InvalidRequest(f"unknown filter(s): {', '.join(unknown)}", details={"field": "filters", "unknown": unknown})
    status = core.check_status(given["status"], "filters.status") if given.get("status") is not None else None
    epic_id = _text(given.get("epicId"), "filters.epicId")
    worker_id = _text(given.get("assignedWorkerId"), "filters.assignedWorkerId")
    count = _count(limit, "limit", DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT)
    board = ctx.store.load()
    found = core.search_tasks(board.tasks.values(), board.epics, text, status=status, epic_id=epic_id, worker_id=worker_id, limit=count)
    applied = {key: value for key, value in (("status", status), ("epicId", epic_id), ("assignedWorkerId", worker_id)) if value}
    result = {
        "tasks": [core.task_to_dict(t, path=_task_path(ctx, t.id)) for t in found],
        "totalMatches": len(found),
        "query": text if text and text.strip() else None,
        "filters": applied,
    }
    return _with_problems(result, board.problems)


def get_next_task(ctx: Context, epicId: Any = None) -> dict[str, Any]:
    """Moe's get_next_task: the next BACKLOG task in queue order (priority, then order)."""
    epic_id = _text(epicId, "epicId")
    board = ctx.store.load()
    if epic_id:
        _find_epic(board, epic_id.strip())
    backlog = [t for t in board.tasks.values() if t.status == "BACKLOG" and (not epic_id or t.epic == epic_id.strip())]
    if not backlog:
        return _with_problems({"hasNext": False}, board.problems)
    task = min(backlog, key=lambda t: core.rank_key(t, board.epics))
    result = {"hasNext": True, "task": {"id": task.id, "title": task.title, "description": task.description,
                                        "definitionOfDone": list(task.definition_of_done), "epicId": task.epic or None,
                                        "priority": task.priority}}
    return _with_problems(result, board.problems)


def ready_tasks(ctx: Context, epicId: Any = None) -> dict[str, Any]:
    """Open tasks whose dependencies are all DONE (`ready`), and the rest with what they wait on."""
    epic_id = _text(epicId, "epicId")
    board = ctx.store.load()
    if epic_id:
        _find_epic(board, epic_id.strip())
    ready, blocked = core.ready_and_blocked(board, epic_id.strip() if epic_id else None)
    result = {
        "ready": [core.task_brief(t) for t in ready],
        "blocked": [{**core.task_brief(t), "waitingOn": waits} for t, waits in blocked],
        "counts": {"ready": len(ready), "blocked": len(blocked)},
    }
    return _with_problems(result, board.problems)


def show_task(ctx: Context, taskId: Any = None) -> dict[str, Any]:
    """One task's full record. Raises NotFound, or InvalidDocument for an unreadable file."""
    task_id = _task_id(taskId)
    task = ctx.store.get("task", task_id)
    return core.task_to_dict(task, path=_task_path(ctx, task_id))


def get_activity_log(ctx: Context, taskId: Any = None, epicId: Any = None, workerId: Any = None, eventTypes: Any = None,
                     limit: Any = None) -> dict[str, Any]:
    """Moe's get_activity_log: the newest events matching every filter, newest first."""
    task_id = _text(taskId, "taskId")
    epic_id = _text(epicId, "epicId")
    worker_id = _text(workerId, "workerId")
    types = _texts(eventTypes, "eventTypes")
    count = _count(limit, "limit", DEFAULT_LOG_LIMIT, MAX_LOG_LIMIT)
    events, problems = ctx.store.events()
    chosen = core.filter_events(events, task_id=task_id, epic_id=epic_id, worker_id=worker_id, event_types=types, limit=count)
    result = {
        "events": [core.event_to_dict(e) for e in chosen],
        "count": len(chosen),
        "filters": {"taskId": task_id, "epicId": epic_id, "workerId": worker_id, "eventTypes": list(types) if types else None, "limit": count},
    }
    return _with_problems(result, problems)


# --------------------------------------------------------------------------- claims and status


def claim_next_task(ctx: Context, statuses: Any = None, epicId: Any = None, workerId: Any = None, replaceExisting: Any = None) -> dict[str, Any]:
    """Moe's claim_next_task: give `workerId` the next task in `statuses` (see `board.plan_claim`
    for the order and the solo-worker rule). Without a worker, shows the task it would give.

    Returns `{hasNext: false, alreadyAssigned}` when the worker holds a task already. Raises
    InvalidRequest for bad statuses, Conflict WORKER_CONFLICT under the solo-worker rule.
    """
    wanted = _statuses(statuses)
    epic_id = _text(epicId, "epicId")
    worker_id = _caller(ctx, workerId)
    takeover = _flag(replaceExisting, "replaceExisting")
    if not wanted:
        raise InvalidRequest("statuses must list at least one of " + ", ".join(core.CLAIMABLE), details={"field": "statuses"})
    with ctx.store.writing():
        board = ctx.store.load()
        if epic_id:
            _find_epic(board, epic_id.strip())
        board = _settle_approvals(ctx, board)
        plan = core.plan_claim(board, wanted, worker_id, epic_id=epic_id.strip() if epic_id else None, replace_existing=takeover)
        if plan.already is not None:
            held = plan.already
            return _with_problems({"hasNext": False, "alreadyAssigned": {"taskId": held.id, "title": held.title, "status": held.status}},
                                  board.problems)
        if plan.task is None:
            return _with_problems({"hasNext": False}, board.problems)
        task = plan.task
        if worker_id is not None:
            _ensure_worker(ctx, board, worker_id, core.role_for_status(task.status))
            now = ctx.stamp()
            expected = (task.status, task.assigned_worker)

            def decide(current: Task) -> Task:
                # The file is read again under the lock: claim only if nobody took it meanwhile.
                if (current.status, current.assigned_worker) != expected:
                    raise Conflict(f"task {current.id} changed while being claimed; claim again", code="CONFLICT",
                                   details={"taskId": current.id, "status": current.status, "assignedWorkerId": current.assigned_worker})
                return core.claimed(current, worker_id, now)

            _old, task = _update_task(ctx, task.id, decide)
            if plan.takeover_from:
                _log(ctx, board.project, "WORKER_RELEASED", task=task, worker=plan.takeover_from, takenOverBy=worker_id)
            _log(ctx, board.project, "TASK_CLAIMED", task=task, worker=worker_id, status=task.status, takenOverFrom=plan.takeover_from)
    epic = board.epics.get(task.epic)
    result: dict[str, Any] = {
        "hasNext": True,
        "project": core.project_to_dict(board.project),
        "epic": core.epic_context(epic) if epic else None,
        "task": _task_for_agent(task),
        "allRails": core.all_rails(board.project, epic, task),
    }
    if plan.takeover_from:
        result["takenOverFrom"] = plan.takeover_from
    return _with_problems(result, board.problems)


def release_task(ctx: Context, taskId: Any = None, reason: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Let go of a held task: it keeps its status and becomes claimable by the next worker."""
    task_id = _task_id(taskId)
    why = _text(reason, "reason")
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        _guard_owner(task, caller)
        now = ctx.stamp()
        old, new = _update_task(ctx, task_id, lambda t: replace(t, assigned_worker=None, updated=now) if t.assigned_worker else t)
        if old.assigned_worker:
            _log(ctx, board.project, "WORKER_RELEASED", task=new, worker=old.assigned_worker, status=new.status, reason=why)
    return {"success": True, "taskId": task_id, "status": new.status, "releasedWorkerId": old.assigned_worker}


def set_task_status(ctx: Context, taskId: Any = None, status: Any = None, reason: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's set_task_status: one move of the state machine (see `board.TRANSITIONS`).

    Raises INVALID_TRANSITION for a move the table forbids or whose condition fails,
    InvalidRequest for a move back without a reason, NOT_ALLOWED when an agent approves a
    plan that the approval mode leaves to a human, or acts on another worker's task.
    """
    task_id = _task_id(taskId)
    target = core.check_status(status)
    why = _text(reason, "reason")
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        _guard_owner(task, caller)
        core.check_transition(task, target, reason=why)
        if (task.status, target) == ("AWAITING_APPROVAL", "WORKING") and ctx.actor != HUMAN \
                and not core.approval_due(task, board.project.settings, ctx.now()):
            raise Conflict("plans are approved by a human in CONTROL mode (moss task approve)", code="NOT_ALLOWED", status=403,
                           details={"taskId": task_id, "approvalMode": board.project.settings.approval_mode})
        new = _move(ctx, board, task, target, reason=why, actor=caller) if target != task.status else task
    return {"success": True, "taskId": task_id, "status": new.status}


def qa_approve(ctx: Context, taskId: Any = None, summary: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's qa_approve: REVIEW -> DONE. Raises INVALID_TRANSITION unless the task is in REVIEW."""
    task_id = _task_id(taskId)
    review = _text(summary, "summary")
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        if task.status != "REVIEW":
            raise Conflict("Task must be in REVIEW status to approve", code="INVALID_TRANSITION",
                           details={"taskId": task_id, "status": task.status})
        _guard_owner(task, caller)
        extra = (lambda t: replace(t, review_summary=review)) if review and review.strip() else None
        new = _move(ctx, board, task, "DONE", reason=None, actor=caller or task.assigned_worker, extra=extra)
    return {"success": True, "taskId": task_id, "status": new.status, "summary": review,
            "message": f"{task_id} approved by QA and DONE."}


def qa_reject(ctx: Context, taskId: Any = None, reason: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's qa_reject: REVIEW -> WORKING with the reason, counting a reopen; the rejection that
    brings the count to `maxReopens` sends the task back to PLANNING instead (`escalated`)."""
    task_id = _task_id(taskId)
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidRequest("reason is required - explain which DoD items failed and why", details={"field": "reason"})
    caller = _caller(ctx, workerId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        if task.status != "REVIEW":
            raise Conflict("Task must be in REVIEW status to reject", code="INVALID_TRANSITION",
                           details={"taskId": task_id, "status": task.status})
        _guard_owner(task, caller)
        target = core.qa_reject_target(task, board.project.settings)
        new = _move(ctx, board, task, target, reason=reason.strip(), actor=caller or task.assigned_worker)
    escalated = new.status == "PLANNING"
    message = (f"{task_id} rejected {new.reopen_count} times: back to PLANNING for a new plan." if escalated
               else f"{task_id} back to WORKING; fix: {reason.strip()}")
    return {"success": True, "taskId": task_id, "status": new.status, "reopenCount": new.reopen_count, "reason": reason.strip(),
            "escalated": escalated, "message": message}


# --------------------------------------------------------------------------- creating and editing


def _check_depends(board: Board, task_id: str, depends: Sequence[str]) -> tuple[str, ...]:
    for dep in depends:
        if dep == task_id:
            raise InvalidRequest("a task cannot depend on itself", details={"field": "dependsOn"})
        if dep not in board.tasks:
            raise NotFound(f"Task not found: {dep} (in dependsOn)", details={"field": "dependsOn", "taskId": dep})
    cycle = core.dependency_cycle(board.tasks, task_id, depends)
    if cycle:
        raise Conflict("dependencies would form a cycle: " + " -> ".join(cycle), code="DEPENDENCY_CYCLE", details={"cycle": cycle})
    return tuple(dict.fromkeys(depends))


def create_task(ctx: Context, epicId: Any = None, title: Any = None, description: Any = None, definitionOfDone: Any = None,
                taskRails: Any = None, status: Any = None, parentTaskId: Any = None, order: Any = None, createdBy: Any = None,
                priority: Any = None, dependsOn: Any = None, testFile: Any = None) -> dict[str, Any]:
    """Moe's create_task (with LoopFlow's priority, dependsOn and testFile): a new task file.

    A new task starts in BACKLOG (or PLANNING or WORKING when asked). Raises NotFound for the
    epic, a dependency or the parent, DEPENDENCY_CYCLE, InvalidRequest for bad values.
    """
    epic_id = _required(epicId, "epicId")
    name = " ".join(_required(title, "title").split())
    start = core.check_status(status) if status is not None else "BACKLOG"
    if start not in ("BACKLOG", "PLANNING", "WORKING"):
        raise InvalidRequest(f"a new task starts in BACKLOG, PLANNING or WORKING, not {start}", details={"field": "status"})
    creator = core.check_choice(createdBy, core.CREATORS, "createdBy") if createdBy is not None else ("WORKER" if ctx.actor == AGENT else "HUMAN")
    rank = core.check_priority(priority) if priority is not None else core.DEFAULT_PRIORITY
    position = _number(order, "order")
    parent = _text(parentTaskId, "parentTaskId")
    with ctx.store.writing():
        board = ctx.store.load()
        _find_epic(board, epic_id)
        if parent and parent.strip() not in board.tasks:
            raise NotFound(f"Task not found: {parent} (parentTaskId)", details={"field": "parentTaskId"})
        now = ctx.stamp()
        task_id = ctx.new_id("TASK")
        task = Task(
            id=task_id,
            epic=epic_id,
            title=name,
            description=(_text(description, "description") or "").strip(),
            status=start,
            priority=rank,
            order=position if position is not None else core.next_order(board.tasks.values(), epic_id),
            depends_on=_check_depends(board, task_id, _texts(dependsOn, "dependsOn") or ()),
            parent=parent.strip() if parent and parent.strip() else None,
            definition_of_done=_texts(definitionOfDone, "definitionOfDone") or (),
            task_rails=_texts(taskRails, "taskRails") or (),
            created_by=creator,
            test_file=(_text(testFile, "testFile") or "").strip() or None,
            created=now,
            updated=now,
            work_started=now if start == "WORKING" else None,
        )
        ctx.store.create("task", task)
        _log(ctx, board.project, "TASK_CREATED", task=task, title=name, status=start)
    return {"success": True, "task": core.task_to_dict(task, path=_task_path(ctx, task_id))}


def update_task(ctx: Context, taskId: Any = None, title: Any = None, description: Any = None, definitionOfDone: Any = None,
                taskRails: Any = None, priority: Any = None, order: Any = None, dependsOn: Any = None, parentTaskId: Any = None,
                testFile: Any = None, epicId: Any = None) -> dict[str, Any]:
    """Edit a task's fields (not its status or holder: those move through the workflow).
    Only the changed keys' lines change in the file."""
    task_id = _task_id(taskId)
    changes: dict[str, Any] = {}
    if title is not None:
        changes["title"] = " ".join(_required(title, "title").split())
    if description is not None:
        changes["description"] = (_text(description, "description") or "").strip()
    if definitionOfDone is not None:
        changes["definition_of_done"] = _texts(definitionOfDone, "definitionOfDone")
    if taskRails is not None:
        changes["task_rails"] = _texts(taskRails, "taskRails")
    if priority is not None:
        changes["priority"] = core.check_priority(priority)
    if order is not None:
        changes["order"] = _number(order, "order")
    if testFile is not None:
        changes["test_file"] = (_text(testFile, "testFile") or "").strip() or None
    with ctx.store.writing():
        board = ctx.store.load()
        _find_task(board, task_id)
        if dependsOn is not None:
            changes["depends_on"] = _check_depends(board, task_id, _texts(dependsOn, "dependsOn") or ())
        if parentTaskId is not None:
            parent = (_text(parentTaskId, "parentTaskId") or "").strip()
            if parent and parent not in board.tasks:
                raise NotFound(f"Task not found: {parent} (parentTaskId)", details={"field": "parentTaskId"})
            changes["parent"] = parent or None
        if epicId is not None:
            changes["epic"] = _find_epic(board, _required(epicId, "epicId")).id
        now = ctx.stamp()

        def decide(current: Task) -> Task:
            edited = replace(current, **changes)
            return replace(edited, updated=now) if edited != current else current

        old, new = _update_task(ctx, task_id, decide)
        fields = [name for name in changes if getattr(old, name) != getattr(new, name)]
        if fields:
            _log(ctx, board.project, "TASK_UPDATED", task=new, fields=fields)
    return {"success": True, "task": core.task_to_dict(new, path=_task_path(ctx, task_id))}


def delete_task(ctx: Context, taskId: Any = None) -> dict[str, Any]:
    """Moe's delete_task: remove the task's file and return the task as it was."""
    task_id = _task_id(taskId)
    with ctx.store.writing():
        board = ctx.store.load()
        task = _find_task(board, task_id)
        ctx.store.delete("task", task_id)
        _log(ctx, board.project, "TASK_DELETED", task=task, title=task.title)
    return {"success": True, "task": core.task_to_dict(task)}


def create_epic(ctx: Context, title: Any = None, description: Any = None, architectureNotes: Any = None, epicRails: Any = None,
                status: Any = None, order: Any = None) -> dict[str, Any]:
    """Moe's create_epic: a new epic file (PLANNED unless a status is given)."""
    name = " ".join(_required(title, "title").split())
    state = core.check_choice(status, core.EPIC_STATUSES, "status") if status is not None else "PLANNED"
    position = _number(order, "order")
    with ctx.store.writing():
        board = ctx.store.load()
        now = ctx.stamp()
        orders = [epic.order for epic in board.epics.values()]
        epic = Epic(
            id=ctx.new_id("EPIC"),
            title=name,
            description=(_text(description, "description") or "").strip(),
            status=state,
            order=position if position is not None else ((max(orders) // 1 + 1) if orders else 1),
            epic_rails=_texts(epicRails, "epicRails") or (),
            architecture_notes=(_text(architectureNotes, "architectureNotes") or "").strip() or None,
            created=now,
            updated=now,
        )
        ctx.store.create("epic", epic)
        _log(ctx, board.project, "EPIC_CREATED", epic_id=epic.id, title=name)
    return {"success": True, "epic": core.epic_to_dict(epic, path=ctx.store.display(ctx.store.path("epic", epic.id)))}


def update_epic(ctx: Context, epicId: Any = None, title: Any = None, description: Any = None, architectureNotes: Any = None,
                epicRails: Any = None, status: Any = None, order: Any = None) -> dict[str, Any]:
    """Moe's update_epic. Raises InvalidRequest `epicId is required`, NotFound `Epic not found`."""
    epic_id = _required(epicId, "epicId")
    changes: dict[str, Any] = {}
    if title is not None:
        changes["title"] = " ".join(_required(title, "title").split())
    if description is not None:
        changes["description"] = (_text(description, "description") or "").strip()
    if architectureNotes is not None:
        changes["architecture_notes"] = (_text(architectureNotes, "architectureNotes") or "").strip() or None
    if epicRails is not None:
        changes["epic_rails"] = _texts(epicRails, "epicRails")
    if status is not None:
        changes["status"] = core.check_choice(status, core.EPIC_STATUSES, "status")
    if order is not None:
        changes["order"] = _number(order, "order")
    with ctx.store.writing():
        board = ctx.store.load()
        _find_epic(board, epic_id)
        now = ctx.stamp()
        before: list[Epic] = []

        def decide(current: Epic) -> Epic:
            before.append(current)
            edited = replace(current, **changes)
            return replace(edited, updated=now) if edited != current else current

        epic = ctx.store.update("epic", epic_id, decide)
        fields = [name for name in changes if getattr(before[-1], name) != getattr(epic, name)]
        if fields:
            _log(ctx, board.project, "EPIC_UPDATED", epic_id=epic_id, fields=fields)
    return {"success": True, "epic": core.epic_to_dict(epic, path=ctx.store.display(ctx.store.path("epic", epic_id)))}


def delete_epic(ctx: Context, epicId: Any = None, cascadeDelete: Any = None) -> dict[str, Any]:
    """Moe's delete_epic: refuses while the epic has tasks unless `cascadeDelete`, which deletes
    them first. Raises Conflict (code CONFLICT) for an epic with tasks."""
    epic_id = _required(epicId, "epicId")
    cascade = _flag(cascadeDelete, "cascadeDelete")
    with ctx.store.writing():
        board = ctx.store.load()
        epic = _find_epic(board, epic_id)
        tasks = sorted((t for t in board.tasks.values() if t.epic == epic_id), key=lambda t: t.id)
        if tasks and not cascade:
            raise Conflict(f'Epic "{epic_id}" has {len(tasks)} task(s); delete them first or pass cascadeDelete', code="CONFLICT",
                           details={"epicId": epic_id, "taskCount": len(tasks)})
        for task in tasks:
            ctx.store.delete("task", task.id)
            _log(ctx, board.project, "TASK_DELETED", task=task, title=task.title, cascade=True)
        ctx.store.delete("epic", epic_id)
        _log(ctx, board.project, "EPIC_DELETED", epic_id=epic_id, title=epic.title, deletedTaskCount=len(tasks))
    return {"success": True, "deletedEpic": core.epic_to_dict(epic), "deletedTaskCount": len(tasks)}


def list_epics(ctx: Context, status: Any = None) -> dict[str, Any]:
    """Every epic in board order, with its column counts."""
    wanted = core.check_choice(status, core.EPIC_STATUSES, "status") if status is not None else None
    board = ctx.store.load()
    rows = []
    for epic in sorted(board.epics.values(), key=lambda e: (e.order, e.created or "", e.id)):
        if wanted is None or epic.status == wanted:
            counts = core.list_counts(t for t in board.tasks.values() if t.epic == epic.id)
            rows.append({**core.epic_to_dict(epic), "counts": counts})
    return _with_problems({"epics": rows, "count": len(rows)}, board.problems)


def show_epic(ctx: Context, epicId: Any = None) -> dict[str, Any]:
    """One epic's full record with its tasks (brief) and counts."""
    epic_id = _required(epicId, "epicId")
    board = ctx.store.load()
    epic = _find_epic(board, epic_id)
    tasks = sorted((t for t in board.tasks.values() if t.epic == epic_id), key=lambda t: core.board_key(t, board.epics))
    return {**core.epic_to_dict(epic, path=ctx.store.display(ctx.store.path("epic", epic_id))),
            "tasks": [core.task_brief(t) for t in tasks], "counts": core.list_counts(tasks)}


# --------------------------------------------------------------------------- workers and teams


def register_worker(ctx: Context, workerId: Any = None, type: Any = None) -> dict[str, Any]:
    """Register a worker (idempotent): its file under workers/."""
    worker_id = core.check_name(workerId, "workerId")
    role = core.check_choice(type, core.ROLES, "type", upper=False) if type is not None else None
    with ctx.store.writing():
        board = ctx.store.load()
        created = worker_id not in board.workers
        worker = _ensure_worker(ctx, board, worker_id, role)
        board = ctx.store.load()
    return {"worker": core.worker_to_dict(board, board.workers.get(worker_id, worker)), "created": created}


def list_workers(ctx: Context) -> dict[str, Any]:
    """Every registered worker with its derived status and current task."""
    board = ctx.store.load()
    rows = [core.worker_to_dict(board, worker) for worker in sorted(board.workers.values(), key=lambda w: w.id)]
    return _with_problems({"workers": rows, "count": len(rows)}, board.problems)


def show_worker(ctx: Context, workerId: Any = None) -> dict[str, Any]:
    """One worker. Raises NotFound `Worker not found: <id>`."""
    worker_id = core.check_name(workerId, "workerId")
    board = ctx.store.load()
    worker = board.workers.get(worker_id)
    if worker is None:
        raise NotFound(f"Worker not found: {worker_id}", details={"workerId": worker_id})
    return core.worker_to_dict(board, worker)


def _team_with_members(board: Board, team: Team) -> dict[str, Any]:
    members = []
    for member in team.members:
        worker = board.workers.get(member)
        members.append({"id": member, "type": worker.type if worker else None,
                         "status": core.worker_status(board, worker) if worker else "UNKNOWN"})
    return {**core.team_to_dict(team), "members": members}


def create_team(ctx: Context, name: Any = None, role: Any = None, maxSize: Any = None) -> dict[str, Any]:
    """Moe's create_team: a new team, or the existing one with the same name and role."""
    team_name = " ".join(_required(name, "name").split())
    team_role = core.check_choice(role, core.ROLES, "role", upper=False)
    size = _count(maxSize, "maxSize", 0, 10_000) or None
    with ctx.store.writing():
        board = ctx.store.load()
        for team in sorted(board.teams.values(), key=lambda t: (t.created or "", t.id)):
            if team.name.casefold() == team_name.casefold() and team.role == team_role:
                return {"team": core.team_to_dict(team), "created": False}
        now = ctx.stamp()
        team = Team(id=ctx.new_id("TEAM"), name=team_name, role=team_role, max_size=size or board.project.settings.max_team_size,
                    created=now, updated=now)
        ctx.store.create("team", team)
        _log(ctx, board.project, "TEAM_CREATED", teamId=team.id, name=team_name, role=team_role)
    return {"team": core.team_to_dict(team), "created": True}


def _find_team(board: Board, team_id: str) -> Team:
    team = board.teams.get(team_id)
    if team is None:
        raise NotFound(f"Team not found: {team_id}", details={"teamId": team_id})
    return team


def join_team(ctx: Context, teamId: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's join_team: add a worker (registered on the way if new). Joining twice is a no-op.
    Raises NotFound `Team not found`, Conflict TEAM_FULL `Team is full (max N members)`."""
    team_id = _required(teamId, "teamId")
    worker_id = core.check_name(workerId, "workerId")
    with ctx.store.writing():
        board = ctx.store.load()
        team = _find_team(board, team_id)
        if worker_id not in team.members:
            if len(team.members) >= team.max_size:
                raise Conflict(f"Team is full (max {team.max_size} members)", code="TEAM_FULL",
                               details={"teamId": team_id, "maxSize": team.max_size})
            _ensure_worker(ctx, board, worker_id, team.role)
            now = ctx.stamp()

            def add(current: Team) -> Team:
                if worker_id in current.members:
                    return current
                if len(current.members) >= current.max_size:
                    raise Conflict(f"Team is full (max {current.max_size} members)", code="TEAM_FULL",
                                   details={"teamId": team_id, "maxSize": current.max_size})
                return replace(current, members=(*current.members, worker_id), updated=now)

            team = ctx.store.update("team", team_id, add)
            _log(ctx, board.project, "TEAM_JOINED", worker=worker_id, teamId=team_id)
    return {"team": core.team_to_dict(team)}


def leave_team(ctx: Context, teamId: Any = None, workerId: Any = None) -> dict[str, Any]:
    """Moe's leave_team: remove a worker from a team (a no-op when it is not a member)."""
    team_id = _required(teamId, "teamId")
    worker_id = core.check_name(workerId, "workerId")
    with ctx.store.writing():
        board = ctx.store.load()
        team = _find_team(board, team_id)
        if worker_id in team.members:
            now = ctx.stamp()
            team = ctx.store.update("team", team_id, lambda t: replace(t, members=tuple(m for m in t.members if m != worker_id), updated=now))
            _log(ctx, board.project, "TEAM_LEFT", worker=worker_id, teamId=team_id)
    return {"team": core.team_to_dict(team)}


def list_teams(ctx: Context, role: Any = None) -> dict[str, Any]:
    """Moe's list_teams: every team (of one role), each with its members' type and status."""
    wanted = core.check_choice(role, core.ROLES, "role", upper=False) if role is not None else None
    board = ctx.store.load()
    teams = [t for t in sorted(board.teams.values(), key=lambda t: (t.name.casefold(), t.id)) if wanted is None or t.role == wanted]
    return _with_problems({"teams": [_team_with_members(board, t) for t in teams]}, board.problems)


# --------------------------------------------------------------------------- the board itself


def init_board(ctx: Context, name: Any = None) -> dict[str, Any]:
    """Write `project.md` with every setting spelled out (never replaces an existing one)."""
    title = _text(name, "name")
    with ctx.store.writing():
        existing = ctx.store.project_path.exists()
        project = ctx.store.read_project() if existing else None
        if project is None:
            now = ctx.stamp()
            base = core.default_project(title.strip() if title and title.strip() else ctx.store.root.name)
            project = replace(base, id=ctx.new_id("PROJ"), exists=True, created=now, updated=now)
            if ctx.store.create_project(project):
                _log(ctx, project, "PROJECT_CREATED", name=project.name)
                existing = False
            else:
                existing, project = True, ctx.store.read_project()
    return {"created": not existing, "path": ctx.store.display(ctx.store.project_path), "project": core.project_to_dict(project)}


def board_status(ctx: Context) -> dict[str, Any]:
    """The project, counts over every task, epics, workers and any unreadable files."""
    board = ctx.store.load()
    return _with_problems({
        "project": core.project_to_dict(board.project),
        "projectFile": ctx.store.display(ctx.store.project_path) if board.project.exists else None,
        "counts": core.list_counts(board.tasks.values()),
        "epics": len(board.epics),
        "workers": [core.worker_to_dict(board, w) for w in sorted(board.workers.values(), key=lambda w: w.id)],
        "teams": len(board.teams),
    }, board.problems)


OPERATIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "get_context": get_context,
    "submit_plan": submit_plan,
    "check_approval": check_approval,
    "start_step": start_step,
    "complete_step": complete_step,
    "complete_task": complete_task,
    "report_blocked": report_blocked,
    "propose_rail": propose_rail,
    "list_tasks": list_tasks,
    "search_tasks": search_tasks,
    "get_next_task": get_next_task,
    "claim_next_task": claim_next_task,
    "set_task_status": set_task_status,
    "create_task": create_task,
    "update_task": update_task,
    "create_epic": create_epic,
    "update_epic": update_epic,
    "delete_task": delete_task,
    "delete_epic": delete_epic,
    "get_activity_log": get_activity_log,
    "unblock_worker": unblock_worker,
    "qa_approve": qa_approve,
    "qa_reject": qa_reject,
    "create_team": create_team,
    "join_team": join_team,
    "leave_team": leave_team,
    "list_teams": list_teams,
    "release_task": release_task,
    "list_workers": list_workers,
    "ready_tasks": ready_tasks,
}
"""Moe's tool names (without `moe.`) -> use cases; a tool call is `OPERATIONS[name](ctx, **arguments)`.
Human-only operations (approve_plan, reject_plan, resolve_proposal, init_board) are not here."""

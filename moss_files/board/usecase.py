"""What every board use case shares: the workspace's board store, finding items, the ownership
guard, the activity log, state-machine moves with their log lines, and auto-approval.

Shell layer: gathers with `store`, decides with the pure core (`model`, `rules`, `shapes`),
writes with `store`. The use cases themselves live by theme in `plans`, `claims`, `editing`,
`teams` and `queries`; `operations` maps Moe's tool names onto them.

Why a claim can never give one task to two workers, even when processes claim at the same
instant: every state-changing operation runs inside `store.writing()`, one flock on
`.moss/run/.board.lock` that the kernel grants to one open file at a time, across threads and
processes, and releases if its holder dies. Inside it the claimer (1) reads the board after
taking the lock, so it sees every claim that finished before; (2) chooses a task with the pure
`rules.plan_claim`; (3) re-reads that task's file in the same read-modify-write that assigns it
and refuses unless the holder is still the one it planned from, so even a writer that ignores
the lock (a hand edit) cannot be overwritten; and (4) renames the new file into place and
fsyncs it before the lock is released, so the next claimer's read includes it. Two claimers
therefore run one after the other, and the second sees the first's owner. Across clones there
is no lock to share: two offline claims of one task meet as a git conflict on its
`assigned_worker:` line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC
from typing import Any

from moss_files.board import rules
from moss_files.board.model import Board, Epic, Event, Project, Task, Worker, check_name
from moss_files.board.store import BoardStore
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, MossError, NotFound, error_body

STORE_KEY = "board.store"


def board_store(ctx: Context) -> BoardStore:
    """The board store of the context's workspace, kept for the context's life: its stat-keyed
    read cache stays warm in a long-lived server, and every CLI run starts fresh."""
    return ctx.resource(STORE_KEY, lambda: BoardStore(ctx.root))


def caller(ctx: Context, worker_id: str | None) -> str | None:
    """The worker on whose behalf a call is made: `worker_id`, else the context's default
    (MOE_WORKER_ID); None is a human, whom the ownership guard does not bind."""
    if worker_id is not None:
        return check_name(worker_id, "workerId")
    return ctx.worker_id


def with_problems(result: dict[str, Any], errors: Sequence[MossError]) -> dict[str, Any]:
    """`result`, with the board files that could not be read under `problems` (when any):
    every answer built without them says so."""
    if errors:
        result["problems"] = [error_body(err)["error"] for err in errors]
    return result


def find_task(board: Board, task_id: str) -> Task:
    """The task `task_id`. Raises its file's error when unreadable, else NotFound."""
    task = board.tasks.get(task_id)
    if task is None:
        for err in board.problems:
            if err.path and err.path.endswith(f"/tasks/{task_id}.md"):
                raise err
        raise NotFound(f"Task not found: {task_id}", details={"taskId": task_id})
    return task


def find_epic(board: Board, epic_id: str) -> Epic:
    """The epic `epic_id`. Raises its file's error when unreadable, else NotFound."""
    epic = board.epics.get(epic_id)
    if epic is None:
        for err in board.problems:
            if err.path and err.path.endswith(f"/epics/{epic_id}.md"):
                raise err
        raise NotFound(f"Epic not found: {epic_id}", details={"epicId": epic_id})
    return epic


def guard_owner(task: Task, worker_id: str | None) -> None:
    """Only the task's holder may act on a held task; an unheld task is the human path.
    Raises Conflict NOT_ALLOWED (403)."""
    if worker_id is not None and task.assigned_worker is not None and worker_id != task.assigned_worker:
        raise Conflict(
            f"task {task.id} is held by {task.assigned_worker}, not {worker_id}",
            code="NOT_ALLOWED",
            status=403,
            details={"taskId": task.id, "assignedWorkerId": task.assigned_worker, "workerId": worker_id},
        )


def task_path(ctx: Context, task_id: str) -> str:
    """A task file's path relative to the workspace root."""
    store = board_store(ctx)
    return store.display(store.path("task", task_id))


def log(ctx: Context, project: Project, kind: str, *, task: Task | None = None, epic_id: str | None = None, worker: str | None = None, **payload: Any) -> None:
    """Append one event to the activity log (None values are left out of the payload)."""
    now = ctx.now().astimezone(UTC)
    event = Event(
        id=f"EVT-{ctx.new_ulid()}",
        timestamp=now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
        event=kind,
        project=project.id,
        epic=epic_id if epic_id is not None else (task.epic or None if task else None),
        task=task.id if task else None,
        worker=worker,
        payload={key: value for key, value in payload.items() if value is not None},
    )
    board_store(ctx).append(event)


_MEANINGS = {
    ("PLANNING", "AWAITING_APPROVAL"): "PLAN_SUBMITTED",
    ("AWAITING_APPROVAL", "WORKING"): "PLAN_APPROVED",
    ("AWAITING_APPROVAL", "PLANNING"): "PLAN_REJECTED",
    ("WORKING", "REVIEW"): "TASK_COMPLETED",
    ("REVIEW", "DONE"): "QA_APPROVED",
    ("REVIEW", "WORKING"): "QA_REJECTED",
    ("REVIEW", "PLANNING"): "QA_REJECTED",
}


def status_events(ctx: Context, project: Project, old: Task, new: Task, actor: str | None, reason: str | None) -> None:
    """The activity lines every status change writes: the change, and what it means."""
    if old.status == new.status:
        return
    log(ctx, project, "TASK_STATUS_CHANGED", task=new, worker=actor, **{"from": old.status, "to": new.status, "reason": reason})
    meaning = _MEANINGS.get((old.status, new.status))
    if meaning == "PLAN_SUBMITTED":
        log(ctx, project, meaning, task=new, worker=actor, stepCount=len(new.plan))
    elif meaning:
        log(ctx, project, meaning, task=new, worker=actor, reason=reason)
    if new.reopen_count > old.reopen_count:
        log(ctx, project, "TASK_REOPENED", task=new, worker=actor, reopenCount=new.reopen_count, reason=reason)
    if old.assigned_worker and not new.assigned_worker:
        log(ctx, project, "WORKER_RELEASED", task=new, worker=old.assigned_worker, status=new.status)


def write_task(ctx: Context, task_id: str, decide: Callable[[Task], Task]) -> tuple[Task, Task]:
    """Write `decide(task)` over the task's file; return (as read, as written). `decide` runs
    on the file's current content (again, if a hand edit lands meanwhile)."""
    seen: list[Task] = []

    def change(current: Task) -> Task:
        seen.append(current)
        return decide(current)

    new = board_store(ctx).update("task", task_id, change)
    return seen[-1], new


def move(ctx: Context, board: Board, task: Task, target: str, *, reason: str | None, actor: str | None, extra: Callable[[Task], Task] | None = None) -> Task:
    """Apply one state-machine move to a task's file and log it; return the task as written."""
    now = ctx.stamp()

    def decide(current: Task) -> Task:
        moved = rules.apply_transition(current, target, now, reason=reason)
        return extra(moved) if extra else moved

    old, new = write_task(ctx, task.id, decide)
    status_events(ctx, board.project, old, new, actor, reason)
    return new


def settle_approvals(ctx: Context, board: Board, only: str | None = None) -> Board:
    """Approve waiting plans the approval mode approves by itself (TURBO at once, SPEED after
    its delay): done lazily whenever an agent looks, so no timer has to survive a restart."""
    settings = board.project.settings
    if settings.approval_mode == "CONTROL":
        return board
    now = ctx.now()
    due = [t for t in board.tasks.values() if (only is None or t.id == only) and rules.approval_due(t, settings, now)]
    if not due:
        return board
    tasks = dict(board.tasks)
    for task in due:
        stamp = ctx.stamp()

        def approve(current: Task, stamp: str = stamp) -> Task:
            return rules.apply_transition(current, "WORKING", stamp) if rules.approval_due(current, settings, now) else current

        old, new = write_task(ctx, task.id, approve)
        if new.status != old.status:
            log(ctx, board.project, "PLAN_AUTO_APPROVED", task=new, mode=settings.approval_mode)
            status_events(ctx, board.project, old, new, None, None)
        tasks[task.id] = new
    return replace(board, tasks=tasks)


def ensure_worker(ctx: Context, board: Board, worker_id: str, role: str | None) -> Worker:
    """The worker's record, registering it (a new file) on first sight."""
    worker = board.workers.get(worker_id)
    if worker is not None:
        return worker
    now = ctx.stamp()
    worker = Worker(id=worker_id, type=role, created=now, updated=now)
    try:
        board_store(ctx).create("worker", worker)
    except Conflict:
        # Registered by hand, or unreadable: the file that is there stays as it is.
        return worker
    log(ctx, board.project, "WORKER_REGISTERED", worker=worker_id, type=role)
    return worker

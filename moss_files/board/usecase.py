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

Leases. A worker's hold on a task lasts while it shows signs of life: its claim, its
heartbeats and its own steps write `heartbeat:` in its worker file, and once that time is older
than the project's `stale_worker_timeout_ms` the lease has run out. The release is not left to
a timer that a crash would take with it: every writer settles expired leases first, under the
board lock (`settle_leases`): the task keeps its column and loses its holder, the worker's file
says STALE, the activity log says why. A STALE worker's later heartbeat or step is refused with
LEASE_EXPIRED, so once released a task has one owner again: whoever claims it next, once. The
lease is a time written in files, so it holds across clones too: two clones that each released
and re-claimed a task meet as a git conflict on its `assigned_worker:` line, never as two owners.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from moss_files.board import rules, threads, worktree
from moss_files.board.model import GONE_WORKER_STATUSES, Board, Epic, Event, Project, Task, Team, Worker, check_name
from moss_files.board.store import BoardStore
from moss_files.foundation.context import HUMAN, Context
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
        raise_unreadable(board, "tasks", task_id)
        raise NotFound(f"Task not found: {task_id}", details={"taskId": task_id})
    return task


def task_on_file(ctx: Context, task_id: str) -> Task:
    """The task `task_id`, read from its file now: for a use case that rests on one task and
    not on the board (`find_task` without a load of every task). Raises its file's error when
    unreadable, else NotFound, as `find_task` does."""
    try:
        return board_store(ctx).get("task", task_id)
    except NotFound:
        raise NotFound(f"Task not found: {task_id}", details={"taskId": task_id}) from None


def board_for_task(ctx: Context, task_id: str) -> tuple[Board, Task]:
    """For a write on one task, under the board lock: the board with its expired leases settled
    (`settle_leases` over the tasks somebody holds, in outline as `BoardStore.outline(())` gives
    them) and `task_id` in full, read from its file after that; and that task. What a step,
    a plan or a completion rests on (the task, the workers, the project), without every task
    of the board (at 20,000 tasks a load was most of such a command, issue 29). Raises what
    `task_on_file` raises."""
    board = settle_leases(ctx, board_store(ctx).outline(()))
    task = task_on_file(ctx, task_id)
    return replace(board, tasks={**board.tasks, task_id: task}), task


def find_epic(board: Board, epic_id: str) -> Epic:
    """The epic `epic_id`. Raises its file's error when unreadable, else NotFound."""
    epic = board.epics.get(epic_id)
    if epic is None:
        raise_unreadable(board, "epics", epic_id)
        raise NotFound(f"Epic not found: {epic_id}", details={"epicId": epic_id})
    return epic


def find_worker(board: Board, worker_id: str) -> Worker:
    """The worker `worker_id`. Raises its file's error when unreadable, else NotFound."""
    worker = board.workers.get(worker_id)
    if worker is None:
        raise_unreadable(board, "workers", worker_id)
        raise NotFound(f"Worker not found: {worker_id}", details={"workerId": worker_id})
    return worker


def find_team(board: Board, team_id: str) -> Team:
    """The team `team_id`. Raises its file's error when unreadable, else NotFound."""
    team = board.teams.get(team_id)
    if team is None:
        raise_unreadable(board, "teams", team_id)
        raise NotFound(f"Team not found: {team_id}", details={"teamId": team_id})
    return team


def raise_unreadable(board: Board, folder: str, item_id: str) -> None:
    """Raise the error of the item's own file when the board could not read it: a lookup that
    missed must not hide an unreadable, malformed or refused file as NOT_FOUND."""
    for err in board.problems:
        if err.path and err.path.endswith(f"/{folder}/{item_id}.md"):
            raise err


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


def guard_context(task: Task, worker_id: str | None, tool: str) -> None:
    """A worker acts on a task it holds only after reading its context (Moe: start_step and
    the QA verdicts require get_context first, so an agent never works from a stale or
    missing picture). The human path (no worker named, or nobody holds the task) is not
    guarded. Raises Conflict NOT_ALLOWED (403) with the call to make."""
    if worker_id is None or task.assigned_worker is None or worker_id in task.context_fetched_by:
        return
    raise Conflict(
        f"Call moe.get_context for task {task.id} before {tool}",
        code="NOT_ALLOWED",
        status=403,
        details={"taskId": task.id, "workerId": worker_id, "tool": tool, "contextFetched": False},
        hint=f"moe.get_context {{taskId: {task.id!r}}} (moss task context {task.id} -w {worker_id}), then call {tool} again",
    )


def guard_parked(ctx: Context, task: Task, worker_id: str | None, action: str) -> None:
    """A task parked in REVIEW for a person (`needs_human_review`, past the hard reopen cap) is
    decided by a person: a human at the CLI naming no worker. Raises Conflict NOT_ALLOWED."""
    if not (task.needs_human_review and task.status == "REVIEW"):
        return
    if worker_id is None and ctx.actor == HUMAN:
        return
    raise Conflict(
        f"{task.id} is parked in REVIEW for a person (its reopen budget and the re-plan are spent); an agent cannot {action} it",
        code="NOT_ALLOWED",
        status=403,
        details={"taskId": task.id, "needsHumanReview": True, "reopenCount": task.reopen_count},
        hint=f"a person approves it (moss task qa-approve {task.id}), reopens it (moss task status {task.id} WORKING -r …) or returns it to QA (moss task release {task.id})",
    )


def task_path(ctx: Context, task_id: str) -> str:
    """A task file's path relative to the workspace root."""
    store = board_store(ctx)
    return store.display(store.path("task", task_id))


def log(ctx: Context, project: Project, kind: str, *, task: Task | None = None, epic_id: str | None = None, worker: str | None = None, **payload: Any) -> None:
    """Append one event to the activity log (None values are left out of the payload)."""
    event = Event(
        id=f"EVT-{ctx.new_ulid()}",
        timestamp=event_time(ctx),
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
    on the file's current content (again, if a hand edit lands meanwhile). A task that
    changes hands forgets who read its context (`rules.with_holder_context`)."""
    seen: list[Task] = []

    def change(current: Task) -> Task:
        seen.append(current)
        return rules.with_holder_context(current, decide(current))

    new = board_store(ctx).update("task", task_id, change)
    return seen[-1], new


def move(ctx: Context, board: Board, task: Task, target: str, *, reason: str | None, actor: str | None, extra: Callable[[Task], Task] | None = None) -> Task:
    """Apply one state-machine move to a task's file and log it; return the task as written."""
    moment = ctx.now()
    now, now_ms = rules.format_moment(moment), rules.format_moment_ms(moment)

    def decide(current: Task) -> Task:
        moved = rules.apply_transition(current, target, now, reason=reason, now_ms=now_ms)
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
    return board.workers.get(worker_id) or _register_worker(ctx, board, worker_id, role)[0]


def _register_worker(ctx: Context, board: Board, worker_id: str, role: str | None, then: Callable[[Worker], Worker] | None = None) -> tuple[Worker, bool]:
    """Register a worker the board does not know (a new file; `then`: a change made in the same
    write); the worker, and whether its file was made here."""
    now = ctx.stamp()
    worker = Worker(id=worker_id, type=role, created=now, updated=now)
    try:
        worker = board_store(ctx).create("worker", worker, then=then)
    except Conflict:
        # Registered by hand, or unreadable: the file that is there stays as it is.
        return worker, False
    log(ctx, board.project, "WORKER_REGISTERED", worker=worker_id, type=role)
    return worker, True


# --------------------------------------------------------------------------- liveness and leases


def guard_live(board: Board, worker_id: str | None) -> None:
    """Refuse a worker whose lease expired (STALE) or who deregistered (DEAD): whatever it
    held was released and may belong to another worker now. Raises Conflict LEASE_EXPIRED."""
    if worker_id is None:
        return
    worker = board.workers.get(worker_id)
    if worker is not None and worker.status in GONE_WORKER_STATUSES:
        raise Conflict(
            f"{worker_id} is {worker.status}: its lease ended and its tasks were released; claim a task again",
            code="LEASE_EXPIRED",
            details={"workerId": worker_id, "status": worker.status, "lastHeartbeat": worker.heartbeat},
            hint="moe.claim_next_task (or moss task claim) starts a new lease",
        )


def guard(board: Board, task: Task, worker_id: str | None) -> None:
    """A worker's write on `task`: it must be live (LEASE_EXPIRED) and hold the task, unless
    nobody holds it (NOT_ALLOWED)."""
    guard_live(board, worker_id)
    guard_owner(task, worker_id)


def guard_questions(ctx: Context, task: Task, action: str) -> None:
    """Refuse work on a task while an agent's question to a human waits for its answer.
    Raises Conflict QUESTION_PENDING (details.questions)."""
    comments, _ = board_store(ctx).read_comments(task.id)
    waiting = threads.open_questions(comments)
    if waiting:
        raise Conflict(
            f"{task.id} waits for a human's answer to {len(waiting)} question(s); it cannot be {action} until then",
            code="QUESTION_PENDING",
            details={"taskId": task.id, "questions": [threads.comment_to_dict(c, 200) for c in waiting]},
            hint='a human answers with `moss task comment TASK "..."`',
        )


def question_blocked(ctx: Context) -> Callable[[Task], bool]:
    """A predicate for claims: whether a task waits for a human's answer."""
    store = board_store(ctx)
    with_comments = set(store.thread_names("comments"))

    def blocked(task: Task) -> bool:
        return task.id in with_comments and bool(threads.open_questions(store.read_comments(task.id)[0]))

    return blocked


def touch(ctx: Context, board: Board, worker_id: str | None, *, force: bool = False, epic: str | None = None, role: str | None = None) -> Board:
    """Record a sign of life: the worker's `heartbeat:` becomes now (a new worker's file, of
    type `role`, is made with it). Without `force`, a heartbeat younger than a twentieth of
    the lease is left as it is, so a busy worker does not rewrite its file on every step. A
    claim passes its task's `epic`, recorded in the same write as the worker's `last_epic`
    (claims prefer that epic next). Returns the board with the worker."""
    if worker_id is None:
        return board
    now = ctx.now()

    def beat(current: Worker) -> Worker:
        # Milliseconds: a lease of a few seconds (tests, benches) must not lose up to one to rounding.
        return replace(current, heartbeat=event_time(ctx), last_epic=epic or current.last_epic)

    worker = board.workers.get(worker_id)
    if worker is None:
        worker, made = _register_worker(ctx, board, worker_id, role, beat)
        if made:
            return replace(board, workers={**board.workers, worker_id: worker})
    lease_ms = board.project.settings.stale_worker_timeout_ms
    last = rules.parse_time(worker.heartbeat)
    if not force and last is not None and lease_ms > 0 and (now - last).total_seconds() * 1000 < lease_ms / 20:
        return board if worker_id in board.workers else replace(board, workers={**board.workers, worker_id: worker})
    worker = board_store(ctx).update("worker", worker_id, beat)
    return replace(board, workers={**board.workers, worker_id: worker})


def settle_leases(ctx: Context, board: Board) -> Board:
    """Release every task whose holder's lease has run out (call under the board lock): the task
    keeps its column and loses its holder, the holder's file says STALE, and the activity log
    and the task's chat channel say why. Returns the board as it is after."""
    now = ctx.now()
    expired = rules.expired_holds(board, now)
    if not expired:
        return board
    store = board_store(ctx)
    tasks = dict(board.tasks)
    workers = dict(board.workers)
    settings = board.project.settings
    stamp = ctx.stamp()

    for task in expired:
        holder = str(task.assigned_worker)
        try:
            worker = store.get("worker", holder)
        except MossError:
            continue  # its file went away or broke since the load: nothing to judge the lease by
        deadline = rules.lease_deadline(worker, settings)
        if deadline is None or now < deadline:
            continue  # a heartbeat landed since the load

        def release(current: Task, holder: str = holder) -> Task:
            return rules.released(current, stamp) if current.assigned_worker == holder else current

        def stale(current: Worker) -> Worker:
            return replace(current, status="STALE", updated=stamp)

        _old, new = write_task(ctx, task.id, release)
        tasks[task.id] = new
        if worker.status not in GONE_WORKER_STATUSES:
            workers[holder] = store.update("worker", holder, stale)
        details = {"lastHeartbeat": worker.heartbeat, "leaseMs": settings.stale_worker_timeout_ms, "expiredAt": rules.format_moment(deadline)}
        log(ctx, board.project, "WORKER_STALE", task=new, worker=holder, **details)
        log(ctx, board.project, "WORKER_RELEASED", task=new, worker=holder, status=new.status, reason="lease expired")
        post_system(ctx, new.id, f"@{holder}'s lease on {new.id} expired (last heartbeat {worker.heartbeat}); the task is back in {new.status}, unassigned.")
    return replace(board, tasks=tasks, workers=workers)


def post_system(ctx: Context, channel: str, content: str) -> None:
    """A system message in a channel (a task's, the general one): best effort, never fails
    the operation that posts it."""
    post = threads.Post(
        kind="message",
        id=f"MSG-{ctx.new_ulid()}",
        channel=channel,
        sender=threads.SYSTEM,
        timestamp=event_time(ctx),
        content=content,
        mentions=threads.mentions_in(content),
    )
    try:
        board_store(ctx).append_record("chat", channel, threads.post_to_record(post))
    except MossError:
        pass


def disk_state(ctx: Context) -> str | None:
    """The workspace's disk-state signature (`worktree.disk_state_signature`), or None when it
    cannot be told (no git, not a repository, git failed): unknown, never "unchanged". Runs
    git: call it outside the board lock, so a slow `git status` holds up this call alone."""
    from moss_files.foundation import gitrepo  # GitPython loads only when a signature is asked for

    try:
        status = gitrepo.worktree_status(ctx.root, exclude=worktree.TOOLKIT_FOLDERS)
    except MossError:
        return None
    return worktree.disk_state_signature(status)


def checkout_branch(ctx: Context) -> str | None:
    """The branch checked out in the workspace, or None (detached HEAD, no repository)."""
    from moss_files.foundation import gitrepo

    try:
        return gitrepo.current_branch(ctx.root)
    except MossError:
        return None


def event_time(ctx: Context) -> str:
    """Now, with milliseconds, as activity lines and chat lines stamp it."""
    return rules.format_moment_ms(ctx.now())


# --------------------------------------------------------------------------- waits in progress


@dataclass(slots=True)
class Wait:
    """One wait in progress: `wake` ends its sleep (a file changed, or it was superseded),
    `cancelled` says it was superseded; `channels` are the chat channels it listens to (None:
    the worker's own)."""

    wake: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)
    channels: frozenset[str] | None = None


class Waits:
    """The waits in progress in one server, by (kind, worker): Moe's rule that a worker's new
    wait cancels its previous one (`cancelled: true`), and what chat_who reports as waiting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits: dict[tuple[str, str], Wait] = {}

    def enter(self, kind: str, worker_id: str, wait: Wait) -> None:
        with self._lock:
            previous = self._waits.get((kind, worker_id))
            self._waits[(kind, worker_id)] = wait
        if previous is not None:
            previous.cancelled.set()
            previous.wake.set()

    def leave(self, kind: str, worker_id: str, wait: Wait) -> None:
        with self._lock:
            if self._waits.get((kind, worker_id)) is wait:
                del self._waits[(kind, worker_id)]

    def waiting(self, kind: str) -> dict[str, Wait]:
        """The workers waiting now, with their waits."""
        with self._lock:
            return {worker_id: wait for (each, worker_id), wait in self._waits.items() if each == kind}


def waits(ctx: Context) -> Waits:
    """The waits in progress under this context (one per server, one per CLI run)."""
    return ctx.resource("board.waits", Waits)

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

from moss_files.board import oversight, review, rules, shapes, worktree
from moss_files.board.leases import revive
from moss_files.board.model import CLAIMABLE, GONE_WORKER_STATUSES, Board, Project, Task, check_status, check_statuses
from moss_files.board.store import BoardStore, Head
from moss_files.board.usecase import (
    board_for_task,
    board_store,
    caller,
    disk_state,
    find_epic,
    guard,
    guard_context,
    guard_parked,
    log,
    move,
    post_system,
    question_blocked,
    settle_approvals,
    settle_leases,
    status_events,
    touch,
    with_problems,
    write_task,
)
from moss_files.foundation import arguments, fs
from moss_files.foundation.context import HUMAN, Context
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError

MAX_HANDOFFS = 20
# The context's tasks in claim order, kept between its claims (see `rules.ClaimQueue`).
QUEUE_KEY = "board.claim_queue"
# How many candidates a claim's first look ranks ahead (`store.Head`): enough for the first
# free one past those the solo-worker rule bars or a question blocks; when none of them is
# given, the claim weighs every candidate.
HEAD_COUNT = 32


@fs.folders_held()  # the heartbeat after the lock walks to the folders the claim held open
def claim_next_task(
    ctx: Context,
    *,
    statuses: Sequence[str],
    epic_id: str | None = None,
    worker_id: str | None = None,
    replace_existing: bool = False,
    prefer_adjacent_in_epic: bool = True,
    task_id: str | None = None,
) -> dict[str, Any]:
    """Moe's claim_next_task: give the worker the next task in `statuses` (see
    `rules.plan_claim` for the order, the adjacent-epic preference and the solo-worker rule),
    or with `task_id` that task only, when it is one the claim would offer; if not, the answer
    is `{hasNext: false, notClaimable: {taskId, reason}}`. Without a worker (none named, no
    MOE_WORKER_ID), shows the task it would give.

    A task released with a handoff note comes with `handoffHint`; when the note recorded the
    working tree's signature and the tree has changed since, also `staleHandoffDiskState`
    (git runs only then, after the lock is released).

    Returns `{hasNext: false, alreadyAssigned}` when the worker holds a task already. Raises
    InvalidRequest for bad statuses, NotFound for an unknown `task_id`, Conflict
    WORKER_CONFLICT under the solo-worker rule.
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
    task_id = task_id.strip() if task_id else None
    # The front of the queue: the first candidates nobody holds, in claim order (see `Head`).
    head = None
    if task_id is None and epic_id is None:
        head = Head(frozenset(wanted), HEAD_COUNT, lambda partial: rules.claim_rank(partial, worker, prefer_adjacent_in_epic))
    with store.writing():
        # First from the cache file's latest full check (`outline(bounded=True)`), which skips
        # the stat of every file, and with the front of the queue alone (`head`); a claim it
        # gives is made only once the files it rests on (the task, its dependencies, the
        # worker's own) prove unchanged and the task is one of that front, and any other
        # answer (nothing to claim, a refusal, a conflict) is given only from a look at every
        # file and every candidate.
        board = store.outline(weighed, bounded=True, head=head)
        trusted, front = store.trusting, store.front
        if trusted or front is not None:
            try:
                plan = _plan(ctx, board, wanted, worker, epic_id, replace_existing, prefer_adjacent_in_epic, task_id, front)
            except MossError:
                plan = None
            if plan is None or not _settled(store, board, plan, worker, trusted, front):
                board, trusted, front = store.outline(weighed), False, None
        board = settle_leases(ctx, board)
        if epic_id:
            find_epic(board, epic_id.strip())
        if task_id is not None and task_id not in board.tasks:
            # Not in the columns read: either unknown (NotFound) or in another column.
            asked = store.get("task", task_id)
            reason = rules.unclaimable(board, asked, wanted, worker)
            touch(ctx, board, worker)
            return with_problems({"hasNext": False, "notClaimable": {"taskId": task_id, "reason": reason}}, board.problems)
        board = settle_approvals(ctx, board)
        if worker is not None and worker in board.workers and board.workers[worker].status in GONE_WORKER_STATUSES:
            revive(ctx, worker)  # asking for work again: the worker starts over, with a new lease
            board, trusted, front = store.outline(weighed), False, None
        plan = _plan(ctx, board, wanted, worker, epic_id, replace_existing, prefer_adjacent_in_epic, task_id, front)
        if (trusted or front is not None) and not _settled(store, board, plan, worker, trusted, front):
            # The settling above changed what the claim gives: from a look at every file.
            board = settle_approvals(ctx, settle_leases(ctx, store.outline(weighed)))
            plan = _plan(ctx, board, wanted, worker, epic_id, replace_existing, prefer_adjacent_in_epic, task_id)
        if plan.already is not None:
            held = plan.already
            touch(ctx, board, worker)  # asking is a sign of life
            return with_problems({"hasNext": False, "alreadyAssigned": {"taskId": held.id, "title": held.title, "status": held.status}}, board.problems)
        if plan.task is None:
            touch(ctx, board, worker)
            if task_id is not None:
                asked = board.tasks.get(task_id) or store.get("task", task_id)
                reason = rules.unclaimable(board, asked, wanted, worker, epic_id=epic_id.strip() if epic_id else None)
                if not reason and question_blocked(ctx)(asked):
                    reason = "it waits for a person's answer to a question"
                return with_problems({"hasNext": False, "notClaimable": {"taskId": task_id, "reason": reason or "not offered"}}, board.problems)
            return with_problems({"hasNext": False}, board.problems)
        task = plan.task
        beat_after = False
        if worker is None:
            task = store.get("task", task.id)  # shown, not claimed: read in full
        else:
            # The claim starts the lease: its heartbeat is written before the task names its
            # holder (a new worker's file is made with it); or, for a worker whose file reads
            # and whose lease runs on for half a lease still, just after the lock is let go,
            # off the time the next claimer waits (a writer settling leases meanwhile finds
            # that lease running).
            known = board.workers.get(worker)
            beat_after = known is not None and rules.lease_outlasts(known, board.project.settings, ctx.now())
            if not beat_after:
                board = touch(ctx, board, worker, force=True, epic=task.epic or None, role=rules.role_for_status(task.status))
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
    if beat_after:
        board = touch(ctx, board, worker, force=True, epic=task.epic or None)
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
    result["nextAction"] = {"tool": "moe.get_context", "args": {"taskId": task.id}, "reason": "read the task's context before acting on it"}
    if task.handoffs:
        result.update(handoff_hint(ctx, task))
    return with_problems(result, board.problems)


def _plan(
    ctx: Context,
    board: Board,
    wanted: Sequence[str],
    worker: str | None,
    epic_id: str | None,
    replace_existing: bool,
    prefer_adjacent: bool,
    task_id: str | None,
    front: frozenset[str] | None = None,
) -> rules.ClaimPlan:
    return rules.plan_claim(
        board,
        wanted,
        worker,
        epic_id=epic_id.strip() if epic_id else None,
        replace_existing=replace_existing,
        blocked=question_blocked(ctx),
        prefer_adjacent=prefer_adjacent,
        task_id=task_id,
        # The kept queue follows whole boards; the front of one sorts in no time.
        queue=ctx.resource(QUEUE_KEY, rules.ClaimQueue) if front is None else None,
    )


def _settled(store: BoardStore, board: Board, plan: rules.ClaimPlan, worker: str | None, trusted: bool, front: frozenset[str] | None) -> bool:
    """Whether a plan made from a first look (the cache file's full check, the front of the
    queue) is the one a look at every file and every candidate gives: it gives a task of the
    front (every candidate ranked before it is there too: the front is the first of those
    nobody holds, and every held task is in the outline), and, from the check, the files it
    rests on are unchanged."""
    if plan.task is None or (front is not None and plan.task.id not in front):
        return False
    return not trusted or _confirmed(store, board, plan.task, worker)


def _confirmed(store: BoardStore, board: Board, task: Task, worker: str | None) -> bool:
    """Whether the files a claim planned from the cache file's full check rests on are still
    as that check (and the writes since) left them: the task, the tasks it depends on, the
    task the worker holds, if any, and the worker's and its holder's files."""
    tasks = {task.id, *task.depends_on}
    if worker is not None:
        held = board.active_task_of(worker)
        if held is not None:
            tasks.add(held.id)
    workers = {name for name in (worker, task.assigned_worker) if name}
    return store.confirm("task", tasks) and store.confirm("worker", workers)


def handoff_hint(ctx: Context, task: Task) -> dict[str, Any]:
    """`handoffHint` for a task released with handoff notes, and `staleHandoffDiskState` when
    the newest note's working tree (its `disk_state`) is not the tree there is now. Nothing
    is said when either signature cannot be told: a false alarm teaches agents to ignore it."""
    hint = f"Previous worker(s) left {len(task.handoffs)} handoff note(s): moe.get_handoff_history {{taskId: {task.id!r}}} before starting."
    stored = task.handoffs[0].get("disk_state")
    if isinstance(stored, str) and stored:
        current = disk_state(ctx)
        if current is not None and current != stored:
            return {"handoffHint": f"{hint} {worktree.STALE_HANDOFF}", "staleHandoffDiskState": True}
    return {"handoffHint": hint}


def release_task(
    ctx: Context, *, task_id: str, reason: str | None = None, handoff_note: Mapping[str, Any] | None = None, worker_id: str | None = None
) -> dict[str, Any]:
    """Let go of a held task: it keeps its status and becomes claimable by the next worker. A
    handoff note ({whatIsDone, whatRemains, pitfalls?, openQuestions?}) is kept on the task,
    newest first, for whoever claims it next (get_handoff_history), with the working tree's
    signature (`disk_state`) when git can tell it.

    A person (no worker named) releasing a REVIEW task parked for human review returns it to
    the QA queue (`unparked`)."""
    task_id = arguments.required(task_id, "taskId")
    worker = caller(ctx, worker_id)
    why = arguments.optional(reason)
    tree = disk_state(ctx) if handoff_note is not None else None  # git runs before the board lock
    unpark = worker is None and ctx.actor == HUMAN
    store = board_store(ctx)
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        guard(board, task, worker)
        now = ctx.stamp()
        note = oversight.handoff(handoff_note, by=worker or task.assigned_worker, now=now, reason=why) if handoff_note is not None else None
        if note is not None and tree is not None:
            note["disk_state"] = tree

        def decide(current: Task) -> Task:
            if current.status in ("DONE", "ARCHIVED"):
                return current  # finished work is never reopened by a release
            handoffs = ((note, *current.handoffs)[:MAX_HANDOFFS]) if note else current.handoffs
            parked = unpark and current.needs_human_review
            if not (current.assigned_worker or note or parked):
                return current
            return replace(current, assigned_worker=None, handoffs=handoffs, needs_human_review=current.needs_human_review and not parked, updated=now)

        old, new = write_task(ctx, task_id, decide)
        if old.assigned_worker and not new.assigned_worker:
            log(ctx, board.project, "WORKER_RELEASED", task=new, worker=old.assigned_worker, status=new.status, reason=why, handoffNote=bool(note))
        if old.needs_human_review and not new.needs_human_review:
            log(ctx, board.project, "TASK_UNPARKED", task=new, reason=why)
    result: dict[str, Any] = {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "releasedWorkerId": old.assigned_worker if not new.assigned_worker else None,
    }
    if old.needs_human_review and not new.needs_human_review:
        result["unparked"] = True
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
        board, task = board_for_task(ctx, task_id)
        guard(board, task, worker)
        rules.check_transition(task, target, reason=reason)
        if (task.status, target) == ("AWAITING_APPROVAL", "WORKING") and ctx.actor != HUMAN and not rules.approval_due(task, board.project.settings, ctx.now()):
            raise Conflict(
                "plans are approved by a human in CONTROL mode (moss task approve)",
                code="NOT_ALLOWED",
                status=403,
                details={"taskId": task_id, "approvalMode": board.project.settings.approval_mode},
            )
        if target != task.status:
            guard_parked(ctx, task, worker, "move")
        # A move back out of REVIEW or DONE is a reopen: a new attempt, with a fresh failed-item log.
        reopen = rules.reopened_afresh if task.status in ("REVIEW", "DONE") and target in ("WORKING", "PLANNING") else None
        new = move(ctx, board, task, target, reason=reason, actor=worker, extra=reopen) if target != task.status else task
    return {"success": True, "taskId": task_id, "status": new.status}


def qa_approve(ctx: Context, *, task_id: str, summary: str | None = None, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's qa_approve: REVIEW -> DONE. Raises INVALID_TRANSITION unless the task is in REVIEW,
    NOT_ALLOWED for a worker who does not hold it or has not read its context, or an agent
    on a task parked for a person."""
    task_id = arguments.required(task_id, "taskId")
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        if task.status != "REVIEW":
            raise Conflict("Task must be in REVIEW status to approve", code="INVALID_TRANSITION", details={"taskId": task_id, "status": task.status})
        guard(board, task, worker)
        guard_parked(ctx, task, worker, "approve")
        guard_context(task, worker, "moe.qa_approve")
        extra = (lambda t: replace(t, review_summary=summary)) if summary and summary.strip() else None
        new = move(ctx, board, task, "DONE", reason=None, actor=worker or task.assigned_worker, extra=extra)
    return {"success": True, "taskId": task_id, "status": new.status, "summary": summary, "message": f"{task_id} approved by QA and DONE."}


def qa_reject(
    ctx: Context,
    *,
    task_id: str,
    reason: str,
    failed_dod_items: Sequence[str | int] | None = None,
    issues: Sequence[Mapping[str, Any]] | None = None,
    worker_id: str | None = None,
) -> dict[str, Any]:
    """Moe's qa_reject with its bounded escalation (see `review`): back to WORKING with the
    reason, counting a reopen; to PLANNING once the count reaches `max_reopens`, or when a
    definition-of-done item in `failed_dod_items` failed in an earlier rejection of this
    attempt; past the cap, parked in REVIEW for a person (`needsHumanReview`). `issues` are
    structured findings `[{type, description, file?, line?}]`.

    Raises INVALID_TRANSITION unless the task is in REVIEW, InvalidRequest for a missing reason
    or bad items, NOT_ALLOWED for a worker who does not hold the task or has not read its
    context, or an agent on a task parked for a person.
    """
    task_id = arguments.required(task_id, "taskId")
    why = review.reason_text(reason)
    found_issues = review.read_issues(issues)
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        if task.status != "REVIEW":
            raise Conflict("Task must be in REVIEW status to reject", code="INVALID_TRANSITION", details={"taskId": task_id, "status": task.status})
        guard(board, task, worker)
        guard_parked(ctx, task, worker, "reject")
        guard_context(task, worker, "moe.qa_reject")
        failed = review.failed_items(failed_dod_items, task.definition_of_done)
        actor = worker or task.assigned_worker
        settings = board.project.settings
        now = ctx.stamp()
        decisions: list[review.Rejection] = []

        def decide(current: Task) -> Task:
            if current.status != "REVIEW":
                raise Conflict("Task must be in REVIEW status to reject", code="INVALID_TRANSITION", details={"taskId": task_id, "status": current.status})
            decision = review.decide(current, settings, reason=why, failed=failed, issues=found_issues, now=now)
            decisions.append(decision)
            return review.rejected(current, decision, failed, by=actor or HUMAN, now=now)

        old, new = write_task(ctx, task_id, decide)
        decision = decisions[-1]
        _rejection_events(ctx, board.project, old, new, decision, actor)
    result: dict[str, Any] = {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "reopenCount": new.reopen_count,
        "maxReopens": decision.max_reopens,
        "reason": why,
        "escalated": decision.escalation is not None,
        "exceededReopenCap": decision.soft_cap or decision.parked,
        "parkedForHuman": decision.parked,
        "needsHumanReview": new.needs_human_review,
        "rejectionDetails": review.rejection_details(new),
        "rejectionHistory": [review.history_to_dict(entry) for entry in new.rejection_history],
        "failedDodItems": [review.failed_item_to_dict(entry) for entry in new.failed_dod_items],
        "message": _rejection_message(task_id, new, decision, why),
    }
    if decision.repeated_item is not None:
        result["repeatedFailedDodItem"] = decision.repeated_item
    return result


def _rejection_events(ctx: Context, project: Project, old: Task, new: Task, decision: review.Rejection, actor: str | None) -> None:
    """The activity lines and chat posts of a rejection: the move (or the park), and why it
    escalated, where the architects (and, for a park, the governors) see it."""
    if decision.parked:
        log(ctx, project, "QA_REJECTED", task=new, worker=actor, reason=decision.entry["reason"])
        log(ctx, project, "TASK_REOPENED", task=new, worker=actor, reopenCount=new.reopen_count, reason=decision.entry["reason"])
        if old.assigned_worker:
            log(ctx, project, "WORKER_RELEASED", task=new, worker=old.assigned_worker, status=new.status)
    else:
        status_events(ctx, project, old, new, actor, decision.entry["reason"])
    if decision.escalation is None:
        return
    target = "REVIEW (parked for a person)" if decision.parked else decision.target
    log(
        ctx,
        project,
        "QA_ESCALATED",
        task=new,
        worker=actor,
        to=target,
        why=decision.escalation,
        reopenCount=new.reopen_count,
        maxReopens=decision.max_reopens,
        repeatedFailedDodItem=decision.repeated_item,
    )
    recent = " | ".join(f"[#{entry.get('reopen_count')}] {str(entry.get('reason'))[:80]}" for entry in new.rejection_history[:3])
    if decision.parked:
        text = (
            f"HUMAN REVIEW NEEDED: {new.id} was rejected {new.reopen_count} times (max {decision.max_reopens}), after a re-plan too. "
            f"It waits in REVIEW, unassigned and out of the QA queue, until a person approves, reopens or releases it. Latest: {recent}"
        )
        post_system(ctx, "governors", text)
        post_system(ctx, "architects", text)
    else:
        post_system(ctx, "architects", f"{new.id} is back in PLANNING ({decision.escalation}): re-plan it. Latest: {recent}")


def _rejection_message(task_id: str, new: Task, decision: review.Rejection, why: str) -> str:
    if decision.parked:
        return (
            f"{task_id} rejected and parked in REVIEW for a person: its reopen budget ({new.reopen_count}/{decision.max_reopens}) "
            "and the re-plan are spent. A person approves, reopens or releases it; it is out of the QA queue until then."
        )
    if decision.escalation is not None:
        return f"{task_id} rejected and back in PLANNING ({decision.escalation}): the plan needs rework."
    return f"{task_id} back to WORKING; fix: {why}"

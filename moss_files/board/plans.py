"""Board use cases of planning and working a task: its context, the plan (submit, check,
approve, reject), steps, completion, blocks, and rail proposals.

Shell layer: each function takes a Context and typed keyword arguments and returns the JSON
result the `moe.*` tool returns and `moss task … --json` prints. Errors name arguments as Moe's
tools spell them (`taskId is required`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from moss_files.board import evidence, oversight, rules, shapes, threads, worktree
from moss_files.board.editing import init_board
from moss_files.board.model import (
    GONE_WORKER_STATUSES,
    PROPOSAL_SCOPES,
    PROPOSAL_STATUSES,
    PROPOSAL_TYPES,
    Board,
    Proposal,
    Step,
    Task,
    check_choice,
    check_name,
)
from moss_files.board.store import BoardStore
from moss_files.board.usecase import (
    board_for_task,
    board_store,
    caller,
    checkout_branch,
    ensure_worker,
    find_task,
    find_worker,
    guard,
    guard_context,
    guard_questions,
    log,
    move,
    post_system,
    settle_approvals,
    status_events,
    task_on_file,
    touch,
    with_problems,
    write_task,
)
from moss_files.foundation import arguments, fs
from moss_files.foundation.context import HUMAN, Context
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, NotFound

# --------------------------------------------------------------------------- context and plans


def get_context(
    ctx: Context, *, task_id: str | None = None, worker_id: str | None = None, comments_limit: int | None = None, comments_max_chars: int | None = None
) -> dict[str, Any]:
    """Moe's get_context: the project, epic, task, worker and all rails for a task, with the
    task's newest comments (`commentsLimit`, default 10; each cut to `commentsMaxChars`, default
    1000, 0 for all), the human comments it should answer (`pendingQuestions`) and its own
    questions still waiting for a human (`openQuestions`).

    The task is `task_id`, else the context's default task (MOE_TASK_ID), else the task held
    by `worker_id` (or MOE_WORKER_ID). When that worker holds the task, the task records that it
    read the context (`context_fetched_by`, Moe's contextFetchedBy), which start_step and the QA
    verdicts require; the first such read writes that one line, later ones write nothing.
    Raises NotFound for a task id that does not exist.
    """
    limit = arguments.count(comments_limit, "commentsLimit", default=10, maximum=200, minimum=0)
    max_chars = arguments.count(comments_max_chars, "commentsMaxChars", default=1000, minimum=0)
    store = board_store(ctx)
    # The workers and the tasks they hold (a worker's status), every file checked for problems;
    # the task itself in full from its file: not every task of the board (issue 29). One look
    # when the task is named: the record's, under the lock, when the holder reads it first.
    board: Board | None = None
    worker = caller(ctx, worker_id)
    wanted = task_id or ctx.task_id
    task: Task | None = None
    if wanted:
        task = task_on_file(ctx, wanted.strip())
    elif worker:
        board = store.outline(())
        held = board.active_task_of(worker)
        task = task_on_file(ctx, held.id) if held is not None else None
    if task is not None and worker is not None and task.assigned_worker == worker and worker not in task.context_fetched_by:
        board, recorded = _record_context(ctx, task.id, worker)
        task = recorded or task
    if board is None:
        board = store.outline(())
    epic = board.epics.get(task.epic) if task else None
    shown = None
    if worker and worker in board.workers:
        found = shapes.worker_to_dict(board, board.workers[worker])
        shown = {key: found[key] for key in ("id", "type", "status", "currentTaskId", "teamIds", "blockedReason", "lastHeartbeat", "leaseExpiresAt")}
    result: dict[str, Any] = {
        "project": shapes.project_to_dict(board.project),
        "epic": shapes.epic_context(epic) if epic else None,
        "task": shapes.task_for_agent(task) if task else None,
        "worker": shown,
        "allRails": rules.all_rails(board.project, epic, task),
    }
    problems = list(board.problems)
    if task is not None:
        comments, trouble = store.read_comments(task.id)
        problems.extend(trouble)
        ordered = threads.in_time_order(comments)
        result["comments"] = [threads.comment_to_dict(c, max_chars) for c in ordered[len(ordered) - limit :]] if limit else []
        result["totalComments"] = len(ordered)
        result["pendingQuestions"] = [threads.comment_to_dict(c, max_chars) for c in threads.questions_for_agents(ordered)]
        result["openQuestions"] = [threads.comment_to_dict(c, max_chars) for c in threads.open_questions(ordered)]
        result["budget"] = oversight.budget_state(task, ctx.now())
    return with_problems(result, problems)


def _record_context(ctx: Context, task_id: str, worker: str) -> tuple[Board, Task | None]:
    """Record that `worker`, the task's holder, read its context. Returns the board this look
    under the lock gave (`board_for_task`'s) and the task as written, or None when the worker
    no longer holds it (its lease ran out, it was released meanwhile)."""
    store = board_store(ctx)
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        if task.assigned_worker != worker or (board.workers.get(worker) and board.workers[worker].status in GONE_WORKER_STATUSES):
            return board, None

        def decide(current: Task) -> Task:
            if current.assigned_worker != worker or worker in current.context_fetched_by:
                return current
            return replace(current, context_fetched_by=(*current.context_fetched_by, worker))

        _old, new = write_task(ctx, task_id, decide)
    return board, new


def submit_plan(ctx: Context, *, task_id: str, steps: Sequence[str | Mapping[str, Any]], worker_id: str | None = None) -> dict[str, Any]:
    """Moe's submit_plan: store the plan's steps and move the task to AWAITING_APPROVAL
    (straight on to WORKING in TURBO mode).

    The gates, in Moe's order, each leaving the task file as it was: the plan's shape
    (`rules.parse_steps`), the rails, its size (`rules.assess_plan_size`: warnings past the
    warn thresholds come back in `warnings` and stay on the task as `plan_size_warnings`), and
    that every affected file exists under the project root unless some step declares it in
    `newFiles` (not checked when the root cannot be read).

    Raises RAIL_VIOLATION (details.violations) when the plan uses a forbidden pattern or lacks
    a required one, PLAN_TOO_LARGE past a max threshold, INVALID_REQUEST (details.missingPaths)
    for affected files that are not there, INVALID_TRANSITION unless the task is PLANNING (or
    re-submitting while AWAITING_APPROVAL), NOT_ALLOWED for a worker who does not hold the task.
    """
    task_id = arguments.required(task_id, "taskId")
    plan = rules.parse_steps(steps)
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        guard(board, task, worker)
        guard_questions(ctx, task, "planned")
        violations = rules.check_rails(board.project.global_rails, plan)
        if violations:
            log(ctx, board.project, "RAIL_VIOLATION", task=task, worker=worker, violations=[v.pattern for v in violations])
            raise rules.rail_error(violations, actor=ctx.actor)
        size = rules.assess_plan_size(plan, board.project.settings.task_sizing)
        if size.too_large:
            raise rules.plan_too_large(task_id, size, actor=ctx.actor)
        missing = fs.missing_paths(ctx.root, rules.paths_to_check(plan))
        if missing:
            raise rules.missing_paths_error(task_id, missing, str(ctx.root))
        moment = ctx.now()
        now, now_ms = rules.format_moment(moment), rules.format_moment_ms(moment)

        def decide(current: Task) -> Task:
            if current.status not in ("PLANNING", "AWAITING_APPROVAL"):
                raise Conflict(
                    f"a plan is submitted for a PLANNING task; {current.id} is {current.status}",
                    code="INVALID_TRANSITION",
                    details={"taskId": current.id, "from": current.status, "to": "AWAITING_APPROVAL"},
                )
            guard(board, current, worker)
            # A new plan is a new attempt: the same-item rule of qa_reject starts over.
            with_plan = replace(current, plan=plan, plan_size_warnings=size.warnings, failed_dod_items=(), updated=now)
            if current.status == "AWAITING_APPROVAL":
                return replace(with_plan, plan_submitted=now_ms)
            return rules.apply_transition(with_plan, "AWAITING_APPROVAL", now, now_ms=now_ms)

        old, new = write_task(ctx, task_id, decide)
        if old.status == new.status:
            log(ctx, board.project, "PLAN_SUBMITTED", task=new, worker=worker, stepCount=len(plan), resubmitted=True)
        status_events(ctx, board.project, old, new, worker, None)
        board = settle_approvals(ctx, replace(board, tasks={**board.tasks, task_id: new}), only=task_id)
        new = board.tasks[task_id]
        touch(ctx, board, worker)
    approved = new.status == "WORKING"
    result: dict[str, Any] = {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "stepCount": len(plan),
        "distinctFileCount": size.distinct_files,
        "newFileCount": size.new_files,
        "message": f"Plan approved automatically ({board.project.settings.approval_mode} mode)."
        if approved
        else f"Plan submitted; waiting for approval ({board.project.settings.approval_mode} mode).",
    }
    if size.warnings:
        result["warnings"] = list(size.warnings)
    return result


def check_approval(ctx: Context, *, task_id: str) -> dict[str, Any]:
    """Moe's check_approval: whether the task's plan was approved, or rejected (and why)."""
    task_id = arguments.required(task_id, "taskId")
    store = board_store(ctx)
    # An agent polls this while a human decides: the project's settings and the task's own
    # file, not every task of the board (issue 29).
    project = store.people().project  # as a load gives it: the defaults when project.md does not read
    task = task_on_file(ctx, task_id)
    if rules.approval_due(task, project.settings, ctx.now()):
        with store.writing():
            people = store.people()
            board = settle_approvals(ctx, replace(people, tasks={task_id: task_on_file(ctx, task_id)}), only=task_id)
            task = board.tasks[task_id]
    result: dict[str, Any] = {
        "taskId": task_id,
        "approved": task.status in ("WORKING", "REVIEW", "DONE"),
        "status": task.status,
    }
    if task.status == "PLANNING" and task.reopen_reason:
        result["rejected"] = True
        result["rejectionReason"] = task.reopen_reason
    return result


def approve_plan(ctx: Context, *, task_id: str) -> dict[str, Any]:
    """A human approves a waiting plan (AWAITING_APPROVAL -> WORKING, the task becomes
    claimable by workers), or, on a task whose plan runs already, the step amendments waiting
    for approval. Raises NOT_ALLOWED for an agent, INVALID_TRANSITION when nothing waits."""
    return _decide(ctx, task_id=task_id, verdict="APPROVED", reason=None)


def reject_plan(ctx: Context, *, task_id: str, reason: str) -> dict[str, Any]:
    """A human rejects a waiting plan (back to PLANNING with the reason, for the same
    architect), or the step amendments waiting for approval (the steps keep their instructions)."""
    return _decide(ctx, task_id=task_id, verdict="REJECTED", reason=arguments.required(reason, "reason"))


def _decide(ctx: Context, *, task_id: str, verdict: str, reason: str | None) -> dict[str, Any]:
    task_id = arguments.required(task_id, "taskId")
    if ctx.actor != HUMAN:
        raise Conflict("plans are approved by a human (moss task approve)", code="NOT_ALLOWED", status=403, details={"taskId": task_id})
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        task = find_task(board, task_id)
        if task.status == "AWAITING_APPROVAL":
            target = "WORKING" if verdict == "APPROVED" else "PLANNING"
            new = move(ctx, board, task, target, reason=reason, actor=None)
            result: dict[str, Any] = {"success": True, "taskId": task_id, "status": new.status}
            if reason:
                result["reason"] = reason
            return result
        waiting = oversight.pending_amendments(task)
        if not waiting:
            raise Conflict(
                f"task {task_id} is {task.status}, not AWAITING_APPROVAL, and no amendment waits for approval",
                code="INVALID_TRANSITION",
                details={"taskId": task_id, "from": task.status, "to": "WORKING" if verdict == "APPROVED" else "PLANNING"},
            )
        now = ctx.stamp()
        _old, new = write_task(ctx, task_id, lambda t: oversight.resolve_amendments(t, verdict, by="HUMAN", now=now))
        for step_id, amendment in waiting:
            log(ctx, board.project, f"AMENDMENT_{verdict}", task=new, stepId=step_id, amendmentId=amendment.get("id"), reason=reason)
        mention = f"@{new.assigned_worker} " if new.assigned_worker else ""
        post_system(ctx, new.id, f"{mention}amendment(s) of {', '.join(s for s, _ in waiting)} {verdict.lower()}" + (f": {reason}" if reason else "."))
    return {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "amendments": [{"stepId": step_id, "amendmentId": a.get("id"), "status": verdict} for step_id, a in waiting],
    }


# --------------------------------------------------------------------------- steps and completion


def _find_step(task: Task, step_id: str) -> int:
    for index, step in enumerate(task.plan):
        if step.id == step_id:
            return index
    raise NotFound(f"Step not found: {step_id} (task {task.id})", details={"taskId": task.id, "stepId": step_id})


def _require_working(task: Task, action: str) -> None:
    if task.status != "WORKING":
        hint = "wait for the plan's approval (moe.check_approval)" if task.status == "AWAITING_APPROVAL" else None
        raise Conflict(
            f"steps are {action} on a WORKING task; {task.id} is {task.status}",
            code="INVALID_TRANSITION",
            details={"taskId": task.id, "status": task.status},
            hint=hint,
        )


def _require_no_amendment(task: Task, step: Step) -> None:
    waiting = oversight.pending_amendment(step)
    if waiting is not None:
        raise Conflict(
            f"step {step.id} of {task.id} has amendment {waiting.get('id')} waiting for a human's approval",
            code="AMENDMENT_PENDING",
            details={"taskId": task.id, "stepId": step.id, "amendmentId": waiting.get("id")},
            hint="a human approves it with `moss task approve TASK` (or rejects it with `moss task reject-plan`)",
        )


def start_step(ctx: Context, *, task_id: str, step_id: str, worker_id: str | None = None) -> dict[str, Any]:
    """Moe's start_step: mark a plan step IN_PROGRESS on a WORKING task.

    Raises NotFound for the task or step, INVALID_TRANSITION for a task not WORKING or a step
    already completed, NOT_ALLOWED for a worker who does not hold the task or has not read its
    context (get_context) since claiming it, LEASE_EXPIRED for one whose lease ran out,
    QUESTION_PENDING and AMENDMENT_PENDING while a human's answer or approval is awaited.
    """
    task_id = arguments.required(task_id, "taskId")
    step_id = arguments.required(step_id, "stepId")
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        board = settle_approvals(ctx, board, only=task_id)
        task = board.tasks[task_id]
        guard(board, task, worker)
        guard_questions(ctx, task, "worked on")
        now = ctx.stamp()

        def decide(current: Task) -> Task:
            guard(board, current, worker)
            _require_working(current, "started")
            guard_context(current, worker, "moe.start_step")
            index = _find_step(current, step_id)
            step = current.plan[index]
            if step.status == "COMPLETED":
                raise Conflict(
                    f"step {step_id} is completed already", code="INVALID_TRANSITION", details={"taskId": current.id, "stepId": step_id, "status": step.status}
                )
            _require_no_amendment(current, step)
            started = replace(step, status="IN_PROGRESS", started=step.started or now)
            plan = (*current.plan[:index], started, *current.plan[index + 1 :])
            return replace(current, plan=plan, updated=now) if started != step else current

        old, new = write_task(ctx, task_id, decide)
        index = _find_step(new, step_id)
        if old.plan[index].status != "IN_PROGRESS":
            log(ctx, board.project, "STEP_STARTED", task=new, worker=worker or new.assigned_worker, stepId=step_id)
        touch(ctx, board, worker)
    step = new.plan[index]
    return {
        "success": True,
        "taskId": task_id,
        "stepId": step_id,
        "stepNumber": index + 1,
        "totalSteps": len(new.plan),
        "description": oversight.effective_description(step),
    }


def complete_step(
    ctx: Context,
    *,
    task_id: str,
    step_id: str,
    modified_files: Sequence[str] | None = None,
    note: str | None = None,
    verification: Mapping[str, Any] | None = None,
    worker_id: str | None = None,
) -> dict[str, Any]:
    """Moe's complete_step: mark a step COMPLETED (with the files it changed, a note, and the
    evidence that it works) and report progress and the next step. Completing a completed step
    changes nothing. Raises VERIFICATION_FAILED when the evidence reports a failed command or
    test; the guards of start_step apply."""
    task_id = arguments.required(task_id, "taskId")
    step_id = arguments.required(step_id, "stepId")
    files = tuple(dict.fromkeys(rules.check_project_path(f) for f in (arguments.texts(modified_files) or ())))
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        guard(board, task, worker)
        guard_questions(ctx, task, "worked on")
        now = ctx.stamp()
        reported = evidence.read_verification(verification, now)
        failed = evidence.failures(reported)
        if failed:
            raise evidence.verification_error(task_id, {"failures": failed}, step_id=step_id)
        touched = tuple(reported.get("files_touched", ())) if reported else ()

        def decide(current: Task) -> Task:
            guard(board, current, worker)
            _require_working(current, "completed")
            index = _find_step(current, step_id)
            step = current.plan[index]
            if step.status == "COMPLETED":
                return current
            _require_no_amendment(current, step)
            done = replace(
                step,
                status="COMPLETED",
                started=step.started or now,
                completed=now,
                modified_files=tuple(dict.fromkeys((*step.modified_files, *files, *touched))),
                note=note if note and note.strip() else step.note,
                verification=reported or step.verification,
            )
            return replace(current, plan=(*current.plan[:index], done, *current.plan[index + 1 :]), updated=now)

        old, new = write_task(ctx, task_id, decide)
        if old.plan[_find_step(old, step_id)].status != "COMPLETED":
            log(
                ctx,
                board.project,
                "STEP_COMPLETED",
                task=new,
                worker=worker or new.assigned_worker,
                stepId=step_id,
                modifiedFiles=list(files + touched) or None,
                verified=bool(reported) or None,
            )
        touch(ctx, board, worker)
    completed = sum(1 for step in new.plan if step.status == "COMPLETED")
    total = len(new.plan)
    following = next((step for step in new.plan if step.status != "COMPLETED"), None)
    this = new.plan[_find_step(new, step_id)]
    return {
        "success": True,
        "taskId": task_id,
        "stepId": step_id,
        "description": oversight.effective_description(this),
        "progress": {"completed": completed, "total": total, "percentage": round(100 * completed / total) if total else 100},
        "nextStep": {"stepId": following.id, "description": oversight.effective_description(following)} if following else None,
    }


def complete_task(
    ctx: Context,
    *,
    task_id: str,
    pr_link: str | None = None,
    summary: str | None = None,
    verification: Mapping[str, Any] | None = None,
    current_branch: str | None = None,
    worker_id: str | None = None,
) -> dict[str, Any]:
    """Moe's complete_task: WORKING -> REVIEW once every step is completed and the evidence
    (this call's and the steps') covers the definition of done; the task leaves its worker and
    waits for QA.

    With a branch policy (project.md `consolidation_branch`), the branch the work was done on
    must match it: `current_branch` as the caller reports it, else the branch checked out in
    the workspace. The answer's `branchPolicy` says what was checked; a branch that cannot be
    told is let through with a warning (also posted to #governors).

    Raises INVALID_TRANSITION (details.pendingSteps) with steps left, VERIFICATION_FAILED
    (details: failures, missingDod, testFileNotRun, missing) when the evidence falls short,
    BRANCH_POLICY_FAILED on a branch the policy does not allow, and the guards of start_step."""
    task_id = arguments.required(task_id, "taskId")
    link = arguments.optional(pr_link)
    work_summary = summary if summary and summary.strip() else None
    reported_branch = arguments.optional(current_branch)
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    checkout = None
    if reported_branch is None and _branch_policy(store) is not None:
        checkout = checkout_branch(ctx)  # git runs here, before the board lock is taken
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        guard(board, task, worker)
        if task.status != "WORKING":
            raise Conflict(
                f"only a WORKING task is completed; {task_id} is {task.status}",
                code="INVALID_TRANSITION",
                details={"taskId": task_id, "from": task.status, "to": "REVIEW"},
            )
        guard_questions(ctx, task, "completed")
        rules.check_transition(task, "REVIEW")
        now = ctx.stamp()
        reported = evidence.read_verification(verification, now)
        problems = evidence.completion_problems(task, reported, required=board.project.settings.require_verification)
        if problems:
            raise evidence.verification_error(task_id, problems)
        branch = worktree.check_branch(board.project.settings.consolidation_branch, reported_branch, checkout)
        if branch is not None and branch.matched is False:
            raise worktree.branch_error(task_id, branch)

        def extra(moved: Task) -> Task:
            return replace(moved, pr_link=link or moved.pr_link, work_summary=work_summary or moved.work_summary, verification=reported or moved.verification)

        new = move(ctx, board, task, "REVIEW", reason=None, actor=worker or task.assigned_worker, extra=extra)
        if link:
            log(ctx, board.project, "PR_OPENED", task=new, worker=worker or task.assigned_worker, prLink=link)
        if branch is not None and branch.matched is None:
            post_system(ctx, "governors", f"Branch policy not enforced on {task_id}: its branch could not be told (expected {branch.pattern!r}).")
        touch(ctx, board, worker)
    files = {path for step in new.plan for path in step.modified_files} | set((reported or {}).get("files_touched", ()))
    started, ended = rules.parse_time(new.work_started), rules.parse_time(new.review_started)
    duration = int((ended - started).total_seconds() * 1000) if started and ended else None
    result: dict[str, Any] = {
        "success": True,
        "taskId": task_id,
        "status": new.status,
        "stats": {"stepsCompleted": sum(1 for s in new.plan if s.status == "COMPLETED"), "filesModified": len(files), "duration": duration},
        "verified": bool(reported) or any(step.verification for step in new.plan),
    }
    if branch is not None:
        result["branchPolicy"] = worktree.branch_check_to_dict(branch)
    return result


def _branch_policy(store: BoardStore) -> str | None:
    """The project's branch policy as the settings read now (None without one, or when
    project.md cannot be read: the locked read then reports that)."""
    try:
        return store.read_project().settings.consolidation_branch
    except MossError:
        return None


# --------------------------------------------------------------------------- blocks


def report_blocked(
    ctx: Context, *, task_id: str, reason: str, needs_from: str | None = None, current_step_id: str | None = None, worker_id: str | None = None
) -> dict[str, Any]:
    """Moe's report_blocked: mark the task's worker BLOCKED with the reason (the task keeps its
    status and holder). Raises InvalidRequest when the task has no worker and none is named."""
    task_id = arguments.required(task_id, "taskId")
    why = arguments.required(reason, "reason")
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board, task = board_for_task(ctx, task_id)
        guard(board, task, worker)
        blocked = task.assigned_worker or worker
        if blocked is None:
            raise InvalidRequest(f"task {task_id} has no assigned worker; pass workerId", details={"field": "workerId"})
        if current_step_id:
            _find_step(task, current_step_id)
        ensure_worker(ctx, board, blocked, rules.role_for_status(task.status))
        now = ctx.stamp()
        store.update(
            "worker",
            blocked,
            lambda w: replace(
                w,
                status="BLOCKED",
                blocked_reason=why,
                needs_from=needs_from,
                blocked_task=task_id,
                blocked_step=current_step_id,
                blocked_since=now,
                updated=now,
            ),
        )
        log(ctx, board.project, "WORKER_BLOCKED", task=task, worker=blocked, reason=why, needsFrom=needs_from, stepId=current_step_id)
    return {
        "success": True,
        "taskId": task_id,
        "status": "BLOCKED",
        "workerId": blocked,
        "message": f"{blocked} is blocked on {task_id}" + (f"; needs {needs_from}" if needs_from else "") + ".",
    }


def unblock_worker(ctx: Context, *, worker_id: str, resolution: str, retry_task: bool = False) -> dict[str, Any]:
    """Moe's unblock_worker: clear a worker's BLOCKED status. Without `retry_task` the worker
    also lets go of its task, which becomes claimable again.

    Raises NotFound (`Worker not found`), INVALID_TRANSITION when the worker is not BLOCKED.
    """
    worker_id = check_name(worker_id, "workerId")
    resolved = arguments.required(resolution, "resolution")
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        worker = find_worker(board, worker_id)
        if worker.status != "BLOCKED":
            raise Conflict(
                "Worker must be in BLOCKED status", code="INVALID_TRANSITION", details={"workerId": worker_id, "status": rules.worker_status(board, worker)}
            )
        now = ctx.stamp()
        store.update(
            "worker",
            worker_id,
            lambda w: replace(w, status=None, blocked_reason=None, needs_from=None, blocked_task=None, blocked_step=None, blocked_since=None, updated=now),
        )
        held = board.active_task_of(worker_id)
        if held is not None and not retry_task:
            old, new = write_task(ctx, held.id, lambda t: replace(t, assigned_worker=None, updated=now) if t.assigned_worker == worker_id else t)
            if old.assigned_worker and not new.assigned_worker:
                log(ctx, board.project, "WORKER_RELEASED", task=new, worker=worker_id, status=new.status)
        log(ctx, board.project, "WORKER_UNBLOCKED", worker=worker_id, resolution=resolved, retryTask=retry_task, task=held if held else None)
        board = store.load()
    current = board.active_task_of(worker_id)
    return {
        "success": True,
        "workerId": worker_id,
        "status": rules.worker_status(board, board.workers[worker_id]) if worker_id in board.workers else "IDLE",
        "currentTaskId": current.id if current else None,
        "resolution": resolved,
        "retryTask": retry_task,
        "message": f"{worker_id} is unblocked" + (f" and keeps {current.id}." if current else "."),
    }


# --------------------------------------------------------------------------- rail proposals


def propose_rail(
    ctx: Context,
    *,
    task_id: str,
    proposal_type: str,
    target_scope: str,
    proposed_value: str,
    reason: str,
    current_value: str | None = None,
    rail_list: str | None = None,
    worker_id: str | None = None,
) -> dict[str, Any]:
    """Moe's propose_rail: store a rail change proposal (a file under proposals/) for review.
    `rail_list` names the global list a GLOBAL proposal changes (custom_rules by default)."""
    task_id = arguments.required(task_id, "taskId")
    kind = check_choice(proposal_type, PROPOSAL_TYPES, "proposalType")
    scope = check_choice(target_scope, PROPOSAL_SCOPES, "targetScope")
    proposed = arguments.required(proposed_value, "proposedValue")
    why = arguments.required(reason, "reason")
    wanted_list = _rail_list(rail_list) if rail_list is not None else None
    if wanted_list is not None and scope != "GLOBAL":
        raise InvalidRequest("railList names a list of the global rails; it goes with targetScope GLOBAL", details={"field": "railList"})
    worker = caller(ctx, worker_id)
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        task = find_task(board, task_id)
        now = ctx.stamp()
        proposal = Proposal(
            id=ctx.new_id("PROP"),
            task=task_id,
            worker=worker or task.assigned_worker,
            proposal_type=kind,
            target_scope=scope,
            current_value=arguments.optional(current_value),
            proposed_value=proposed,
            rail_list=wanted_list,
            reason=why,
            created=now,
        )
        store.create("proposal", proposal)
        log(ctx, board.project, "PROPOSAL_CREATED", task=task, worker=proposal.worker, proposalId=proposal.id, proposalType=kind, targetScope=scope)
    return {
        "success": True,
        "proposalId": proposal.id,
        "status": "PENDING",
        "message": f"Rail proposal {proposal.id} stored for review ({store.display(store.path('proposal', proposal.id))}).",
    }


def _rail_list(value: str) -> str:
    word = value.strip()
    snake = {"customRules": "custom_rules", "forbiddenPatterns": "forbidden_patterns", "requiredPatterns": "required_patterns", "techStack": "tech_stack"}
    found = snake.get(word, word.lower())
    if found not in oversight.GLOBAL_LISTS:
        raise InvalidRequest(f"railList must be one of {', '.join(oversight.GLOBAL_LISTS)}", details={"field": "railList"})
    return found


def list_proposals(ctx: Context, *, status: str | None = None) -> dict[str, Any]:
    """Rail proposals, newest first, optionally only those with one status."""
    wanted = check_choice(status, PROPOSAL_STATUSES, "status") if status is not None else None
    items, problems = board_store(ctx).load_kind("proposal")
    found = [p for p in items.values() if wanted is None or p.status == wanted]
    found.sort(key=lambda p: (p.created or "", p.id), reverse=True)
    return with_problems({"proposals": [shapes.proposal_to_dict(p) for p in found], "count": len(found)}, problems)


def resolve_proposal(ctx: Context, *, proposal_id: str, decision: str) -> dict[str, Any]:
    """A human approves or rejects a pending rail proposal. An approval applies it: the rail is
    added to, changed in or removed from the task's rails (TASK), its epic's (EPIC) or one list
    of project.md's global rails (GLOBAL), and the activity log records the change
    (RAILS_UPDATED) beside the verdict.

    Raises NOT_ALLOWED for an agent, INVALID_TRANSITION for a proposal resolved already,
    RAIL_NOT_FOUND when the rail to modify or remove is not there (nothing is written).
    """
    proposal_id = check_name(proposal_id, "proposalId")
    verdict = check_choice(decision, ("APPROVED", "REJECTED"), "decision")
    if ctx.actor != HUMAN:
        raise Conflict("rail proposals are resolved by a human", code="NOT_ALLOWED", status=403)
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        proposal = store.get("proposal", proposal_id)
        if proposal.status != "PENDING":
            raise Conflict(
                f"proposal {proposal_id} is {proposal.status} already",
                code="INVALID_TRANSITION",
                details={"proposalId": proposal_id, "status": proposal.status},
            )
        now = ctx.stamp()
        applied = _apply_proposal(ctx, board, proposal) if verdict == "APPROVED" else None
        proposal = store.update("proposal", proposal_id, lambda p: replace(p, status=verdict, resolved_by="HUMAN", resolved=now))
        task = board.tasks.get(proposal.task or "")
        log(ctx, board.project, f"PROPOSAL_{verdict}", worker=proposal.worker, proposalId=proposal_id, task=task)
        if applied is not None:
            log(
                ctx,
                board.project,
                "RAILS_UPDATED",
                task=task,
                epic_id=applied["epicId"],
                proposalId=proposal_id,
                **{k: v for k, v in applied.items() if k != "epicId"},
            )
    return {"success": True, "proposal": shapes.proposal_to_dict(proposal), "applied": applied}


def _apply_proposal(ctx: Context, board: Any, proposal: Proposal) -> dict[str, Any]:
    """Write the rail change an approved proposal asks for; what changed, for the log."""
    store = board_store(ctx)
    task = board.tasks.get(proposal.task or "")
    change = {"proposalType": proposal.proposal_type, "currentValue": proposal.current_value, "proposedValue": proposal.proposed_value}
    if proposal.target_scope == "GLOBAL":
        rails = board.project.global_rails
        name = oversight.global_list_for(rails, proposal.proposal_type, proposal.current_value, proposal.rail_list)
        before = tuple(getattr(rails, name))
        after = oversight.change_rails(before, proposal.proposal_type, proposal.current_value, proposal.proposed_value)
        if not store.project_path.exists():
            init_board(ctx, locked=True)
        store.set_global_rails(name, after)
        return {"scope": "GLOBAL", "target": board.project.id, "list": name, "before": list(before), "after": list(after), "epicId": None, **change}
    if task is None:
        raise NotFound(f"Task not found: {proposal.task} (the proposal's task)", details={"proposalId": proposal.id, "taskId": proposal.task})
    if proposal.target_scope == "EPIC":
        epic = board.epics.get(task.epic)
        if epic is None:
            raise NotFound(f"Epic not found: {task.epic} (the proposal's task's epic)", details={"proposalId": proposal.id, "epicId": task.epic})
        after = oversight.change_rails(epic.epic_rails, proposal.proposal_type, proposal.current_value, proposal.proposed_value)
        now = ctx.stamp()
        store.update("epic", epic.id, lambda e: replace(e, epic_rails=after, updated=now))
        return {"scope": "EPIC", "target": epic.id, "list": "epic_rails", "before": list(epic.epic_rails), "after": list(after), "epicId": epic.id, **change}
    after = oversight.change_rails(task.task_rails, proposal.proposal_type, proposal.current_value, proposal.proposed_value)
    now = ctx.stamp()
    write_task(ctx, task.id, lambda t: replace(t, task_rails=after, updated=now))
    return {
        "scope": "TASK",
        "target": task.id,
        "list": "task_rails",
        "before": list(task.task_rails),
        "after": list(after),
        "epicId": task.epic or None,
        **change,
    }

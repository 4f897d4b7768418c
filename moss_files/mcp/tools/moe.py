"""The `moe` tool set: Moe's board tools (`moe.get_context` … `moe.chat_send` … `moe.list_metrics`)
as MCP tools. Entry layer: each tool maps Moe's camelCase arguments once onto a board use case's
parameters (`moss_files.board.operations.OPERATIONS`), so it returns what `moss task|epic|worker|
team|board … --json` prints. The SDK has checked the arguments' types against the schema before
a tool runs. The two blocking tools (`wait_for_task`, `chat_wait`) run, like every tool, on a
worker thread of the SDK, and give up when the client cancels the call or goes away.

Calls act as an agent: the ownership guards apply whenever a `workerId` is known, and plans
are approved by humans (CONTROL mode). `MOE_WORKER_ID` and `MOE_TASK_ID` in the server's
environment are the default worker and task, as with Moe's proxy.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, NotRequired

import anyio.from_thread
from pydantic import Field
from typing_extensions import TypedDict

from moss_files.mcp.server import ToolRegistry

TaskId = Annotated[str, Field(description="Task id (TASK-…).")]
OptionalTaskId = Annotated[str | None, Field(description="Task id (TASK-…).")]
EpicId = Annotated[str, Field(description="Epic id (EPIC-…).")]
OptionalEpicId = Annotated[str | None, Field(description="Only this epic (EPIC-…).")]
StepId = Annotated[str, Field(description="Plan step id (step-1, step-2, …).")]
WorkerId = Annotated[str | None, Field(description="The calling worker (default: MOE_WORKER_ID); only a task's holder may act on it.")]
Reason = Annotated[str, Field(description="Why.")]
Texts = Annotated[list[str] | None, Field(description="A list of short texts.")]
Order = Annotated[float | None, Field(description="Position (default: last).")]


class PlanStep(TypedDict):
    """One step of an implementation plan: the files it edits (they must exist) and creates."""

    description: str
    affectedFiles: NotRequired[list[str]]
    newFiles: NotRequired[list[str]]


class ReviewIssue(TypedDict):
    """One finding of a review."""

    type: str
    description: str
    file: NotRequired[str]
    line: NotRequired[int]


class CommandRun(TypedDict):
    """A command the worker ran, with its exit code."""

    command: str
    exitCode: int
    outputTail: NotRequired[str]


class TestRun(TypedDict, total=False):
    """The result of a test run."""

    command: str
    passed: int
    failed: int
    skipped: int


class DodEvidence(TypedDict):
    """How one definition-of-done item was shown: the item's text or 1-based number."""

    item: str | int
    evidence: str


class Verification(TypedDict, total=False):
    """Evidence that the work is done: Moe's one command, or several, files, tests, DoD."""

    command: str
    exitCode: int
    outputTail: str
    commands: list[CommandRun]
    filesTouched: list[str]
    tests: TestRun
    dod: list[DodEvidence]


class HandoffNote(TypedDict, total=False):
    """What the next worker should know."""

    whatIsDone: str
    whatRemains: str
    pitfalls: str
    openQuestions: str


def _still_wanted() -> bool:
    """False once the client cancelled the call (or the server is shutting down)."""
    try:
        anyio.from_thread.check_cancelled()
    except RuntimeError:
        return True  # not on one of the SDK's worker threads: nobody can cancel
    except BaseException:  # the backend's cancellation exception
        return False
    return True


VerificationArg = Annotated[
    Verification | None,
    Field(
        description="What shows it works: {command, exitCode} or commands [{command, exitCode, outputTail?}], filesTouched, "
        "tests {passed, failed}, dod [{item, evidence}]. A failed command or test is refused (VERIFICATION_FAILED)."
    ),
]
TimeoutMs = Annotated[int | None, Field(description="Longest wait in ms (default 300000, 1000..600000; 0 looks once).")]
Channel = Annotated[str, Field(description="Channel: general, architects, workers, qa, governors, a task or epic id, or a custom name (# optional).")]
MaxChars = Annotated[int | None, Field(description="Cut each text to this many characters (default 1000; 0 for all).")]


class TaskFilters(TypedDict, total=False):
    """Filters applied before the query."""

    status: str
    epicId: str
    assignedWorkerId: str


def register(tools: ToolRegistry) -> None:
    """Declare the board tools."""
    # The server's one context, with the agent's identity from its environment; the board
    # store it keeps (ctx.resource) caches parsed files, keyed by stat, for the server's life.
    ctx = tools.context.replace(task_id=os.environ.get("MOE_TASK_ID") or None, worker_id=os.environ.get("MOE_WORKER_ID") or None)

    def call(operation: str, /, **arguments: Any) -> dict[str, Any]:
        # Loaded on the first call, like the other sets' use cases (about 60 ms off start-up).
        from moss_files.board.operations import OPERATIONS

        return OPERATIONS[operation](ctx, **arguments)

    # ------------------------------------------------------------------ context and plans

    @tools.tool(
        "moe.get_context",
        "Project, epic, task, worker and allRails {global, epic, task} for a task (taskId, else MOE_TASK_ID, else the worker's task), "
        "with its newest comments, pendingQuestions (human comments to answer), openQuestions (yours, unanswered) and budget. "
        "Call it on a task you hold before start_step, qa_approve or qa_reject: it records that you read it (contextFetchedBy).",
        idempotent=True,
    )
    def get_context(
        taskId: OptionalTaskId = None,
        workerId: WorkerId = None,
        commentsLimit: Annotated[int | None, Field(description="The task's newest comments to show (default 10).")] = None,
        commentsMaxChars: MaxChars = None,
    ) -> dict[str, Any]:
        return call("get_context", task_id=taskId, worker_id=workerId, comments_limit=commentsLimit, comments_max_chars=commentsMaxChars)

    @tools.tool(
        "moe.submit_plan",
        "Submit a PLANNING task's plan for approval (AWAITING_APPROVAL). Rails are checked (RAIL_VIOLATION). affectedFiles must "
        "exist (list files a step creates in newFiles). Warns past 8 steps or 5 distinct files; refuses past 12 or 10 "
        "(PLAN_TOO_LARGE): split the task. Returns {success, taskId, status, stepCount, distinctFileCount, warnings?, message}.",
        destructive=True,
    )
    def submit_plan(taskId: TaskId, steps: Annotated[list[PlanStep], Field(description="The steps, in order.")], workerId: WorkerId = None) -> dict[str, Any]:
        return call("submit_plan", task_id=taskId, steps=[dict(step) for step in steps], worker_id=workerId)

    @tools.tool("moe.check_approval", "Whether a plan was approved: {taskId, approved, status, rejected?, rejectionReason?}.", idempotent=True)
    def check_approval(taskId: TaskId) -> dict[str, Any]:
        return call("check_approval", task_id=taskId)

    @tools.tool(
        "moe.start_step",
        "Mark a step of a WORKING task IN_PROGRESS (call get_context on the task first): {success, taskId, stepId, stepNumber, totalSteps}.",
        destructive=True,
        idempotent=True,
    )
    def start_step(taskId: TaskId, stepId: StepId, workerId: WorkerId = None) -> dict[str, Any]:
        return call("start_step", task_id=taskId, step_id=stepId, worker_id=workerId)

    @tools.tool(
        "moe.complete_step",
        "Mark a step COMPLETED with the files it changed: {success, taskId, stepId, progress {completed, total, percentage}, nextStep}.",
        destructive=True,
        idempotent=True,
    )
    def complete_step(
        taskId: TaskId,
        stepId: StepId,
        modifiedFiles: Annotated[list[str] | None, Field(description="Project-relative paths the step changed.")] = None,
        note: Annotated[str | None, Field(description="What was done.")] = None,
        verification: VerificationArg = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call(
            "complete_step",
            task_id=taskId,
            step_id=stepId,
            modified_files=modifiedFiles,
            note=note,
            verification=dict(verification) if verification is not None else None,
            worker_id=workerId,
        )

    @tools.tool(
        "moe.complete_task",
        "Finish a WORKING task whose steps are all completed: it goes to REVIEW for QA. The evidence (here and the steps') must show "
        "every definition-of-done item (dod) and no failure, else VERIFICATION_FAILED; a branch the project's policy does not allow is "
        "BRANCH_POLICY_FAILED. Returns {success, taskId, status, stats, verified, branchPolicy?}.",
        destructive=True,
        idempotent=True,
    )
    def complete_task(
        taskId: TaskId,
        prLink: Annotated[str | None, Field(description="Pull request link.")] = None,
        summary: Annotated[str | None, Field(description="What was done.")] = None,
        verification: VerificationArg = None,
        currentBranch: Annotated[
            str | None, Field(description="The branch the work is on, for the project's branch policy (default: the workspace's checkout).")
        ] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call(
            "complete_task",
            task_id=taskId,
            pr_link=prLink,
            summary=summary,
            verification=dict(verification) if verification is not None else None,
            current_branch=currentBranch,
            worker_id=workerId,
        )

    @tools.tool(
        "moe.report_blocked", "Report the task's worker BLOCKED (the task keeps its status): {success, taskId, status: BLOCKED, message}.", destructive=True
    )
    def report_blocked(
        taskId: TaskId,
        reason: Reason,
        needsFrom: Annotated[str | None, Field(description="Who or what can unblock it.")] = None,
        currentStepId: Annotated[str | None, Field(description="The step it blocks.")] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("report_blocked", task_id=taskId, reason=reason, needs_from=needsFrom, current_step_id=currentStepId, worker_id=workerId)

    @tools.tool(
        "moe.propose_rail",
        "Propose a rail change for a human to review (a file under .moss/board/proposals/): {success, proposalId, status: PENDING, message}.",
    )
    def propose_rail(
        taskId: TaskId,
        proposalType: Annotated[str, Field(description="ADD_RAIL, MODIFY_RAIL or REMOVE_RAIL.")],
        targetScope: Annotated[str, Field(description="GLOBAL, EPIC or TASK.")],
        proposedValue: Annotated[str, Field(description="The rail as it should read.")],
        reason: Reason,
        currentValue: Annotated[str | None, Field(description="The rail it modifies or removes.")] = None,
        railList: Annotated[str | None, Field(description="For GLOBAL: customRules (default), forbiddenPatterns, requiredPatterns or techStack.")] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call(
            "propose_rail",
            rail_list=railList,
            task_id=taskId,
            proposal_type=proposalType,
            target_scope=targetScope,
            current_value=currentValue,
            proposed_value=proposedValue,
            reason=reason,
            worker_id=workerId,
        )

    # ------------------------------------------------------------------ queries

    @tools.tool(
        "moe.list_tasks",
        "Tasks of an epic (or all) in board order: {epicId, epicTitle, tasks [{id, title, status, order, "
        "hasWorker, …}], counts {backlog, inProgress, review, done, …}}.",
        read_only=True,
    )
    def list_tasks(
        epicId: OptionalEpicId = None, status: Annotated[list[str] | None, Field(description="Only these statuses (ARCHIVED only when named).")] = None
    ) -> dict[str, Any]:
        return call("list_tasks", epic_id=epicId, statuses=status)

    @tools.tool(
        "moe.search_tasks",
        "Search tasks: filters first, then the query (title matches weigh twice description "
        "matches). Returns {tasks (full records), totalMatches, query, filters}.",
        read_only=True,
    )
    def search_tasks(
        query: Annotated[str | None, Field(description="Words to find in titles and descriptions.")] = None,
        filters: Annotated[TaskFilters | None, Field(description="{status?, epicId?, assignedWorkerId?}.")] = None,
        limit: Annotated[int | None, Field(description="At most this many (default 20).")] = None,
    ) -> dict[str, Any]:
        given = filters or {}
        return call(
            "search_tasks", query=query, status=given.get("status"), epic_id=given.get("epicId"), assigned_worker_id=given.get("assignedWorkerId"), limit=limit
        )

    @tools.tool(
        "moe.get_next_task", "The next BACKLOG task by priority and order: {hasNext, task? {id, title, description, definitionOfDone}}.", read_only=True
    )
    def get_next_task(epicId: OptionalEpicId = None) -> dict[str, Any]:
        return call("get_next_task", epic_id=epicId)

    @tools.tool("moe.ready_tasks", "Open tasks whose dependencies are all DONE: {ready, blocked [+waitingOn], counts}.", read_only=True)
    def ready_tasks(epicId: OptionalEpicId = None) -> dict[str, Any]:
        return call("ready_tasks", epic_id=epicId)

    @tools.tool("moe.get_activity_log", "Board events, newest first, filtered: {events, count, filters}.", read_only=True)
    def get_activity_log(
        taskId: OptionalTaskId = None,
        epicId: OptionalEpicId = None,
        workerId: Annotated[str | None, Field(description="Only this worker's events.")] = None,
        eventTypes: Annotated[list[str] | None, Field(description="Only these events (STEP_COMPLETED, TASK_STATUS_CHANGED, …).")] = None,
        limit: Annotated[int | None, Field(description="At most this many (default 50).")] = None,
    ) -> dict[str, Any]:
        return call("get_activity_log", task_id=taskId, epic_id=epicId, worker_id=workerId, event_types=eventTypes, limit=limit)

    # ------------------------------------------------------------------ claims and status

    @tools.tool(
        "moe.claim_next_task",
        "Claim the next task in these statuses (PLANNING architect, WORKING worker, REVIEW qa). "
        "One task per worker; one worker per status per epic unless teammates (WORKER_CONFLICT; replaceExisting takes over). "
        "Returns {hasNext, project, epic, task, allRails, nextAction, handoffHint?, staleHandoffDiskState?} "
        "or {hasNext: false, alreadyAssigned?, notClaimable?{taskId, reason}}.",
        destructive=True,
        idempotent=True,
    )
    def claim_next_task(
        statuses: Annotated[list[str], Field(description="PLANNING, WORKING and/or REVIEW.")],
        epicId: OptionalEpicId = None,
        workerId: WorkerId = None,
        replaceExisting: Annotated[bool, Field(description="Take over the epic's current worker's task.")] = False,
        preferAdjacentInEpic: Annotated[bool, Field(description="Prefer tasks in the epic of your last claim, before priority and order.")] = True,
        taskId: Annotated[str | None, Field(description="Claim this task only (when offered; else notClaimable says why).")] = None,
    ) -> dict[str, Any]:
        return call(
            "claim_next_task",
            statuses=statuses,
            epic_id=epicId,
            worker_id=workerId,
            replace_existing=replaceExisting,
            prefer_adjacent_in_epic=preferAdjacentInEpic,
            task_id=taskId,
        )

    @tools.tool(
        "moe.release_task",
        "Let go of a held task; it keeps its status and is claimable again (a handoffNote is kept for the next worker): "
        "{success, taskId, status, releasedWorkerId, warning?}.",
        destructive=True,
        idempotent=True,
    )
    def release_task(
        taskId: TaskId,
        reason: Annotated[str | None, Field(description="Why.")] = None,
        handoffNote: Annotated[HandoffNote | None, Field(description="{whatIsDone, whatRemains, pitfalls?, openQuestions?} for the next worker.")] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("release_task", task_id=taskId, reason=reason, handoff_note=dict(handoffNote) if handoffNote else None, worker_id=workerId)

    @tools.tool(
        "moe.set_task_status",
        "Move a task as the state machine allows (INVALID_TRANSITION otherwise); moving back needs "
        "a reason, which becomes reopenReason. Returns {success, taskId, status}.",
        destructive=True,
        idempotent=True,
    )
    def set_task_status(
        taskId: TaskId,
        status: Annotated[str, Field(description="BACKLOG, PLANNING, AWAITING_APPROVAL, WORKING, REVIEW, DONE or ARCHIVED.")],
        reason: Annotated[str | None, Field(description="Why (required to move a task back).")] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("set_task_status", task_id=taskId, status=status, reason=reason, worker_id=workerId)

    @tools.tool(
        "moe.qa_approve",
        "QA approves a task in REVIEW (call get_context on it first): DONE. Returns {success, taskId, status, summary, message}.",
        destructive=True,
        idempotent=True,
    )
    def qa_approve(
        taskId: TaskId, summary: Annotated[str | None, Field(description="The review's verdict.")] = None, workerId: WorkerId = None
    ) -> dict[str, Any]:
        return call("qa_approve", task_id=taskId, summary=summary, worker_id=workerId)

    @tools.tool(
        "moe.qa_reject",
        "QA rejects a task in REVIEW: back to WORKING; to PLANNING once reopenCount reaches maxReopens or a failedDodItems "
        "item fails a second time; past the cap it stays in REVIEW for a person (needsHumanReview). Returns {success, taskId, "
        "status, reopenCount, maxReopens, escalated, parkedForHuman, repeatedFailedDodItem?, rejectionDetails, rejectionHistory, …}.",
        destructive=True,
        idempotent=True,
    )
    def qa_reject(
        taskId: TaskId,
        reason: Annotated[str, Field(description="Which definition-of-done items failed, and why.")],
        failedDodItems: Annotated[list[str] | None, Field(description="The definition-of-done items that failed (their text or number).")] = None,
        issues: Annotated[
            list[ReviewIssue] | None,
            Field(description="Findings: type test_failure, lint, security, missing_feature, regression or other; description; file?; line?"),
        ] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call(
            "qa_reject",
            task_id=taskId,
            reason=reason,
            failed_dod_items=failedDodItems,
            issues=[dict(issue) for issue in issues] if issues else None,
            worker_id=workerId,
        )

    @tools.tool(
        "moe.unblock_worker",
        "Clear a BLOCKED worker; without retryTask it also lets go of its task. Returns {success, "
        "workerId, status, currentTaskId, resolution, retryTask, message}.",
        destructive=True,
        idempotent=True,
    )
    def unblock_worker(
        workerId: Annotated[str, Field(description="The blocked worker.")],
        resolution: Annotated[str, Field(description="What was done about the block.")],
        retryTask: Annotated[bool, Field(description="Keep the task to retry it.")] = False,
    ) -> dict[str, Any]:
        return call("unblock_worker", worker_id=workerId, resolution=resolution, retry_task=retryTask)

    # ------------------------------------------------------------------ epics and tasks

    @tools.tool("moe.create_task", "Create a task in an epic (BACKLOG unless status PLANNING or WORKING): {success, task}.")
    def create_task(
        epicId: EpicId,
        title: Annotated[str, Field(description="Title.")],
        description: Annotated[str | None, Field(description="Description (markdown).")] = None,
        definitionOfDone: Texts = None,
        taskRails: Texts = None,
        status: Annotated[str | None, Field(description="BACKLOG (default), PLANNING or WORKING.")] = None,
        parentTaskId: OptionalTaskId = None,
        order: Order = None,
        createdBy: Annotated[str | None, Field(description="HUMAN or WORKER (default WORKER).")] = None,
        priority: Annotated[str | None, Field(description="CRITICAL, HIGH, MEDIUM (default) or LOW.")] = None,
        dependsOn: Annotated[list[str] | None, Field(description="Task ids this one waits for.")] = None,
        testFile: Annotated[str | None, Field(description="The test that proves it.")] = None,
    ) -> dict[str, Any]:
        return call(
            "create_task",
            epic_id=epicId,
            title=title,
            description=description,
            definition_of_done=definitionOfDone,
            task_rails=taskRails,
            status=status,
            parent_task_id=parentTaskId,
            order=_whole(order),
            created_by=createdBy,
            priority=priority,
            depends_on=dependsOn,
            test_file=testFile,
        )

    @tools.tool("moe.update_task", "Change a task's fields (not status or holder): {success, task}.", destructive=True, idempotent=True)
    def update_task(
        taskId: TaskId,
        title: Annotated[str | None, Field(description="New title.")] = None,
        description: Annotated[str | None, Field(description="New description.")] = None,
        definitionOfDone: Texts = None,
        taskRails: Texts = None,
        priority: Annotated[str | None, Field(description="New priority.")] = None,
        order: Order = None,
        dependsOn: Annotated[list[str] | None, Field(description="Task ids this one waits for.")] = None,
        parentTaskId: OptionalTaskId = None,
        testFile: Annotated[str | None, Field(description="The test that proves it.")] = None,
        epicId: Annotated[str | None, Field(description="Move it to this epic.")] = None,
        maxReopens: Annotated[int | None, Field(description="This task's own reopen budget before QA escalates (0: the project's).")] = None,
    ) -> dict[str, Any]:
        return call(
            "update_task",
            task_id=taskId,
            title=title,
            description=description,
            definition_of_done=definitionOfDone,
            task_rails=taskRails,
            priority=priority,
            order=_whole(order),
            depends_on=dependsOn,
            parent_task_id=parentTaskId,
            test_file=testFile,
            epic_id=epicId,
            max_reopens=maxReopens,
        )

    @tools.tool("moe.delete_task", "Delete a task: {success, task}.", destructive=True, idempotent=True)
    def delete_task(taskId: TaskId) -> dict[str, Any]:
        return call("delete_task", task_id=taskId)

    @tools.tool("moe.create_epic", "Create an epic: {success, epic}.")
    def create_epic(
        title: Annotated[str, Field(description="Title.")],
        description: Annotated[str | None, Field(description="Description (markdown).")] = None,
        architectureNotes: Annotated[str | None, Field(description="Architecture notes.")] = None,
        epicRails: Texts = None,
        status: Annotated[str | None, Field(description="PLANNED (default), ACTIVE, COMPLETED or ARCHIVED.")] = None,
        order: Order = None,
    ) -> dict[str, Any]:
        return call(
            "create_epic", title=title, description=description, architecture_notes=architectureNotes, epic_rails=epicRails, status=status, order=_whole(order)
        )

    @tools.tool("moe.update_epic", "Change an epic's fields: {success, epic}.", destructive=True, idempotent=True)
    def update_epic(
        epicId: EpicId,
        title: Annotated[str | None, Field(description="New title.")] = None,
        description: Annotated[str | None, Field(description="New description.")] = None,
        architectureNotes: Annotated[str | None, Field(description="New architecture notes.")] = None,
        epicRails: Texts = None,
        status: Annotated[str | None, Field(description="PLANNED, ACTIVE, COMPLETED or ARCHIVED.")] = None,
        order: Order = None,
    ) -> dict[str, Any]:
        return call(
            "update_epic",
            epic_id=epicId,
            title=title,
            description=description,
            architecture_notes=architectureNotes,
            epic_rails=epicRails,
            status=status,
            order=_whole(order),
        )

    @tools.tool(
        "moe.delete_epic",
        "Delete an epic; refused while it has tasks unless cascadeDelete. Returns {success, deletedEpic, deletedTaskCount}.",
        destructive=True,
        idempotent=True,
    )
    def delete_epic(epicId: EpicId, cascadeDelete: Annotated[bool, Field(description="Delete its tasks too.")] = False) -> dict[str, Any]:
        return call("delete_epic", epic_id=epicId, cascade_delete=cascadeDelete)

    # ------------------------------------------------------------------ workers and teams

    @tools.tool("moe.list_workers", "Workers with their status and current task: {workers, count}.", read_only=True)
    def list_workers() -> dict[str, Any]:
        return call("list_workers")

    @tools.tool("moe.create_team", "Create a team, or return the one with this name and role: {team, created}.", idempotent=True)
    def create_team(
        name: Annotated[str, Field(description="Team name.")],
        role: Annotated[str, Field(description="architect, worker or qa.")],
        maxSize: Annotated[int | None, Field(description="Most members (default 10).")] = None,
    ) -> dict[str, Any]:
        return call("create_team", name=name, role=role, max_size=maxSize)

    @tools.tool("moe.join_team", "Add a worker to a team (registering it if new); TEAM_FULL at maxSize. Returns {team}.", idempotent=True)
    def join_team(
        teamId: Annotated[str, Field(description="Team id (TEAM-…).")], workerId: Annotated[str, Field(description="The worker joining.")]
    ) -> dict[str, Any]:
        return call("join_team", team_id=teamId, worker_id=workerId)

    @tools.tool("moe.leave_team", "Remove a worker from a team: {team}.", destructive=True, idempotent=True)
    def leave_team(
        teamId: Annotated[str, Field(description="Team id (TEAM-…).")], workerId: Annotated[str, Field(description="The worker leaving.")]
    ) -> dict[str, Any]:
        return call("leave_team", team_id=teamId, worker_id=workerId)

    @tools.tool("moe.list_teams", "Teams, each with members [{id, type, status}]: {teams}.", read_only=True)
    def list_teams(role: Annotated[str | None, Field(description="Only this role: architect, worker or qa.")] = None) -> dict[str, Any]:
        return call("list_teams", role=role)

    # ------------------------------------------------------------------ waiting, liveness

    @tools.tool(
        "moe.wait_for_task",
        "Block until a task you may claim appears (statuses, epicId, teamId), a human comments on your task, or a chat message "
        "is for you; at once if one is there. Does not claim. Returns {hasNext, task?, hasPendingQuestion?, hasChatMessage?, "
        "timedOut?, cancelled?, nextAction, waitedMs}.",
        destructive=True,
        idempotent=True,
    )
    def wait_for_task(
        statuses: Annotated[list[str] | None, Field(description="PLANNING, WORKING and/or REVIEW (default: the team's column).")] = None,
        workerId: WorkerId = None,
        epicId: OptionalEpicId = None,
        teamId: Annotated[str | None, Field(description="Wait as a member of this team.")] = None,
        timeoutMs: TimeoutMs = None,
    ) -> dict[str, Any]:
        return call("wait_for_task", statuses=statuses, worker_id=workerId, epic_id=epicId, team_id=teamId, timeout_ms=timeoutMs, still_wanted=_still_wanted)

    @tools.tool(
        "moe.heartbeat",
        "I am alive: renews the lease on the task you hold (a silent worker loses it after staleWorkerTimeoutMs). "
        "LEASE_EXPIRED once your lease ran out: claim again. Returns {ok, workerId, lastHeartbeat, currentTaskId, leaseExpiresAt}.",
        destructive=True,
        idempotent=True,
    )
    def heartbeat(workerId: WorkerId = None, taskId: Annotated[str | None, Field(description="The task you hold (checked).")] = None) -> dict[str, Any]:
        return call("heartbeat", worker_id=workerId, task_id=taskId)

    @tools.tool(
        "moe.deregister_worker",
        "A worker is gone: DEAD, every task it held released to its column. Idempotent. "
        "Returns {success, workerId, alreadyDead, releasedTaskIds, releasedCount, message}.",
        destructive=True,
        idempotent=True,
    )
    def deregister_worker(
        workerId: Annotated[str, Field(description="The worker leaving.")], reason: Annotated[str | None, Field(description="Why.")] = None
    ) -> dict[str, Any]:
        return call("deregister_worker", worker_id=workerId, reason=reason)

    # ------------------------------------------------------------------ plan governance

    @tools.tool(
        "moe.amend_plan_step",
        "Replace one step's instructions (the full text) with a reason, without a new plan; completed steps and finished tasks are "
        "refused. In CONTROL mode it waits for a human's approval. Returns {success, amendmentId, status, needsApproval, "
        "effectiveDescription, previousDescription, message}.",
        destructive=True,
    )
    def amend_plan_step(
        taskId: TaskId,
        stepId: StepId,
        description: Annotated[str, Field(description="The step's new instructions, in full.")],
        reason: Reason,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("amend_plan_step", task_id=taskId, step_id=stepId, description=description, reason=reason, worker_id=workerId)

    @tools.tool(
        "moe.request_replan",
        "The plan is wrong: a WORKING task goes back to PLANNING, its plan kept as priorAttempt. Returns {success, taskId, status, priorAttempt}.",
        destructive=True,
    )
    def request_replan(
        taskId: TaskId,
        reason: Reason,
        stepId: Annotated[str | None, Field(description="The step where the plan broke down.")] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("request_replan", task_id=taskId, reason=reason, step_id=stepId, worker_id=workerId)

    @tools.tool(
        "moe.submit_plan_critique",
        "Governors: a verdict on a plan. block (with concerns) sends an AWAITING_APPROVAL or WORKING task back to PLANNING; "
        "pass is advice. Returns {success, taskId, status, verdict, concerns, planCritiqueResult}.",
        destructive=True,
    )
    def submit_plan_critique(
        taskId: TaskId,
        verdict: Annotated[str, Field(description="pass or block.")],
        concerns: Annotated[list[str] | None, Field(description="What is wrong (required to block).")] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("submit_plan_critique", task_id=taskId, verdict=verdict, concerns=concerns, worker_id=workerId)

    @tools.tool(
        "moe.enter_governance",
        "Governors: become GOVERNING (tasks held are released) and get the channels to watch. Returns {success, status, channels, governanceDuties, nextAction}.",
        destructive=True,
        idempotent=True,
    )
    def enter_governance(workerId: WorkerId = None) -> dict[str, Any]:
        return call("enter_governance", worker_id=workerId)

    @tools.tool(
        "moe.set_task_budget",
        "Set (or with 0 clear) a task's wall-clock budget from first claim to DONE: {success, taskId, budget {wallClockMs, usedMs, overBudget}}.",
        destructive=True,
        idempotent=True,
    )
    def set_task_budget(taskId: TaskId, wallClockMs: Annotated[int | None, Field(description="The cap in ms; 0 clears.")] = None) -> dict[str, Any]:
        return call("set_task_budget", task_id=taskId, wall_clock_ms=wallClockMs)

    @tools.tool(
        "moe.list_metrics",
        "Per-task metrics (wall clock, reopens, steps, budget) newest first, and their aggregate: {aggregate, tasks, totalMatched}.",
        read_only=True,
    )
    def list_metrics(
        epicId: OptionalEpicId = None,
        sinceIso: Annotated[str | None, Field(description="Only tasks changed at or after this ISO 8601 time.")] = None,
        limit: Annotated[int | None, Field(description="At most this many tasks (default 100).")] = None,
    ) -> dict[str, Any]:
        return call("list_metrics", epic_id=epicId, since_iso=sinceIso, limit=limit)

    @tools.tool("moe.get_handoff_history", "Notes of workers who released a task, and a set-aside plan: {taskId, priorHandoffs, priorAttempt}.", read_only=True)
    def get_handoff_history(taskId: TaskId) -> dict[str, Any]:
        return call("get_handoff_history", task_id=taskId)

    @tools.tool(
        "moe.archive_task",
        "Shelve a BACKLOG, REVIEW or DONE task (ARCHIVED); in-flight tasks are refused (NOT_ALLOWED). Returns {success, taskId, status}.",
        destructive=True,
        idempotent=True,
    )
    def archive_task(taskId: TaskId, reason: Annotated[str | None, Field(description="Why.")] = None) -> dict[str, Any]:
        return call("archive_task", task_id=taskId, reason=reason)

    @tools.tool(
        "moe.archive_epic",
        "Archive an epic and all its tasks; refused while a task is in flight. Returns {success, epicId, epicStatus, archivedTaskCount, totalTasks}.",
        destructive=True,
        idempotent=True,
    )
    def archive_epic(epicId: EpicId) -> dict[str, Any]:
        return call("archive_epic", epic_id=epicId)

    @tools.tool(
        "moe.init_project",
        "Set up this workspace's board: folders, git settings, project.md (nothing existing is replaced). "
        "Returns {success, alreadyInitialized, project {id, name, rootPath}, message}.",
        idempotent=True,
    )
    def init_project(
        projectPath: Annotated[str | None, Field(description="Must be this workspace's root when given.")] = None,
        name: Annotated[str | None, Field(description="Project name (default: the folder's).")] = None,
        force: Annotated[bool, Field(description="Re-create missing parts of an initialized project.")] = False,
    ) -> dict[str, Any]:
        return call("init_project", project_path=projectPath, name=name, force=force)

    # ------------------------------------------------------------------ comments and questions

    @tools.tool(
        "moe.add_comment",
        "Comment on a task. question: true asks a human and blocks the task until one answers (QUESTION_PENDING). "
        "Returns {success, taskId, commentId, totalComments, question, openQuestions, answered}.",
    )
    def add_comment(
        taskId: TaskId,
        content: Annotated[str, Field(description="The comment (at most 10000 characters).")],
        workerId: WorkerId = None,
        question: Annotated[bool, Field(description="A question for a human; the task waits for the answer.")] = False,
        replyTo: Annotated[str | None, Field(description="The comment this answers (COMMENT-…).")] = None,
    ) -> dict[str, Any]:
        return call("add_comment", task_id=taskId, content=content, worker_id=workerId, question=question, reply_to=replyTo)

    @tools.tool(
        "moe.get_pending_questions",
        "Tasks with questions waiting: awaiting agent (default, Moe's: human comments to answer) or human (agents' questions, "
        "which block their tasks). Returns {count, totalMatches, tasks [{taskId, title, questions, …}], pagination}.",
        read_only=True,
    )
    def get_pending_questions(
        epicId: OptionalEpicId = None,
        includeArchived: Annotated[bool, Field(description="Include ARCHIVED tasks.")] = False,
        limit: Annotated[int | None, Field(description="At most this many tasks (default 10, max 50).")] = None,
        maxQuestionsPerTask: Annotated[int | None, Field(description="Questions per task (default 3, max 20).")] = None,
        maxContentChars: MaxChars = None,
        awaiting: Annotated[str, Field(description="agent (default) or human.")] = "agent",
    ) -> dict[str, Any]:
        return call(
            "get_pending_questions",
            epic_id=epicId,
            include_archived=includeArchived,
            limit=limit,
            max_questions_per_task=maxQuestionsPerTask,
            max_content_chars=maxContentChars,
            awaiting=awaiting,
        )

    # ------------------------------------------------------------------ chat

    @tools.tool(
        "moe.chat_send",
        "Send a message to a channel; @worker, @all, @workers, @architects, @qa, @governors wake those mentioned "
        "(paused after chatMaxAgentHops agent messages in a row). Returns {success, messageId, channel, timestamp, routingTargets}.",
    )
    def chat_send(
        channel: Channel,
        content: Annotated[str, Field(description="The message (at most 10000 characters).")],
        workerId: WorkerId = None,
        replyTo: Annotated[str | None, Field(description="The message this answers (MSG-…).")] = None,
    ) -> dict[str, Any]:
        return call("chat_send", channel=channel, content=content, worker_id=workerId, reply_to=replyTo)

    @tools.tool(
        "moe.chat_read",
        "Messages of a channel (or all), oldest first; with workerId it continues from your last read. Returns {messages, cursor, truncated, hasMore}.",
    )
    def chat_read(
        channel: Annotated[str | None, Field(description="The channel (default: every channel).")] = None,
        workerId: WorkerId = None,
        sinceId: Annotated[str | None, Field(description="Messages after this one.")] = None,
        limit: Annotated[int | None, Field(description="At most this many (default 10, max 200).")] = None,
        maxContentChars: MaxChars = None,
    ) -> dict[str, Any]:
        return call("chat_read", channel=channel, worker_id=workerId, since_id=sinceId, limit=limit, max_content_chars=maxContentChars)

    @tools.tool(
        "moe.chat_wait",
        "Your unread messages (general, your role's channel, joined channels, your task's; or channels), oldest first; if none, "
        "wait for the next. Returns {hasMessage, messages, truncated, hasMore} or {hasMessage: false, timedOut | cancelled}.",
    )
    def chat_wait(
        workerId: WorkerId = None,
        channels: Annotated[list[str] | None, Field(description="Only these channels.")] = None,
        sinceId: Annotated[str | None, Field(description="Messages after this one (instead of your last read).")] = None,
        timeoutMs: TimeoutMs = None,
        maxContentChars: MaxChars = None,
    ) -> dict[str, Any]:
        return call(
            "chat_wait",
            worker_id=workerId,
            channels=channels,
            since_id=sinceId,
            timeout_ms=timeoutMs,
            max_content_chars=maxContentChars,
            still_wanted=_still_wanted,
        )

    @tools.tool("moe.chat_channels", "Every chat channel with its counts: {channels [{id, name, type, linkedEntityId, messageCount, …}]}.", read_only=True)
    def chat_channels() -> dict[str, Any]:
        return call("chat_channels")

    @tools.tool("moe.chat_join", "Join a channel (once) and see who is online: {channel, channelName, joined, onlineWorkers}.", idempotent=True)
    def chat_join(channel: Channel, workerId: WorkerId = None) -> dict[str, Any]:
        return call("chat_join", channel=channel, worker_id=workerId)

    @tools.tool(
        "moe.chat_who",
        "Workers online (heard from in the last 2 minutes), or a channel's members online and those waiting on it: {online}.",
        read_only=True,
    )
    def chat_who(channel: Annotated[str | None, Field(description="Only this channel's members.")] = None) -> dict[str, Any]:
        return call("chat_who", channel=channel)

    @tools.tool("moe.chat_create_channel", "Create a custom channel (or get the one with that name): {success, channel, created}.", idempotent=True)
    def chat_create_channel(name: Annotated[str, Field(description="a-z, 0-9, '.', '_', '-'.")], workerId: WorkerId = None) -> dict[str, Any]:
        return call("chat_create_channel", name=name, worker_id=workerId)

    @tools.tool("moe.chat_pin", "Pin a message of a channel (once): {success, pin {channel, messageId, pinnedBy, pinnedAt}, alreadyPinned}.", idempotent=True)
    def chat_pin(channel: Channel, messageId: Annotated[str, Field(description="The message (MSG-…).")], workerId: WorkerId = None) -> dict[str, Any]:
        return call("chat_pin", channel=channel, message_id=messageId, worker_id=workerId)

    @tools.tool("moe.chat_unpin", "Unpin a message: {success, channel, messageId, unpinned}.", destructive=True, idempotent=True)
    def chat_unpin(channel: Channel, messageId: Annotated[str, Field(description="The message (MSG-…).")], workerId: WorkerId = None) -> dict[str, Any]:
        return call("chat_unpin", channel=channel, message_id=messageId, worker_id=workerId)

    @tools.tool(
        "moe.chat_decision",
        "Propose a decision for a human (announced in the channel, default general): {success, decision {id, status: proposed, …}}.",
    )
    def chat_decision(
        content: Annotated[str, Field(description="What is proposed.")],
        channel: Annotated[str | None, Field(description="Where to announce it (default general).")] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("chat_decision", content=content, channel=channel, worker_id=workerId)

    @tools.tool(
        "moe.chat_resync",
        "Forget your read positions (one channel or all) and get the newest messages again: {success, messagesCount, messages, cursorsReset}.",
        destructive=True,
        idempotent=True,
    )
    def chat_resync(
        workerId: WorkerId = None,
        channel: Annotated[str | None, Field(description="Only this channel.")] = None,
        limit: Annotated[int | None, Field(description="At most this many messages (default 50, max 200).")] = None,
    ) -> dict[str, Any]:
        return call("chat_resync", worker_id=workerId, channel=channel, limit=limit)


def _whole(value: float | None) -> int | float | None:
    # JSON has one number type; keep `order: 3` an integer in the file.
    return int(value) if value is not None and value == int(value) else value

"""The `moe` tool set: Moe's board tools (`moe.get_context` … `moe.list_teams`) as MCP tools.
Entry layer: each tool maps Moe's camelCase arguments once onto a board use case's parameters
(`moss_files.board.operations.OPERATIONS`), so it returns what `moss task|epic|worker|team …
--json` prints. The SDK has checked the arguments' types against the schema before a tool runs.

Calls act as an agent: the ownership guards apply whenever a `workerId` is known, and plans
are approved by humans (CONTROL mode). `MOE_WORKER_ID` and `MOE_TASK_ID` in the server's
environment are the default worker and task, as with Moe's proxy.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Annotated, Any, NotRequired

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
    """One step of an implementation plan."""

    description: str
    affectedFiles: NotRequired[list[str]]


class TaskFilters(TypedDict, total=False):
    """Filters applied before the query."""

    status: str
    epicId: str
    assignedWorkerId: str


def register(tools: ToolRegistry) -> None:
    """Declare the board tools."""
    # The server's one context, with the agent's identity from its environment; the board
    # store it keeps (ctx.resource) caches parsed files, keyed by stat, for the server's life.
    ctx = replace(tools.context, task_id=os.environ.get("MOE_TASK_ID") or None, worker_id=os.environ.get("MOE_WORKER_ID") or None)

    def call(operation: str, /, **arguments: Any) -> dict[str, Any]:
        # Loaded on the first call, like the other sets' use cases (about 60 ms off start-up).
        from moss_files.board.operations import OPERATIONS

        return OPERATIONS[operation](ctx, **arguments)

    # ------------------------------------------------------------------ context and plans

    @tools.tool(
        "moe.get_context",
        "Project, epic, task, worker and allRails {global, epic, task} for a task (taskId, else MOE_TASK_ID, else the worker's task).",
        read_only=True,
    )
    def get_context(taskId: OptionalTaskId = None, workerId: WorkerId = None) -> dict[str, Any]:
        return call("get_context", task_id=taskId, worker_id=workerId)

    @tools.tool(
        "moe.submit_plan",
        "Submit a PLANNING task's plan; it waits for a human's approval (AWAITING_APPROVAL). "
        "Forbidden and required global rails are checked: RAIL_VIOLATION lists each in details.violations. "
        "Returns {success, taskId, status, stepCount, message}.",
        destructive=True,
    )
    def submit_plan(taskId: TaskId, steps: Annotated[list[PlanStep], Field(description="The steps, in order.")], workerId: WorkerId = None) -> dict[str, Any]:
        return call("submit_plan", task_id=taskId, steps=[dict(step) for step in steps], worker_id=workerId)

    @tools.tool("moe.check_approval", "Whether a plan was approved: {taskId, approved, status, rejected?, rejectionReason?}.", idempotent=True)
    def check_approval(taskId: TaskId) -> dict[str, Any]:
        return call("check_approval", task_id=taskId)

    @tools.tool(
        "moe.start_step", "Mark a step of a WORKING task IN_PROGRESS: {success, taskId, stepId, stepNumber, totalSteps}.", destructive=True, idempotent=True
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
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("complete_step", task_id=taskId, step_id=stepId, modified_files=modifiedFiles, note=note, worker_id=workerId)

    @tools.tool(
        "moe.complete_task",
        "Finish a WORKING task whose steps are all completed: it goes to REVIEW for QA. "
        "Returns {success, taskId, status, stats {stepsCompleted, filesModified, duration}}.",
        destructive=True,
        idempotent=True,
    )
    def complete_task(
        taskId: TaskId,
        prLink: Annotated[str | None, Field(description="Pull request link.")] = None,
        summary: Annotated[str | None, Field(description="What was done.")] = None,
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call("complete_task", task_id=taskId, pr_link=prLink, summary=summary, worker_id=workerId)

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
        workerId: WorkerId = None,
    ) -> dict[str, Any]:
        return call(
            "propose_rail",
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
        "Returns {hasNext, project, epic, task, allRails} or {hasNext: false, alreadyAssigned?}.",
        destructive=True,
        idempotent=True,
    )
    def claim_next_task(
        statuses: Annotated[list[str], Field(description="PLANNING, WORKING and/or REVIEW.")],
        epicId: OptionalEpicId = None,
        workerId: WorkerId = None,
        replaceExisting: Annotated[bool, Field(description="Take over the epic's current worker's task.")] = False,
    ) -> dict[str, Any]:
        return call("claim_next_task", statuses=statuses, epic_id=epicId, worker_id=workerId, replace_existing=replaceExisting)

    @tools.tool(
        "moe.release_task",
        "Let go of a held task; it keeps its status and is claimable again: {success, taskId, status, releasedWorkerId}.",
        destructive=True,
        idempotent=True,
    )
    def release_task(taskId: TaskId, reason: Annotated[str | None, Field(description="Why.")] = None, workerId: WorkerId = None) -> dict[str, Any]:
        return call("release_task", task_id=taskId, reason=reason, worker_id=workerId)

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

    @tools.tool("moe.qa_approve", "QA approves a task in REVIEW: DONE. Returns {success, taskId, status, summary, message}.", destructive=True, idempotent=True)
    def qa_approve(
        taskId: TaskId, summary: Annotated[str | None, Field(description="The review's verdict.")] = None, workerId: WorkerId = None
    ) -> dict[str, Any]:
        return call("qa_approve", task_id=taskId, summary=summary, worker_id=workerId)

    @tools.tool(
        "moe.qa_reject",
        "QA rejects a task in REVIEW: back to WORKING with the reason (PLANNING once reopenCount reaches "
        "maxReopens). Returns {success, taskId, status, reopenCount, reason, escalated, message}.",
        destructive=True,
        idempotent=True,
    )
    def qa_reject(
        taskId: TaskId, reason: Annotated[str, Field(description="Which definition-of-done items failed, and why.")], workerId: WorkerId = None
    ) -> dict[str, Any]:
        return call("qa_reject", task_id=taskId, reason=reason, worker_id=workerId)

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


def _whole(value: float | None) -> int | float | None:
    # JSON has one number type; keep `order: 3` an integer in the file.
    return int(value) if value is not None and value == int(value) else value

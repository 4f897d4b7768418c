"""`moss task|epic|worker|team|board`: the board for humans. Entry layer: parse options, call
the board's use cases, render. `--json` prints exactly what the `moe.*` MCP tool returns; errors go
to stderr (the JSON error body with --json) with their class's exit code: 2 bad arguments,
3 not found, 4 an unreadable board file or RAIL_VIOLATION, 5 INVALID_TRANSITION,
WORKER_CONFLICT, NOT_ALLOWED, TEAM_FULL or DEPENDENCY_CYCLE, 6 no workspace.

Commands act as a human (approving plans is allowed); `--worker` (or MOE_WORKER_ID) acts on
behalf of an agent, so the ownership guards apply as they do to that agent's MCP calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.board import claims, editing, plans, queries, teams
from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, read_stdin_if, reporting
from moss_files.foundation import workspace
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest

WORKER_ENV = "MOE_WORKER_ID"

EpicOpt = Annotated[str | None, typer.Option("--epic", "-e", help="Epic id.", show_default=False)]
WorkerOpt = Annotated[str | None, typer.Option("--worker", "-w", envvar=WORKER_ENV, help=f"Act as this worker (env {WORKER_ENV}).", show_default=False)]
ReasonOpt = Annotated[str | None, typer.Option("--reason", "-r", help="Why (required to move a task back).", show_default=False)]
TaskArg = Annotated[str, typer.Argument(help="Task id.", show_default=False)]
EpicArg = Annotated[str, typer.Argument(help="Epic id.", show_default=False)]
StatusesOpt = Annotated[list[str] | None, typer.Option("--status", "-s", help="Task status (repeatable).", show_default=False)]
DodOpt = Annotated[list[str] | None, typer.Option("--dod", help="A definition-of-done item (repeatable).", show_default=False)]
RailOpt = Annotated[list[str] | None, typer.Option("--rail", help="A rail: guidance for whoever plans and works it (repeatable).", show_default=False)]
DependsOpt = Annotated[list[str] | None, typer.Option("--depends", help="A task this one waits for (repeatable).", show_default=False)]


def _context(root: Path | None, *, init: bool = False) -> Context:
    """A person's context (actor HUMAN) over the workspace at or above `root`; each run starts
    with a fresh board store."""
    top = workspace.init_root(explicit=root) if init else workspace.find_workspace(explicit=root)
    return Context(top)


def _warn(result: dict[str, Any]) -> None:
    for problem in result.get("problems", []):
        where = problem.get("path", "") + (f":{problem['line']}" if problem.get("line") else "")
        note(f"warning[{problem['code']}] {where}: {problem['message']}")


def _row(task: dict[str, Any]) -> str:
    holder = f"  @{task['assignedWorkerId']}" if task.get("assignedWorkerId") else ""
    return f"{task['id']}  {task['status']:<17} {task.get('priority', ''):<8} {task['title']}{holder}"


def _task_text(task: dict[str, Any]) -> str:
    lines = [f"{task['id']}  {task['title']}", f"  epic {task['epicId']}  status {task['status']}  priority {task['priority']}  order {task['order']}"]
    if task["assignedWorkerId"]:
        lines.append(f"  held by {task['assignedWorkerId']}")
    if task["dependsOn"]:
        lines.append("  depends on " + ", ".join(task["dependsOn"]))
    if task["reopenCount"]:
        lines.append(f"  reopened {task['reopenCount']}x" + (f": {task['reopenReason']}" if task["reopenReason"] else ""))
    if task["description"]:
        lines += ["", task["description"]]
    if task["definitionOfDone"]:
        lines += ["", "Definition of done:", *(f"  - {item}" for item in task["definitionOfDone"])]
    if task["implementationPlan"]:
        marks = {"PENDING": "[ ]", "IN_PROGRESS": "[>]", "COMPLETED": "[x]"}
        lines += ["", "Plan:", *(f"  {marks[s['status']]} {s['stepId']}: {s['description']}" for s in task["implementationPlan"])]
    return "\n".join(lines)


def _done(result: dict[str, Any], as_json: bool, text: str) -> None:
    _warn(result)
    emit(result, as_json, text=text)


def register(app: typer.Typer) -> None:
    """Add the board's command groups to the `moss` app."""
    task_app = new_app("Tasks on the board: create, claim, plan, work, review (Moe's workflow as files).")
    epic_app = new_app("Epics: groups of tasks with their own rails and architecture notes.")
    worker_app = new_app("Workers: the agents that claim tasks, their status and blocks.")
    team_app = new_app("Teams: workers of one role that may share an epic's column.")
    board_app = new_app("The board itself: settings and rails, status, activity log, rail proposals.")
    app.add_typer(task_app, name="task")
    app.add_typer(epic_app, name="epic")
    app.add_typer(worker_app, name="worker")
    app.add_typer(team_app, name="team")
    app.add_typer(board_app, name="board")

    # ------------------------------------------------------------------ tasks

    @task_app.command("new")
    def task_new(
        title: Annotated[str, typer.Argument(help="Title.", show_default=False)],
        epic: Annotated[str, typer.Option("--epic", "-e", help="Epic id.", show_default=False)],
        description: Annotated[
            str | None, typer.Option("--description", "-d", help="Description (the file's body); '-' reads stdin.", show_default=False)
        ] = None,
        dod: DodOpt = None,
        rail: RailOpt = None,
        priority: Annotated[
            str | None, typer.Option("--priority", "-p", help="CRITICAL, HIGH, MEDIUM (default) or LOW; P0-P3 too.", show_default=False)
        ] = None,
        depends: DependsOpt = None,
        order: Annotated[float | None, typer.Option("--order", help="Position in the epic (default: last).", show_default=False)] = None,
        status: Annotated[str | None, typer.Option("--status", "-s", help="BACKLOG (default), PLANNING or WORKING.", show_default=False)] = None,
        parent: Annotated[str | None, typer.Option("--parent", help="Parent task id.", show_default=False)] = None,
        test_file: Annotated[str | None, typer.Option("--test-file", help="The test that proves it.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Create a task in an epic; prints its id."""
        with reporting(as_json):
            text = read_stdin_if(description) if description == "-" else description
            result = editing.create_task(
                _context(root),
                epic_id=epic,
                title=title,
                description=text,
                definition_of_done=dod,
                task_rails=rail,
                status=status,
                parent_task_id=parent,
                order=_whole(order),
                priority=priority,
                depends_on=depends,
                test_file=test_file,
            )
        emit(result, as_json, text=result["task"]["id"])

    @task_app.command("show")
    def task_show(task_id: TaskArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Show one task: fields, description, definition of done and plan."""
        with reporting(as_json):
            result = queries.show_task(_context(root), task_id=task_id)
        emit(result, as_json, text=_task_text(result))

    @task_app.command("list")
    def task_list(epic: EpicOpt = None, status: StatusesOpt = None, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """List tasks (of an epic) in board order, with counts; ARCHIVED only when asked for."""
        with reporting(as_json):
            result = queries.list_tasks(_context(root), epic_id=epic, statuses=status)
        counts = result["counts"]
        summary = f"{counts['total']} tasks: {counts['backlog']} backlog, {counts['inProgress']} working, {counts['review']} review, {counts['done']} done"
        _done(result, as_json, "\n".join([*(_row(t) for t in result["tasks"]), summary]))

    @task_app.command("search")
    def task_search(
        query: Annotated[str | None, typer.Argument(help="Words to find (title matches weigh double).", show_default=False)] = None,
        status: Annotated[str | None, typer.Option("--status", "-s", help="Only this status.", show_default=False)] = None,
        epic: EpicOpt = None,
        worker: Annotated[str | None, typer.Option("--assigned", help="Only tasks held by this worker.", show_default=False)] = None,
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 20,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Search tasks by title and description after filtering by status, epic and holder."""
        with reporting(as_json):
            result = queries.search_tasks(
                _context(root), query=query, status=status or None, epic_id=epic or None, assigned_worker_id=worker or None, limit=limit
            )
        _done(result, as_json, "\n".join(_row(t) for t in result["tasks"]))

    @task_app.command("next")
    def task_next(epic: EpicOpt = None, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Show the next BACKLOG task (by priority, then order)."""
        with reporting(as_json):
            result = queries.get_next_task(_context(root), epic_id=epic)
        _done(result, as_json, f"{result['task']['id']}  {result['task']['title']}" if result["hasNext"] else "no backlog task")

    @task_app.command("ready")
    def task_ready(epic: EpicOpt = None, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Open tasks whose dependencies are all DONE, then the ones still waiting."""
        with reporting(as_json):
            result = queries.ready_tasks(_context(root), epic_id=epic)
        waiting = [f"{_row(t)}  (waits on {', '.join(t['waitingOn'])})" for t in result["blocked"]]
        _done(result, as_json, "\n".join([*(_row(t) for t in result["ready"]), *waiting]))

    @task_app.command("claim")
    def task_claim(
        worker: Annotated[str, typer.Option("--worker", "-w", envvar=WORKER_ENV, help=f"The claiming worker (env {WORKER_ENV}).", show_default=False)],
        status: Annotated[
            list[str] | None, typer.Option("--status", "-s", help="PLANNING, WORKING (default) or REVIEW; repeatable.", show_default=False)
        ] = None,
        epic: EpicOpt = None,
        replace: Annotated[bool, typer.Option("--replace", help="Take over from the epic's current worker.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Claim the next task for a worker (one task per worker, one worker per status per epic)."""
        with reporting(as_json):
            result = claims.claim_next_task(_context(root), statuses=status or ["WORKING"], epic_id=epic, worker_id=worker, replace_existing=replace)
        if result["hasNext"]:
            text = f"{result['task']['id']}  {result['task']['title']}"
        elif "alreadyAssigned" in result:
            text = f"{worker} already holds {result['alreadyAssigned']['taskId']} ({result['alreadyAssigned']['status']})"
        else:
            text = "nothing to claim"
        _done(result, as_json, text)

    @task_app.command("status")
    def task_status(
        task_id: TaskArg,
        status: Annotated[str, typer.Argument(help="BACKLOG, PLANNING, AWAITING_APPROVAL, WORKING, REVIEW, DONE or ARCHIVED.", show_default=False)],
        reason: ReasonOpt = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Move a task to another status, as the state machine allows (exit 5 if it does not)."""
        with reporting(as_json):
            result = claims.set_task_status(_context(root), task_id=task_id, status=status, reason=reason, worker_id=worker)
        emit(result, as_json, text=f"{task_id} {result['status']}")

    @task_app.command("edit")
    def task_edit(
        task_id: TaskArg,
        title: Annotated[str | None, typer.Option("--title", "-t", help="New title.", show_default=False)] = None,
        description: Annotated[str | None, typer.Option("--description", "-d", help="New description; '-' reads stdin.", show_default=False)] = None,
        priority: Annotated[str | None, typer.Option("--priority", "-p", help="New priority.", show_default=False)] = None,
        order: Annotated[float | None, typer.Option("--order", help="New position.", show_default=False)] = None,
        dod: DodOpt = None,
        rail: RailOpt = None,
        depends: DependsOpt = None,
        epic: Annotated[str | None, typer.Option("--epic", "-e", help="Move to this epic.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Change a task's fields; only those keys' lines change in its file."""
        with reporting(as_json):
            text = read_stdin_if(description) if description == "-" else description
            result = editing.update_task(
                _context(root),
                task_id=task_id,
                title=title,
                description=text,
                priority=priority,
                order=_whole(order),
                definition_of_done=dod,
                task_rails=rail,
                depends_on=depends,
                epic_id=epic,
            )
        emit(result, as_json, text=_task_text(result["task"]))

    @task_app.command("plan")
    def task_plan(
        task_id: TaskArg,
        step: Annotated[list[str] | None, typer.Option("--step", help="A step's description (repeatable, in order).", show_default=False)] = None,
        steps_json: Annotated[
            str | None, typer.Option("--steps-json", help='Steps as JSON: [{"description": ..., "affectedFiles": [...]}]; "-" reads stdin.', show_default=False)
        ] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Submit a plan: checked against the rails, then AWAITING_APPROVAL."""
        with reporting(as_json):
            steps: Any = list(step or [])
            if steps_json is not None:
                try:
                    steps = json.loads(read_stdin_if(steps_json) if steps_json == "-" else steps_json)
                except ValueError as exc:
                    raise InvalidRequest(f"--steps-json is not JSON: {exc}") from None
            result = plans.submit_plan(_context(root), task_id=task_id, steps=steps, worker_id=worker)
        emit(result, as_json, text=result["message"])

    @task_app.command("approval")
    def task_approval(task_id: TaskArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Whether a task's plan is approved, waiting, or rejected (and why)."""
        with reporting(as_json):
            result = plans.check_approval(_context(root), task_id=task_id)
        state = "approved" if result["approved"] else f"rejected: {result['rejectionReason']}" if result.get("rejected") else "not approved"
        emit(result, as_json, text=f"{task_id} {result['status']} ({state})")

    @task_app.command("approve")
    def task_approve(task_id: TaskArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Approve a waiting plan: the task goes to WORKING, claimable by workers."""
        with reporting(as_json):
            result = plans.approve_plan(_context(root), task_id=task_id)
        emit(result, as_json, text=f"{task_id} {result['status']}")

    @task_app.command("reject-plan")
    def task_reject_plan(
        task_id: TaskArg,
        reason: Annotated[str, typer.Option("--reason", "-r", help="What the plan must change.", show_default=False)],
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Reject a waiting plan: back to PLANNING for the same architect, with the reason."""
        with reporting(as_json):
            result = plans.reject_plan(_context(root), task_id=task_id, reason=reason)
        emit(result, as_json, text=f"{task_id} {result['status']}")

    @task_app.command("step-start")
    def task_step_start(
        task_id: TaskArg,
        step_id: Annotated[str, typer.Argument(help="Step id (step-1, ...).", show_default=False)],
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Mark a plan step IN_PROGRESS."""
        with reporting(as_json):
            result = plans.start_step(_context(root), task_id=task_id, step_id=step_id, worker_id=worker)
        emit(result, as_json, text=f"{step_id} started ({result['stepNumber']}/{result['totalSteps']})")

    @task_app.command("step-done")
    def task_step_done(
        task_id: TaskArg,
        step_id: Annotated[str, typer.Argument(help="Step id (step-1, ...).", show_default=False)],
        file: Annotated[list[str] | None, typer.Option("--file", "-f", help="A file the step changed (repeatable).", show_default=False)] = None,
        step_note: Annotated[str | None, typer.Option("--note", help="What was done.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Mark a plan step COMPLETED; prints progress and the next step."""
        with reporting(as_json):
            result = plans.complete_step(_context(root), task_id=task_id, step_id=step_id, modified_files=file, note=step_note, worker_id=worker)
        progress = result["progress"]
        following = f"; next {result['nextStep']['stepId']}: {result['nextStep']['description']}" if result["nextStep"] else "; all steps done"
        emit(result, as_json, text=f"{progress['completed']}/{progress['total']} ({progress['percentage']}%){following}")

    @task_app.command("complete")
    def task_complete(
        task_id: TaskArg,
        pr: Annotated[str | None, typer.Option("--pr", help="Pull request link.", show_default=False)] = None,
        summary: Annotated[str | None, typer.Option("--summary", help="What was done.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Finish the work: WORKING -> REVIEW (every step must be completed)."""
        with reporting(as_json):
            result = plans.complete_task(_context(root), task_id=task_id, pr_link=pr, summary=summary, worker_id=worker)
        emit(result, as_json, text=f"{task_id} {result['status']}")

    @task_app.command("qa-approve")
    def task_qa_approve(
        task_id: TaskArg,
        summary: Annotated[str | None, typer.Option("--summary", help="The review's verdict.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """QA approves a task in REVIEW: it is DONE."""
        with reporting(as_json):
            result = claims.qa_approve(_context(root), task_id=task_id, summary=summary, worker_id=worker)
        emit(result, as_json, text=result["message"])

    @task_app.command("qa-reject")
    def task_qa_reject(
        task_id: TaskArg,
        reason: Annotated[str, typer.Option("--reason", "-r", help="Which definition-of-done items failed, and why.", show_default=False)],
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """QA rejects a task in REVIEW: back to WORKING (PLANNING after too many reopens)."""
        with reporting(as_json):
            result = claims.qa_reject(_context(root), task_id=task_id, reason=reason, worker_id=worker)
        emit(result, as_json, text=result["message"])

    @task_app.command("block")
    def task_block(
        task_id: TaskArg,
        reason: Annotated[str, typer.Option("--reason", "-r", help="What blocks the work.", show_default=False)],
        needs_from: Annotated[str | None, typer.Option("--needs-from", help="Who can unblock it.", show_default=False)] = None,
        step: Annotated[str | None, typer.Option("--step", help="The step it blocks.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Report the task's worker BLOCKED (the task keeps its status)."""
        with reporting(as_json):
            result = plans.report_blocked(_context(root), task_id=task_id, reason=reason, needs_from=needs_from, current_step_id=step, worker_id=worker)
        emit(result, as_json, text=result["message"])

    @task_app.command("release")
    def task_release(task_id: TaskArg, reason: ReasonOpt = None, worker: WorkerOpt = None, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Let go of a task: it keeps its status and is claimable again."""
        with reporting(as_json):
            result = claims.release_task(_context(root), task_id=task_id, reason=reason, worker_id=worker)
        emit(result, as_json, text=f"{task_id} {result['status']}, released")

    @task_app.command("context")
    def task_context(
        task_id: Annotated[str | None, typer.Argument(help="Task id (default: the worker's task).", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """What an agent sees for a task: project, epic, task, worker and every rail."""
        with reporting(as_json):
            result = plans.get_context(_context(root), task_id=task_id, worker_id=worker)
        rails = result["allRails"]
        text = (
            f"{result['task']['id']}  {result['task']['title']}" if result["task"] else "no task"
        ) + f"\nrails: global {rails['global']}, epic {rails['epic']}, task {rails['task']}"
        _done(result, as_json, text)

    @task_app.command("propose-rail")
    def task_propose_rail(
        task_id: TaskArg,
        value: Annotated[str, typer.Option("--value", help="The proposed rail.", show_default=False)],
        reason: Annotated[str, typer.Option("--reason", "-r", help="Why.", show_default=False)],
        kind: Annotated[str, typer.Option("--type", help="ADD_RAIL, MODIFY_RAIL or REMOVE_RAIL.")] = "ADD_RAIL",
        scope: Annotated[str, typer.Option("--scope", help="GLOBAL, EPIC or TASK.")] = "TASK",
        current: Annotated[str | None, typer.Option("--current", help="The rail it modifies or removes.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Propose a rail change; it is stored under proposals/ for a human to review."""
        with reporting(as_json):
            result = plans.propose_rail(
                _context(root),
                task_id=task_id,
                proposal_type=kind,
                target_scope=scope,
                current_value=current,
                proposed_value=value,
                reason=reason,
                worker_id=worker,
            )
        emit(result, as_json, text=result["proposalId"])

    @task_app.command("delete")
    def task_delete(task_id: TaskArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Delete a task's file."""
        with reporting(as_json):
            result = editing.delete_task(_context(root), task_id=task_id)
        emit(result, as_json, text=f"deleted {task_id}")

    # ------------------------------------------------------------------ epics

    @epic_app.command("new")
    def epic_new(
        title: Annotated[str, typer.Argument(help="Title.", show_default=False)],
        description: Annotated[str | None, typer.Option("--description", "-d", help="Description; '-' reads stdin.", show_default=False)] = None,
        notes: Annotated[str | None, typer.Option("--notes", help="Architecture notes.", show_default=False)] = None,
        rail: RailOpt = None,
        status: Annotated[str | None, typer.Option("--status", "-s", help="PLANNED (default), ACTIVE, COMPLETED or ARCHIVED.", show_default=False)] = None,
        order: Annotated[float | None, typer.Option("--order", help="Position among epics (default: last).", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Create an epic; prints its id."""
        with reporting(as_json):
            text = read_stdin_if(description) if description == "-" else description
            result = editing.create_epic(
                _context(root), title=title, description=text, architecture_notes=notes, epic_rails=rail, status=status, order=_whole(order)
            )
        emit(result, as_json, text=result["epic"]["id"])

    @epic_app.command("show")
    def epic_show(epic_id: EpicArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Show an epic with its tasks."""
        with reporting(as_json):
            result = queries.show_epic(_context(root), epic_id=epic_id)
        head = f"{result['id']}  {result['title']}  ({result['status']})"
        emit(result, as_json, text="\n".join([head, *(f"  {_row(t)}" for t in result["tasks"])]))

    @epic_app.command("list")
    def epic_list(
        status: Annotated[str | None, typer.Option("--status", "-s", help="Only this status.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """List epics in order, with task counts."""
        with reporting(as_json):
            result = queries.list_epics(_context(root), status=status)
        rows = [f"{e['id']}  {e['status']:<9} {e['counts']['done']}/{e['counts']['total']} done  {e['title']}" for e in result["epics"]]
        _done(result, as_json, "\n".join(rows))

    @epic_app.command("edit")
    def epic_edit(
        epic_id: EpicArg,
        title: Annotated[str | None, typer.Option("--title", "-t", help="New title.", show_default=False)] = None,
        description: Annotated[str | None, typer.Option("--description", "-d", help="New description; '-' reads stdin.", show_default=False)] = None,
        notes: Annotated[str | None, typer.Option("--notes", help="New architecture notes.", show_default=False)] = None,
        rail: RailOpt = None,
        status: Annotated[str | None, typer.Option("--status", "-s", help="New status.", show_default=False)] = None,
        order: Annotated[float | None, typer.Option("--order", help="New position.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Change an epic's fields."""
        with reporting(as_json):
            text = read_stdin_if(description) if description == "-" else description
            result = editing.update_epic(
                _context(root), epic_id=epic_id, title=title, description=text, architecture_notes=notes, epic_rails=rail, status=status, order=_whole(order)
            )
        emit(result, as_json, text=f"{epic_id} updated")

    @epic_app.command("delete")
    def epic_delete(
        epic_id: EpicArg,
        cascade: Annotated[bool, typer.Option("--cascade", help="Delete its tasks too.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Delete an epic (refused while it has tasks, unless --cascade)."""
        with reporting(as_json):
            result = editing.delete_epic(_context(root), epic_id=epic_id, cascade_delete=cascade)
        emit(result, as_json, text=f"deleted {epic_id} and {result['deletedTaskCount']} task(s)")

    # ------------------------------------------------------------------ workers

    @worker_app.command("list")
    def worker_list(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """List workers with their status and current task."""
        with reporting(as_json):
            result = teams.list_workers(_context(root))
        rows = [
            f"{w['id']}  {w['status']:<17} {w['currentTaskId'] or '-'}" + (f"  ({w['blockedReason']})" if w["blockedReason"] else "") for w in result["workers"]
        ]
        _done(result, as_json, "\n".join(rows))

    @worker_app.command("show")
    def worker_show(worker_id: Annotated[str, typer.Argument(help="Worker id.", show_default=False)], root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Show one worker."""
        with reporting(as_json):
            result = teams.show_worker(_context(root), worker_id=worker_id)
        emit(result, as_json, text=f"{result['id']}  {result['status']}  {result['currentTaskId'] or '-'}")

    @worker_app.command("add")
    def worker_add(
        worker_id: Annotated[str, typer.Argument(help="Worker id (its file name).", show_default=False)],
        kind: Annotated[str | None, typer.Option("--type", help="architect, worker or qa.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Register a worker (agents are registered on their first claim anyway)."""
        with reporting(as_json):
            result = teams.register_worker(_context(root), worker_id=worker_id, role=kind)
        emit(result, as_json, text=f"{worker_id} {'registered' if result['created'] else 'exists'}")

    @worker_app.command("unblock")
    def worker_unblock(
        worker_id: Annotated[str, typer.Argument(help="Worker id.", show_default=False)],
        resolution: Annotated[str, typer.Option("--resolution", help="What was done about the block.", show_default=False)],
        retry: Annotated[bool, typer.Option("--retry", help="The worker keeps its task to retry it.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Clear a worker's BLOCKED status (without --retry it also lets go of its task)."""
        with reporting(as_json):
            result = plans.unblock_worker(_context(root), worker_id=worker_id, resolution=resolution, retry_task=retry)
        emit(result, as_json, text=result["message"])

    # ------------------------------------------------------------------ teams

    @team_app.command("new")
    def team_new(
        name: Annotated[str, typer.Argument(help="Team name.", show_default=False)],
        role: Annotated[str, typer.Option("--role", help="architect, worker or qa.", show_default=False)],
        max_size: Annotated[int | None, typer.Option("--max", help="Most members (default 10).", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Create a team (or show the one with that name and role)."""
        with reporting(as_json):
            result = teams.create_team(_context(root), name=name, role=role, max_size=max_size)
        emit(result, as_json, text=f"{result['team']['id']}{'' if result['created'] else ' (exists)'}")

    @team_app.command("join")
    def team_join(
        team_id: Annotated[str, typer.Argument(help="Team id.", show_default=False)],
        worker_id: Annotated[str, typer.Argument(help="Worker id.", show_default=False)],
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Add a worker to a team (registering the worker if new)."""
        with reporting(as_json):
            result = teams.join_team(_context(root), team_id=team_id, worker_id=worker_id)
        emit(result, as_json, text=", ".join(result["team"]["memberIds"]))

    @team_app.command("leave")
    def team_leave(
        team_id: Annotated[str, typer.Argument(help="Team id.", show_default=False)],
        worker_id: Annotated[str, typer.Argument(help="Worker id.", show_default=False)],
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Remove a worker from a team."""
        with reporting(as_json):
            result = teams.leave_team(_context(root), team_id=team_id, worker_id=worker_id)
        emit(result, as_json, text=", ".join(result["team"]["memberIds"]) or "(no members)")

    @team_app.command("list")
    def team_list(
        role: Annotated[str | None, typer.Option("--role", help="Only this role.", show_default=False)] = None, root: RootOpt = None, as_json: JsonOpt = False
    ) -> None:
        """List teams with their members."""
        with reporting(as_json):
            result = teams.list_teams(_context(root), role=role)
        rows = [
            f"{t['id']}  {t['name']} ({t['role']}, {len(t['members'])}/{t['maxSize']}): {', '.join(m['id'] for m in t['members'])}" for t in result["teams"]
        ]
        _done(result, as_json, "\n".join(rows))

    # ------------------------------------------------------------------ the board

    @board_app.command("init")
    def board_init(
        name: Annotated[str | None, typer.Option("--name", help="Project name (default: the folder's).", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Write .moss/board/project.md with every setting and rail spelled out (never overwrites)."""
        with reporting(as_json):
            result = editing.init_board(_context(root, init=True), name=name)
        emit(result, as_json, text=f"{'created' if result['created'] else 'exists'}: {result['path']}")

    @board_app.command("status")
    def board_status(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Counts per status, workers, and any board file that cannot be read."""
        with reporting(as_json):
            result = queries.board_status(_context(root))
        counts = result["counts"]["byStatus"]
        lines = [
            f"{result['project']['name']} ({result['project']['settings']['approvalMode']}): {result['epics']} epics",
            "  ".join(f"{status} {count}" for status, count in counts.items()),
            *(f"{w['id']}  {w['status']}  {w['currentTaskId'] or '-'}" for w in result["workers"]),
        ]
        _done(result, as_json, "\n".join(lines))

    @board_app.command("log")
    def board_log(
        task: Annotated[str | None, typer.Option("--task", help="Only this task.", show_default=False)] = None,
        epic: EpicOpt = None,
        worker: Annotated[str | None, typer.Option("--worker", "-w", help="Only this worker.", show_default=False)] = None,
        kind: Annotated[list[str] | None, typer.Option("--type", help="Only this event type (repeatable).", show_default=False)] = None,
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 50,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """The activity log, newest first."""
        with reporting(as_json):
            result = queries.get_activity_log(_context(root), task_id=task, epic_id=epic, worker_id=worker, event_types=kind, limit=limit)
        rows = [f"{e['timestamp']}  {e['event']:<20} {e.get('taskId') or e.get('epicId') or '-'}  {e.get('workerId') or ''}" for e in result["events"]]
        _done(result, as_json, "\n".join(rows))

    @board_app.command("proposals")
    def board_proposals(
        status: Annotated[str | None, typer.Option("--status", "-s", help="PENDING, APPROVED or REJECTED.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Rail proposals, newest first."""
        with reporting(as_json):
            result = plans.list_proposals(_context(root), status=status)
        rows = [f"{p['id']}  {p['status']:<8} {p['proposalType']} {p['targetScope']}: {p['proposedValue']}  ({p['reason']})" for p in result["proposals"]]
        _done(result, as_json, "\n".join(rows))

    @board_app.command("resolve")
    def board_resolve(
        proposal_id: Annotated[str, typer.Argument(help="Proposal id.", show_default=False)],
        decision: Annotated[str, typer.Argument(help="approved or rejected.", show_default=False)],
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Record a decision on a rail proposal (edit the rails themselves in project.md or the epic/task)."""
        with reporting(as_json):
            result = plans.resolve_proposal(_context(root), proposal_id=proposal_id, decision=decision)
        emit(result, as_json, text=f"{proposal_id} {result['proposal']['status']}")


def _whole(value: float | None) -> int | float | None:
    """An --order as typed: 3 stays an int, 2.5 a float."""
    return int(value) if value is not None and value == int(value) else value

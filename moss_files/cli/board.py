"""`moss task|epic|worker|team|board`: the board for humans. Entry layer: parse options, call
the board's use cases, render. `--json` prints exactly what the `moe.*` MCP tool returns; errors go
to stderr (the JSON error body with --json) with their class's exit code: 2 bad arguments,
3 not found, 4 an unreadable board file, RAIL_VIOLATION or PLAN_TOO_LARGE, 5 INVALID_TRANSITION,
WORKER_CONFLICT, NOT_ALLOWED, TEAM_FULL, DEPENDENCY_CYCLE, LEASE_EXPIRED, QUESTION_PENDING,
AMENDMENT_PENDING, VERIFICATION_FAILED or BRANCH_POLICY_FAILED, 6 no workspace. `moss task wait` and
`moss board chat wait` block (until something comes, or their timeout) and exit 0 either way.

Commands act as a human (approving plans is allowed); `--worker` (or MOE_WORKER_ID) acts on
behalf of an agent, so the ownership guards apply as they do to that agent's MCP calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.board import claims, conversation, editing, governance, leases, plans, queries, teams, waiting
from moss_files.board.model import PRIORITY_ALIASES, STATUSES
from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, read_stdin_if, reporting
from moss_files.foundation import structured, workspace
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError

WORKER_ENV = "MOE_WORKER_ID"
# Every other spelling --priority takes, said in its help (`-p urgent` is CRITICAL).
PRIORITY_SPELLINGS = "also " + ", ".join(f"{alias.lower()}={meaning}" for alias, meaning in PRIORITY_ALIASES.items())

EpicOpt = Annotated[str | None, typer.Option("--epic", "-e", help="Epic id.", show_default=False)]
WorkerOpt = Annotated[str | None, typer.Option("--worker", "-w", envvar=WORKER_ENV, help=f"Act as this worker (env {WORKER_ENV}).", show_default=False)]
ReasonOpt = Annotated[str | None, typer.Option("--reason", "-r", help="Why (required to move a task back).", show_default=False)]
TaskArg = Annotated[str, typer.Argument(help="Task id.", show_default=False)]
EpicArg = Annotated[str, typer.Argument(help="Epic id.", show_default=False)]
StatusesOpt = Annotated[list[str] | None, typer.Option("--status", "-s", help="Task status (repeatable).", show_default=False)]
DodOpt = Annotated[list[str] | None, typer.Option("--dod", help="A definition-of-done item (repeatable).", show_default=False)]
RailOpt = Annotated[list[str] | None, typer.Option("--rail", help="A rail: guidance for whoever plans and works it (repeatable).", show_default=False)]
DependsOpt = Annotated[list[str] | None, typer.Option("--depends", help="A task this one waits for (repeatable).", show_default=False)]
RanOpt = Annotated[list[str] | None, typer.Option("--ran", help="Evidence: a command that ran and passed, exit 0 (repeatable).", show_default=False)]
TouchedOpt = Annotated[list[str] | None, typer.Option("--touched", help="Evidence: a file the work touched (repeatable).", show_default=False)]
TestsOpt = Annotated[str | None, typer.Option("--tests", help="Evidence: test results as PASSED/FAILED, e.g. 42/0.", show_default=False)]
DodEvidenceOpt = Annotated[
    list[str] | None,
    typer.Option("--dod", help="Evidence: 'ITEM=HOW IT SHOWS', ITEM being a definition-of-done item's text or number (repeatable).", show_default=False),
]
VerificationOpt = Annotated[
    str | None,
    typer.Option(
        "--verification",
        help='Evidence as JSON: {"commands": [{"command", "exitCode"}], "filesTouched", "tests": {"passed", "failed"}, "dod": [{"item", "evidence"}]}; "-" reads stdin.',
        show_default=False,
    ),
]
ChannelArg = Annotated[str, typer.Argument(help="Channel (general, workers, TASK-…, a custom name; # optional).", show_default=False)]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Longest wait in seconds (1 to 600; 0 looks once).")]
PollOpt = Annotated[bool, typer.Option("--poll", help="Watch by polling (for mounts where file events do not arrive).")]


def _context(root: Path | None, *, init: bool = False) -> Context:
    """A person's context (actor HUMAN) over the workspace at or above `root`; each run starts
    with a fresh board store."""
    top = workspace.init_root(explicit=root) if init else workspace.find_workspace(explicit=root)
    return Context(top)


def _watching(root: Path | None) -> Context:
    """A waiter's context: it says on stderr when it starts waiting (after its first look)."""
    return _context(root).replace(notify=note)


def _warn(result: dict[str, Any]) -> None:
    for problem in result.get("problems", []):
        where = problem.get("path", "") + (f":{problem['line']}" if problem.get("line") else "")
        note(f"warning[{problem['code']}] {where}: {problem['message']}")


def _row(task: dict[str, Any]) -> str:
    holder = f"  @{task['assignedWorkerId']}" if task.get("assignedWorkerId") else ""
    return f"{task['id']}  {task['status']:<17} {task.get('priority', ''):<8} {task['title']}{holder}"


def _source_lines(source: dict[str, Any] | None) -> list[str]:
    """Where an imported item came from, and every field of its source kept verbatim."""
    if not source:
        return []
    lines = [f"  imported from {source.get('system')} ({source.get('id')})"]
    kept = source.get("fields") or {}
    if kept:
        lines += ["", "Kept from the source:"]
        lines += [f"  {key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}" for key, value in kept.items()]
    return lines


def _task_text(task: dict[str, Any]) -> str:
    kind = f"  type {task['type']}" if task.get("type") else ""
    lines = [
        f"{task['id']}  {task['title']}",
        f"  epic {task['epicId']}  status {task['status']}  priority {task['priority']}  order {task['order']}{kind}",
    ]
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
    source = _source_lines(task.get("source"))
    if source:
        lines += ["", *source]
    return "\n".join(lines)


def _done(result: dict[str, Any], as_json: bool, text: str) -> None:
    _warn(result)
    emit(result, as_json, text=text)


def _json_option(value: str, flag: str, kind: type, shape: str) -> Any:
    """The JSON an option holds (`-`: read from standard input), which must be of `kind`.
    Raises InvalidRequest naming the option."""
    try:
        data = structured.loads_json(read_stdin_if(value) if value == "-" else value)
    except (ValueError, MossError) as exc:  # MossError: JSON_TOO_DEEP
        raise InvalidRequest(f"{flag} is not JSON: {exc}") from None
    if not isinstance(data, kind):
        raise InvalidRequest(f"{flag} must be {shape}")
    return data


def _evidence(verification: str | None, ran: list[str] | None, touched: list[str] | None, tests: str | None, dod: list[str] | None) -> dict[str, Any] | None:
    """The verification argument from the evidence options (None when none was given)."""
    data: dict[str, Any] = {}
    if verification is not None:
        data = _json_option(verification, "--verification", dict, "a JSON object")
    if ran:
        data["commands"] = [*data.get("commands", []), *({"command": command, "exitCode": 0} for command in ran)]
    if touched:
        data["filesTouched"] = [*data.get("filesTouched", []), *touched]
    if tests is not None:
        passed, _, failed = tests.partition("/")
        if not passed.strip().isdigit() or not failed.strip().isdigit():
            raise InvalidRequest(f"--tests {tests!r} must read PASSED/FAILED, e.g. 42/0")
        data["tests"] = {"passed": int(passed), "failed": int(failed)}
    for entry in dod or []:
        item, sep, shown = entry.partition("=")
        if not sep or not item.strip() or not shown.strip():
            raise InvalidRequest(f"--dod {entry!r} must read ITEM=EVIDENCE")
        data.setdefault("dod", []).append({"item": int(item) if item.strip().isdigit() else item.strip(), "evidence": shown.strip()})
    return data or None


def _seconds(timeout: float) -> int:
    if timeout < 0:
        raise InvalidRequest("--timeout must be at least 0 seconds")
    return round(timeout * 1000)


def _woke(result: dict[str, Any]) -> str:
    """One line saying what ended a wait."""
    if result.get("hasNext"):
        return f"{result['task']['id']}  {result['task']['status']}  {result['task']['title']}" + ("  (yours)" if result.get("ownTask") else "")
    if result.get("hasPendingQuestion"):
        return f"a human commented on {result['taskId']}"
    if result.get("hasChatMessage"):
        message = result["chatMessage"]
        return f"#{message['channel']} {message['sender']}: {message['preview']}"
    if result.get("cancelled"):
        return "cancelled by a newer wait"
    return f"nothing after {result['waitedMs'] / 1000:g}s"


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
            str | None, typer.Option("--priority", "-p", help=f"CRITICAL, HIGH, MEDIUM (default) or LOW; {PRIORITY_SPELLINGS}.", show_default=False)
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
        by_status, total = result["counts"]["byStatus"], result["counts"]["total"]
        shown = [name for name in STATUSES if name != "ARCHIVED" or by_status[name]]  # ARCHIVED only when there are some
        summary = f"{total} {'task' if total == 1 else 'tasks'}: " + ", ".join(f"{by_status[name]} {name.lower().replace('_', ' ')}" for name in shown)
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
        adjacent: Annotated[
            bool, typer.Option("--adjacent/--no-adjacent", help="Prefer tasks in the epic of the worker's last claim, before priority.")
        ] = True,
        task: Annotated[
            str | None, typer.Option("--task", "-t", help="Claim this task only, if the claim would offer it (else says why not).", show_default=False)
        ] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Claim the next task for a worker (one task per worker, one worker per status per epic)."""
        with reporting(as_json):
            result = claims.claim_next_task(
                _context(root),
                statuses=status or ["WORKING"],
                epic_id=epic,
                worker_id=worker,
                replace_existing=replace,
                prefer_adjacent_in_epic=adjacent,
                task_id=task,
            )
        if result.get("handoffHint"):
            note(("warning: " if result.get("staleHandoffDiskState") else "") + result["handoffHint"])
        if result["hasNext"]:
            text = f"{result['task']['id']}  {result['task']['title']}"
        elif "alreadyAssigned" in result:
            text = f"{worker} already holds {result['alreadyAssigned']['taskId']} ({result['alreadyAssigned']['status']})"
        elif "notClaimable" in result:
            text = f"cannot claim {result['notClaimable']['taskId']}: {result['notClaimable']['reason']}"
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
        priority: Annotated[
            str | None, typer.Option("--priority", "-p", help=f"New priority: CRITICAL, HIGH, MEDIUM or LOW; {PRIORITY_SPELLINGS}.", show_default=False)
        ] = None,
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
            str | None,
            typer.Option(
                "--steps-json", help='Steps as JSON: [{"description": ..., "affectedFiles": [...], "newFiles": [...]}]; "-" reads stdin.', show_default=False
            ),
        ] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Submit a plan: checked against the rails, then AWAITING_APPROVAL."""
        with reporting(as_json):
            steps: Any = list(step or [])
            if steps_json is not None:
                steps = _json_option(steps_json, "--steps-json", object, "JSON")  # submit_plan checks its shape
            result = plans.submit_plan(_context(root), task_id=task_id, steps=steps, worker_id=worker)
        for warning in result.get("warnings", []):
            note(f"warning: {warning}")
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
        ran: RanOpt = None,
        touched: TouchedOpt = None,
        tests: TestsOpt = None,
        dod: DodEvidenceOpt = None,
        verification: VerificationOpt = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Mark a plan step COMPLETED, with the evidence that it works; prints progress and the next step."""
        with reporting(as_json):
            evidence = _evidence(verification, ran, touched, tests, dod)
            result = plans.complete_step(
                _context(root), task_id=task_id, step_id=step_id, modified_files=file, note=step_note, verification=evidence, worker_id=worker
            )
        progress = result["progress"]
        following = f"; next {result['nextStep']['stepId']}: {result['nextStep']['description']}" if result["nextStep"] else "; all steps done"
        emit(result, as_json, text=f"{progress['completed']}/{progress['total']} ({progress['percentage']}%){following}")

    @task_app.command("complete")
    def task_complete(
        task_id: TaskArg,
        pr: Annotated[str | None, typer.Option("--pr", help="Pull request link.", show_default=False)] = None,
        summary: Annotated[str | None, typer.Option("--summary", help="What was done.", show_default=False)] = None,
        ran: RanOpt = None,
        touched: TouchedOpt = None,
        tests: TestsOpt = None,
        dod: DodEvidenceOpt = None,
        verification: VerificationOpt = None,
        branch: Annotated[
            str | None, typer.Option("--branch", help="The branch the work is on, for the branch policy (default: the checkout's).", show_default=False)
        ] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Finish the work: WORKING -> REVIEW (every step completed; the evidence must show the definition of done; the branch policy holds)."""
        with reporting(as_json):
            evidence = _evidence(verification, ran, touched, tests, dod)
            result = plans.complete_task(
                _context(root), task_id=task_id, pr_link=pr, summary=summary, verification=evidence, current_branch=branch, worker_id=worker
            )
        if result.get("branchPolicy", {}).get("warning"):
            note(f"warning: {result['branchPolicy']['warning']}")
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
        failed: Annotated[
            list[str] | None, typer.Option("--failed-dod", help="A definition-of-done item that failed: its text or number (repeatable).", show_default=False)
        ] = None,
        issues_json: Annotated[
            str | None,
            typer.Option(
                "--issues-json", help='Findings as JSON: [{"type": "test_failure", "description": ..., "file"?, "line"?}]; "-" reads stdin.', show_default=False
            ),
        ] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """QA rejects a task in REVIEW: back to WORKING; PLANNING at the reopen cap or when an item fails twice; parked for a person past the cap."""
        with reporting(as_json):
            issues = None if issues_json is None else _json_option(issues_json, "--issues-json", list, "a JSON list of issues")
            result = claims.qa_reject(_context(root), task_id=task_id, reason=reason, failed_dod_items=failed, issues=issues, worker_id=worker)
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
    def task_release(
        task_id: TaskArg,
        reason: ReasonOpt = None,
        done: Annotated[str | None, typer.Option("--done", help="Handoff note: what is done.", show_default=False)] = None,
        remains: Annotated[str | None, typer.Option("--remains", help="Handoff note: what remains.", show_default=False)] = None,
        pitfalls: Annotated[str | None, typer.Option("--pitfalls", help="Handoff note: what to watch out for.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Let go of a task: it keeps its status and is claimable again (with a handoff note for the next worker); a person's release returns a parked task to QA."""
        with reporting(as_json):
            note = {key: value for key, value in (("whatIsDone", done), ("whatRemains", remains), ("pitfalls", pitfalls)) if value} or None
            result = claims.release_task(_context(root), task_id=task_id, reason=reason, handoff_note=note, worker_id=worker)
        if result.get("warning"):
            note_line = result["warning"]
            typer.echo(f"warning: {note_line}", err=True)
        emit(result, as_json, text=f"{task_id} {result['status']}, released")

    @task_app.command("context")
    def task_context(
        task_id: Annotated[str | None, typer.Argument(help="Task id (default: the worker's task).", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """What an agent sees for a task: project, epic, task, worker and every rail (with -w, the holder's read is recorded, as step-start and QA require)."""
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

    @task_app.command("wait")
    def task_wait(
        worker: Annotated[str, typer.Option("--worker", "-w", envvar=WORKER_ENV, help=f"The waiting worker (env {WORKER_ENV}).", show_default=False)],
        status: Annotated[
            list[str] | None, typer.Option("--status", "-s", help="PLANNING, WORKING (default) or REVIEW; repeatable.", show_default=False)
        ] = None,
        epic: EpicOpt = None,
        team: Annotated[str | None, typer.Option("--team", help="Wait as a member of this team (its column by default).", show_default=False)] = None,
        timeout: TimeoutOpt = 300.0,
        poll: PollOpt = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Block until a task the worker may claim appears (it does not claim it), a human comments on its task, or a chat
        message is for it; woken by file changes, made by any process."""
        with reporting(as_json):
            statuses = status or (None if team else ["WORKING"])
            result = waiting.wait_for_task(
                _watching(root), statuses=statuses, worker_id=worker, epic_id=epic, team_id=team, timeout_ms=_seconds(timeout), poll=poll
            )
        emit(result, as_json, text=_woke(result))

    @task_app.command("comment")
    def task_comment(
        task_id: TaskArg,
        text: Annotated[str, typer.Argument(help="The comment ('-' reads stdin).", show_default=False)],
        question: Annotated[bool, typer.Option("--question", help="An agent's question for a human: the task waits for the answer.")] = False,
        reply_to: Annotated[str | None, typer.Option("--reply-to", help="The comment this answers.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Comment on a task. A human's comment answers the agents' open questions on it."""
        with reporting(as_json):
            content = read_stdin_if(text) if text == "-" else text
            result = conversation.add_comment(_context(root), task_id=task_id, content=content, worker_id=worker, question=question, reply_to=reply_to)
        answered = f"; answers {', '.join(result['answered'])}" if result["answered"] else ""
        _done(result, as_json, f"{result['commentId']}{answered}; {result['openQuestions']} question(s) still open")

    @task_app.command("comments")
    def task_comments(task_id: TaskArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """A task's comments, oldest first; open questions are marked."""
        with reporting(as_json):
            result = conversation.list_comments(_context(root), task_id=task_id)
        waiting_ids = set(result["openQuestions"])
        rows = [f"{c['timestamp']}  {c['author']}{' ?' if c['id'] in waiting_ids else ''}: {c['content']}  ({c['id']})" for c in result["comments"]]
        _done(result, as_json, "\n".join(rows) or "no comments")

    @task_app.command("amend")
    def task_amend(
        task_id: TaskArg,
        step_id: Annotated[str, typer.Argument(help="Step id (step-1, ...).", show_default=False)],
        description: Annotated[str, typer.Option("--description", "-d", help="The step's new instructions, in full.", show_default=False)],
        reason: Annotated[str, typer.Option("--reason", "-r", help="Why.", show_default=False)],
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Amend one step of a plan (an agent's amendment waits for `moss task approve` in CONTROL mode)."""
        with reporting(as_json):
            result = governance.amend_plan_step(_context(root), task_id=task_id, step_id=step_id, description=description, reason=reason, worker_id=worker)
        emit(result, as_json, text=result["message"])

    @task_app.command("replan")
    def task_replan(
        task_id: TaskArg,
        reason: Annotated[str, typer.Option("--reason", "-r", help="Why the plan does not work.", show_default=False)],
        step: Annotated[str | None, typer.Option("--step", help="Where it broke down.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Send a WORKING task back to PLANNING for a new plan (the old one is kept as priorAttempt)."""
        with reporting(as_json):
            result = governance.request_replan(_context(root), task_id=task_id, reason=reason, step_id=step, worker_id=worker)
        emit(result, as_json, text=result["message"])

    @task_app.command("critique")
    def task_critique(
        task_id: TaskArg,
        verdict: Annotated[str, typer.Argument(help="pass or block.", show_default=False)],
        concern: Annotated[list[str] | None, typer.Option("--concern", help="What is wrong (repeatable; needed to block).", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """A verdict on a task's plan; block sends an AWAITING_APPROVAL or WORKING task back to PLANNING."""
        with reporting(as_json):
            result = governance.submit_plan_critique(_context(root), task_id=task_id, verdict=verdict, concerns=concern, worker_id=worker)
        emit(result, as_json, text=f"{task_id} {result['status']} ({result['verdict']})")

    @task_app.command("budget")
    def task_budget(
        task_id: TaskArg,
        minutes: Annotated[float, typer.Argument(help="Wall-clock budget from first claim to DONE, in minutes; 0 clears.", show_default=False)],
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Set or clear a task's wall-clock budget."""
        with reporting(as_json):
            result = governance.set_task_budget(_context(root), task_id=task_id, wall_clock_ms=round(minutes * 60_000))
        budget = result["budget"]
        emit(result, as_json, text=f"{task_id} budget {budget['wallClockMs'] / 60000:g} min" if budget else f"{task_id} has no budget")

    @task_app.command("handoffs")
    def task_handoffs(task_id: TaskArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Notes left by the workers who released a task, newest first."""
        with reporting(as_json):
            result = governance.get_handoff_history(_context(root), task_id=task_id)
        rows = [f"{h['releasedAt']}  {h['releasedBy']}: done: {h['whatIsDone'] or '-'}; remains: {h['whatRemains'] or '-'}" for h in result["priorHandoffs"]]
        emit(result, as_json, text="\n".join(rows) or "no handoff notes")

    @task_app.command("archive")
    def task_archive(task_id: TaskArg, reason: ReasonOpt = None, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Shelve a BACKLOG, REVIEW or DONE task (ARCHIVED)."""
        with reporting(as_json):
            result = editing.archive_task(_context(root), task_id=task_id, reason=reason)
        emit(result, as_json, text=f"{task_id} {result['status']}")

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
        source = _source_lines(result.get("source"))
        emit(result, as_json, text="\n".join([head, *(f"  {_row(t)}" for t in result["tasks"]), *([""] + source if source else [])]))

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

    @epic_app.command("archive")
    def epic_archive(epic_id: EpicArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Archive an epic and all its tasks (refused while one is in flight)."""
        with reporting(as_json):
            result = editing.archive_epic(_context(root), epic_id=epic_id)
        emit(result, as_json, text=f"{epic_id} {result['epicStatus']}; {result['archivedTaskCount']} task(s) archived")

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

    @worker_app.command("heartbeat")
    def worker_heartbeat(
        worker: Annotated[str, typer.Option("--worker", "-w", envvar=WORKER_ENV, help=f"The worker (env {WORKER_ENV}).", show_default=False)],
        task: Annotated[str | None, typer.Option("--task", help="The task it holds (checked).", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """The worker is alive: its lease starts again (exit 5, LEASE_EXPIRED, once the lease ran out)."""
        with reporting(as_json):
            result = leases.heartbeat(_context(root), worker_id=worker, task_id=task)
        held = f"; holds {result['currentTaskId']} until {result['leaseExpiresAt']}" if result["currentTaskId"] else ""
        emit(result, as_json, text=f"{worker} alive at {result['lastHeartbeat']}{held}")

    @worker_app.command("deregister")
    def worker_deregister(
        worker_id: Annotated[str, typer.Argument(help="Worker id.", show_default=False)],
        reason: ReasonOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """The worker is gone: DEAD, its tasks released to their columns."""
        with reporting(as_json):
            result = leases.deregister_worker(_context(root), worker_id=worker_id, reason=reason)
        emit(result, as_json, text=result["message"])

    @worker_app.command("sweep")
    def worker_sweep(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Release now every task whose holder's lease ran out (any write does it anyway)."""
        with reporting(as_json):
            result = leases.sweep(_context(root))
        rows = [f"{r['taskId']}  {r['status']}  released from {r['workerId']}" for r in result["released"]]
        emit(result, as_json, text="\n".join(rows) or "no lease has run out")

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
        """Approve or reject a rail proposal; an approval applies it to the rails (logged as RAILS_UPDATED)."""
        with reporting(as_json):
            result = plans.resolve_proposal(_context(root), proposal_id=proposal_id, decision=decision)
        emit(result, as_json, text=f"{proposal_id} {result['proposal']['status']}")

    @board_app.command("questions")
    def board_questions(
        awaiting: Annotated[str, typer.Option("--awaiting", help="human (default): agents' questions; agent: human comments to answer.")] = "human",
        epic: EpicOpt = None,
        archived: Annotated[bool, typer.Option("--archived", help="Include ARCHIVED tasks.")] = False,
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many tasks.")] = 50,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Questions waiting for an answer; answer one with `moss task comment TASK "..."`."""
        with reporting(as_json):
            result = conversation.get_pending_questions(
                _context(root), epic_id=epic, include_archived=archived, limit=limit, max_questions_per_task=20, max_content_chars=0, awaiting=awaiting
            )
        rows = [
            f"{t['taskId']}  {t['title']}\n" + "\n".join(f"  {q['author']}: {q['content']}  ({q['commentId']})" for q in t["questions"])
            for t in result["tasks"]
        ]
        _done(result, as_json, "\n".join(rows) or "no open questions")

    @board_app.command("metrics")
    def board_metrics(
        epic: EpicOpt = None,
        since: Annotated[str | None, typer.Option("--since", help="Only tasks changed since this ISO 8601 time.", show_default=False)] = None,
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many tasks.")] = 100,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Per-task metrics and their aggregate (wall clock, first-pass approval, reopens, budgets)."""
        with reporting(as_json):
            result = governance.list_metrics(_context(root), epic_id=epic, since_iso=since, limit=limit)
        total = result["aggregate"]
        _done(
            result,
            as_json,
            f"{total['taskCount']} {'task' if total['taskCount'] == 1 else 'tasks'}, {total['doneCount']} done, first-pass approval {total['firstPassApprovalPct']}%, "
            f"average reopens {total['avgReopens']}, {total['overBudgetCount']} over budget",
        )

    @board_app.command("init-project")
    def board_init_project(
        name: Annotated[str | None, typer.Option("--name", help="Project name (default: the folder's).", show_default=False)] = None,
        force: Annotated[bool, typer.Option("--force", help="Re-create missing parts of an initialized project.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """What moe.init_project does: folders, git settings and project.md (nothing existing replaced)."""
        with reporting(as_json):
            result = editing.init_project(_context(root, init=True), name=name, force=force)
        emit(result, as_json, text=result["message"])

    register_chat(board_app)


def register_chat(board_app: typer.Typer) -> None:
    """`moss board chat …`: Moe's chat for humans (and agents with --worker)."""
    chat_app = new_app("Chat: channels general, architects, workers, qa, governors, one per task and epic, and custom ones.")
    board_app.add_typer(chat_app, name="chat")

    @chat_app.command("send")
    def chat_send(
        channel: ChannelArg,
        text: Annotated[str, typer.Argument(help="The message ('-' reads stdin); @worker, @all, @workers … mention.", show_default=False)],
        reply_to: Annotated[str | None, typer.Option("--reply-to", help="The message this answers.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Send a message (as `human`, or as --worker)."""
        with reporting(as_json):
            content = read_stdin_if(text) if text == "-" else text
            result = conversation.chat_send(_context(root), channel=channel, content=content, worker_id=worker, reply_to=reply_to)
        targets = f" -> {', '.join(result['routingTargets'])}" if result["routingTargets"] else ""
        _done(result, as_json, f"{result['messageId']}{targets}")

    @chat_app.command("read")
    def chat_read(
        channel: Annotated[str | None, typer.Argument(help="Channel (default: every channel).", show_default=False)] = None,
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many (max 200).")] = 20,
        since: Annotated[str | None, typer.Option("--since", help="Messages after this one.", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Read messages, oldest first (with --worker: from where that worker stopped, moving its position)."""
        with reporting(as_json):
            result = conversation.chat_read(_context(root), channel=channel, worker_id=worker, since_id=since, limit=limit, max_content_chars=0)
        rows = [f"{m['timestamp']}  #{m['channel']}  {m['sender']}: {m['content']}" for m in result["messages"]]
        _done(result, as_json, "\n".join(rows) or "no messages")

    @chat_app.command("channels")
    def chat_channels(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Every channel with its message count."""
        with reporting(as_json):
            result = conversation.chat_channels(_context(root))
        rows = [f"#{c['id']:<24} {c['type']:<8} {c['messageCount']} message(s)" for c in result["channels"]]
        _done(result, as_json, "\n".join(rows))

    @chat_app.command("create")
    def chat_create(name: Annotated[str, typer.Argument(help="Channel name.", show_default=False)], root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Create a custom channel."""
        with reporting(as_json):
            result = conversation.chat_create_channel(_context(root), name=name)
        emit(result, as_json, text=f"#{result['channel']['id']}{'' if result['created'] else ' (exists)'}")

    @chat_app.command("join")
    def chat_join(channel: ChannelArg, worker: WorkerOpt = None, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Join a channel; prints who is online."""
        with reporting(as_json):
            result = conversation.chat_join(_context(root), channel=channel, worker_id=worker)
        emit(result, as_json, text="online: " + (", ".join(w["id"] for w in result["onlineWorkers"]) or "nobody"))

    @chat_app.command("who")
    def chat_who(
        channel: Annotated[str | None, typer.Argument(help="Only this channel's members.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Workers online (heard from within two minutes)."""
        with reporting(as_json):
            result = conversation.chat_who(_context(root), channel=channel)
        emit(result, as_json, text="\n".join(f"{w['workerId']}  {w['status']}  {w['currentTaskId'] or '-'}" for w in result["online"]) or "nobody online")

    @chat_app.command("pin")
    def chat_pin(
        channel: ChannelArg,
        message_id: Annotated[str, typer.Argument(help="Message id.", show_default=False)],
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Pin a message."""
        with reporting(as_json):
            result = conversation.chat_pin(_context(root), channel=channel, message_id=message_id, worker_id=worker)
        emit(result, as_json, text=f"pinned {message_id}")

    @chat_app.command("unpin")
    def chat_unpin(
        channel: ChannelArg,
        message_id: Annotated[str, typer.Argument(help="Message id.", show_default=False)],
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Unpin a message."""
        with reporting(as_json):
            result = conversation.chat_unpin(_context(root), channel=channel, message_id=message_id, worker_id=worker)
        emit(result, as_json, text=f"unpinned {message_id}" if result["unpinned"] else f"{message_id} was not pinned")

    @chat_app.command("pins")
    def chat_pins(channel: ChannelArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """A channel's pinned messages."""
        with reporting(as_json):
            result = conversation.chat_pins(_context(root), channel=channel)
        rows = [f"{p['messageId']}  {(p['message'] or {}).get('content', '(message not found)')}" for p in result["pins"]]
        _done(result, as_json, "\n".join(rows) or "nothing pinned")

    @chat_app.command("decision")
    def chat_decision(
        text: Annotated[str, typer.Argument(help="What is proposed.", show_default=False)],
        channel: Annotated[str | None, typer.Option("--channel", help="Where to announce it (default general).", show_default=False)] = None,
        worker: WorkerOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Propose a decision for a human."""
        with reporting(as_json):
            result = conversation.chat_decision(_context(root), content=text, channel=channel, worker_id=worker)
        emit(result, as_json, text=result["decision"]["id"])

    @chat_app.command("decisions")
    def chat_decisions(
        status: Annotated[str | None, typer.Option("--status", "-s", help="proposed, approved or rejected.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Decisions proposed in any channel."""
        with reporting(as_json):
            result = conversation.list_decisions(_context(root), status=status)
        _done(
            result,
            as_json,
            "\n".join(f"{d['id']}  {d['status']:<8} #{d['channel']}  {d['proposedBy']}: {d['content']}" for d in result["decisions"]) or "no decisions",
        )

    @chat_app.command("decide")
    def chat_decide(
        decision_id: Annotated[str, typer.Argument(help="Decision id (DEC-…).", show_default=False)],
        verdict: Annotated[str, typer.Argument(help="approved or rejected.", show_default=False)],
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """A human's verdict on a proposed decision."""
        with reporting(as_json):
            result = conversation.resolve_decision(_context(root), decision_id=decision_id, verdict=verdict)
        emit(result, as_json, text=f"{decision_id} {result['decision']['status']}")

    @chat_app.command("wait")
    def chat_wait(
        worker: Annotated[str, typer.Option("--worker", "-w", envvar=WORKER_ENV, help=f"The waiting worker (env {WORKER_ENV}).", show_default=False)],
        channel: Annotated[list[str] | None, typer.Option("--channel", "-c", help="Only this channel (repeatable).", show_default=False)] = None,
        timeout: TimeoutOpt = 300.0,
        poll: PollOpt = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """The worker's unread messages; if none, wait for the next ones."""
        with reporting(as_json):
            result = waiting.chat_wait(_watching(root), worker_id=worker, channels=channel, timeout_ms=_seconds(timeout), max_content_chars=0, poll=poll)
        rows = [f"#{m['channel']}  {m['sender']}: {m['content']}" for m in result.get("messages", [])]
        emit(result, as_json, text="\n".join(rows) or ("cancelled" if result.get("cancelled") else f"nothing after {result['waitedMs'] / 1000:g}s"))

    @chat_app.command("resync")
    def chat_resync(
        worker: Annotated[str, typer.Option("--worker", "-w", envvar=WORKER_ENV, help=f"The worker (env {WORKER_ENV}).", show_default=False)],
        channel: Annotated[str | None, typer.Argument(help="Only this channel.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Forget a worker's read positions and show the newest messages again."""
        with reporting(as_json):
            result = conversation.chat_resync(_context(root), worker_id=worker, channel=channel)
        emit(result, as_json, text=f"{result['messagesCount']} message(s); positions reset")


def _whole(value: float | None) -> int | float | None:
    """An --order as typed: 3 stays an int, 2.5 a float."""
    return int(value) if value is not None and value == int(value) else value

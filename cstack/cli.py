"""The `cstack` command line: an agent's memory files (.cstack/CURRENT.md, PLAN.md, MEMORY.md).

Entry layer: parse input, call `cstack.service`, render output. stdout carries data only (one
JSON document with --json); notes and errors go to stderr. Dates written into the files are
today's UTC date from the system clock, or from the MOSS_NOW environment variable when it is
set (an RFC 3339 time or a plain YYYY-MM-DD date; a testing aid for reproducible dates).

Tasks are named by their number in `cstack plan`, by their `id:`, or by a unique
case-insensitive prefix of their title.
"""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from cstack import memory, plan, service
from moss_files.foundation import workspace
from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, reporting
from moss_files.foundation.errors import InvalidRequest

NOW_ENV = "MOSS_NOW"

app = new_app(
    "Cortical-stack memory files: what you are doing (CURRENT.md), the plan (PLAN.md) and "
    "lasting knowledge (MEMORY.md), kept as markdown in .cstack/. Exit codes: 0 ok, 2 bad "
    "arguments, 3 not found, 4 malformed file or dependency cycle, 5 conflict, 6 no workspace. "
    f"Dates are today's UTC date, or the date of ${NOW_ENV} (RFC 3339) when set."
)

TaskArg = Annotated[str, typer.Argument(metavar="TASK", help="Task number (see `cstack plan`), id, or title prefix.", show_default=False)]


def today() -> date:
    """Today's date (UTC), from MOSS_NOW when it is set. Raises InvalidRequest for a bad value."""
    raw = os.environ.get(NOW_ENV, "").strip()
    if not raw:
        return datetime.now(UTC).date()
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(f"{NOW_ENV}={raw!r} is not an RFC 3339 time or a YYYY-MM-DD date") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.date()


def _root(root: Path | None) -> Path:
    return workspace.find_workspace(explicit=root)


def _stack_root(root: Path | None) -> Path:
    found = _root(root)
    service.require_stack(found)
    return found


def _warn(warnings: tuple[str, ...] | list[str], path: Path) -> None:
    for warning in warnings:
        note(f"warning: {path}: {warning}")


def _task_line(task: plan.Task) -> str:
    return f"{task.number:>3}. {task.text.strip()}"


# --------------------------------------------------------------------------- setup


@app.command("init")
def init(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be created; write nothing.")] = False,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create .cstack/ with CURRENT.md, PLAN.md and MEMORY.md where missing; never overwrites a file."""
    from moss_files import scaffold  # only init needs the scaffold; keep other commands' start-up light

    with reporting(as_json):
        target = workspace.init_root(explicit=root)
        actions = scaffold.plan_scaffold(target, parts=("cstack",))
        if not dry_run:
            actions = scaffold.apply_scaffold(target, actions)
    for action in actions:
        note(scaffold.render_action(action, dry_run=dry_run))
    note(scaffold.summary_line(target, actions, dry_run=dry_run))
    emit(scaffold.report_to_dict(target, actions, dry_run=dry_run), as_json, text="")


# --------------------------------------------------------------------------- reading


@app.command("status")
def status(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """Show CURRENT.md: status, task, focus, next steps, blockers, progress, last modified."""
    with reporting(as_json):
        state = service.read_status(_stack_root(root))
    data = service.status_to_dict(state)
    emit(data, as_json, text=_status_text(data))


def _status_text(data: dict[str, Any]) -> str:
    progress = data["progress"]
    lines = [
        f"status:        {data['status'] or '-'} ({data['state']})",
        f"task:          {data['task'] or '-'}",
    ]
    if data["started"]:
        lines.append(f"started:       {data['started']}")
    focus = (data["focus"] or "-").splitlines()
    lines.append(f"focus:         {focus[0]}")
    lines.extend(f"               {line}" for line in focus[1:])
    lines.append(f"progress:      {progress['completed']}/{progress['total']}")
    lines.append(f"blockers:      {'; '.join(data['blockers']) or '-'}")
    lines.append("next steps:" + ("" if data["next_steps"] else "    -"))
    lines.extend(f"  {number}. {step}" for number, step in enumerate(data["next_steps"], start=1))
    lines.append(f"last modified: {data['last_modified'] or '-'}")
    return "\n".join(lines)


@app.command("plan")
def plan_command(
    statuses: Annotated[
        list[str] | None,
        typer.Option("--status", help="pending, in_progress, done, blocked, closed, open or ready. Repeatable.", show_default=False),
    ] = None,
    labels: Annotated[list[str] | None, typer.Option("--label", help="Only tasks with this #label. Repeatable (all must match).", show_default=False)] = None,
    priorities: Annotated[list[str] | None, typer.Option("--priority", help="P0 to P3. Repeatable.", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List PLAN.md's tasks, numbered, grouped by section."""
    with reporting(as_json):
        found = _stack_root(root)
        parsed = service.read_plan(found)
        chosen = plan.filter_tasks(parsed, statuses=statuses or (), labels=labels or (), priorities=priorities or ())
    _warn(parsed.warnings, service.plan_path(found))
    data = {"tasks": [plan.task_to_dict(task) for task in chosen], "stats": plan.plan_stats(parsed), "warnings": list(parsed.warnings)}
    emit(data, as_json, text=_grouped(chosen))
    if not chosen and not as_json:
        note("no tasks match" if (statuses or labels or priorities) else "no tasks yet; add one with `cstack add`")


def _grouped(tasks: tuple[plan.Task, ...]) -> str:
    lines: list[str] = []
    heading: tuple[str, ...] | None = None
    for task in tasks:
        if task.section != heading:
            heading = task.section
            lines.append(f"## {' / '.join(task.section) or '(no section)'}")
        lines.append(_task_line(task))
    return "\n".join(lines)


@app.command("ready")
def ready(
    task: Annotated[
        str | None,
        typer.Argument(metavar="[TASK]", help="Put this blocked or started task back to pending `[ ]`.", show_default=False),
    ] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List pending tasks whose dependencies are all done; with TASK, set that task back to pending."""
    if task is not None:
        _transition("ready", task, None, root, as_json)
        return
    with reporting(as_json):
        parsed = service.read_plan(_stack_root(root))
        tasks = plan.ready_tasks(parsed)
    emit({"tasks": [plan.task_to_dict(t) for t in tasks]}, as_json, text="\n".join(_task_line(t) for t in tasks))
    if not tasks and not as_json:
        note("no task is ready")


@app.command("blocked")
def blocked(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List blocked tasks and why: the `blocked:` reason and any unmet dependencies."""
    with reporting(as_json):
        parsed = service.read_plan(_stack_root(root))
        items = plan.blocked_tasks(parsed)
    lines = []
    for item in items:
        lines.append(_task_line(item.task))
        if item.reason:
            lines.append(f"       reason: {item.reason}")
        for dep in item.waiting_on:
            state = "no task has this id" if dep.status == "unknown" else f"{dep.status}: {dep.title}"
            lines.append(f"       waiting on {dep.id} ({state})")
    emit({"tasks": [plan.blocked_to_dict(item) for item in items]}, as_json, text="\n".join(lines))
    if not items and not as_json:
        note("nothing is blocked")


@app.command("graph")
def graph(
    task: Annotated[str | None, typer.Argument(metavar="[TASK]", help="Draw only this task's dependencies.", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Draw the `depends:` graph as a tree; a dependency cycle is an error (exit 4) naming the cycle."""
    with reporting(as_json):
        found = _stack_root(root)
        parsed = service.read_plan(found)
        drawn = plan.dependency_graph(parsed, task, service.plan_path(found))
        text = plan.render_graph(parsed, drawn)
    emit({**plan.graph_to_dict(drawn), "text": text}, as_json, text=text)
    if not drawn.roots and not as_json:
        note("no task declares dependencies")


@app.command("stale")
def stale(
    days: Annotated[int, typer.Option("--days", min=0, help="Report open tasks not modified for more than this many days.")] = 7,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List open tasks whose `modified:` date is more than --days days old (and those without one)."""
    with reporting(as_json):
        parsed = service.read_plan(_stack_root(root))
        report = plan.stale_tasks(parsed, today(), days)
    lines = [f"{_task_line(task)}   ({age} days)" for task, age in report.stale]
    if report.undated:
        lines.append("without a modified: date:")
        lines.extend(_task_line(task) for task in report.undated)
    emit(plan.stale_to_dict(report), as_json, text="\n".join(lines))
    if not report.stale and not as_json:
        note(f"no open task is older than {days} days")


@app.command("memory")
def memory_command(
    category: Annotated[str | None, typer.Option("--category", help="decisions, gotchas, preferences or facts.", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List MEMORY.md's entries by category."""
    with reporting(as_json):
        parsed = service.read_memory(_stack_root(root))
        wanted = memory.category_of(category) if category else None
    data = memory.memory_to_dict(parsed)
    if wanted:
        data = {wanted: data[wanted]}
    lines = []
    for name, entries in data.items():
        if entries:
            lines.append(f"## {name}")
            lines.extend(f"- {e['date'] + ': ' if e['date'] else ''}{e['text']}" for e in entries)
    emit(data, as_json, text="\n".join(lines))


@app.command("stats")
def stats(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """Count tasks: {exists, open, ready, in_progress, blocked, closed, total}."""
    with reporting(as_json):
        data = service.stats(_root(root))
    emit(data, as_json, text="  ".join(f"{key} {value}" for key, value in data.items()))


# --------------------------------------------------------------------------- changing


@app.command("add")
def add(
    spec: Annotated[str, typer.Argument(metavar="TASK", help='The task, e.g. "P1: Title #label" (priority and labels optional).', show_default=False)],
    ident: Annotated[str | None, typer.Option("--id", help="An id other tasks can depend on.", show_default=False)] = None,
    depends: Annotated[list[str] | None, typer.Option("--depends", help="Ids this task waits for (repeatable, or comma-separated).", show_default=False)] = None,
    parent: Annotated[str | None, typer.Option("--parent", help="Id of the parent task.", show_default=False)] = None,
    section: Annotated[
        str, typer.Option("--section", help="tasks, backlog, backlog-bugs, backlog-debt or backlog-ideas.")
    ] = "tasks",
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a pending task to PLAN.md."""
    ids = [part.strip() for item in depends or () for part in item.split(",") if part.strip()]
    with reporting(as_json):
        made = service.add_task(_stack_root(root), spec, today(), ident=ident, depends=ids, parent=parent, section=section.casefold())
    emit(plan.change_to_dict(made), as_json, text=_task_line(made.task))


def _transition(action: str, ref: str | None, reason: str | None, root: Path | None, as_json: bool) -> None:
    with reporting(as_json):
        found = _stack_root(root)
        applied = service.apply(found, action, ref, today(), reason=reason)
        if action == "start":
            unmet = [dep.id for dep in plan.dependencies(service.read_plan(found), applied.change.task) if not dep.met]
            if unmet:
                note(f"note: started although it waits on {', '.join(unmet)}")
    change = applied.change
    if change.moved_from is not None and not as_json:
        note(f"moved from {' / '.join(change.moved_from) or '(no section)'} to {' / '.join(change.task.section)}")
    if applied.current_updated and not as_json:
        note("updated CURRENT.md's active task")
    emit(service.applied_to_dict(applied), as_json, text=_task_line(change.task))


@app.command("start")
def start(task: TaskArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """Mark a task in progress `[>]` (a Backlog item moves to Tasks) and make it CURRENT.md's active task."""
    _transition("start", task, None, root, as_json)


@app.command("done")
def done(
    task: Annotated[str | None, typer.Argument(metavar="[TASK]", help="The task (default: the one task in progress).", show_default=False)] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why it is done (recorded as `reason:`).", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mark a task completed `[x]` with today's `closed:` date and move it to Completed."""
    _transition("done", task, reason, root, as_json)


@app.command("close")
def close(
    task: TaskArg,
    reason: Annotated[str, typer.Option("--reason", help="Why it is dropped (required).", show_default=False)],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Close a task without finishing it `[~]`, with a reason, and move it to Closed."""
    _transition("close", task, reason, root, as_json)


@app.command("block")
def block(
    task: TaskArg,
    reason: Annotated[str, typer.Option("--reason", help="What it waits for (required; recorded as `blocked:`).", show_default=False)],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mark a task blocked `[!]` with the reason."""
    _transition("block", task, reason, root, as_json)


@app.command("reopen")
def reopen(task: TaskArg, root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """Reopen a completed or closed task: back to pending `[ ]` and into Tasks."""
    _transition("reopen", task, None, root, as_json)


@app.command("remember")
def remember(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="What to remember (one line).", show_default=False)],
    category: Annotated[
        str | None,
        typer.Option("--category", help="decisions, gotchas, preferences or facts (default: chosen by keywords).", show_default=False),
    ] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add an entry to MEMORY.md under its category."""
    with reporting(as_json):
        done_entry = service.remember(_stack_root(root), text, today(), category)
    entry = done_entry.entry
    emit(memory.entry_to_dict(entry), as_json, text=f"{entry.category}: {entry.text}")


def main() -> None:
    """Console-script entry point."""
    app()


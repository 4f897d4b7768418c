"""The `cstack` command line: an agent's memory files (.cstack/CURRENT.md, PLAN.md, MEMORY.md).

Entry layer: parse input, call a `cstack` use case, render the dict it returns. stdout carries
data only (one JSON document with --json, the same the MCP tool returns); notes and errors go to
stderr. The use cases resolve through the package's lazy names, so each command loads only the
modules it needs. Dates written into the files are today's UTC date from the system clock, or
from the MOSS_NOW environment variable when it is set (an RFC 3339 time or a plain YYYY-MM-DD
date; a testing aid for reproducible dates).

Tasks are named by their number in `cstack plan`, by their `id:`, or by a unique
case-insensitive prefix of their title.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

import cstack
from cstack import quick
from moss_files.cli.support import JsonOpt, RootOpt, VersionOpt, emit, new_app, note, reporting, warn_if_clone_lacks_merge_driver
from moss_files.foundation import workspace
from moss_files.foundation.context import Context

app = new_app(
    "Cortical-stack memory files: what you are doing (CURRENT.md), the plan (PLAN.md) and "
    "lasting knowledge (MEMORY.md), kept as markdown in .cstack/. Exit codes: 0 ok, 2 bad "
    "arguments, 3 not found, 4 malformed file or dependency cycle, 5 conflict, 6 no workspace. "
    f"Dates are today's UTC date, or the date of ${quick.NOW_ENV} (RFC 3339) when set."
)


@app.callback()
def _cstack(version: VersionOpt = False) -> None:
    """The group's own options (`--version`); its help is the app's."""


TaskArg = Annotated[str, typer.Argument(metavar="TASK", help="Task number (see `cstack plan`), id, or title prefix.", show_default=False)]


def _context(root: Path | None) -> Context:
    return quick.context(root, note)


# --------------------------------------------------------------------------- setup


@app.command("init")
def init(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be created; write nothing.")] = False,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create .cstack/ with CURRENT.md, PLAN.md and MEMORY.md where missing; never overwrites a file."""
    with reporting(as_json):
        data = cstack.init_stack(Context(workspace.init_root(explicit=root), notify=note), dry_run=dry_run)
    emit(data, as_json, text="")


# --------------------------------------------------------------------------- reading


@app.command("status")
def status(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """Show CURRENT.md: status, task, focus, next steps, blockers, progress, last modified."""
    with reporting(as_json):
        data = cstack.show_status(_context(root))
    for line in quick.status_notes(data):
        note(line)
    emit(data, as_json, text=quick.status_text(data))


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
        data = cstack.list_tasks(_context(root), statuses=statuses or (), labels=labels or (), priorities=priorities or ())
    emit(data, as_json, text=_grouped(data["tasks"]))
    if not data["tasks"] and not as_json:
        note("no tasks match" if (statuses or labels or priorities) else "no tasks yet; add one with `cstack add`")


def _grouped(tasks: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    heading: str | None = None
    for task in tasks:
        if task["section"] != heading:
            heading = task["section"]
            lines.append(f"## {quick.section(heading) or '(no section)'}")
        lines.append(quick.task_line(task))
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
        data = cstack.list_ready(_context(root))
    emit(data, as_json, text="\n".join(quick.task_line(t) for t in data["tasks"]))
    if not data["tasks"] and not as_json:
        note("no task is ready")


@app.command("blocked")
def blocked(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List blocked tasks and why: the `blocked:` reason and any unmet dependencies."""
    with reporting(as_json):
        data = cstack.list_blocked(_context(root))
    lines = []
    for item in data["tasks"]:
        lines.append(quick.task_line(item["task"]))
        if item["reason"]:
            lines.append(f"       reason: {item['reason']}")
        for dep in item["waiting_on"]:
            state = "no task has this id" if dep["status"] == "unknown" else f"{dep['status']}: {dep['title']}"
            lines.append(f"       waiting on {dep['id']} ({state})")
    emit(data, as_json, text="\n".join(lines))
    if not data["tasks"] and not as_json:
        note("nothing is blocked")


@app.command("graph")
def graph(
    task: Annotated[str | None, typer.Argument(metavar="[TASK]", help="Draw only this task's dependencies.", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Draw the `depends:` graph as a tree; a dependency cycle is an error (exit 4) naming the cycle."""
    with reporting(as_json):
        data = cstack.draw_graph(_context(root), task=task)
    emit(data, as_json, text=data["text"])
    if not data["roots"] and not as_json:
        note("no task declares dependencies")


@app.command("stale")
def stale(
    days: Annotated[int, typer.Option("--days", min=0, help="Report open tasks not modified for more than this many days.")] = 7,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List open tasks whose `modified:` date is more than --days days old (and those without one)."""
    with reporting(as_json):
        data = cstack.list_stale(_context(root), days=days)
    lines = [f"{quick.task_line(task)}   ({task['age_days']} days)" for task in data["stale"]]
    if data["undated"]:
        lines.append("without a modified: date:")
        lines.extend(quick.task_line(task) for task in data["undated"])
    emit(data, as_json, text="\n".join(lines))
    if not data["stale"] and not as_json:
        note(f"no open task is older than {days} days")


@app.command("memory")
def memory_command(
    category: Annotated[str | None, typer.Option("--category", help="decisions, gotchas, preferences or facts.", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List MEMORY.md's entries by category."""
    with reporting(as_json):
        data = cstack.list_memory(_context(root), category=category)
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
        data = cstack.count_tasks(_context(root))
    emit(data, as_json, text="  ".join(f"{key} {value}" for key, value in data.items()))


# --------------------------------------------------------------------------- changing


@app.command("add")
def add(
    spec: Annotated[str, typer.Argument(metavar="TASK", help='The task, e.g. "P1: Title #label" (priority and labels optional).', show_default=False)],
    ident: Annotated[str | None, typer.Option("--id", help="An id other tasks can depend on.", show_default=False)] = None,
    depends: Annotated[
        list[str] | None, typer.Option("--depends", help="Ids this task waits for (repeatable, or comma-separated).", show_default=False)
    ] = None,
    parent: Annotated[str | None, typer.Option("--parent", help="Id of the parent task.", show_default=False)] = None,
    section: Annotated[str, typer.Option("--section", help="tasks, backlog, backlog-bugs, backlog-debt or backlog-ideas.")] = "tasks",
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a pending task to PLAN.md."""
    ids = quick.depends_ids(depends)
    with reporting(as_json):
        data = cstack.add_task(_context(root), task=spec, ident=ident, depends=ids, parent=parent, section=section)
    emit(data, as_json, text=quick.task_line(data["task"]))


def _transition(action: str, task: str | None, reason: str | None, root: Path | None, as_json: bool) -> None:
    with reporting(as_json):
        data = cstack.transition(_context(root), action=action, task=task, reason=reason)
    if not as_json:
        for line in quick.transition_notes(data):
            note(line)
    emit(data, as_json, text=quick.task_line(data["task"]))


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
        data = cstack.remember(_context(root), text=text, category=category)
    emit(data, as_json, text=quick.remember_line(data))


def main() -> None:
    """Console-script entry point."""
    warn_if_clone_lacks_merge_driver(sys.argv[1:])
    app()

"""The `cstack` tool set: the memory files (.cstack/CURRENT.md, PLAN.md, MEMORY.md) as MCP
tools. Entry layer: each tool calls the `cstack` use case its `cstack` command calls and
returns the dict that command prints with --json (tests/test_mcp.py holds them equal). The
use cases resolve through the package's lazy names on the first call, out of the server's
start-up.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

import cstack
from moss_files.mcp.server import ToolRegistry

TaskRef = Annotated[str, Field(description="Task number (as in cstack.plan), id, or a unique title prefix.")]


def register(tools: ToolRegistry) -> None:
    """Declare the memory tools."""
    ws = tools.context

    @tools.tool("cstack.status", "CURRENT.md: status, task, focus, next steps, blockers, progress, last modified.", read_only=True)
    def status() -> dict[str, Any]:
        return cstack.show_status(ws)

    @tools.tool("cstack.plan", "PLAN.md's tasks, filtered: {tasks, stats, warnings}.", read_only=True)
    def plan_(
        status: Annotated[list[str] | None, Field(description="pending, in_progress, done, blocked, closed, open or ready.")] = None,
        label: Annotated[list[str] | None, Field(description="Only tasks with all these #labels.")] = None,
        priority: Annotated[list[str] | None, Field(description="P0 to P3.")] = None,
    ) -> dict[str, Any]:
        return cstack.list_tasks(ws, statuses=status or (), labels=label or (), priorities=priority or ())

    @tools.tool("cstack.ready", "Pending tasks whose dependencies are all done: {tasks}.", read_only=True)
    def ready() -> dict[str, Any]:
        return cstack.list_ready(ws)

    @tools.tool("cstack.stats", "Task counts: {exists, open, ready, in_progress, blocked, closed, total}.", read_only=True)
    def stats() -> dict[str, Any]:
        return cstack.count_tasks(ws)

    @tools.tool("cstack.add", "Add a pending task to PLAN.md. Returns {action, task, from_status, moved_from}.")
    def add(
        task: Annotated[str, Field(description='The task, e.g. "P1: Title #label" (priority and labels optional).')],
        id: Annotated[str | None, Field(description="An id other tasks can depend on.")] = None,
        depends: Annotated[list[str] | None, Field(description="Ids this task waits for.")] = None,
        parent: Annotated[str | None, Field(description="Id of the parent task.")] = None,
        section: Annotated[str, Field(description="tasks, backlog, backlog-bugs, backlog-debt or backlog-ideas.")] = "tasks",
    ) -> dict[str, Any]:
        return cstack.add_task(ws, task=task, ident=id, depends=depends or (), parent=parent, section=section)

    @tools.tool(
        "cstack.start",
        "Mark a task in progress [>] (a Backlog item moves to Tasks) and make it CURRENT.md's active task.",
        destructive=True,
    )
    def start(task: TaskRef) -> dict[str, Any]:
        return cstack.transition(ws, action="start", task=task)

    @tools.tool("cstack.done", "Mark a task completed [x] with today's closed: date; it moves to Completed.", destructive=True)
    def done(
        task: Annotated[str | None, Field(description="The task (default: the one in progress).")] = None,
        reason: Annotated[str | None, Field(description="Why it is done (recorded as reason:).")] = None,
    ) -> dict[str, Any]:
        return cstack.transition(ws, action="done", task=task, reason=reason)

    @tools.tool("cstack.block", "Mark a task blocked [!] with what it waits for.", destructive=True)
    def block(task: TaskRef, reason: Annotated[str, Field(description="What it waits for (one line).")]) -> dict[str, Any]:
        return cstack.transition(ws, action="block", task=task, reason=reason)

    @tools.tool("cstack.close", "Close a task without finishing it [~], with a reason; it moves to Closed.", destructive=True)
    def close(task: TaskRef, reason: Annotated[str, Field(description="Why it is dropped (one line).")]) -> dict[str, Any]:
        return cstack.transition(ws, action="close", task=task, reason=reason)

    @tools.tool("cstack.remember", "Add a dated entry to MEMORY.md under its category. Returns the entry.")
    def remember(
        text: Annotated[str, Field(description="What to remember (one line).")],
        category: Annotated[str | None, Field(description="decisions, gotchas, preferences or facts (default: chosen by keywords).")] = None,
    ) -> dict[str, Any]:
        return cstack.remember(ws, text=text, category=category)

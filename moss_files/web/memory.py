"""The memory page: what CURRENT.md says is in hand, PLAN.md's tasks, MEMORY.md's entries by
category, and the tasks' dependency graph.

Shell layer: gathered through cstack's public names (`show_status`, `list_tasks`,
`list_memory`, `draw_graph`), as `cstack status|plan|memory|graph --json` call them, and
rendered with `moss_files.web.html`. A part that cannot be read (no `.cstack/`, a malformed
file, a dependency cycle) shows its error; the other parts are still shown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cstack
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError, error_body
from moss_files.web.html import Html, Page, badge, definition_list, empty, error_notice, esc, join, pre, section, table, when
from moss_files.web.markdown import render_inline

LIVE = ("memory",)


def _part(make: Callable[[], Html]) -> Html:
    try:
        return make()
    except MossError as err:
        return error_notice(error_body(err)["error"])


def memory_page(ctx: Context) -> Page:
    """CURRENT, PLAN, MEMORY and the graph, each part on its own."""
    body = [
        Html('<div class="page-head"><h1>Memory</h1></div>'),
        section("Current", _part(lambda: render_current(cstack.show_status(ctx))), anchor="current"),
        section("Plan", _part(lambda: render_plan(cstack.list_tasks(ctx))), anchor="plan"),
        section("Task graph", _part(lambda: render_graph(cstack.draw_graph(ctx))), anchor="graph"),
        section("Memory", _part(lambda: render_memory(cstack.list_memory(ctx))), anchor="memory"),
    ]
    return Page("Memory", join(body), live=LIVE)


def render_current(status: Mapping[str, Any]) -> Html:
    """CURRENT.md's state: the task in hand, focus, next steps, blockers, progress."""
    progress = status.get("progress") or {}
    shown = f"{progress.get('completed', 0)} of {progress.get('total', 0)}" if progress.get("total") else None
    fields = definition_list(
        [
            ("state", badge(status["state"], "state") if status.get("state") else None),
            ("status", status.get("status")),
            ("task", render_inline(status["task"]) if status.get("task") else None),
            ("focus", render_inline(status["focus"]) if status.get("focus") else None),
            ("progress", shown),
            ("started", when(status["started"]) if status.get("started") else None),
            ("last updated", when(status["last_updated"]) if status.get("last_updated") else None),
            ("file", Html(f"<code>{esc(status.get('path'))}</code>")),
            ("dialect", status.get("dialect")),
        ]
    )
    parts = [fields]
    for title, key in (("Next steps", "next_steps"), ("Blockers", "blockers")):
        items = status.get(key) or []
        if items:
            parts.append(Html(f"<h3>{esc(title)}</h3><ol>{''.join(f'<li>{render_inline(item)}</li>' for item in items)}</ol>"))
    for problem in status.get("problems") or []:
        parts.append(error_notice(problem))
    if not status.get("exists"):
        parts.append(empty("CURRENT.md does not exist yet."))
    return join(parts)


def render_plan(plan: Mapping[str, Any]) -> Html:
    """PLAN.md's tasks by section, with their markers, priorities, labels and dependencies."""
    stats = plan.get("stats") or {}
    counts = " · ".join(f"{key.replace('_', ' ')} <b>{stats.get(key, 0):,}</b>" for key in ("open", "ready", "in_progress", "blocked", "closed", "total"))
    parts = [Html(f'<p class="counts">{counts}</p>')]
    for warning in plan.get("warnings") or []:
        parts.append(Html(f'<div class="notice info">{esc(warning)}</div>'))
    tasks = plan.get("tasks") or []
    if not tasks:
        parts.append(empty("PLAN.md has no tasks."))
        return join(parts)
    sections: dict[str, list[Mapping[str, Any]]] = {}
    for task in tasks:
        sections.setdefault(task.get("section") or "", []).append(task)
    for name, rows in sections.items():
        table_rows = [
            (
                Html(f'<code class="marker status-{esc(task["status"])}">[{esc(task.get("marker") or " ")}]</code>'),
                esc(task.get("id") or task.get("number")),
                render_inline(task.get("title")),
                badge(task["priority"], "priority") if task.get("priority") else "",
                join([badge(label, "tag") for label in task.get("labels") or []], " "),
                esc(", ".join(task.get("depends") or [])),
                esc(task.get("reason") or task.get("blocked") or ""),
            )
            for task in rows
        ]
        parts.append(Html(f"<h3>{esc(name or 'Tasks')}</h3>"))
        parts.append(table(("", "id", "task", "priority", "labels", "depends on", "why"), table_rows, cls="plan-tasks"))
    return join(parts)


def render_graph(graph: Mapping[str, Any]) -> Html:
    """The `depends:` graph as cstack draws it, and the dependencies that name no task."""
    if not graph.get("nodes"):
        return empty("No task depends on another (dependencies are written `depends: <id>`).")
    parts = [pre(graph.get("text") or "", cls="graph")]
    if graph.get("missing"):
        parts.append(Html(f'<p class="notice info">Depends on tasks that do not exist: {esc(", ".join(map(str, graph["missing"])))}</p>'))
    return join(parts)


def render_memory(memory: Mapping[str, Sequence[Mapping[str, Any]]]) -> Html:
    """MEMORY.md's entries, one table per category; a decision with its choice and the reason
    for it (MEMORY.md's Why column), as the file's table holds them."""
    if not any(memory.values()):
        return empty("MEMORY.md holds no entries yet (`cstack remember`).")
    parts = []
    for category, entries in memory.items():
        if not entries:
            continue
        parts.append(Html(f"<h3>{esc(category.capitalize())} <span class='count'>{len(entries)}</span></h3>"))
        if any(entry.get("cells") for entry in entries):
            rows = []
            for entry in entries:
                cells = list(entry.get("cells") or [])
                decision, choice, why = (cells + ["", "", ""])[:3] if cells else (entry.get("text") or "", "", "")
                rows.append((render_inline(decision), render_inline(choice), render_inline(why), when(entry.get("date")) if entry.get("date") else ""))
            parts.append(table(("decision", "choice", "why", "date"), rows, cls="memory decisions"))
            continue
        plain: list[tuple[Html, Html | str]] = [(render_inline(entry.get("text")), when(entry.get("date")) if entry.get("date") else "") for entry in entries]
        parts.append(table(("entry", "date"), plain, cls="memory"))
    return join(parts)

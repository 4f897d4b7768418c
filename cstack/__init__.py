"""cstack: cortical-stack memory files (.cstack/CURRENT.md, PLAN.md, MEMORY.md).

The public API: other packages (the search index, the MCP server, the sidecar's status
endpoint, LoopFlow's orientation) and cstack's own CLI use these names, never the modules.

Use cases take a `moss_files.foundation.context.Context` and typed keyword arguments and return
the JSON-ready dict that `cstack <command> --json` and the `cstack.*` MCP tool print:

    init_stack(ctx, dry_run=)          show_status(ctx)              count_tasks(ctx)
    list_tasks(ctx, statuses=, labels=, priorities=)                list_ready(ctx)
    list_blocked(ctx)                  draw_graph(ctx, task=)        list_stale(ctx, days=)
    add_task(ctx, task=, ident=, depends=, parent=, section=)       remember(ctx, text=, category=)
    transition(ctx, action=, task=, reason=)                         list_memory(ctx, category=)

Readers of a workspace at `root`, and the parse functions and JSON shapes of each file:

    stats(root) -> {"exists", "open", "ready", "in_progress", "blocked", "closed", "total"}
    read_status(root) -> Status        status_to_dict(status)
    read_plan(root) -> Plan            parse_plan(text, path) -> Plan    plan_to_dict, task_to_dict
    read_memory(root) -> Memory        parse_memory(text, path) -> Memory
                                       memory_to_dict(memory), entry_to_dict(entry)
    parse_current(text, path) -> Current                                 current_to_dict(current)

Importing this package loads nothing else: each name resolves on first use, so a caller pays
only for the modules behind the names it uses (`cstack status` never loads PLAN.md's parser).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    # merges (the git merge driver)
    "merge_plan": "cstack.merge",
    "merge_current": "cstack.merge",
    "merge_memory": "cstack.merge",
    # use cases
    "init_stack": "cstack.initialize",
    "show_status": "cstack.status",
    "list_tasks": "cstack.service",
    "list_ready": "cstack.service",
    "list_blocked": "cstack.service",
    "draw_graph": "cstack.service",
    "list_stale": "cstack.service",
    "list_memory": "cstack.service",
    "count_tasks": "cstack.service",
    "add_task": "cstack.service",
    "transition": "cstack.service",
    "remember": "cstack.service",
    # readers
    "stats": "cstack.service",
    "read_plan": "cstack.service",
    "read_memory": "cstack.service",
    "read_status": "cstack.status",
    "status_to_dict": "cstack.status",
    "Status": "cstack.status",
    # parse functions and shapes
    "Current": "cstack.current",
    "parse_current": "cstack.current",
    "current_to_dict": "cstack.current",
    "Plan": "cstack.plan",
    "Task": "cstack.plan",
    "parse_plan": "cstack.plan",
    "plan_to_dict": "cstack.plan",
    "task_to_dict": "cstack.plan",
    "Memory": "cstack.memory",
    "MemoryEntry": "cstack.memory",
    "parse_memory": "cstack.memory",
    "memory_to_dict": "cstack.memory",
    "entry_to_dict": "cstack.memory",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cstack' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value

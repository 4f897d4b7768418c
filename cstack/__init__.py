"""cstack: cortical-stack memory files (.cstack/CURRENT.md, PLAN.md, MEMORY.md).

The public API other packages use (the index, the MCP server, the sidecar's status endpoint):

    stats(root) -> {"exists", "open", "ready", "in_progress", "blocked", "closed", "total"}
    read_status(root) -> Status        status_to_dict(status)
    read_plan(root) -> Plan            plan_to_dict(plan), task_to_dict(task)
    read_memory(root) -> Memory        memory_to_dict(memory)

Importing this package loads nothing else: the names resolve on first use, so a caller that
only needs `stats` does not pay for the CLI or the parsers until it calls them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "merge_plan": "cstack.merge",
    "merge_current": "cstack.merge",
    "merge_memory": "cstack.merge",
    "stats": "cstack.service",
    "read_status": "cstack.service",
    "read_plan": "cstack.service",
    "read_memory": "cstack.service",
    "status_to_dict": "cstack.service",
    "Status": "cstack.service",
    "Plan": "cstack.plan",
    "Task": "cstack.plan",
    "plan_to_dict": "cstack.plan",
    "task_to_dict": "cstack.plan",
    "Memory": "cstack.memory",
    "MemoryEntry": "cstack.memory",
    "memory_to_dict": "cstack.memory",
    "Current": "cstack.current",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cstack' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value

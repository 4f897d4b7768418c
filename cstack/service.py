"""Use cases over a workspace's memory files: read the state, change tasks, remember things.

Shell layer: each function gathers with `store`, decides with the pure cores (`plan`,
`current`, `memory`) and writes with `store`. Dates come in as `today`; nothing here reads
the clock or the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from cstack import current, memory, plan, store
from cstack.current import Current
from cstack.memory import Memory, Remembered
from cstack.plan import Change, Plan

STATS_KEYS = ("exists", "open", "ready", "in_progress", "blocked", "closed", "total")


@dataclass(frozen=True, slots=True)
class Status:
    """What CURRENT.md says, where it is, and when it last changed."""

    exists: bool
    path: str
    current: Current
    last_modified: str | None  # CURRENT.md's mtime, RFC 3339 UTC


def status_to_dict(status: Status) -> dict[str, Any]:
    """The JSON shape of `cstack status`."""
    return {
        "exists": status.exists,
        "path": status.path,
        **current.current_to_dict(status.current),
        "last_modified": status.last_modified,
    }


def read_status(root: Path) -> Status:
    """CURRENT.md's state (the empty state when the file or `.cstack/` is missing).

    Raises InvalidDocument when the file is malformed.
    """
    loaded = store.read_file(Path(root), store.CURRENT)
    return Status(loaded.exists, str(loaded.path), current.parse_current(loaded.text, loaded.path), loaded.modified)


def read_plan(root: Path) -> Plan:
    """PLAN.md, parsed (an empty plan when the file or `.cstack/` is missing).

    Raises InvalidDocument when the file is malformed.
    """
    loaded = store.read_file(Path(root), store.PLAN)
    return plan.parse_plan(loaded.text, loaded.path)


def read_memory(root: Path) -> Memory:
    """MEMORY.md, parsed (no entries when it is missing). Raises InvalidDocument when malformed."""
    loaded = store.read_file(Path(root), store.MEMORY)
    return memory.parse_memory(loaded.text, loaded.path)


def stats(root: Path) -> dict[str, Any]:
    """`{exists, open, ready, in_progress, blocked, closed, total}` for the workspace at `root`.

    `exists` is false (and every count zero) when there is no `.cstack/`; see `cstack.plan` for
    what each count means. Raises InvalidDocument when PLAN.md is malformed.
    """
    if not store.has_stack(Path(root)):
        return {"exists": False, **dict.fromkeys(STATS_KEYS[1:], 0)}
    return {"exists": True, **plan.plan_stats(read_plan(root))}


def plan_path(root: Path) -> Path:
    """Where the workspace's PLAN.md is (or would be)."""
    return store.file_path(Path(root), store.PLAN)


def require_stack(root: Path) -> Path:
    """The workspace's `.cstack/` folder. Raises NotFound when it has none."""
    return store.require_stack(Path(root))


def add_task(
    root: Path,
    spec: str,
    today: date,
    *,
    ident: str | None = None,
    depends: Sequence[str] = (),
    parent: str | None = None,
    section: str = "tasks",
) -> Change:
    """Add a pending task to PLAN.md (created from the template if missing)."""
    path = plan_path(root)

    def change(text: str) -> tuple[str, Change]:
        made = plan.add_task(text, spec, today, ident=ident, depends=depends, parent=parent, section=section, path=path)
        return made.text, made

    return store.update(Path(root), store.PLAN, change)


@dataclass(frozen=True, slots=True)
class Applied:
    """A transition as applied: the PLAN.md change, and whether CURRENT.md followed."""

    change: Change
    current_updated: bool


def applied_to_dict(applied: Applied) -> dict[str, Any]:
    """The JSON shape of a transition's result."""
    return {**plan.change_to_dict(applied.change), "current_updated": applied.current_updated}


def apply(root: Path, action: str, ref: str | None, today: date, *, reason: str | None = None) -> Applied:
    """Run a transition (start, done, close, block, ready, reopen) on PLAN.md.

    `start` also names the task on CURRENT.md's Active Task and Last Updated lines, and
    `done`/`close` reset those lines when they name the task (only when CURRENT.md has them).
    CURRENT.md is checked before PLAN.md is written, so a malformed CURRENT.md stops the
    transition with nothing written.
    """
    root = Path(root)
    path = plan_path(root)
    follows = action in ("start", "done", "close")
    status = read_status(root) if follows else None

    def change(text: str) -> tuple[str, Change]:
        made = plan.transition(text, action, ref, today, reason=reason, path=path)
        return made.text, made

    made = store.update(root, store.PLAN, change, create=False)
    updated = False
    if follows and status is not None and status.exists:
        title = made.task.title
        edit = current.activate_task if action == "start" else current.clear_task

        def follow(text: str) -> tuple[str | None, bool]:
            current.parse_current(text, store.file_path(root, store.CURRENT))
            new = edit(text, title, today)
            return (new, True) if new != text else (None, False)

        updated = store.update(root, store.CURRENT, follow, create=False)
    return Applied(made, updated)


def remember(root: Path, text: str, today: date, category: str | None = None) -> Remembered:
    """Append an entry to MEMORY.md (created from the template if missing)."""
    path = store.file_path(Path(root), store.MEMORY)

    def change(current_text: str) -> tuple[str, Remembered]:
        done = memory.remember(current_text, text, today, category, path)
        return done.text, done

    return store.update(Path(root), store.MEMORY, change)

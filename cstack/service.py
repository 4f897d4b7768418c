"""Use cases over a workspace's PLAN.md and MEMORY.md: list, count and change tasks, remember.

Shell layer. Each use case takes the Context (the workspace root, the clock that dates what is
written, `notify` for notes to a person) and typed keyword arguments, gathers with `store`,
decides with the pure cores (`plan`, `current`, `memory`), writes with `store`, and returns the
JSON-ready dict that both `cstack <command> --json` and the `cstack.*` MCP tool print.
`read_plan`, `read_memory` and `stats` are the readers other packages use.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cstack import plan, store
from cstack.plan import Change, Plan
from moss_files.foundation import fs

if TYPE_CHECKING:
    from cstack.memory import Memory, Remembered
    from moss_files.foundation.context import Context

STATS_KEYS = ("exists", "open", "ready", "in_progress", "blocked", "closed", "total")


# --------------------------------------------------------------------------- readers


def read_plan(root: Path) -> Plan:
    """PLAN.md, parsed (an empty plan when the file or `.cstack/` is missing).

    Raises InvalidDocument when the file is malformed.
    """
    loaded = store.read_file(Path(root), store.PLAN)
    return plan.parse_plan(loaded.text, loaded.path)


def read_memory(root: Path) -> Memory:
    """MEMORY.md, parsed (no entries when it is missing). Raises InvalidDocument when malformed."""
    from cstack import memory  # here: the task commands never read MEMORY.md

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


def _today(ctx: Context) -> date:
    """The UTC date of the context's clock: the date written into the files."""
    return ctx.now().astimezone(UTC).date()


def _stacked_plan(ctx: Context) -> Plan:
    """PLAN.md of a workspace that must have `.cstack/` (NotFound with a hint otherwise)."""
    store.require_stack(ctx.root)
    return read_plan(ctx.root)


# --------------------------------------------------------------------------- reading


def list_tasks(ctx: Context, *, statuses: Sequence[str] = (), labels: Sequence[str] = (), priorities: Sequence[str] = ()) -> dict[str, Any]:
    """`cstack plan`: `{tasks, stats, warnings}` for the tasks matching every filter given.

    Each warning about PLAN.md is also said to `ctx.notify`. Raises InvalidRequest for an
    unknown status or priority, NotFound without `.cstack/`.
    """
    parsed = _stacked_plan(ctx)
    chosen = plan.filter_tasks(parsed, statuses=statuses, labels=labels, priorities=priorities)
    path = store.file_path(ctx.root, store.PLAN)
    for warning in parsed.warnings:
        ctx.say(f"warning: {path}: {warning}")
    return {"tasks": [plan.task_to_dict(task) for task in chosen], "stats": plan.plan_stats(parsed), "warnings": list(parsed.warnings)}


def list_ready(ctx: Context) -> dict[str, Any]:
    """`cstack ready`: `{tasks}`, the pending tasks whose dependencies are all done."""
    return {"tasks": [plan.task_to_dict(task) for task in plan.ready_tasks(_stacked_plan(ctx))]}


def list_blocked(ctx: Context) -> dict[str, Any]:
    """`cstack blocked`: `{tasks: [{task, reason, waiting_on}]}`."""
    return {"tasks": [plan.blocked_to_dict(item) for item in plan.blocked_tasks(_stacked_plan(ctx))]}


def draw_graph(ctx: Context, *, task: str | None = None) -> dict[str, Any]:
    """`cstack graph`: the `depends:` graph (of one task, when given) as nodes, edges and a
    drawn tree under `text`. Raises InvalidDocument DEPENDENCY_CYCLE naming the cycle."""
    parsed = _stacked_plan(ctx)
    drawn = plan.dependency_graph(parsed, task, store.file_path(ctx.root, store.PLAN))
    return {**plan.graph_to_dict(drawn), "text": plan.render_graph(parsed, drawn)}


def list_stale(ctx: Context, *, days: int = 7) -> dict[str, Any]:
    """`cstack stale`: open tasks whose `modified:` date is more than `days` days before
    today, and open tasks without one."""
    parsed = _stacked_plan(ctx)
    return plan.stale_to_dict(plan.stale_tasks(parsed, _today(ctx), days))


def list_memory(ctx: Context, *, category: str | None = None) -> dict[str, Any]:
    """`cstack memory`: MEMORY.md's entries by category (only `category`, when given).

    Raises InvalidRequest for an unknown category.
    """
    from cstack import memory

    store.require_stack(ctx.root)
    parsed = read_memory(ctx.root)
    wanted = memory.category_of(category) if category else None
    data = memory.memory_to_dict(parsed)
    return {wanted: data[wanted]} if wanted else data


def count_tasks(ctx: Context) -> dict[str, Any]:
    """`cstack stats`: the counts of `stats`, for the context's workspace."""
    return stats(ctx.root)


# --------------------------------------------------------------------------- changing


@fs.folders_held()  # each write walks to .cstack/ and its .locks/ again: opened once
def add_task(
    ctx: Context,
    *,
    task: str,
    ident: str | None = None,
    depends: Sequence[str] = (),
    parent: str | None = None,
    section: str = "tasks",
) -> dict[str, Any]:
    """`cstack add`: add a pending task to PLAN.md (made from the template if missing);
    returns `{action, task, from_status, moved_from}`.

    Raises InvalidRequest (empty or multi-line task, bad id or section), Conflict
    ALREADY_EXISTS (the id is taken), NotFound (no `.cstack/`, or an unknown dependency).
    """
    store.require_stack(ctx.root)
    today = _today(ctx)
    wanted = [name.strip() for name in depends if name.strip()]
    path = store.file_path(ctx.root, store.PLAN)

    def change(text: str) -> tuple[str, Change]:
        made = plan.add_task(text, task, today, ident=ident, depends=wanted, parent=parent, section=section.casefold(), path=path)
        return made.text, made

    return plan.change_to_dict(store.update(ctx.root, store.PLAN, change))


@fs.folders_held()
def transition(ctx: Context, *, action: str, task: str | None = None, reason: str | None = None) -> dict[str, Any]:
    """`cstack start|done|close|block|reopen|ready TASK`: run the transition on PLAN.md;
    returns `{action, task, from_status, moved_from, current_updated, current}`.

    CURRENT.md follows `start`, `done`, `close`, `block` and `ready` in every dialect it is
    written in (see `current.follow_transition`); `current` says which places changed, and
    why none did when none could (also said to `ctx.notify`). CURRENT.md is checked before
    PLAN.md is written, so a malformed CURRENT.md, or one a transition cannot update line by
    line (CURRENT_UNEDITABLE), stops the transition with nothing written. Starting a task
    that waits on unfinished ones is allowed; `ctx.notify` hears about it.
    `start` also returns `also_in_progress`: the other tasks in progress (each `{number, id,
    title, status, line}`), of which `ctx.notify` is warned, since a `done` without a task
    name then cannot tell which one is meant.
    """
    from cstack import current  # here: of the task commands only the transitions touch CURRENT.md

    root = ctx.root
    store.require_stack(root)
    today = _today(ctx)
    path = store.file_path(root, store.PLAN)
    current_path = store.file_path(root, store.CURRENT)
    follows = action in current.FOLLOWED
    loaded = store.read_file(root, store.CURRENT) if follows else None

    def change(text: str) -> tuple[str, Change]:
        made = plan.transition(text, action, task, today, reason=reason, path=path)
        if loaded is not None and loaded.exists:
            # Checked before PLAN.md is written: what these raise leaves both files as they were.
            # (Planned once, on the text read under the lock: a dry run on an earlier read of a
            # long plan cost a read and a decoding of it, 1 ms of `cstack done`, issue 29.)
            current.parse_current(loaded.text, current_path)
            current.follow_transition(loaded.text, action, made.task.title, today, current_path)
        return made.text, made

    made = store.update(root, store.PLAN, change, create=False)
    followed = current.Followed("", ())
    if loaded is not None and loaded.exists:
        title = made.task.title

        def follow(text: str) -> tuple[str | None, current.Followed]:
            current.parse_current(text, current_path)
            result = current.follow_transition(text, action, title, today, current_path)
            return (result.text if result.text != text else None), result

        followed = store.update(root, store.CURRENT, follow, create=False)
        if followed.note:
            ctx.say(f"note: {followed.note}")
    result = {
        **plan.change_to_dict(made),
        "current_updated": followed.updated,
        "current": {"updated": followed.updated, "places": list(followed.places), "note": followed.note},
    }
    if action == "start":
        # Both from the text the start wrote, condensed: a parse of the whole plan for these
        # two answers cost more than the rest of the command.
        unmet, others = plan.start_notes(made.text, made.task, path)
        if unmet:  # a note for a person; agents see `depends`
            ctx.say(f"note: started although it waits on {', '.join(unmet)}")
        result["also_in_progress"] = others
        if others:
            names = ", ".join(str(other["id"] or other["number"]) for other in others)
            ctx.say(f"warning: also in progress: {names}; `cstack done` now needs the task's name")
    return result


@fs.folders_held()
def remember(ctx: Context, *, text: str, category: str | None = None) -> dict[str, Any]:
    """`cstack remember`: append a dated entry to MEMORY.md (made from the template if
    missing) under `category`, or the one its keywords suggest; returns the entry."""
    from cstack import memory

    store.require_stack(ctx.root)
    today = _today(ctx)
    path = store.file_path(ctx.root, store.MEMORY)

    def change(current_text: str) -> tuple[str, Remembered]:
        done = memory.remember(current_text, text, today, category, path)
        return done.text, done

    return memory.entry_to_dict(store.update(ctx.root, store.MEMORY, change).entry)

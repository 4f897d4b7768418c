"""Board use cases that only read: lists, search, the next and the ready tasks, one task or
epic, the activity log, and the board's status.

Shell layer: each function takes a Context and typed keyword arguments and returns the JSON
result the `moe.*` tool returns and `moss task|epic|board … --json` prints. Every answer built
without an unreadable board file lists it under `problems`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from moss_files.board import files, rules, shapes
from moss_files.board.model import (
    EPIC_STATUSES,
    PRIORITIES,
    STATUSES,
    Board,
    Task,
    board_key,
    check_choice,
    check_name,
    check_priority,
    check_status,
    check_statuses,
    rank_key,
)
from moss_files.board.usecase import board_store, find_epic, task_path, with_problems
from moss_files.foundation import arguments
from moss_files.foundation.context import Context

DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT = 20, 500
BOARD_COLUMNS = ("BACKLOG", "PLANNING", "AWAITING_APPROVAL", "WORKING", "REVIEW", "DONE")
DEFAULT_CARDS, MAX_CARDS = 100, 500
DEFAULT_LOG_LIMIT, MAX_LOG_LIMIT = 50, 1000

# --------------------------------------------------------------------------- tasks


def list_tasks(ctx: Context, *, epic_id: str | None = None, statuses: Sequence[str] | None = None) -> dict[str, Any]:
    """Moe's list_tasks: an epic's tasks (or all) in board order, with column counts over the
    epic's tasks. ARCHIVED tasks are listed only when asked for by status."""
    wanted = check_statuses(statuses, "status")
    board = board_store(ctx).outline()
    epic = find_epic(board, epic_id.strip()) if epic_id else None
    scope = [t for t in board.tasks.values() if epic is None or t.epic == epic.id]
    shown = [t for t in scope if t.status in wanted] if wanted else [t for t in scope if t.status != "ARCHIVED"]
    shown.sort(key=lambda t: board_key(t, board.epics))
    result = {
        "epicId": epic.id if epic else None,
        "epicTitle": epic.title if epic else None,
        "tasks": [shapes.task_brief(t) for t in shown],
        "counts": shapes.list_counts(scope),
    }
    return with_problems(result, board.problems)


def search_tasks(
    ctx: Context,
    *,
    query: str | None = None,
    status: str | None = None,
    epic_id: str | None = None,
    assigned_worker_id: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Moe's search_tasks: filters first (status, epic, holder), then relevance to the query
    (title matches weigh twice description matches); full task records."""
    wanted = check_status(status, "filters.status") if status is not None else None
    count = arguments.count(limit, "limit", default=DEFAULT_SEARCH_LIMIT, maximum=MAX_SEARCH_LIMIT)
    board = board_store(ctx).load()
    found = rules.search_tasks(board.tasks.values(), board.epics, query, status=wanted, epic_id=epic_id, worker_id=assigned_worker_id, limit=count)
    applied = {key: value for key, value in (("status", wanted), ("epicId", epic_id), ("assignedWorkerId", assigned_worker_id)) if value}
    result = {
        "tasks": [shapes.task_to_dict(t, path=task_path(ctx, t.id)) for t in found],
        "totalMatches": len(found),
        "query": query if query and query.strip() else None,
        "filters": applied,
    }
    return with_problems(result, board.problems)


def get_next_task(ctx: Context, *, epic_id: str | None = None) -> dict[str, Any]:
    """Moe's get_next_task: the next BACKLOG task in queue order (priority, then order)."""
    store = board_store(ctx)
    board = store.outline(("BACKLOG",))
    epic = arguments.optional(epic_id)
    if epic:
        find_epic(board, epic)
    backlog = [t for t in board.tasks.values() if t.status == "BACKLOG" and (not epic or t.epic == epic)]
    if not backlog:
        return with_problems({"hasNext": False}, board.problems)
    task = store.get("task", min(backlog, key=lambda t: rank_key(t, board.epics)).id)  # the one shown, in full
    result = {
        "hasNext": True,
        "task": {
            "id": task.id,
            "title": task.title,
            "description": task.description,
            "definitionOfDone": list(task.definition_of_done),
            "epicId": task.epic or None,
            "priority": task.priority,
        },
    }
    return with_problems(result, board.problems)


def ready_tasks(ctx: Context, *, epic_id: str | None = None) -> dict[str, Any]:
    """Open tasks whose dependencies are all DONE (`ready`), and the rest with what they wait on."""
    board = board_store(ctx).outline()
    epic = arguments.optional(epic_id)
    if epic:
        find_epic(board, epic)
    ready, blocked = rules.ready_and_blocked(board, epic)
    result = {
        "ready": [shapes.task_brief(t) for t in ready],
        "blocked": [{**shapes.task_brief(t), "waitingOn": waits} for t, waits in blocked],
        "counts": {"ready": len(ready), "blocked": len(blocked)},
    }
    return with_problems(result, board.problems)


def show_task(ctx: Context, *, task_id: str) -> dict[str, Any]:
    """One task's full record. Raises NotFound, or InvalidDocument for an unreadable file."""
    task_id = arguments.required(task_id, "taskId")
    task = board_store(ctx).get("task", task_id)
    return shapes.task_to_dict(task, path=task_path(ctx, task_id))


def board_view(
    ctx: Context,
    *,
    epic_id: str | None = None,
    assigned_worker_id: str | None = None,
    priority: str | None = None,
    label: str | None = None,
    statuses: Sequence[str] | None = None,
    limits: Mapping[str, int] | None = None,
    offset: int = 0,
    board: Board | None = None,
) -> dict[str, Any]:
    """The board as a board view shows it, from one read of the board (`board`, a load the
    caller made, else one made now): for each status of
    `statuses` (the six working columns by default), its total and its cards (brief records)
    in the column's order (`rules.column_order`: DONE by completion time, the newest first),
    from `offset`, at most `limits[status]` (DEFAULT_CARDS; at most MAX_CARDS). The filters
    (epic, holder, priority, label: a task's type or an imported label) narrow every column
    and the counts; `choices` lists the values each filter offers, with their tasks.

    Raises NotFound for an unknown epic, InvalidRequest for a bad status, priority, name,
    limit or offset.
    """
    wanted = check_statuses(statuses, "statuses") or BOARD_COLUMNS
    epic_id = arguments.optional(epic_id)
    owner = check_name(assigned_worker_id, "assignedWorkerId") if assigned_worker_id else None
    chosen_priority = check_priority(priority) if priority else None
    chosen_label = arguments.optional(label)
    first = arguments.count(offset, "offset", default=0, minimum=0, maximum=10_000_000)
    sizes = {status: arguments.count((limits or {}).get(status), "limit", default=DEFAULT_CARDS, maximum=MAX_CARDS) for status in wanted}
    if board is None:
        board = board_store(ctx).load()
    if epic_id:
        find_epic(board, epic_id)
    everything = list(board.tasks.values())

    def keep(task: Task, *, skip: str = "") -> bool:
        return (
            (skip == "epic" or not epic_id or task.epic == epic_id)
            and (skip == "owner" or not owner or task.assigned_worker == owner)
            and (skip == "priority" or not chosen_priority or task.priority == chosen_priority)
            and (skip == "label" or not chosen_label or chosen_label in rules.task_labels(task))
        )

    scope = [task for task in everything if keep(task)]
    by_status: dict[str, list[Task]] = {}
    for task in scope:
        by_status.setdefault(task.status, []).append(task)
    columns = []
    for status in wanted:
        ordered = rules.column_order(status, by_status.get(status, ()), board.epics)
        cards = ordered[first : first + sizes[status]]
        columns.append({"status": status, "total": len(ordered), "offset": first, "tasks": [shapes.task_card(task) for task in cards]})

    def tally(values: Iterable[str | None]) -> list[dict[str, Any]]:
        counted: dict[str, int] = {}
        for value in values:
            if value:
                counted[value] = counted.get(value, 0) + 1
        return [{"id": key, "count": count} for key, count in sorted(counted.items(), key=lambda pair: (-pair[1], pair[0]))]

    epic_counts = {row["id"]: row["count"] for row in tally(t.epic for t in everything if keep(t, skip="epic"))}
    epics = sorted(board.epics.values(), key=lambda e: (e.order, e.created or "", e.id))
    result = {
        "project": shapes.project_to_dict(board.project),
        "filters": {
            key: value for key, value in (("epicId", epic_id), ("assignedWorkerId", owner), ("priority", chosen_priority), ("label", chosen_label)) if value
        },
        "counts": {status: len(by_status.get(status, ())) for status in STATUSES},
        "total": len(everything),
        "columns": columns,
        "choices": {
            "epics": [{"id": e.id, "title": e.title, "status": e.status, "count": epic_counts.get(e.id, 0)} for e in epics],
            "owners": tally(t.assigned_worker for t in everything if keep(t, skip="owner")),
            "priorities": [
                {"id": level, "count": count}
                for level in PRIORITIES
                if (count := sum(1 for t in everything if t.priority == level and keep(t, skip="priority"))) or level == chosen_priority
            ],
            "labels": tally(label for t in everything if keep(t, skip="label") for label in rules.task_labels(t)),
        },
        "workers": [shapes.worker_to_dict(board, w) for w in sorted(board.workers.values(), key=lambda w: w.id)],
    }
    return with_problems(result, board.problems)


# --------------------------------------------------------------------------- epics


def list_epics(ctx: Context, *, status: str | None = None) -> dict[str, Any]:
    """Every epic in board order, with its column counts."""
    wanted = check_choice(status, EPIC_STATUSES, "status") if status is not None else None
    board = board_store(ctx).outline()
    rows = []
    for epic in sorted(board.epics.values(), key=lambda e: (e.order, e.created or "", e.id)):
        if wanted is None or epic.status == wanted:
            counts = shapes.list_counts(t for t in board.tasks.values() if t.epic == epic.id)
            rows.append({**shapes.epic_to_dict(epic), "counts": counts})
    return with_problems({"epics": rows, "count": len(rows)}, board.problems)


def show_epic(ctx: Context, *, epic_id: str) -> dict[str, Any]:
    """One epic's full record with its tasks (brief) and counts."""
    epic_id = arguments.required(epic_id, "epicId")
    store = board_store(ctx)
    board = store.outline()
    epic = find_epic(board, epic_id)
    tasks = sorted((t for t in board.tasks.values() if t.epic == epic_id), key=lambda t: board_key(t, board.epics))
    return {
        **shapes.epic_to_dict(epic, path=store.display(store.path("epic", epic_id))),
        "source": dict(epic.source) if epic.source is not None else None,
        "tasks": [shapes.task_brief(t) for t in tasks],
        "counts": shapes.list_counts(tasks),
    }


# --------------------------------------------------------------------------- the board


def get_activity_log(
    ctx: Context,
    *,
    task_id: str | None = None,
    epic_id: str | None = None,
    worker_id: str | None = None,
    event_types: Sequence[str] | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """Moe's get_activity_log: the newest events matching every filter, newest first."""
    types = arguments.texts(event_types)
    count = arguments.count(limit, "limit", default=DEFAULT_LOG_LIMIT, maximum=MAX_LOG_LIMIT)
    query = rules.EventQuery.of(task_id=task_id, epic_id=epic_id, worker_id=worker_id, event_types=types)
    chosen, problems = board_store(ctx).activity.newest(query, count)
    result = {
        "events": [files.event_to_dict(e) for e in chosen],
        "count": len(chosen),
        "filters": {"taskId": task_id, "epicId": epic_id, "workerId": worker_id, "eventTypes": list(types) if types else None, "limit": count},
    }
    return with_problems(result, problems)


def board_status(ctx: Context) -> dict[str, Any]:
    """The project, counts over every task, epics, workers and any unreadable files."""
    store = board_store(ctx)
    board = store.outline()
    return with_problems(
        {
            "project": shapes.project_to_dict(board.project),
            "projectFile": store.display(store.project_path) if board.project.exists else None,
            "counts": shapes.list_counts(board.tasks.values()),
            "epics": len(board.epics),
            "workers": [shapes.worker_to_dict(board, w) for w in sorted(board.workers.values(), key=lambda w: w.id)],
            "teams": len(board.teams),
        },
        board.problems,
    )

"""Board use cases that create, change and delete the board's items: its settings file
(`project.md`), epics and tasks.

Shell layer: each function takes a Context and typed keyword arguments and returns the JSON
result the `moe.*` tool returns and `moss task|epic|board … --json` prints. A task's status and
holder are not edited here: they move through the workflow (`claims`, `plans`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from moss_files.board import shapes
from moss_files.board.model import (
    CREATORS,
    DEFAULT_PRIORITY,
    EPIC_STATUSES,
    Board,
    Epic,
    Project,
    Task,
    check_choice,
    check_priority,
    check_status,
    default_project,
    next_order,
)
from moss_files.board.rules import dependency_cycle
from moss_files.board.store import FOLDERS, THREAD_FOLDERS
from moss_files.board.usecase import board_store, find_epic, find_task, log, move, task_path, write_task
from moss_files.foundation import arguments
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import Conflict, InvalidRequest, NotFound

NEW_TASK_STATUSES = ("BACKLOG", "PLANNING", "WORKING")


def _title(value: str) -> str:
    """A title on one line, its runs of white space made one space. Raises `title is required`."""
    return " ".join(arguments.required(value, "title").split())


def _check_depends(board: Board, task_id: str, depends: Sequence[str]) -> tuple[str, ...]:
    for dep in depends:
        if dep == task_id:
            raise InvalidRequest("a task cannot depend on itself", details={"field": "dependsOn"})
        if dep not in board.tasks and dep not in board.epics:  # an epic: met once COMPLETED (rules.waiting_on)
            raise NotFound(f"Task not found: {dep} (in dependsOn)", details={"field": "dependsOn", "taskId": dep})
    cycle = dependency_cycle(board.tasks, task_id, depends)
    if cycle:
        raise Conflict("dependencies would form a cycle: " + " -> ".join(cycle), code="DEPENDENCY_CYCLE", details={"cycle": cycle})
    return tuple(dict.fromkeys(depends))


# --------------------------------------------------------------------------- tasks


def create_task(
    ctx: Context,
    *,
    epic_id: str,
    title: str,
    description: str | None = None,
    definition_of_done: Sequence[str] | None = None,
    task_rails: Sequence[str] | None = None,
    status: str | None = None,
    parent_task_id: str | None = None,
    order: int | float | None = None,
    created_by: str | None = None,
    priority: str | None = None,
    depends_on: Sequence[str] | None = None,
    test_file: str | None = None,
) -> dict[str, Any]:
    """Moe's create_task (with LoopFlow's priority, dependsOn and testFile): a new task file.

    A new task starts in BACKLOG (or PLANNING or WORKING when asked). Raises NotFound for the
    epic, a dependency or the parent, DEPENDENCY_CYCLE, InvalidRequest for bad values.
    """
    epic_id = arguments.required(epic_id, "epicId")
    name = _title(title)
    start = check_status(status) if status is not None else "BACKLOG"
    if start not in NEW_TASK_STATUSES:
        raise InvalidRequest(f"a new task starts in BACKLOG, PLANNING or WORKING, not {start}", details={"field": "status"})
    creator = check_choice(created_by, CREATORS, "createdBy") if created_by is not None else ("WORKER" if ctx.actor == AGENT else "HUMAN")
    rank = check_priority(priority) if priority is not None else DEFAULT_PRIORITY
    parent = arguments.optional(parent_task_id)
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        find_epic(board, epic_id)
        if parent and parent not in board.tasks:
            raise NotFound(f"Task not found: {parent_task_id} (parentTaskId)", details={"field": "parentTaskId"})
        now = ctx.stamp()
        task_id = ctx.new_id("TASK")
        task = Task(
            id=task_id,
            epic=epic_id,
            title=name,
            description=(description or "").strip(),
            status=start,
            priority=rank,
            order=order if order is not None else next_order(board.tasks.values(), epic_id),
            depends_on=_check_depends(board, task_id, arguments.texts(depends_on) or ()),
            parent=parent,
            definition_of_done=arguments.texts(definition_of_done) or (),
            task_rails=arguments.texts(task_rails) or (),
            created_by=creator,
            test_file=arguments.optional(test_file),
            created=now,
            updated=now,
            work_started=now if start == "WORKING" else None,
        )
        store.create("task", task)
        log(ctx, board.project, "TASK_CREATED", task=task, title=name, status=start)
    return {"success": True, "task": shapes.task_to_dict(task, path=task_path(ctx, task_id))}


def update_task(
    ctx: Context,
    *,
    task_id: str,
    title: str | None = None,
    description: str | None = None,
    definition_of_done: Sequence[str] | None = None,
    task_rails: Sequence[str] | None = None,
    priority: str | None = None,
    order: int | float | None = None,
    depends_on: Sequence[str] | None = None,
    parent_task_id: str | None = None,
    test_file: str | None = None,
    epic_id: str | None = None,
    max_reopens: int | None = None,
) -> dict[str, Any]:
    """Edit a task's fields (not its status or holder: those move through the workflow).
    Only the changed keys' lines change in the file. `max_reopens` 0 clears the task's own
    reopen budget (the project's applies again)."""
    task_id = arguments.required(task_id, "taskId")
    changes: dict[str, Any] = {}
    if title is not None:
        changes["title"] = _title(title)
    if description is not None:
        changes["description"] = description.strip()
    if definition_of_done is not None:
        changes["definition_of_done"] = arguments.texts(definition_of_done)
    if task_rails is not None:
        changes["task_rails"] = arguments.texts(task_rails)
    if priority is not None:
        changes["priority"] = check_priority(priority)
    if order is not None:
        changes["order"] = order
    if test_file is not None:
        changes["test_file"] = arguments.optional(test_file)
    if max_reopens is not None:
        if isinstance(max_reopens, bool) or not isinstance(max_reopens, int) or max_reopens < 0:
            raise InvalidRequest("maxReopens is a whole number (0 clears it)", details={"field": "maxReopens"})
        changes["max_reopens"] = max_reopens or None
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        find_task(board, task_id)
        if depends_on is not None:
            changes["depends_on"] = _check_depends(board, task_id, arguments.texts(depends_on) or ())
        if parent_task_id is not None:
            parent = arguments.optional(parent_task_id)
            if parent and parent not in board.tasks:
                raise NotFound(f"Task not found: {parent} (parentTaskId)", details={"field": "parentTaskId"})
            changes["parent"] = parent
        if epic_id is not None:
            changes["epic"] = find_epic(board, arguments.required(epic_id, "epicId")).id
        now = ctx.stamp()

        def decide(current: Task) -> Task:
            edited = replace(current, **changes)
            return replace(edited, updated=now) if edited != current else current

        old, new = write_task(ctx, task_id, decide)
        fields = [name for name in changes if getattr(old, name) != getattr(new, name)]
        if fields:
            log(ctx, board.project, "TASK_UPDATED", task=new, fields=fields)
    return {"success": True, "task": shapes.task_to_dict(new, path=task_path(ctx, task_id))}


def delete_task(ctx: Context, *, task_id: str) -> dict[str, Any]:
    """Moe's delete_task: remove the task's file and return the task as it was."""
    task_id = arguments.required(task_id, "taskId")
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        task = find_task(board, task_id)
        store.delete("task", task_id)
        log(ctx, board.project, "TASK_DELETED", task=task, title=task.title)
    return {"success": True, "task": shapes.task_to_dict(task)}


# --------------------------------------------------------------------------- epics


def _epic_path(ctx: Context, epic_id: str) -> str:
    store = board_store(ctx)
    return store.display(store.path("epic", epic_id))


def create_epic(
    ctx: Context,
    *,
    title: str,
    description: str | None = None,
    architecture_notes: str | None = None,
    epic_rails: Sequence[str] | None = None,
    status: str | None = None,
    order: int | float | None = None,
) -> dict[str, Any]:
    """Moe's create_epic: a new epic file (PLANNED unless a status is given)."""
    name = _title(title)
    state = check_choice(status, EPIC_STATUSES, "status") if status is not None else "PLANNED"
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        now = ctx.stamp()
        orders = [epic.order for epic in board.epics.values()]
        epic = Epic(
            id=ctx.new_id("EPIC"),
            title=name,
            description=(description or "").strip(),
            status=state,
            order=order if order is not None else ((max(orders) // 1 + 1) if orders else 1),
            epic_rails=arguments.texts(epic_rails) or (),
            architecture_notes=arguments.optional(architecture_notes),
            created=now,
            updated=now,
        )
        store.create("epic", epic)
        log(ctx, board.project, "EPIC_CREATED", epic_id=epic.id, title=name)
    return {"success": True, "epic": shapes.epic_to_dict(epic, path=_epic_path(ctx, epic.id))}


def update_epic(
    ctx: Context,
    *,
    epic_id: str,
    title: str | None = None,
    description: str | None = None,
    architecture_notes: str | None = None,
    epic_rails: Sequence[str] | None = None,
    status: str | None = None,
    order: int | float | None = None,
) -> dict[str, Any]:
    """Moe's update_epic. Raises InvalidRequest `epicId is required`, NotFound `Epic not found`."""
    epic_id = arguments.required(epic_id, "epicId")
    changes: dict[str, Any] = {}
    if title is not None:
        changes["title"] = _title(title)
    if description is not None:
        changes["description"] = description.strip()
    if architecture_notes is not None:
        changes["architecture_notes"] = arguments.optional(architecture_notes)
    if epic_rails is not None:
        changes["epic_rails"] = arguments.texts(epic_rails)
    if status is not None:
        changes["status"] = check_choice(status, EPIC_STATUSES, "status")
    if order is not None:
        changes["order"] = order
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        find_epic(board, epic_id)
        now = ctx.stamp()
        before: list[Epic] = []

        def decide(current: Epic) -> Epic:
            before.append(current)
            edited = replace(current, **changes)
            return replace(edited, updated=now) if edited != current else current

        epic = store.update("epic", epic_id, decide)
        fields = [name for name in changes if getattr(before[-1], name) != getattr(epic, name)]
        if fields:
            log(ctx, board.project, "EPIC_UPDATED", epic_id=epic_id, fields=fields)
    return {"success": True, "epic": shapes.epic_to_dict(epic, path=_epic_path(ctx, epic_id))}


def delete_epic(ctx: Context, *, epic_id: str, cascade_delete: bool = False) -> dict[str, Any]:
    """Moe's delete_epic: refuses while the epic has tasks unless `cascade_delete`, which deletes
    them first. Raises Conflict (code CONFLICT) for an epic with tasks."""
    epic_id = arguments.required(epic_id, "epicId")
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        epic = find_epic(board, epic_id)
        tasks = sorted((t for t in board.tasks.values() if t.epic == epic_id), key=lambda t: t.id)
        if tasks and not cascade_delete:
            raise Conflict(
                f'Epic "{epic_id}" has {len(tasks)} task(s); delete them first or pass cascadeDelete',
                code="CONFLICT",
                details={"epicId": epic_id, "taskCount": len(tasks)},
            )
        for task in tasks:
            store.delete("task", task.id)
            log(ctx, board.project, "TASK_DELETED", task=task, title=task.title, cascade=True)
        store.delete("epic", epic_id)
        log(ctx, board.project, "EPIC_DELETED", epic_id=epic_id, title=epic.title, deletedTaskCount=len(tasks))
    return {"success": True, "deletedEpic": shapes.epic_to_dict(epic), "deletedTaskCount": len(tasks)}


# --------------------------------------------------------------------------- the board itself


def init_board(ctx: Context, *, name: str | None = None, locked: bool = False) -> dict[str, Any]:
    """Write `project.md` with every setting spelled out (never replaces an existing one).
    `locked`: the caller holds the board lock already."""
    store = board_store(ctx)
    if locked:
        created, project = _write_project(ctx, name)
    else:
        with store.writing():
            created, project = _write_project(ctx, name)
    return {"created": created, "path": store.display(store.project_path), "project": shapes.project_to_dict(project)}


def _write_project(ctx: Context, name: str | None) -> tuple[bool, Project]:
    store = board_store(ctx)
    if store.project_path.exists():
        return False, store.read_project()
    now = ctx.stamp()
    base = default_project(arguments.optional(name) or store.root.name)
    project = replace(base, id=ctx.new_id("PROJ"), exists=True, created=now, updated=now)
    if not store.create_project(project):
        return False, store.read_project()
    log(ctx, project, "PROJECT_CREATED", name=project.name)
    return True, project


def init_project(ctx: Context, *, project_path: str | None = None, name: str | None = None, force: bool = False) -> dict[str, Any]:
    """Moe's init_project over the workspace: the `.moss/` folders and git settings `moss init`
    writes for the board (the union merge of its logs and threads, the merge driver), the
    board's folders, and `project.md`. Nothing that exists is replaced, with or without `force`
    (which re-creates missing parts of an initialized project).

    Raises InvalidRequest for a `project_path` other than this workspace's root.
    """
    if project_path is not None and project_path.strip():
        wanted = Path(project_path.strip()).expanduser()
        if not wanted.is_absolute() or wanted.resolve() != ctx.root.resolve():
            raise InvalidRequest(
                f"projectPath {project_path!r} is not this workspace ({ctx.root}); a server initializes only its own", details={"field": "projectPath"}
            )
    store = board_store(ctx)
    already = store.project_path.exists()
    if not already or force:
        from moss_files import scaffold  # stdlib only; loaded when a project is initialized

        scaffold.run(ctx.root, parts=("moss",), agents=(), dry_run=False)
        for folder in (*FOLDERS.values(), *THREAD_FOLDERS.values()):
            (store.base / folder).mkdir(parents=True, exist_ok=True)
    created = init_board(ctx, name=name)
    project = created["project"]
    return {
        "success": True,
        "alreadyInitialized": already,
        "project": {"id": project["id"], "name": project["name"], "rootPath": str(ctx.root)},
        "path": created["path"],
        "message": "Project already initialized; nothing was replaced." if already else f"Project initialized at {ctx.root}",
    }


# --------------------------------------------------------------------------- archive

IN_FLIGHT = ("PLANNING", "AWAITING_APPROVAL", "WORKING")


def archive_task(ctx: Context, *, task_id: str, reason: str | None = None) -> dict[str, Any]:
    """Moe's archive_task: shelve a BACKLOG, REVIEW or DONE task (ARCHIVED; lists hide it).
    Idempotent. Raises NOT_ALLOWED for a task in flight (release it or move it to BACKLOG)."""
    task_id = arguments.required(task_id, "taskId")
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        task = find_task(board, task_id)
        if task.status == "ARCHIVED":
            return {"success": True, "taskId": task_id, "status": "ARCHIVED", "alreadyArchived": True}
        if task.status in IN_FLIGHT:
            raise Conflict(
                f"Task is {task.status} (in flight); archive is allowed from BACKLOG, REVIEW or DONE: move it to BACKLOG or release it first",
                code="NOT_ALLOWED",
                status=403,
                details={"taskId": task_id, "status": task.status},
            )
        new = move(ctx, board, task, "ARCHIVED", reason=arguments.optional(reason), actor=None)
        log(ctx, board.project, "TASK_ARCHIVED", task=new, reason=arguments.optional(reason))
    return {"success": True, "taskId": task_id, "status": new.status}


def archive_epic(ctx: Context, *, epic_id: str) -> dict[str, Any]:
    """Moe's archive_epic: every task of the epic and the epic itself ARCHIVED, in one go.
    Idempotent. Raises NOT_ALLOWED, archiving nothing, while any task is in flight."""
    epic_id = arguments.required(epic_id, "epicId")
    store = board_store(ctx)
    with store.writing():
        board = store.load()
        epic = find_epic(board, epic_id)
        tasks = sorted((t for t in board.tasks.values() if t.epic == epic_id), key=lambda t: t.id)
        busy = [t for t in tasks if t.status in IN_FLIGHT]
        if busy:
            raise Conflict(
                f'Epic "{epic_id}" has {len(busy)} in-flight task(s) ({", ".join(f"{t.id}:{t.status}" for t in busy)}); release or move them to BACKLOG first',
                code="NOT_ALLOWED",
                status=403,
                details={"epicId": epic_id, "inFlight": [t.id for t in busy]},
            )
        archived = 0
        for task in tasks:
            if task.status != "ARCHIVED":
                new = move(ctx, board, task, "ARCHIVED", reason=None, actor=None)
                log(ctx, board.project, "TASK_ARCHIVED", task=new, cascade=True)
                archived += 1
        if epic.status != "ARCHIVED":
            now = ctx.stamp()
            epic = store.update("epic", epic_id, lambda e: replace(e, status="ARCHIVED", updated=now))
            log(ctx, board.project, "EPIC_ARCHIVED", epic_id=epic_id, archivedTaskCount=archived)
    return {"success": True, "epicId": epic_id, "epicStatus": epic.status, "archivedTaskCount": archived, "totalTasks": len(tasks)}

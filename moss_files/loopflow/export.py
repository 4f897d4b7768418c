"""`moss export --format loopflow`: the workspace's insights, sessions and tasks as LoopFlow's
own files, `.loop-flow/insights.json`, `backlog.json` and `progress.txt`, so a project can go
back to LoopFlow (which reads them into an empty database) as easily as it came.

Shell layer: gathers the live insights and the sessions (`store`), the tasks of PLAN.md
(`backlog`, LoopFlow's task tools' home here) and of the board, with what `moss migrate
loopflow` kept of each (`imported_from`, `source_id`, `source_fields`); the pure `exchange`
decides ids and renders; the files are written here. The folder that receives `.loop-flow/`
must be (or be directly inside) an export folder (`~/.moss/exports/`, the workspace's
`.moss/exports/`) or an `allowed_paths` entry, unless `allow_unsafe_paths`; a file there is
never replaced unless it is an earlier export of this kind. The export is whole: an unreadable
item file stops it with nothing written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from moss_files.foundation import datafiles, fs
from moss_files.foundation.arguments import given_path
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, NotFound
from moss_files.loopflow import exchange
from moss_files.loopflow.exchange import ExportTask, Origin
from moss_files.loopflow.store import ItemStore, feedback_store, insight_store, observation_store, session_store

__all__ = ["Context", "export_loopflow"]

EXPORTS_DIR = Path(".moss") / "exports"
FOLDER = ".loop-flow"
MAX_EARLIER_BYTES = 64 * 1024 * 1024
SYSTEM = "loopflow"  # == migrate.loopflow.SYSTEM: `imported_from` of what came from LoopFlow
# LoopFlow's task statuses as `moss migrate loopflow` put them on the board (== its _STATUS),
# and the way back for every board status.
_TO_BOARD = {"TODO": "BACKLOG", "IN_PROGRESS": "WORKING", "DONE": "DONE", "BLOCKED": "BACKLOG", "CANCELLED": "ARCHIVED"}
_FROM_BOARD = {
    "BACKLOG": "TODO",
    "PLANNING": "TODO",
    "AWAITING_APPROVAL": "TODO",
    "WORKING": "IN_PROGRESS",
    "REVIEW": "IN_PROGRESS",
    "DONE": "DONE",
    "ARCHIVED": "CANCELLED",
}
_FROM_PRIORITY = {"CRITICAL": "high", "HIGH": "high", "MEDIUM": "medium", "LOW": "low"}
_NOTES = re.compile(r"(?:^|\n)## Notes[ \t]*\n")


def export_loopflow(ctx: Context, *, path: str | None = None) -> dict[str, Any]:
    """Write `<path>/.loop-flow/insights.json`, `backlog.json` and `progress.txt` (default
    `path`: a new folder `~/.moss/exports/loopflow-<time>/`).

    Returns `{path, folder, files, exported_at, counts, ids: {insight, task, session} (ours ->
    exported), skipped, not_exported: [{kind, count, reason}], message}`. Raises
    InvalidRequest for a refused path, Conflict ALREADY_EXISTS for a file there that is not an
    earlier export, the error of the first unreadable item file.
    """
    now = ctx.stamp()
    insights = _insights(ctx)
    sessions = _sessions(ctx)
    plan_tasks, no_id = _plan_tasks(ctx)
    board_tasks, epics = _board_tasks(ctx)
    plan = exchange.plan_export(insights, sessions, [*board_tasks, *plan_tasks], now=now, project=Path(ctx.root).name)
    if path is None:
        target = ctx.home_folder() / EXPORTS_DIR / f"loopflow-{now.replace('-', '').replace(':', '')}"
        with fs.folder_fd(target, create=True):
            pass
    else:
        target = check_folder(path, ctx)
    folder = target / FOLDER
    _write(folder, plan.files)
    not_exported = _left_out(ctx, no_id, epics)
    message = (
        f"Wrote {plan.counts['insights']} insights, {plan.counts['tasks']} tasks and {plan.counts['sessions']} sessions to {folder}; "
        "LoopFlow reads them into an empty database (its `.loop-flow/loopflow.db` absent)."
    )
    return {
        "path": str(target),
        "folder": str(folder),
        "files": [f"{FOLDER}/{name}" for name in exchange.FILES],
        "exported_at": now,
        "counts": plan.counts,
        "ids": plan.ids,
        "skipped": plan.skipped,
        "not_exported": not_exported,
        "message": message,
    }


# --------------------------------------------------------------------------- the folder


def check_folder(raw: str, ctx: Context) -> Path:
    """The folder to write `.loop-flow/` into: it exists, is no link, has no `..`, and (unless
    `allow_unsafe_paths`) is an export folder or an `allowed_paths` entry, or directly inside
    one. Raises InvalidRequest (details.reason), NotFound for a folder that does not exist."""
    path = given_path(raw if raw.strip() else None)
    if path.is_symlink() or (path / FOLDER).is_symlink():
        raise InvalidRequest("path (or its .loop-flow folder) is a symbolic link", details={"reason": "symlink", "path": raw})
    if not ctx.config.allow_unsafe_paths:
        allowed = [ctx.home_folder() / EXPORTS_DIR, ctx.root / EXPORTS_DIR, *ctx.config.allowed_paths]
        real = Path(os.path.realpath(path))
        if not any(Path(os.path.realpath(folder)) in (real, real.parent) for folder in allowed):
            raise InvalidRequest(
                "path must be an allowed folder or directly inside one",
                details={"reason": "not_allowed", "path": raw, "allowed": [str(folder) for folder in allowed]},
                hint="use .moss/exports/ of the workspace, or add the folder to allowed_paths in .moss/config.toml",
            )
    if not path.is_dir():
        if path.parent == ctx.root / EXPORTS_DIR or path == ctx.root / EXPORTS_DIR:
            with fs.folder_fd(path, create=True):  # the workspace's own export folder is made on first use
                pass
        else:
            raise NotFound("the export folder does not exist", path=raw)
    return path


def _earlier_export(path: Path, name: str) -> bool:
    """Whether the file at `path` is an earlier `moss export --format loopflow` (which may be
    replaced); anything else, a person's file or LoopFlow's own, is kept."""
    try:
        data = fs.read_given_file(path, max_bytes=MAX_EARLIER_BYTES, what=name)
    except MossError:
        return False
    if name.endswith(".json"):
        try:
            value = datafiles.load_json(data, str(path))
        except MossError:
            return False
        return isinstance(value, dict) and value.get("source") == exchange.SOURCE
    return data.startswith(f"{exchange.PROGRESS_TITLE}\n\n{exchange.PROGRESS_MARK}".encode())


def _write(folder: Path, files: dict[str, str]) -> None:
    """Write the files into `folder`, each atomically, or none: a file that exists and is not an
    earlier export stops everything before the first write; a failed write takes back those
    this call created."""
    for name in files:
        target = folder / name
        if os.path.lexists(target) and not _earlier_export(target, name):
            raise Conflict(f"{target} exists and is not an earlier moss-files export; refusing to replace it", code="ALREADY_EXISTS", path=str(target))
    with fs.folder_fd(folder, create=True):
        pass
    created: list[Path] = []
    try:
        for name, text in files.items():
            target = folder / name
            existed = os.path.lexists(target)
            fs.write_atomic(target, text.encode("utf-8"), mode=0o600)
            if not existed:
                created.append(target)
    except BaseException:
        for target in created:
            target.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- gathering


def _origin(meta: dict[str, Any]) -> Origin:
    """What `moss migrate loopflow` kept of an item in its frontmatter (nothing for an item of
    ours, or one another system's import made)."""
    came = meta.get("imported_from")
    if not isinstance(came, str) or not (came == SYSTEM or came.startswith(f"{SYSTEM}:")):
        return Origin()
    source_id = meta.get("source_id")
    leftovers = meta.get("source_fields")
    return Origin(
        source_id=str(source_id) if isinstance(source_id, str | int) and not isinstance(source_id, bool) and str(source_id).strip() else None,
        leftovers=dict(leftovers) if isinstance(leftovers, dict) else {},
    )


def _whole(store: ItemStore[Any], *, include_deleted: bool = False) -> list[tuple[Path, Any]]:
    """Every item of a store; the error of the first file that cannot be read (an export is whole)."""
    items, problems = store.read_all(include_deleted=include_deleted)
    if problems:
        store.read(store.root / problems[0]["path"])  # raises that file's own error
    return items


def _insights(ctx: Context) -> list[tuple[Any, Origin]]:
    return [(item, _origin(fs.read_document(path).meta)) for path, item in _whole(insight_store(ctx.root))]


def _sessions(ctx: Context) -> list[tuple[Any, Origin]]:
    return [(item, _origin(fs.read_document(path).meta)) for path, item in _whole(session_store(ctx.root))]


def _plan_tasks(ctx: Context) -> tuple[list[ExportTask], int]:
    """PLAN.md's tasks with ids (LoopFlow's tasks here), and how many have none (cstack's own)."""
    import cstack
    from moss_files.loopflow import backlog

    plan = cstack.read_plan(ctx.root)
    ids = [task.id for task in plan.tasks if task.id]
    records = backlog.list_tasks(ctx, ids=ids, limit=10_000)["tasks"] if ids else []
    return [ExportTask(record["id"], record, Origin(), "plan") for record in records], len(plan.tasks) - len(ids)


def _board_tasks(ctx: Context) -> tuple[list[ExportTask], int]:
    """The board's tasks in LoopFlow's shape, and how many epics the board has."""
    from moss_files.board.store import BoardStore

    store = BoardStore(ctx.root, persist=False)
    try:
        board = store.load()
    finally:
        store.close()
    if board.problems:
        raise board.problems[0]
    out: list[ExportTask] = []
    for task in sorted(board.tasks.values(), key=lambda t: (t.epic, t.order, t.created or "", t.id)):  # the import kept LoopFlow's order
        origin = _origin(fs.read_document(store.path("task", task.id)).meta)
        status = _FROM_BOARD.get(task.status, "TODO")
        priority = _FROM_PRIORITY.get(task.priority, "medium")
        left = origin.leftovers
        if isinstance(left.get("status"), str) and _TO_BOARD.get(left["status"].strip().upper().replace(" ", "_")) == task.status:
            status = left["status"]  # BLOCKED and CANCELLED came to the board as BACKLOG and ARCHIVED
        description, notes = _split_notes(task.description)
        record = {
            "title": task.title,
            "description": description,
            "status": status,
            "priority": priority,
            "depends_on": list(task.depends_on),
            "acceptance_criteria": list(task.definition_of_done),
            "test_file": task.test_file,
            "notes": notes,
            "created_at": task.created,
            "updated_at": task.updated,
        }
        out.append(ExportTask(task.id, record, origin, "board"))
    return out, len(board.epics)


def _split_notes(description: str) -> tuple[str | None, str | None]:
    """A board task's description and its `## Notes` section (where the import put LoopFlow's notes)."""
    found = list(_NOTES.finditer(description))
    if not found:
        return description.strip() or None, None
    match = found[-1]
    lead, notes = description[: match.start()], description[match.end() :]
    return lead.strip() or None, notes.strip() or None


def _left_out(ctx: Context, no_id: int, epics: int) -> list[dict[str, Any]]:
    """What LoopFlow's files have no place for, counted, with why."""
    out: list[dict[str, Any]] = []
    live = len(insight_store(ctx.root).read_all()[0])
    deleted = len(insight_store(ctx.root).read_all(include_deleted=True)[0]) - live
    counts = (
        ("insight", deleted, "deleted insights (moss insight delete) stay behind"),
        ("observation", len(observation_store(ctx.root).read_all()[0]), "LoopFlow's files have no observations"),
        ("feedback", len(feedback_store(ctx.root).read_all()[0]), "LoopFlow keeps feedback in its database only"),
        ("summary", int((Path(ctx.root) / ".moss" / "summary.md").exists()), "LoopFlow keeps the repository summary in its database only"),
        ("epic", epics, "LoopFlow's backlog has no epics; their tasks are exported"),
        ("plan-task", no_id, "PLAN.md tasks without an id are cstack's, not LoopFlow's"),
    )
    for kind, count, reason in counts:
        if count:
            out.append({"kind": kind, "count": count, "reason": reason})
    return out

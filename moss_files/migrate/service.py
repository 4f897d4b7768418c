"""The migrations' use cases, one per source: gather (read the source, read what the workspace
holds), decide (the source's reader and `model.decide`), then, unless a dry run, apply and
write the report. Shell layer.

Every use case takes the Context and typed keyword arguments and returns the one JSON shape
of `model.plan_to_dict`, which `moss migrate <source> --json` prints. All of them:
- read the source and never change it (--move, where offered, removes a source file only once
  the new files are written and read back, and only when git could bring it back);
- decide everything before writing anything, so a malformed source file stops that source with
  SOURCE_INVALID (file and line, or JSON path) and nothing of it is written;
- refuse to run while the folders they would write hold merge conflicts (MERGE_CONFLICT);
- recognise what an earlier run imported, so running twice changes nothing the second time;
- with `dry_run`, write nothing at all (no lock file, no cache, no report).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cstack
import needlecast
from moss_files.board import activity as board_activity
from moss_files.board import files as board_files
from moss_files.board import store as board_store
from moss_files.board.model import Project
from moss_files.capsules.store import CapsuleStore, raise_first
from moss_files.foundation import collector, fs
from moss_files.foundation.arguments import optional
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError, NotFound, RepoError
from moss_files.migrate import backlog, beads, cortical, loopflow, moe, moss, sources, targets
from moss_files.migrate import tasks as board_items
from moss_files.migrate.ledger import Account
from moss_files.migrate.model import (
    CHANGE,
    CREATE,
    SKIP,
    Builder,
    Candidate,
    Item,
    Plan,
    Where,
    Write,
    decide,
    losses,
    plan_to_dict,
    report_name,
    source_error,
    system_name,
)

BOARD_FOLDERS = {kind: f"{board_items.BOARD}/{folder}" for kind, folder in board_items.FOLDERS.items()}
# The board reads no file larger than this: an item that would be is refused in the plan.
BOARD_LIMITS = dict.fromkeys(board_items.FOLDERS, board_store.MAX_FILE_BYTES)
COMMENTS = f"{board_items.BOARD}/comments"
CHAT = f"{board_items.BOARD}/chat"
BOARD_PROJECT = f"{board_items.BOARD}/project.md"
INSIGHTS, SESSIONS, FEEDBACK = ".moss/insights", ".moss/sessions", ".moss/feedback"
SUMMARY = ".moss/summary.md"
TASK_TARGETS = ("board", "plan")


def _today(ctx: Context) -> str:
    return ctx.today().replace("-", "")


def _progress(ctx: Context, what: str) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        if ctx.progress is not None:
            ctx.progress(done, total)
        elif total >= 1000:
            ctx.say(f"{what}: {done}/{total}")

    return report


def _resolve(ctx: Context, given: str | None, default: Path) -> Path:
    if given is None or not given.strip():
        return default
    path = Path(given).expanduser()
    return path if path.is_absolute() else (Path.cwd() / path)


def _finish(ctx: Context, plan: Plan, *, dry_run: bool, apply: Callable[[], list[str]], strict: bool = False) -> dict[str, Any]:
    """Apply a decided plan (unless a dry run, or there is nothing to do) and write its report.
    With `strict`, a plan that would leave anything behind (`model.losses`) is refused first,
    dry run or not. Raises InvalidDocument MIGRATION_WOULD_DROP."""
    if strict:
        refusal = losses(plan)
        if refusal is not None:
            raise refusal
    if dry_run or plan.empty:
        return plan_to_dict(plan, dry_run=dry_run)
    moved = apply()
    relpath = report_name(plan.source, ctx.stamp())
    result = plan_to_dict(plan, dry_run=False, report=relpath, moved=moved)
    written = targets.write_report(ctx.root, relpath, result)
    result["report"] = written
    return result


def _board_plan(
    ctx: Context,
    builder: Builder,
    candidates: Sequence[Candidate],
    imported: dict[tuple[str, str], str],
    existing: set[str],
) -> list[Write]:
    """Decide board (and other) candidates into the builder; returns the writes."""
    items, writes = decide(candidates, imported, existing, max_bytes=BOARD_LIMITS)
    builder.add(items, writes)
    return writes


@contextmanager
def _board_lock(ctx: Context, dry_run: bool) -> Iterator[None]:
    """The board's writer lock for a real run (a dry run takes no lock: it writes nothing)."""
    if dry_run:
        yield
        return
    from moss_files.board.store import BoardStore

    with BoardStore(ctx.root, persist=False).writing():
        yield


def _finish_under_board_lock(ctx: Context, plan: Plan, *, dry_run: bool, what: str, strict: bool = False) -> dict[str, Any]:
    """`_finish` for the sources that write board files (and insights beside them): the plan's
    writes are committed under the board's writer lock, with `what` as the progress label."""

    def apply() -> list[str]:
        with _board_lock(ctx, dry_run):
            targets.commit(ctx.root, plan.writes, _progress(ctx, what))
        return []

    return _finish(ctx, plan, dry_run=dry_run, apply=apply, strict=strict)


def _read_project(ctx: Context) -> Project | None:
    path = ctx.root / BOARD_PROJECT
    try:
        doc = fs.read_document(path)
    except NotFound:
        return None
    return board_files.parse_project(doc, BOARD_PROJECT, default_name=ctx.root.name)


# --------------------------------------------------------------------------- Moss


def migrate_moss(
    ctx: Context,
    *,
    db: str | None = None,
    jsonl: str | None = None,
    workspace: str | None = None,
    include_deleted: bool = False,
    rename: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Moss's capsules, from its SQLite store (default `~/.moss/moss.db`, read-only) or from a
    JSONL export (`jsonl`), every workspace or one, soft-deleted ones with `include_deleted`.

    Raises NotFound (no store), InvalidDocument SOURCE_INVALID (a row or line that is not a
    capsule), Conflict NAME_ALREADY_EXISTS (a live name taken; `rename` suffixes it).
    """
    if db and jsonl:
        raise InvalidRequest("give --db or --jsonl, not both", code="AMBIGUOUS_ADDRESSING")
    now_ms = int(ctx.now().timestamp() * 1000)
    found: list[moss.Found] = []
    if jsonl:
        path = _resolve(ctx, jsonl, Path(jsonl))
        shown = sources.shown(path, ctx.root)
        version = "JSONL export"
        for number, record in sources.load_jsonl(path, shown):
            if isinstance(record, dict) and record.get("_moss_export") is True:
                version = f"JSONL export, schema {record.get('schema_version', '1.0')}"
            capsule = moss.parse_capsule(record, Where(shown, number), now_ms=now_ms)
            if capsule is not None:
                found.append(moss.Found(capsule, Where(shown, number)))
    else:
        path = _resolve(ctx, db, ctx.home_folder() / ".moss" / "moss.db")
        shown = sources.shown(path, ctx.root)
        with sources.open_database(path, shown) as connection:
            columns = sources.tables(connection).get(moss.STORE_TABLE)
            if columns is None:
                raise source_error("the database has no capsules table; is it Moss's store?", Where(shown))
            missing = [column for column in moss.REQUIRED_COLUMNS if column not in columns]
            if missing:
                raise source_error(f"the capsules table lacks {', '.join(missing)}", Where(shown), missing=missing)
            user_version = sources.scalar(connection, "PRAGMA user_version")
            version = f"SQLite user_version {user_version}"
            present = [column for column in moss.STORE_COLUMNS if column in columns]
            rows = sources.rows(connection, moss.STORE_TABLE, present, order="created_at, id")
        report = _progress(ctx, "reading capsules")
        for number, row in enumerate(rows, start=1):
            where = Where(shown, None, f"capsules[{row.get('id')}]")
            capsule = moss.parse_capsule(moss.row_to_record(row, where), where, now_ms=now_ms)
            if capsule is not None:
                found.append(moss.Found(capsule, where))
            if number % 1000 == 0:
                report(number, len(rows))
    targets.refuse_conflicts(ctx.root, (moss.CAPSULES_FOLDER,))
    store = CapsuleStore(ctx.root)
    scan = store.scan(None, include_deleted=True)
    raise_first(scan.problems)
    items, candidates = moss.plan(
        found,
        [stored.capsule for stored in scan.capsules],
        workspace=optional(workspace),
        include_deleted=include_deleted,
        rename=rename,
        new_id=ctx.new_ulid,
    )
    builder = Builder("moss", shown, version=version)
    decided, writes = decide(candidates, {}, set())
    builder.add(items + decided, writes)
    plan = builder.build()

    def apply() -> list[str]:
        with store.writing():
            targets.commit(ctx.root, plan.writes, _progress(ctx, "writing capsules"))
        return []

    return _finish(ctx, plan, dry_run=dry_run, apply=apply)


# --------------------------------------------------------------------------- Moe


def _moe_files(ctx: Context, folder: Path, suffix: str, kind: str, unreadable: list[tuple[str, Where, str]]) -> list[tuple[Where, Any]]:
    """Each `*.json` file of a `.moe/` folder, parsed, as Moe's `loadEntities` reads them: a
    file that is not JSON (a BOM before it is not JSON to Moe either) is left out, with why."""
    files = sources.list_files(folder, (suffix,))
    report = _progress(ctx, f"reading {sources.shown(folder, ctx.root)}")
    loaded = []
    for number, file in enumerate(files, start=1):
        shown = sources.shown(file, ctx.root)
        try:
            if sources.read_bytes(file, shown).startswith(b"\xef\xbb\xbf"):
                unreadable.append((kind, Where(shown), "starts with a byte-order mark, which Moe's JSON reader refuses; Moe skips this file too"))
                continue
            loaded.append((Where(shown), sources.load_json(file, shown)))
        except MossError as err:
            unreadable.append((kind, Where(shown, err.line), f"{err.code}: {err.message}; Moe skips this file too; the rest is imported"))
        if number % 1000 == 0:
            report(number, len(files))
    return loaded


def _moe_messages(ctx: Context, folder: Path, unreadable: list[tuple[str, Where, str]]) -> dict[str, list[tuple[Where, Any]]]:
    """Each channel's message lines (`messages/<channel>.jsonl`); a line that is not JSON is
    left out with why (Moe's reader skips it too), the others read."""
    found: dict[str, list[tuple[Where, Any]]] = {}
    for file in sources.list_files(folder, (".jsonl",)):
        shown = sources.shown(file, ctx.root)
        lines: list[tuple[Where, Any]] = []
        try:
            text = sources.read_text(file, shown)
        except MossError as err:
            unreadable.append(("message", Where(shown, err.line), f"{err.code}: {err.message}; the rest is imported"))
            continue
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                lines.append((Where(shown, number), json.loads(line)))
            except ValueError as exc:
                unreadable.append(("message", Where(shown, number), f"the line is not JSON ({exc}); the rest is imported"))
        found[file.name.removesuffix(".jsonl")] = lines
    return found


_MOE_READ = {"project.json", "epics", "tasks", "workers", "teams", "proposals", "channels", "messages", "decisions", "activity.log"}


def _moe_others(base: Path) -> dict[str, str]:
    """What else `.moe/` holds, counted as it is (every file of every nested folder), for the
    report: the board has no kind for skills, roles, agents' files or runtime state."""
    found: dict[str, str] = {}
    for entry in sorted(base.iterdir()):
        if entry.name in _MOE_READ or entry.name.startswith("activity.log."):
            continue
        if entry.is_dir() and not entry.is_symlink():
            files = [path for path in entry.rglob("*") if path.is_file()]
            folders = {path.parent for path in files if path.parent != entry}
            if files:
                found[entry.name] = f"{len(files)} file(s)" + (f" in {len(folders)} nested folder(s)" if folders else "")
        elif entry.name == "daemon.json":
            found[entry.name] = "the running daemon's port and pid (per machine)"
        else:
            found[entry.name] = "a file"
    rotated = sorted(path.name for path in base.glob("activity.log.*"))
    if rotated:
        found["activity.log rotations"] = f"{len(rotated)} rotated log(s) ({', '.join(rotated[:3])}{', …' if len(rotated) > 3 else ''})"
    return found


def migrate_moe(ctx: Context, *, path: str | None = None, project: str | None = None, strict: bool = False, dry_run: bool = False) -> dict[str, Any]:
    """Moe's `.moe/` folder: project settings and rails, epics, tasks (statuses, plans and
    steps, times, QA history, verification, handoffs, budgets, comments), workers, teams, rail
    proposals, chat channels, messages and decisions (into the board's chat), and the activity
    log (appended to the board's), every field accounted in the report's ledger. `project`
    names the source when several Moe boards come into one workspace (default: Moe's project
    id). A file Moe could not read either, or an entity with values Moe never writes, is a
    reported skip and the rest is imported (`strict` refuses the run instead).

    Raises NotFound (no `.moe/`), InvalidDocument SOURCE_INVALID (`project.json` is not JSON:
    Moe does not start either), MIGRATION_WOULD_DROP (with `strict`).
    """
    base = _resolve(ctx, path, ctx.root / ".moe")
    shown = sources.shown(base, ctx.root)
    if not base.is_dir():
        raise NotFound("no .moe/ folder", path=shown, hint="give the folder with --from")
    project_file = base / "project.json"
    moe_project = None
    if project_file.exists():
        where = Where(sources.shown(project_file, ctx.root))
        moe_project = (where, sources.load_json(project_file, where.file))
    unreadable: list[tuple[str, Where, str]] = []
    entities: dict[str, list[tuple[Where, Any]]] = {}
    for kind, folder in (("epic", "epics"), ("task", "tasks"), ("worker", "workers"), ("team", "teams"), ("proposal", "proposals")):
        entities[kind] = _moe_files(ctx, base / folder, ".json", kind, unreadable)
    channels = _moe_files(ctx, base / "channels", ".json", "channel", unreadable)
    decisions = _moe_files(ctx, base / "decisions", ".json", "decision", unreadable)
    messages = _moe_messages(ctx, base / "messages", unreadable)
    activity: list[tuple[Where, Any]] = []
    log = base / "activity.log"
    if log.exists():
        log_shown = sources.shown(log, ctx.root)
        activity = [(Where(log_shown, number), record) for number, record in sources.load_jsonl(log, log_shown)]
    scope_id = optional(project) or (str(moe_project[1].get("id")) if moe_project and isinstance(moe_project[1], dict) and moe_project[1].get("id") else "moe")
    imported_from = system_name("moe", scope_id if scope_id != "moe" else None)
    targets.refuse_conflicts(ctx.root, (board_items.BOARD,))
    imported, existing = targets.provenance_index(ctx.root, BOARD_FOLDERS, imported_from)
    imported.update(targets.file_index(ctx.root, BOARD_PROJECT, "project", imported_from))
    board_project = _read_project(ctx)
    result = moe.plan(
        moe.Source(moe_project, entities, activity, _moe_others(base), channels, messages, decisions, unreadable),
        scope=scope_id,
        imported=imported,
        project=board_project,
        today=_today(ctx),
        now=ctx.stamp(),
        max_comment_bytes=board_store.MAX_LOG_LINE_BYTES,
    )
    builder = Builder("moe", shown, version=result.version, accounted=True)
    builder.notes.extend(result.notes)
    builder.add(result.skipped)
    candidates = list(result.candidates)
    if result.project is not None:
        candidates.insert(0, result.project)
    items, writes = decide(candidates, imported, existing, max_bytes=BOARD_LIMITS)
    builder.add(items, writes)
    builder.writes.extend(_comment_writes(ctx, items, dict(result.comments)))
    _chat_writes(ctx, builder, result.chat)
    logged = targets.logged_sources(ctx.root, _activity_files(ctx.root), imported_from)
    lines: dict[str, list[bytes]] = {}
    for where, old, record, fates in result.events:
        day_log = f"{board_items.BOARD}/{board_activity.day_file(str(record.get('timestamp') or ''))}"
        if old in logged:
            builder.add([Item("event", old, where, SKIP, day_log, reason="already in the activity log")])
            continue
        logged.add(old)
        lines.setdefault(day_log, []).append(board_files_event_line(record))
        builder.add([Item("event", old, where, CHANGE, day_log, record["id"], fates=fates)])
    for day_log in sorted(lines):
        builder.writes.append(Write(day_log, b"".join(lines[day_log]), mode="append"))
    plan = builder.build()

    return _finish_under_board_lock(ctx, plan, dry_run=dry_run, what="writing board files", strict=strict)


def _chat_writes(ctx: Context, builder: Builder, lines: Sequence[moe.ChatLine]) -> None:
    """Chat lines into their channels' files (`.moss/board/chat/<channel>.jsonl`): a new file,
    or the lines it lacks (by line id) appended; a line there already is a skip, and so is a
    second line with the same id (a message Moe wrote twice)."""
    present: dict[str, set[str] | None] = {}
    seen: set[str] = set()
    new: dict[str, list[bytes]] = {}
    for line in lines:
        relpath = f"{CHAT}/{line.channel}.jsonl"
        if relpath not in present:
            present[relpath] = targets.record_ids(ctx.root, relpath)
        line_id = line.record["id"]
        if line_id in (present[relpath] or ()):
            builder.add([Item(line.kind, line.old_id, line.where, SKIP, relpath, line_id, reason="already imported", made=line.made)])
            continue
        if line_id in seen:
            reason = "the source holds this id twice in one channel; the first is imported"
            builder.add([Item(line.kind, line.old_id, line.where, SKIP, relpath, line_id, reason=reason, made=line.made, loss=True)])
            continue
        seen.add(line_id)
        new.setdefault(relpath, []).append((json.dumps(line.record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))
        builder.add([Item(line.kind, line.old_id, line.where, CHANGE, relpath, line_id, line.note, line.fates, line.made)])
    for relpath, data in new.items():
        builder.writes.append(Write(relpath, b"".join(data), mode=CREATE if present[relpath] is None else "append"))


def _activity_files(root: Path) -> list[str]:
    """The board's activity log files, relative to the workspace root, as the log lists them."""
    board = root / board_items.BOARD
    return [f"{board_items.BOARD}/{entry.name}" for entry in board_activity.ActivityLog(root, board, persist=False).listing()]


def board_files_event_line(record: dict[str, Any]) -> bytes:
    """One activity log line, checked by the board's own event reader first."""
    event = board_files.parse_event(record)
    return (json.dumps(board_files.event_to_dict(event), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# --------------------------------------------------------------------------- LoopFlow


def _loopflow_json(ctx: Context, path: Path, unreadable: list[tuple[str, str, Where, str]]) -> tuple[str, Any] | None:
    """A LoopFlow JSON file's value, or None when it is not JSON: then it is reported (LoopFlow's
    import logs the error and imports nothing of that file) and the other files are read."""
    shown = sources.shown(path, ctx.root)
    try:
        return shown, sources.load_json(path, shown)
    except MossError as err:
        if err.code != "SOURCE_INVALID":
            raise
        unreadable.append(("file", path.name, Where(shown, err.line), f"{err.message}; LoopFlow imports nothing of this file either; the rest is imported"))
        return None


def _loopflow_layers(ctx: Context, base: Path) -> list[loopflow.Layer]:
    """Every place under `base` LoopFlow kept data, most authoritative first."""
    layers: list[loopflow.Layer] = []
    db = base / ".loop-flow" / "loopflow.db"
    if db.exists():
        shown = sources.shown(db, ctx.root)
        with sources.open_database(db, shown) as connection:
            tables = sources.tables(connection)
            version = "SQLite"
            if "schema_migrations" in tables:
                version = f"SQLite schema v{sources.scalar(connection, 'SELECT MAX(version) FROM schema_migrations')}"
            found: dict[str, list[tuple[Where, dict[str, Any]]]] = {}
            for table in ("insights", "tasks", "sessions"):
                if table in tables:
                    rows = sources.rows(connection, table, tables[table], order="rowid")
                    found[table] = loopflow.database_rows(table, rows, shown)
            context = []
            if "repo_context" in tables:
                rows = sources.rows(connection, "repo_context", tables["repo_context"], order="rowid")
                context = [(Where(shown, None, f"repo_context[{row.get('key')}]"), row) for row in rows]
            feedback = []
            if "feedback_specs" in tables:
                rows = sources.rows(connection, "feedback_specs", tables["feedback_specs"], order="rowid")
                feedback = [(Where(shown, None, f"feedback_specs[{row.get('id')}]"), row) for row in rows]
        layers.append(loopflow.Layer(shown, version, found.get("insights", []), found.get("tasks", []), found.get("sessions", []), None, (), context, feedback))
    for folder in (base / ".loop-flow", base / ".loop-flow" / "plan", base / ".agents" / "plan"):
        insights_path, backlog_path, progress_path = folder / "insights.json", folder / "backlog.json", folder / "progress.txt"
        if not (insights_path.exists() or backlog_path.exists() or progress_path.exists()):
            continue
        versions: list[str] = []
        insights: list[tuple[Where, dict[str, Any]]] = []
        tasks: list[tuple[Where, dict[str, Any]]] = []
        sessions: list[tuple[Where, dict[str, Any]]] = []
        unreadable: list[tuple[str, str, Where, str]] = []
        project: str | None = None
        if insights_path.exists():
            loaded = _loopflow_json(ctx, insights_path, unreadable)
            if loaded is not None:
                version, insights = loopflow.insights_file(loaded[1], Where(loaded[0]))
                versions.append(f"{loaded[0]}: {version}")
        if backlog_path.exists():
            loaded = _loopflow_json(ctx, backlog_path, unreadable)
            if loaded is not None:
                version, project, tasks = loopflow.backlog_file(loaded[1], Where(loaded[0]))
                versions.append(f"{loaded[0]}: {version}")
        if progress_path.exists():
            shown = sources.shown(progress_path, ctx.root)
            sessions = loopflow.progress_file(sources.read_text(progress_path, shown), shown)
            versions.append(f"{shown}: progress log")
        layers.append(loopflow.Layer(sources.shown(folder, ctx.root), "; ".join(versions), insights, tasks, sessions, project, (), (), (), unreadable))
    return layers


def migrate_loopflow(
    ctx: Context,
    *,
    path: str | None = None,
    tasks_to: str = "board",
    project: str | None = None,
    strict: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """LoopFlow's insights, sessions and tasks from every format it used (its SQLite database,
    its JSON exports, the file-based `plan/` folders and `progress.txt`), and the database's
    repository context (`.moss/summary.md`) and feedback (`.moss/feedback/`), read from the
    project at `path` (default: the workspace), every field accounted in the report's ledger.
    Tasks go to the board (`tasks_to="board"`) or become PLAN.md lines (`"plan"`). A file or an
    item LoopFlow could not import either is a reported skip and the rest is imported
    (`strict` refuses the run instead, as it does one that would drop a field).

    Raises NotFound (no LoopFlow data), InvalidDocument SOURCE_INVALID (a database that cannot
    be read), MIGRATION_WOULD_DROP (with `strict`).
    """
    if tasks_to not in TASK_TARGETS:
        raise InvalidRequest(f"tasks go to board or plan, not {tasks_to!r}", details={"field": "tasks"})
    base = _resolve(ctx, path, ctx.root)
    layers = _loopflow_layers(ctx, base)
    if not layers:
        raise NotFound("no LoopFlow data (.loop-flow/ or .agents/plan/)", path=sources.shown(base, ctx.root))
    merged = loopflow.merge(layers)
    scope = optional(project) or loopflow.SYSTEM
    imported_from = system_name(loopflow.SYSTEM, optional(project))
    folders = {"insight": INSIGHTS, "session": SESSIONS, "feedback": FEEDBACK, **BOARD_FOLDERS}
    targets.refuse_conflicts(ctx.root, (INSIGHTS, SESSIONS, FEEDBACK, board_items.BOARD, ".cstack"))
    imported, existing = targets.provenance_index(ctx.root, folders, imported_from)
    imported.update(targets.file_index(ctx.root, SUMMARY, "summary", imported_from))
    own_summary = (ctx.root / SUMMARY).exists() and ("summary", "repo_context") not in imported
    result = loopflow.plan(merged, scope=scope, imported=imported, tasks_to=tasks_to, today=_today(ctx), own_summary=own_summary)
    builder = Builder("loopflow", sources.shown(base, ctx.root), version=" | ".join(f"{layer.version}" for layer in layers), accounted=True)
    for layer in layers:
        builder.notes.extend(layer.notes)
    builder.notes.extend(result.notes)
    builder.add(result.skipped)
    _board_plan(ctx, builder, result.candidates, imported, existing)
    if result.plan_tasks:
        _plan_md(ctx, builder, result.plan_tasks)
    plan = builder.build()

    return _finish_under_board_lock(ctx, plan, dry_run=dry_run, what="writing LoopFlow items", strict=strict)


def _plan_order(tasks: Sequence[loopflow.PlanTask]) -> list[loopflow.PlanTask]:
    """The tasks in LoopFlow's order, except that a task comes after the tasks it depends on
    (PLAN.md adds a dependency only on a task it holds already); a cycle keeps source order."""
    by_id = {task.old_id.casefold(): task for task in tasks}
    placed: set[str] = set()
    ordered: list[loopflow.PlanTask] = []
    visiting: set[str] = set()

    def place(task: loopflow.PlanTask) -> None:
        key = task.old_id.casefold()
        if key in placed or key in visiting:
            return
        visiting.add(key)
        for dep in task.depends:
            target = by_id.get(dep.casefold())
            if target is not None:
                place(target)
        visiting.discard(key)
        placed.add(key)
        ordered.append(task)

    for task in tasks:
        place(task)
    return ordered


def _plan_md(ctx: Context, builder: Builder, tasks: Sequence[loopflow.PlanTask]) -> None:
    """PLAN.md lines for LoopFlow's tasks, made by cstack's own use cases (add, then the
    status's transition) on a copy of PLAN.md in a temporary workspace, so PLAN.md itself is
    written once, as a whole, only when the source is applied. A task is added after those it
    depends on, so every dependency on a task PLAN.md holds is written; one naming a task that
    is nowhere is dropped and named in the ledger."""
    relpath = ".cstack/PLAN.md"
    plan_path = ctx.root / relpath
    original = fs.read_bytes(plan_path) if plan_path.exists() else None
    known = {task.id.casefold() for task in cstack.read_plan(ctx.root).tasks if task.id} if original is not None else set()
    staging = Path(tempfile.mkdtemp(prefix="moss-migrate-"))
    try:
        scratch = Context(staging, clock=ctx.clock, ids=ctx.ids)
        cstack.init_stack(scratch)
        for name in ("CURRENT.md", "MEMORY.md"):
            (staging / ".cstack" / name).unlink(missing_ok=True)  # transitions then leave no trace there
        if original is not None:
            (staging / ".cstack" / "PLAN.md").write_bytes(original)
        added = []
        for task in tasks:
            if task.old_id.casefold() in known:
                builder.add([Item("task", task.old_id, task.where, SKIP, relpath, reason="PLAN.md has a task with this id already")])
                continue
            known.add(task.old_id.casefold())
            added.append(task)
        in_plan = set(known)
        for task in _plan_order(added):
            fates = Account()
            written = []
            for dep in task.depends:
                if dep.casefold() in in_plan:
                    written.append(dep)
                    fates.mapped("depends_on", "PLAN.md depends:", dep)
                else:
                    fates.dropped("depends_on", f"{dep} is not in the source nor in PLAN.md, which names only tasks it holds", dep)
            try:
                cstack.add_task(scratch, task=task.spec, ident=task.old_id, depends=written)
            except MossError as err:
                raise source_error(f"cstack refused the task: {err.message}", task.where, cause=err.code) from None
            builder.add([Item("task", task.old_id, task.where, CHANGE, relpath, task.old_id, fates=(*task.fates, *fates.done()))])
        for task in added:
            if task.action is not None:
                cstack.transition(scratch, action=task.action, task=task.old_id, reason=task.reason)
        new = (staging / ".cstack" / "PLAN.md").read_bytes()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if added:
        builder.notes.append(
            "PLAN.md holds a task's title, priority, status and dependencies; descriptions and acceptance criteria stay in LoopFlow's files (use --tasks board to keep them)"
        )
        builder.writes.append(Write(relpath, new, mode="replace", expected=original))


# --------------------------------------------------------------------------- Backlog.md and Beads


def _comment_writes(ctx: Context, items: Sequence[Item], comments: dict[str, list[Any]]) -> list[Write]:
    """The comment files of the tasks this plan creates: a new file per task, or, where one
    is there already, the lines it lacks (by comment id), appended."""
    writes: list[Write] = []
    for item in items:
        found = comments.get(item.new_id or "") if item.action == CREATE and item.kind == "task" else None
        if not found:
            continue
        relpath = f"{COMMENTS}/{item.new_id}.jsonl"
        present = targets.record_ids(ctx.root, relpath)
        lines = [
            json.dumps(comment.record, ensure_ascii=False, separators=(",", ":")) + "\n" for comment in found if comment.record["id"] not in (present or ())
        ]
        if lines:
            writes.append(Write(relpath, "".join(lines).encode("utf-8"), mode=CREATE if present is None else "append"))
    return writes


def migrate_backlog(ctx: Context, *, path: str | None = None, project: str | None = None, strict: bool = False, dry_run: bool = False) -> dict[str, Any]:
    """Backlog.md's folder (`backlog/`, or `.backlog/`): its tasks (`tasks/`, `drafts/`,
    `completed/`, `archive/tasks/`, `archive/drafts/`) as board tasks with their comments, its
    milestones (`milestones/`, `archive/milestones/`) as epics, every field accounted in the
    report's ledger. A file Backlog.md does not read is skipped as it skips it; one it could
    not parse either is skipped with the reason, and the rest imported (`strict` refuses the
    run instead).

    Raises NotFound (no backlog folder), InvalidDocument MIGRATION_WOULD_DROP (with `strict`).
    """
    default = ctx.root / "backlog" if (ctx.root / "backlog").is_dir() else ctx.root / ".backlog"
    base = _resolve(ctx, path, default)
    shown = sources.shown(base, ctx.root)
    if not any((base / folder).is_dir() for folder in ("tasks", "completed", "drafts")):
        raise NotFound("no Backlog.md folder (backlog/tasks/)", path=shown, hint="give the folder with --from")
    config = backlog.Config()
    notes: list[str] = []
    config_path = base / "config.yml"
    if config_path.exists():
        config, notes = backlog.parse_config(sources.read_text(config_path, sources.shown(config_path, ctx.root)))
    entries: list[backlog.Entry] = []
    for folder in backlog.FOLDERS:
        for entry_path, is_file in sources.list_entries(base / folder):
            entry_shown = sources.shown(entry_path, ctx.root)
            text = problem = None
            if is_file and backlog.reads(folder, entry_path.name, config):
                try:
                    text = sources.read_text(entry_path, entry_shown)
                except MossError as err:
                    problem = f"{err.details.get('cause', err.code)}: {err.message}"
            entries.append(backlog.Entry(Where(entry_shown), folder, entry_path.name, is_file, text, problem))
    scope = optional(project) or config.project_name or backlog.SYSTEM
    imported_from = system_name(backlog.SYSTEM, optional(project) or config.project_name)
    targets.refuse_conflicts(ctx.root, (board_items.BOARD,))
    imported, existing = targets.provenance_index(ctx.root, BOARD_FOLDERS, imported_from)
    result = backlog.plan(entries, config=config, scope=scope, imported=imported, today=_today(ctx), max_comment_bytes=board_store.MAX_LOG_LINE_BYTES)
    read = sum(1 for entry in entries if entry.text is not None)
    builder = Builder("backlog", shown, version=f"Backlog.md (task prefix {config.task_prefix}; {read} files read)", accounted=True)
    builder.notes.extend(notes + result.notes)
    for folder in ("docs", "decisions"):
        count = len(sources.list_files(base / folder, (".md",)))
        if count:
            builder.notes.append(f"{shown}/{folder}: {count} file(s) not imported (the board has no such kind; they stay where they are)")
    builder.add(result.skipped)
    items, writes = decide(result.candidates, imported, existing, max_bytes=BOARD_LIMITS)
    builder.add(items, writes)
    builder.writes.extend(_comment_writes(ctx, items, dict(result.comments)))
    plan = builder.build()

    return _finish_under_board_lock(ctx, plan, dry_run=dry_run, what="writing board files", strict=strict)


def migrate_beads(
    ctx: Context,
    *,
    path: str | None = None,
    project: str | None = None,
    include_deleted: bool = False,
    strict: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Beads' issues (`.beads/issues.jsonl`, or `beads.jsonl`) as board epics and tasks with
    their comments, every field accounted in the report's ledger; tombstones (deleted issues)
    only with `include_deleted`, as ARCHIVED.

    Raises NotFound, InvalidDocument SOURCE_INVALID (a line that is not JSON, or a text field
    that is not text: Beads refuses such a file too), MIGRATION_WOULD_DROP (with `strict`).
    """
    given = _resolve(ctx, path, ctx.root / ".beads")
    # Whatever stands at a name counts (a FIFO too): reading it refuses what is not a file.
    candidates_paths = [given] if os.path.lexists(given) and not given.is_dir() else [given / "issues.jsonl", given / "beads.jsonl"]
    source = next((candidate for candidate in candidates_paths if os.path.lexists(candidate)), None)
    if source is None:
        raise NotFound("no Beads issues file (.beads/issues.jsonl)", path=sources.shown(given, ctx.root), hint="give the file with --from")
    shown = sources.shown(source, ctx.root)
    with collector.paused():  # a hundred thousand issues: see collector
        records = sources.JsonLines(source, shown, passes=2)  # beads.plan goes through it twice
        scope = optional(project) or beads.SYSTEM
        imported_from = system_name(beads.SYSTEM, optional(project))
        targets.refuse_conflicts(ctx.root, (board_items.BOARD,))
        imported, existing = targets.provenance_index(ctx.root, BOARD_FOLDERS, imported_from)
        result = beads.plan(
            records, scope=scope, imported=imported, include_deleted=include_deleted, today=_today(ctx), max_comment_bytes=board_store.MAX_LOG_LINE_BYTES
        )
        builder = Builder("beads", shown, version=f"JSONL ({len(records)} records)", accounted=True)
        builder.notes.extend(result.notes)
        builder.add(result.skipped)
        items, writes = decide(result.every_candidate(), imported, existing, max_bytes=BOARD_LIMITS)
        builder.add(items, writes)
        builder.writes.extend(_comment_writes(ctx, items, dict(result.comments)))
        plan = builder.build()
        return _finish_under_board_lock(ctx, plan, dry_run=dry_run, what="writing board files", strict=strict)


# --------------------------------------------------------------------------- cortical stack


def migrate_cortical(ctx: Context, *, path: str | None = None, move: bool = False, dry_run: bool = False) -> dict[str, Any]:
    """Cortical-stack's `.cstack/INBOX.md` and `OUTBOX.md` into the sleeve's needlecast mailbox
    (inbox messages delivered, outbox messages queued for the router, read marks kept), and a
    check of CURRENT.md, PLAN.md and MEMORY.md (which stay: they are this toolkit's too). With
    `move`, INBOX.md and OUTBOX.md are removed once every message reads back from the mailbox,
    and only when git could bring them back.

    Raises NotFound (no `.cstack/`), InvalidDocument SOURCE_INVALID (a block that is not a
    message), RepoError MOVE_REFUSED, Conflict DUPLICATE_MESSAGE_ID.
    """
    base = _resolve(ctx, path, ctx.root / ".cstack")
    shown_base = sources.shown(base, ctx.root)
    if not base.is_dir():
        raise NotFound("no .cstack/ folder", path=shown_base)
    builder = Builder("cortical", shown_base)
    datas: dict[Path, bytes] = {}
    entries: dict[str, list[Any]] = {}
    shown: dict[str, str] = {}
    for name in (cortical.INBOX, cortical.OUTBOX):
        file = base / name
        shown[name] = sources.shown(file, ctx.root)
        if not file.exists() and not file.is_symlink():
            continue
        data = sources.read_bytes(file, shown[name])
        datas[file] = data
        entries[name] = needlecast.read_mailfile(data, file)
    for name in ("CURRENT.md", "PLAN.md", "MEMORY.md"):
        file = base / name
        if file.exists():
            file_shown = sources.shown(file, ctx.root)
            try:
                text = sources.read_text(file, file_shown)
            except MossError as err:
                builder.checks.append({"path": file_shown, "ok": False, "code": err.code, "line": err.line, "message": err.message})
                continue
            builder.checks.append(cortical.check(name, text, file_shown))
    builder.version = "cortical-stack 1.x (INBOX.md / OUTBOX.md)" if datas else "no INBOX.md or OUTBOX.md"
    if move and datas:
        refusals = sources.move_refusals(ctx.root, sorted(datas))
        if refusals:
            raise RepoError(
                "--move removes INBOX.md and OUTBOX.md only when git can bring them back: " + ", ".join(f"{p} ({why})" for p, why in refusals.items()),
                code="MOVE_REFUSED",
                details={"files": refusals},
                hint="commit them first, or run without --move",
            )
    targets.refuse_conflicts(ctx.root, (".needlecast",))
    known = needlecast.known_messages(ctx.root)
    box = ctx.root / ".needlecast"
    inbox_target = ".needlecast/inbox/" if (box / "inbox").is_dir() else ".needlecast/inbox.md"
    outbox_target = ".needlecast/outbox/" if (box / "outbox").is_dir() else ".needlecast/outbox.md"
    planned = cortical.plan(entries, shown, known, inbox_target=inbox_target, outbox_target=outbox_target)
    builder.add(planned.items)
    builder.notes.extend(planned.notes)
    if planned.read:
        builder.add(
            [
                Item("read-mark", key, Where(shown[cortical.INBOX]), CHANGE, ".needlecast/read.log", reason=f"read (from {sender})")
                for sender, key in planned.read
            ]
        )
    for target, messages in ((inbox_target, planned.inbox), (outbox_target, planned.outbox)):
        if messages:
            builder.writes.append(Write(target, b"", mode="via"))
    if planned.read:
        builder.writes.append(Write(".needlecast/read.log", b"", mode="via"))
    if move:
        builder.removals.extend(sources.shown(file, ctx.root) for file in sorted(datas))
    plan = builder.build()

    def apply() -> list[str]:
        if planned.inbox or planned.outbox or planned.read:
            needlecast.import_messages(ctx.root, inbox=planned.inbox, outbox=planned.outbox, read=planned.read, now=ctx.now())
        if not move:
            return []
        after = needlecast.known_messages(ctx.root)
        for name, found in entries.items():
            for entry in found:
                key = needlecast.with_key(entry)
                present = (
                    any(pair[1] == key.id for pair in after["inbox"])
                    if name == cortical.INBOX
                    else key.id in after["outbox"] | after["archive"] | after["dead"]
                )
                if not present:
                    raise RepoError(f"message {key.id} does not read back from the mailbox; INBOX.md and OUTBOX.md are left in place", code="MOVE_REFUSED")
        return targets.remove_sources(ctx.root, sorted(datas), datas)

    return _finish(ctx, plan, dry_run=dry_run, apply=apply)


# --------------------------------------------------------------------------- needlecast layouts


def migrate_needlecast(ctx: Context, *, layout: str, path: str | None = None, dry_run: bool = False) -> dict[str, Any]:
    """Switch a sleeve's mailbox to layout `v1` (a file per mailbox) or `v2` (a file per
    message), both ways without losing a message, an id, a read mark or the router's delivery
    records. The files the switch empties or removes must be committed in git and unchanged.

    Raises InvalidRequest (unknown layout, no `.needlecast/`), RepoError MOVE_REFUSED,
    InvalidDocument MESSAGE_INVALID (a v2 file that is not a message, on the way to v1).
    """
    root = _resolve(ctx, path, ctx.root)
    targets.refuse_conflicts(root, (".needlecast",))
    switch = needlecast.plan_switch(root, layout, ctx.now())
    shown = sources.shown(root / ".needlecast", ctx.root)
    builder = Builder(
        "needlecast",
        shown,
        version=f"layout {'v2' if (root / '.needlecast' / 'inbox').is_dir() or (root / '.needlecast' / 'outbox').is_dir() else 'v1'} to {layout}",
    )
    for move in switch.moves:
        source, _sep, line = move.source.partition(":")
        where = Where(sources.shown(root / source, ctx.root), int(line) if line.isdigit() else None)
        target = sources.shown(root / move.target, ctx.root)
        builder.add([Item("message", move.key, where, CREATE if layout == "v2" else CHANGE, target, move.key, f"{move.box}")])
    for file_path, _data in switch.new_files:
        builder.writes.append(Write(sources.shown(file_path, ctx.root), b""))
    for file_path in switch.appends:
        builder.writes.append(Write(sources.shown(file_path, ctx.root), b"", mode="via"))
    touched = switch.touched()
    if layout == "v2":
        # A v1 file keeps its preamble and anything appended meanwhile: it changes, it stays.
        builder.writes.extend(Write(sources.shown(file_path, ctx.root), b"", mode="via") for file_path in touched)
    else:
        builder.removals.extend(sources.shown(file_path, ctx.root) for file_path in touched)

    def allow(paths: list[Path]) -> None:
        refusals = sources.move_refusals(root, paths)
        if refusals:
            raise RepoError(
                "switching layouts empties or removes files only when git can bring them back: " + ", ".join(f"{p} ({why})" for p, why in refusals.items()),
                code="MOVE_REFUSED",
                details={"files": refusals},
                hint="commit the mailbox first",
            )

    if touched:
        allow(touched)
    plan = builder.build()

    def apply() -> list[str]:
        done = needlecast.apply_switch(root, layout, ctx.now(), allow)
        return [sources.shown(entry.source, ctx.root) for entry in done.removed]

    return _finish(ctx, plan, dry_run=dry_run, apply=apply)


def migrate(ctx: Context, *, source: str, **options: Any) -> dict[str, Any]:
    """Dispatch to one source's use case by name (the MCP-style entry for scripts)."""
    table: dict[str, Callable[..., dict[str, Any]]] = {
        "moss": migrate_moss,
        "moe": migrate_moe,
        "loopflow": migrate_loopflow,
        "backlog": migrate_backlog,
        "beads": migrate_beads,
        "cortical": migrate_cortical,
        "needlecast": migrate_needlecast,
    }
    if source not in table:
        raise InvalidRequest(f"unknown source {source!r}; one of {', '.join(table)}", details={"source": source})
    return table[source](ctx, **options)

"""LoopFlow's insights, tasks and sessions, from any of its formats, planned as insight and
session files and board tasks (or PLAN.md lines). Core layer (pure).

LoopFlow kept its data in four shapes over its life, all read here and brought to one model
(the "upgrade"): `.agents/plan/` JSON and `progress.txt` (0.1), `.loop-flow/plan/` (0.x, the
file-based workflow), `.loop-flow/loopflow.db` (1.0+, SQLite, `schema_migrations` v1–v3) with
its exports `.loop-flow/insights.json` and `backlog.json`. Dates written as a day alone become
midnight UTC; JSON-in-text columns of the database are decoded; `progress.txt` is split into
sessions by LoopFlow's own rules. Old ids (`INS-001`, `LF-049`, `2026-01-21-S18`) stay in each
new file as `source_id`, and every link between items is rewritten to the new ids.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from moss_files.board.model import Task
from moss_files.foundation import document, formats, structured
from moss_files.foundation.errors import InvalidDocument
from moss_files.loopflow import feedback as feedback_model
from moss_files.loopflow import insights as insight_model
from moss_files.loopflow import sessions as session_model
from moss_files.loopflow import summary as summary_model
from moss_files.loopflow.insights import Insight
from moss_files.loopflow.sessions import Session
from moss_files.migrate import tasks as board_items
from moss_files.migrate.ledger import Account, account_rest, is_empty
from moss_files.migrate.model import SKIP, Candidate, Item, Where, derived_id, iso_time, source_error, with_provenance

SYSTEM = "loopflow"
INSIGHT_TYPES = insight_model.TYPES
_STATUS = {"TODO": "BACKLOG", "IN_PROGRESS": "WORKING", "DONE": "DONE", "BLOCKED": "BACKLOG", "CANCELLED": "ARCHIVED"}
_PLAN_MARK = {"TODO": None, "IN_PROGRESS": "start", "DONE": "done", "BLOCKED": "block", "CANCELLED": "close"}
_SESSION_HEADER = re.compile(r"^##\s+(\d{4}-\d{2}-\d{2})\s*\|\s*Session\s+(\d+[a-z]?)\s*(?:\(([^)]+)\))?", re.IGNORECASE)
_TASK_LINE = re.compile(r"^Task:\s*(?:(LF-\d+(?:\.\d+)?)\s*)?(\[[A-Z]+\])?\s*(.+)?$", re.MULTILINE)
_OUTCOME_LINE = re.compile(r"^Outcome:\s*(.+)$", re.MULTILINE)
_INSIGHT_ID = re.compile(r"\bINS-\d{3,}\b")
_TAG_BAD = re.compile(r"[\s,]+")


@dataclass(frozen=True, slots=True)
class Layer:
    """One place LoopFlow data was read from: its items by kind, and its format version."""

    name: str  # the file or database, as shown
    version: str
    insights: Sequence[tuple[Where, dict[str, Any]]] = ()
    tasks: Sequence[tuple[Where, dict[str, Any]]] = ()
    sessions: Sequence[tuple[Where, dict[str, Any]]] = ()
    project: str | None = None
    notes: Sequence[str] = ()
    context: Sequence[tuple[Where, dict[str, Any]]] = ()  # the database's repo_context rows
    feedback: Sequence[tuple[Where, dict[str, Any]]] = ()  # the database's feedback_specs rows
    unreadable: Sequence[tuple[str, str, Where, str]] = ()  # (kind, old id, where, why) of what could not be read


@dataclass(frozen=True, slots=True)
class Merged:
    """Every item of all layers, each id once (the first layer holding it wins)."""

    insights: list[tuple[Where, dict[str, Any]]] = field(default_factory=list)
    tasks: list[tuple[Where, dict[str, Any]]] = field(default_factory=list)
    sessions: list[tuple[Where, dict[str, Any]]] = field(default_factory=list)
    superseded: list[tuple[str, str, Where, Where]] = field(default_factory=list)  # kind, id, dropped, kept
    context: list[tuple[Where, dict[str, Any]]] = field(default_factory=list)
    feedback: list[tuple[Where, dict[str, Any]]] = field(default_factory=list)
    unreadable: list[tuple[str, str, Where, str]] = field(default_factory=list)


# --------------------------------------------------------------------------- reading each format


def _object(value: Any, where: Where, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise source_error(f"{what} must be a JSON object", where)
    return value


PROBLEM = "_problem"  # an item LoopFlow could not import either: why, in place of its fields


def _items(data: dict[str, Any], key: str, where: Where) -> list[tuple[Where, dict[str, Any]]]:
    """The items of a JSON file's list; one that is not an object with an id is kept as a
    problem (LoopFlow's import stops at it: its insert fails), reported, the others read."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise source_error(f"{key} must be a list", Where(where.file, None, key))
    found = []
    for index, item in enumerate(value):
        at = Where(where.file, None, f"{key}[{index}]")
        if not isinstance(item, dict):
            found.append((at, {PROBLEM: f"each of {key} must be a JSON object", "id": f"{key}[{index}]"}))
        elif not isinstance(item.get("id"), str) or not item["id"].strip():
            found.append((at, {PROBLEM: f"id is missing (at {key}[{index}].id)", "id": f"{key}[{index}]"}))
        else:
            found.append((at, item))
    return found


def insights_file(data: Any, where: Where) -> tuple[str, list[tuple[Where, dict[str, Any]]]]:
    """The version and items of an `insights.json`. Raises SOURCE_INVALID with the JSON path."""
    top = _object(data, where, "insights.json")
    version = str(top.get("schema_version") or "unversioned")
    if top.get("source") == "loopflow-sqlite" or "exported_at" in top:
        version = f"export {version} (LoopFlow 1.x)"
    else:
        version = f"file-based {version}"
    return version, _dated(_items(top, "insights", where), top)


def backlog_file(data: Any, where: Where) -> tuple[str, str | None, list[tuple[Where, dict[str, Any]]]]:
    """The version, project name and tasks of a `backlog.json`."""
    top = _object(data, where, "backlog.json")
    version = "export (LoopFlow 1.x)" if top.get("source") == "loopflow-sqlite" or "exported_at" in top else "file-based"
    project = top.get("project") if isinstance(top.get("project"), str) else None
    return version, project, _dated(_items(top, "tasks", where), top)


def _dated(items: list[tuple[Where, dict[str, Any]]], top: Mapping[str, Any]) -> list[tuple[Where, dict[str, Any]]]:
    """Items with `_day`: the file's own date (its export time, or `last_updated`), which an
    item without a creation time takes for its new id, so every clone derives the same id."""
    day = iso_time(top.get("exported_at")) or iso_time(top.get("last_updated"))
    if day is None:
        return items
    return [(where, {**item, "_day": day}) for where, item in items]


def progress_file(text: str, file: str) -> list[tuple[Where, dict[str, Any]]]:
    """Sessions of a `progress.txt`, split by LoopFlow's rules: an entry starts at a line
    `## YYYY-MM-DD | Session N[a] (title)`; `Task:` and `Outcome:` lines; the body is the rest.
    A `## YYYY-MM-DD` line that does not match the header is part of no session and is
    reported by the caller (LoopFlow dropped such entries silently)."""
    lines = text.split("\n")
    starts = [index for index, line in enumerate(lines) if re.match(r"^## \d{4}-\d{2}-\d{2}", line)]
    sessions: list[tuple[Where, dict[str, Any]]] = []
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(lines)
        header = _SESSION_HEADER.match(lines[start])
        where = Where(file, start + 1)
        content = "\n".join(lines[start + 1 : end])
        if header is None:
            sessions.append((where, {"unreadable": lines[start]}))
            continue
        day, number_text, title = header.group(1), header.group(2), header.group(3)
        task = _TASK_LINE.search(content)
        outcome = _OUTCOME_LINE.search(content)
        body = re.sub(r"\n+-{3,}\s*$", "\n", content.strip("\n") + "\n")
        sessions.append(
            (
                where,
                {
                    "id": f"{day}-S{number_text}",
                    "date": day,
                    "title": title.strip() if title else None,
                    "task_id": task.group(1) if task and task.group(1) else None,
                    "task_type": task.group(2) if task and task.group(2) else None,
                    "task_title": task.group(3).strip() if task and task.group(3) else None,
                    "outcome": outcome.group(1).strip() if outcome else None,
                    "body": body,
                    "insights_added": sorted(set(_INSIGHT_ID.findall(content))) or None,
                },
            )
        )
    return sessions


def _json_column(value: Any, where: Where, column: str) -> Any:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return value
    try:
        return structured.loads_json(value, unique_keys=True)
    except ValueError:
        raise source_error(f"column {column} does not hold JSON", Where(where.file, None, f"{where.pointer}.{column}")) from None
    except InvalidDocument as err:  # nested too deeply, or a key twice
        raise source_error(f"column {column}: {err.message}", Where(where.file, None, f"{where.pointer}.{column}"), cause=err.code) from None


def database_rows(table: str, rows: Sequence[Mapping[str, Any]], file: str) -> list[tuple[Where, dict[str, Any]]]:
    """Rows of the database's insights, tasks or sessions table as items (JSON columns decoded)."""
    json_columns = {"insights": ("tags", "links", "source"), "tasks": ("depends_on", "acceptance_criteria"), "sessions": ("files_changed", "insights_added")}[
        table
    ]
    found = []
    for row in rows:
        where = Where(file, None, f"{table}[{row.get('id')}]")
        item = dict(row)
        try:
            for column in json_columns:
                if column in item:
                    item[column] = _json_column(item[column], where, column)
        except InvalidDocument as err:
            item = {PROBLEM: f"{err.message} (at {err.details.get('json_path')})", "id": str(row.get("id"))}
        found.append((where, item))
    return found


def merge(layers: Sequence[Layer]) -> Merged:
    """All layers' items, each id once: the first layer (the most authoritative) wins."""
    merged = Merged()
    for layer in layers:
        merged.context.extend(layer.context)
        merged.feedback.extend(layer.feedback)
        merged.unreadable.extend(layer.unreadable)
    for kind in ("insights", "tasks", "sessions"):
        kept: dict[str, Where] = {}
        target = getattr(merged, kind)
        for layer in layers:
            for where, item in getattr(layer, kind):
                key = str(item.get("id", ""))
                if "unreadable" in item or PROBLEM in item:
                    target.append((where, item))
                    continue
                if key in kept:
                    merged.superseded.append((kind[:-1], key, where, kept[key]))
                    continue
                kept[key] = where
                target.append((where, item))
    return merged


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True, slots=True)
class PlanTask:
    """A task as a PLAN.md line: `cstack add` then the transition its status needs."""

    old_id: str
    where: Where
    spec: str  # `P1: Title #loopflow`
    depends: tuple[str, ...]
    action: str | None  # start | done | block | close
    reason: str | None
    fates: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Result:
    """What the planner made of LoopFlow's data."""

    candidates: list[Candidate]
    plan_tasks: list[PlanTask]
    skipped: list[Item]
    notes: list[str]


def plan(
    merged: Merged,
    *,
    scope: str,
    imported: Mapping[tuple[str, str], str],
    tasks_to: str,
    today: str,
    own_summary: bool = False,
) -> Result:
    """Candidates for insights, sessions, the repository summary and feedback, and for tasks
    either board files (`tasks_to` "board") or PLAN.md lines ("plan"). An item LoopFlow could
    not have written (content missing, a list where text belongs) is skipped with the reason,
    a loss, and the rest planned; so is the repository context when the workspace has a
    summary of its own (`own_summary`)."""
    imported_from = f"{SYSTEM}:{scope}" if scope != SYSTEM else SYSTEM
    notes: list[str] = []
    skipped = [
        Item(kind, old, dropped, SKIP, reason=f"also at {kept}, a more recent format, which is imported") for kind, old, dropped, kept in merged.superseded
    ]
    skipped.extend(Item(kind, old, where, SKIP, reason=why, loss=True) for kind, old, where, why in merged.unreadable)
    new_ids: dict[tuple[str, str], str] = {}
    for (kind, old), path in imported.items():
        new_ids[(kind, old)] = path.rsplit("/", 1)[-1].removesuffix(".md")
    for _where, item in merged.insights:
        if PROBLEM in item:
            continue
        key = ("insight", item["id"])
        new_ids.setdefault(key, derived_id("INS", scope, "insight", item["id"], _day(item.get("created") or item.get("created_at") or item.get("_day"), today)))
    for _where, item in merged.sessions:
        if "unreadable" in item or PROBLEM in item:
            continue
        key = ("session", item["id"])
        new_ids.setdefault(key, derived_id("SES", scope, "session", item["id"], _day(item.get("date"), today)))
    if tasks_to == "board":
        for _where, item in merged.tasks:
            if PROBLEM in item:
                continue
            key = ("task", item["id"])
            new_ids.setdefault(key, board_items.new_board_id("task", scope, item["id"], iso_time(item.get("created_at") or item.get("_day")), today))

    def link(old: str) -> str:
        """The new id of any LoopFlow id; ids of other systems, and task ids when tasks go to
        PLAN.md (where they keep their LoopFlow id), stay as written."""
        for kind in ("insight", "task", "session"):
            found = new_ids.get((kind, old))
            if found is not None:
                return found
        return old

    def problem(kind: str, where: Where, item: Mapping[str, Any], why: str) -> Item:
        return Item(kind, str(item.get("id")), where, SKIP, reason=f"{why}; LoopFlow could not import it either; the rest is imported", loss=True)

    candidates: list[Candidate] = []
    for where, item in merged.insights:
        if PROBLEM in item:
            skipped.append(problem("insight", where, item, item[PROBLEM]))
            continue
        try:
            candidates.append(_insight(item, where, new_ids, link, imported_from, notes))
        except InvalidDocument as err:
            skipped.append(problem("insight", where, item, _why(err)))
    for where, item in merged.sessions:
        if "unreadable" in item:
            reason = "a `## date` line that is not a session header (`## YYYY-MM-DD | Session N`); LoopFlow skips such entries too"
            skipped.append(Item("session", item["unreadable"], where, SKIP, reason=reason))
            continue
        if PROBLEM in item:
            skipped.append(problem("session", where, item, item[PROBLEM]))
            continue
        try:
            candidates.append(_session(item, where, new_ids, link, imported_from))
        except InvalidDocument as err:
            skipped.append(problem("session", where, item, _why(err)))
    tasks = [(where, item) for where, item in merged.tasks if PROBLEM not in item]
    skipped.extend(problem("task", where, item, item[PROBLEM]) for where, item in merged.tasks if PROBLEM in item)
    plan_tasks: list[PlanTask] = []
    if tasks_to == "board" and tasks:
        first = min((iso_time(item.get("created_at") or item.get("_day")) or "" for _where, item in tasks), default="") or None
        epic = board_items.imported_epic(scope, "LoopFlow", "LoopFlow backlog", first, today)
        epic = replace(epic, id=new_ids.get(("epic", f"{SYSTEM}:tasks"), epic.id))
        candidates.append(board_items.candidate("epic", epic, f"{SYSTEM}:tasks", tasks[0][0], imported_from, made=True))
        for order, (where, item) in enumerate(tasks, start=1):
            try:
                candidates.append(_board_task(item, where, epic.id, order, new_ids, link, imported_from))
            except InvalidDocument as err:
                skipped.append(problem("task", where, item, _why(err)))
    elif tasks_to == "plan":
        for where, item in tasks:
            try:
                plan_tasks.append(_plan_task(item, where))
            except InvalidDocument as err:
                skipped.append(problem("task", where, item, _why(err)))
    if merged.context:
        if own_summary:
            first_where = merged.context[0][0]
            reason = f"the workspace has a {summary_model.PATH.as_posix()} of its own; LoopFlow's repository context is not merged into it"
            skipped.append(Item("summary", "repo_context", Where(first_where.file, None, "repo_context"), SKIP, reason=reason, loss=True))
        else:
            candidates.append(_summary(merged.context, link, imported_from))
    for where, item in merged.feedback:
        try:
            candidates.append(_feedback(item, where, scope, today, imported_from))
        except InvalidDocument as err:
            skipped.append(problem("feedback", where, item, _why(err)))
    return Result(candidates, plan_tasks, skipped, notes)


def _why(err: InvalidDocument) -> str:
    at = err.details.get("json_path") if err.details else None
    return f"SOURCE_INVALID: {err.message}" + (f" (at {at})" if at and at not in err.message else "")


def _day(value: Any, fallback: str) -> str:
    stamp = iso_time(value)
    return stamp[:10].replace("-", "") if stamp else fallback


def _text(item: Mapping[str, Any], key: str, where: Where, *, required: bool = False) -> str | None:
    value = item.get(key)
    if value is None or value == "":
        if required:
            raise source_error(f"{key} is missing", _at(where, key))
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise source_error(f"{key} must be text", _at(where, key))
    return str(value)


def _texts(item: Mapping[str, Any], key: str, where: Where) -> list[str]:
    value = item.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if not isinstance(value, list) or not all(isinstance(entry, str | int) and not isinstance(entry, bool) for entry in value):
        raise source_error(f"{key} must be a list of texts", _at(where, key))
    return [str(entry) for entry in value if str(entry).strip()]


def _at(where: Where, key: str) -> Where:
    if where.pointer:
        return Where(where.file, None, f"{where.pointer}.{key}")
    return Where(where.file, where.line, key if where.line is None else None)


def _fields(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item's own fields: without the keys this reader adds (`_day`)."""
    return {key: value for key, value in item.items() if not key.startswith("_")}


def _insight(item: Mapping[str, Any], where: Where, new_ids: Mapping[tuple[str, str], str], link: Any, imported_from: str, notes: list[str]) -> Candidate:
    old = str(item["id"])
    account, p = Account(), "insight."
    leftovers: dict[str, Any] = {}
    account.mapped(f"{p}id", "source_id", old)
    content = _text(item, "content", where, required=True) or ""
    account.mapped(f"{p}content", "content (the body)", content)
    raw_type = _text(item, "type", where)
    kind = (raw_type or insight_model.DEFAULT_TYPE).strip().lower().replace("-", "_")
    if kind not in INSIGHT_TYPES:
        notes.append(f"{where}: insight type {raw_type!r} read as {insight_model.DEFAULT_TYPE}")
        account.mapped(f"{p}type", "type", raw_type, changed=f"{raw_type} -> {insight_model.DEFAULT_TYPE}; the source's type is kept")
        leftovers["type"] = raw_type
        kind = insight_model.DEFAULT_TYPE
    elif raw_type is not None:
        account.mapped(f"{p}type", "type", raw_type, changed=None if kind == raw_type else f"{raw_type} -> {kind}; the source's type is kept")
        if kind != raw_type:
            leftovers["type"] = raw_type
    raw_status = _text(item, "status", where)
    status = (raw_status or insight_model.DEFAULT_STATUS).strip().lower()
    if status not in insight_model.STATUSES:
        account.mapped(f"{p}status", "status", raw_status, changed=f"{raw_status} -> {insight_model.DEFAULT_STATUS}; the source's status is kept")
        leftovers["status"] = raw_status
        status = insight_model.DEFAULT_STATUS
    elif raw_status is not None:
        account.mapped(f"{p}status", "status", raw_status, changed=None if status == raw_status else f"{raw_status} -> {status}; the source's status is kept")
        if status != raw_status:
            leftovers["status"] = raw_status
    tags: list[str] = []
    raw_tags = _texts(item, "tags", where)
    for tag in raw_tags:
        clean = _TAG_BAD.sub("-", tag.strip())[:64]
        if clean and clean not in tags:
            tags.append(clean)
    if "tags" in item:
        if is_empty(item["tags"]):
            account.empty(f"{p}tags")
        elif tags != raw_tags:
            account.mapped(f"{p}tags", "tags", item["tags"], changed="white space and commas in tags made '-'; the source's tags are kept")
            leftovers["tags"] = item["tags"]
        else:
            account.mapped(f"{p}tags", "tags", item["tags"])
    links = tuple(dict.fromkeys(link(value) for value in _texts(item, "links", where)))
    if "links" in item:
        account.mapped(f"{p}links", "links (ids rewritten)", item["links"]) if links else account.empty(f"{p}links")
    source = item.get("source")
    source_map: dict[str, str] = {}
    if isinstance(source, dict):
        kept_source: dict[str, Any] = {}
        for key, value in source.items():
            if key in ("task", "session") and isinstance(value, str) and value.strip() and value.strip().lower() != "ad-hoc":
                source_map[key] = link(value.strip())
                account.mapped(f"{p}source.{key}", f"source.{key}", value)
            elif is_empty(value):
                account.empty(f"{p}source.{key}")
            else:
                why = "LoopFlow's word for work outside any task" if key in ("task", "session") else "the board's insights keep a task and a session"
                account.kept(f"{p}source.{key}", value, home=f"source_fields.source.{key}", reason=why)
                kept_source[key] = value
        if kept_source:
            leftovers["source"] = source
        if not source:
            account.empty(f"{p}source")
    elif isinstance(source, str) and source.strip():
        source_map["task"] = link(source.strip())
        account.mapped(f"{p}source", "source.task", source)
    elif "source" in item:
        account.empty(f"{p}source") if is_empty(source) else account.kept(f"{p}source", source)
        if not is_empty(source):
            leftovers["source"] = source
    summary = _one_line(_text(item, "summary", where))
    if "summary" in item:
        if summary is None:
            account.empty(f"{p}summary")
        elif summary != item["summary"]:
            account.mapped(f"{p}summary", "summary", item["summary"], changed="made one line; the source's summary is kept")
            leftovers["summary"] = item["summary"]
        else:
            account.mapped(f"{p}summary", "summary", item["summary"])
    notes_text = _text(item, "notes", where)
    if "notes" in item:
        account.mapped(f"{p}notes", "notes", notes_text) if notes_text else account.empty(f"{p}notes")
    # LoopFlow's spec has a context column; `moss export --format loopflow` writes a person's context.
    context_text = _text(item, "context", where)
    if "context" in item:
        account.mapped(f"{p}context", "context", context_text) if context_text else account.empty(f"{p}context")
    created = None
    for key in ("created", "created_at"):
        if key in item:
            stamp = iso_time(item[key])
            if stamp is None and not is_empty(item[key]):
                account.kept(f"{p}{key}", item[key], reason="not a time")
                leftovers[key] = item[key]
            elif stamp is None:
                account.empty(f"{p}{key}")
            else:
                created = created or stamp
                account.mapped(f"{p}{key}", "created", item[key])
    updated = None
    for key in ("updated", "updated_at"):
        if key in item:
            stamp = iso_time(item[key])
            if stamp is None:
                account.empty(f"{p}{key}") if is_empty(item[key]) else account.kept(f"{p}{key}", item[key], reason="not a time")
                if not is_empty(item[key]):
                    leftovers[key] = item[key]
            else:
                updated = updated or stamp
                account.mapped(f"{p}{key}", "updated", item[key])
    account_rest(account, _fields(item), leftovers, prefix=p)
    insight = Insight(
        id=new_ids[("insight", old)],
        content=content if content.endswith("\n") else content + "\n",
        type=kind,
        status=status,
        tags=tuple(tags),
        links=links,
        source=source_map,
        summary=summary,
        context=context_text if context_text and context_text.strip() else None,
        notes=notes_text,
        created=created,
        updated=updated or created,
    )
    path = f"{insight_model.FOLDER.as_posix()}/{insight.id}.md"
    return Candidate(
        "insight",
        old,
        insight.id,
        path,
        lambda: with_provenance(insight_model.render_insight(insight), imported_from, old, leftovers).encode("utf-8"),
        where,
        fates=account.done(),
    )


def _one_line(value: str | None) -> str | None:
    return " ".join(value.split()) if value and value.strip() else None


_LOOPFLOW_ID = re.compile(r"\b(?:LF|INS)-\d+(?:\.\d+)?\b|\b\d{4}-\d{2}-\d{2}-S\d+[a-z]?\b")


def _session_task(item: Mapping[str, Any], where: Where, link: Any) -> str | None:
    """The session's task as one line: LoopFlow's id, type and title, every LoopFlow id in it
    (a `Task: LF-059, LF-060` line names several) rewritten to its new id."""
    task_id, kind, title = _text(item, "task_id", where), _text(item, "task_type", where), _text(item, "task_title", where)
    text = task_id or ""
    if kind:
        text = f"{text} {kind}".strip()
    if title:
        text = f"{text}{'' if title.startswith(',') or not text else ' '}{title}"
    text = text.strip()
    return _LOOPFLOW_ID.sub(lambda match: link(match.group(0)), text) if text else None


def _session(item: Mapping[str, Any], where: Where, new_ids: Mapping[tuple[str, str], str], link: Any, imported_from: str) -> Candidate:
    old = str(item["id"])
    account, p = Account(), "session."
    leftovers: dict[str, Any] = {}
    account.mapped(f"{p}id", "source_id", old)
    day = _text(item, "date", where) or old[:10]
    started = iso_time(day)
    if "date" in item:
        account.mapped(f"{p}date", "started, ended (the day, at midnight UTC)", item["date"])
    outcome_text = _text(item, "outcome", where)
    outcome = None
    if outcome_text:
        word = re.split(r"[\s(]", outcome_text.strip().upper().replace("-", "_"), maxsplit=1)[0]
        if word in session_model.READ_OUTCOMES:
            outcome = word
        if outcome_text.strip() == outcome:
            account.mapped(f"{p}outcome", "outcome", outcome_text)
        elif outcome is not None:
            account.mapped(f"{p}outcome", "outcome", outcome_text, changed=f"{outcome_text} -> {outcome}; the source's outcome is kept")
            leftovers["outcome"] = outcome_text
        else:
            account.kept(f"{p}outcome", outcome_text, reason=f"not one of {', '.join(session_model.READ_OUTCOMES)}")
            leftovers["outcome"] = outcome_text
    elif "outcome" in item:
        account.empty(f"{p}outcome")
    task_text = _session_task(item, where, link)
    for key in ("task_id", "task_type", "task_title"):
        if key in item:
            account.mapped(f"{p}{key}", "task (LoopFlow ids rewritten to the new ids)", item[key]) if not is_empty(item[key]) else account.empty(f"{p}{key}")
    body = item.get("body")
    summary = learnings = None
    if isinstance(body, str):
        # progress.txt's `### Summary` / `### Learnings` become the session file's sections.
        lifted = re.sub(r"(?m)^###(\s)", r"##\1", body)
        account.mapped(f"{p}body", "body", body, changed="`###` headings made `##`, the session file's sections" if lifted != body else None)
        body = lifted
    else:
        body = ""
        summary = _text(item, "summary", where)
        learnings = _text(item, "learnings", where)
        for key, value in (("summary", summary), ("learnings", learnings)):
            if key in item:
                account.mapped(f"{p}{key}", f"body (## {key.title()})", value) if value else account.empty(f"{p}{key}")
    account_rest(account, _fields(item), leftovers, prefix=p)
    session = Session(
        id=new_ids[("session", old)], task=task_text, started=started, ended=started, outcome=outcome, summary=summary, learnings=learnings, body=body
    )
    path = f"{session_model.FOLDER.as_posix()}/{session.id}.md"
    return Candidate(
        "session",
        old,
        session.id,
        path,
        lambda: with_provenance(session_model.render_session(session), imported_from, old, leftovers).encode("utf-8"),
        where,
        fates=account.done(),
    )


def _board_task(
    item: Mapping[str, Any], where: Where, epic_id: str, order: int, new_ids: Mapping[tuple[str, str], str], link: Any, imported_from: str
) -> Candidate:
    old = str(item["id"])
    account = Account()
    leftovers: dict[str, Any] = {}
    account.mapped("id", "source_id", old)
    raw_title = _text(item, "title", where, required=True) or ""
    title = " ".join(raw_title.split())
    account.mapped("title", "title", raw_title, changed=None if title == raw_title else "white space made single spaces; the source's title is kept")
    if title != raw_title:
        leftovers["title"] = raw_title
    raw_status = _text(item, "status", where)
    word = (raw_status or "TODO").strip().upper().replace(" ", "_")
    status = _STATUS.get(word, "BACKLOG")
    notes = []
    if raw_status is None:
        if "status" in item:
            account.empty("status")
    elif word in ("TODO", "IN_PROGRESS", "DONE"):
        account.mapped("status", "status", raw_status)
    else:
        account.mapped("status", "status", raw_status, changed=f"{raw_status} -> {status}; the source's status is kept")
        leftovers["status"] = raw_status
        notes.append(f"status {raw_status} read as {status}")
    rank, priority_note = board_items.priority(_text(item, "priority", where))
    if "priority" in item:
        if priority_note:
            notes.append(priority_note)
            account.mapped("priority", "priority", item["priority"], changed=f"{item['priority']!r} -> {rank}; the source's priority is kept")
            leftovers["priority"] = item["priority"]
        else:
            account.mapped("priority", "priority", item["priority"]) if not is_empty(item["priority"]) else account.empty("priority")
    lead = _text(item, "description", where)
    notes_text = _text(item, "notes", where)
    for key, home, value in (("description", "description", lead), ("notes", "description (## Notes)", notes_text)):
        if key in item:
            account.mapped(key, home, value) if value else account.empty(key)
    depends = _texts(item, "depends_on", where)
    if "depends_on" in item:
        for dep in depends:
            known = any((kind, dep) in new_ids for kind in ("task", "insight", "session"))
            account.mapped("depends_on", "depends_on" if known else "depends_on (as written: no such task in the source)", dep)
        if not depends:
            account.empty("depends_on")
    criteria = _texts(item, "acceptance_criteria", where)
    if "acceptance_criteria" in item:
        account.mapped("acceptance_criteria", "definition_of_done", item["acceptance_criteria"]) if criteria else account.empty("acceptance_criteria")
    test_file = _text(item, "test_file", where)
    if "test_file" in item:
        account.mapped("test_file", "test_file", test_file) if test_file else account.empty("test_file")
    # A task of a JSON file has no times of its own: it takes the file's date.
    created = iso_time(item.get("created_at")) or iso_time(item.get("_day"))
    updated = iso_time(item.get("updated_at")) or created
    for key, home in (("created_at", "created"), ("updated_at", "updated")):
        if key in item:
            if iso_time(item[key]):
                account.mapped(key, home, item[key])
            elif is_empty(item[key]):
                account.empty(key)
            else:
                account.kept(key, item[key], reason="not a time")
                leftovers[key] = item[key]
    account_rest(account, _fields(item), leftovers)
    task = Task(
        id=new_ids[("task", old)],
        epic=epic_id,
        title=title,
        description=board_items.join_sections({"Notes": notes_text}, lead),
        status=status,
        priority=rank,
        order=order,
        depends_on=tuple(link(dep) for dep in depends),
        definition_of_done=tuple(criteria),
        test_file=test_file,
        created=created,
        updated=updated,
        completed=updated if status == "DONE" else None,
    )
    return board_items.candidate("task", task, old, where, imported_from, leftovers, "; ".join(notes) or None, fates=account.done())


_PLAN_PRIORITY = {"critical": "P0", "high": "P1", "medium": "P2", "low": "P3"}
_PLAN_DROPS = "PLAN.md holds one line per task (its title, priority, status and dependencies); it stays in LoopFlow's files (--tasks board keeps it)"


def _plan_task(item: Mapping[str, Any], where: Where) -> PlanTask:
    """A task as a PLAN.md line; its fields accounted (what a line cannot hold is dropped, with
    the reason). Dependencies are resolved by the caller, which knows what PLAN.md holds."""
    old = str(item["id"])
    account = Account()
    account.mapped("id", "PLAN.md id:", old)
    raw_title = _text(item, "title", where, required=True) or ""
    title = " ".join(raw_title.split()).replace("|", "/")
    account.mapped("title", "PLAN.md title", raw_title, changed=None if title == raw_title else "one line, `|` made `/` (PLAN.md's field separator)")
    raw_priority = _text(item, "priority", where)
    level = _PLAN_PRIORITY.get((raw_priority or "medium").strip().lower())
    if raw_priority is not None:
        account.mapped("priority", "PLAN.md P0-P3", raw_priority, changed=None if level else f"{raw_priority} -> P2")
    status = (_text(item, "status", where) or "TODO").strip().upper().replace(" ", "_")
    action = _PLAN_MARK.get(status)
    if "status" in item:
        account.mapped("status", "PLAN.md marker and section", item["status"], changed=None if status in _PLAN_MARK else f"{item['status']} -> pending")
    updated = iso_time(item.get("updated_at"))
    when = f" ({updated[:10]})" if updated else ""
    reason = {
        "done": f"done in LoopFlow{when}",
        "close": f"cancelled in LoopFlow{when}",
        "block": "blocked in LoopFlow",
    }.get(action or "")
    depends = tuple(_texts(item, "depends_on", where))
    if "depends_on" in item and not depends:
        account.empty("depends_on")
    for key, value in _fields(item).items():
        if key in ("id", "title", "priority", "status", "depends_on"):
            continue
        if is_empty(value):
            account.empty(key)
        else:
            account.dropped(key, _PLAN_DROPS, value)
    return PlanTask(old, where, f"{level or 'P2'}: {title} #loopflow", depends, action, reason, account.done())


def _summary(rows: Sequence[tuple[Where, Mapping[str, Any]]], link: Any, imported_from: str) -> Candidate:
    """LoopFlow's repo_context rows as `.moss/summary.md`: the known keys as its sections, any
    other key as a section of its own name (kept as written), the newest update as its time."""
    account, p = Account(), "context."
    sections: dict[str, str] = {}
    updated: list[str] = []
    session = None
    for _where, row in rows:
        key, value = str(row.get("key")), row.get("value")
        title = summary_model.SECTIONS.get(key)
        if not isinstance(value, str) or not value.strip():
            account.empty(f"{p}{key}")
            continue
        if title is None:
            account.kept(
                f"{p}{key}", value, home=f"{summary_model.PATH.as_posix()} (## {key})", reason="a key LoopFlow's own tools do not set; a section of its own"
            )
            title = key
        else:
            account.mapped(f"{p}{key}", f"{summary_model.PATH.as_posix()} (## {title})", value)
        sections[title] = value
        stamp = iso_time(row.get("updated_at"))
        if stamp:
            updated.append(stamp)
        if isinstance(row.get("updated_by_session"), str) and row["updated_by_session"]:
            session = row["updated_by_session"]
    newest = max(updated) if updated else None
    if any(row.get("updated_at") for _where, row in rows):
        account.mapped(f"{p}updated_at", "updated (the newest)", newest)
    if session:
        account.mapped(f"{p}updated_by_session", "updated_by_session (the newest row's, its id rewritten)", session)
    meta: dict[str, Any] = {"updated": newest}
    if session:
        meta["updated_by_session"] = link(session)
    body = session_model.set_sections("", sections).lstrip("\n")
    text = document.render(formats.stamp("summary", meta), body)
    where = Where(rows[0][0].file, None, "repo_context")
    return Candidate(
        "summary",
        "repo_context",
        "summary",
        summary_model.PATH.as_posix(),
        with_provenance(text, imported_from, "repo_context").encode("utf-8"),
        where,
        fates=account.done(),
    )


_FEEDBACK_HOMES = {"type": "type", "title": "title", "description": "description (the body)", "severity": "severity", "status": "status"}


def _feedback(item: Mapping[str, Any], where: Where, scope: str, today: str, imported_from: str) -> Candidate:
    """A feedback_specs row as a `.moss/feedback/` file: its own fields mapped, the consent and
    sharing record (when consent was given, when and where it was shared) kept."""
    old = str(item.get("id") or "")
    if not old:
        raise source_error("id is missing", _at(where, "id"))
    account, p = Account(), "feedback."
    leftovers: dict[str, Any] = {}
    account.mapped(f"{p}id", "source_id", old)
    values: dict[str, str] = {}
    for key, home in _FEEDBACK_HOMES.items():
        value = _text(item, key, where, required=key in ("title", "description"))
        if value is None:
            if key in item:
                account.empty(f"{p}{key}")
            continue
        allowed = {"type": feedback_model.TYPES, "severity": feedback_model.SEVERITIES, "status": feedback_model.STATUSES}.get(key)
        if allowed is not None and value.strip().lower() not in allowed:
            account.kept(f"{p}{key}", value, reason=f"not one of {', '.join(allowed)}")
            leftovers[key] = value
            continue
        one_line = " ".join(value.split()) if key == "title" else value
        account.mapped(f"{p}{key}", home, value, changed=None if one_line == value else "made one line; the source's title is kept")
        if one_line != value:
            leftovers[key] = value
        values[key] = value.strip().lower() if allowed else one_line
    context = _text(item, "context_summary", where)
    if "context_summary" in item:
        account.mapped(f"{p}context_summary", "context", context) if context else account.empty(f"{p}context_summary")
    times = {}
    for key, home in (("created_at", "created"), ("updated_at", "updated")):
        if key in item:
            times[home] = iso_time(item[key])
            account.mapped(f"{p}{key}", home, item[key]) if times[home] else account.empty(f"{p}{key}")
    account_rest(account, _fields(item), leftovers, prefix=p, reason="the consent and sharing record; the feedback file has no key for it")
    created = times.get("created")
    found = feedback_model.Feedback(
        id=derived_id(feedback_model.ID_PREFIX, scope, "feedback", old, _day(created, today)),
        type=values.get("type", "pain_point"),
        title=values["title"],
        description=values["description"] if values["description"].endswith("\n") else values["description"] + "\n",
        severity=values.get("severity", "medium"),
        status=values.get("status", "queued"),
        context=context,
        created=created,
        updated=times.get("updated") or created,
    )
    path = f"{feedback_model.FOLDER.as_posix()}/{found.id}.md"
    return Candidate(
        "feedback",
        old,
        found.id,
        path,
        lambda: with_provenance(feedback_model.render_feedback(found), imported_from, old, leftovers).encode("utf-8"),
        where,
        fates=account.done(),
    )

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
from moss_files.foundation import structured
from moss_files.foundation.errors import InvalidDocument
from moss_files.loopflow import insights as insight_model
from moss_files.loopflow import sessions as session_model
from moss_files.loopflow.insights import Insight
from moss_files.loopflow.sessions import Session
from moss_files.migrate import tasks as board_items
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


@dataclass(frozen=True, slots=True)
class Merged:
    """Every item of all layers, each id once (the first layer holding it wins)."""

    insights: list[tuple[Where, dict[str, Any]]] = field(default_factory=list)
    tasks: list[tuple[Where, dict[str, Any]]] = field(default_factory=list)
    sessions: list[tuple[Where, dict[str, Any]]] = field(default_factory=list)
    superseded: list[tuple[str, str, Where, Where]] = field(default_factory=list)  # kind, id, dropped, kept


# --------------------------------------------------------------------------- reading each format


def _object(value: Any, where: Where, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise source_error(f"{what} must be a JSON object", where)
    return value


def _items(data: dict[str, Any], key: str, where: Where) -> list[tuple[Where, dict[str, Any]]]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise source_error(f"{key} must be a list", Where(where.file, None, key))
    found = []
    for index, item in enumerate(value):
        at = Where(where.file, None, f"{key}[{index}]")
        item = _object(item, at, f"each of {key}")
        if not isinstance(item.get("id"), str) or not item["id"].strip():
            raise source_error("id is missing", Where(where.file, None, f"{key}[{index}].id"))
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
        for column in json_columns:
            if column in item:
                item[column] = _json_column(item[column], where, column)
        if table == "insights" and "created_at" in item:
            item.setdefault("created", item.get("created_at"))
        found.append((where, item))
    return found


def merge(layers: Sequence[Layer]) -> Merged:
    """All layers' items, each id once: the first layer (the most authoritative) wins."""
    merged = Merged()
    for kind in ("insights", "tasks", "sessions"):
        kept: dict[str, Where] = {}
        target = getattr(merged, kind)
        for layer in layers:
            for where, item in getattr(layer, kind):
                key = str(item.get("id", ""))
                if "unreadable" in item:
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
) -> Result:
    """Candidates for insights and sessions, and for tasks either board files (`tasks_to`
    "board") or PLAN.md lines ("plan"). Raises SOURCE_INVALID for an item LoopFlow could not
    have written (content missing, a list where text belongs)."""
    imported_from = f"{SYSTEM}:{scope}" if scope != SYSTEM else SYSTEM
    notes: list[str] = []
    skipped = [
        Item(kind, old, dropped, SKIP, reason=f"also at {kept}, a more recent format, which is imported") for kind, old, dropped, kept in merged.superseded
    ]
    new_ids: dict[tuple[str, str], str] = {}
    for (kind, old), path in imported.items():
        new_ids[(kind, old)] = path.rsplit("/", 1)[-1].removesuffix(".md")
    for _where, item in merged.insights:
        key = ("insight", item["id"])
        new_ids.setdefault(key, derived_id("INS", scope, "insight", item["id"], _day(item.get("created") or item.get("created_at") or item.get("_day"), today)))
    for _where, item in merged.sessions:
        if "unreadable" in item:
            continue
        key = ("session", item["id"])
        new_ids.setdefault(key, derived_id("SES", scope, "session", item["id"], _day(item.get("date"), today)))
    if tasks_to == "board":
        for _where, item in merged.tasks:
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

    candidates: list[Candidate] = []
    for where, item in merged.insights:
        candidates.append(_insight(item, where, new_ids, link, imported_from, notes))
    for where, item in merged.sessions:
        if "unreadable" in item:
            reason = "a `## date` line that is not a session header (`## YYYY-MM-DD | Session N`); LoopFlow skips such entries too"
            skipped.append(Item("session", item["unreadable"], where, SKIP, reason=reason))
            continue
        candidates.append(_session(item, where, new_ids, link, imported_from, notes))
    plan_tasks: list[PlanTask] = []
    if tasks_to == "board" and merged.tasks:
        first = min((iso_time(item.get("created_at") or item.get("_day")) or "" for _where, item in merged.tasks), default="") or None
        epic = board_items.imported_epic(scope, "LoopFlow", "LoopFlow backlog", first, today)
        epic = replace(epic, id=new_ids.get(("epic", f"{SYSTEM}:tasks"), epic.id))
        epic_id = epic.id
        candidates.append(board_items.candidate("epic", epic, f"{SYSTEM}:tasks", merged.tasks[0][0], imported_from))
        for order, (where, item) in enumerate(merged.tasks, start=1):
            candidates.append(_board_task(item, where, epic_id, order, new_ids, link, imported_from))
    elif tasks_to == "plan":
        for where, item in merged.tasks:
            plan_tasks.append(_plan_task(item, where))
    return Result(candidates, plan_tasks, skipped, notes)


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


def _insight(item: Mapping[str, Any], where: Where, new_ids: Mapping[tuple[str, str], str], link: Any, imported_from: str, notes: list[str]) -> Candidate:
    old = str(item["id"])
    content = _text(item, "content", where, required=True) or ""
    kind = (_text(item, "type", where) or insight_model.DEFAULT_TYPE).strip().lower().replace("-", "_")
    leftovers: dict[str, Any] = {}
    if kind not in INSIGHT_TYPES:
        leftovers["type"] = kind
        notes.append(f"{where}: insight type {kind!r} read as {insight_model.DEFAULT_TYPE}")
        kind = insight_model.DEFAULT_TYPE
    status = (_text(item, "status", where) or insight_model.DEFAULT_STATUS).strip().lower()
    if status not in insight_model.STATUSES:
        leftovers["status"] = status
        status = insight_model.DEFAULT_STATUS
    tags = []
    for tag in _texts(item, "tags", where):
        clean = _TAG_BAD.sub("-", tag.strip())[:64]
        if clean != tag:
            leftovers.setdefault("tags", _texts(item, "tags", where))
        if clean and clean not in tags:
            tags.append(clean)
    source = item.get("source")
    source_map: dict[str, str] = {}
    if isinstance(source, dict):
        for key in ("task", "session"):
            value = source.get(key)
            if isinstance(value, str) and value.strip() and value != "ad-hoc":
                source_map[key] = link(value.strip())
            elif value is not None:
                leftovers.setdefault("source", source)
        extra = {key: value for key, value in source.items() if key not in ("task", "session")}
        if extra:
            leftovers["source"] = source
    elif isinstance(source, str) and source.strip():
        source_map["task"] = link(source.strip())
    created = iso_time(item.get("created") or item.get("created_at"))
    insight = Insight(
        id=new_ids[("insight", old)],
        content=content if content.endswith("\n") else content + "\n",
        type=kind,
        status=status,
        tags=tuple(tags),
        links=tuple(dict.fromkeys(link(value) for value in _texts(item, "links", where))),
        source=source_map,
        summary=_one_line(_text(item, "summary", where)),
        notes=_text(item, "notes", where),
        created=created,
        updated=iso_time(item.get("updated") or item.get("updated_at")) or created,
    )
    path = f"{insight_model.FOLDER.as_posix()}/{insight.id}.md"
    return Candidate(
        "insight", old, insight.id, path, lambda: with_provenance(insight_model.render_insight(insight), imported_from, old, leftovers).encode("utf-8"), where
    )


def _one_line(value: str | None) -> str | None:
    return " ".join(value.split()) if value and value.strip() else None


def _session(item: Mapping[str, Any], where: Where, new_ids: Mapping[tuple[str, str], str], link: Any, imported_from: str, notes: list[str]) -> Candidate:
    old = str(item["id"])
    day = _text(item, "date", where) or old[:10]
    started = iso_time(day)
    leftovers: dict[str, Any] = {}
    outcome_text = _text(item, "outcome", where)
    outcome = None
    if outcome_text:
        word = re.split(r"[\s(]", outcome_text.strip().upper().replace("-", "_"), maxsplit=1)[0]
        if word in session_model.READ_OUTCOMES:
            outcome = word
        if outcome_text.strip().upper() != (outcome or ""):
            leftovers["outcome"] = outcome_text
    task_id = _text(item, "task_id", where)
    task_text = (
        " ".join(part for part in (link(task_id) if task_id else None, _text(item, "task_type", where), _text(item, "task_title", where)) if part) or None
    )
    body = item.get("body")
    if isinstance(body, str):
        # progress.txt's `### Summary` / `### Learnings` become the session file's sections.
        body = re.sub(r"(?m)^###(\s)", r"##\1", body)
    else:
        parts = {"Summary": _text(item, "summary", where), "Learnings": _text(item, "learnings", where)}
        body = "\n\n".join(f"## {title}\n\n{text.strip()}" for title, text in parts.items() if text and text.strip())
        body = body + "\n" if body else ""
    for key in ("title", "files_changed", "insights_added", "session_number"):
        value = item.get(key)
        if value not in (None, "", []):
            leftovers[key] = [link(entry) for entry in value] if key == "insights_added" and isinstance(value, list) else value
    session = Session(
        id=new_ids[("session", old)],
        task=task_text,
        started=started,
        ended=started,
        outcome=outcome,
        body=body,
    )
    path = f"{session_model.FOLDER.as_posix()}/{session.id}.md"
    return Candidate(
        "session", old, session.id, path, lambda: with_provenance(session_model.render_session(session), imported_from, old, leftovers).encode("utf-8"), where
    )


def _board_task(
    item: Mapping[str, Any], where: Where, epic_id: str, order: int, new_ids: Mapping[tuple[str, str], str], link: Any, imported_from: str
) -> Candidate:
    old = str(item["id"])
    raw_status = (_text(item, "status", where) or "TODO").strip().upper().replace(" ", "_")
    status = _STATUS.get(raw_status, "BACKLOG")
    notes = []
    leftovers: dict[str, Any] = {}
    if raw_status not in ("TODO", "IN_PROGRESS", "DONE"):
        leftovers["status"] = raw_status
        notes.append(f"status {raw_status} read as {status}")
    rank, priority_note = board_items.priority(_text(item, "priority", where))
    if priority_note:
        notes.append(priority_note)
    for key in ("summary",):
        if item.get(key):
            leftovers[key] = item[key]
    # A task of a JSON file has no times of its own: it takes the file's date.
    created = iso_time(item.get("created_at")) or iso_time(item.get("_day"))
    updated = iso_time(item.get("updated_at")) or created
    task = Task(
        id=new_ids[("task", old)],
        epic=epic_id,
        title=" ".join((_text(item, "title", where, required=True) or "").split()),
        description=board_items.join_sections({"Notes": _text(item, "notes", where)}, _text(item, "description", where)),
        status=status,
        priority=rank,
        order=order,
        depends_on=tuple(link(dep) for dep in _texts(item, "depends_on", where)),
        definition_of_done=tuple(_texts(item, "acceptance_criteria", where)),
        test_file=_text(item, "test_file", where),
        created=created,
        updated=updated,
        completed=updated if status == "DONE" else None,
    )
    return board_items.candidate("task", task, old, where, imported_from, leftovers, "; ".join(notes) or None)


_PLAN_PRIORITY = {"critical": "P0", "high": "P1", "medium": "P2", "low": "P3"}


def _plan_task(item: Mapping[str, Any], where: Where) -> PlanTask:
    old = str(item["id"])
    title = " ".join((_text(item, "title", where, required=True) or "").split()).replace("|", "/")
    level = _PLAN_PRIORITY.get((_text(item, "priority", where) or "medium").strip().lower(), "P2")
    status = (_text(item, "status", where) or "TODO").strip().upper().replace(" ", "_")
    action = _PLAN_MARK.get(status)
    updated = iso_time(item.get("updated_at"))
    when = f" ({updated[:10]})" if updated else ""
    reason = {
        "done": f"done in LoopFlow{when}",
        "close": f"cancelled in LoopFlow{when}",
        "block": "blocked in LoopFlow",
    }.get(action or "")
    return PlanTask(old, where, f"{level}: {title} #loopflow", tuple(_texts(item, "depends_on", where)), action, reason)

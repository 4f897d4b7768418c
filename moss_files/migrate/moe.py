"""Moe's `.moe/` folder (project, epics, tasks, workers, teams, rail proposals, chat channels,
messages and decisions, the activity log) planned as board files, every field accounted.
Core layer (pure: parsed JSON in, candidates out).

Read as Moe's daemon reads it (`state/persistence.ts` `loadEntities`): every `*.json` file of
each entity folder; a file that is not JSON, or holds no `id`, is skipped (Moe logs and skips
it too) and reported, and the rest comes over. Each field goes to its home on the board (the
ledger, `docs/migrate.md` lists them): statuses, plan steps with their exact statuses and
times, definitions of done, rails (an epic's `epicRails` and the older `rails`), reopen counts,
QA's rejection history and failed items, verification evidence, handoff notes, budgets,
critiques; comments go to the task's board comments, channels and their messages to the
board's chat. What the board has no home for (a branch, planning notes, metrics it derives
itself) is kept verbatim under `source_fields` and shown. Moe's ids come in two shapes (8 hex
characters in early boards, 32 since); both are old ids like any other, and every reference
between items is rewritten to the new ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from moss_files.board import files as board_files
from moss_files.board import threads
from moss_files.board.model import (
    APPROVAL_MODES,
    EPIC_STATUSES,
    PROPOSAL_SCOPES,
    PROPOSAL_STATUSES,
    PROPOSAL_TYPES,
    ROLES,
    STATUSES,
    STEP_STATUSES,
    Epic,
    Project,
    Proposal,
    Rails,
    Settings,
    Step,
    Task,
    TaskSizing,
    Team,
    Worker,
    is_valid_name,
)
from moss_files.foundation.errors import InvalidDocument
from moss_files.foundation.ids import CROCKFORD
from moss_files.migrate import tasks as board_items
from moss_files.migrate.ledger import Account, account_rest, is_empty
from moss_files.migrate.model import SKIP, Candidate, Comment, Item, Where, day_of, derived_id, iso_time, source_error, with_provenance

SYSTEM = "moe"
KINDS = ("epic", "task", "worker", "team", "proposal")
_SHORT_ID = re.compile(r"^[a-z]+-[0-9a-f]{8}$")
_LONG_ID = re.compile(r"^[a-z]+-[0-9a-f]{32}$")
_CHAT_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")  # how chat and comment lines are stamped
# Moe's step statuses the board spells otherwise: the board's plans count COMPLETED steps.
_STEP_WORDS = {"DONE": "COMPLETED", "COMPLETE": "COMPLETED", "IN PROGRESS": "IN_PROGRESS", "STARTED": "IN_PROGRESS", "TODO": "PENDING"}
_DECISION_VERDICTS = {"approved": "APPROVED", "rejected": "REJECTED"}


@dataclass(frozen=True, slots=True)
class Source:
    """A `.moe/` folder as read: each entity file's parsed JSON with where it is, the chat
    (channel files, message lines by channel id, decision files), the activity log, the files
    that could not be read (with why), and the folders the board has no kind for."""

    project: tuple[Where, Any] | None = None
    entities: Mapping[str, Sequence[tuple[Where, Any]]] = field(default_factory=dict)  # kind -> files
    activity: Sequence[tuple[Where, Any]] = ()
    not_imported: Mapping[str, str] = field(default_factory=dict)  # folder -> what it holds, as the report says
    channels: Sequence[tuple[Where, Any]] = ()
    messages: Mapping[str, Sequence[tuple[Where, Any]]] = field(default_factory=dict)  # Moe channel id -> lines
    decisions: Sequence[tuple[Where, Any]] = ()
    unreadable: Sequence[tuple[str, Where, str]] = ()  # (kind, where, why) of files and lines no reader could read


@dataclass(frozen=True, slots=True)
class ChatLine:
    """One line for a board chat channel's file, from one Moe item (a message, a decision, a
    custom channel's creation): `kind` and `old_id` name the item in the report."""

    kind: str
    old_id: str
    where: Where
    channel: str
    record: dict[str, Any]
    fates: tuple[Any, ...] = ()
    note: str | None = None
    made: bool = False


@dataclass(slots=True)
class Result:
    """What the planner made of a `.moe/` folder."""

    candidates: list[Candidate]
    events: list[tuple[Where, str, dict[str, Any], tuple[Any, ...]]]  # (where, old event id, the board's event line, fates)
    project: Candidate | None
    skipped: list[Item]
    notes: list[str]
    version: str
    comments: dict[str, list[Comment]] = field(default_factory=dict)  # by the task's new id
    chat: list[ChatLine] = field(default_factory=list)


class _Reader:
    """Typed access to one JSON object, with errors naming the file and JSON path."""

    def __init__(self, data: Any, where: Where, what: str) -> None:
        if not isinstance(data, dict):
            raise source_error(f"{what} must be a JSON object", where)
        self.data = data
        self.where = where

    def at(self, key: str) -> Where:
        base = self.where.pointer or ""
        return Where(self.where.file, None, f"{base}.{key}" if base else key)

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None or value == "":
            if required:
                raise source_error(f"{key} is missing", self.at(key))
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise source_error(f"{key} must be text", self.at(key))
        return str(value)

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise source_error(f"{key} must be a list of texts", self.at(key))
        return tuple(item for item in value if item.strip())

    def number(self, key: str, default: int | float = 0) -> int | float:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise source_error(f"{key} must be a number", self.at(key))
        return value

    def time(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None or value == "":
            return None
        stamp = iso_time(value)
        if stamp is None:
            raise source_error(f"{key} is not a time: {value!r}", self.at(key))
        return stamp

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise source_error(f"{key} must be a JSON object", self.at(key))
        return value

    def records(self, key: str) -> list[dict[str, Any]]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise source_error(f"{key} must be a list of objects", self.at(key))
        return value


def id_shapes(ids: Sequence[str]) -> str:
    """How many ids have each of Moe's shapes, for the report."""
    short = sum(1 for item in ids if _SHORT_ID.match(item))
    long = sum(1 for item in ids if _LONG_ID.match(item))
    other = len(ids) - short - long
    return f"ids: {short} of 8 hex characters, {long} of 32" + (f", {other} of other shapes" if other else "")


def _problem(kind: str, old: str, where: Where, err: InvalidDocument) -> Item:
    """The skip of an item whose value Moe's reader would not make sense of either."""
    at = err.details.get("json_path") if err.details else None
    reason = f"SOURCE_INVALID: {err.message}" + (f" (at {at})" if at and at not in err.message else "") + "; the rest is imported"
    return Item(kind, old, where, SKIP, reason=reason, loss=True)


def plan(
    source: Source,
    *,
    scope: str,
    imported: Mapping[tuple[str, str], str],
    project: Project | None,
    today: str,
    now: str,
    max_comment_bytes: int | None = None,
) -> Result:
    """Candidates for every Moe entity, comments, chat lines, event lines for the activity log,
    and `project.md` when the board has none (`project` is the board's project when its file
    exists). An entity whose values are not what Moe writes (an id missing, a list where text
    belongs, a time that is not one) is skipped with the reason and the JSON path, as a loss.

    Raises SOURCE_INVALID for a `project.json` that is not a JSON object (Moe does not start
    on such a folder either).
    """
    notes: list[str] = []
    skipped: list[Item] = [Item(kind, where.file.rsplit("/", 1)[-1], where, SKIP, reason=why, loss=True) for kind, where, why in source.unreadable]
    version = "unknown schema version"
    imported_from = f"{SYSTEM}:{scope}" if scope != SYSTEM else SYSTEM
    moe_project: _Reader | None = None
    if source.project is not None:
        moe_project = _Reader(source.project[1], source.project[0], "project.json")
        schema = moe_project.data.get("schemaVersion")
        version = f"schemaVersion {schema}" if schema is not None else "schemaVersion 1 (no schemaVersion key)"

    readers: dict[str, list[_Reader]] = {}
    for kind in KINDS:
        readers[kind] = []
        for where, data in source.entities.get(kind, ()):
            old = where.file.rsplit("/", 1)[-1]
            if not isinstance(data, dict):
                skipped.append(Item(kind, old, where, SKIP, reason="not a JSON object; Moe skips such a file too", loss=True))
                continue
            if not isinstance(data.get("id"), str) or not data["id"].strip():
                skipped.append(Item(kind, old, where, SKIP, reason="the file has no id; Moe skips such a file too", loss=True))
                continue
            readers[kind].append(_Reader(data, where, f"{kind} file"))

    # New ids first, so that every reference can be rewritten, including references to items
    # a previous run imported.
    new_ids: dict[tuple[str, str], str] = {}
    for kind in ("epic", "task", "team", "proposal"):
        for reader in readers[kind]:
            old = str(reader.data["id"])
            previous = imported.get((kind, old))
            created = iso_time(reader.data.get("createdAt"))
            new_ids.setdefault((kind, old), _stem(previous) if previous else board_items.new_board_id(kind, scope, old, created, today))
    for reader in list(readers["worker"]):
        old = str(reader.data["id"])
        if not is_valid_name(old):
            skipped.append(
                Item("worker", old, reader.where, SKIP, reason=f"worker id {old!r} cannot be a board worker name (letters, digits, '.', '_', '-')", loss=True)
            )
            readers["worker"].remove(reader)
            continue
        new_ids[("worker", old)] = old
    for (kind, old), path in imported.items():
        new_ids.setdefault((kind, old), _stem(path))

    def ref(kind: str, old: str | None, where: Where) -> str | None:
        if old is None:
            return None
        found = new_ids.get((kind, old))
        if found is None:
            notes.append(f"{where}: refers to {kind} {old}, which is not in the source; kept as written")
            return old
        return found

    result = Result([], [], None, skipped, notes, version)
    fallback_epic: Epic | None = None
    for reader in readers["epic"]:
        try:
            result.candidates.append(_epic(reader, new_ids, imported_from))
        except InvalidDocument as err:
            skipped.append(_problem("epic", str(reader.data["id"]), reader.where, err))
    for reader in readers["task"]:
        epic_old = reader.data.get("epicId")
        if not isinstance(epic_old, str) or ("epic", epic_old) not in new_ids:
            if fallback_epic is None:
                fallback_epic = board_items.imported_epic(scope, "Moe", "Moe tasks without an epic", None, today)
                fallback_epic = replace(fallback_epic, id=new_ids.get(("epic", f"{SYSTEM}:tasks"), fallback_epic.id))
            epic_id = fallback_epic.id
            notes.append(f"{reader.where}: task {reader.data['id']} has no epic in the source; it goes to {epic_id!r}")
        else:
            epic_id = new_ids[("epic", epic_old)]
        try:
            candidate, comments = _task(reader, epic_id, new_ids, ref, imported_from, scope, today, max_comment_bytes)
        except InvalidDocument as err:
            skipped.append(_problem("task", str(reader.data["id"]), reader.where, err))
            continue
        result.candidates.append(candidate)
        if comments:
            result.comments[candidate.new_id] = comments
    if fallback_epic is not None:
        holder = Where(source.project[0].file if source.project else ".moe")
        result.candidates.append(board_items.candidate("epic", fallback_epic, f"{SYSTEM}:tasks", holder, imported_from, made=True))
    for kind, build in (("worker", _worker), ("team", _team), ("proposal", _proposal)):
        for reader in readers[kind]:
            try:
                result.candidates.append(build(reader, new_ids, ref, imported_from))
            except InvalidDocument as err:
                skipped.append(_problem(kind, str(reader.data["id"]), reader.where, err))

    created = iso_time(moe_project.data.get("createdAt")) if moe_project is not None else None
    project_id = project.id if project is not None else derived_id("PROJ", scope, "project", scope, day_of(created, today))
    if moe_project is not None:
        moe_id = str(moe_project.text("id") or "project")
        if project is None or ("project", moe_id) in imported:
            result.project = _project(moe_project, project_id, imported_from)
        else:
            reason = "the board has a project.md of its own; Moe's rails and settings are not merged into it"
            skipped.append(Item("project", moe_id, moe_project.where, SKIP, f"{board_items.BOARD}/project.md", reason=reason, loss=True))

    for where, data in source.activity:
        try:
            result.events.append(_event(where, data, scope, project_id, new_ids, imported_from, now))
        except InvalidDocument as err:
            old = str(data.get("id")) if isinstance(data, dict) and data.get("id") else f"line {where.line}"
            skipped.append(_problem("event", old, where, err))

    _chat(source, result, scope, new_ids, notes)

    ids = [str(reader.data["id"]) for kind in KINDS for reader in readers[kind] if kind != "worker"]
    notes.append(id_shapes(ids))
    for folder, what in sorted(source.not_imported.items()):
        notes.append(f".moe/{folder}: {what} not imported (the board has no such kind; they stay in .moe/)")
    return result


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def _title(reader: _Reader, account: Account, leftovers: dict[str, Any], prefix: str = "") -> str:
    raw = reader.text("title", required=True) or ""
    title = " ".join(raw.split())
    if title != raw:
        account.mapped(f"{prefix}title", "title", raw, changed="white space made single spaces; the source's title is kept")
        leftovers["title"] = raw
    else:
        account.mapped(f"{prefix}title", "title", raw)
    return title


def _times(reader: _Reader, account: Account, pairs: Sequence[tuple[str, str]], prefix: str = "") -> dict[str, str | None]:
    """The times of `pairs` (source key, home) read and accounted (an absent one is not)."""
    found: dict[str, str | None] = {}
    for key, home in pairs:
        value = reader.time(key)
        found[home] = value
        if value is not None:
            account.mapped(f"{prefix}{key}", home, reader.data[key])
        elif key in reader.data:
            account.empty(f"{prefix}{key}")
    return found


def _listed(reader: _Reader, key: str, home: str, account: Account, leftovers: dict[str, Any], prefix: str = "") -> tuple[str, ...]:
    """A list of texts, accounted: blank items are left out, which is a change (the source's
    list is kept)."""
    values = reader.texts(key)
    if key not in reader.data:
        return values
    if is_empty(reader.data[key]):
        account.empty(f"{prefix}{key}")
    elif len(values) != len(reader.data[key]):
        account.mapped(f"{prefix}{key}", home, reader.data[key], changed="blank items left out; the source's list is kept")
        leftovers[key] = reader.data[key]
    else:
        account.mapped(f"{prefix}{key}", home, reader.data[key])
    return values


def _epic(reader: _Reader, new_ids: Mapping[tuple[str, str], str], imported_from: str) -> Candidate:
    old = str(reader.data["id"])
    account, p = Account(), "epic."
    leftovers: dict[str, Any] = {}
    account.mapped(f"{p}id", "source_id", old)
    title = _title(reader, account, leftovers, p)
    description = reader.text("description") or ""
    account.mapped(f"{p}description", "description", description) if description else account.empty(f"{p}description")
    raw_status = reader.text("status")
    status = (raw_status or "PLANNED").upper()
    note = None
    if status not in EPIC_STATUSES:
        note = f"status {status} read as PLANNED"
        account.mapped(f"{p}status", "status", raw_status, changed=f"{raw_status} -> PLANNED; the source's status is kept")
        leftovers["status"] = raw_status
        status = "PLANNED"
    elif raw_status is not None:
        account.mapped(f"{p}status", "status", raw_status)
    order = reader.number("order")
    if "order" in reader.data:
        account.mapped(f"{p}order", "order", reader.data["order"])
    # Early boards named an epic's rails `rails`; both are the epic's rails.
    rails = list(_listed(reader, "epicRails", "epic_rails", account, leftovers, p))
    for rail in _listed(reader, "rails", "epic_rails (Moe's earlier name)", account, leftovers, p):
        if rail not in rails:
            rails.append(rail)
    notes_text = reader.text("architectureNotes")
    if notes_text is not None:
        account.mapped(f"{p}architectureNotes", "architecture_notes", notes_text)
    elif "architectureNotes" in reader.data:
        account.empty(f"{p}architectureNotes")
    if isinstance(reader.data.get("projectId"), str):
        account.mapped(f"{p}projectId", "the board's project", reader.data["projectId"])
    times = _times(reader, account, (("createdAt", "created"), ("updatedAt", "updated")), p)
    account_rest(account, reader.data, leftovers, prefix=p)
    epic = Epic(
        id=new_ids[("epic", old)],
        title=title,
        description=description.strip(),
        status=status,
        order=order,
        epic_rails=tuple(rails),
        architecture_notes=notes_text,
        created=times["created"],
        updated=times["updated"],
    )
    return board_items.candidate("epic", epic, old, reader.where, imported_from, leftovers, note, fates=account.done())


# --------------------------------------------------------------------------- tasks


def _renamed(record: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """`record` with Moe's keys spelled as the board stores them (values unchanged, other keys kept)."""
    return {names.get(key, key): value for key, value in record.items()}


_REJECTION_KEYS = {"rejectedAt": "rejected", "reopenCount": "reopen_count", "failedDodItems": "failed_dod_items"}
_FAILED_ITEM_KEYS = {"rejectedAt": "rejected", "rejectedBy": "rejected_by"}
_HANDOFF_KEYS = {
    "whatIsDone": "what_is_done",
    "whatRemains": "what_remains",
    "openQuestions": "open_questions",
    "releasedBy": "released_by",
    "releasedAt": "released",
    "diskState": "disk_state",
}
_CRITIQUE_KEYS = {"reviewedBy": "reviewed_by", "reviewedAt": "reviewed"}
_ATTEMPT_KEYS = {"attemptedAt": "attempted", "implementationPlan": "plan", "stepsCompleted": "steps_completed"}


def _verification(value: Mapping[str, Any]) -> dict[str, Any]:
    """Moe's verification `{command, exitCode, outputTail?, reportedAt}` as the board stores
    evidence: `{commands: [{command, exit_code, output_tail?}], reported}` (other keys kept)."""
    evidence: dict[str, Any] = {}
    command: dict[str, Any] = {}
    for key, target in (("command", "command"), ("exitCode", "exit_code"), ("outputTail", "output_tail")):
        if key in value:
            command[target] = value[key]
    if command:
        evidence["commands"] = [command, *list(value.get("commands") or [])]
    for key, item in value.items():
        if key in ("command", "exitCode", "outputTail", "commands"):
            continue
        evidence["reported" if key == "reportedAt" else key] = item
    return evidence


def _task(
    reader: _Reader,
    epic_id: str,
    new_ids: Mapping[tuple[str, str], str],
    ref: Any,
    imported_from: str,
    scope: str,
    today: str,
    max_comment_bytes: int | None,
) -> tuple[Candidate, list[Comment]]:
    old = str(reader.data["id"])
    data = reader.data
    account = Account()
    leftovers: dict[str, Any] = {}
    notes: list[str] = []
    account.mapped("id", "source_id", old)
    epic_old = data.get("epicId")
    if isinstance(epic_old, str) and ("epic", epic_old) in new_ids:
        account.mapped("epicId", "epic", epic_old)
    elif not is_empty(epic_old):
        account.kept("epicId", epic_old, reason="no such epic in the source; the task is in the epic made for such tasks")
        leftovers["epicId"] = epic_old
    title = _title(reader, account, leftovers)
    description = reader.text("description") or ""
    account.mapped("description", "description", description) if description else account.empty("description")

    raw_status = reader.text("status")
    status = (raw_status or "BACKLOG").upper()
    if status not in STATUSES:
        # Moe's later BLOCKED column: the board keeps blocking on the worker, so the task goes
        # back to the column it was blocked from.
        previous = (reader.text("blockedFromStatus") or "BACKLOG").upper()
        status = previous if previous in STATUSES else "BACKLOG"
        notes.append(f"status {raw_status} read as {status}")
        account.mapped("status", "status", raw_status, changed=f"{raw_status} -> {status}; the source's status is kept")
        leftovers["status"] = raw_status
    elif raw_status is not None:
        account.mapped("status", "status", raw_status)

    rank, priority_note = board_items.priority(reader.text("priority"))
    if "priority" in data:
        if priority_note:
            notes.append(priority_note)
            account.mapped("priority", "priority", data["priority"], changed=f"{data['priority']!r} -> {rank}; the source's priority is kept")
            leftovers["priority"] = data["priority"]
        elif is_empty(data["priority"]):
            account.empty("priority")
        else:
            account.mapped("priority", "priority", data["priority"])
    order = reader.number("order")
    if "order" in data:
        account.mapped("order", "order", data["order"])
    worker = reader.text("assignedWorkerId")
    if worker:
        account.mapped("assignedWorkerId", "assigned_worker", worker)
    elif "assignedWorkerId" in data:
        account.empty("assignedWorkerId")
    depends = tuple(str(ref("task", dep, reader.at("dependsOn"))) for dep in reader.texts("dependsOn"))
    if "dependsOn" in data:
        account.mapped("dependsOn", "depends_on", data["dependsOn"]) if depends else account.empty("dependsOn")
    parent_old = reader.text("parentTaskId")
    parent = ref("task", parent_old, reader.at("parentTaskId"))
    if parent_old is not None:
        # A parent not in the source is kept as written (the board shows it), never dropped.
        account.mapped("parentTaskId", "parent" if ("task", parent_old) in new_ids else "parent (as written: not in the source)", parent_old)
    elif "parentTaskId" in data:
        account.empty("parentTaskId")
    dod = _listed(reader, "definitionOfDone", "definition_of_done", account, leftovers)
    rails = _listed(reader, "taskRails", "task_rails", account, leftovers)
    steps = _steps(reader, account, leftovers)
    reopen_count = int(reader.number("reopenCount"))
    for key, home in (("reopenCount", "reopen_count"), ("reopenReason", "reopen_reason"), ("prLink", "pr_link"), ("testFile", "test_file")):
        if key in data:
            account.empty(key) if is_empty(data[key]) else account.mapped(key, home, data[key])
    created_by = (reader.text("createdBy") or "HUMAN").upper()
    if "createdBy" in data and not is_empty(data["createdBy"]):
        if created_by in ("HUMAN", "WORKER"):
            account.mapped("createdBy", "created_by", data["createdBy"])
        else:
            account.mapped("createdBy", "created_by", data["createdBy"], changed=f"{data['createdBy']} -> HUMAN; the source's value is kept")
            leftovers["createdBy"] = data["createdBy"]
    elif "createdBy" in data:
        account.empty("createdBy")
    max_reopens = None
    if data.get("maxReopens") is not None:
        max_reopens = int(reader.number("maxReopens")) or None
        account.mapped("maxReopens", "max_reopens", data["maxReopens"])
    for key, home in (("reviewSummary", "review_summary"), ("workSummary", "work_summary")):
        if key in data:
            account.empty(key) if is_empty(data[key]) else account.mapped(key, home, data[key])
    times = _times(
        reader,
        account,
        (
            ("createdAt", "created"),
            ("updatedAt", "updated"),
            ("planSubmittedAt", "plan_submitted"),
            ("planApprovedAt", "plan_approved"),
            ("workStartedAt", "work_started"),
            ("reviewStartedAt", "review_started"),
            ("completedAt", "completed"),
        ),
    )

    # QA: the rejection history (newest first), the failed definition-of-done items, the
    # latest rejection's details (which the board derives from the history's newest entry).
    history = tuple(_renamed(entry, _REJECTION_KEYS) for entry in reader.records("rejectionHistory"))
    if "rejectionHistory" in data:
        account.mapped("rejectionHistory", "rejection_history", data["rejectionHistory"]) if history else account.empty("rejectionHistory")
    failed = tuple(_renamed(entry, _FAILED_ITEM_KEYS) for entry in reader.records("failedDodItems"))
    if "failedDodItems" in data:
        account.mapped("failedDodItems", "failed_dod_items", data["failedDodItems"]) if failed else account.empty("failedDodItems")
    details = reader.mapping("rejectionDetails")
    if "rejectionDetails" in data:
        newest = history[0] if history else {}
        derived = {k: v for k, v in (("failedDodItems", newest.get("failed_dod_items")), ("issues", newest.get("issues"))) if v}
        if is_empty(details) or not any(details.values()):
            account.empty("rejectionDetails")
        elif {k: v for k, v in details.items() if v} == derived:
            account.mapped("rejectionDetails", "rejection_history[0] (the board derives the latest rejection's details from it)", details)
        else:
            account.kept("rejectionDetails", details, reason="the latest rejection's details, with no rejection history that holds them")
            leftovers["rejectionDetails"] = details
    evidence = None
    if "verification" in data:
        raw = reader.mapping("verification")
        evidence = _verification(raw) if raw else None
        account.mapped("verification", "verification (commands, reported)", raw) if evidence else account.empty("verification")
    handoffs = tuple(_renamed(entry, _HANDOFF_KEYS) for entry in reader.records("priorHandoffs"))
    if "priorHandoffs" in data:
        account.mapped("priorHandoffs", "handoffs", data["priorHandoffs"]) if handoffs else account.empty("priorHandoffs")
    attempt = _renamed(reader.mapping("priorAttempt"), _ATTEMPT_KEYS) or None
    if "priorAttempt" in data:
        account.mapped("priorAttempt", "prior_attempt", data["priorAttempt"]) if attempt else account.empty("priorAttempt")
    critique = _renamed(reader.mapping("planCritiqueResult"), _CRITIQUE_KEYS) or None
    if "planCritiqueResult" in data:
        account.mapped("planCritiqueResult", "critique", data["planCritiqueResult"]) if critique else account.empty("planCritiqueResult")
    budget = reader.mapping("budget")
    budget_ms = budget.get("wallClockMs") if isinstance(budget.get("wallClockMs"), int) and not isinstance(budget.get("wallClockMs"), bool) else None
    if "budget" in data:
        if budget_ms:
            account.mapped("budget.wallClockMs", "budget_ms", budget_ms)
        rest = {key: value for key, value in budget.items() if key != "wallClockMs" or not budget_ms}
        if rest:
            account.kept("budget", rest, reason="when the budget's warning and escalation went out: the board has no key for them")
            leftovers["budget"] = budget
        elif not budget_ms:
            account.empty("budget")
    fetched = tuple(dict.fromkeys(reader.texts("contextFetchedBy")))
    if "contextFetchedBy" in data:
        account.mapped("contextFetchedBy", "context_fetched_by", data["contextFetchedBy"]) if fetched else account.empty("contextFetchedBy")
    warnings = reader.texts("planSizeWarnings")
    if "planSizeWarnings" in data:
        account.mapped("planSizeWarnings", "plan_size_warnings", data["planSizeWarnings"]) if warnings else account.empty("planSizeWarnings")
    needs_review = data.get("needsHumanReview") is True
    if "needsHumanReview" in data:
        account.mapped("needsHumanReview", "needs_human_review", data["needsHumanReview"])
    metrics = reader.mapping("metrics")
    first_claimed = iso_time(metrics.get("firstClaimAt"))
    if "metrics" in data:
        if first_claimed:
            account.mapped("metrics.firstClaimAt", "first_claimed", metrics["firstClaimAt"])
        rest = {key: value for key, value in metrics.items() if key != "firstClaimAt" or not first_claimed}
        if rest:
            account.kept("metrics", rest, reason="Moe's counters as Moe last wrote them; the board computes its metrics from the task")
            leftovers["metrics"] = metrics
        elif not first_claimed:
            account.empty("metrics")
    completed_steps = [step.id for step in steps if step.status == "COMPLETED"]
    if "stepsCompleted" in data:
        listed = reader.texts("stepsCompleted")
        if not listed:
            account.empty("stepsCompleted")
        elif sorted(set(listed)) == sorted(completed_steps):
            account.mapped("stepsCompleted", "plan[].status (the board counts the COMPLETED steps)", data["stepsCompleted"])
        else:
            account.kept("stepsCompleted", data["stepsCompleted"], reason="differs from the steps marked COMPLETED")
            leftovers["stepsCompleted"] = data["stepsCompleted"]

    comments, kept_comments = _comments(reader, new_ids[("task", old)], old, scope, today, max_comment_bytes)
    if "comments" in data:
        if comments:
            account.mapped("comments", "comments", f"{len(comments)} comment(s)")
        if kept_comments:
            account.kept("comments", kept_comments, reason="a comment without text, or longer than a board comment line may be")
            leftovers["comments"] = kept_comments
        if not comments and not kept_comments:
            account.empty("comments")
    if "hasPendingQuestion" in data:
        pending = bool(threads.questions_for_agents(threads.parse_comment(c.record, c.task) for c in comments))
        if bool(data["hasPendingQuestion"]) == pending:
            account.mapped("hasPendingQuestion", "comments (the board finds pending questions in them)", data["hasPendingQuestion"])
        else:
            account.kept("hasPendingQuestion", data["hasPendingQuestion"], reason="the board finds pending questions in the comments; they say otherwise")
            leftovers["hasPendingQuestion"] = data["hasPendingQuestion"]
    account_rest(account, data, leftovers)

    task = Task(
        id=new_ids[("task", old)],
        epic=epic_id,
        title=title,
        description=description.strip(),
        status=status,
        priority=rank,
        order=order,
        assigned_worker=worker,
        depends_on=depends,
        parent=parent,
        definition_of_done=dod,
        task_rails=rails,
        plan=steps,
        reopen_count=reopen_count,
        reopen_reason=reader.text("reopenReason"),
        max_reopens=max_reopens,
        pr_link=reader.text("prLink"),
        created_by=created_by if created_by in ("HUMAN", "WORKER") else "HUMAN",
        test_file=reader.text("testFile"),
        work_summary=reader.text("workSummary"),
        review_summary=reader.text("reviewSummary"),
        first_claimed=first_claimed,
        created=times["created"],
        updated=times["updated"],
        plan_submitted=times["plan_submitted"],
        plan_approved=times["plan_approved"],
        work_started=times["work_started"],
        review_started=times["review_started"],
        completed=times["completed"],
        verification=evidence,
        handoffs=handoffs,
        prior_attempt=attempt,
        budget_ms=budget_ms or None,
        critique=critique,
        context_fetched_by=fetched,
        rejection_history=history,
        failed_dod_items=failed,
        needs_human_review=needs_review,
        plan_size_warnings=warnings,
    )
    candidate = board_items.candidate("task", task, old, reader.where, imported_from, leftovers, "; ".join(notes) or None, fates=account.done())
    return candidate, comments


def _steps(reader: _Reader, account: Account, leftovers: dict[str, Any]) -> tuple[Step, ...]:
    """The plan's steps, each field accounted under `implementationPlan[].<key>`; a step
    status the board spells otherwise (Moe's early `DONE`) is mapped to its word and listed as
    changed, the source's step kept under `source_fields.implementationPlan`."""
    raw = reader.records("implementationPlan")
    if "implementationPlan" in reader.data and not raw:
        account.empty("implementationPlan")
    steps: list[Step] = []
    kept_steps: dict[str, Any] = {}
    for index, data in enumerate(raw):
        step = _Reader(data, reader.at(f"implementationPlan[{index}]"), "a plan step")
        step_id = step.text("stepId") or f"step-{index + 1}"
        extra: dict[str, Any] = {}
        name = "implementationPlan[].{}".format
        if "stepId" in data:
            account.mapped(name("stepId"), "plan[].id", data["stepId"])
        description = step.text("description") or ""
        account.mapped(name("description"), "plan[].description", description) if description else account.empty(name("description"))
        raw_status = step.text("status")
        word = (raw_status or "PENDING").strip().upper().replace("-", "_")
        status = _STEP_WORDS.get(word.replace("_", " "), _STEP_WORDS.get(word, word.replace(" ", "_")))
        if raw_status is None:
            status = "PENDING"
        elif status not in STEP_STATUSES:
            account.mapped(name("status"), "plan[].status", raw_status, changed=f"{raw_status} -> PENDING; the source's step is kept")
            extra["status"] = raw_status
            status = "PENDING"
        elif status != raw_status:
            account.mapped(name("status"), "plan[].status", raw_status, changed=f"{raw_status} -> {status}; the source's step is kept")
            extra["status"] = raw_status
        else:
            account.mapped(name("status"), "plan[].status", raw_status)
        for key, home in (("affectedFiles", "affected_files"), ("newFiles", "new_files"), ("modifiedFiles", "modified_files"), ("note", "note")):
            if key in data:
                account.empty(name(key)) if is_empty(data[key]) else account.mapped(name(key), f"plan[].{home}", data[key])
        for key, home in (("startedAt", "started"), ("completedAt", "completed")):
            if key in data:
                account.empty(name(key)) if is_empty(data[key]) else account.mapped(name(key), f"plan[].{home}", data[key])
        amendments = step.records("amendments")
        if "amendments" in data:
            account.mapped(name("amendments"), "plan[].amendments", data["amendments"]) if amendments else account.empty(name("amendments"))
        known = {"stepId", "description", "status", "affectedFiles", "newFiles", "modifiedFiles", "note", "startedAt", "completedAt", "amendments"}
        for key, value in data.items():
            if key in known:
                continue
            if is_empty(value):
                account.empty(name(key))
            else:
                account.kept(name(key), value, home=f"source_fields.implementationPlan.{step_id}.{key}")
                extra[key] = value
        if extra:
            kept_steps[step_id] = extra
        steps.append(
            Step(
                id=step_id,
                description=description,
                status=status,
                affected_files=step.texts("affectedFiles"),
                new_files=step.texts("newFiles"),
                modified_files=step.texts("modifiedFiles"),
                note=step.text("note"),
                started=step.time("startedAt"),
                completed=step.time("completedAt"),
                amendments=tuple(dict(item) for item in amendments),
            )
        )
    if kept_steps:
        leftovers["implementationPlan"] = kept_steps
    return tuple(steps)


def _stamp(value: Any) -> str | None:
    """A chat or comment time: kept as written when it is in the board's own form (with
    milliseconds), else RFC 3339 seconds; None when it is no time."""
    if isinstance(value, str) and _CHAT_STAMP.match(value):
        return value
    return iso_time(value)


def _comments(reader: _Reader, task_id: str, task_old: str, scope: str, today: str, max_bytes: int | None) -> tuple[list[Comment], list[Any]]:
    """The task's comments as board comment records (`{id, taskId, author, content,
    timestamp, sourceId}`, ids derived from the task's and the comment's), and those that
    cannot be one (no text, too long for a board comment line), kept verbatim."""
    raw = reader.data.get("comments")
    if not isinstance(raw, list):
        return [], [] if is_empty(raw) else [raw]
    made: list[Comment] = []
    kept: list[Any] = []
    for index, entry in enumerate(raw, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) or not entry["content"].strip():
            kept.append(entry)
            continue
        source_id = entry.get("id", index)
        stamp = _stamp(entry.get("timestamp"))
        day = stamp[:10].replace("-", "") if stamp else today
        record: dict[str, Any] = {
            "id": derived_id("COMMENT", scope, "comment", f"{task_old}#{source_id}", day),
            "taskId": task_id,
            "author": str(entry.get("author") or "human"),
            "content": entry["content"],
            "timestamp": stamp or f"{day[:4]}-{day[4:6]}-{day[6:]}T00:00:00Z",
            "sourceId": source_id,
        }
        extra = {key: value for key, value in entry.items() if key not in ("id", "author", "content", "timestamp")}
        if entry.get("timestamp") is not None and stamp != entry.get("timestamp"):
            extra["timestamp"] = entry["timestamp"]
        if not entry.get("author"):
            extra["author"] = entry.get("author")
        if extra:
            record["sourceFields"] = extra
        size = len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        if max_bytes is not None and size > max_bytes:
            kept.append(entry)
            continue
        made.append(Comment(task_id, record))
    return made, kept


# --------------------------------------------------------------------------- workers, teams, proposals, the project


def _worker(reader: _Reader, new_ids: Mapping[tuple[str, str], str], ref: Any, imported_from: str) -> Candidate:
    old = str(reader.data["id"])
    data = reader.data
    account, p = Account(), "worker."
    leftovers: dict[str, Any] = {}
    account.mapped(f"{p}id", "id (the worker's name)", old)
    raw_status = reader.text("status")
    status = (raw_status or "").upper()
    stored = status if status in ("BLOCKED", "DEAD") else None
    if raw_status is not None:
        home = "status" if stored else "status (the board derives it from the worker's tasks)"
        account.mapped(f"{p}status", home, raw_status)
    blocked_reason = reader.text("lastError") if stored == "BLOCKED" else None
    blocked_task = reader.text("currentTaskId") if stored == "BLOCKED" else None
    if blocked_reason:
        account.mapped(f"{p}lastError", "blocked_reason", blocked_reason)
    if "currentTaskId" in data:
        if is_empty(data["currentTaskId"]):
            account.empty(f"{p}currentTaskId")
        elif blocked_task:
            account.mapped(f"{p}currentTaskId", "blocked_task", blocked_task)
        else:
            account.mapped(f"{p}currentTaskId", "the task's assigned_worker (the board finds a worker's task there)", data["currentTaskId"])
    last_epic = ref("epic", reader.text("epicId"), reader.at("epicId"))
    if last_epic:
        account.mapped(f"{p}epicId", "last_epic", data["epicId"])
    if "teamId" in data:
        account.empty(f"{p}teamId") if is_empty(data["teamId"]) else account.mapped(f"{p}teamId", "the team's members", data["teamId"])
    if isinstance(data.get("projectId"), str):
        account.mapped(f"{p}projectId", "the board's project", data["projectId"])
    times = _times(reader, account, (("startedAt", "created"), ("lastActivityAt", "heartbeat"), ("createdAt", "created"), ("updatedAt", "updated")), p)
    account_rest(account, data, leftovers, prefix=p)
    worker = Worker(
        id=old,
        status=stored,
        blocked_reason=blocked_reason,
        blocked_task=ref("task", blocked_task, reader.at("currentTaskId")) if blocked_task else None,
        heartbeat=times["heartbeat"],
        last_epic=last_epic,
        created=times["created"],
        updated=times["updated"] or times["heartbeat"],
    )
    return board_items.candidate("worker", worker, old, reader.where, imported_from, leftovers, fates=account.done())


def _team(reader: _Reader, new_ids: Mapping[tuple[str, str], str], ref: Any, imported_from: str) -> Candidate:
    old = str(reader.data["id"])
    data = reader.data
    account, p = Account(), "team."
    leftovers: dict[str, Any] = {}
    account.mapped(f"{p}id", "source_id", old)
    name = reader.text("name", required=True) or old
    account.mapped(f"{p}name", "name", name)
    raw_role = reader.text("role")
    role = (raw_role or "").lower() or None
    note = None
    if role is not None and role not in ROLES:
        note = f"role {raw_role} has no board equivalent; the team has no role"
        account.kept(f"{p}role", raw_role, reason="not one of the board's roles")
        leftovers["role"] = raw_role
        role = None
    elif raw_role is not None:
        account.mapped(f"{p}role", "role", raw_role)
    elif "role" in data:
        account.empty(f"{p}role")
    if "maxSize" in data:
        account.mapped(f"{p}maxSize", "max_size", data["maxSize"])
    members = tuple(str(ref("worker", member, reader.at("memberIds"))) for member in reader.texts("memberIds"))
    if "memberIds" in data:
        account.mapped(f"{p}memberIds", "members", data["memberIds"]) if members else account.empty(f"{p}memberIds")
    if isinstance(data.get("projectId"), str):
        account.mapped(f"{p}projectId", "the board's project", data["projectId"])
    times = _times(reader, account, (("createdAt", "created"), ("updatedAt", "updated")), p)
    account_rest(account, data, leftovers, prefix=p)
    team = Team(
        id=new_ids[("team", old)],
        name=name,
        role=role,
        max_size=int(reader.number("maxSize", 10)),
        members=members,
        created=times["created"],
        updated=times["updated"],
    )
    return board_items.candidate("team", team, old, reader.where, imported_from, leftovers, note, fates=account.done())


def _proposal(reader: _Reader, new_ids: Mapping[tuple[str, str], str], ref: Any, imported_from: str) -> Candidate:
    old = str(reader.data["id"])
    data = reader.data
    account, p = Account(), "proposal."
    leftovers: dict[str, Any] = {}
    account.mapped(f"{p}id", "source_id", old)

    def choice(key: str, allowed: Sequence[str], default: str) -> str:
        value = (reader.text(key) or default).upper()
        if value not in allowed:
            raise source_error(f"{key} {value!r} is not one of {', '.join(allowed)}", reader.at(key))
        if key in data:
            account.mapped(f"{p}{key}", key, data[key])
        return value

    homes = {"taskId": "task", "workerId": "worker", "currentValue": "current_value", "proposedValue": "proposed_value", "reason": "reason (the body)"}
    for key, home in (*homes.items(), ("resolvedBy", "resolved_by")):
        if key in data:
            account.empty(f"{p}{key}") if is_empty(data[key]) else account.mapped(f"{p}{key}", home, data[key])
    times = _times(reader, account, (("resolvedAt", "resolved"), ("createdAt", "created")), p)
    proposal = Proposal(
        id=new_ids[("proposal", old)],
        task=ref("task", reader.text("taskId"), reader.at("taskId")),
        worker=reader.text("workerId"),
        proposal_type=choice("proposalType", PROPOSAL_TYPES, "ADD_RAIL"),
        target_scope=choice("targetScope", PROPOSAL_SCOPES, "TASK"),
        current_value=reader.text("currentValue"),
        proposed_value=reader.text("proposedValue", required=True) or "",
        reason=(reader.text("reason") or "").strip(),
        status=choice("status", PROPOSAL_STATUSES, "PENDING"),
        resolved_by=reader.text("resolvedBy"),
        resolved=times["resolved"],
        created=times["created"],
    )
    account_rest(account, data, leftovers, prefix=p)
    return board_items.candidate("proposal", proposal, old, reader.where, imported_from, leftovers, fates=account.done())


_SETTING_HOMES = {
    "approvalMode": "settings.approval_mode",
    "speedModeDelayMs": "settings.speed_mode_delay_ms",
    "maxReopens": "settings.max_reopens",
    "staleWorkerTimeoutMs": "settings.stale_worker_timeout_ms",
    "chatMaxAgentHops": "settings.chat_max_agent_hops",
    "taskSizing": "settings.task_sizing",
    "consolidationBranch": "settings.consolidation_branch",
    "requireVerification": "settings.require_verification",
}
_RAIL_HOMES = {
    "techStack": "tech_stack",
    "forbiddenPatterns": "forbidden_patterns",
    "requiredPatterns": "required_patterns",
    "formatting": "formatting",
    "testing": "testing",
    "customRules": "custom_rules",
}


def _project(reader: _Reader, project_id: str, imported_from: str) -> Candidate:
    account, p = Account(), "project."
    leftovers: dict[str, Any] = {}
    rails_data = reader.mapping("globalRails")
    rails = _Reader(rails_data, reader.at("globalRails"), "globalRails")
    settings_data = reader.mapping("settings")
    settings = _Reader(settings_data, reader.at("settings"), "settings")
    mode = (settings.text("approvalMode") or "CONTROL").upper()
    sizing = settings.mapping("taskSizing")
    defaults = TaskSizing()
    project = Project(
        id=project_id,
        name=reader.text("name") or "board",
        global_rails=Rails(
            tech_stack=rails.texts("techStack"),
            forbidden_patterns=rails.texts("forbiddenPatterns"),
            required_patterns=rails.texts("requiredPatterns"),
            formatting=rails.text("formatting") or "",
            testing=rails.text("testing") or "",
            custom_rules=rails.texts("customRules"),
        ),
        settings=Settings(
            approval_mode=mode if mode in APPROVAL_MODES else "CONTROL",
            speed_mode_delay_ms=int(settings.number("speedModeDelayMs", 2000)),
            max_reopens=int(settings.number("maxReopens", Settings().max_reopens)),
            stale_worker_timeout_ms=int(settings.number("staleWorkerTimeoutMs", Settings().stale_worker_timeout_ms)),
            require_verification=settings.data.get("requireVerification") is True,
            chat_max_agent_hops=int(settings.number("chatMaxAgentHops", Settings().chat_max_agent_hops)),
            task_sizing=TaskSizing(
                warn_steps=int(sizing.get("warnSteps") or defaults.warn_steps),
                max_steps=int(sizing.get("maxSteps") or defaults.max_steps),
                warn_distinct_files=int(sizing.get("warnDistinctFiles") or defaults.warn_distinct_files),
                max_distinct_files=int(sizing.get("maxDistinctFiles") or defaults.max_distinct_files),
            ),
            consolidation_branch=settings.text("consolidationBranch"),
        ),
        exists=True,
        created=reader.time("createdAt"),
        updated=reader.time("updatedAt"),
    )
    old = str(reader.text("id") or "project")
    account.mapped(f"{p}id", "source_id", old)
    if "name" in reader.data:
        account.mapped(f"{p}name", "name", reader.data["name"])
    if "schemaVersion" in reader.data:
        account.mapped(f"{p}schemaVersion", "the report's version (the format read)", reader.data["schemaVersion"])
    for key, home in _RAIL_HOMES.items():
        if key in rails_data:
            name = f"{p}globalRails.{key}"
            account.empty(name) if is_empty(rails_data[key]) else account.mapped(name, f"global_rails.{home}", rails_data[key])
    rail_rest = {key: value for key, value in rails_data.items() if key not in _RAIL_HOMES}
    kept_settings: dict[str, Any] = {}
    for key, value in settings_data.items():
        name = f"{p}settings.{key}"
        if key in _SETTING_HOMES:
            account.empty(name) if is_empty(value) else account.mapped(name, _SETTING_HOMES[key], value)
        elif is_empty(value):
            account.empty(name)
        else:
            account.kept(name, value, home=f"source_fields.settings.{key}")
            kept_settings[key] = value
    _times(reader, account, (("createdAt", "created"), ("updatedAt", "updated")), p)
    if "globalRails" in reader.data and not rails_data:
        account.empty(f"{p}globalRails")
    if "settings" in reader.data and not settings_data:
        account.empty(f"{p}settings")
    rest = {key: value for key, value in reader.data.items() if key not in ("globalRails", "settings")}
    account_rest(account, rest, leftovers, prefix=p)
    if kept_settings:
        leftovers["settings"] = kept_settings
    for key, value in rail_rest.items():
        account.kept(f"{p}globalRails.{key}", value, home=f"source_fields.globalRails.{key}")
        leftovers.setdefault("globalRails", {})[key] = value
    text = with_provenance(board_files.render_project(project), imported_from, old, leftovers)
    return Candidate("project", old, project_id, f"{board_items.BOARD}/project.md", text.encode("utf-8"), reader.where, fates=account.done())


# --------------------------------------------------------------------------- the activity log


def _event(
    where: Where,
    data: Any,
    scope: str,
    project_id: str,
    new_ids: Mapping[tuple[str, str], str],
    imported_from: str,
    now: str,
) -> tuple[Where, str, dict[str, Any], tuple[Any, ...]]:
    reader = _Reader(data, where, "an activity record")
    account, p = Account(), "event."
    old = str(reader.text("id", required=True))
    account.mapped(f"{p}id", "payload.source_id", old)
    stamp = reader.time("timestamp")
    account.mapped(f"{p}timestamp", "timestamp", data["timestamp"]) if stamp else account.mapped(
        f"{p}timestamp", "timestamp", reason="absent: the migration's time"
    )
    name = reader.text("event", required=True)
    account.mapped(f"{p}event", "event", name)
    payload = data.get("payload")
    if payload is not None and not isinstance(payload, dict):
        raise source_error("payload must be a JSON object", reader.at("payload"))
    if "payload" in data:
        account.mapped(f"{p}payload", "payload", payload) if payload else account.empty(f"{p}payload")
    if "projectId" in data:
        account.mapped(f"{p}projectId", "projectId (the board's project)", data["projectId"])
    record: dict[str, Any] = {"id": _event_id(scope, str(old), stamp or now), "timestamp": stamp or now, "projectId": project_id}
    for key, kind in (("epicId", "epic"), ("taskId", "task"), ("workerId", "worker")):
        value = reader.text(key)
        if value is not None:
            record[key] = new_ids.get((kind, value), value)
            account.mapped(f"{p}{key}", key if (kind, value) in new_ids else f"{key} (as written: not in the source)", value)
        elif key in data:
            account.empty(f"{p}{key}")
    record["event"] = name
    extra: dict[str, Any] = {}
    account_rest(account, data, extra, prefix=p)
    record["payload"] = {**(payload or {}), "imported_from": imported_from, "source_id": old}
    if extra:
        record["payload"]["source_fields"] = extra
    return where, old, record, account.done()


# --------------------------------------------------------------------------- chat


def _channel_name(data: Mapping[str, Any], new_ids: Mapping[tuple[str, str], str]) -> tuple[str, str | None]:
    """The board channel a Moe channel is, and how its name changed (None when it did not):
    the canonical ones by name, a task's or epic's by its linked item, a custom one by its
    name made a board channel name."""
    name = str(data.get("name") or "").strip()
    kind = str(data.get("type") or "").lower()
    linked = data.get("linkedEntityId")
    if kind in ("task", "epic") and isinstance(linked, str):
        found = new_ids.get((kind, linked))
        if found is not None:
            return found, None
    lowered = name.lower().lstrip("#")
    if lowered in threads.CANONICAL_CHANNELS:
        return lowered, None if lowered == name else f"{name} -> #{lowered}"
    slug = re.sub(r"[^a-z0-9._-]+", "-", lowered).strip("-._")[:64] or str(data.get("id"))
    if slug in threads.CANONICAL_CHANNELS or re.match(r"(?i)(task|epic)-", slug):
        slug = f"moe-{slug}"[:64]
    return slug, None if slug == name else f"{name!r} -> #{slug}"


def _chat(source: Source, result: Result, scope: str, new_ids: Mapping[tuple[str, str], str], notes: list[str]) -> None:
    """Moe's channels, messages and decisions as lines of the board's chat channels."""
    channel_of: dict[str, str] = {}
    for where, data in source.channels:
        old = str(data.get("id")) if isinstance(data, dict) and data.get("id") else where.file.rsplit("/", 1)[-1]
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            result.skipped.append(Item("channel", old, where, SKIP, reason="not a channel (a JSON object with an id); Moe skips such a file too", loss=True))
            continue
        board_name, renamed = _channel_name(data, new_ids)
        channel_of[old] = board_name
        account, p = Account(), "channel."
        account.mapped(f"{p}id", "sourceId (on the creation line)", old)
        if board_name in threads.CANONICAL_CHANNELS or board_name.startswith(("TASK-", "EPIC-")):
            count = len(source.messages.get(old, ()))
            reason = f"the board's #{board_name} exists always; nothing to create ({count} message(s) come over into it)"
            result.skipped.append(Item("channel", old, where, SKIP, f"{board_items.BOARD}/chat/{board_name}.jsonl", reason=reason))
            continue
        account.mapped(f"{p}name", "the channel's name", data.get("name"), changed=renamed)
        account.mapped(f"{p}type", "custom (a channel with a creation line)", data.get("type"))
        stamp = _stamp(data.get("createdAt"))
        if stamp:
            account.mapped(f"{p}createdAt", "timestamp (of the creation line)", data["createdAt"])
        extra: dict[str, Any] = {}
        account_rest(account, data, extra, prefix=p)
        record: dict[str, Any] = {
            "id": derived_id("CHAN", scope, "channel", old, day_of(stamp, "20000101")),
            "kind": "channel",
            "channel": board_name,
            "sender": str(data.get("createdBy") or threads.HUMAN),
            "content": board_name,
            "timestamp": stamp or "1970-01-01T00:00:00.000Z",
            "sourceId": old,
        }
        if extra or renamed:
            record["sourceFields"] = {**extra, **({"name": data.get("name")} if renamed else {})}
        result.chat.append(ChatLine("channel", old, where, board_name, record, account.done(), renamed))

    message_ids: dict[str, str] = {}
    for channel_old, lines in source.messages.items():
        for _where, data in lines:
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                stamp = _stamp(data.get("timestamp"))
                message_ids[data["id"]] = derived_id("MSG", scope, "message", f"{channel_old}#{data['id']}", day_of(stamp, "20000101"))
    decision_ids = {
        str(data["id"]): derived_id("DEC", scope, "decision", str(data["id"]), day_of(_stamp(data.get("createdAt")), "20000101"))
        for _where, data in source.decisions
        if isinstance(data, dict) and isinstance(data.get("id"), str)
    }
    orphans: list[str] = []
    empty = sorted(channel_old for channel_old, lines in source.messages.items() if not lines)
    if empty:
        notes.append(
            f".moe/messages: {len(empty)} channel file(s) without a message ({', '.join(empty[:3])}{', …' if len(empty) > 3 else ''}); nothing to bring"
        )
    for channel_old, lines in sorted(source.messages.items()):
        if not lines:
            continue
        found = channel_of.get(channel_old)
        if found is None:
            # Message lines whose channel file is gone (task channels, whose files Moe's
            # repositories did not keep): a custom channel named by the Moe channel id.
            board_name, _renamed = _channel_name({"id": channel_old, "name": channel_old, "type": "custom"}, new_ids)
            channel_of[channel_old] = board_name
            first = lines[0][0] if lines else Where(f".moe/messages/{channel_old}.jsonl")
            record = {
                "id": derived_id("CHAN", scope, "channel", channel_old, "20000101"),
                "kind": "channel",
                "channel": board_name,
                "sender": threads.SYSTEM,
                "content": board_name,
                "timestamp": next((_stamp(d.get("timestamp")) for _w, d in lines if isinstance(d, dict) and _stamp(d.get("timestamp"))), None)
                or "1970-01-01T00:00:00.000Z",
                "sourceId": channel_old,
            }
            note = f"no channel file for {channel_old}: its messages go to a custom channel #{board_name}"
            orphans.append(board_name)
            result.chat.append(ChatLine("channel", channel_old, Where(first.file), board_name, record, (), note, made=True))
        else:
            board_name = found
        for where, data in lines:
            line = _message(where, data, board_name, message_ids, decision_ids)
            if isinstance(line, Item):
                result.skipped.append(line)
            else:
                result.chat.append(line)
    if orphans:
        notes.append(
            f".moe/messages: {len(orphans)} channel(s) with messages but no channel file (a task's channel, whose file was not kept): "
            f"each becomes a custom channel named by its Moe id ({', '.join('#' + name for name in orphans[:3])}{', …' if len(orphans) > 3 else ''})"
        )
    for where, data in source.decisions:
        made = _decision(where, data, channel_of, decision_ids, scope)
        if isinstance(made, Item):
            result.skipped.append(made)
        else:
            result.chat.extend(made)


def _message(where: Where, data: Any, channel: str, message_ids: Mapping[str, str], decision_ids: Mapping[str, str]) -> ChatLine | Item:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("content"), str):
        old = str(data.get("id")) if isinstance(data, dict) and data.get("id") else f"line {where.line}"
        return Item("message", old, where, SKIP, reason="not a message (a JSON object with an id and content)", loss=True)
    old = data["id"]
    account, p = Account(), "message."
    account.mapped(f"{p}id", "sourceId", old)
    account.mapped(f"{p}content", "content", data["content"])
    if "channel" in data:
        account.mapped(f"{p}channel", "channel", data["channel"])
    sender = str(data.get("sender") or threads.HUMAN)
    account.mapped(f"{p}sender", "sender", data["sender"]) if data.get("sender") else account.mapped(f"{p}sender", "sender", reason="absent: human")
    stamp = _stamp(data.get("timestamp"))
    extra: dict[str, Any] = {}
    if stamp is None:
        return Item("message", old, where, SKIP, reason=f"timestamp {data.get('timestamp')!r} is not a time", loss=True)
    account.mapped(f"{p}timestamp", "timestamp", data["timestamp"])
    reply = data.get("replyTo")
    reply_to = None
    if isinstance(reply, str) and reply:
        reply_to = message_ids.get(reply, reply)
        account.mapped(f"{p}replyTo", "replyTo" if reply in message_ids else "replyTo (as written: no such message)", reply)
    elif "replyTo" in data:
        account.empty(f"{p}replyTo")
    mentions = data.get("mentions")
    if isinstance(mentions, list) and all(isinstance(m, str) for m in mentions):
        account.mapped(f"{p}mentions", "mentions", mentions) if mentions else account.empty(f"{p}mentions")
    else:
        mentions = list(threads.mentions_in(data["content"]))
        if "mentions" in data:
            account.kept(f"{p}mentions", data["mentions"], home="sourceFields.mentions", reason="not a list of names")
            extra["mentions"] = data["mentions"]
    decision = data.get("decisionId")
    if isinstance(decision, str) and decision:
        account.mapped(f"{p}decisionId", "decisionId", decision)
    rest = {key: value for key, value in data.items() if key not in ("id", "content", "channel", "sender", "timestamp", "replyTo", "mentions", "decisionId")}
    for key, value in rest.items():
        if is_empty(value):
            account.empty(f"{p}{key}")
        else:
            account.kept(f"{p}{key}", value, home=f"sourceFields.{key}")
            extra[key] = value
    record: dict[str, Any] = {
        "id": message_ids[old],
        "channel": channel,
        "sender": sender,
        "content": data["content"],
        "replyTo": reply_to,
        "mentions": list(mentions),
    }
    if isinstance(decision, str) and decision:
        record["decisionId"] = decision_ids.get(decision, decision)
    record["timestamp"] = stamp
    record["sourceId"] = old
    if extra:
        record["sourceFields"] = extra
    return ChatLine("message", old, where, channel, record, account.done())


def _decision(where: Where, data: Any, channel_of: Mapping[str, str], decision_ids: Mapping[str, str], scope: str) -> list[ChatLine] | Item:
    """A Moe decision as the board writes one: a `decision` line, and a `verdict` line once a
    human approved or rejected it."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("content"), str):
        old = str(data.get("id")) if isinstance(data, dict) and data.get("id") else where.file.rsplit("/", 1)[-1]
        return Item("decision", old, where, SKIP, reason="not a decision (a JSON object with an id and content); Moe skips such a file too", loss=True)
    old = data["id"]
    account, p = Account(), "decision."
    account.mapped(f"{p}id", "sourceId", old)
    account.mapped(f"{p}content", "content", data["content"])
    channel_old = data.get("channel")
    channel = channel_of.get(str(channel_old), "general") if channel_old else "general"
    account.mapped(f"{p}channel", "channel", channel_old) if channel_old else account.mapped(f"{p}channel", "channel", reason="absent: #general")
    sender = str(data.get("proposedBy") or threads.HUMAN)
    if "proposedBy" in data:
        account.mapped(f"{p}proposedBy", "sender", data["proposedBy"])
    stamp = _stamp(data.get("createdAt")) or "1970-01-01T00:00:00.000Z"
    if "createdAt" in data:
        account.mapped(f"{p}createdAt", "timestamp", data["createdAt"])
    if "messageId" in data:
        account.empty(f"{p}messageId") if is_empty(data["messageId"]) else account.mapped(
            f"{p}messageId", "the announcing message's decisionId", data["messageId"]
        )
    lines = [
        ChatLine(
            "decision",
            old,
            where,
            channel,
            {
                "id": decision_ids[old],
                "kind": "decision",
                "channel": channel,
                "sender": sender,
                "content": data["content"],
                "timestamp": stamp,
                "sourceId": old,
            },
            (),
        )
    ]
    status = str(data.get("status") or "proposed").lower()
    account.mapped(f"{p}status", "a verdict line" if status in _DECISION_VERDICTS else "status (proposed)", data.get("status"))
    if status in _DECISION_VERDICTS:
        when = _stamp(data.get("resolvedAt")) or stamp
        by = str(data.get("approvedBy") or threads.HUMAN)
        for key, home in (("approvedBy", "the verdict's sender"), ("resolvedAt", "the verdict's timestamp")):
            if key in data:
                account.empty(f"{p}{key}") if is_empty(data[key]) else account.mapped(f"{p}{key}", home, data[key])
        lines.append(
            ChatLine(
                "verdict",
                f"{old}:verdict",
                where,
                channel,
                {
                    "id": derived_id("VERDICT", scope, "verdict", old, day_of(when, "20000101")),
                    "kind": "verdict",
                    "channel": channel,
                    "sender": by,
                    "target": decision_ids[old],
                    "status": _DECISION_VERDICTS[status],
                    "timestamp": when,
                },
                (),
                made=True,
            )
        )
    extra: dict[str, Any] = {}
    account_rest(account, data, extra, prefix=p)
    if extra:
        lines[0].record["sourceFields"] = extra
    lines[0] = replace(lines[0], fates=account.done())
    return lines


def _event_id(scope: str, old: str, stamp: str) -> str:
    """`EVT-<ULID>` for an imported event: its time, and bits drawn from where it came from,
    so two clones that migrate the same log write the same lines (git's union merge then keeps
    one copy of each)."""
    seconds = int(_epoch(stamp))
    number = (seconds * 1000) << 80 | int.from_bytes(hashlib.blake2b(f"{scope}\0event\0{old}".encode(), digest_size=10).digest(), "big")
    chars = "".join(CROCKFORD[(number >> shift) & 31] for shift in range(125, -1, -5))
    return "EVT-" + chars.upper()


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

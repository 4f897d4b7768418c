"""Moe's `.moe/` folder (project, epics, tasks, workers, teams, rail proposals, activity log)
planned as board files. Core layer (pure: parsed JSON in, candidates out).

Statuses, plan steps and their times, definitions of done, rails, reopen counts and the
timestamps of each move carry over to the board's own keys; what the board has no key for
(branch, comments, metrics, handoffs, …) is kept under `source_fields`. Moe's ids come in two
shapes (8 hex characters in early boards, 32 since, after the short ones collided); both are
old ids like any other, and every reference between items (epic, parent, dependencies,
proposals' tasks, events) is rewritten to the new ids.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from moss_files.board import files as board_files
from moss_files.board.model import (
    APPROVAL_MODES,
    EPIC_STATUSES,
    PROPOSAL_SCOPES,
    PROPOSAL_STATUSES,
    PROPOSAL_TYPES,
    ROLES,
    STATUSES,
    STEP_STATUSES,
    STORED_WORKER_STATUSES,
    Epic,
    Project,
    Proposal,
    Rails,
    Settings,
    Step,
    Task,
    Team,
    Worker,
    is_valid_name,
)
from moss_files.foundation.ids import CROCKFORD
from moss_files.migrate import tasks as board_items
from moss_files.migrate.model import SKIP, Candidate, Item, Where, day_of, derived_id, iso_time, source_error, with_provenance

SYSTEM = "moe"
KINDS = ("epic", "task", "worker", "team", "proposal")
_SHORT_ID = re.compile(r"^[a-z]+-[0-9a-f]{8}$")
_LONG_ID = re.compile(r"^[a-z]+-[0-9a-f]{32}$")
# Fields the board stores under its own keys; everything else of a task is a leftover.
_TASK_MAPPED = {
    "id", "epicId", "title", "description", "definitionOfDone", "taskRails", "implementationPlan", "status", "assignedWorkerId",
    "prLink", "reopenCount", "reopenReason", "createdBy", "parentTaskId", "priority", "order", "createdAt", "updatedAt", "dependsOn",
    "testFile", "reviewSummary", "planSubmittedAt", "planApprovedAt", "workStartedAt", "reviewStartedAt", "completedAt",
}  # fmt: skip
_STEP_MAPPED = {"stepId", "description", "status", "affectedFiles", "modifiedFiles", "note", "startedAt", "completedAt"}


@dataclass(frozen=True, slots=True)
class Source:
    """A `.moe/` folder as read: each entity file's parsed JSON with where it is."""

    project: tuple[Where, Any] | None = None
    entities: Mapping[str, Sequence[tuple[Where, Any]]] = field(default_factory=dict)  # kind -> files
    activity: Sequence[tuple[Where, Any]] = ()
    not_imported: Mapping[str, int] = field(default_factory=dict)  # folder -> files left alone


@dataclass(frozen=True, slots=True)
class Result:
    """What the planner made of a `.moe/` folder."""

    candidates: list[Candidate]
    events: list[tuple[Where, str, dict[str, Any]]]  # (where, old event id, the board's event line)
    project: Candidate | None
    skipped: list[Item]
    notes: list[str]
    version: str


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

    def leftovers(self, mapped: set[str]) -> dict[str, Any]:
        return {key: value for key, value in self.data.items() if key not in mapped}


def id_shapes(ids: Sequence[str]) -> str:
    """How many ids have each of Moe's shapes, for the report."""
    short = sum(1 for item in ids if _SHORT_ID.match(item))
    long = sum(1 for item in ids if _LONG_ID.match(item))
    other = len(ids) - short - long
    return f"ids: {short} of 8 hex characters, {long} of 32" + (f", {other} of other shapes" if other else "")


def plan(
    source: Source,
    *,
    scope: str,
    imported: Mapping[tuple[str, str], str],
    project: Project | None,
    today: str,
    now: str,
) -> Result:
    """Candidates for every Moe entity, event lines for the activity log, and `project.md` when
    the board has none (`project` is the board's project when its file exists).

    Raises SOURCE_INVALID naming the file and JSON path of the first entity that is not what
    Moe writes (an id missing, a list where text belongs, a time that is not one).
    """
    notes: list[str] = []
    version = "unknown schema version"
    imported_from = f"{SYSTEM}:{scope}" if scope != SYSTEM else SYSTEM
    moe_project: _Reader | None = None
    if source.project is not None:
        moe_project = _Reader(source.project[1], source.project[0], "project.json")
        schema = moe_project.data.get("schemaVersion")
        version = f"schemaVersion {schema}" if schema is not None else "schemaVersion 1 (no schemaVersion key)"

    readers: dict[str, list[_Reader]] = {}
    for kind in KINDS:
        readers[kind] = [_Reader(data, where, f"{kind} file") for where, data in source.entities.get(kind, ())]
        for reader in readers[kind]:
            reader.text("id", required=True)

    # New ids first, so that every reference can be rewritten, including references to items
    # a previous run imported.
    new_ids: dict[tuple[str, str], str] = {}
    for kind in ("epic", "task", "team", "proposal"):
        for reader in readers[kind]:
            old = str(reader.text("id"))
            previous = imported.get((kind, old))
            created = reader.time("createdAt")
            new_ids[(kind, old)] = _stem(previous) if previous else board_items.new_board_id(kind, scope, old, created, today)
    for reader in readers["worker"]:
        old = str(reader.text("id"))
        if not is_valid_name(old):
            raise source_error(f"worker id {old!r} cannot be a board worker name (letters, digits, '.', '_', '-')", reader.at("id"))
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

    candidates: list[Candidate] = []
    fallback_epic: Epic | None = None
    for reader in readers["epic"]:
        candidates.append(_epic(reader, new_ids, imported_from))
    for reader in readers["task"]:
        epic_old = reader.text("epicId")
        if epic_old is None or ("epic", epic_old) not in new_ids:
            if fallback_epic is None:
                fallback_epic = board_items.imported_epic(scope, "Moe", "Moe tasks without an epic", None, today)
                fallback_epic = replace(fallback_epic, id=new_ids.get(("epic", f"{SYSTEM}:tasks"), fallback_epic.id))
            epic_id = fallback_epic.id
            notes.append(f"{reader.where}: task {reader.text('id')} has no epic in the source; it goes to {epic_id!r}")
        else:
            epic_id = new_ids[("epic", epic_old)]
        candidates.append(_task(reader, epic_id, new_ids, ref, imported_from, notes))
    if fallback_epic is not None:
        candidates.append(
            board_items.candidate("epic", fallback_epic, f"{SYSTEM}:tasks", Where(source.project[0].file if source.project else ".moe"), imported_from)
        )
    for reader in readers["worker"]:
        candidates.append(_worker(reader, imported_from))
    for reader in readers["team"]:
        candidates.append(_team(reader, new_ids, ref, imported_from, notes))
    for reader in readers["proposal"]:
        candidates.append(_proposal(reader, new_ids, ref, imported_from))

    created = moe_project.time("createdAt") if moe_project is not None else None
    project_id = project.id if project is not None else derived_id("PROJ", scope, "project", scope, day_of(created, today))
    project_candidate = None
    skipped: list[Item] = []
    if moe_project is not None:
        moe_id = str(moe_project.text("id") or "project")
        if project is None or ("project", moe_id) in imported:
            project_candidate = _project(moe_project, project_id, imported_from)
        else:
            reason = "the board has a project.md of its own; Moe's rails and settings are not merged into it"
            skipped.append(Item("project", moe_id, moe_project.where, SKIP, f"{board_items.BOARD}/project.md", reason=reason))

    events: list[tuple[Where, str, dict[str, Any]]] = []
    for where, data in source.activity:
        reader = _Reader(data, where, "an activity record")
        old = str(reader.text("id", required=True))
        stamp = reader.time("timestamp") or now
        name = reader.text("event", required=True)
        payload = data.get("payload")
        if payload is not None and not isinstance(payload, dict):
            raise source_error("payload must be a JSON object", reader.at("payload"))
        record: dict[str, Any] = {"id": _event_id(scope, str(old), stamp), "timestamp": stamp, "projectId": project_id}
        for key, kind in (("epicId", "epic"), ("taskId", "task"), ("workerId", "worker")):
            value = reader.text(key)
            if value is not None:
                record[key] = new_ids.get((kind, value), value)
        record["event"] = name
        record["payload"] = {**(payload or {}), "imported_from": imported_from, "source_id": old}
        events.append((where, str(old), record))

    ids = [str(reader.text("id")) for kind in KINDS for reader in readers[kind] if kind != "worker"]
    notes.append(id_shapes(ids))
    for folder, count in sorted(source.not_imported.items()):
        notes.append(f".moe/{folder}: {count} file(s) not imported (the board has no such kind; they stay in .moe/)")
    return Result(candidates, events, project_candidate, skipped, notes, version)


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def _epic(reader: _Reader, new_ids: Mapping[tuple[str, str], str], imported_from: str) -> Candidate:
    old = str(reader.text("id"))
    status = (reader.text("status") or "PLANNED").upper()
    note = None
    if status not in EPIC_STATUSES:
        note = f"status {status} read as PLANNED"
        status = "PLANNED"
    epic = Epic(
        id=new_ids[("epic", old)],
        title=" ".join((reader.text("title", required=True) or "").split()),
        description=(reader.text("description") or "").strip(),
        status=status,
        order=reader.number("order"),
        epic_rails=reader.texts("epicRails"),
        architecture_notes=reader.text("architectureNotes"),
        created=reader.time("createdAt"),
        updated=reader.time("updatedAt"),
    )
    mapped = {"id", "title", "description", "status", "order", "epicRails", "architectureNotes", "createdAt", "updatedAt"}
    return board_items.candidate("epic", epic, old, reader.where, imported_from, reader.leftovers(mapped), note)


def _task(reader: _Reader, epic_id: str, new_ids: Mapping[tuple[str, str], str], ref: Any, imported_from: str, notes: list[str]) -> Candidate:
    old = str(reader.text("id"))
    raw_status = (reader.text("status") or "BACKLOG").upper()
    status, note = raw_status, None
    if raw_status not in STATUSES:
        # Moe's later BLOCKED column: the board keeps blocking on the worker, so the task goes
        # back to the column it was blocked from.
        previous = (reader.text("blockedFromStatus") or "BACKLOG").upper()
        status = previous if previous in STATUSES else "BACKLOG"
        note = f"status {raw_status} read as {status}"
    rank, priority_note = board_items.priority(reader.text("priority"))
    steps = _steps(reader)
    metrics_value = reader.data.get("metrics")
    metrics: dict[str, Any] = metrics_value if isinstance(metrics_value, dict) else {}
    depends = tuple(str(ref("task", dep, reader.at("dependsOn"))) for dep in reader.texts("dependsOn"))
    created_by = (reader.text("createdBy") or "HUMAN").upper()
    task = Task(
        id=new_ids[("task", old)],
        epic=epic_id,
        title=" ".join((reader.text("title", required=True) or "").split()),
        description=(reader.text("description") or "").strip(),
        status=status,
        priority=rank,
        order=reader.number("order"),
        assigned_worker=reader.text("assignedWorkerId"),
        depends_on=depends,
        parent=ref("task", reader.text("parentTaskId"), reader.at("parentTaskId")),
        definition_of_done=reader.texts("definitionOfDone"),
        task_rails=reader.texts("taskRails"),
        plan=steps,
        reopen_count=int(reader.number("reopenCount")),
        reopen_reason=reader.text("reopenReason"),
        pr_link=reader.text("prLink"),
        created_by=created_by if created_by in ("HUMAN", "WORKER") else "HUMAN",
        test_file=reader.text("testFile"),
        review_summary=reader.text("reviewSummary"),
        first_claimed=iso_time(metrics.get("firstClaimAt")),
        created=reader.time("createdAt"),
        updated=reader.time("updatedAt"),
        plan_submitted=reader.time("planSubmittedAt"),
        plan_approved=reader.time("planApprovedAt"),
        work_started=reader.time("workStartedAt"),
        review_started=reader.time("reviewStartedAt"),
        completed=reader.time("completedAt"),
    )
    leftovers = reader.leftovers(_TASK_MAPPED)
    step_extras = {step.get("stepId", str(index)): {k: v for k, v in step.items() if k not in _STEP_MAPPED} for index, step in enumerate(_raw_steps(reader))}
    step_extras = {key: value for key, value in step_extras.items() if value}
    if step_extras:
        leftovers["implementationPlan"] = step_extras
    joined = "; ".join(part for part in (note, priority_note) if part) or None
    return board_items.candidate("task", task, old, reader.where, imported_from, leftovers, joined)


def _raw_steps(reader: _Reader) -> list[dict[str, Any]]:
    value = reader.data.get("implementationPlan")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(step, dict) for step in value):
        raise source_error("implementationPlan must be a list of objects", reader.at("implementationPlan"))
    return value


def _steps(reader: _Reader) -> tuple[Step, ...]:
    steps: list[Step] = []
    for index, data in enumerate(_raw_steps(reader)):
        step = _Reader(data, reader.at(f"implementationPlan[{index}]"), "a plan step")
        status = (step.text("status") or "PENDING").upper().replace(" ", "_")
        steps.append(
            Step(
                id=step.text("stepId") or f"step-{index + 1}",
                description=step.text("description") or "",
                status=status if status in STEP_STATUSES else "PENDING",
                affected_files=step.texts("affectedFiles"),
                modified_files=step.texts("modifiedFiles"),
                note=step.text("note"),
                started=step.time("startedAt"),
                completed=step.time("completedAt"),
            )
        )
    return tuple(steps)


def _worker(reader: _Reader, imported_from: str) -> Candidate:
    old = str(reader.text("id"))
    status = (reader.text("status") or "").upper()
    worker = Worker(
        id=old,
        status=status if status in STORED_WORKER_STATUSES else None,
        blocked_reason=reader.text("lastError") if status == "BLOCKED" else None,
        blocked_task=reader.text("currentTaskId") if status == "BLOCKED" else None,
        created=reader.time("startedAt") or reader.time("createdAt"),
        updated=reader.time("lastActivityAt") or reader.time("updatedAt"),
    )
    mapped = {"id", "startedAt", "createdAt", "lastActivityAt", "updatedAt"}
    return board_items.candidate("worker", worker, old, reader.where, imported_from, reader.leftovers(mapped))


def _team(reader: _Reader, new_ids: Mapping[tuple[str, str], str], ref: Any, imported_from: str, notes: list[str]) -> Candidate:
    old = str(reader.text("id"))
    role = (reader.text("role") or "").lower() or None
    note = None
    if role is not None and role not in ROLES:
        note = f"role {role} has no board equivalent; the team has no role"
        role = None
    team = Team(
        id=new_ids[("team", old)],
        name=reader.text("name", required=True) or old,
        role=role,
        max_size=int(reader.number("maxSize", 10)),
        members=tuple(str(ref("worker", member, reader.at("memberIds"))) for member in reader.texts("memberIds")),
        created=reader.time("createdAt"),
        updated=reader.time("updatedAt"),
    )
    mapped = {"id", "name", "role", "maxSize", "memberIds", "createdAt", "updatedAt"}
    fields = reader.leftovers(mapped)
    if note:
        fields["role"] = reader.text("role")
    return board_items.candidate("team", team, old, reader.where, imported_from, fields, note)


def _proposal(reader: _Reader, new_ids: Mapping[tuple[str, str], str], ref: Any, imported_from: str) -> Candidate:
    old = str(reader.text("id"))

    def choice(key: str, allowed: Sequence[str], default: str) -> str:
        value = (reader.text(key) or default).upper()
        if value not in allowed:
            raise source_error(f"{key} {value!r} is not one of {', '.join(allowed)}", reader.at(key))
        return value

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
        resolved=reader.time("resolvedAt"),
        created=reader.time("createdAt"),
    )
    mapped = {
        "id",
        "taskId",
        "workerId",
        "proposalType",
        "targetScope",
        "currentValue",
        "proposedValue",
        "reason",
        "status",
        "resolvedBy",
        "resolvedAt",
        "createdAt",
    }
    return board_items.candidate("proposal", proposal, old, reader.where, imported_from, reader.leftovers(mapped))


def _project(reader: _Reader, project_id: str, imported_from: str) -> Candidate:
    rails_data = reader.data.get("globalRails") or {}
    rails = _Reader(rails_data, reader.at("globalRails"), "globalRails")
    settings_data = reader.data.get("settings") or {}
    settings = _Reader(settings_data, reader.at("settings"), "settings")
    mode = (settings.text("approvalMode") or "CONTROL").upper()
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
        ),
        exists=True,
        created=reader.time("createdAt"),
        updated=reader.time("updatedAt"),
    )
    old = str(reader.text("id") or "project")
    leftovers = reader.leftovers({"id", "name", "globalRails", "createdAt", "updatedAt"})
    leftovers["settings"] = settings.leftovers({"approvalMode", "speedModeDelayMs"})
    text = with_provenance(board_files.render_project(project), imported_from, old, {k: v for k, v in leftovers.items() if v not in (None, "", [], {})})
    return Candidate("project", old, project_id, f"{board_items.BOARD}/project.md", text.encode("utf-8"), reader.where)


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

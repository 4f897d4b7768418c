"""The board (Moe's task workflow): model, file forms, state machine, rails, claims, queries.

Core layer: pure functions over documents and values; no I/O, no clock (times come in as
RFC 3339 strings), no ids made here. One kind of task: Moe's fields (plan steps, definition of
done, rails, reopen count) merged with LoopFlow's (priority, depends_on, acceptance criteria,
test file). The task file is the truth about a task and about who holds it; a worker's status
is derived from the tasks assigned to it, except BLOCKED and DEAD, which its own file records.

Frontmatter keys are snake_case; Moe's camelCase names (and LoopFlow's) are read as aliases, in
any letter case, and an edit writes to the key the file already uses. The JSON shapes
(`task_to_dict`, ...) use Moe's camelCase names, since they are what the `moe.*` tools return.

Task states and the moves `set_task_status` allows (`TRANSITIONS`); the named operations
(submit_plan, approve, complete_task, qa_approve, qa_reject) are these same moves plus their
own checks:

    BACKLOG           -> PLANNING, WORKING, ARCHIVED
    PLANNING          -> AWAITING_APPROVAL (needs a plan), BACKLOG, ARCHIVED
    AWAITING_APPROVAL -> WORKING (an approval), PLANNING (plan rejected), BACKLOG, ARCHIVED
    WORKING           -> REVIEW (every step completed), PLANNING, BACKLOG, ARCHIVED
    REVIEW            -> DONE, WORKING, PLANNING, ARCHIVED
    DONE              -> WORKING, PLANNING (a reopen), ARCHIVED
    ARCHIVED          -> BACKLOG
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moss_files.foundation import document
from moss_files.foundation.document import Document
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError

# --------------------------------------------------------------------------- vocabulary

STATUSES = ("BACKLOG", "PLANNING", "AWAITING_APPROVAL", "WORKING", "REVIEW", "DONE", "ARCHIVED")
ACTIVE = ("PLANNING", "AWAITING_APPROVAL", "WORKING", "REVIEW")  # a task someone holds
CLAIMABLE = ("PLANNING", "WORKING", "REVIEW")  # agents claim these; the rest are human-gated
PRIORITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW")
STEP_STATUSES = ("PENDING", "IN_PROGRESS", "COMPLETED")
EPIC_STATUSES = ("PLANNED", "ACTIVE", "COMPLETED", "ARCHIVED")
WORKER_STATUSES = ("IDLE", "PLANNING", "AWAITING_APPROVAL", "CODING", "REVIEWING", "BLOCKED", "DEAD")
STORED_WORKER_STATUSES = ("BLOCKED", "DEAD")  # the only statuses a worker file holds
ROLES = ("architect", "worker", "qa")
APPROVAL_MODES = ("CONTROL", "SPEED", "TURBO")
PROPOSAL_TYPES = ("ADD_RAIL", "MODIFY_RAIL", "REMOVE_RAIL")
PROPOSAL_SCOPES = ("GLOBAL", "EPIC", "TASK")
PROPOSAL_STATUSES = ("PENDING", "APPROVED", "REJECTED")
CREATORS = ("HUMAN", "WORKER")

TRANSITIONS: Mapping[str, frozenset[str]] = {
    "BACKLOG": frozenset({"PLANNING", "WORKING", "ARCHIVED"}),
    "PLANNING": frozenset({"AWAITING_APPROVAL", "BACKLOG", "ARCHIVED"}),
    "AWAITING_APPROVAL": frozenset({"WORKING", "PLANNING", "BACKLOG", "ARCHIVED"}),
    "WORKING": frozenset({"REVIEW", "PLANNING", "BACKLOG", "ARCHIVED"}),
    "REVIEW": frozenset({"DONE", "WORKING", "PLANNING", "ARCHIVED"}),
    "DONE": frozenset({"WORKING", "PLANNING", "ARCHIVED"}),
    "ARCHIVED": frozenset({"BACKLOG"}),
}
# Moves back to an earlier working column: they say why (the reason becomes reopenReason).
_BACKWARD = frozenset({("AWAITING_APPROVAL", "PLANNING"), ("WORKING", "PLANNING"), ("REVIEW", "WORKING"),
                       ("REVIEW", "PLANNING"), ("DONE", "WORKING"), ("DONE", "PLANNING")})
# Moves that keep the task's holder: the architect who planned waits for the approval, and
# revises the plan when it is rejected. Every other move hands the task to the next column's
# role, so the holder is cleared and the task becomes claimable there.
_KEEPS_HOLDER = frozenset({("PLANNING", "AWAITING_APPROVAL"), ("AWAITING_APPROVAL", "PLANNING")})
_ROLE_OF_STATUS = {"PLANNING": "architect", "WORKING": "worker", "REVIEW": "qa"}
_WORKER_STATUS_OF_TASK = {"PLANNING": "PLANNING", "AWAITING_APPROVAL": "AWAITING_APPROVAL", "WORKING": "CODING", "REVIEW": "REVIEWING"}

_STATUS_ALIASES = {"TODO": "BACKLOG", "OPEN": "BACKLOG", "IN_PROGRESS": "WORKING", "DOING": "WORKING", "IN_REVIEW": "REVIEW",
                   "AWAITING": "AWAITING_APPROVAL", "CLOSED": "DONE", "COMPLETE": "DONE", "COMPLETED": "DONE"}
_PRIORITY_ALIASES = {"P0": "CRITICAL", "URGENT": "CRITICAL", "P1": "HIGH", "P2": "MEDIUM", "NORMAL": "MEDIUM", "P3": "LOW"}

DEFAULT_PRIORITY = "MEDIUM"
DEFAULT_MAX_REOPENS = 3
DEFAULT_SPEED_DELAY_MS = 2000
DEFAULT_TEAM_SIZE = 10
MAX_STEPS = 100
MAX_STEP_CHARS = 10_000
MAX_FILES_PER_STEP = 50

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def is_valid_name(text: str) -> bool:
    """Whether `text` can be an id (and so a file name): letters, digits, '.', '_', '-'."""
    return bool(_NAME.match(text)) and ".." not in text


def check_name(value: Any, what: str) -> str:
    """`value` as an id or worker name. Raises InvalidRequest for anything else."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{what} is required", details={"field": what})
    text = value.strip()
    if not is_valid_name(text):
        raise InvalidRequest(f"{what} {value!r} may hold only letters, digits, '.', '_' and '-' (at most 64)", details={"field": what})
    return text


def normalize_status(value: str) -> str | None:
    """A task status in canonical form (`in progress` -> WORKING), or None if unknown."""
    word = re.sub(r"[\s-]+", "_", value.strip()).upper()
    word = _STATUS_ALIASES.get(word, word)
    return word if word in STATUSES else None


def normalize_priority(value: str) -> str | None:
    """A priority in canonical form (`high`, `P1` -> HIGH), or None if unknown."""
    word = value.strip().upper()
    word = _PRIORITY_ALIASES.get(word, word)
    return word if word in PRIORITIES else None


def check_status(value: Any, what: str = "status") -> str:
    """A task status from user input. Raises InvalidRequest SCHEMA_ERROR."""
    found = normalize_status(value) if isinstance(value, str) else None
    if found is None:
        raise InvalidRequest(f"{what} {value!r} is not one of {', '.join(STATUSES)}", code="SCHEMA_ERROR", details={"field": what})
    return found


def check_priority(value: Any) -> str:
    """A priority from user input. Raises InvalidRequest SCHEMA_ERROR."""
    found = normalize_priority(value) if isinstance(value, str) else None
    if found is None:
        raise InvalidRequest(f"priority {value!r} is not one of {', '.join(PRIORITIES)}", code="SCHEMA_ERROR", details={"field": "priority"})
    return found


def check_choice(value: Any, allowed: Sequence[str], what: str, *, upper: bool = True) -> str:
    """`value` as one of `allowed` (case-insensitive). Raises InvalidRequest SCHEMA_ERROR."""
    if isinstance(value, str):
        word = value.strip().upper() if upper else value.strip().lower()
        if word in allowed:
            return word
    raise InvalidRequest(f"{what} {value!r} is not one of {', '.join(allowed)}", code="SCHEMA_ERROR", details={"field": what})


# --------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a task's implementation plan."""

    id: str
    description: str
    status: str = "PENDING"
    affected_files: tuple[str, ...] = ()
    modified_files: tuple[str, ...] = ()
    note: str | None = None
    started: str | None = None
    completed: str | None = None


@dataclass(frozen=True, slots=True)
class Task:
    """One task; `description` is the file's body."""

    id: str
    epic: str
    title: str
    description: str = ""
    status: str = "BACKLOG"
    priority: str = DEFAULT_PRIORITY
    order: int | float = 0
    assigned_worker: str | None = None
    depends_on: tuple[str, ...] = ()
    parent: str | None = None
    definition_of_done: tuple[str, ...] = ()
    task_rails: tuple[str, ...] = ()
    plan: tuple[Step, ...] = ()
    reopen_count: int = 0
    reopen_reason: str | None = None
    pr_link: str | None = None
    created_by: str = "HUMAN"
    test_file: str | None = None
    work_summary: str | None = None
    review_summary: str | None = None
    first_claimed: str | None = None
    created: str | None = None
    updated: str | None = None
    plan_submitted: str | None = None
    plan_approved: str | None = None
    work_started: str | None = None
    review_started: str | None = None
    completed: str | None = None


@dataclass(frozen=True, slots=True)
class Epic:
    """One epic; `description` is the file's body."""

    id: str
    title: str
    description: str = ""
    status: str = "PLANNED"
    order: int | float = 0
    epic_rails: tuple[str, ...] = ()
    architecture_notes: str | None = None
    created: str | None = None
    updated: str | None = None


@dataclass(frozen=True, slots=True)
class Rails:
    """The project's global rails. Forbidden patterns and required patterns are enforced on plans."""

    tech_stack: tuple[str, ...] = ()
    forbidden_patterns: tuple[str, ...] = ()
    required_patterns: tuple[str, ...] = ()
    formatting: str = ""
    testing: str = ""
    custom_rules: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Settings:
    """Board settings; keys the toolkit does not know are kept in `extra` and shown as they are."""

    approval_mode: str = "CONTROL"
    speed_mode_delay_ms: int = DEFAULT_SPEED_DELAY_MS
    max_reopens: int = DEFAULT_MAX_REOPENS
    max_team_size: int = DEFAULT_TEAM_SIZE
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Project:
    """The board's settings file (`project.md`); defaults stand in while it does not exist."""

    id: str
    name: str
    description: str = ""
    global_rails: Rails = field(default_factory=Rails)
    settings: Settings = field(default_factory=Settings)
    exists: bool = False
    created: str | None = None
    updated: str | None = None


@dataclass(frozen=True, slots=True)
class Worker:
    """A registered agent. `status` is what its file records (only BLOCKED or DEAD, or None)."""

    id: str
    type: str | None = None
    status: str | None = None
    blocked_reason: str | None = None
    needs_from: str | None = None
    blocked_task: str | None = None
    blocked_step: str | None = None
    blocked_since: str | None = None
    notes: str = ""
    created: str | None = None
    updated: str | None = None


@dataclass(frozen=True, slots=True)
class Team:
    """Agents of one role that may share an epic's column (the solo-worker rule does not bind them)."""

    id: str
    name: str
    role: str | None = None
    max_size: int = DEFAULT_TEAM_SIZE
    members: tuple[str, ...] = ()
    created: str | None = None
    updated: str | None = None


@dataclass(frozen=True, slots=True)
class Proposal:
    """A proposed change to the rails, stored for a human to review; `reason` is the body."""

    id: str
    task: str | None
    proposal_type: str
    target_scope: str
    proposed_value: str
    reason: str = ""
    current_value: str | None = None
    worker: str | None = None
    status: str = "PENDING"
    resolved_by: str | None = None
    resolved: str | None = None
    created: str | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One line of the activity log."""

    id: str
    timestamp: str
    event: str
    project: str | None = None
    epic: str | None = None
    task: str | None = None
    worker: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Board:
    """Everything on the board as read at one moment, with every file that could not be read."""

    project: Project
    epics: Mapping[str, Epic]
    tasks: Mapping[str, Task]
    workers: Mapping[str, Worker]
    teams: Mapping[str, Team]
    problems: tuple[MossError, ...] = ()

    def task(self, task_id: str) -> Task | None:
        return self.tasks.get(task_id)

    def active_task_of(self, worker_id: str) -> Task | None:
        """The task `worker_id` holds (the first by rank when a hand edit gave it several)."""
        held = [task for task in self.tasks.values() if task.assigned_worker == worker_id and task.status in ACTIVE]
        return min(held, key=lambda t: rank_key(t, self.epics)) if held else None

    def teammates(self, worker_id: str) -> frozenset[str]:
        """Every worker sharing a team with `worker_id` (itself included when in a team)."""
        mates: set[str] = set()
        for team in self.teams.values():
            if worker_id in team.members:
                mates.update(team.members)
        return frozenset(mates)


# --------------------------------------------------------------------------- reading files


class _Fields:
    """Typed access to frontmatter keys by canonical name, aliases and any letter case;
    a wrong shape raises InvalidDocument SCHEMA_ERROR at the key's line."""

    def __init__(self, doc: Document, path: Path | str | None, aliases: Mapping[str, tuple[str, ...]]) -> None:
        self.doc = doc
        self.meta = doc.meta
        self.path = path
        self.aliases = aliases
        # One pass over the keys instead of a case-insensitive scan per field and alias: the
        # scans were half the cost of reading a big board.
        self.folded: dict[str, str] = {}
        for key in self.meta:
            if isinstance(key, str):
                self.folded.setdefault(key.lower(), key)

    def key(self, name: str) -> str | None:
        for candidate in (name, *self.aliases.get(name, ())):
            if candidate in self.meta:
                return candidate
            found = self.folded.get(candidate.lower())
            if found is not None:
                return found
        return None

    def raw(self, name: str) -> tuple[str | None, Any]:
        key = self.key(name)
        return key, (self.meta[key] if key is not None else None)

    def error(self, key: str | None, message: str) -> InvalidDocument:
        return InvalidDocument(message, code="SCHEMA_ERROR", path=self.path, line=key_line(self.doc, key))

    def text(self, name: str, *, default: str | None = None) -> str | None:
        key, value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(key, f"{name!r} must be text, not {_type_name(value)}")
        text = str(value)
        return text if text.strip() else default

    def items(self, name: str) -> tuple[str, ...]:
        key, value = self.raw(name)
        if value is None:
            return ()
        if isinstance(value, str):
            return (value.strip(),) if value.strip() else ()
        if not isinstance(value, list) or any(isinstance(item, bool) or not isinstance(item, str | int | float) for item in value):
            raise self.error(key, f"{name!r} must be a list of texts")
        return tuple(str(item).strip() for item in value if str(item).strip())

    def names(self, name: str) -> tuple[str, ...]:
        key, value = self.raw(name)
        if isinstance(value, str):
            # `depends_on: A, B` by hand reads as two ids.
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return self.items(name)

    def number(self, name: str, *, default: int | float = 0, minimum: int | None = None, integer: bool = False) -> int | float:
        key, value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            raise self.error(key, f"{name!r} must be {'a whole number' if integer else 'a number'}, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{name!r} must be at least {minimum}")
        return value

    def choice(self, name: str, normalize: Callable[[str], str | None], allowed: Sequence[str], default: str) -> str:
        key, value = self.raw(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return default
        found = normalize(value) if isinstance(value, str) else None
        if found is None:
            raise self.error(key, f"{name} {value!r} is not one of {', '.join(allowed)}")
        return found

    def mapping(self, name: str) -> tuple[str | None, Mapping[str, Any]]:
        key, value = self.raw(name)
        if value is None:
            return key, {}
        if not isinstance(value, dict):
            raise self.error(key, f"{name!r} must be a mapping of keys to values")
        return key, value


def key_line(doc: Document, key: str | None) -> int | None:
    """The 1-based file line of a top-level frontmatter key (None when absent)."""
    if key is None or not doc.has_frontmatter:
        return None
    pattern = re.compile(rf"^['\"]?{re.escape(key)}['\"]?[ \t]*:")
    for number, line in enumerate(doc.frontmatter_text.split("\n"), start=2):
        if pattern.match(line):
            return number
    return None


def _type_name(value: Any) -> str:
    return {list: "a list", dict: "a mapping", bool: "true/false"}.get(type(value), type(value).__name__)


def _check_id(fields: _Fields, fallback_id: str, what: str) -> str:
    """The file's id: its stem. A frontmatter `id` must agree, so a copied file that kept
    its original's id is reported instead of shadowing that task."""
    written = fields.text("id")
    if written is not None and written.strip() != fallback_id:
        raise fields.error(fields.key("id"), f"{what} id {written.strip()!r} does not match the file name {fallback_id!r}")
    return fallback_id


def _body_text(doc: Document) -> str:
    """The description a body holds: its text without the blank lines around it."""
    return doc.body.strip("\n").rstrip()


TASK_ALIASES: Mapping[str, tuple[str, ...]] = {
    "epic": ("epic_id", "epicId"),
    "assigned_worker": ("assigned_worker_id", "assignedWorkerId", "assignee", "worker"),
    "depends_on": ("dependsOn", "depends", "dependencies"),
    "definition_of_done": ("definitionOfDone", "acceptance_criteria", "acceptanceCriteria", "dod"),
    "task_rails": ("taskRails", "rails"),
    "plan": ("implementationPlan", "implementation_plan", "steps"),
    "reopen_count": ("reopenCount",),
    "reopen_reason": ("reopenReason",),
    "pr_link": ("prLink", "pr"),
    "parent": ("parent_task", "parentTaskId", "parent_task_id"),
    "created_by": ("createdBy",),
    "test_file": ("testFile",),
    "work_summary": ("workSummary",),
    "review_summary": ("reviewSummary",),
    "first_claimed": ("firstClaimAt", "first_claimed_at"),
    "created": ("created_at", "createdAt"),
    "updated": ("updated_at", "updatedAt"),
    "plan_submitted": ("planSubmittedAt", "plan_submitted_at"),
    "plan_approved": ("planApprovedAt", "plan_approved_at"),
    "work_started": ("workStartedAt", "work_started_at"),
    "review_started": ("reviewStartedAt", "review_started_at"),
    "completed": ("completedAt", "completed_at"),
}
_STEP_ALIASES: Mapping[str, tuple[str, ...]] = {
    "id": ("stepId", "step_id"),
    "affected_files": ("affectedFiles", "files"),
    "modified_files": ("modifiedFiles",),
    "started": ("startedAt", "started_at"),
    "completed": ("completedAt", "completed_at"),
}


def parse_task(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Task:
    """A Task from a parsed document whose file stem is `fallback_id`.

    Raises InvalidDocument SCHEMA_ERROR (with the key's line) for a wrong shape or value.
    """
    fields = _Fields(doc, path, TASK_ALIASES)
    task_id = _check_id(fields, fallback_id, "task")
    description = _body_text(doc) or (fields.text("description") or "").strip()
    title = fields.text("title")
    if title is None:
        raise fields.error(None, "task has no title") if fields.key("title") is None else fields.error(fields.key("title"), "task title is empty")
    return Task(
        id=task_id,
        epic=(fields.text("epic") or "").strip(),
        title=" ".join(title.split()),
        description=description,
        status=fields.choice("status", normalize_status, STATUSES, "BACKLOG"),
        priority=fields.choice("priority", normalize_priority, PRIORITIES, DEFAULT_PRIORITY),
        order=fields.number("order"),
        assigned_worker=_stripped(fields.text("assigned_worker")),
        depends_on=fields.names("depends_on"),
        parent=_stripped(fields.text("parent")),
        definition_of_done=fields.items("definition_of_done"),
        task_rails=fields.items("task_rails"),
        plan=_parse_plan(fields),
        reopen_count=int(fields.number("reopen_count", minimum=0, integer=True)),
        reopen_reason=fields.text("reopen_reason"),
        pr_link=_stripped(fields.text("pr_link")),
        created_by=fields.choice("created_by", lambda v: v.strip().upper() if v.strip().upper() in CREATORS else None, CREATORS, "HUMAN"),
        test_file=_stripped(fields.text("test_file")),
        work_summary=fields.text("work_summary"),
        review_summary=fields.text("review_summary"),
        first_claimed=fields.text("first_claimed"),
        created=fields.text("created"),
        updated=fields.text("updated"),
        plan_submitted=fields.text("plan_submitted"),
        plan_approved=fields.text("plan_approved"),
        work_started=fields.text("work_started"),
        review_started=fields.text("review_started"),
        completed=fields.text("completed"),
    )


def _stripped(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


def _parse_plan(fields: _Fields) -> tuple[Step, ...]:
    key, value = fields.raw("plan")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise fields.error(key, "'plan' must be a list of steps")
    steps: list[Step] = []
    seen: set[str] = set()
    for index, item in enumerate(value, start=1):
        if isinstance(item, str):
            item = {"description": item}
        if not isinstance(item, dict):
            raise fields.error(key, f"plan step {index} must be a mapping with a description")
        sub = _Fields(Document(meta=item, body="", text=""), fields.path, _STEP_ALIASES)
        try:
            step_id = (sub.text("id") or f"step-{index}").strip()
            description = sub.text("description")
            if description is None:
                raise InvalidDocument(f"plan step {index} has no description", code="SCHEMA_ERROR")
            step = Step(
                id=step_id,
                description=description,
                status=sub.choice("status", lambda v: v.strip().upper().replace(" ", "_") if v.strip().upper().replace(" ", "_") in STEP_STATUSES else None, STEP_STATUSES, "PENDING"),
                affected_files=sub.items("affected_files"),
                modified_files=sub.items("modified_files"),
                note=sub.text("note"),
                started=sub.text("started"),
                completed=sub.text("completed"),
            )
        except InvalidDocument as err:
            # The step's own keys have no file line of their own here; point at `plan:`.
            raise fields.error(key, f"plan step {index}: {err.message}") from None
        if step.id in seen:
            raise fields.error(key, f"plan step id {step.id!r} appears twice")
        seen.add(step.id)
        steps.append(step)
    return tuple(steps)


EPIC_ALIASES: Mapping[str, tuple[str, ...]] = {
    "epic_rails": ("epicRails", "rails"),
    "architecture_notes": ("architectureNotes",),
    "created": ("created_at", "createdAt"),
    "updated": ("updated_at", "updatedAt"),
}


def _epic_status(value: str) -> str | None:
    word = value.strip().upper()
    return word if word in EPIC_STATUSES else None


def parse_epic(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Epic:
    """An Epic from a parsed document. Raises InvalidDocument SCHEMA_ERROR."""
    fields = _Fields(doc, path, EPIC_ALIASES)
    epic_id = _check_id(fields, fallback_id, "epic")
    title = fields.text("title")
    if title is None:
        raise fields.error(fields.key("title"), "epic has no title")
    return Epic(
        id=epic_id,
        title=" ".join(title.split()),
        description=_body_text(doc) or (fields.text("description") or "").strip(),
        status=fields.choice("status", _epic_status, EPIC_STATUSES, "PLANNED"),
        order=fields.number("order"),
        epic_rails=fields.items("epic_rails"),
        architecture_notes=fields.text("architecture_notes"),
        created=fields.text("created"),
        updated=fields.text("updated"),
    )


_RAIL_KEYS = {"tech_stack": ("techStack",), "forbidden_patterns": ("forbiddenPatterns",), "required_patterns": ("requiredPatterns",),
              "custom_rules": ("customRules",), "formatting": (), "testing": ()}
_SETTING_KEYS = {"approval_mode": ("approvalMode",), "speed_mode_delay_ms": ("speedModeDelayMs",), "max_reopens": ("maxReopens",),
                 "max_team_size": ("maxTeamSize",)}
PROJECT_ALIASES: Mapping[str, tuple[str, ...]] = {
    "global_rails": ("globalRails", "rails"),
    "created": ("created_at", "createdAt"),
    "updated": ("updated_at", "updatedAt"),
}


def parse_project(doc: Document, path: Path | str | None = None, *, default_name: str) -> Project:
    """The Project from `project.md`. Raises InvalidDocument SCHEMA_ERROR."""
    fields = _Fields(doc, path, PROJECT_ALIASES)
    rails_key, rails_map = fields.mapping("global_rails")
    rails_fields = _Fields(Document(meta=dict(rails_map), body="", text=""), path, _RAIL_KEYS)
    settings_key, settings_map = fields.mapping("settings")
    settings_fields = _Fields(Document(meta=dict(settings_map), body="", text=""), path, _SETTING_KEYS)
    try:
        rails = Rails(
            tech_stack=rails_fields.items("tech_stack"),
            forbidden_patterns=rails_fields.items("forbidden_patterns"),
            required_patterns=rails_fields.items("required_patterns"),
            formatting=rails_fields.text("formatting") or "",
            testing=rails_fields.text("testing") or "",
            custom_rules=rails_fields.items("custom_rules"),
        )
    except InvalidDocument as err:
        raise fields.error(rails_key, f"global_rails: {err.message}") from None
    try:
        known = {settings_fields.key(name) for name in _SETTING_KEYS}
        settings = Settings(
            approval_mode=settings_fields.choice("approval_mode", lambda v: v.strip().upper() if v.strip().upper() in APPROVAL_MODES else None, APPROVAL_MODES, "CONTROL"),
            speed_mode_delay_ms=int(settings_fields.number("speed_mode_delay_ms", default=DEFAULT_SPEED_DELAY_MS, minimum=0, integer=True)),
            max_reopens=int(settings_fields.number("max_reopens", default=DEFAULT_MAX_REOPENS, minimum=1, integer=True)),
            max_team_size=int(settings_fields.number("max_team_size", default=DEFAULT_TEAM_SIZE, minimum=1, integer=True)),
            extra={key: value for key, value in settings_map.items() if key not in known},
        )
    except InvalidDocument as err:
        raise fields.error(settings_key, f"settings: {err.message}") from None
    name = fields.text("name") or default_name
    return Project(
        id=(fields.text("id") or default_project_id(name)).strip(),
        name=name,
        description=_body_text(doc),
        global_rails=rails,
        settings=settings,
        exists=True,
        created=fields.text("created"),
        updated=fields.text("updated"),
    )


def default_project_id(name: str) -> str:
    """The id a board without `project.md` goes by: `PROJ-` and its folder's name."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "board"
    return f"PROJ-{slug}"


def default_project(name: str) -> Project:
    """The settings of a board that has no `project.md` (yet)."""
    return Project(id=default_project_id(name), name=name)


WORKER_ALIASES: Mapping[str, tuple[str, ...]] = {
    "type": ("role",),
    "blocked_reason": ("blockedReason", "last_error", "lastError"),
    "needs_from": ("needsFrom",),
    "blocked_task": ("blockedTask",),
    "blocked_step": ("blockedStep", "currentStepId"),
    "blocked_since": ("blockedSince", "blocked_at"),
    "created": ("created_at", "createdAt"),
    "updated": ("updated_at", "updatedAt"),
}


def _stored_worker_status(value: str) -> str | None:
    word = value.strip().upper()
    return word if word in WORKER_STATUSES else None


def parse_worker(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Worker:
    """A Worker from a parsed document. Raises InvalidDocument SCHEMA_ERROR."""
    fields = _Fields(doc, path, WORKER_ALIASES)
    worker_id = _check_id(fields, fallback_id, "worker")
    status = fields.choice("status", _stored_worker_status, WORKER_STATUSES, "IDLE")
    return Worker(
        id=worker_id,
        type=_stripped(fields.text("type")),
        # Derived statuses written by hand (IDLE, CODING, ...) carry no information of their own.
        status=status if status in STORED_WORKER_STATUSES else None,
        blocked_reason=fields.text("blocked_reason"),
        needs_from=fields.text("needs_from"),
        blocked_task=_stripped(fields.text("blocked_task")),
        blocked_step=_stripped(fields.text("blocked_step")),
        blocked_since=fields.text("blocked_since"),
        notes=_body_text(doc),
        created=fields.text("created"),
        updated=fields.text("updated"),
    )


TEAM_ALIASES: Mapping[str, tuple[str, ...]] = {
    "max_size": ("maxSize",),
    "members": ("memberIds", "member_ids"),
    "created": ("created_at", "createdAt"),
    "updated": ("updated_at", "updatedAt"),
}


def _role(value: str) -> str | None:
    word = value.strip().lower()
    return word if word in ROLES else None


def parse_team(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Team:
    """A Team from a parsed document. Raises InvalidDocument SCHEMA_ERROR."""
    fields = _Fields(doc, path, TEAM_ALIASES)
    team_id = _check_id(fields, fallback_id, "team")
    name = fields.text("name")
    if name is None:
        raise fields.error(fields.key("name"), "team has no name")
    role_key, role_value = fields.raw("role")
    role = None
    if role_value is not None and str(role_value).strip():
        role = _role(str(role_value))
        if role is None:
            raise fields.error(role_key, f"role {role_value!r} is not one of {', '.join(ROLES)}")
    return Team(
        id=team_id,
        name=name.strip(),
        role=role,
        max_size=int(fields.number("max_size", default=DEFAULT_TEAM_SIZE, minimum=1, integer=True)),
        members=tuple(dict.fromkeys(fields.names("members"))),
        created=fields.text("created"),
        updated=fields.text("updated"),
    )


PROPOSAL_ALIASES: Mapping[str, tuple[str, ...]] = {
    "task": ("taskId",),
    "worker": ("workerId",),
    "proposal_type": ("proposalType", "type"),
    "target_scope": ("targetScope", "scope"),
    "current_value": ("currentValue",),
    "proposed_value": ("proposedValue",),
    "resolved_by": ("resolvedBy",),
    "resolved": ("resolvedAt", "resolved_at"),
    "created": ("created_at", "createdAt"),
}


def parse_proposal(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Proposal:
    """A Proposal from a parsed document. Raises InvalidDocument SCHEMA_ERROR."""
    fields = _Fields(doc, path, PROPOSAL_ALIASES)

    def upper_in(allowed: Sequence[str]) -> Callable[[str], str | None]:
        return lambda v: v.strip().upper() if v.strip().upper() in allowed else None

    return Proposal(
        id=_check_id(fields, fallback_id, "proposal"),
        task=_stripped(fields.text("task")),
        worker=_stripped(fields.text("worker")),
        proposal_type=fields.choice("proposal_type", upper_in(PROPOSAL_TYPES), PROPOSAL_TYPES, "ADD_RAIL"),
        target_scope=fields.choice("target_scope", upper_in(PROPOSAL_SCOPES), PROPOSAL_SCOPES, "TASK"),
        current_value=fields.text("current_value"),
        proposed_value=fields.text("proposed_value") or "",
        reason=_body_text(doc),
        status=fields.choice("status", upper_in(PROPOSAL_STATUSES), PROPOSAL_STATUSES, "PENDING"),
        resolved_by=fields.text("resolved_by"),
        resolved=fields.text("resolved"),
        created=fields.text("created"),
    )


# --------------------------------------------------------------------------- writing files


@dataclass(frozen=True, slots=True)
class _Key:
    """How one dataclass field is written: under `key`, always (`required`) or only when set."""

    field: str
    required: bool = False
    encode: Callable[[Any], Any] | None = None


def _step_to_meta(step: Step) -> dict[str, Any]:
    meta: dict[str, Any] = {"id": step.id, "description": step.description, "status": step.status}
    if step.affected_files:
        meta["affected_files"] = list(step.affected_files)
    if step.modified_files:
        meta["modified_files"] = list(step.modified_files)
    for name in ("note", "started", "completed"):
        if getattr(step, name) is not None:
            meta[name] = getattr(step, name)
    return meta


def _plan_to_meta(plan: tuple[Step, ...]) -> list[dict[str, Any]]:
    return [_step_to_meta(step) for step in plan]


TASK_KEYS = (
    _Key("id", True), _Key("epic", True), _Key("title", True), _Key("status", True), _Key("priority", True),
    _Key("order", True), _Key("assigned_worker"), _Key("depends_on", encode=list), _Key("parent"),
    _Key("definition_of_done", encode=list), _Key("task_rails", encode=list), _Key("plan", encode=_plan_to_meta),
    _Key("reopen_count"), _Key("reopen_reason"), _Key("pr_link"), _Key("created_by", True), _Key("test_file"),
    _Key("work_summary"), _Key("review_summary"), _Key("first_claimed"), _Key("created", True), _Key("updated", True),
    _Key("plan_submitted"), _Key("plan_approved"), _Key("work_started"), _Key("review_started"), _Key("completed"),
)
EPIC_KEYS = (
    _Key("id", True), _Key("title", True), _Key("status", True), _Key("order", True), _Key("epic_rails", encode=list),
    _Key("architecture_notes"), _Key("created", True), _Key("updated", True),
)
WORKER_KEYS = (
    _Key("id", True), _Key("type"), _Key("status"), _Key("blocked_reason"), _Key("needs_from"), _Key("blocked_task"),
    _Key("blocked_step"), _Key("blocked_since"), _Key("created", True), _Key("updated", True),
)
TEAM_KEYS = (
    _Key("id", True), _Key("name", True), _Key("role"), _Key("max_size", True), _Key("members", True, encode=list),
    _Key("created", True), _Key("updated", True),
)
PROPOSAL_KEYS = (
    _Key("id", True), _Key("task"), _Key("worker"), _Key("proposal_type", True), _Key("target_scope", True),
    _Key("current_value"), _Key("proposed_value", True), _Key("status", True), _Key("resolved_by"), _Key("resolved"),
    _Key("created", True),
)


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == () or value == 0 and not isinstance(value, bool) and not isinstance(value, float)


def _meta(entity: Any, keys: Sequence[_Key]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for spec in keys:
        value = getattr(entity, spec.field)
        if not spec.required and _empty(value):
            continue
        meta[spec.field] = spec.encode(value) if spec.encode else value
    return meta


def _body(description: str) -> str:
    return description.rstrip() + "\n" if description.strip() else ""


def render_task(task: Task) -> str:
    """The text of a new task file: keys in declared order, empty optional keys left out."""
    return document.render(_meta(task, TASK_KEYS), _body(task.description))


def render_epic(epic: Epic) -> str:
    """The text of a new epic file."""
    return document.render(_meta(epic, EPIC_KEYS), _body(epic.description))


def render_worker(worker: Worker) -> str:
    """The text of a new worker file."""
    return document.render(_meta(worker, WORKER_KEYS), _body(worker.notes))


def render_team(team: Team) -> str:
    """The text of a new team file."""
    return document.render(_meta(team, TEAM_KEYS), "")


def render_proposal(proposal: Proposal) -> str:
    """The text of a new rail proposal file (the reason is the body)."""
    return document.render(_meta(proposal, PROPOSAL_KEYS), _body(proposal.reason))


def render_project(project: Project) -> str:
    """The text of a new `project.md` with every setting spelled out for hand editing."""
    rails = project.global_rails
    meta = {
        "id": project.id,
        "name": project.name,
        "global_rails": {
            "tech_stack": list(rails.tech_stack),
            "forbidden_patterns": list(rails.forbidden_patterns),
            "required_patterns": list(rails.required_patterns),
            "formatting": rails.formatting,
            "testing": rails.testing,
            "custom_rules": list(rails.custom_rules),
        },
        "settings": {
            "approval_mode": project.settings.approval_mode,
            "speed_mode_delay_ms": project.settings.speed_mode_delay_ms,
            "max_reopens": project.settings.max_reopens,
            "max_team_size": project.settings.max_team_size,
        },
        "created": project.created,
        "updated": project.updated,
    }
    return document.render(meta, _body(project.description))


def edit_text(doc: Document, old: Any, new: Any, kind: str, path: Path | str | None = None) -> str | None:
    """The document's text with `new`'s values where they differ from `old`'s; None if none do.

    Each changed field is written to the key the file already uses for it (an alias in any
    letter case), so a hand-written `definitionOfDone:` stays that key; other lines, comments,
    unknown keys and, unless the body field changed, the body keep their bytes.
    """
    keys, aliases, body_field = _EDITABLE[kind]
    fields = _Fields(doc, path, aliases)
    changes: dict[str, Any] = {}
    for spec in keys:
        before, after = getattr(old, spec.field), getattr(new, spec.field)
        if before == after:
            continue
        key = fields.key(spec.field) or spec.field
        if not spec.required and _empty(after):
            if key in doc.meta:
                changes[key] = document.DELETE
        else:
            changes[key] = spec.encode(after) if spec.encode else after
    body_changed = body_field is not None and getattr(old, body_field) != getattr(new, body_field)
    if not changes and not body_changed:
        return None
    text = document.edit_frontmatter(doc.text, changes, path) if changes else doc.text
    if body_changed:
        edited = document.parse(text, path)
        stale = document.find_key(edited.meta, "description")
        if stale is not None:
            # A hand-written `description:` key moves into the body, where descriptions live.
            text = document.edit_frontmatter(text, {stale: document.DELETE}, path)
            edited = document.parse(text, path)
        text = text[: len(text) - len(edited.body)] + _body(getattr(new, body_field))
    return text


_EDITABLE: Mapping[str, tuple[Sequence[_Key], Mapping[str, tuple[str, ...]], str | None]] = {
    "task": (TASK_KEYS, TASK_ALIASES, "description"),
    "epic": (EPIC_KEYS, EPIC_ALIASES, "description"),
    "worker": (WORKER_KEYS, WORKER_ALIASES, None),
    "team": (TEAM_KEYS, TEAM_ALIASES, None),
    "proposal": (PROPOSAL_KEYS, PROPOSAL_ALIASES, None),
}


# --------------------------------------------------------------------------- JSON shapes


def step_to_dict(step: Step) -> dict[str, Any]:
    """A plan step as Moe returns it."""
    return {
        "stepId": step.id,
        "description": step.description,
        "status": step.status,
        "affectedFiles": list(step.affected_files),
        "modifiedFiles": list(step.modified_files),
        "note": step.note,
        "startedAt": step.started,
        "completedAt": step.completed,
    }


def task_to_dict(task: Task, *, path: str | None = None) -> dict[str, Any]:
    """The full task record (Moe's Task, with LoopFlow's fields): the one JSON shape of a task."""
    data: dict[str, Any] = {
        "id": task.id,
        "epicId": task.epic or None,
        "title": task.title,
        "description": task.description,
        "status": task.status,
        "priority": task.priority,
        "order": task.order,
        "assignedWorkerId": task.assigned_worker,
        "dependsOn": list(task.depends_on),
        "parentTaskId": task.parent,
        "definitionOfDone": list(task.definition_of_done),
        "taskRails": list(task.task_rails),
        "implementationPlan": [step_to_dict(step) for step in task.plan],
        "reopenCount": task.reopen_count,
        "reopenReason": task.reopen_reason,
        "prLink": task.pr_link,
        "createdBy": task.created_by,
        "testFile": task.test_file,
        "workSummary": task.work_summary,
        "reviewSummary": task.review_summary,
        "createdAt": task.created,
        "updatedAt": task.updated,
        "planSubmittedAt": task.plan_submitted,
        "planApprovedAt": task.plan_approved,
        "workStartedAt": task.work_started,
        "reviewStartedAt": task.review_started,
        "completedAt": task.completed,
        "metrics": {"firstClaimAt": task.first_claimed},
    }
    if path is not None:
        data["path"] = path
    return data


def task_brief(task: Task) -> dict[str, Any]:
    """A task's row in `list_tasks`: Moe's five fields plus priority, holder and dependencies."""
    return {
        "id": task.id,
        "title": task.title,
        "status": task.status,
        "order": task.order,
        "hasWorker": task.assigned_worker is not None,
        "priority": task.priority,
        "epicId": task.epic or None,
        "assignedWorkerId": task.assigned_worker,
        "dependsOn": list(task.depends_on),
    }


def epic_to_dict(epic: Epic, *, path: str | None = None) -> dict[str, Any]:
    """The full epic record."""
    data: dict[str, Any] = {
        "id": epic.id,
        "title": epic.title,
        "description": epic.description,
        "architectureNotes": epic.architecture_notes,
        "epicRails": list(epic.epic_rails),
        "status": epic.status,
        "order": epic.order,
        "createdAt": epic.created,
        "updatedAt": epic.updated,
    }
    if path is not None:
        data["path"] = path
    return data


def epic_context(epic: Epic) -> dict[str, Any]:
    """The epic as get_context and claim_next_task show it."""
    return {"id": epic.id, "title": epic.title, "description": epic.description,
            "architectureNotes": epic.architecture_notes, "epicRails": list(epic.epic_rails)}


def rails_to_dict(rails: Rails) -> dict[str, Any]:
    return {
        "techStack": list(rails.tech_stack),
        "forbiddenPatterns": list(rails.forbidden_patterns),
        "requiredPatterns": list(rails.required_patterns),
        "formatting": rails.formatting,
        "testing": rails.testing,
        "customRules": list(rails.custom_rules),
    }


def settings_to_dict(settings: Settings) -> dict[str, Any]:
    return {
        **dict(settings.extra),
        "approvalMode": settings.approval_mode,
        "speedModeDelayMs": settings.speed_mode_delay_ms,
        "maxReopens": settings.max_reopens,
        "maxTeamSize": settings.max_team_size,
    }


def project_to_dict(project: Project) -> dict[str, Any]:
    """The project as Moe shows it: `{id, name, globalRails, settings}`."""
    return {"id": project.id, "name": project.name, "globalRails": rails_to_dict(project.global_rails),
            "settings": settings_to_dict(project.settings)}


def worker_status(board: Board, worker: Worker) -> str:
    """A worker's status: what its file records (BLOCKED, DEAD), else derived from its task."""
    if worker.status is not None:
        return worker.status
    task = board.active_task_of(worker.id)
    return _WORKER_STATUS_OF_TASK.get(task.status, "IDLE") if task else "IDLE"


def worker_to_dict(board: Board, worker: Worker) -> dict[str, Any]:
    """A worker with its derived status, current task and teams."""
    task = board.active_task_of(worker.id)
    return {
        "id": worker.id,
        "type": worker.type,
        "status": worker_status(board, worker),
        "currentTaskId": task.id if task else (worker.blocked_task if worker.status == "BLOCKED" else None),
        "epicId": task.epic if task else None,
        "teamIds": sorted(team.id for team in board.teams.values() if worker.id in team.members),
        "blockedReason": worker.blocked_reason,
        "needsFrom": worker.needs_from,
        "blockedStepId": worker.blocked_step,
        "blockedSince": worker.blocked_since,
        "createdAt": worker.created,
        "updatedAt": worker.updated,
    }


def team_to_dict(team: Team) -> dict[str, Any]:
    """Moe's Team: `{id, projectId?, name, role, memberIds, maxSize, createdAt, updatedAt}`."""
    return {"id": team.id, "name": team.name, "role": team.role, "memberIds": list(team.members), "maxSize": team.max_size,
            "createdAt": team.created, "updatedAt": team.updated}


def proposal_to_dict(proposal: Proposal) -> dict[str, Any]:
    """Moe's rail proposal record."""
    return {
        "id": proposal.id,
        "taskId": proposal.task,
        "workerId": proposal.worker,
        "proposalType": proposal.proposal_type,
        "targetScope": proposal.target_scope,
        "currentValue": proposal.current_value,
        "proposedValue": proposal.proposed_value,
        "reason": proposal.reason,
        "status": proposal.status,
        "resolvedBy": proposal.resolved_by,
        "resolvedAt": proposal.resolved,
        "createdAt": proposal.created,
    }


def event_to_dict(event: Event) -> dict[str, Any]:
    """One activity log entry, as stored on its JSONL line and as get_activity_log returns it."""
    data: dict[str, Any] = {"id": event.id, "timestamp": event.timestamp, "projectId": event.project}
    for key, value in (("epicId", event.epic), ("taskId", event.task), ("workerId", event.worker)):
        if value is not None:
            data[key] = value
    data["event"] = event.event
    data["payload"] = dict(event.payload)
    return data


def parse_event(record: Any, path: Path | str | None = None, line: int | None = None) -> Event:
    """An Event from one decoded JSONL record. Raises InvalidDocument SCHEMA_ERROR."""

    def fail(message: str) -> InvalidDocument:
        return InvalidDocument(message, code="SCHEMA_ERROR", path=path, line=line)

    if not isinstance(record, dict):
        raise fail("an activity record must be a JSON object")
    texts: dict[str, str | None] = {}
    for key in ("id", "timestamp", "event", "projectId", "epicId", "taskId", "workerId"):
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise fail(f"activity record field {key!r} must be a string")
        texts[key] = value
    if not texts["id"] or not texts["timestamp"] or not texts["event"]:
        raise fail("an activity record needs id, timestamp and event")
    payload = record.get("payload")
    payload = {} if payload is None else payload
    if not isinstance(payload, dict):
        raise fail("activity record field 'payload' must be an object")
    return Event(id=texts["id"], timestamp=texts["timestamp"], event=texts["event"], project=texts["projectId"],
                 epic=texts["epicId"], task=texts["taskId"], worker=texts["workerId"], payload=payload)


# --------------------------------------------------------------------------- ordering


def rank_key(task: Task, epics: Mapping[str, Epic]) -> tuple[Any, ...]:
    """Claim and queue order: priority, then the epic's order, the task's order, age and id."""
    epic = epics.get(task.epic)
    return (PRIORITIES.index(task.priority), epic.order if epic else float("inf"), task.epic,
            task.order, task.created or "", task.id)


def board_key(task: Task, epics: Mapping[str, Epic]) -> tuple[Any, ...]:
    """Display order: by epic (its order), then the task's order within it."""
    epic = epics.get(task.epic)
    return (epic.order if epic else float("inf"), task.epic, task.order, task.created or "", task.id)


def next_order(tasks: Iterable[Task], epic_id: str) -> int | float:
    """The order of a new task at the end of its epic."""
    orders = [task.order for task in tasks if task.epic == epic_id]
    return (max(orders) // 1 + 1) if orders else 1


# --------------------------------------------------------------------------- state machine


def check_transition(task: Task, target: str, *, reason: str | None = None) -> None:
    """Check that `set_task_status` may move `task` to `target` (the same status is a no-op).

    Raises Conflict INVALID_TRANSITION for a move the table does not allow or whose condition
    fails (a plan to submit, steps left), and InvalidRequest when a move back has no reason.
    """
    source = task.status
    if target == source:
        return
    if target not in TRANSITIONS[source]:
        allowed = sorted(TRANSITIONS[source])
        raise Conflict(f"a {source} task cannot move to {target}", code="INVALID_TRANSITION",
                       details={"taskId": task.id, "from": source, "to": target, "allowed": allowed})
    if target == "AWAITING_APPROVAL" and not task.plan:
        raise Conflict("a task awaits approval only with a plan: submit one first", code="INVALID_TRANSITION",
                       details={"taskId": task.id, "from": source, "to": target})
    if target == "REVIEW":
        pending = [step.id for step in task.plan if step.status != "COMPLETED"]
        if pending:
            raise Conflict(f"{len(pending)} plan step(s) are not completed", code="INVALID_TRANSITION",
                           details={"taskId": task.id, "from": source, "to": target, "pendingSteps": pending})
    if (source, target) in _BACKWARD and not (reason and reason.strip()):
        raise InvalidRequest(f"moving a {source} task back to {target} needs a reason", details={"field": "reason"})


def apply_transition(task: Task, target: str, now: str, *, reason: str | None = None) -> Task:
    """`task` moved to `target` (checked with `check_transition` first): its timestamps, holder,
    reopen count and reason follow the move. The same status returns the task unchanged."""
    check_transition(task, target, reason=reason)
    source = task.status
    if target == source:
        return task
    changes: dict[str, Any] = {"status": target, "updated": now}
    if (source, target) not in _KEEPS_HOLDER:
        changes["assigned_worker"] = None
    if target == "AWAITING_APPROVAL":
        changes["plan_submitted"] = now
        changes["reopen_reason"] = None
    elif target == "WORKING":
        if source == "AWAITING_APPROVAL":
            changes["plan_approved"] = now
        if task.work_started is None:
            changes["work_started"] = now
    elif target == "REVIEW":
        changes["review_started"] = now
        changes["reopen_reason"] = None
    elif target == "DONE":
        changes["completed"] = now
        changes["reopen_reason"] = None
    if (source, target) in _BACKWARD:
        changes["reopen_reason"] = reason.strip() if reason else None
        if source in ("REVIEW", "DONE"):
            changes["reopen_count"] = task.reopen_count + 1
    if source == "DONE":
        changes["completed"] = None
    return replace(task, **changes)


def approval_due(task: Task, settings: Settings, now: datetime) -> bool:
    """Whether the approval mode approves `task`'s waiting plan by itself by `now`:
    at once in TURBO, `speed_mode_delay_ms` after submission in SPEED, never in CONTROL.
    SPEED's timer is the submission time in the file, so it survives any restart."""
    if task.status != "AWAITING_APPROVAL" or settings.approval_mode == "CONTROL":
        return False
    if settings.approval_mode == "TURBO":
        return True
    submitted = parse_time(task.plan_submitted)
    if submitted is None:
        return True
    return (now - submitted).total_seconds() * 1000 >= settings.speed_mode_delay_ms


def parse_time(value: str | None) -> datetime | None:
    """A timestamp string as an aware datetime (None when absent or unreadable)."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def qa_reject_target(task: Task, settings: Settings) -> str:
    """Where a QA rejection sends `task`: back to WORKING, or to PLANNING once this rejection
    brings its reopen count to the project's `max_reopens` (the plan itself needs rework)."""
    return "PLANNING" if task.reopen_count + 1 >= settings.max_reopens else "WORKING"


# --------------------------------------------------------------------------- plans and rails


def parse_steps(steps: Any) -> tuple[Step, ...]:
    """Plan steps from submit_plan's `steps` argument, numbered `step-1`, `step-2`, ...

    Raises InvalidRequest for a missing or oversized plan, an empty description, or an
    affected file that is absolute or climbs out of the project with `..`.
    """
    if not isinstance(steps, list) or not steps:
        raise InvalidRequest("steps must be a non-empty list of {description, affectedFiles?}", details={"field": "steps"})
    if len(steps) > MAX_STEPS:
        raise InvalidRequest(f"a plan has at most {MAX_STEPS} steps, not {len(steps)}", details={"field": "steps"})
    out: list[Step] = []
    for index, item in enumerate(steps, start=1):
        if isinstance(item, str):
            item = {"description": item}
        if not isinstance(item, dict):
            raise InvalidRequest(f"step {index} must be an object with a description", details={"field": "steps", "step": index})
        description = item.get("description")
        if not isinstance(description, str) or not description.strip():
            raise InvalidRequest(f"step {index} needs a description", details={"field": "steps", "step": index})
        if len(description) > MAX_STEP_CHARS:
            raise InvalidRequest(f"step {index}'s description exceeds {MAX_STEP_CHARS} characters", details={"field": "steps", "step": index})
        files = item.get("affectedFiles", item.get("affected_files")) or []
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise InvalidRequest(f"step {index}'s affectedFiles must be a list of paths", details={"field": "steps", "step": index})
        if len(files) > MAX_FILES_PER_STEP:
            raise InvalidRequest(f"step {index} lists more than {MAX_FILES_PER_STEP} files", details={"field": "steps", "step": index})
        out.append(Step(id=f"step-{index}", description=description.strip(),
                        affected_files=tuple(dict.fromkeys(check_project_path(f, index) for f in files))))
    return tuple(out)


def check_project_path(raw: str, step: int | None = None) -> str:
    """A project-relative path in normal form (`./a//b` -> `a/b`).

    Raises InvalidRequest for an empty, absolute or `..`-climbing path.
    """
    text = raw.strip().replace("\\", "/")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if not parts or text.startswith("/") or re.match(r"^[A-Za-z]:", text) or ".." in parts:
        raise InvalidRequest(f"file {raw!r} must be a path relative to the project, without '..'",
                             details={"field": "affectedFiles", "step": step, "path": raw})
    return "/".join(parts)


@dataclass(frozen=True, slots=True)
class Violation:
    """One way a plan breaks the global rails."""

    kind: str  # FORBIDDEN_PATTERN | REQUIRED_PATTERN_MISSING
    pattern: str
    step_id: str | None = None


def check_rails(rails: Rails, plan: Sequence[Step]) -> list[Violation]:
    """The ways `plan` breaks the enforced rails, matching case-insensitively: a forbidden
    pattern in any step's description or files, or a required pattern found in no step.
    (Epic and task rails are guidance for the agent and the approving human, not checked.)"""
    texts = [(step.id, " ".join((step.description, *step.affected_files)).casefold()) for step in plan]
    found: list[Violation] = []
    for pattern in rails.forbidden_patterns:
        needle = pattern.casefold()
        if needle.strip():
            found.extend(Violation("FORBIDDEN_PATTERN", pattern, step_id) for step_id, text in texts if needle in text)
    whole = "\n".join(text for _, text in texts)
    for pattern in rails.required_patterns:
        needle = pattern.casefold()
        if needle.strip() and needle not in whole:
            found.append(Violation("REQUIRED_PATTERN_MISSING", pattern))
    return found


def rail_error(violations: Sequence[Violation]) -> InvalidDocument:
    """The RAIL_VIOLATION error listing every violation in `details.violations`."""
    parts = []
    for v in violations:
        parts.append(f"forbidden pattern {v.pattern!r} in {v.step_id}" if v.kind == "FORBIDDEN_PATTERN" else f"required pattern {v.pattern!r} missing")
    return InvalidDocument(
        "plan violates the rails: " + "; ".join(parts),
        code="RAIL_VIOLATION",
        details={"violations": [{"kind": v.kind, "pattern": v.pattern, "stepId": v.step_id} for v in violations]},
        hint="revise the plan, or propose a rail change with moe.propose_rail",
    )


def all_rails(project: Project, epic: Epic | None, task: Task | None) -> dict[str, list[str]]:
    """Moe's `allRails`: global required patterns, and the epic's and task's guidance rails."""
    return {
        "global": list(project.global_rails.required_patterns),
        "epic": list(epic.epic_rails) if epic else [],
        "task": list(task.task_rails) if task else [],
    }


# --------------------------------------------------------------------------- dependencies


def dependency_cycle(tasks: Mapping[str, Task], task_id: str, depends_on: Sequence[str]) -> list[str] | None:
    """The cycle `task_id -> ... -> task_id` that giving it `depends_on` would close, if any."""
    graph = {tid: list(task.depends_on) for tid, task in tasks.items()}
    graph[task_id] = list(depends_on)
    path: list[str] = []
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(node: str) -> list[str] | None:
        if node in visiting:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        visiting.add(node)
        path.append(node)
        for nxt in graph.get(node, ()):
            found = visit(nxt)
            if found:
                return found
        path.pop()
        visiting.discard(node)
        done.add(node)
        return None

    return visit(task_id)


def waiting_on(task: Task, tasks: Mapping[str, Task]) -> list[str]:
    """The dependencies of `task` that are not DONE (missing ones included)."""
    return [dep for dep in task.depends_on if (found := tasks.get(dep)) is None or found.status != "DONE"]


def ready_and_blocked(board: Board, epic_id: str | None = None) -> tuple[list[Task], list[tuple[Task, list[str]]]]:
    """Open tasks (not DONE or ARCHIVED) whose dependencies are all DONE, and the others with
    what each waits on; both in queue order."""
    ready: list[Task] = []
    blocked: list[tuple[Task, list[str]]] = []
    for task in sorted(board.tasks.values(), key=lambda t: rank_key(t, board.epics)):
        if task.status in ("DONE", "ARCHIVED") or (epic_id is not None and task.epic != epic_id):
            continue
        waits = waiting_on(task, board.tasks)
        if waits:
            blocked.append((task, waits))
        else:
            ready.append(task)
    return ready, blocked


# --------------------------------------------------------------------------- claims


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """What `claim_next_task` should do: claim `task` (from `takeover_from` when it takes over
    another worker's task), or report the `already` held task, or nothing (`task` None)."""

    task: Task | None = None
    takeover_from: str | None = None
    already: Task | None = None


def _owner_alive(board: Board, worker_id: str | None) -> bool:
    if worker_id is None:
        return False
    worker = board.workers.get(worker_id)
    return worker is None or worker.status != "DEAD"


def plan_claim(board: Board, statuses: Sequence[str], worker_id: str | None, *, epic_id: str | None = None,
               replace_existing: bool = False) -> ClaimPlan:
    """Choose the task `worker_id` claims next, by priority, epic order and task order.

    Offered: tasks in `statuses` (of `epic_id` when given) that nobody alive holds (a DEAD
    worker's task is offered again), whose epic is not archived and, for WORKING, whose
    dependencies are all DONE. A worker holding an active task gets that task back as
    `already`. The solo-worker rule: a task is not offered while another worker, not in a team
    with the claimer, holds a task of the same status in the same epic. With `replace_existing`
    the claimer takes over such a worker's task instead (only when nothing free is left).

    Raises InvalidRequest for bad statuses and Conflict WORKER_CONFLICT when the only tasks
    left are barred by the solo-worker rule.
    """
    if not statuses:
        raise InvalidRequest("statuses must list at least one of " + ", ".join(CLAIMABLE), details={"field": "statuses"})
    bad = [s for s in statuses if s not in CLAIMABLE]
    if bad:
        raise InvalidRequest(f"agents claim only {', '.join(CLAIMABLE)} tasks, not {', '.join(bad)}; the other columns are human-gated",
                             details={"field": "statuses", "statuses": bad})
    if worker_id is not None:
        held = board.active_task_of(worker_id)
        if held is not None:
            return ClaimPlan(already=held)
    mates = board.teammates(worker_id) if worker_id else frozenset()
    holders: dict[tuple[str, str], list[Task]] = {}
    for task in board.tasks.values():
        if task.status in statuses and task.assigned_worker and task.assigned_worker != worker_id and _owner_alive(board, task.assigned_worker):
            holders.setdefault((task.epic, task.status), []).append(task)

    def rivals(task: Task) -> list[Task]:
        return [held for held in holders.get((task.epic, task.status), ()) if held.assigned_worker not in mates]

    def offered(task: Task) -> bool:
        if task.status not in statuses or (epic_id is not None and task.epic != epic_id):
            return False
        epic = board.epics.get(task.epic)
        if epic is not None and epic.status == "ARCHIVED":
            return False
        return not (task.status == "WORKING" and waiting_on(task, board.tasks))

    ranked = sorted((t for t in board.tasks.values() if offered(t)), key=lambda t: rank_key(t, board.epics))
    conflicts: list[Task] = []
    for task in ranked:
        if _owner_alive(board, task.assigned_worker):
            continue
        barred = rivals(task)
        if not barred:
            dead_owner = task.assigned_worker
            return ClaimPlan(task=task, takeover_from=dead_owner)
        conflicts.extend(barred)
    if worker_id is not None and replace_existing:
        takeable = [t for t in ranked if t.assigned_worker and t.assigned_worker != worker_id
                    and t.assigned_worker not in mates and _owner_alive(board, t.assigned_worker)]
        if takeable:
            return ClaimPlan(task=takeable[0], takeover_from=takeable[0].assigned_worker)
    if conflicts and worker_id is not None:
        first = min(conflicts, key=lambda t: rank_key(t, board.epics))
        raise Conflict(
            f"Epic already has an active worker on {first.status} tasks: {first.assigned_worker}",
            code="WORKER_CONFLICT",
            details={"epicId": first.epic, "status": first.status, "workerId": first.assigned_worker, "taskId": first.id},
            hint="join that worker's team, choose another epic, or pass replaceExisting to take over",
        )
    return ClaimPlan()


def claimed(task: Task, worker_id: str, now: str) -> Task:
    """`task` as held by `worker_id` from `now` (its first claim time stamped once)."""
    return replace(task, assigned_worker=worker_id, updated=now, first_claimed=task.first_claimed or now)


def role_for_status(status: str) -> str | None:
    """The role that works a claimable column (architect, worker, qa)."""
    return _ROLE_OF_STATUS.get(status)


# --------------------------------------------------------------------------- queries


def list_counts(tasks: Iterable[Task]) -> dict[str, int]:
    """Moe's column counts (`inProgress` counts WORKING only), plus every status and the total."""
    by_status = dict.fromkeys(STATUSES, 0)
    for task in tasks:
        by_status[task.status] += 1
    return {
        "backlog": by_status["BACKLOG"],
        "inProgress": by_status["WORKING"],
        "review": by_status["REVIEW"],
        "done": by_status["DONE"],
        "byStatus": by_status,
        "total": sum(by_status.values()),
    }


_WORD = re.compile(r"\w+", re.UNICODE)


def search_score(task: Task, terms: Sequence[str]) -> int:
    """Relevance of `task` to lower-cased `terms`: each occurrence in the title counts 2,
    in the description 1 (Moe's weighting). Terms match as substrings, case-insensitively."""
    title = task.title.casefold()
    description = task.description.casefold()
    return sum(2 * title.count(term) + description.count(term) for term in terms)


def search_terms(query: str) -> list[str]:
    """The words of a search query, lower-cased, without repeats."""
    return list(dict.fromkeys(word.casefold() for word in _WORD.findall(query)))


def search_tasks(tasks: Iterable[Task], epics: Mapping[str, Epic], query: str | None, *, status: str | None = None,
                 epic_id: str | None = None, worker_id: str | None = None, limit: int = 20) -> list[Task]:
    """Tasks matching the filters (applied first), then ranked by `search_score` (ties in
    queue order); without a query, the filtered tasks in queue order."""
    chosen = [
        task for task in tasks
        if (status is None or task.status == status)
        and (epic_id is None or task.epic == epic_id)
        and (worker_id is None or task.assigned_worker == worker_id)
    ]
    terms = search_terms(query) if query else []
    if terms:
        scored = [(search_score(task, terms), task) for task in chosen]
        scored = [pair for pair in scored if pair[0] > 0]
        scored.sort(key=lambda pair: (-pair[0], rank_key(pair[1], epics)))
        return [task for _, task in scored[:limit]]
    return sorted(chosen, key=lambda t: rank_key(t, epics))[:limit]


def filter_events(events: Iterable[Event], *, task_id: str | None = None, epic_id: str | None = None, worker_id: str | None = None,
                  event_types: Sequence[str] | None = None, limit: int = 50) -> list[Event]:
    """The newest `limit` events matching every filter, newest first.

    Order is by timestamp, then by position in the log, so lines that a union merge
    interleaved from two clones still read in time order.
    """
    wanted = {kind.upper() for kind in event_types} if event_types else None
    matching = [
        (event.timestamp, position, event) for position, event in enumerate(events)
        if (task_id is None or event.task == task_id)
        and (epic_id is None or event.epic == epic_id)
        and (worker_id is None or event.worker == worker_id)
        and (wanted is None or event.event.upper() in wanted)
    ]
    matching.sort(key=lambda triple: triple[:2], reverse=True)
    return [event for _, _, event in matching[:limit]]

"""The board's file format: parse_* reads a document into a record, render_* writes a new file,
edit_text changes only the keys whose values changed; and the activity log's JSONL line.

Core layer (pure: text and documents in, records and text out; imports only the foundation and
the board's model). Frontmatter keys are snake_case; Moe's camelCase names (and LoopFlow's) are
read as aliases, in any letter case, and an edit writes to the key the file already uses. A
value of the wrong shape is an InvalidDocument SCHEMA_ERROR at its key's line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moss_files.board.model import (
    APPROVAL_MODES,
    CREATORS,
    DEFAULT_CHAT_MAX_AGENT_HOPS,
    DEFAULT_LEASE_MS,
    DEFAULT_MAX_DISTINCT_FILES,
    DEFAULT_MAX_PLAN_STEPS,
    DEFAULT_MAX_REOPENS,
    DEFAULT_PRIORITY,
    DEFAULT_SPEED_DELAY_MS,
    DEFAULT_TEAM_SIZE,
    DEFAULT_WARN_DISTINCT_FILES,
    DEFAULT_WARN_STEPS,
    EPIC_STATUSES,
    PRIORITIES,
    PROPOSAL_SCOPES,
    PROPOSAL_STATUSES,
    PROPOSAL_TYPES,
    ROLES,
    STATUSES,
    STEP_STATUSES,
    STORED_WORKER_STATUSES,
    WORKER_STATUSES,
    Epic,
    Event,
    Project,
    Proposal,
    Rails,
    Settings,
    Step,
    Task,
    TaskSizing,
    Team,
    Worker,
    default_project_id,
    normalize_priority,
    normalize_status,
)
from moss_files.foundation import document, formats, structured
from moss_files.foundation.docmerge import CONFLICT, MISSING, merge_value
from moss_files.foundation.document import Document
from moss_files.foundation.errors import InvalidDocument, MossError
from moss_files.foundation.fields import FieldReader

# --------------------------------------------------------------------------- reading files


def _text(fields: FieldReader, name: str) -> str | None:
    """A text field; a blank value reads as absent, as it always has in board files."""
    return fields.text(name, blank_is_default=True)


def _stripped(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


def _upper_in(allowed: Sequence[str]) -> Callable[[str], str | None]:
    """A normalizer for FieldReader.choice: upper case, and only the allowed values."""
    return lambda value: value.strip().upper() if value.strip().upper() in allowed else None


def _step_status(value: str) -> str | None:
    word = value.strip().upper().replace(" ", "_")
    return word if word in STEP_STATUSES else None


def _check_id(fields: FieldReader, fallback_id: str, what: str) -> str:
    """The file's id: its stem. A frontmatter `id` must agree, so a copied file that kept
    its original's id is reported instead of shadowing that task."""
    written = _text(fields, "id")
    if written is not None and written.strip() != fallback_id:
        raise fields.error(fields.key("id"), f"{what} id {written.strip()!r} does not match the file name {fallback_id!r}")
    return fallback_id


def _body_text(doc: Document) -> str:
    """The description a body holds: its text without the blank lines around it."""
    return doc.body.strip("\n").rstrip()


def _record(fields: FieldReader, name: str) -> dict[str, Any] | None:
    """A mapping field (verification evidence, a critique): None when absent or empty."""
    _key, value = fields.mapping(name)
    return dict(value) if value else None


def _records(fields: FieldReader, name: str) -> tuple[dict[str, Any], ...]:
    """A list of mappings (amendments, handoff notes)."""
    key, value = fields.raw(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise fields.error(key, f"{name!r} must be a list of mappings")
    return tuple(dict(item) for item in value)


def _flag(fields: FieldReader, name: str, default: bool) -> bool:
    key, value = fields.raw(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise fields.error(key, f"{name!r} must be true or false, not {value!r}")
    return value


def _optional_count(fields: FieldReader, name: str) -> int | None:
    key, value = fields.raw(name)
    if value is None:
        return None
    return int(fields.number(name, minimum=0, integer=True)) or None


def plain(value: Any) -> Any:
    """`value` with tuples as lists and mappings as dicts, all the way down: what YAML writes."""
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


TASK_ALIASES: Mapping[str, tuple[str, ...]] = {
    "epic": ("epic_id", "epicId"),
    "assigned_worker": ("assigned_worker_id", "assignedWorkerId", "assignee", "worker"),
    "depends_on": ("dependsOn", "depends", "dependencies"),
    "definition_of_done": ("definitionOfDone", "acceptance_criteria", "acceptanceCriteria", "dod"),
    "task_rails": ("taskRails", "rails"),
    "plan": ("implementationPlan", "implementation_plan", "steps"),
    "reopen_count": ("reopenCount",),
    "reopen_reason": ("reopenReason",),
    "max_reopens": ("maxReopens",),
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
    "handoffs": ("priorHandoffs", "prior_handoffs"),
    "prior_attempt": ("priorAttempt",),
    "budget_ms": ("budgetMs", "budget_wall_clock_ms"),
    "critique": ("planCritiqueResult", "plan_critique"),
    "context_fetched_by": ("contextFetchedBy",),
    "rejection_history": ("rejectionHistory",),
    "failed_dod_items": ("failedDodItems",),
    "needs_human_review": ("needsHumanReview",),
    "plan_size_warnings": ("planSizeWarnings",),
}
_STEP_ALIASES: Mapping[str, tuple[str, ...]] = {
    "id": ("stepId", "step_id"),
    "affected_files": ("affectedFiles", "files"),
    "new_files": ("newFiles",),
    "modified_files": ("modifiedFiles",),
    "started": ("startedAt", "started_at"),
    "completed": ("completedAt", "completed_at"),
}


def parse_task(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Task:
    """A Task from a parsed document whose file stem is `fallback_id`.

    Raises InvalidDocument SCHEMA_ERROR (with the key's line) for a wrong shape or value.
    """
    formats.check_document("task", doc, path)
    fields = FieldReader(doc, path, TASK_ALIASES)
    task_id = _check_id(fields, fallback_id, "task")
    description = _body_text(doc) or (_text(fields, "description") or "").strip()
    title = _text(fields, "title")
    if title is None:
        raise fields.error(None, "task has no title") if fields.key("title") is None else fields.error(fields.key("title"), "task title is empty")
    return Task(
        id=task_id,
        epic=(_text(fields, "epic") or "").strip(),
        title=" ".join(title.split()),
        description=description,
        status=fields.choice("status", STATUSES, "BACKLOG", normalize_status),
        priority=fields.choice("priority", PRIORITIES, DEFAULT_PRIORITY, normalize_priority),
        order=fields.number("order"),
        assigned_worker=_stripped(_text(fields, "assigned_worker")),
        depends_on=fields.items("depends_on", comma_separated=True),
        parent=_stripped(_text(fields, "parent")),
        definition_of_done=fields.items("definition_of_done"),
        task_rails=fields.items("task_rails"),
        plan=_parse_plan(fields),
        reopen_count=int(fields.number("reopen_count", minimum=0, integer=True)),
        reopen_reason=_text(fields, "reopen_reason"),
        max_reopens=_optional_count(fields, "max_reopens"),
        pr_link=_stripped(_text(fields, "pr_link")),
        created_by=fields.choice("created_by", CREATORS, "HUMAN", _upper_in(CREATORS)),
        test_file=_stripped(_text(fields, "test_file")),
        work_summary=_text(fields, "work_summary"),
        review_summary=_text(fields, "review_summary"),
        first_claimed=_text(fields, "first_claimed"),
        created=_text(fields, "created"),
        updated=_text(fields, "updated"),
        plan_submitted=_text(fields, "plan_submitted"),
        plan_approved=_text(fields, "plan_approved"),
        work_started=_text(fields, "work_started"),
        review_started=_text(fields, "review_started"),
        completed=_text(fields, "completed"),
        verification=_record(fields, "verification"),
        handoffs=_records(fields, "handoffs"),
        prior_attempt=_record(fields, "prior_attempt"),
        budget_ms=_optional_count(fields, "budget_ms"),
        critique=_record(fields, "critique"),
        context_fetched_by=tuple(dict.fromkeys(fields.items("context_fetched_by", comma_separated=True))),
        rejection_history=_records(fields, "rejection_history"),
        failed_dod_items=_records(fields, "failed_dod_items"),
        needs_human_review=_flag(fields, "needs_human_review", False),
        plan_size_warnings=fields.items("plan_size_warnings"),
        type=_stripped(_text(fields, "type")),
        source=provenance(doc.meta),
    )


def _parse_plan(fields: FieldReader) -> tuple[Step, ...]:
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
        sub = FieldReader(Document(meta=item, body="", text=""), fields.path, _STEP_ALIASES)
        try:
            step_id = (_text(sub, "id") or f"step-{index}").strip()
            description = _text(sub, "description")
            if description is None:
                raise InvalidDocument(f"plan step {index} has no description", code="SCHEMA_ERROR")
            step = Step(
                id=step_id,
                description=description,
                status=sub.choice("status", STEP_STATUSES, "PENDING", _step_status),
                affected_files=sub.items("affected_files"),
                new_files=sub.items("new_files"),
                modified_files=sub.items("modified_files"),
                note=_text(sub, "note"),
                started=_text(sub, "started"),
                completed=_text(sub, "completed"),
                amendments=_records(sub, "amendments"),
                verification=_record(sub, "verification"),
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


def parse_epic(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Epic:
    """An Epic from a parsed document. Raises InvalidDocument SCHEMA_ERROR."""
    formats.check_document("epic", doc, path)
    fields = FieldReader(doc, path, EPIC_ALIASES)
    epic_id = _check_id(fields, fallback_id, "epic")
    title = _text(fields, "title")
    if title is None:
        raise fields.error(fields.key("title"), "epic has no title")
    return Epic(
        id=epic_id,
        title=" ".join(title.split()),
        description=_body_text(doc) or (_text(fields, "description") or "").strip(),
        status=fields.choice("status", EPIC_STATUSES, "PLANNED", _upper_in(EPIC_STATUSES)),
        order=fields.number("order"),
        epic_rails=fields.items("epic_rails"),
        architecture_notes=_text(fields, "architecture_notes"),
        created=_text(fields, "created"),
        updated=_text(fields, "updated"),
        source=provenance(doc.meta),
    )


def provenance(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where an imported item came from, as its frontmatter says (`imported_from`, `source_id`,
    and the source's fields kept verbatim under `source_fields`): `{system, id, fields}`, or
    None for an item made here. Shown as it is; never a reason to refuse the file."""
    system, old_id, kept = meta.get("imported_from"), meta.get("source_id"), meta.get("source_fields")
    if system is None and old_id is None and kept is None:
        return None
    return {
        "system": None if system is None else str(system),
        "id": None if old_id is None else str(old_id),
        "fields": plain(kept) if isinstance(kept, Mapping) else ({} if kept is None else {"source_fields": plain(kept)}),
    }


_RAIL_KEYS = {
    "tech_stack": ("techStack",),
    "forbidden_patterns": ("forbiddenPatterns",),
    "required_patterns": ("requiredPatterns",),
    "custom_rules": ("customRules",),
    "formatting": (),
    "testing": (),
}
_SETTING_KEYS = {
    "approval_mode": ("approvalMode",),
    "speed_mode_delay_ms": ("speedModeDelayMs",),
    "max_reopens": ("maxReopens",),
    "max_team_size": ("maxTeamSize",),
    "stale_worker_timeout_ms": ("staleWorkerTimeoutMs", "lease_ms"),
    "require_verification": ("requireVerification",),
    "chat_max_agent_hops": ("chatMaxAgentHops",),
    "task_sizing": ("taskSizing",),
    "consolidation_branch": ("consolidationBranch",),
}
_SIZING_KEYS = {
    "warn_steps": ("warnSteps",),
    "max_steps": ("maxSteps",),
    "warn_distinct_files": ("warnDistinctFiles",),
    "max_distinct_files": ("maxDistinctFiles",),
}
PROJECT_ALIASES: Mapping[str, tuple[str, ...]] = {
    "global_rails": ("globalRails", "rails"),
    "created": ("created_at", "createdAt"),
    "updated": ("updated_at", "updatedAt"),
}


def parse_project(doc: Document, path: Path | str | None = None, *, default_name: str) -> Project:
    """The Project from `project.md`. Raises InvalidDocument SCHEMA_ERROR."""
    formats.check_document("project", doc, path)
    fields = FieldReader(doc, path, PROJECT_ALIASES)
    rails_key, rails_map = fields.mapping("global_rails")
    rails_fields = FieldReader(Document(meta=dict(rails_map), body="", text=""), path, _RAIL_KEYS)
    settings_key, settings_map = fields.mapping("settings")
    settings_fields = FieldReader(Document(meta=dict(settings_map), body="", text=""), path, _SETTING_KEYS)
    try:
        rails = Rails(
            tech_stack=rails_fields.items("tech_stack"),
            forbidden_patterns=rails_fields.items("forbidden_patterns"),
            required_patterns=rails_fields.items("required_patterns"),
            formatting=_text(rails_fields, "formatting") or "",
            testing=_text(rails_fields, "testing") or "",
            custom_rules=rails_fields.items("custom_rules"),
        )
    except InvalidDocument as err:
        raise fields.error(rails_key, f"global_rails: {err.message}") from None
    try:
        known = {settings_fields.key(name) for name in _SETTING_KEYS}
        settings = Settings(
            approval_mode=settings_fields.choice("approval_mode", APPROVAL_MODES, "CONTROL", _upper_in(APPROVAL_MODES)),
            speed_mode_delay_ms=int(settings_fields.number("speed_mode_delay_ms", default=DEFAULT_SPEED_DELAY_MS, minimum=0, integer=True)),
            max_reopens=int(settings_fields.number("max_reopens", default=DEFAULT_MAX_REOPENS, minimum=1, integer=True)),
            max_team_size=int(settings_fields.number("max_team_size", default=DEFAULT_TEAM_SIZE, minimum=1, integer=True)),
            stale_worker_timeout_ms=int(settings_fields.number("stale_worker_timeout_ms", default=DEFAULT_LEASE_MS, minimum=0, integer=True)),
            require_verification=_flag(settings_fields, "require_verification", False),
            chat_max_agent_hops=int(settings_fields.number("chat_max_agent_hops", default=DEFAULT_CHAT_MAX_AGENT_HOPS, minimum=1, integer=True)),
            task_sizing=_parse_sizing(settings_fields, path),
            consolidation_branch=_stripped(_text(settings_fields, "consolidation_branch")),
            extra={key: value for key, value in settings_map.items() if key not in known},
        )
    except InvalidDocument as err:
        raise fields.error(settings_key, f"settings: {err.message}") from None
    name = _text(fields, "name") or default_name
    return Project(
        id=(_text(fields, "id") or default_project_id(name)).strip(),
        name=name,
        description=_body_text(doc),
        global_rails=rails,
        settings=settings,
        exists=True,
        created=_text(fields, "created"),
        updated=_text(fields, "updated"),
    )


def _parse_sizing(settings_fields: FieldReader, path: Path | str | None) -> TaskSizing:
    """settings.task_sizing: whole numbers of at least 1; a max below its warn is lifted to it."""
    key, sizing = settings_fields.mapping("task_sizing")
    sub = FieldReader(Document(meta=dict(sizing), body="", text=""), path, _SIZING_KEYS)
    try:
        warn_steps = int(sub.number("warn_steps", default=DEFAULT_WARN_STEPS, minimum=1, integer=True))
        max_steps = int(sub.number("max_steps", default=DEFAULT_MAX_PLAN_STEPS, minimum=1, integer=True))
        warn_files = int(sub.number("warn_distinct_files", default=DEFAULT_WARN_DISTINCT_FILES, minimum=1, integer=True))
        max_files = int(sub.number("max_distinct_files", default=DEFAULT_MAX_DISTINCT_FILES, minimum=1, integer=True))
    except InvalidDocument as err:
        raise InvalidDocument(f"task_sizing: {err.message}", code="SCHEMA_ERROR") from None
    return TaskSizing(warn_steps, max(warn_steps, max_steps), warn_files, max(warn_files, max_files))


WORKER_ALIASES: Mapping[str, tuple[str, ...]] = {
    "type": ("role",),
    "blocked_reason": ("blockedReason", "last_error", "lastError"),
    "needs_from": ("needsFrom",),
    "blocked_task": ("blockedTask",),
    "blocked_step": ("blockedStep", "currentStepId"),
    "blocked_since": ("blockedSince", "blocked_at"),
    "heartbeat": ("lastActivityAt", "last_activity", "last_heartbeat"),
    "last_epic": ("epicId", "epic_id", "epic"),
    "created": ("created_at", "createdAt"),
    "updated": ("updated_at", "updatedAt"),
}


def parse_worker(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Worker:
    """A Worker from a parsed document. Raises InvalidDocument SCHEMA_ERROR."""
    formats.check_document("worker", doc, path)
    fields = FieldReader(doc, path, WORKER_ALIASES)
    worker_id = _check_id(fields, fallback_id, "worker")
    status = fields.choice("status", WORKER_STATUSES, "IDLE", _upper_in(WORKER_STATUSES))
    return Worker(
        id=worker_id,
        type=_stripped(_text(fields, "type")),
        # Derived statuses written by hand (IDLE, CODING, ...) carry no information of their own.
        status=status if status in STORED_WORKER_STATUSES else None,
        blocked_reason=_text(fields, "blocked_reason"),
        needs_from=_text(fields, "needs_from"),
        blocked_task=_stripped(_text(fields, "blocked_task")),
        blocked_step=_stripped(_text(fields, "blocked_step")),
        blocked_since=_text(fields, "blocked_since"),
        heartbeat=_text(fields, "heartbeat"),
        last_epic=_stripped(_text(fields, "last_epic")),
        notes=_body_text(doc),
        created=_text(fields, "created"),
        updated=_text(fields, "updated"),
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
    formats.check_document("team", doc, path)
    fields = FieldReader(doc, path, TEAM_ALIASES)
    team_id = _check_id(fields, fallback_id, "team")
    name = _text(fields, "name")
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
        members=tuple(dict.fromkeys(fields.items("members", comma_separated=True))),
        created=_text(fields, "created"),
        updated=_text(fields, "updated"),
    )


PROPOSAL_ALIASES: Mapping[str, tuple[str, ...]] = {
    "task": ("taskId",),
    "worker": ("workerId",),
    "proposal_type": ("proposalType", "type"),
    "target_scope": ("targetScope", "scope"),
    "current_value": ("currentValue",),
    "proposed_value": ("proposedValue",),
    "rail_list": ("railList", "globalList", "global_list"),
    "resolved_by": ("resolvedBy",),
    "resolved": ("resolvedAt", "resolved_at"),
    "created": ("created_at", "createdAt"),
}


def parse_proposal(doc: Document, path: Path | str | None = None, *, fallback_id: str) -> Proposal:
    """A Proposal from a parsed document. Raises InvalidDocument SCHEMA_ERROR."""
    formats.check_document("proposal", doc, path)
    fields = FieldReader(doc, path, PROPOSAL_ALIASES)
    return Proposal(
        id=_check_id(fields, fallback_id, "proposal"),
        task=_stripped(_text(fields, "task")),
        worker=_stripped(_text(fields, "worker")),
        proposal_type=fields.choice("proposal_type", PROPOSAL_TYPES, "ADD_RAIL", _upper_in(PROPOSAL_TYPES)),
        target_scope=fields.choice("target_scope", PROPOSAL_SCOPES, "TASK", _upper_in(PROPOSAL_SCOPES)),
        current_value=_text(fields, "current_value"),
        proposed_value=_text(fields, "proposed_value") or "",
        rail_list=_stripped(_text(fields, "rail_list")),
        reason=_body_text(doc),
        status=fields.choice("status", PROPOSAL_STATUSES, "PENDING", _upper_in(PROPOSAL_STATUSES)),
        resolved_by=_text(fields, "resolved_by"),
        resolved=_text(fields, "resolved"),
        created=_text(fields, "created"),
    )


# --------------------------------------------------------------------------- writing files


@dataclass(frozen=True, slots=True)
class _Key:
    """How one dataclass field is written: under `key`, always (`required`) or only when set."""

    field: str
    required: bool = False
    encode: Callable[[Any], Any] | None = None


def step_meta(step: Step) -> dict[str, Any]:
    """A plan step as the task file stores it."""
    meta: dict[str, Any] = {"id": step.id, "description": step.description, "status": step.status}
    if step.affected_files:
        meta["affected_files"] = list(step.affected_files)
    if step.new_files:
        meta["new_files"] = list(step.new_files)
    if step.modified_files:
        meta["modified_files"] = list(step.modified_files)
    for name in ("note", "started", "completed"):
        if getattr(step, name) is not None:
            meta[name] = getattr(step, name)
    if step.amendments:
        meta["amendments"] = plain(step.amendments)
    if step.verification:
        meta["verification"] = plain(step.verification)
    return meta


def _plan_to_meta(plan: tuple[Step, ...]) -> list[dict[str, Any]]:
    return [step_meta(step) for step in plan]


TASK_KEYS = (
    _Key("id", True),
    _Key("epic", True),
    _Key("title", True),
    _Key("status", True),
    _Key("priority", True),
    _Key("order", True),
    _Key("assigned_worker"),
    _Key("depends_on", encode=list),
    _Key("parent"),
    _Key("definition_of_done", encode=list),
    _Key("task_rails", encode=list),
    _Key("plan", encode=_plan_to_meta),
    _Key("reopen_count"),
    _Key("reopen_reason"),
    _Key("max_reopens"),
    _Key("pr_link"),
    _Key("created_by", True),
    _Key("test_file"),
    _Key("work_summary"),
    _Key("review_summary"),
    _Key("first_claimed"),
    _Key("created", True),
    _Key("updated", True),
    _Key("plan_submitted"),
    _Key("plan_approved"),
    _Key("work_started"),
    _Key("review_started"),
    _Key("completed"),
    _Key("verification", encode=plain),
    _Key("handoffs", encode=plain),
    _Key("prior_attempt", encode=plain),
    _Key("budget_ms"),
    _Key("critique", encode=plain),
    _Key("context_fetched_by", encode=list),
    _Key("needs_human_review"),
    _Key("rejection_history", encode=plain),
    _Key("failed_dod_items", encode=plain),
    _Key("plan_size_warnings", encode=list),
    _Key("type"),
)
EPIC_KEYS = (
    _Key("id", True),
    _Key("title", True),
    _Key("status", True),
    _Key("order", True),
    _Key("epic_rails", encode=list),
    _Key("architecture_notes"),
    _Key("created", True),
    _Key("updated", True),
)
WORKER_KEYS = (
    _Key("id", True),
    _Key("type"),
    _Key("status"),
    _Key("blocked_reason"),
    _Key("needs_from"),
    _Key("blocked_task"),
    _Key("blocked_step"),
    _Key("blocked_since"),
    _Key("heartbeat"),
    _Key("last_epic"),
    _Key("created", True),
    _Key("updated", True),
)
TEAM_KEYS = (
    _Key("id", True),
    _Key("name", True),
    _Key("role"),
    _Key("max_size", True),
    _Key("members", True, encode=list),
    _Key("created", True),
    _Key("updated", True),
)
PROPOSAL_KEYS = (
    _Key("id", True),
    _Key("task"),
    _Key("worker"),
    _Key("proposal_type", True),
    _Key("target_scope", True),
    _Key("current_value"),
    _Key("proposed_value", True),
    _Key("rail_list"),
    _Key("status", True),
    _Key("resolved_by"),
    _Key("resolved"),
    _Key("created", True),
)


def _empty(value: Any) -> bool:
    """Whether an optional key is left out: no value, an empty text or list, 0, or false (a
    flag is written only while it is set)."""
    if value is None:
        return True
    if type(value) in (str, tuple, dict) or isinstance(value, Mapping):  # the exact types first: the ABC's check is slow
        return not value
    return value is False or value == "" or value == () or value == 0 and not isinstance(value, bool) and not isinstance(value, float)


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
    return document.render(formats.stamp("task", _meta(task, TASK_KEYS)), _body(task.description))


def render_epic(epic: Epic) -> str:
    """The text of a new epic file."""
    return document.render(formats.stamp("epic", _meta(epic, EPIC_KEYS)), _body(epic.description))


def render_worker(worker: Worker) -> str:
    """The text of a new worker file."""
    return document.render(formats.stamp("worker", _meta(worker, WORKER_KEYS)), _body(worker.notes))


def render_team(team: Team) -> str:
    """The text of a new team file."""
    return document.render(formats.stamp("team", _meta(team, TEAM_KEYS)), "")


def render_proposal(proposal: Proposal) -> str:
    """The text of a new rail proposal file (the reason is the body)."""
    return document.render(formats.stamp("proposal", _meta(proposal, PROPOSAL_KEYS)), _body(proposal.reason))


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
            "stale_worker_timeout_ms": project.settings.stale_worker_timeout_ms,
            "require_verification": project.settings.require_verification,
            "chat_max_agent_hops": project.settings.chat_max_agent_hops,
            "task_sizing": {
                "warn_steps": project.settings.task_sizing.warn_steps,
                "max_steps": project.settings.task_sizing.max_steps,
                "warn_distinct_files": project.settings.task_sizing.warn_distinct_files,
                "max_distinct_files": project.settings.task_sizing.max_distinct_files,
            },
            "consolidation_branch": project.settings.consolidation_branch or "",
        },
        "created": project.created,
        "updated": project.updated,
    }
    return document.render(formats.stamp("project", meta), _body(project.description))


def edit_text(doc: Document, old: Any, new: Any, kind: str, path: Path | str | None = None) -> str | None:
    """The document's text with `new`'s values where they differ from `old`'s; None if none do.

    Each changed field is written to the key the file already uses for it (an alias in any
    letter case), so a hand-written `definitionOfDone:` stays that key; other lines, comments,
    unknown keys and, unless the body field changed, the body keep their bytes.
    """
    edited = edit_text_read(doc, old, new, kind, path)
    return None if edited is None else edited[0]


def edit_text_read(doc: Document, old: Any, new: Any, kind: str, path: Path | str | None = None) -> tuple[str, document.FrontmatterRead | None] | None:
    """`edit_text`'s text, and what its frontmatter reads as when the edit's check read it
    back (see `document.edit_frontmatter_read`); None when no field changed."""
    keys, aliases, body_field = _EDITABLE[kind]
    fields = FieldReader(doc, path, aliases)
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
    assert body_field is not None or not body_changed
    if not changes and not body_changed:
        return None
    text, read = document.edit_frontmatter_read(doc.text, changes, path, parsed=doc) if changes else (doc.text, None)
    if body_changed:
        edited = doc if text == doc.text else document.parse(text, path, known=read)
        stale = document.find_key(edited.meta, "description")
        if stale is not None:
            # A hand-written `description:` key moves into the body, where descriptions live.
            text, read = document.edit_frontmatter_read(text, {stale: document.DELETE}, path, parsed=edited)
            edited = document.parse(text, path, known=read)
        text = text[: len(text) - len(edited.body)] + _body(getattr(new, str(body_field)))
        # The frontmatter is the one just read (a new body leaves it as it is).
        read = document.FrontmatterRead(edited.frontmatter_text, edited.meta) if edited.has_frontmatter else None
    return text, read


def edit_project_rails(doc: Document, list_name: str, values: Sequence[str], path: Path | str | None = None) -> str:
    """`project.md`'s text with one list of its global rails set to `values`, under the keys
    the file already spells (`globalRails:` / `forbiddenPatterns:` stay as written)."""
    fields = FieldReader(doc, path, PROJECT_ALIASES)
    key = fields.key("global_rails") or "global_rails"
    _key, current = fields.mapping("global_rails")
    rails = dict(current)
    sub = FieldReader(Document(meta=rails, body="", text=""), path, _RAIL_KEYS).key(list_name) or list_name
    rails[sub] = list(values)
    return document.edit_frontmatter(doc.text, {key: rails}, path)


_EDITABLE: Mapping[str, tuple[Sequence[_Key], Mapping[str, tuple[str, ...]], str | None]] = {
    "task": (TASK_KEYS, TASK_ALIASES, "description"),
    "epic": (EPIC_KEYS, EPIC_ALIASES, "description"),
    "worker": (WORKER_KEYS, WORKER_ALIASES, None),
    "team": (TEAM_KEYS, TEAM_ALIASES, None),
    "proposal": (PROPOSAL_KEYS, PROPOSAL_ALIASES, None),
}


# --------------------------------------------------------------------------- the activity log


def event_to_dict(event: Event) -> dict[str, Any]:
    """One activity log entry, as stored on its JSONL line and as get_activity_log returns it."""
    data: dict[str, Any] = {"id": event.id, "timestamp": event.timestamp, "projectId": event.project}
    for key, value in (("epicId", event.epic), ("taskId", event.task), ("workerId", event.worker)):
        if value is not None:
            data[key] = value
    data["event"] = event.event
    data["payload"] = dict(event.payload)
    return data


# The lines a git merge left where it could not join two sides.
CONFLICT_MARKERS = (b"<<<<<<<", b"=======", b">>>>>>>")


def json_lines(data: bytes, shown: str, *, max_line_bytes: int, what: str = "line") -> tuple[list[tuple[int, Any]], list[MossError]]:
    """Each JSON line of a log's bytes (the activity log, a chat channel, a task's comments)
    decoded, with its line number, and each line that cannot be: one too long, a conflict
    marker, one that is not JSON. Blank lines are neither."""
    records: list[tuple[int, Any]] = []
    problems: list[MossError] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        if len(raw) > max_line_bytes:
            problems.append(InvalidDocument(f"{what} is over {max_line_bytes} bytes", code="FILE_TOO_LARGE", path=shown, line=number))
        elif raw.startswith(CONFLICT_MARKERS):
            problems.append(InvalidDocument("a git conflict marker: finish the merge", code="MERGE_CONFLICT", path=shown, line=number))
        else:
            try:
                records.append((number, structured.loads_json(raw.decode("utf-8"), path=shown, line=number)))
            except (UnicodeDecodeError, ValueError) as exc:
                problems.append(InvalidDocument(f"{what} is not JSON: {exc}", code="INVALID_DOCUMENT", path=shown, line=number))
            except InvalidDocument as err:
                problems.append(err)
    return records, problems


def parse_event(record: Any, path: Path | str | None = None, line: int | None = None) -> Event:
    """An Event from one decoded JSONL record. Raises InvalidDocument SCHEMA_ERROR."""

    def fail(message: str) -> InvalidDocument:
        return InvalidDocument(message, code="SCHEMA_ERROR", path=path, line=line)

    if not isinstance(record, dict):
        raise fail("an activity record must be a JSON object")
    formats.check_record("activity", record, path, line)
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
    return Event(
        id=texts["id"],
        timestamp=texts["timestamp"],
        event=texts["event"],
        project=texts["projectId"],
        epic=texts["epicId"],
        task=texts["taskId"],
        worker=texts["workerId"],
        payload=payload,
    )


# --------------------------------------------------------------------------- merging clones

# The keys a task file may hold its plan under: the merge driver's rule covers each.
PLAN_KEYS = ("plan", *TASK_ALIASES["plan"])
_STEP_ID_KEYS = ("id", *_STEP_ALIASES["id"])
_AMENDMENT_TIME_KEYS = ("amended", "amendedAt", "amended_at")


def merge_plans(base: Any, ours: Any, theirs: Any) -> Any:
    """The merge driver's rule for a task's `plan:` changed on both sides: step by step (the
    same steps, by id, in the same order, on both sides), each step's keys merged three ways;
    a step's `amendments` are merged by amendment id (`merge_amendments`). Anything else (one
    side re-planned, both changed one key of a step differently) is CONFLICT, for a person."""
    if not _steps(ours) or not _steps(theirs):
        return CONFLICT
    ids = [_step_id(step) for step in ours]
    if None in ids or ids != [_step_id(step) for step in theirs]:
        return CONFLICT
    before = {_step_id(step): step for step in base} if _steps(base) else {}
    merged: list[dict[str, Any]] = []
    for mine, other in zip(ours, theirs, strict=True):
        old = before.get(_step_id(mine), {})
        step: dict[str, Any] = {}
        for key in [*mine, *(k for k in other if k not in mine), *(k for k in old if k not in mine and k not in other)]:
            rule = merge_amendments if key == "amendments" else None
            value = merge_value(old.get(key, MISSING), mine.get(key, MISSING), other.get(key, MISSING), rule=rule, key=key)
            if value is CONFLICT:
                return CONFLICT
            if value is not MISSING:
                step[key] = value
        merged.append(step)
    return merged


def merge_amendments(base: Any, ours: Any, theirs: Any) -> Any:
    """Two sides' amendments of one step, united by id: one added on each side are both kept,
    one resolved (approved, rejected) on one side takes that side's change, in the order they
    were made (time, then id), so both clones' merges agree. CONFLICT for amendments without
    ids or one amendment changed differently on both sides."""
    sides = [_by_id(value) for value in (base if base is not MISSING else [], ours, theirs)]
    if any(side is None for side in sides):
        return CONFLICT
    old, mine, other = (side or {} for side in sides)
    merged: list[dict[str, Any]] = []
    for key in dict.fromkeys([*mine, *other, *old]):
        value = merge_value(old.get(key, MISSING), mine.get(key, MISSING), other.get(key, MISSING), key=key)
        if value is CONFLICT:
            return CONFLICT
        if value is not MISSING:
            merged.append(value)
    return sorted(merged, key=lambda item: (str(next((item[k] for k in _AMENDMENT_TIME_KEYS if k in item), "")), str(_amendment_id(item))))


def _steps(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(step, dict) for step in value)


def _step_id(step: Mapping[str, Any]) -> str | None:
    found = next((step[key] for key in _STEP_ID_KEYS if key in step), None)
    return str(found) if isinstance(found, str | int) and not isinstance(found, bool) else None


def _amendment_id(item: Mapping[str, Any]) -> str | None:
    found = item.get("id", item.get("amendmentId"))
    return found if isinstance(found, str) and found else None


def _by_id(value: Any) -> dict[str, dict[str, Any]] | None:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        return None
    found = {_amendment_id(item): item for item in value}
    return None if None in found or len(found) != len(value) else found  # type: ignore[return-value]

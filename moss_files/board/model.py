"""The board's vocabulary and records (Moe's task workflow): statuses, priorities, roles, the
dataclasses of epics, tasks, workers, teams and rail proposals, and the queue order of tasks.

Core layer: pure values and checks; imports only the foundation. One kind of task: Moe's fields
(plan steps, definition of done, rails, reopen count) merged with LoopFlow's (priority,
depends_on, acceptance criteria, test file). The task file is the truth about a task and about
who holds it; a worker's status is derived from the tasks assigned to it, except BLOCKED and
DEAD, which its own file records.

The rest of the board's core: `files` (the file format), `shapes` (the JSON results) and
`rules` (the state machine, plans and rails, dependencies, claims, queries).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moss_files.foundation import arguments
from moss_files.foundation.errors import InvalidRequest, MossError
from moss_files.foundation.ids import is_safe_id

# --------------------------------------------------------------------------- vocabulary

STATUSES = ("BACKLOG", "PLANNING", "AWAITING_APPROVAL", "WORKING", "REVIEW", "DONE", "ARCHIVED")
ACTIVE = ("PLANNING", "AWAITING_APPROVAL", "WORKING", "REVIEW")  # a task someone holds
CLAIMABLE = ("PLANNING", "WORKING", "REVIEW")  # agents claim these; the rest are human-gated
PRIORITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW")
STEP_STATUSES = ("PENDING", "IN_PROGRESS", "COMPLETED")
EPIC_STATUSES = ("PLANNED", "ACTIVE", "COMPLETED", "ARCHIVED")
WORKER_STATUSES = ("IDLE", "PLANNING", "AWAITING_APPROVAL", "CODING", "REVIEWING", "BLOCKED", "GOVERNING", "STALE", "DEAD")
# The only statuses a worker file holds: BLOCKED (it said so), GOVERNING (it entered
# governance), STALE (its lease expired and its task was released), DEAD (deregistered, or
# declared dead by hand). STALE and DEAD workers are refused with LEASE_EXPIRED until they
# claim again.
STORED_WORKER_STATUSES = ("BLOCKED", "GOVERNING", "STALE", "DEAD")
GONE_WORKER_STATUSES = ("STALE", "DEAD")
ROLES = ("architect", "worker", "qa", "governor")
APPROVAL_MODES = ("CONTROL", "SPEED", "TURBO")
PROPOSAL_TYPES = ("ADD_RAIL", "MODIFY_RAIL", "REMOVE_RAIL")
PROPOSAL_SCOPES = ("GLOBAL", "EPIC", "TASK")
PROPOSAL_STATUSES = ("PENDING", "APPROVED", "REJECTED")
CREATORS = ("HUMAN", "WORKER")

_STATUS_ALIASES = {
    "TODO": "BACKLOG",
    "OPEN": "BACKLOG",
    "IN_PROGRESS": "WORKING",
    "DOING": "WORKING",
    "IN_REVIEW": "REVIEW",
    "AWAITING": "AWAITING_APPROVAL",
    "CLOSED": "DONE",
    "COMPLETE": "DONE",
    "COMPLETED": "DONE",
}
# Other spellings a priority is taken in (LoopFlow's and cortical-stack's P0-P3, Moe's words);
# `moss task new --help` lists them.
PRIORITY_ALIASES = {"P0": "CRITICAL", "URGENT": "CRITICAL", "P1": "HIGH", "P2": "MEDIUM", "NORMAL": "MEDIUM", "P3": "LOW"}

DEFAULT_PRIORITY = "MEDIUM"
DEFAULT_MAX_REOPENS = 3
DEFAULT_SPEED_DELAY_MS = 2000
DEFAULT_TEAM_SIZE = 10
# Moe's staleWorkerTimeoutMs: a worker silent for longer loses the task it holds. 0 turns
# leases off (tasks are then freed only by release, deregistration or a human).
DEFAULT_LEASE_MS = 1_800_000
DEFAULT_CHAT_MAX_AGENT_HOPS = 4
MAX_NAME_CHARS = 64
# Moe's task sizing (settings.taskSizing): a plan past a warn threshold is accepted with a
# warning, one past a max threshold is refused; files are counted across the whole plan.
DEFAULT_WARN_STEPS = 8
DEFAULT_MAX_PLAN_STEPS = 12
DEFAULT_WARN_DISTINCT_FILES = 5
DEFAULT_MAX_DISTINCT_FILES = 10


def is_valid_name(text: str) -> bool:
    """Whether `text` can be an id (and so a file name): letters, digits, '.', '_', '-'."""
    return is_safe_id(text, max_length=MAX_NAME_CHARS)


def check_name(value: str | None, what: str) -> str:
    """`value` as an id or worker name, stripped. Raises InvalidRequest for anything else."""
    text = arguments.required(value, what)
    if not is_valid_name(text):
        raise arguments.refuse(what, f"{value!r} may hold only letters, digits, '.', '_' and '-' (at most {MAX_NAME_CHARS})")
    return text


def normalize_status(value: str) -> str | None:
    """A task status in canonical form (`in progress` -> WORKING), or None if unknown."""
    word = re.sub(r"[\s-]+", "_", value.strip()).upper()
    word = _STATUS_ALIASES.get(word, word)
    return word if word in STATUSES else None


def normalize_priority(value: str) -> str | None:
    """A priority in canonical form (`high`, `P1` -> HIGH), or None if unknown."""
    word = value.strip().upper()
    word = PRIORITY_ALIASES.get(word, word)
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


def check_statuses(values: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    """Task statuses from user input, each once, in the order given (one text is a list of
    one). Raises InvalidRequest SCHEMA_ERROR for an unknown status."""
    if values is None:
        return ()
    items = [values] if isinstance(values, str) else values
    return tuple(dict.fromkeys(check_status(item, what) for item in items))


def check_choice(value: Any, allowed: Sequence[str], what: str, *, upper: bool = True) -> str:
    """`value` as one of `allowed` (case-insensitive). Raises InvalidRequest SCHEMA_ERROR."""
    if isinstance(value, str):
        word = value.strip().upper() if upper else value.strip().lower()
        if word in allowed:
            return word
    raise InvalidRequest(f"{what} {value!r} is not one of {', '.join(allowed)}", code="SCHEMA_ERROR", details={"field": what})


# --------------------------------------------------------------------------- records


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
    # Each amendment: {id, description, reason, amended_by, amended, status PENDING |
    # APPROVED | REJECTED, resolved_by?, resolved?}; the original description is never rewritten.
    amendments: tuple[Mapping[str, Any], ...] = ()
    # What the worker reported when completing the step (see `evidence`).
    verification: Mapping[str, Any] | None = None
    # Files the step creates: exempt from submit_plan's check that affected files exist.
    new_files: tuple[str, ...] = ()


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
    max_reopens: int | None = None  # Moe's task maxReopens: this task's own reopen budget, before the project's
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
    verification: Mapping[str, Any] | None = None  # evidence given with complete_task
    handoffs: tuple[Mapping[str, Any], ...] = ()  # release notes, newest first (Moe's priorHandoffs)
    prior_attempt: Mapping[str, Any] | None = None  # the plan a request_replan set aside
    budget_ms: int | None = None  # Moe's budget.wallClockMs: first claim to DONE
    critique: Mapping[str, Any] | None = None  # a governor's plan critique {verdict, concerns, reviewed_by, reviewed}
    # The holders that read the task's context (get_context) since it last changed hands
    # (Moe's contextFetchedBy): start_step and the QA verdicts require it of a worker.
    context_fetched_by: tuple[str, ...] = ()
    # QA's rejections, newest first ({reason, rejected, reopen_count, failed_dod_items?,
    # issues?}), and the definition-of-done items they named ({item, rejected, rejected_by}),
    # oldest first, since the plan was last submitted: the same item twice sends the task
    # back to PLANNING. Both bounded (MAX_REJECTION_HISTORY, MAX_FAILED_DOD_ITEMS).
    rejection_history: tuple[Mapping[str, Any], ...] = ()
    failed_dod_items: tuple[Mapping[str, Any], ...] = ()
    needs_human_review: bool = False  # parked in REVIEW past the hard reopen cap, for a human
    plan_size_warnings: tuple[str, ...] = ()  # what the size gate warned when the plan was submitted
    type: str | None = None  # what kind of work: bug, feature, chore, … (free text; Beads' issue_type, Backlog.md's type)
    # Where an imported task came from: {system, id, fields} (`imported_from`, `source_id` and
    # the source's fields kept verbatim, `source_fields`); None for a task made here.
    source: Mapping[str, Any] | None = None


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
    source: Mapping[str, Any] | None = None  # where an imported epic came from (as Task.source)


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
class TaskSizing:
    """Moe's plan-size gate: warn past `warn_*`, refuse past `max_*` (a max below its warn is
    lifted to the warn value, so a partial edit cannot invert the bands)."""

    warn_steps: int = DEFAULT_WARN_STEPS
    max_steps: int = DEFAULT_MAX_PLAN_STEPS
    warn_distinct_files: int = DEFAULT_WARN_DISTINCT_FILES
    max_distinct_files: int = DEFAULT_MAX_DISTINCT_FILES


@dataclass(frozen=True, slots=True)
class Settings:
    """Board settings; keys the toolkit does not know are kept in `extra` and shown as they are."""

    approval_mode: str = "CONTROL"
    speed_mode_delay_ms: int = DEFAULT_SPEED_DELAY_MS
    max_reopens: int = DEFAULT_MAX_REOPENS
    max_team_size: int = DEFAULT_TEAM_SIZE
    stale_worker_timeout_ms: int = DEFAULT_LEASE_MS
    require_verification: bool = False
    chat_max_agent_hops: int = DEFAULT_CHAT_MAX_AGENT_HOPS
    task_sizing: TaskSizing = field(default_factory=TaskSizing)
    # Moe's consolidationBranch: complete_task is refused on a branch that does not match it
    # (a name, or a glob whose only wildcard is `*`); None leaves branches alone.
    consolidation_branch: str | None = None
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
    heartbeat: str | None = None  # the last sign of life; a held task's lease runs from it
    last_epic: str | None = None  # the epic of its last claim (Moe's worker.epicId): claims prefer it
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
    rail_list: str | None = None  # for a GLOBAL proposal: custom_rules, forbidden_patterns, required_patterns or tech_stack
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


def default_project_id(name: str) -> str:
    """The id a board without `project.md` goes by: `PROJ-` and its folder's name."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "board"
    return f"PROJ-{slug}"


def default_project(name: str) -> Project:
    """The settings of a board that has no `project.md` (yet)."""
    return Project(id=default_project_id(name), name=name)


# --------------------------------------------------------------------------- queue order


# The task fields the queue order reads (`rank_values` takes them in this order).
RANK_FIELDS = ("priority", "epic", "order", "created", "id")


def rank_key(task: Task, epics: Mapping[str, Epic]) -> tuple[Any, ...]:
    """Claim and queue order: priority, then the epic's order, the task's order, age and id."""
    return rank_values((task.priority, task.epic, task.order, task.created, task.id), epics)


def rank_values(values: tuple[Any, ...], epics: Mapping[str, Epic]) -> tuple[Any, ...]:
    """`rank_key` of a task given as the values of its RANK_FIELDS (a claim ranks a thousand
    candidates' cached rows without building their tasks)."""
    priority, epic_id, order, created, task_id = values
    epic = epics.get(epic_id)
    return (PRIORITIES.index(priority), epic.order if epic else float("inf"), epic_id, order, created or "", task_id)


def board_key(task: Task, epics: Mapping[str, Epic]) -> tuple[Any, ...]:
    """Display order: by epic (its order), then the task's order within it."""
    epic = epics.get(task.epic)
    return (epic.order if epic else float("inf"), task.epic, task.order, task.created or "", task.id)


def next_order(tasks: Iterable[Task], epic_id: str) -> int | float:
    """The order of a new task at the end of its epic."""
    orders = [task.order for task in tasks if task.epic == epic_id]
    return (max(orders) // 1 + 1) if orders else 1

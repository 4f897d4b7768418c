"""The board's rules: the task state machine, plans and rails, dependencies, claims, and the
queries over a board. Core layer (pure: records and times in, records, plans and errors out;
no I/O, no clock: times come in as RFC 3339 strings or datetimes).

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

import itertools
import re
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from operator import attrgetter
from typing import Any

from moss_files.board.model import (
    ACTIVE,
    CLAIMABLE,
    GONE_WORKER_STATUSES,
    RANK_FIELDS,
    Board,
    Epic,
    Event,
    Project,
    Rails,
    Settings,
    Step,
    Task,
    TaskSizing,
    Worker,
    rank_key,
    rank_values,
)
from moss_files.foundation.context import AGENT
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest

MAX_STEPS = 100
MAX_STEP_CHARS = 10_000
MAX_FILES_PER_STEP = 50

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
_BACKWARD = frozenset(
    {("AWAITING_APPROVAL", "PLANNING"), ("WORKING", "PLANNING"), ("REVIEW", "WORKING"), ("REVIEW", "PLANNING"), ("DONE", "WORKING"), ("DONE", "PLANNING")}
)
# Moves that keep the task's holder: the architect who planned waits for the approval, and
# revises the plan when it is rejected. Every other move hands the task to the next column's
# role, so the holder is cleared and the task becomes claimable there.
_KEEPS_HOLDER = frozenset({("PLANNING", "AWAITING_APPROVAL"), ("AWAITING_APPROVAL", "PLANNING")})
_ROLE_OF_STATUS = {"PLANNING": "architect", "WORKING": "worker", "REVIEW": "qa"}
_WORKER_STATUS_OF_TASK = {"PLANNING": "PLANNING", "AWAITING_APPROVAL": "AWAITING_APPROVAL", "WORKING": "CODING", "REVIEW": "REVIEWING"}


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
        raise Conflict(
            f"a {source} task cannot move to {target}", code="INVALID_TRANSITION", details={"taskId": task.id, "from": source, "to": target, "allowed": allowed}
        )
    if target == "AWAITING_APPROVAL" and not task.plan:
        raise Conflict(
            "a task awaits approval only with a plan: submit one first", code="INVALID_TRANSITION", details={"taskId": task.id, "from": source, "to": target}
        )
    if target == "REVIEW":
        pending = [step.id for step in task.plan if step.status != "COMPLETED"]
        if pending:
            raise Conflict(
                f"{len(pending)} plan step(s) are not completed",
                code="INVALID_TRANSITION",
                details={"taskId": task.id, "from": source, "to": target, "pendingSteps": pending},
            )
    if (source, target) in _BACKWARD and not (reason and reason.strip()):
        raise InvalidRequest(f"moving a {source} task back to {target} needs a reason", details={"field": "reason"})


def apply_transition(task: Task, target: str, now: str, *, reason: str | None = None, now_ms: str | None = None) -> Task:
    """`task` moved to `target` (checked with `check_transition` first): its timestamps, holder,
    reopen count and reason follow the move. The same status returns the task unchanged.
    `now_ms` is the same moment to the millisecond: a plan's submission time keeps it, since
    SPEED mode's delay is counted from it."""
    check_transition(task, target, reason=reason)
    source = task.status
    if target == source:
        return task
    changes: dict[str, Any] = {"status": target, "updated": now}
    if (source, target) not in _KEEPS_HOLDER:
        changes["assigned_worker"] = None
    if target == "AWAITING_APPROVAL":
        changes["plan_submitted"] = now_ms or now
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
    if task.needs_human_review:
        changes["needs_human_review"] = False  # the park is a REVIEW matter: any move out ends it
    return replace(task, **changes)


def reopened_afresh(task: Task) -> Task:
    """`task` after a person's reopen (set_task_status back out of REVIEW or DONE): a new
    attempt, so the failed-item log of the same-item rule starts over (Moe's reopen scrub)."""
    return replace(task, failed_dod_items=(), needs_human_review=False) if task.failed_dod_items or task.needs_human_review else task


def with_holder_context(old: Task, new: Task) -> Task:
    """`new`, whose record of who read its context (`context_fetched_by`) is cleared when the
    task changed hands: whoever holds it next reads the context again (Moe's get_context
    guard), also after a release and a claim by the same worker."""
    if new.context_fetched_by and new.assigned_worker != old.assigned_worker:
        return replace(new, context_fetched_by=())
    return new


def approval_due(task: Task, settings: Settings, now: datetime) -> bool:
    """Whether the approval mode approves `task`'s waiting plan by itself by `now`:
    at once in TURBO, `speed_mode_delay_ms` after submission in SPEED, never in CONTROL.
    SPEED's timer is the submission time in the file, so it survives any restart."""
    if task.status != "AWAITING_APPROVAL" or settings.approval_mode == "CONTROL":
        return False
    if settings.approval_mode == "TURBO":
        return True
    submitted = submission_time(task)
    if submitted is None:
        return True
    return (now - submitted).total_seconds() * 1000 >= settings.speed_mode_delay_ms


def submission_time(task: Task) -> datetime | None:
    """When `task`'s plan was submitted, as SPEED mode counts: to the millisecond as stored;
    a time written to the second only (by hand, by Moe, by an older moss-files) counts from
    the end of its second, so that no plan is ever approved before its delay ran out."""
    submitted = parse_time(task.plan_submitted)
    if submitted is None or submitted.microsecond or "." in (task.plan_submitted or ""):
        return submitted
    return submitted + timedelta(milliseconds=999)


def format_moment(moment: datetime) -> str:
    """A moment as files store times (RFC 3339 UTC, seconds, `Z`)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_moment_ms(moment: datetime) -> str:
    """A moment to the millisecond (RFC 3339 UTC, `Z`), as activity lines and a plan's
    submission time store it."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(value: str | None) -> datetime | None:
    """A timestamp string as an aware datetime (None when absent or unreadable)."""
    if not value:
        return None
    if type(value) is str:
        return _parse_time_text(value)
    return _parse_time_text.__wrapped__(value)


@lru_cache(maxsize=4096)  # each claim weighs the lease of every held task's worker: the same stamps
def _parse_time_text(value: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


# --------------------------------------------------------------------------- workers


def worker_status(board: Board, worker: Worker) -> str:
    """A worker's status: what its file records (BLOCKED, DEAD), else derived from its task."""
    if worker.status is not None:
        return worker.status
    task = board.active_task_of(worker.id)
    return _WORKER_STATUS_OF_TASK.get(task.status, "IDLE") if task else "IDLE"


# --------------------------------------------------------------------------- plans and rails


def parse_steps(steps: Any) -> tuple[Step, ...]:
    """Plan steps from submit_plan's `steps` argument, numbered `step-1`, `step-2`, ...

    Each step is `{description, affectedFiles?, newFiles?}` (or its description alone): at
    most MAX_STEPS steps, descriptions of at most MAX_STEP_CHARS characters, at most
    MAX_FILES_PER_STEP files in each list, every path relative to the project.
    Raises InvalidRequest for a missing or oversized plan, an empty description, or a path
    that is absolute or climbs out of the project with `..`.
    """
    if not isinstance(steps, list) or not steps:
        raise InvalidRequest("steps must be a non-empty list of {description, affectedFiles?, newFiles?}", details={"field": "steps"})
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
        affected = _step_paths(item.get("affectedFiles", item.get("affected_files")), index, "affectedFiles")
        created = _step_paths(item.get("newFiles", item.get("new_files")), index, "newFiles")
        out.append(Step(id=f"step-{index}", description=description.strip(), affected_files=affected, new_files=created))
    return tuple(out)


def _step_paths(files: Any, index: int, field: str) -> tuple[str, ...]:
    if files is None:
        return ()
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise InvalidRequest(f"step {index}'s {field} must be a list of paths", details={"field": "steps", "step": index})
    if len(files) > MAX_FILES_PER_STEP:
        raise InvalidRequest(f"step {index} lists more than {MAX_FILES_PER_STEP} {field}", details={"field": "steps", "step": index})
    return tuple(dict.fromkeys(check_project_path(f, index, field) for f in files))


def check_project_path(raw: str, step: int | None = None, field: str = "affectedFiles") -> str:
    """A project-relative path in normal form (`./a//b` -> `a/b`).

    Raises InvalidRequest for an empty, absolute or `..`-climbing path.
    """
    text = raw.strip().replace("\\", "/")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if not parts or text.startswith("/") or re.match(r"^[A-Za-z]:", text) or ".." in parts:
        raise InvalidRequest(f"file {raw!r} must be a path relative to the project, without '..'", details={"field": field, "step": step, "path": raw})
    return "/".join(parts)


@dataclass(frozen=True, slots=True)
class PlanSize:
    """What the size gate found: the counts, the warnings past the warn thresholds, and
    (past a max threshold) why the plan is refused."""

    steps: int
    distinct_files: int
    new_files: int
    warnings: tuple[str, ...]
    too_large: str | None
    sizing: TaskSizing


def assess_plan_size(plan: Sequence[Step], sizing: TaskSizing) -> PlanSize:
    """Moe's plan-size gate. Files count once across the plan, affected and new alike (a
    file declared new cannot dodge the count). Past a max threshold the plan is too large
    and nothing is warned; otherwise each warn threshold passed adds a warning. A threshold
    is passed by going over it: 8 steps are quiet, 9 warn, 12 are accepted, 13 refused."""
    files = {path for step in plan for path in (*step.affected_files, *step.new_files)}
    created = {path for step in plan for path in step.new_files}
    steps, distinct = len(plan), len(files)
    over: list[str] = []
    if steps > sizing.max_steps:
        over.append(f"{steps} steps (max {sizing.max_steps})")
    if distinct > sizing.max_distinct_files:
        over.append(f"{distinct} distinct files (max {sizing.max_distinct_files})")
    warnings: list[str] = []
    if not over:
        if steps > sizing.warn_steps:
            warnings.append(
                f"Plan has {steps} steps (target <={sizing.warn_steps}); plans over {sizing.max_steps} are refused. Consider splitting the task before it grows."
            )
        if distinct > sizing.warn_distinct_files:
            warnings.append(
                f"Plan touches {distinct} distinct files (target <={sizing.warn_distinct_files}); plans over {sizing.max_distinct_files} are refused. "
                "Small file-disjoint tasks review better and parallelize."
            )
    return PlanSize(steps, distinct, len(created), tuple(warnings), "Plan too large: " + ", ".join(over) if over else None, sizing)


def plan_too_large(task_id: str, size: PlanSize, *, actor: str = AGENT) -> InvalidDocument:
    """The PLAN_TOO_LARGE error (Moe answers CONSTRAINT_VIOLATION): split the task. Its hint
    names the MCP tool for an agent, the command for a person (`actor`)."""
    sizing = size.sizing
    return InvalidDocument(
        f"{size.too_large}. This task is too big for one worker session: split it into smaller tasks "
        f"(each <={sizing.warn_steps} steps, a few files), then resubmit a narrow plan for {task_id}",
        code="PLAN_TOO_LARGE",
        details={
            "taskId": task_id,
            "stepCount": size.steps,
            "distinctFileCount": size.distinct_files,
            "thresholds": {
                "warnSteps": sizing.warn_steps,
                "maxSteps": sizing.max_steps,
                "warnDistinctFiles": sizing.warn_distinct_files,
                "maxDistinctFiles": sizing.max_distinct_files,
            },
        },
        hint=f"{'moe.create_task' if actor == AGENT else 'moss task new'} for each slice; do not merge steps to dodge the cap",
    )


def paths_to_check(plan: Sequence[Step]) -> list[str]:
    """The affected files submit_plan checks exist on disk: each once, leaving out every path
    some step declares in `newFiles` (a file step 1 creates is step 2's affected file)."""
    created = {path for step in plan for path in step.new_files}
    return list(dict.fromkeys(path for step in plan for path in step.affected_files if path not in created))


def missing_paths_error(task_id: str, missing: Sequence[str], root: str) -> InvalidRequest:
    """The INVALID_REQUEST error for affected files that do not exist (details.missingPaths)."""
    shown = ", ".join(missing[:10]) + (f" (+{len(missing) - 10} more)" if len(missing) > 10 else "")
    return InvalidRequest(
        f"the plan cites affectedFiles that do not exist under the project root: {shown}",
        details={"field": "affectedFiles", "taskId": task_id, "missingPaths": list(missing), "projectRoot": root},
        hint="paths are relative to the project root; list a file a step creates in that step's newFiles",
    )


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
    # Files declared new are part of the plan's text: calling a path new cannot smuggle it past a rail.
    texts = [(step.id, " ".join((step.description, *step.affected_files, *step.new_files)).casefold()) for step in plan]
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


def rail_error(violations: Sequence[Violation], *, actor: str = AGENT) -> InvalidDocument:
    """The RAIL_VIOLATION error listing every violation in `details.violations`. Its hint names
    the MCP tool for an agent, the command for a person (`actor`)."""
    parts = []
    for v in violations:
        parts.append(f"forbidden pattern {v.pattern!r} in {v.step_id}" if v.kind == "FORBIDDEN_PATTERN" else f"required pattern {v.pattern!r} missing")
    return InvalidDocument(
        "plan violates the rails: " + "; ".join(parts),
        code="RAIL_VIOLATION",
        details={"violations": [{"kind": v.kind, "pattern": v.pattern, "stepId": v.step_id} for v in violations]},
        hint="revise the plan, or propose a rail change with "
        + ("moe.propose_rail" if actor == AGENT else "moss task propose-rail TASK --value RAIL --reason WHY"),
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
            return path[path.index(node) :] + [node]
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


EPIC_DONE = ("COMPLETED", "ARCHIVED")


def waiting_on(task: Task, tasks: Mapping[str, Task], epics: Mapping[str, Epic] | None = None) -> list[str]:
    """The dependencies of `task` that are not met: a task that is not DONE, an epic that is
    not COMPLETED or ARCHIVED (a dependency may name an epic, as Beads' may), or an id that
    names neither."""
    waits = []
    for dep in task.depends_on:
        found = tasks.get(dep)
        if found is not None:
            if found.status != "DONE":
                waits.append(dep)
            continue
        epic = epics.get(dep) if epics is not None else None
        if epic is None or epic.status not in EPIC_DONE:
            waits.append(dep)
    return waits


def ready_and_blocked(board: Board, epic_id: str | None = None) -> tuple[list[Task], list[tuple[Task, list[str]]]]:
    """Open tasks (not DONE or ARCHIVED) whose dependencies are all DONE, and the others with
    what each waits on; both in queue order."""
    ready: list[Task] = []
    blocked: list[tuple[Task, list[str]]] = []
    for task in sorted(board.tasks.values(), key=lambda t: rank_key(t, board.epics)):
        if task.status in ("DONE", "ARCHIVED") or (epic_id is not None and task.epic != epic_id):
            continue
        waits = waiting_on(task, board.tasks, board.epics)
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
    return worker is None or worker.status not in GONE_WORKER_STATUSES


def plan_claim(
    board: Board,
    statuses: Sequence[str],
    worker_id: str | None,
    *,
    epic_id: str | None = None,
    replace_existing: bool = False,
    blocked: Callable[[Task], bool] | None = None,
    prefer_adjacent: bool = True,
    task_id: str | None = None,
    queue: ClaimQueue | None = None,
) -> ClaimPlan:
    """Choose the task `worker_id` claims next (only `task_id` when given, Moe's explicit
    taskId; `unclaimable` says why it is not offered): with `prefer_adjacent` (Moe's
    preferAdjacentInEpic) first those in the epic of the worker's last claim
    (`Worker.last_epic`), then by priority, epic order and task order.

    Offered: tasks in `statuses` (of `epic_id` when given) that nobody alive holds (a DEAD
    worker's task is offered again), whose epic is not archived and, for WORKING, whose
    dependencies are all DONE; a REVIEW task parked for a person (`needs_human_review`) is not
    offered. A worker holding an active task gets that task back as
    `already`. The solo-worker rule: a task is not offered while another worker, not in a team
    with the claimer, holds a task of the same status in the same epic. With `replace_existing`
    the claimer takes over such a worker's task instead (only when nothing free is left).

    `blocked(task)` says whether a candidate waits on something the board's files other than
    the task's own hold (an unanswered question to a human); it is asked only of candidates
    about to be chosen, so a claim reads few of those files.

    `queue` (a long-lived caller's ClaimQueue) keeps the tasks in claim order from one board
    to the next, so a claim looks at the candidates in order until one is offered instead of
    sorting them all; the plan is the one the sort gives.

    Raises InvalidRequest for bad statuses and Conflict WORKER_CONFLICT when the only tasks
    left are barred by the solo-worker rule.
    """
    if not statuses:
        raise InvalidRequest("statuses must list at least one of " + ", ".join(CLAIMABLE), details={"field": "statuses"})
    bad = [s for s in statuses if s not in CLAIMABLE]
    if bad:
        raise InvalidRequest(
            f"agents claim only {', '.join(CLAIMABLE)} tasks, not {', '.join(bad)}; the other columns are human-gated",
            details={"field": "statuses", "statuses": bad},
        )
    # One pass over the held tasks: the worker's own (`Board.active_task_of`'s), and the
    # others' in the asked columns (the solo-worker rule's rivals).
    mine: list[Task] = []
    holders: dict[tuple[str, str], list[Task]] = {}
    for task in board.tasks.values():
        holder = task.assigned_worker
        if not holder:
            continue
        if holder == worker_id:
            if task.status in ACTIVE:
                mine.append(task)
        elif task.status in statuses and _owner_alive(board, holder):
            holders.setdefault((task.epic, task.status), []).append(task)
    if worker_id is not None and mine:
        return ClaimPlan(already=min(mine, key=lambda t: rank_key(t, board.epics)))
    mates = board.teammates(worker_id) if worker_id else frozenset()

    def rivals(task: Task) -> list[Task]:
        return [held for held in holders.get((task.epic, task.status), ()) if held.assigned_worker not in mates]

    def offered(task: Task) -> bool:
        if task.status not in statuses or (epic_id is not None and task.epic != epic_id):
            return False
        if task_id is not None and task.id != task_id:
            return False
        epic = board.epics.get(task.epic)
        if epic is not None and epic.status == "ARCHIVED":
            return False
        if task.needs_human_review and task.status == "REVIEW":
            return False
        return not (task.status == "WORKING" and waiting_on(task, board.tasks, board.epics))

    def free(task: Task) -> bool:
        return not _owner_alive(board, task.assigned_worker)

    # A task somebody alive holds is never given (only taken over, with `replace_existing`):
    # without that, it is passed over before the (dearer) look at whether it is offered.
    looked_at = offered if replace_existing and worker_id is not None else (lambda task: free(task) and offered(task))
    order = claim_order(board, worker_id, prefer_adjacent and epic_id is None)
    kept = queue.ordered(board, _adjacent_epic(board, worker_id) if prefer_adjacent and epic_id is None else None) if queue is not None else None
    if kept is None:
        candidates: Iterable[Task] = sorted((t for t in board.tasks.values() if looked_at(t)), key=order)
    else:
        candidates = (t for t in kept if looked_at(t))  # looked at in order until one is given
    ranked: list[Task] = []  # the candidates looked at, in claim order: all of them once the loop ends
    conflicts: list[Task] = []
    for task in candidates:
        ranked.append(task)
        if not free(task):
            continue
        barred = rivals(task)
        if not barred and blocked is not None and blocked(task):
            continue
        if not barred:
            dead_owner = task.assigned_worker
            return ClaimPlan(task=task, takeover_from=dead_owner)
        conflicts.extend(barred)
    if worker_id is not None and replace_existing:
        takeable = [
            t
            for t in ranked
            if t.assigned_worker and t.assigned_worker != worker_id and t.assigned_worker not in mates and _owner_alive(board, t.assigned_worker)
        ]
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


def unclaimable(board: Board, task: Task, statuses: Sequence[str], worker_id: str | None, *, epic_id: str | None = None) -> str:
    """Why `plan_claim` does not offer `task` to `worker_id` (an explicit taskId's answer), as
    a sentence; "" when nothing in the board's task and epic files stands in the way."""
    if task.status not in statuses:
        return f"it is {task.status}, not {' or '.join(statuses)}"
    if epic_id is not None and task.epic != epic_id:
        return f"it belongs to epic {task.epic}, not {epic_id}"
    epic = board.epics.get(task.epic)
    if epic is not None and epic.status == "ARCHIVED":
        return f"its epic {task.epic} is archived"
    if task.needs_human_review and task.status == "REVIEW":
        return "it waits for a person's review"
    if task.status == "WORKING" and (waiting := waiting_on(task, board.tasks, board.epics)):
        return f"it waits on {', '.join(waiting)}"
    if task.assigned_worker and task.assigned_worker != worker_id and _owner_alive(board, task.assigned_worker):
        return f"{task.assigned_worker} holds it"
    return ""


def _adjacent_epic(board: Board, worker_id: str | None) -> str | None:
    """The epic of the worker's last claim (claims prefer it), if any."""
    worker = board.workers.get(worker_id) if worker_id is not None else None
    return (worker.last_epic or None) if worker is not None else None


def claim_order(board: Board, worker_id: str | None, prefer_adjacent: bool) -> Callable[[Task], tuple[Any, ...]]:
    """The sort key of claim candidates: the queue order (`rank_key`), led, when
    `prefer_adjacent`, by whether a task is in the epic of the worker's last claim, so a
    worker keeps to one epic while it has work (Moe: a worker waking from wait_for_task picks
    up the next task beside the one it finished, not one in an unrelated epic)."""
    rank = claim_rank(board, worker_id, prefer_adjacent)
    return lambda task: rank(_rank_fields(task))


_rank_fields = attrgetter(*RANK_FIELDS)


def claim_rank(board: Board, worker_id: str | None, prefer_adjacent: bool) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """`claim_order`'s key of a task given as the values of its RANK_FIELDS (what a claim's
    first look ranks candidates' cached rows by, see `store.Head`)."""
    adjacent = _adjacent_epic(board, worker_id) if prefer_adjacent else None
    epics = board.epics
    if not adjacent:
        return lambda values: rank_values(values, epics)
    return lambda values: (values[1] != adjacent, *rank_values(values, epics))


class ClaimQueue:
    """A board's tasks in queue order (`rank_key`, then the name they are filed under), kept
    from one board to the next by a long-lived caller (a server's claims), so that a claim
    need not sort a thousand candidates each time.

    Derived from the board it is handed, never from memory alone: each `ordered` call compares
    the board's task and epic objects with the ones it placed (by identity: a store gives the
    same object for a file it found unchanged and a new one for every file read again, so
    hand edits, checkouts and other processes' writes all arrive as new objects), places
    again the tasks that changed, came or went, and starts over when an epic changed (its
    order ranks every task of it). The order it gives is therefore the sort of this board's
    tasks, whatever happened to the files in between. Not for two threads at once: claims
    use it under the board lock, which threads take in turn."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._tasks: dict[str, Task] = {}
        self._epics: dict[str, Epic] = {}
        self._keys: dict[str, tuple[Any, ...]] = {}
        self._order: list[tuple[tuple[Any, ...], str]] = []

    def ordered(self, board: Board, adjacent: str | None = None) -> Iterator[Task] | None:
        """The board's tasks in claim order (`claim_order`'s), given one by one as they are
        looked at (a claim stops at the first it gives): with `adjacent`, that epic's tasks
        first, each part in queue order. None when two tasks cannot be ranked against each
        other (a value of a kind no sort could compare: the caller sorts the candidates alone,
        as without a queue, and meets it there only if a candidate carries it). Read it before
        the queue follows another board."""
        try:
            self._follow(board)
        except (TypeError, ValueError):
            self._reset()
            return None
        kept = self._tasks
        order = (kept[name] for _key, name in self._order)
        if adjacent:
            return itertools.chain(
                (task for task in (kept[name] for _key, name in self._order) if task.epic == adjacent), (task for task in order if task.epic != adjacent)
            )
        return order

    def _follow(self, board: Board) -> None:
        epics = board.epics
        if len(epics) != len(self._epics) or any(self._epics.get(name) is not epic for name, epic in epics.items()):
            self._epics = dict(epics)
            self._tasks = dict(board.tasks)
            self._keys = {name: (*rank_key(task, epics), name) for name, task in self._tasks.items()}
            self._order = sorted((key, name) for name, key in self._keys.items())
            return
        tasks, kept, keys, order = board.tasks, self._tasks, self._keys, self._order
        for name in kept.keys() - tasks.keys():
            del kept[name]
            del order[bisect_left(order, (keys.pop(name), name))]
        for name, task in tasks.items():
            if kept.get(name) is task:
                continue
            if name in kept:
                del order[bisect_left(order, (keys[name], name))]
            kept[name] = task
            keys[name] = key = (*rank_key(task, epics), name)
            insort(order, (key, name))


def wait_answer(
    board: Board, statuses: Sequence[str], worker_id: str, *, epic_id: str | None = None, blocked: Callable[[Task], bool] | None = None
) -> Task | None:
    """The task that ends a wait_for_task: the one `plan_claim` would give `worker_id` now, or
    the worker's own task once it is in one of `statuses`; None while neither exists.

    Mirrors the claim exactly, so a woken waiter's claim never declines straight back into a
    wait (Moe's wait/claim spin): a task barred by the solo-worker rule wakes nobody.
    """
    held = board.active_task_of(worker_id)
    if held is not None:
        return held if held.status in statuses and (epic_id is None or held.epic == epic_id) else None
    try:
        plan = plan_claim(board, statuses, worker_id, epic_id=epic_id, blocked=blocked)
    except Conflict:
        return None
    return plan.task


def claimed(task: Task, worker_id: str, now: str) -> Task:
    """`task` as held by `worker_id` from `now` (its first claim time stamped once)."""
    return replace(task, assigned_worker=worker_id, updated=now, first_claimed=task.first_claimed or now)


def role_for_status(status: str) -> str | None:
    """The role that works a claimable column (architect, worker, qa)."""
    return _ROLE_OF_STATUS.get(status)


# --------------------------------------------------------------------------- leases


def lease_deadline(worker: Worker | None, settings: Settings) -> datetime | None:
    """When `worker`'s hold on a task runs out: its last heartbeat plus the project's lease
    (`stale_worker_timeout_ms`). None when leases are off, or for a worker that never sent a
    heartbeat (registered by hand, or by a version without leases): it holds its tasks until
    it releases them, deregisters, or a human frees them."""
    if worker is None or settings.stale_worker_timeout_ms <= 0:
        return None
    beat = worker.heartbeat
    if type(beat) is str:
        return _lease_end(beat, settings.stale_worker_timeout_ms)
    return _lease_end.__wrapped__(beat, settings.stale_worker_timeout_ms)


@lru_cache(maxsize=4096)  # every claim weighs the lease of every held task's worker: the same stamps
def _lease_end(heartbeat: str | None, lease_ms: int) -> datetime | None:
    beat = parse_time(heartbeat)
    return None if beat is None else beat + timedelta(milliseconds=lease_ms)


def lease_outlasts(worker: Worker, settings: Settings, now: datetime) -> bool:
    """Whether `worker`'s lease, as its file was read, runs on for at least half a lease past
    `now`: leases are off, the worker has no heartbeat yet (nothing runs out before the
    first), or its last one is younger than half the lease. Never for a STALE or DEAD worker."""
    if worker.status in GONE_WORKER_STATUSES:
        return False
    deadline = lease_deadline(worker, settings)
    return deadline is None or (deadline - now).total_seconds() * 1000 >= settings.stale_worker_timeout_ms / 2


def expired_holds(board: Board, now: datetime) -> list[Task]:
    """The held tasks whose holder's lease has run out by `now`, in queue order."""
    settings = board.project.settings
    if settings.stale_worker_timeout_ms <= 0:
        return []  # leases are off: nothing runs out
    workers = board.workers
    found = []
    for task in board.tasks.values():
        holder = task.assigned_worker
        if not holder or task.status not in ACTIVE:
            continue
        deadline = lease_deadline(workers.get(holder), settings)
        if deadline is not None and now >= deadline:
            found.append(task)
    return sorted(found, key=lambda t: rank_key(t, board.epics))


def next_lease_expiry(board: Board) -> datetime | None:
    """The earliest moment a held task's lease runs out (a waiter wakes then: no file changes
    when a lease expires)."""
    moments = [
        deadline
        for task in board.tasks.values()
        if task.status in ACTIVE and task.assigned_worker
        for deadline in (lease_deadline(board.workers.get(task.assigned_worker), board.project.settings),)
        if deadline is not None
    ]
    return min(moments, default=None)


def next_auto_approval(board: Board) -> datetime | None:
    """The earliest moment SPEED mode approves a waiting plan by itself."""
    settings = board.project.settings
    if settings.approval_mode != "SPEED":
        return None
    moments = [
        submitted + timedelta(milliseconds=settings.speed_mode_delay_ms)
        for task in board.tasks.values()
        if task.status == "AWAITING_APPROVAL" and (submitted := submission_time(task)) is not None
    ]
    return min(moments, default=None)


def released(task: Task, now: str) -> Task:
    """`task` let go of by its holder: same status (the column it was in), nobody holds it."""
    return replace(task, assigned_worker=None, updated=now)


# --------------------------------------------------------------------------- queries

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


def search_tasks(
    tasks: Iterable[Task],
    epics: Mapping[str, Epic],
    query: str | None,
    *,
    status: str | None = None,
    epic_id: str | None = None,
    worker_id: str | None = None,
    limit: int = 20,
) -> list[Task]:
    """Tasks matching the filters (applied first), then ranked by `search_score` (ties in
    queue order); without a query, the filtered tasks in queue order."""
    chosen = [
        task
        for task in tasks
        if (status is None or task.status == status) and (epic_id is None or task.epic == epic_id) and (worker_id is None or task.assigned_worker == worker_id)
    ]
    terms = search_terms(query) if query else []
    if terms:
        scored = [(search_score(task, terms), task) for task in chosen]
        scored = [pair for pair in scored if pair[0] > 0]
        scored.sort(key=lambda pair: (-pair[0], rank_key(pair[1], epics)))
        return [task for _, task in scored[:limit]]
    return sorted(chosen, key=lambda t: rank_key(t, epics))[:limit]


def task_labels(task: Task) -> tuple[str, ...]:
    """The labels a board view filters by: the task's type, then the labels kept from the tool
    it was imported from (Backlog.md's and Beads' `labels`), each once."""
    found = [task.type] if task.type else []
    fields = task.source.get("fields") if task.source else None
    kept = fields.get("labels") if isinstance(fields, Mapping) else None
    if isinstance(kept, str):
        kept = [part.strip() for part in kept.split(",")]
    if isinstance(kept, list):
        found += [label for label in kept if isinstance(label, str) and label.strip()]
    return tuple(dict.fromkeys(found))


def column_order(status: str, tasks: Iterable[Task], epics: Mapping[str, Epic]) -> list[Task]:
    """A board column's cards in the order a person reads them: DONE by completion, the
    newest first (a task without a completion time by its last change); ARCHIVED by its last
    change, the newest first; every other column in queue order (`rank_key`), as claims take
    them."""
    if status == "DONE":
        return sorted(tasks, key=lambda t: (t.completed or t.updated or "", t.updated or "", t.id), reverse=True)
    if status == "ARCHIVED":
        return sorted(tasks, key=lambda t: (t.updated or "", t.id), reverse=True)
    return sorted(tasks, key=lambda t: rank_key(t, epics))


@dataclass(frozen=True, slots=True)
class EventQuery:
    """What an activity log query filters on; None matches anything. `kinds` are upper case."""

    task: str | None = None
    epic: str | None = None
    worker: str | None = None
    kinds: frozenset[str] | None = None

    @classmethod
    def of(
        cls, *, task_id: str | None = None, epic_id: str | None = None, worker_id: str | None = None, event_types: Sequence[str] | None = None
    ) -> EventQuery:
        """A query from `get_activity_log`'s filters (event names in any case)."""
        return cls(task_id, epic_id, worker_id, frozenset(kind.upper() for kind in event_types) if event_types else None)

    def matches(self, event: Event) -> bool:
        return (
            (self.task is None or event.task == self.task)
            and (self.epic is None or event.epic == self.epic)
            and (self.worker is None or event.worker == self.worker)
            and (self.kinds is None or event.event.upper() in self.kinds)
        )


def filter_events(
    events: Iterable[Event],
    *,
    task_id: str | None = None,
    epic_id: str | None = None,
    worker_id: str | None = None,
    event_types: Sequence[str] | None = None,
    limit: int = 50,
) -> list[Event]:
    """The newest `limit` events matching every filter, newest first.

    Order is by timestamp, then by position in the log, so lines that a union merge
    interleaved from two clones still read in time order. (The board's log answers this from
    its files with `activity.ActivityLog.newest`, reading only those that can hold the answer.)
    """
    query = EventQuery.of(task_id=task_id, epic_id=epic_id, worker_id=worker_id, event_types=event_types)
    matching = [(event.timestamp, position, event) for position, event in enumerate(events) if query.matches(event)]
    matching.sort(key=lambda triple: triple[:2], reverse=True)
    return [event for _, _, event in matching[:limit]]

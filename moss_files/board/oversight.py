"""Plan governance: amendments to a plan's steps, rail changes from approved proposals, task
budgets and metrics, and governors' critiques.

Core layer (pure: records and times in, records and errors out).

An amendment replaces a step's instructions without a new plan. The step's original
`description` is never rewritten: each amendment is kept under the step's `amendments:` with
its reason, author and time, and the step's effective instructions are those of its newest
APPROVED amendment. In CONTROL mode an amendment waits for a human (PENDING), and the step
cannot be started or completed until a human approves or rejects it (AMENDMENT_PENDING); in
SPEED and TURBO modes it is approved as it is made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from moss_files.board.files import plain, step_meta
from moss_files.board.model import Rails, Step, Task
from moss_files.board.rules import check_rails, parse_time, rail_error
from moss_files.foundation.context import AGENT
from moss_files.foundation.errors import Conflict, InvalidRequest, NotFound

MAX_AMENDMENTS_PER_STEP = 10
MAX_AMENDMENT_CHARS = 5000
MAX_REASON_CHARS = 2000
GLOBAL_LISTS = ("custom_rules", "forbidden_patterns", "required_patterns", "tech_stack")

# --------------------------------------------------------------------------- amendments


def effective_description(step: Step) -> str:
    """The step's instructions in force: its newest approved amendment's, else its own."""
    approved = [a for a in step.amendments if a.get("status") == "APPROVED"]
    return str(approved[-1].get("description")) if approved else step.description


def pending_amendment(step: Step) -> Mapping[str, Any] | None:
    """The amendment of `step` waiting for a human, if any."""
    return next((a for a in step.amendments if a.get("status") == "PENDING"), None)


def pending_amendments(task: Task) -> list[tuple[str, Mapping[str, Any]]]:
    """(step id, amendment) of every amendment of `task` waiting for a human."""
    return [(step.id, found) for step in task.plan if (found := pending_amendment(step)) is not None]


def _text(value: str | None, field: str, limit: int) -> str:
    if value is None or not value.strip():
        raise InvalidRequest(f"{field} is required", details={"field": field})
    text = value.strip()
    if len(text) > limit:
        raise InvalidRequest(f"{field} is {len(text)} characters; at most {limit}", details={"field": field})
    return text


def amend_step(
    task: Task, step_id: str, description: str, reason: str, *, amendment_id: str, by: str, now: str, approved: bool, rails: Rails, actor: str = AGENT
) -> Task:
    """`task` with an amendment `amendment_id` of step `step_id` (approved at once when
    `approved`). The id is collision-free (`AMEND-<date>-<random>`), so two clones that amend
    one step offline add two amendments git can merge (`merge_plans`); older files' `amend-N`
    ids are read as they are.

    Raises NotFound for the step, INVALID_TRANSITION for a finished task or completed step,
    AMENDMENT_PENDING while the step has an amendment waiting, NOT_ALLOWED past the
    amendment limit, RAIL_VIOLATION when the amended plan breaks the global rails.
    """
    text = _text(description, "description", MAX_AMENDMENT_CHARS)
    why = _text(reason, "reason", MAX_REASON_CHARS)
    if task.status in ("DONE", "ARCHIVED"):
        raise Conflict(f"{task.id} is {task.status}; amending finished work has no effect", code="INVALID_TRANSITION", details={"taskId": task.id})
    index = next((i for i, step in enumerate(task.plan) if step.id == step_id), None)
    if index is None:
        raise NotFound(f"Step not found: {step_id} (task {task.id})", details={"taskId": task.id, "stepId": step_id})
    step = task.plan[index]
    if step.status == "COMPLETED":
        raise Conflict(
            f"step {step_id} is COMPLETED; amending it would rewrite work that shipped (request a re-plan instead)",
            code="INVALID_TRANSITION",
            details={"taskId": task.id, "stepId": step_id},
        )
    waiting = pending_amendment(step)
    if waiting is not None:
        raise Conflict(
            f"step {step_id} has amendment {waiting.get('id')} waiting for a human; it is approved or rejected first",
            code="AMENDMENT_PENDING",
            details={"taskId": task.id, "stepId": step_id, "amendmentId": waiting.get("id")},
        )
    if len(step.amendments) >= MAX_AMENDMENTS_PER_STEP:
        raise Conflict(
            f"step {step_id} has {len(step.amendments)} amendments already; one amended this often needs a new plan",
            code="NOT_ALLOWED",
            status=403,
            details={"taskId": task.id, "stepId": step_id},
        )
    amendment: dict[str, Any] = {
        "id": amendment_id,
        "description": text,
        "reason": why,
        "amended_by": by,
        "amended": now,
        "status": "APPROVED" if approved else "PENDING",
    }
    if approved:
        amendment.update(resolved_by="AUTO", resolved=now)
    amended = replace(step, amendments=(*step.amendments, amendment))
    plan = (*task.plan[:index], amended, *task.plan[index + 1 :])
    # The rails apply to the instructions as the worker will read them.
    violations = check_rails(rails, [replace(s, description=text if s.id == step_id else effective_description(s)) for s in plan])
    if violations:
        raise rail_error(violations, actor=actor)
    return replace(task, plan=plan, updated=now)


def resolve_amendments(task: Task, verdict: str, *, by: str, now: str) -> Task:
    """`task` with every waiting amendment APPROVED or REJECTED by `by`."""
    plan = tuple(
        replace(
            step, amendments=tuple({**a, "status": verdict, "resolved_by": by, "resolved": now} if a.get("status") == "PENDING" else a for a in step.amendments)
        )
        for step in task.plan
    )
    return replace(task, plan=plan, updated=now) if plan != task.plan else task


def amendment_to_dict(amendment: Mapping[str, Any]) -> dict[str, Any]:
    """An amendment in Moe's camelCase (`amendmentId`, `amendedBy`, `amendedAt`)."""
    return {
        "amendmentId": amendment.get("id"),
        "description": amendment.get("description"),
        "reason": amendment.get("reason"),
        "amendedBy": amendment.get("amended_by"),
        "amendedAt": amendment.get("amended"),
        "status": amendment.get("status"),
        "resolvedBy": amendment.get("resolved_by"),
        "resolvedAt": amendment.get("resolved"),
    }


# --------------------------------------------------------------------------- rails


def _same(a: str, b: str) -> bool:
    return " ".join(a.casefold().split()) == " ".join(b.casefold().split())


def change_rails(values: Sequence[str], proposal_type: str, current: str | None, proposed: str) -> tuple[str, ...]:
    """A list of rails after a proposal: ADD appends (once), MODIFY replaces `current`, REMOVE
    drops `current` (or `proposed` when no current value is named).

    Raises Conflict RAIL_NOT_FOUND when the rail to modify or remove is not in the list.
    """
    items = list(values)
    if proposal_type == "ADD_RAIL":
        return tuple(items) if any(_same(item, proposed) for item in items) else (*items, proposed)
    target = current if current is not None and current.strip() else (proposed if proposal_type == "REMOVE_RAIL" else None)
    found = next((i for i, item in enumerate(items) if target is not None and _same(item, target)), None)
    if found is None:
        raise Conflict(
            f"rail {target!r} is not among {list(items)!r}; nothing to {'modify' if proposal_type == 'MODIFY_RAIL' else 'remove'}",
            code="RAIL_NOT_FOUND",
            details={"rail": target, "rails": list(items)},
        )
    if proposal_type == "MODIFY_RAIL":
        items[found] = proposed
    else:
        del items[found]
    return tuple(items)


def global_list_for(rails: Rails, proposal_type: str, current: str | None, wanted: str | None) -> str:
    """Which list of the global rails a GLOBAL proposal changes: the one it names, else (to
    modify or remove) the one holding `current`, else `custom_rules`."""
    if wanted:
        return wanted
    if proposal_type != "ADD_RAIL" and current:
        for name in GLOBAL_LISTS:
            if any(_same(item, current) for item in getattr(rails, name)):
                return name
    return "custom_rules"


# --------------------------------------------------------------------------- budgets and metrics


def _ms_between(start: str | None, end: datetime | None) -> int | None:
    began = parse_time(start)
    return int((end - began).total_seconds() * 1000) if began is not None and end is not None else None


def budget_state(task: Task, now: datetime) -> dict[str, Any] | None:
    """A task's wall-clock budget: the cap, the time used since its first claim (to DONE, or to
    `now`), and whether it is over."""
    if not task.budget_ms:
        return None
    end = parse_time(task.completed) or now
    used = _ms_between(task.first_claimed, end)
    return {"wallClockMs": task.budget_ms, "usedMs": used, "overBudget": used is not None and used > task.budget_ms}


def task_metrics(task: Task, now: datetime) -> dict[str, Any]:
    """One task's metrics, as list_metrics shows them."""
    done = task.status in ("DONE", "ARCHIVED") and task.completed is not None
    return {
        "taskId": task.id,
        "epicId": task.epic or None,
        "title": task.title,
        "status": task.status,
        "firstClaimAt": task.first_claimed,
        "doneAt": task.completed,
        "wallClockMs": _ms_between(task.first_claimed, parse_time(task.completed) if done else None),
        "reopenCount": task.reopen_count,
        "plannedStepCount": len(task.plan),
        "executedStepCount": sum(1 for step in task.plan if step.status == "COMPLETED"),
        "budget": budget_state(task, now),
    }


def aggregate(metrics: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Averages over per-task metrics: wall clock of finished tasks, first-pass approval (share
    of DONE tasks never reopened), reopens. Defined (nulls, zeros) when nothing matches."""
    rows = list(metrics)
    done = [row for row in rows if row["status"] == "DONE"]
    clocks = [row["wallClockMs"] for row in done if row["wallClockMs"] is not None]
    return {
        "taskCount": len(rows),
        "doneCount": len(done),
        "avgWallClockMs": round(sum(clocks) / len(clocks)) if clocks else None,
        "firstPassApprovalPct": round(100 * sum(1 for row in done if row["reopenCount"] == 0) / len(done), 1) if done else None,
        "avgReopens": round(sum(row["reopenCount"] for row in rows) / len(rows), 2) if rows else 0,
        "overBudgetCount": sum(1 for row in rows if row["budget"] and row["budget"]["overBudget"]),
    }


# --------------------------------------------------------------------------- critiques and re-plans


def critique(verdict: str, concerns: Sequence[str], *, by: str, now: str) -> dict[str, Any]:
    """A governor's critique record. Raises InvalidRequest for a block without concerns."""
    if verdict not in ("pass", "block"):
        raise InvalidRequest('verdict must be "pass" or "block"', details={"field": "verdict"})
    kept = [c.strip()[:1000] for c in concerns if c.strip()][:20]
    if verdict == "block" and not kept:
        raise InvalidRequest('at least one concern is required when verdict is "block"', details={"field": "concerns"})
    record: dict[str, Any] = {"verdict": verdict, "reviewed_by": by, "reviewed": now}
    if kept:
        record["concerns"] = kept
    return record


def critique_to_dict(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not record:
        return None
    return {
        "verdict": record.get("verdict"),
        "concerns": list(record.get("concerns", ())),
        "reviewedBy": record.get("reviewed_by"),
        "reviewedAt": record.get("reviewed"),
    }


def prior_attempt(task: Task, reason: str, step_id: str | None, now: str) -> dict[str, Any]:
    """What request_replan sets aside: the plan as it stood and the steps done."""
    record: dict[str, Any] = {
        "attempted": now,
        "reason": reason,
        "plan": plain([step_meta(step) for step in task.plan]),
        "steps_completed": [step.id for step in task.plan if step.status == "COMPLETED"],
    }
    if step_id:
        record["step"] = step_id
    return record


def handoff(note: Mapping[str, Any], *, by: str | None, now: str, reason: str | None) -> dict[str, Any]:
    """A release's handoff note {whatIsDone, whatRemains, pitfalls?, openQuestions?} as stored."""
    record: dict[str, Any] = {}
    for source, target in (("whatIsDone", "what_is_done"), ("whatRemains", "what_remains"), ("pitfalls", "pitfalls"), ("openQuestions", "open_questions")):
        value = note.get(source, note.get(target))
        if value is not None:
            if not isinstance(value, str):
                raise InvalidRequest(f"handoffNote.{source} must be text", details={"field": "handoffNote"})
            if value.strip():
                record[target] = value.strip()[:4000]
    if not record:
        raise InvalidRequest("handoffNote needs whatIsDone or whatRemains", details={"field": "handoffNote"})
    record.update({"released_by": by, "released": now})
    if reason:
        record["reason"] = reason
    return record


def handoff_to_dict(record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "whatIsDone": record.get("what_is_done"),
        "whatRemains": record.get("what_remains"),
        "pitfalls": record.get("pitfalls"),
        "openQuestions": record.get("open_questions"),
        "releasedBy": record.get("released_by"),
        "releasedAt": record.get("released"),
        "reason": record.get("reason"),
        "diskState": record.get("disk_state"),
    }

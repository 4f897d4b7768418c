"""QA's rejections: what qa_reject records on a task and where it sends it (Moe's bounded
escalation).

Core layer (pure: records and times in, records and decisions out).

A rejection counts a reopen and goes, by its new reopen count against `max_reopens` (M):

    count <  M              -> WORKING: the worker fixes it
    count == M              -> PLANNING once (the soft cap): the plan needs rework
    count >  M              -> stays in REVIEW, unassigned, `needs_human_review` (the hard cap):
                               the loop ends with a person
    a definition-of-done item that failed in an earlier rejection of this attempt fails
    again (below the caps)  -> PLANNING: the task's spec, not the worker, is the problem

The failed items are logged on the task (`failed_dod_items`, oldest first) since its plan was
last submitted or a person reopened it; one rejection that names an item twice counts it once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from moss_files.board.model import Settings, Task
from moss_files.board.rules import apply_transition
from moss_files.foundation.errors import InvalidRequest

MAX_REJECTION_HISTORY = 20
MAX_FAILED_DOD_ITEMS = 100
MAX_REASON_CHARS = 2000
MAX_FAILED_PER_REJECTION = 20
MAX_ISSUES = 20
MAX_ISSUE_CHARS = 500
ISSUE_TYPES = ("test_failure", "lint", "security", "missing_feature", "regression", "other")


@dataclass(frozen=True, slots=True)
class Rejection:
    """What one qa_reject decides: where the task goes and what it records."""

    target: str  # WORKING, PLANNING, or REVIEW when parked for a human
    reopen_count: int
    max_reopens: int
    soft_cap: bool  # the count reached max_reopens: one re-plan
    parked: bool  # the count went past it: a person decides
    repeated_item: str | None  # the definition-of-done item that failed a second time
    entry: Mapping[str, Any]  # the rejection as `rejection_history` keeps it

    @property
    def escalation(self) -> str | None:
        """Why the task does not simply go back to WORKING (None when it does)."""
        if self.parked:
            return "hard reopen cap"
        if self.soft_cap:
            return "reopen cap reached"
        if self.repeated_item is not None:
            return f"definition-of-done item failed twice: {self.repeated_item!r}"
        return None


def reason_text(reason: str | None) -> str:
    """The rejection's reason, stripped. Raises InvalidRequest when missing or too long."""
    text = (reason or "").strip()
    if not text:
        raise InvalidRequest("reason is required - explain which DoD items failed and why", details={"field": "reason"})
    if len(text) > MAX_REASON_CHARS:
        raise InvalidRequest(f"reason is {len(text)} characters; at most {MAX_REASON_CHARS}", details={"field": "reason"})
    return text


def failed_items(values: Sequence[Any] | None, definition_of_done: Sequence[str]) -> tuple[str, ...]:
    """The definition-of-done items a rejection names, each once, in the order given.

    An item is its text, or its 1-based number in the task's definition of done; a text that
    matches an item but for letter case and spacing is that item, so the same-item rule sees
    one item however QA spells it. Raises InvalidRequest for a bad value or too many items.
    """
    if not values:
        return ()
    if len(values) > MAX_FAILED_PER_REJECTION:
        raise InvalidRequest(f"failedDodItems lists {len(values)} items; at most {MAX_FAILED_PER_REJECTION}", details={"field": "failedDodItems"})
    known = {" ".join(item.split()).casefold(): item for item in definition_of_done}
    found: list[str] = []
    for value in values:
        if isinstance(value, str) and value.strip().isdigit() and value.strip() not in known:
            value = int(value.strip())  # "2" from the command line is the second item
        if isinstance(value, int) and not isinstance(value, bool):
            if not 1 <= value <= len(definition_of_done):
                raise InvalidRequest(f"failedDodItems: the definition of done has no item {value}", details={"field": "failedDodItems"})
            text = definition_of_done[value - 1]
        elif isinstance(value, str) and value.strip():
            text = known.get(" ".join(value.split()).casefold(), value.strip())
        else:
            raise InvalidRequest("failedDodItems holds the failed items' texts or numbers", details={"field": "failedDodItems"})
        if text not in found:
            found.append(text)
    return tuple(found)


def read_issues(values: Sequence[Any] | None) -> tuple[dict[str, Any], ...]:
    """Structured review findings `[{type, description, file?, line?}]`, checked.
    Raises InvalidRequest for an unknown type, an empty or overlong description, too many."""
    if not values:
        return ()
    if len(values) > MAX_ISSUES:
        raise InvalidRequest(f"issues lists {len(values)} issues; at most {MAX_ISSUES}", details={"field": "issues"})
    out: list[dict[str, Any]] = []
    for value in values:
        if not isinstance(value, Mapping):
            raise InvalidRequest("each issue is {type, description, file?, line?}", details={"field": "issues"})
        kind = value.get("type")
        if kind not in ISSUE_TYPES:
            raise InvalidRequest(f"issue type {kind!r} is not one of {', '.join(ISSUE_TYPES)}", details={"field": "issues.type"})
        description = value.get("description")
        if not isinstance(description, str) or not description.strip():
            raise InvalidRequest("an issue needs a description", details={"field": "issues.description"})
        if len(description) > MAX_ISSUE_CHARS:
            raise InvalidRequest(f"an issue's description is at most {MAX_ISSUE_CHARS} characters", details={"field": "issues.description"})
        issue: dict[str, Any] = {"type": kind, "description": description.strip()}
        file, line = value.get("file"), value.get("line")
        if file is not None:
            if not isinstance(file, str) or not file.strip():
                raise InvalidRequest("an issue's file is a path", details={"field": "issues.file"})
            issue["file"] = file.strip()
        if line is not None:
            if isinstance(line, bool) or not isinstance(line, int) or line < 1:
                raise InvalidRequest("an issue's line is a whole number of at least 1", details={"field": "issues.line"})
            issue["line"] = line
        out.append(issue)
    return tuple(out)


def decide(task: Task, settings: Settings, *, reason: str, failed: Sequence[str], issues: Sequence[Mapping[str, Any]], now: str) -> Rejection:
    """Where a rejection of `task` (in REVIEW) sends it, and the history entry it adds. The
    task's own `max_reopens`, when set, is its budget instead of the project's."""
    count = task.reopen_count + 1
    cap = task.max_reopens or settings.max_reopens
    parked = count > cap
    soft = not parked and count >= cap
    seen = [str(entry.get("item")) for entry in task.failed_dod_items]
    repeated = next((item for item in failed if item in seen), None)
    if parked:
        target = "REVIEW"
    elif soft or repeated is not None:
        target = "PLANNING"
    else:
        target = "WORKING"
    entry: dict[str, Any] = {"reason": reason, "rejected": now, "reopen_count": count}
    if failed:
        entry["failed_dod_items"] = list(failed)
    if issues:
        entry["issues"] = [dict(issue) for issue in issues]
    return Rejection(target, count, cap, soft, parked, repeated if not (soft or parked) else None, entry)


def rejected(task: Task, decision: Rejection, failed: Sequence[str], *, by: str, now: str) -> Task:
    """`task` after the rejection `decision`: moved (or parked), its reopen counted, the
    rejection and its failed items recorded, bounded."""
    history = ((decision.entry, *task.rejection_history))[:MAX_REJECTION_HISTORY]
    log = (*task.failed_dod_items, *({"item": item, "rejected": now, "rejected_by": by} for item in failed))[-MAX_FAILED_DOD_ITEMS:]
    if decision.parked:
        # Stays in REVIEW for a person: nobody holds it, and claims skip it until the flag goes.
        moved = replace(
            task,
            reopen_count=decision.reopen_count,
            reopen_reason=decision.entry["reason"],
            assigned_worker=None,
            needs_human_review=True,
            updated=now,
        )
    else:
        moved = apply_transition(task, decision.target, now, reason=decision.entry["reason"])
    # Whoever takes it up next (worker, architect, a person's QA) reads the rejection first.
    return replace(moved, rejection_history=history, failed_dod_items=log, context_fetched_by=())


def _either(entry: Mapping[str, Any], ours: str, moes: str) -> Any:
    """A record's value under our key, else under Moe's (a task file Moe or a person wrote)."""
    return entry[ours] if ours in entry else entry.get(moes)


def rejection_details(task: Task) -> dict[str, Any] | None:
    """Moe's rejectionDetails: the newest rejection's failed items and issues, if it named any."""
    if not task.rejection_history:
        return None
    newest = task.rejection_history[0]
    details: dict[str, Any] = {}
    if _either(newest, "failed_dod_items", "failedDodItems"):
        details["failedDodItems"] = list(_either(newest, "failed_dod_items", "failedDodItems"))
    if newest.get("issues"):
        details["issues"] = [dict(issue) for issue in newest["issues"]]
    return details or None


def history_to_dict(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A rejection as Moe's rejectionHistory shows it."""
    data: dict[str, Any] = {
        "reason": entry.get("reason"),
        "rejectedAt": _either(entry, "rejected", "rejectedAt"),
        "reopenCount": _either(entry, "reopen_count", "reopenCount"),
    }
    if _either(entry, "failed_dod_items", "failedDodItems"):
        data["failedDodItems"] = list(_either(entry, "failed_dod_items", "failedDodItems"))
    if entry.get("issues"):
        data["issues"] = [dict(issue) for issue in entry["issues"]]
    return data


def failed_item_to_dict(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A failed definition-of-done item as Moe's failedDodItems shows it."""
    return {"item": entry.get("item"), "rejectedAt": _either(entry, "rejected", "rejectedAt"), "rejectedBy": _either(entry, "rejected_by", "rejectedBy")}

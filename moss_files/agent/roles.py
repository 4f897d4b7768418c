"""Agents by role, as Moe's `moe-agent` launcher starts them: an architect plans PLANNING tasks,
a worker carries out WORKING ones, QA reviews REVIEW ones. Core layer (pure): the roles, their
prompts, the claim's arguments, and what a claim's answer means. The loop that drives runs is
`launcher.py`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moss_files.foundation.errors import InvalidRequest

CONTEXT_CHARS = 12000  # of moe.get_context's answer, in the text a role run starts from
RUNS_PER_TASK = 2  # a task still in the role's column after this many runs of one launch is let go


@dataclass(frozen=True, slots=True)
class Role:
    """A role: the board column it claims from, what it does there, and the tools that end
    its work on a task."""

    name: str
    column: str
    goal: str
    duties: str
    finishing: tuple[str, ...]


ROLES: dict[str, Role] = {
    "architect": Role(
        "architect",
        "PLANNING",
        "write its implementation plan",
        "Turn the task into an implementation plan. Read the task, its definition of done and the rails (the context below); "
        "look at the code where your tools let you; then call moe.submit_plan with small, ordered steps, each naming the files "
        "it changes (affectedFiles, which must exist) and creates (newFiles). The rails are checked when you submit "
        "(RAIL_VIOLATION names the rule): fix the plan and submit again. A person approves plans; you do not carry them out.",
        ("moe.submit_plan",),
    ),
    "worker": Role(
        "worker",
        "WORKING",
        "carry out its approved plan",
        "Carry out the approved plan, step by step and in order: moe.start_step, do the work, moe.complete_step with the "
        "files the step changed. Then call moe.complete_task with a summary and verification evidence (the commands you ran "
        "with their exit codes, and for each definition-of-done item how it was shown: dod [{item, evidence}]).",
        ("moe.complete_task",),
    ),
    "qa": Role(
        "qa",
        "REVIEW",
        "review it",
        "Review the finished task against its definition of done and the rails: the plan, the steps' notes and files, the "
        "verification evidence. Approve it with moe.qa_approve (say what you checked), or reject it with moe.qa_reject, "
        "naming the failed definition-of-done items (failedDodItems) and the issues.",
        ("moe.qa_approve", "moe.qa_reject"),
    ),
}


def role_named(name: str) -> Role:
    """The role called `name`. Raises InvalidRequest for another."""
    found = ROLES.get(name.strip().lower())
    if found is None:
        raise InvalidRequest(f"no role {name!r}: a role is one of {', '.join(ROLES)}", details={"field": "role", "value": name, "roles": list(ROLES)})
    return found


def worker_id(role: Role, token: str) -> str:
    """A worker id for a launch, as Moe's launcher makes one: `<role>-<8 hex>`."""
    return f"{role.name}-{token}"


def system_prompt(role: Role, worker: str, *, auto_claim: bool) -> str:
    """What a role run's model is told about its role, besides the runtime's own prompt."""
    finishing = " or ".join(role.finishing)
    lines = [
        f"You work on this project's task board as the {role.name} {worker}: pass workerId {json.dumps(worker)} to every moe tool that takes one.",
        f"Your job: {role.duties}",
    ]
    if auto_claim:
        lines.append(
            "The runtime claims your task and reads its context (moe.get_context) before each run; do not claim, wait for or "
            f"release tasks yourself. End your turn, with one line on what you did, once {finishing} has succeeded: the "
            "runtime then takes the next task."
        )
    else:
        lines.append(
            f"Claim a task yourself when asked to (moe.claim_next_task with statuses [{json.dumps(role.column)}]), then read it "
            f"with moe.get_context before you act on it; end your turn once {finishing} has succeeded."
        )
    lines.append("If you cannot go on, call moe.report_blocked with the reason and what you need, and end your turn.")
    return "\n".join(lines)


def run_prompt(role: Role, worker: str, extra: str | None) -> str:
    """The prompt a role run records (`run.started`): the role's instruction and the person's own words."""
    head = f"[{role.name} {worker}] Take the next {role.column} task from the board and {role.goal}."
    return f"{head}\n\n{extra.strip()}" if extra and extra.strip() else head


def claim_arguments(role: Role, worker: str) -> dict[str, Any]:
    return {"statuses": [role.column], "workerId": worker}


# --------------------------------------------------------------------------- answers


def parse_answer(text: str) -> dict[str, Any] | None:
    """A board tool's JSON answer, or None when the text is not a JSON object."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim's answer says: `claimed` (a task is ours now), `held` (the worker holds a
    task already), or `none`."""

    kind: str
    task: str | None = None
    title: str = ""
    status: str = ""


def read_claim(answer: Mapping[str, Any]) -> Claim:
    """The claim an answer of moe.claim_next_task describes."""
    task = answer.get("task")
    if answer.get("hasNext") and isinstance(task, Mapping) and task.get("id"):
        return Claim("claimed", str(task["id"]), str(task.get("title") or ""), str(task.get("status") or ""))
    held = answer.get("alreadyAssigned")
    if isinstance(held, Mapping) and held.get("taskId"):
        return Claim("held", str(held["taskId"]), str(held.get("title") or ""), str(held.get("status") or ""))
    return Claim("none")


def task_text(role: Role, worker: str, claim: Claim, claim_answer: Mapping[str, Any], context_text: str, *, resumed: bool) -> str:
    """The text a role run's model gets about the task claimed for it: which task, what the
    board suggests doing next, and moe.get_context's answer (capped)."""
    how = "you hold it from an earlier run that ended before the work was done: carry on" if resumed else "claimed for you"
    lines = [f"## Your task ({how})", "", f"{claim.task} \u201c{claim.title}\u201d, {claim.status}, held by {worker}."]
    suggestion = claim_answer.get("nextAction")
    if isinstance(suggestion, Mapping) and suggestion.get("tool"):
        lines.append(f"The board suggests: {suggestion.get('tool')} ({suggestion.get('reason') or 'next'}).")
    for key in ("handoffHint", "reopenWarning", "staleHandoffDiskState"):
        if claim_answer.get(key):
            lines.append(f"{key}: {json.dumps(claim_answer[key], ensure_ascii=False)}")
    shown = context_text if len(context_text) <= CONTEXT_CHARS else context_text[:CONTEXT_CHARS] + " … (cut; call moe.get_context for the rest)"
    lines += ["", "Its context (moe.get_context):", "", "```json", shown, "```"]
    return "\n".join(lines)


def idle_message(role: Role, worker: str, waited_seconds: float) -> str:
    waited = f" after waiting {waited_seconds:.0f} s" if waited_seconds >= 1 else ""
    return f"No {role.column} task for {worker} to claim{waited}; {worker} left the board."

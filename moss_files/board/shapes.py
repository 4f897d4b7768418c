"""The board's JSON results: the one shape of each record that the `moe.*` tools return and
`moss task|epic|worker|team … --json` prints, under Moe's camelCase names.

Core layer (pure: records in, JSON-ready dicts out).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from moss_files.board.evidence import verification_to_dict
from moss_files.board.model import STATUSES, Board, Epic, Project, Proposal, Rails, Settings, Step, Task, Team, Worker
from moss_files.board.oversight import amendment_to_dict, critique_to_dict, effective_description, handoff_to_dict, pending_amendment
from moss_files.board.review import failed_item_to_dict, history_to_dict, rejection_details
from moss_files.board.rules import lease_deadline, task_labels, worker_status
from moss_files.foundation.ids import format_time


def step_to_dict(step: Step) -> dict[str, Any]:
    """A plan step as Moe returns it. `description` is the instructions in force (the newest
    approved amendment's); the step as first planned is `originalDescription`."""
    data: dict[str, Any] = {
        "stepId": step.id,
        "description": effective_description(step),
        "status": step.status,
        "affectedFiles": list(step.affected_files),
        "newFiles": list(step.new_files),
        "modifiedFiles": list(step.modified_files),
        "note": step.note,
        "startedAt": step.started,
        "completedAt": step.completed,
    }
    if step.amendments:
        waiting = pending_amendment(step)
        data["originalDescription"] = step.description
        data["amendments"] = [amendment_to_dict(a) for a in step.amendments]
        data["activeAmendmentId"] = next((a.get("id") for a in reversed(step.amendments) if a.get("status") == "APPROVED"), None)
        data["pendingAmendmentId"] = waiting.get("id") if waiting else None
    if step.verification:
        data["verification"] = verification_to_dict(step.verification)
    return data


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
        "maxReopens": task.max_reopens,
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
        "verification": verification_to_dict(task.verification),
        "priorHandoffs": [handoff_to_dict(h) for h in task.handoffs],
        "priorAttempt": dict(task.prior_attempt) if task.prior_attempt else None,
        "budget": {"wallClockMs": task.budget_ms} if task.budget_ms else None,
        "planCritiqueResult": critique_to_dict(task.critique),
        "contextFetchedBy": list(task.context_fetched_by),
        "needsHumanReview": task.needs_human_review,
        "rejectionDetails": rejection_details(task),
        "rejectionHistory": [history_to_dict(entry) for entry in task.rejection_history],
        "failedDodItems": [failed_item_to_dict(entry) for entry in task.failed_dod_items],
        "planSizeWarnings": list(task.plan_size_warnings),
        "type": task.type,
        "source": dict(task.source) if task.source is not None else None,
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


def task_card(task: Task) -> dict[str, Any]:
    """A task's card on a board view: its brief record, with what a card shows besides (type
    and labels, reopens, times, whether it is parked for a person)."""
    return {
        **task_brief(task),
        "type": task.type,
        "labels": list(task_labels(task)),
        "reopenCount": task.reopen_count,
        "needsHumanReview": task.needs_human_review,
        "createdAt": task.created,
        "updatedAt": task.updated,
        "completedAt": task.completed,
    }


def task_for_agent(task: Task) -> dict[str, Any]:
    """The task as get_context and claim_next_task give it to the agent working it."""
    return {
        "id": task.id,
        "epicId": task.epic or None,
        "title": task.title,
        "description": task.description,
        "definitionOfDone": list(task.definition_of_done),
        "taskRails": list(task.task_rails),
        "status": task.status,
        "priority": task.priority,
        "assignedWorkerId": task.assigned_worker,
        "implementationPlan": [step_to_dict(step) for step in task.plan],
        "dependsOn": list(task.depends_on),
        "reopenCount": task.reopen_count,
        "reopenReason": task.reopen_reason,
        "rejectionDetails": rejection_details(task),
        "needsHumanReview": task.needs_human_review,
        "testFile": task.test_file,
        "priorHandoffCount": len(task.handoffs),
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
    return {
        "id": epic.id,
        "title": epic.title,
        "description": epic.description,
        "architectureNotes": epic.architecture_notes,
        "epicRails": list(epic.epic_rails),
    }


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
        "staleWorkerTimeoutMs": settings.stale_worker_timeout_ms,
        "requireVerification": settings.require_verification,
        "chatMaxAgentHops": settings.chat_max_agent_hops,
        "taskSizing": {
            "warnSteps": settings.task_sizing.warn_steps,
            "maxSteps": settings.task_sizing.max_steps,
            "warnDistinctFiles": settings.task_sizing.warn_distinct_files,
            "maxDistinctFiles": settings.task_sizing.max_distinct_files,
        },
        "consolidationBranch": settings.consolidation_branch,
    }


def project_to_dict(project: Project) -> dict[str, Any]:
    """The project as Moe shows it: `{id, name, globalRails, settings}`."""
    return {"id": project.id, "name": project.name, "globalRails": rails_to_dict(project.global_rails), "settings": settings_to_dict(project.settings)}


def worker_to_dict(board: Board, worker: Worker) -> dict[str, Any]:
    """A worker with its derived status, current task and teams."""
    task = board.active_task_of(worker.id)
    return {
        "id": worker.id,
        "type": worker.type,
        "status": worker_status(board, worker),
        "currentTaskId": task.id if task else (worker.blocked_task if worker.status == "BLOCKED" else None),
        "epicId": task.epic if task else worker.last_epic,
        "teamIds": sorted(team.id for team in board.teams.values() if worker.id in team.members),
        "blockedReason": worker.blocked_reason,
        "needsFrom": worker.needs_from,
        "blockedStepId": worker.blocked_step,
        "blockedSince": worker.blocked_since,
        "lastHeartbeat": worker.heartbeat,
        "leaseExpiresAt": _lease(board, worker, task),
        "createdAt": worker.created,
        "updatedAt": worker.updated,
    }


def _lease(board: Board, worker: Worker, task: Task | None) -> str | None:
    deadline = lease_deadline(worker, board.project.settings) if task is not None else None
    return format_time(deadline) if deadline is not None else None


def team_to_dict(team: Team) -> dict[str, Any]:
    """Moe's Team: `{id, projectId?, name, role, memberIds, maxSize, createdAt, updatedAt}`."""
    return {
        "id": team.id,
        "name": team.name,
        "role": team.role,
        "memberIds": list(team.members),
        "maxSize": team.max_size,
        "createdAt": team.created,
        "updatedAt": team.updated,
    }


def team_with_members(board: Board, team: Team) -> dict[str, Any]:
    """A team as list_teams shows it: its members with their type and status."""
    members = []
    for member in team.members:
        worker = board.workers.get(member)
        members.append({"id": member, "type": worker.type if worker else None, "status": worker_status(board, worker) if worker else "UNKNOWN"})
    return {**team_to_dict(team), "members": members}


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
        "railList": proposal.rail_list,
        "reason": proposal.reason,
        "status": proposal.status,
        "resolvedBy": proposal.resolved_by,
        "resolvedAt": proposal.resolved,
        "createdAt": proposal.created,
    }


def list_counts(tasks: Iterable[Task]) -> dict[str, int]:
    """Moe's column counts (`inProgress` counts WORKING only), plus every status and the total."""
    by_status = dict.fromkeys(STATUSES, 0)
    for task in tasks:
        by_status[task.status] += 1
    counts: dict[str, Any] = {
        "backlog": by_status["BACKLOG"],
        "inProgress": by_status["WORKING"],
        "review": by_status["REVIEW"],
        "done": by_status["DONE"],
        "byStatus": by_status,
        "total": sum(by_status.values()),
    }
    return counts

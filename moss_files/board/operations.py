"""Moe's tool names (without `moe.`) and the board use cases that answer them.

Shell layer. The `moe` MCP tool set calls `OPERATIONS[name](ctx, **arguments)` with the
tool's camelCase arguments mapped once onto the use case's snake_case parameters; importing
this module loads every board use case, so the tool set imports it on its first call. The
human-only operations (approve_plan, reject_plan, resolve_proposal, init_board, and the
CLI's reads of single items) are not tools and so are not here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moss_files.board import claims, editing, plans, queries, teams

OPERATIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "get_context": plans.get_context,
    "submit_plan": plans.submit_plan,
    "check_approval": plans.check_approval,
    "start_step": plans.start_step,
    "complete_step": plans.complete_step,
    "complete_task": plans.complete_task,
    "report_blocked": plans.report_blocked,
    "propose_rail": plans.propose_rail,
    "list_tasks": queries.list_tasks,
    "search_tasks": queries.search_tasks,
    "get_next_task": queries.get_next_task,
    "claim_next_task": claims.claim_next_task,
    "set_task_status": claims.set_task_status,
    "create_task": editing.create_task,
    "update_task": editing.update_task,
    "create_epic": editing.create_epic,
    "update_epic": editing.update_epic,
    "delete_task": editing.delete_task,
    "delete_epic": editing.delete_epic,
    "get_activity_log": queries.get_activity_log,
    "unblock_worker": plans.unblock_worker,
    "qa_approve": claims.qa_approve,
    "qa_reject": claims.qa_reject,
    "create_team": teams.create_team,
    "join_team": teams.join_team,
    "leave_team": teams.leave_team,
    "list_teams": teams.list_teams,
    "release_task": claims.release_task,
    "list_workers": teams.list_workers,
    "ready_tasks": queries.ready_tasks,
}

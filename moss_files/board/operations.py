"""Moe's tool names (without `moe.`) and the board use cases that answer them.

Shell layer. The `moe` MCP tool set calls `OPERATIONS[name](ctx, **arguments)` with the
tool's camelCase arguments mapped once onto the use case's snake_case parameters; importing
this module loads every board use case, so the tool set imports it on its first call. The
human-only operations (approve_plan, reject_plan, resolve_proposal, resolve_decision,
init_board, and the CLI's reads of single items) are not tools and so are not here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moss_files.board import claims, conversation, editing, governance, leases, plans, queries, teams, waiting

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
    # Moe's later tools
    "wait_for_task": waiting.wait_for_task,
    "heartbeat": leases.heartbeat,
    "deregister_worker": leases.deregister_worker,
    "amend_plan_step": governance.amend_plan_step,
    "archive_task": editing.archive_task,
    "archive_epic": editing.archive_epic,
    "init_project": editing.init_project,
    "get_pending_questions": conversation.get_pending_questions,
    "add_comment": conversation.add_comment,
    "chat_send": conversation.chat_send,
    "chat_read": conversation.chat_read,
    "chat_channels": conversation.chat_channels,
    "chat_join": conversation.chat_join,
    "chat_wait": waiting.chat_wait,
    "chat_who": conversation.chat_who,
    "chat_create_channel": conversation.chat_create_channel,
    "chat_pin": conversation.chat_pin,
    "chat_unpin": conversation.chat_unpin,
    "chat_decision": conversation.chat_decision,
    "chat_resync": conversation.chat_resync,
    "enter_governance": governance.enter_governance,
    "get_handoff_history": governance.get_handoff_history,
    "list_metrics": governance.list_metrics,
    "request_replan": governance.request_replan,
    "set_task_budget": governance.set_task_budget,
    "submit_plan_critique": governance.submit_plan_critique,
}

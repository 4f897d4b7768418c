"""The `moe` tool set through a real MCP client: the workflow from create_epic to qa_approve in
both protocol modes, every tool called, annotations, errors as results, CLI parity, and
`moss serve --tools moe` over stdio with MOE_WORKER_ID."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from mcp import Client, StdioServerParameters
from mcp_support import anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

from moss_files.board import editing, plans
from moss_files.foundation.context import AGENT, Context
from moss_files.mcp.server import TOOL_SETS, build_server

# (read_only, destructive, idempotent) for every moe tool.
ANNOTATIONS = {
    "moe.get_context": (False, False, True),  # it records that the holder read the context
    "moe.submit_plan": (False, True, False),
    "moe.check_approval": (False, False, True),
    "moe.start_step": (False, True, True),
    "moe.complete_step": (False, True, True),
    "moe.complete_task": (False, True, True),
    "moe.report_blocked": (False, True, False),
    "moe.propose_rail": (False, False, False),
    "moe.list_tasks": (True, False, True),
    "moe.search_tasks": (True, False, True),
    "moe.get_next_task": (True, False, True),
    "moe.ready_tasks": (True, False, True),
    "moe.get_activity_log": (True, False, True),
    "moe.claim_next_task": (False, True, True),
    "moe.release_task": (False, True, True),
    "moe.set_task_status": (False, True, True),
    "moe.qa_approve": (False, True, True),
    "moe.qa_reject": (False, True, True),
    "moe.unblock_worker": (False, True, True),
    "moe.create_task": (False, False, False),
    "moe.update_task": (False, True, True),
    "moe.delete_task": (False, True, True),
    "moe.create_epic": (False, False, False),
    "moe.update_epic": (False, True, True),
    "moe.delete_epic": (False, True, True),
    "moe.list_workers": (True, False, True),
    "moe.create_team": (False, False, True),
    "moe.join_team": (False, False, True),
    "moe.leave_team": (False, True, True),
    "moe.list_teams": (True, False, True),
}
ORIGINAL = set(ANNOTATIONS)  # the tools of Moe's first interface, which the workflow test calls
ANNOTATIONS.update(
    {
        "moe.wait_for_task": (False, True, True),
        "moe.heartbeat": (False, True, True),
        "moe.deregister_worker": (False, True, True),
        "moe.amend_plan_step": (False, True, False),
        "moe.request_replan": (False, True, False),
        "moe.submit_plan_critique": (False, True, False),
        "moe.enter_governance": (False, True, True),
        "moe.set_task_budget": (False, True, True),
        "moe.list_metrics": (True, False, True),
        "moe.get_handoff_history": (True, False, True),
        "moe.archive_task": (False, True, True),
        "moe.archive_epic": (False, True, True),
        "moe.init_project": (False, False, True),
        "moe.add_comment": (False, False, False),
        "moe.get_pending_questions": (True, False, True),
        "moe.chat_send": (False, False, False),
        "moe.chat_read": (False, False, False),
        "moe.chat_wait": (False, False, False),
        "moe.chat_channels": (True, False, True),
        "moe.chat_join": (False, False, True),
        "moe.chat_who": (True, False, True),
        "moe.chat_create_channel": (False, False, True),
        "moe.chat_pin": (False, False, True),
        "moe.chat_unpin": (False, True, True),
        "moe.chat_decision": (False, False, False),
        "moe.chat_resync": (False, True, True),
    }
)


@asynccontextmanager
async def connect(root: Path, mode: str) -> AsyncIterator[Client]:
    server = build_server(Context(root, home=root.parent / "home", actor=AGENT), ("moe",))
    options: dict[str, Any] = {"raise_exceptions": True} if mode == "auto" else {}
    async with Client(server, mode=mode, **options) as client:
        yield client


class Calls:
    """Calls tools, checks each result's text equals its structured content, records the names."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.called: set[str] = set()

    async def ok(self, tool: str, /, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args)
        assert not result.is_error, result.content[0].text
        assert json.loads(result.content[0].text) == result.structured_content
        self.called.add(tool)
        return result.structured_content

    async def error(self, tool: str, code: str, /, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args)
        assert result.is_error and result.content[0].text.startswith(f"{code}: "), result.content[0].text
        body = result.structured_content
        assert body["ok"] is False and body["error"]["code"] == code
        self.called.add(tool)
        return body["error"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_create_epic_to_qa_approve_through_the_client(tmp_path: Path, mode: str) -> None:
    root = make_workspace(tmp_path / "project")
    human = Context(root)
    editing.init_board(human)
    project = root / ".moss" / "board" / "project.md"
    project.write_text(project.read_text().replace("required_patterns: []", "required_patterns: [test]"))
    async with connect(root, mode) as client:
        calls = Calls(client)
        assert {tool.name for tool in (await client.list_tools()).tools} == set(ANNOTATIONS)

        epic = (await calls.ok("moe.create_epic", title="Checkout", description="Pay for a cart.", epicRails=["no card numbers in logs"]))["epic"]
        await calls.ok("moe.update_epic", epicId=epic["id"], status="ACTIVE")
        task = (await calls.ok("moe.create_task", epicId=epic["id"], title="Card form", definitionOfDone=["validates"], priority="HIGH", createdBy="HUMAN"))[
            "task"
        ]
        later = (await calls.ok("moe.create_task", epicId=epic["id"], title="Receipts", dependsOn=[task["id"]]))["task"]
        wallets = (await calls.ok("moe.create_task", epicId=epic["id"], title="Wallets", status="WORKING", priority="LOW"))["task"]
        assert (await calls.ok("moe.get_next_task", epicId=epic["id"]))["task"]["id"] == task["id"]
        ready = await calls.ok("moe.ready_tasks")
        assert [t["id"] for t in ready["ready"]] == [task["id"], wallets["id"]] and ready["blocked"][0]["waitingOn"] == [task["id"]]
        await calls.ok("moe.set_task_status", taskId=task["id"], status="PLANNING")

        claimed = await calls.ok("moe.claim_next_task", statuses=["PLANNING"], workerId="arch")
        assert claimed["task"]["id"] == task["id"] and claimed["allRails"] == {"global": ["test"], "epic": ["no card numbers in logs"], "task": []}
        context = await calls.ok("moe.get_context", workerId="arch")
        assert context["task"]["id"] == task["id"] and context["worker"]["status"] == "PLANNING"
        violation = await calls.error("moe.submit_plan", "RAIL_VIOLATION", taskId=task["id"], workerId="arch", steps=[{"description": "Build the form"}])
        assert violation["details"]["violations"] == [{"kind": "REQUIRED_PATTERN_MISSING", "pattern": "test", "stepId": None}]
        proposal = await calls.ok(
            "moe.propose_rail",
            taskId=task["id"],
            proposalType="MODIFY_RAIL",
            targetScope="GLOBAL",
            currentValue="test",
            proposedValue="tests or a manual QA note",
            reason="UI-only steps",
            workerId="arch",
        )
        assert proposal["status"] == "PENDING"
        missing = await calls.error(
            "moe.submit_plan",
            "INVALID_REQUEST",
            taskId=task["id"],
            workerId="arch",
            steps=[{"description": "Build the form", "affectedFiles": ["web/card.tsx"]}, {"description": "Write a test"}],
        )
        assert missing["details"]["missingPaths"] == ["web/card.tsx"]
        (root / "web").mkdir()
        (root / "web" / "card.tsx").write_text("export {}\n")
        plan = await calls.ok(
            "moe.submit_plan",
            taskId=task["id"],
            workerId="arch",
            steps=[{"description": "Build the form", "affectedFiles": ["web/card.tsx"]}, {"description": "Write a test", "newFiles": ["web/card.test.tsx"]}],
        )
        assert (plan["distinctFileCount"], plan["newFileCount"]) == (2, 1) and "warnings" not in plan
        assert plan["status"] == "AWAITING_APPROVAL"
        assert (await calls.ok("moe.check_approval", taskId=task["id"]))["approved"] is False
        refused = await calls.error("moe.set_task_status", "NOT_ALLOWED", taskId=task["id"], status="WORKING", workerId="arch")
        assert refused["status"] == 403
        plans.approve_plan(human, task_id=task["id"])  # the human's part, from the CLI's use case
        assert (await calls.ok("moe.check_approval", taskId=task["id"]))["approved"] is True

        work = await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev")
        assert work["task"]["implementationPlan"][0]["affectedFiles"] == ["web/card.tsx"]
        conflict = await calls.error("moe.claim_next_task", "WORKER_CONFLICT", statuses=["WORKING"], workerId="dev2", epicId=epic["id"])
        assert conflict["details"]["workerId"] == "dev"
        assert (await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev"))["alreadyAssigned"]["taskId"] == task["id"]
        unread = await calls.error("moe.start_step", "NOT_ALLOWED", taskId=task["id"], stepId="step-1", workerId="dev")
        assert unread["details"]["contextFetched"] is False and "moe.get_context" in unread["hint"]
        await calls.ok("moe.get_context", taskId=task["id"], workerId="dev")
        await calls.ok("moe.start_step", taskId=task["id"], stepId="step-1", workerId="dev")
        blocked = await calls.ok("moe.report_blocked", taskId=task["id"], reason="design tokens missing", needsFrom="design", workerId="dev")
        assert blocked["status"] == "BLOCKED"
        assert (await calls.ok("moe.list_workers"))["workers"][1]["status"] == "BLOCKED"
        unblocked = await calls.ok("moe.unblock_worker", workerId="dev", resolution="tokens published", retryTask=True)
        assert unblocked["currentTaskId"] == task["id"]
        await calls.ok("moe.complete_step", taskId=task["id"], stepId="step-1", modifiedFiles=["web/card.tsx"], workerId="dev")
        step = await calls.ok("moe.complete_step", taskId=task["id"], stepId="step-2", workerId="dev")
        assert step["progress"]["percentage"] == 100
        done = await calls.ok("moe.complete_task", taskId=task["id"], prLink="https://example.invalid/pr/7", workerId="dev")
        assert done["status"] == "REVIEW"

        await calls.ok("moe.claim_next_task", statuses=["REVIEW"], workerId="qa")
        await calls.error("moe.qa_reject", "NOT_ALLOWED", taskId=task["id"], reason="not read", workerId="qa")
        await calls.ok("moe.get_context", taskId=task["id"], workerId="qa")
        rejected = await calls.ok(
            "moe.qa_reject",
            taskId=task["id"],
            reason="validates: expiry not checked",
            failedDodItems=["validates"],
            issues=[{"type": "missing_feature", "description": "no expiry check", "file": "web/card.tsx", "line": 3}],
            workerId="qa",
        )
        assert (rejected["status"], rejected["reopenCount"]) == ("WORKING", 1)
        assert rejected["rejectionDetails"]["failedDodItems"] == ["validates"] and rejected["rejectionDetails"]["issues"][0]["line"] == 3
        again = await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev")
        assert again["task"]["reopenReason"] == "validates: expiry not checked"
        await calls.ok("moe.complete_task", taskId=task["id"], workerId="dev")
        await calls.ok("moe.claim_next_task", statuses=["REVIEW"], workerId="qa")
        await calls.error("moe.qa_approve", "NOT_ALLOWED", taskId=task["id"], workerId="qa")  # a new claim: read again
        await calls.ok("moe.get_context", taskId=task["id"], workerId="qa")
        approved = await calls.ok("moe.qa_approve", taskId=task["id"], summary="expiry checked now", workerId="qa")
        assert approved["status"] == "DONE"

        listed = await calls.ok("moe.list_tasks", epicId=epic["id"])
        assert (listed["counts"]["done"], listed["counts"]["backlog"], listed["counts"]["inProgress"]) == (1, 1, 1)
        found = await calls.ok("moe.search_tasks", query="card", filters={"status": "DONE"})
        assert [t["id"] for t in found["tasks"]] == [task["id"]] and found["tasks"][0]["reopenCount"] == 1
        log = await calls.ok("moe.get_activity_log", taskId=task["id"], eventTypes=["QA_REJECTED", "QA_APPROVED"])
        assert [e["event"] for e in log["events"]] == ["QA_APPROVED", "QA_REJECTED"]

        team = (await calls.ok("moe.create_team", name="Pair", role="worker", maxSize=2))["team"]
        await calls.ok("moe.join_team", teamId=team["id"], workerId="dev")
        full = await calls.ok("moe.join_team", teamId=team["id"], workerId="dev2")
        assert full["team"]["memberIds"] == ["dev", "dev2"]
        await calls.error("moe.join_team", "TEAM_FULL", teamId=team["id"], workerId="dev3")
        await calls.ok("moe.leave_team", teamId=team["id"], workerId="dev2")
        assert (await calls.ok("moe.list_teams"))["teams"][0]["members"] == [{"id": "dev", "type": "worker", "status": "IDLE"}]

        await calls.ok("moe.update_task", taskId=later["id"], title="Email receipts")
        await calls.ok("moe.set_task_status", taskId=later["id"], status="WORKING")
        await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev2")
        await calls.ok("moe.release_task", taskId=later["id"], workerId="dev2")
        await calls.ok("moe.delete_task", taskId=later["id"])
        gone = await calls.ok("moe.delete_epic", epicId=epic["id"], cascadeDelete=True)
        assert gone["deletedTaskCount"] == 2
        await calls.error("moe.get_context", "NOT_FOUND", taskId=task["id"])
        await calls.error("moe.update_task", "INVALID_REQUEST", taskId="x", status="DONE")  # not an argument of update_task
        assert calls.called == ORIGINAL

    # The files are the truth: the CLI reads what the server wrote.
    proposals = json.loads(run_cli("moss", "board", "proposals", "--json", cwd=root).stdout)["proposals"]
    assert [p["proposedValue"] for p in proposals] == ["tests or a manual QA note"]


@pytest.mark.anyio
async def test_annotations_descriptions_and_cli_parity(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    human = Context(root)
    epic = editing.create_epic(human, title="E")["epic"]["id"]
    editing.create_task(human, epic_id=epic, title="t")
    async with connect(root, "auto") as client:
        for tool in (await client.list_tools()).tools:
            hints = tool.annotations
            assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == ANNOTATIONS[tool.name], tool.name
            assert hints.open_world_hint is False and tool.description and len(tool.description) < 400
            assert all("description" in prop for prop in tool.input_schema.get("properties", {}).values()), tool.name
        listed = (await client.call_tool("moe.list_tasks", {"epicId": epic})).structured_content
    assert listed == json.loads(run_cli("moss", "task", "list", "--epic", epic, "--json", cwd=root).stdout)
    assert TOOL_SETS["moe"].default is False  # opt-in: fifty-six schemas are a lot of context for agents that do not use the board


@pytest.mark.anyio
async def test_moss_serve_tools_moe_over_stdio_with_the_workers_identity(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    human = Context(root)
    epic = editing.create_epic(human, title="E")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="t", status="WORKING")["task"]["id"]
    env = {**os.environ, "MOE_WORKER_ID": "agent-7", "MOSS_MCP_NAMES": "underscore"}
    params = StdioServerParameters(command=str(BIN / "moss"), args=["serve", "--tools", "moe"], cwd=str(root), env=env)
    async with Client(params, mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {name.replace(".", "_") for name in ANNOTATIONS}
        claimed = await client.call_tool("moe_claim_next_task", {"statuses": ["WORKING"]})
        assert claimed.structured_content["task"]["assignedWorkerId"] == "agent-7"
        context = await client.call_tool("moe_get_context", {})
        assert context.structured_content["task"]["id"] == task
    shown = json.loads(run_cli("moss", "task", "show", task, "--json", cwd=root).stdout)
    assert shown["assignedWorkerId"] == "agent-7"

"""The lean default tool list: `moss serve` lists the core set and `moss.tools`, at most 12 kB,
and every other tool stays reachable: enabled by `moss.tools` (with
notifications/tools/list_changed in both protocol eras) or by calling it by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import ToolListChangedNotification
from mcp_support import anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

from moss_files.foundation.context import AGENT, Context
from moss_files.mcp.server import CORE_TOOLS, META_TOOL, TOOL_SETS, build_server, underscored

DEFAULT_LIST_LIMIT = 12_000  # bytes of the default tools/list result (issue 26: about 3k tokens)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "project")


def server_for(root: Path, sets: tuple[str, ...] = (), **kwargs: Any) -> Any:
    return build_server(Context(root, home=root.parent / "home", actor=AGENT), sets, **kwargs)


async def listed_json(client: Client) -> str:
    listed = await client.list_tools()
    return json.dumps(listed.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))


@pytest.mark.anyio
@pytest.mark.parametrize("names", ["dotted", "underscore"])
async def test_the_default_list_is_the_core_set_within_its_budget(workspace: Path, names: str) -> None:
    async with Client(server_for(workspace, names=names), mode="legacy") as client:
        text = await listed_json(client)
        served = {tool.name for tool in (await client.list_tools()).tools}
        capabilities = client.server_capabilities
    spell = underscored if names == "underscore" else (lambda name: name)
    assert served == {spell(name) for name in (*CORE_TOOLS, META_TOOL)}
    assert len(text.encode()) <= DEFAULT_LIST_LIMIT, len(text.encode())
    assert capabilities is not None and capabilities.tools is not None and capabilities.tools.list_changed is True


@pytest.mark.anyio
async def test_moss_tools_lists_the_sets_and_enables_them_with_a_notification(workspace: Path) -> None:
    notices: list[Any] = []

    async def on_message(message: Any) -> None:
        notices.append(message)

    async with Client(server_for(workspace), mode="legacy", message_handler=on_message) as client:
        report = (await client.call_tool(META_TOOL, {})).structured_content
        assert [row["name"] for row in report["sets"]] == list(TOOL_SETS)
        assert {row["name"] for row in report["sets"] if row["enabled"]} == {"core"} and report["added"] == []
        enabled = await client.call_tool(META_TOOL, {"enable": ["moe", "cstack"]})
        added = enabled.structured_content["added"]
        assert "moe.claim_next_task" in added and "cstack.plan" in added and "cstack.status" not in added  # core had it
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"moe.claim_next_task", "cstack.plan", "moss.store"} <= names
        assert any(isinstance(notice, ToolListChangedNotification) for notice in notices)
        again = await client.call_tool(META_TOOL, {"enable": ["moe"]})
        assert again.structured_content["added"] == []
        unknown = await client.call_tool(META_TOOL, {"enable": ["board"]})
        assert unknown.is_error and unknown.structured_content["error"]["code"] == "INVALID_REQUEST"


@pytest.mark.anyio
async def test_a_subscription_hears_of_the_change_in_the_2026_era(workspace: Path) -> None:
    async with Client(server_for(workspace), mode="auto") as client:
        async with client.listen(tools_list_changed=True) as changes:
            await client.call_tool(META_TOOL, {"enable": ["share"]})
            with anyio.fail_after(10):
                event = await changes.__anext__()
        assert type(event).__name__ == "ToolsListChanged"
        assert "loop_export" in {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.anyio
@pytest.mark.parametrize("names", ["dotted", "underscore"])
async def test_a_tool_outside_the_core_answers_when_called_by_name(workspace: Path, names: str) -> None:
    async with Client(server_for(workspace, names=names), mode="legacy") as client:
        # Either spelling reaches it, as for the served tools.
        plan = await client.call_tool("cstack_plan", {"status": ["ready"]})
        assert not plan.is_error and plan.structured_content["tasks"] == []
        listed = await client.call_tool("moe.list_tasks", {})
        assert not listed.is_error
        served = {tool.name for tool in (await client.list_tools()).tools}
        spell = underscored if names == "underscore" else (lambda name: name)
        assert {spell("cstack.block"), spell("moe.qa_approve")} <= served  # the whole set came with it
        bad = await client.call_tool("cstack.block", {"task": "1"})  # its schema is checked as for any tool
        assert bad.is_error and bad.structured_content["error"]["code"] == "INVALID_REQUEST"
        nothing = await client.call_tool("moss.nothing", {})
        assert nothing.is_error and nothing.structured_content["error"]["code"] == "NOT_FOUND"


@pytest.mark.anyio
async def test_every_tool_stays_reachable_from_the_core(workspace: Path) -> None:
    async with Client(server_for(workspace, ("all",)), mode="legacy") as client:
        everything = {tool.name for tool in (await client.list_tools()).tools}
    async with Client(server_for(workspace), mode="legacy") as client:
        await client.call_tool(META_TOOL, {"enable": ["all"]})
        enabled = {tool.name for tool in (await client.list_tools()).tools}
    assert enabled == everything and len(everything) == 123


@pytest.mark.anyio
async def test_switched_off_tools_and_explicit_sets_stay_as_they_are(workspace: Path) -> None:
    async with Client(server_for(workspace, disabled=("moss.purge",)), mode="legacy") as client:
        purge = await client.call_tool("moss.purge", {})
        assert purge.is_error and purge.structured_content["error"]["code"] == "NOT_FOUND"
        assert "moss.list" not in {tool.name for tool in (await client.list_tools()).tools}  # no set holds it: none came
    # A server given its sets serves those and nothing else: no moss.tools, no reaching out.
    async with Client(server_for(workspace, ("cstack",)), mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        fetch = await client.call_tool("moss.fetch", {"name": "x"})
    assert META_TOOL not in names and all(name.startswith("cstack.") for name in names)
    assert fetch.is_error and fetch.structured_content["error"]["code"] == "NOT_FOUND"

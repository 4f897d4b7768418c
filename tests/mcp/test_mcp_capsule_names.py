"""The capsule tools under Moss's newest names (the opt-in `capsule` set), `disabled_tools`
across both names, and `disabled_types`, with the SDK's client and with `moss serve` itself."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN
from mcp import Client, StdioServerParameters
from mcp_support import CAPSULE, anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

from moss_files.foundation.config import Config
from moss_files.foundation.context import AGENT, Context
from moss_files.mcp.server import TOOL_SETS, build_server, parse_sets

OPERATIONS = (
    "store", "fetch", "fetch_many", "update", "append", "delete", "latest", "list", "inventory", "search", "compose", "export", "import",
    "purge", "bulk_delete", "bulk_update",
)  # fmt: skip


@asynccontextmanager
async def connect(root: Path, sets: tuple[str, ...], **kwargs: Any) -> AsyncIterator[Client]:
    settings = kwargs.pop("config", Config())
    server = build_server(Context(root, home=root.parent / "home", actor=AGENT, config=settings), sets, **kwargs)
    async with Client(server, raise_exceptions=True) as client:
        yield client


@pytest.mark.anyio
async def test_the_capsule_set_serves_moss_newest_names_with_the_same_schemas(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    assert TOOL_SETS["capsule"].default is False and "capsule" not in parse_sets(None)
    async with connect(root, ("moss", "capsule")) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {name for name in tools if name.startswith("capsule_")} == {f"capsule_{op}" for op in OPERATIONS}
    assert {name for name in tools if name.startswith("moss.")} == {f"moss.{op}" for op in OPERATIONS}
    for op in OPERATIONS:
        dotted, moss_name = tools[f"moss.{op}"], tools[f"capsule_{op}"]
        assert dotted.input_schema == moss_name.input_schema, op
        assert dotted.annotations == moss_name.annotations, op
        assert dotted.description == moss_name.description, op


@pytest.mark.anyio
async def test_both_names_reach_the_same_files_and_give_the_same_results(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    async with connect(root, ("moss", "capsule")) as client:
        stored = await client.call_tool("capsule_store", {"capsule_text": CAPSULE, "name": "auth", "tags": ["web"], "phase": "design"})
        assert not stored.is_error
        by_moss = await client.call_tool("moss.fetch", {"name": "auth"})
        by_capsule = await client.call_tool("capsule_fetch", {"name": "auth"})
        assert by_moss.structured_content == by_capsule.structured_content and by_moss.structured_content["id"] == stored.structured_content["id"]
        found = [await client.call_tool(name, {"query": "login"}) for name in ("moss.search", "capsule_search")]
        assert found[0].structured_content == found[1].structured_content
        assert "<b>login</b>" in found[0].structured_content["items"][0]["snippet"]
        dry = await client.call_tool("capsule_bulk_update", {"tag": "web", "set_phase": "qa", "dry_run": True})
        assert dry.structured_content["updated"] == 1
        done = await client.call_tool("capsule_bulk_update", {"tag": "web", "set_phase": "qa"})
        assert done.structured_content["changed"] == 1
        assert (await client.call_tool("moss.fetch", {"name": "auth"})).structured_content["phase"] == "qa"
        gone = await client.call_tool("capsule_bulk_delete", {"phase": "qa"})
        assert gone.structured_content["deleted"] == 1
        missing = await client.call_tool("moss.fetch", {"name": "auth"})
        assert missing.is_error and missing.structured_content["error"]["code"] == "NOT_FOUND"
        # Errors carry the same codes under either name.
        refused = await client.call_tool("capsule_bulk_delete", {})
        assert refused.is_error and refused.structured_content["error"]["code"] == "INVALID_REQUEST"


@pytest.mark.anyio
async def test_a_tool_disabled_under_one_name_is_gone_under_both(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    async with connect(root, ("moss", "capsule"), disabled=("capsule_purge", "moss.bulk_delete")) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert not {"capsule_purge", "moss.purge", "capsule_bulk_delete", "moss.bulk_delete"} & names
    assert {"capsule_store", "moss.store"} <= names


@pytest.mark.anyio
async def test_disabled_types_capsule_switches_every_capsule_tool_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = make_workspace(tmp_path / "ws")
    unknown = f"gizmo{tmp_path.name.replace('_', '').lower()}"  # a server warns once per process about a type
    with caplog.at_level(logging.WARNING, logger="moss_files.mcp"):
        async with connect(root, ("moss", "capsule", "loop"), config=Config(disabled_types=("capsule", unknown))) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            refused = await client.call_tool("moss.store", {"capsule_text": CAPSULE})
    assert names and all(name.startswith("loop_") for name in names)
    assert refused.is_error and refused.structured_content["error"]["code"] == "NOT_FOUND"
    assert any(unknown in record.getMessage() for record in caplog.records)  # an unknown type is a warning, as in Moss


@pytest.mark.anyio
async def test_moss_serve_reads_disabled_types_from_the_workspace_config(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    config = root / ".moss" / "config.toml"
    config.write_text(config.read_text() + '\ndisabled_types = ["capsule"]\n' if config.exists() else 'disabled_types = ["capsule"]\n')
    server = StdioServerParameters(command=str(BIN / "moss"), args=["serve", "--tools", "moss,capsule,cstack"], cwd=str(root), env=dict(os.environ))
    async with Client(server) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert names and all(name.startswith("cstack.") for name in names)

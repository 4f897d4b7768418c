"""`loop_scan` through a real MCP client (the SDK's in-memory transport) against the server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from mcp import Client
from mcp_support import CAPSULE, anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

from moss_files.foundation.context import AGENT, Context
from moss_files.mcp.server import build_server


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    data: dict[str, Any] = result.structured_content
    return data


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_loop_scan_shows_a_capsules_workspace_and_name(tmp_path: Path, mode: str) -> None:
    root = make_workspace(tmp_path / "ws")
    server = build_server(Context(root, home=tmp_path / "home", actor=AGENT), ("moss", "loop"))
    async with Client(server, mode=mode) as client:
        named = await call(client, "moss.store", capsule_text=CAPSULE, workspace="web", name="Login flow")
        unnamed = await call(client, "moss.store", capsule_text=CAPSULE.replace("login flow", "login flow again"))
        found = await call(client, "loop_scan", query="login", scope=["capsule"])
        by_id = {match["id"]: match for match in found["matches"]}
        assert by_id[named["id"]]["handle"] == "web/Login flow"
        assert "handle" not in by_id[unnamed["id"]]
        # The handle addresses the capsule: split at the first "/", it is moss.fetch's workspace and name.
        workspace, name = by_id[named["id"]]["handle"].split("/", 1)
        assert (await call(client, "moss.fetch", workspace=workspace, name=name))["id"] == named["id"]
        expanded = await call(client, "loop_expand", ids=[named["id"]], include_timeline=True)
        assert expanded["items"][0]["record"]["name"] == "Login flow"
    cli = run_cli("moss", "search", "login", "--kind", "capsule", "--json", cwd=root)
    assert json.loads(cli.stdout) == found  # the CLI prints what the tool returns

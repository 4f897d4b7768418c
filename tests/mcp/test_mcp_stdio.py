"""The real entry point: `moss serve` as a subprocess speaking MCP over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from mcp import Client, StdioServerParameters
from mcp_support import CAPSULE, anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


def params(cwd: Path, *args: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=str(BIN / "moss"), args=["serve", *args], cwd=str(cwd), env={**os.environ, **env})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_moss_serve_over_stdio(tmp_path: Path, mode: str) -> None:
    root = make_workspace(tmp_path / "project")
    (root / "src").mkdir()
    # Started in a subfolder, like an agent started there: the workspace is found above it.
    async with Client(params(root / "src"), mode=mode) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == 17 and {"moss.store", "loop_scan", "moss.tools", "needlecast.wait"} <= {t.name for t in tools}
        stored = await client.call_tool("moss.store", {"capsule_text": CAPSULE, "name": "auth"})
        assert not stored.is_error
        fetched = await client.call_tool("moss.fetch", {"name": "auth"})
        assert fetched.structured_content["capsule_text"] == CAPSULE
        missing = await client.call_tool("moss.fetch", {"name": "nope"})
        assert missing.is_error and missing.structured_content["error"]["code"] == "NOT_FOUND"
        scanned = await client.call_tool("loop_scan", {"query": "login flow"})
        assert scanned.structured_content["matches"][0]["id"] == stored.structured_content["id"]
    # The file is the truth: the CLI reads what the server wrote.
    assert run_cli("moss", "fetch", "auth", cwd=root).stdout == CAPSULE


@pytest.mark.anyio
async def test_tool_sets_and_names_from_the_environment(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    env = {"MOSS_MCP_TOOLS": "cstack", "MOSS_MCP_NAMES": "underscore"}
    async with Client(params(root, **env), mode="legacy") as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        added = await client.call_tool("cstack_add", {"task": "Write the docs"})
    assert names == sorted(f"cstack_{n}" for n in ("status", "plan", "ready", "stats", "add", "start", "done", "block", "close", "remember"))
    assert added.structured_content["task"]["title"] == "Write the docs"
    # --tools wins over the environment.
    async with Client(params(root, "--tools", "needlecast", **env), mode="legacy") as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {
            "needlecast_send",
            "needlecast_inbox",
            "needlecast_read",
            "needlecast_wait",
            "needlecast_outbox",
        }


def jsonrpc(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.flush()


def test_stdout_carries_only_protocol_and_eof_ends_the_server(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    process = subprocess.Popen([str(BIN / "moss"), "serve"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdin is not None and process.stdout is not None
        jsonrpc(process, INITIALIZE)
        first = json.loads(process.stdout.readline())
        assert first["id"] == 1 and first["result"]["serverInfo"]["name"] == "moss-files"
        jsonrpc(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        # loop_orient is outside the default core set: calling it enables its set, and the
        # server says so (notifications/tools/list_changed) before it answers; both are protocol.
        jsonrpc(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "loop_orient", "arguments": {"task": "t"}}})
        changed = json.loads(process.stdout.readline())
        assert changed == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        second = json.loads(process.stdout.readline())
        assert second["id"] == 2 and second["result"]["isError"] is False
        assert second["result"]["structuredContent"]["session"]["task"] == "t"
        process.stdin.close()
        assert process.wait(timeout=20) == 0
        assert process.stdout.read() == b""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_start_up_errors_exit_with_their_code(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    unknown = run_cli("moss", "serve", "--tools", "moss,board", cwd=root)
    assert unknown.returncode == 2 and "INVALID_REQUEST" in unknown.stderr and unknown.stdout == ""
    names = run_cli("moss", "serve", "--names", "camel", cwd=root)
    assert names.returncode == 2
    (tmp_path / "empty").mkdir()
    # The HTTP daemon records itself inside the workspace, so it needs one (stdio does not: below).
    nowhere = run_cli("moss", "serve", "--http", "127.0.0.1:0", cwd=tmp_path / "empty", env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert nowhere.returncode == 6 and "WORKSPACE_NOT_FOUND" in nowhere.stderr
    (root / ".moss" / "config.toml").write_text("capsule_max_chars = \n")
    broken = run_cli("moss", "serve", cwd=root)
    assert broken.returncode == 4 and "config" in broken.stderr


@pytest.mark.anyio
async def test_outside_a_workspace_the_server_starts_and_every_call_says_why(tmp_path: Path) -> None:
    """An agent's host starts `moss serve` wherever the agent runs. Outside a workspace the
    server once exited, and the agent saw only a closed connection."""
    (tmp_path / "empty").mkdir()
    server = params(tmp_path / "empty", GIT_CEILING_DIRECTORIES=str(tmp_path))
    async with Client(server, mode="legacy") as client:
        assert {"moss.fetch", "cstack.status"} <= {tool.name for tool in (await client.list_tools()).tools}
        for name, arguments in (("moss.fetch", {"name": "auth"}), ("cstack.status", {})):
            answer = await client.call_tool(name, arguments)
            error = answer.structured_content["error"]
            assert answer.is_error and error["code"] == "WORKSPACE_NOT_FOUND" and error["status"] == 404 and "moss init" in error["hint"]
    assert not (tmp_path / "empty" / ".moss").exists()  # nothing was created


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["--root", "MOSS_ROOT"])
async def test_a_root_that_is_no_workspace_is_served_as_outside_one_and_gets_nothing_written(tmp_path: Path, how: str) -> None:
    """Issue 27 item 11: `moss serve --root <a plain folder>` wrote .moss/audit/<day>.jsonl on its
    first call (and a search index on a search), turning the folder into a workspace. A root
    without .moss/, .cstack/ or .needlecast/ is outside a workspace: every call says so, and
    nothing is written there."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine\n")
    server = params(tmp_path, "--root", str(plain)) if how == "--root" else params(tmp_path, MOSS_ROOT=str(plain))
    async with Client(server, mode="legacy") as client:
        for name, arguments in (
            ("moss.list", {}),
            ("moss.search", {"query": "x"}),
            ("cstack.status", {}),
            ("needlecast.inbox", {}),
            ("loop_scan", {"query": "x"}),
        ):
            answer = await client.call_tool(name, arguments)
            error = answer.structured_content["error"]
            assert answer.is_error and error["code"] == "WORKSPACE_NOT_FOUND" and "moss init" in error["hint"], name
    assert sorted(p.name for p in plain.rglob("*")) == ["notes.txt"]
    daemon = run_cli("moss", "serve", "--http", "127.0.0.1:0", "--root", str(plain))
    assert daemon.returncode == 6 and "error[WORKSPACE_NOT_FOUND]" in daemon.stderr
    assert sorted(p.name for p in plain.rglob("*")) == ["notes.txt"]


def test_help_names_every_tool_set() -> None:
    from moss_files.mcp.server import TOOL_SETS

    shown = run_cli("moss", "serve", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert all(name in text for name in TOOL_SETS) and "MOSS_MCP_TOOLS" in text and "SIGTERM" in text


def test_other_commands_start_without_the_sdk() -> None:
    probe = "import sys, moss_files.cli; print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'pydantic', 'uvicorn', 'starlette'}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr

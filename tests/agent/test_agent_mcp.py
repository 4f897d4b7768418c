"""`moss agent mcp list` and `moss agent mcp call` against real server processes: this toolkit's
own `moss serve`, a second separate MCP server over stdio and over streamable HTTP, and servers
that cannot start. Every call goes through the same gate as the agent's."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_support import DEMO_SERVER, agent_env, anyio_workers_finish, make_workspace, write_settings  # noqa: F401
from conftest import BIN, run_cli
from helpers import wait_for

from moss_files.agent import service
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError, error_body

pytestmark = [pytest.mark.usefixtures("anyio_workers_finish"), pytest.mark.slow]  # real MCP server processes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture
def http_demo(tmp_path: Path) -> Iterator[str]:
    """The demo server over streamable HTTP on a free loopback port; yields its URL."""
    port = free_port()
    log = (tmp_path / "demo-http.log").open("wb")
    process = subprocess.Popen([sys.executable, str(DEMO_SERVER), "--http", str(port)], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: accepts(port) or process.poll() is not None, timeout=30, message="the HTTP demo server")
        assert process.poll() is None, (tmp_path / "demo-http.log").read_text()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def ws(tmp_path: Path, http_demo: str) -> Path:
    root = make_workspace(tmp_path / "project")
    extra = f'''
[policy]
allow_tools = ["demo.echo", "demo.count", "demo.fail", "demo.hang", "web.echo"]

[[policy.tools]]
tool = "demo.read_file"
needs = ["fs_read"]
fs_read = ["path"]

[[mcp_servers]]
name = "web"
url = "{http_demo}"

[[mcp_servers]]
name = "broken"
command = "/nonexistent/mcp-server"
'''
    write_settings(ws_root := root, extra, timeout=1)
    return ws_root


def agent(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("moss", "agent", *args, cwd=root, env=agent_env(None))


def call(root: Path, target: str, *assignments: str, arguments: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    """`moss agent mcp call` in this process: (exit code, the result or the error body)."""
    try:
        return 0, service.mcp_call(Context(root), target, assignments=assignments, json_arguments=arguments, environ=agent_env(None))
    except MossError as err:
        return err.exit_code, error_body(err)["error"]


def test_mcp_list_shows_every_server_with_its_tools_and_what_they_need(ws: Path) -> None:
    listed = agent(ws, "mcp", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    servers = {server["name"]: server for server in json.loads(listed.stdout)["servers"]}
    assert set(servers) == {"moss", "demo", "web", "broken"}
    moss = servers["moss"]
    assert moss["ok"] and moss["transport"] == "stdio" and moss["server"]["name"] == "moss-files"
    tools = {tool["name"]: tool for tool in moss["tools"]}
    assert tools["moss.fetch"]["needs"] == ["fs_read"] and tools["moss.store"]["needs"] == ["fs_write"]
    assert tools["cstack.status"]["rule"] == "tool_map.moss" and tools["moss.store"]["model_name"] == "moss__moss_store"
    demo = {tool["name"]: tool for tool in servers["demo"]["tools"]}
    assert demo["read_file"]["needs"] == ["fs_read"] and demo["fetch"]["needs"] is None  # unmapped: denied unless allowed by name
    assert servers["web"]["ok"] and servers["web"]["transport"] == "http" and len(servers["web"]["tools"]) == len(demo)
    broken = servers["broken"]
    assert not broken["ok"] and broken["error"]["code"] == "SERVER_UNAVAILABLE" and broken["tools"] == []
    human = agent(ws, "mcp", "list")
    assert human.returncode == 0 and "broken (stdio): SERVER_UNAVAILABLE" in human.stdout and "moss.cstack.status" in human.stdout


def test_mcp_call_against_moss_serve(ws: Path) -> None:
    capsule = "## Objective\nA.\n\n## Current status\nB.\n\n## Decisions\n- C\n\n## Next actions\n- D\n\n## Key locations\n- E\n\n## Open questions\n- F\n"
    stored = agent(ws, "mcp", "call", "moss.moss.store", "--arg", "name=from-agent", "--arg", f"capsule_text={capsule}", "--json")
    assert stored.returncode == 0, stored.stderr
    result = json.loads(stored.stdout)
    assert result["structured"]["id"] and [d["capability"] for d in result["decisions"]] == ["fs_write"]
    assert set(result) == {"server", "tool", "decisions", "is_error", "text", "structured", "bytes", "truncated", "duration_ms"}
    code, fetched = call(ws, "moss.moss.fetch", arguments={"name": "from-agent"})
    assert code == 0 and fetched["structured"]["capsule_text"] == capsule
    status = agent(ws, "mcp", "call", "moss.cstack.status")
    assert status.returncode == 0 and '"exists"' in status.stdout
    purge = agent(ws, "mcp", "call", "moss.moss.purge", "--json")
    assert purge.returncode == 5 and json.loads(purge.stderr)["error"]["code"] == "CAPABILITY_DENIED"
    code, body = call(ws, "moss.moss.export")  # the default folder, ~/.moss/exports, is outside the workspace
    denied = [d for d in body["details"]["decisions"] if not d["granted"]]
    assert code == 5 and [d["rule"] for d in denied] == ["policy.fs.write_roots"]
    code, body = call(ws, "moss.moss.fetch", "name=nope")
    assert code == 9 and body["code"] == "TOOL_FAILED"


def test_an_argument_the_tool_does_not_take_is_refused_before_the_call(ws: Path) -> None:
    """Issue 27 item 9: `--arg bogus=1` reached moss serve and failed there as TOOL_FAILED (exit
    9); the runtime checks the arguments against the tool's schema first (INVALID_REQUEST, exit
    2), as docs/agent.md says, also where the schema leaves additionalProperties unsaid."""
    result = agent(ws, "mcp", "call", "moss.moss.fetch", "--arg", "bogus=1", "--json")
    assert result.returncode == 2, result.stderr
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "INVALID_REQUEST" and [p["field"] for p in error["details"]["errors"]] == ["bogus"]
    code, body = call(ws, "moss.moss.fetch", "name=x", "bogus=1")
    assert code == 2 and body["code"] == "INVALID_REQUEST"


def test_the_default_server_starts_without_moss_on_path(tmp_path: Path) -> None:
    """Issue 27 item 10: run as `.venv/bin/moss agent ...` with no `moss` on PATH, the default
    server (`moss serve`, this very toolkit) could not start, and the model was offered no
    tools. It is started with the running interpreter."""
    root = make_workspace(tmp_path / "plain")
    path = os.pathsep.join(folder for folder in ("/usr/bin", "/bin") if Path(folder).is_dir())
    assert shutil.which("moss", path=path) is None
    env = {**agent_env(None), "PATH": path}
    listed = run_cli("moss", "agent", "mcp", "list", "--json", cwd=root, env=env)
    assert listed.returncode == 0, listed.stderr
    (moss,) = json.loads(listed.stdout)["servers"]
    assert moss["ok"], moss.get("error")
    assert "moss.fetch" in {tool["name"] for tool in moss["tools"]}
    status = run_cli("moss", "agent", "mcp", "call", "moss.cstack.status", "--json", cwd=root, env=env)
    assert status.returncode == 0, status.stderr


def test_mcp_call_against_a_second_server(ws: Path) -> None:
    counted = agent(ws, "mcp", "call", "demo.count", "--arg", "a=2", "--arg", "b=3", "--json")
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout)["structured"] == {"sum": 5}
    echoed = agent(ws, "mcp", "call", "demo.echo", "--arg", "text=42")  # text stays text for a string argument
    assert echoed.returncode == 0 and echoed.stdout.strip() == "echo: 42"
    code, over_http = call(ws, "web.echo", "text=over http")
    assert code == 0 and over_http["text"] == "echo: over http"
    code, inside = call(ws, "demo.read_file", "path=src/main.py")
    assert code == 0 and inside["decisions"][0]["granted"]
    assert call(ws, "demo.read_file", "path=../../etc/passwd")[1]["code"] == "CAPABILITY_DENIED"
    assert call(ws, "demo.fetch", "url=https://example.com") == (5, call(ws, "demo.fetch", "url=https://example.com")[1])
    code, bad = call(ws, "demo.count", "a=two")
    assert (code, bad["code"]) == (2, "INVALID_REQUEST")
    code, wrong = call(ws, "demo.count", arguments={"a": "two"})
    assert code == 2 and wrong["details"]["errors"][0]["field"] == "a"
    assert call(ws, "demo.fail")[1]["code"] == "TOOL_FAILED"
    code, hung = call(ws, "demo.hang")
    assert (code, hung["code"]) == (9, "TOOL_TIMEOUT")
    assert call(ws, "demo.nothing")[0] == 3
    code, down = call(ws, "broken.anything")
    assert (code, down["code"]) == (9, "SERVER_UNAVAILABLE")
    assert call(ws, "nodot")[0] == 2
    code, stranger = call(ws, "ghost.tool")
    assert code == 2 and "ghost" in stranger["message"]


def test_a_server_that_dies_is_a_tool_failure_not_a_hang(repo: Path) -> None:
    root = make_workspace(repo)
    write_settings(root, '[policy]\nallow_tools = ["demo.die"]\n', moss=False)
    died = run_cli("moss", "agent", "mcp", "call", "demo.die", "--json", cwd=root, env=agent_env(None))
    assert died.returncode == 9 and json.loads(died.stderr.splitlines()[-1])["error"]["code"] == "SERVER_UNAVAILABLE"
    log = root / ".moss" / "run" / "agent" / "demo.log"
    assert log.exists()  # the server's stderr goes to a per-machine log, not the terminal
    assert subprocess.run(["git", "check-ignore", "-q", ".moss/run/agent/demo.log"], cwd=root).returncode == 0


def test_bad_settings_exit_4(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    (root / ".moss" / "agent.toml").write_text("[llm]\nmax_steps = 0\n")
    refused = run_cli("moss", "agent", "mcp", "list", "--json", cwd=root)
    assert refused.returncode == 4 and json.loads(refused.stderr)["error"]["code"] == "SCHEMA_ERROR"


CAPSULE_TEXT = "## Objective\nA.\n\n## Current status\nB.\n\n## Decisions\n- C\n\n## Next actions\n- D\n\n## Key locations\n- E\n\n## Open questions\n- F\n"


@pytest.mark.parametrize(("tools", "purge"), [("moss,loop,cstack,needlecast", "moss_purge"), ("capsule", "capsule_purge")])
def test_the_default_deny_of_purge_holds_when_the_server_serves_other_names(repo: Path, tools: str, purge: str) -> None:
    """Issue 24: with `moss serve --names underscore` (the spelling docs/mcp.md gives for
    Codex), `moss agent mcp call moss.moss_purge` was granted and purged a capsule."""
    root = make_workspace(repo)
    server = f'[[mcp_servers]]\nname = "moss"\ncommand = "{BIN / "moss"}"\nargs = ["serve", "--names", "underscore", "--tools", "{tools}"]\ntool_map = "moss"\n'
    write_settings(root, server, moss=False, demo=False)
    prefix = purge.split("_")[0]
    stored = agent(root, "mcp", "call", f"moss.{prefix}_store", "--arg", "name=keep-me", "--arg", f"capsule_text={CAPSULE_TEXT}", "--json")
    assert stored.returncode == 0, stored.stderr
    deleted = agent(root, "mcp", "call", f"moss.{prefix}_delete", "--arg", "name=keep-me", "--json")
    assert deleted.returncode == 0, deleted.stderr
    capsules = sorted((root / ".moss" / "capsules").rglob("*.md"))
    assert capsules  # soft-deleted: still a file, which purge would remove
    refused = agent(root, "mcp", "call", f"moss.{purge}", "--json")
    assert refused.returncode == 5, refused.stdout
    error = json.loads(refused.stderr)["error"]
    assert error["code"] == "CAPABILITY_DENIED" and [d["rule"] for d in error["details"]["decisions"]] == ["policy.deny_tools"]
    assert sorted((root / ".moss" / "capsules").rglob("*.md")) == capsules


def test_commands_urls_and_paths_that_hid_what_they_reach_are_refused_before_the_server(tmp_path: Path) -> None:
    """Issue 24, items 7-10, through a real MCP server: each call is refused by the gate, so the
    demo server (which answers every call it gets) never sees it."""
    root = make_workspace(tmp_path / "project")
    rules = """
[policy]
allow_exec = true
allow_network = true

[policy.exec]
allow_commands = ["git"]
deny_commands = ["git push", "git config"]

[policy.net_http]
allow_domains = ["allowed.com"]
deny_domains = ["169.254.169.254"]

[[policy.tools]]
tool = "demo.run"
needs = ["exec"]
exec = ["command"]

[[policy.tools]]
tool = "demo.fetch"
needs = ["net_http"]
net_http = ["url"]

[[policy.tools]]
tool = "demo.read_file"
needs = ["fs_read"]
fs_read = ["path"]
"""
    write_settings(root, rules, moss=False)
    for tool, argument, value, rule in (
        ("demo.run", "command", "git -C . push", "policy.exec.deny_commands"),
        ("demo.run", "command", "git -c alias.p=push p", "policy.exec.undecidable"),
        ("demo.fetch", "url", "http://allowed.com\\@evil.com/", "policy.net_http.ambiguous"),
        ("demo.fetch", "url", "http://2852039166/latest/meta-data/", "policy.net_http.deny_domains"),
        ("demo.read_file", "path", "file:/etc/passwd", "policy.fs"),
    ):
        code, body = call(root, tool, arguments={argument: value})
        assert (code, body["code"]) == (5, "CAPABILITY_DENIED"), (tool, value, body)
        assert [d["rule"] for d in body["details"]["decisions"] if not d["granted"]] == [rule], (tool, value)
    code, ran = call(root, "demo.run", arguments={"command": "git -C . status"})
    assert code == 0 and ran["text"] == "would run git -C . status"

"""`install.sh --agent claude|codex` registers `moss serve`, and what it registers starts a
server the agent can use (Codex's config serves names without dots)."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import BIN
from mcp import Client, StdioServerParameters
from mcp_support import anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parent.parent.parent


def install(project: Path, *agents: str) -> subprocess.CompletedProcess[str]:
    args = [arg for agent in agents for arg in ("--agent", agent)]
    return subprocess.run([str(ROOT / "install.sh"), "--no-tool", *args, str(project)], capture_output=True, text=True, timeout=120)


@pytest.mark.anyio
async def test_install_writes_the_mcp_config_each_agent_reads(repo: Path) -> None:
    done = install(repo, "claude", "codex")
    assert done.returncode == 0, done.stderr
    claude = json.loads((repo / ".mcp.json").read_text())
    assert claude == {"mcpServers": {"moss": {"command": "moss", "args": ["serve"]}}}
    codex = tomllib.loads((repo / ".codex" / "config.toml").read_text())
    assert codex["mcp_servers"] == {"moss": {"command": "moss", "args": ["serve", "--names", "underscore"]}}
    assert set(codex) == {"mcp_servers", "hooks"}

    before = {path: path.read_bytes() for path in (repo / ".mcp.json", repo / ".codex" / "config.toml")}
    assert install(repo, "claude", "codex").returncode == 0
    assert {path: path.read_bytes() for path in before} == before  # a second run changes nothing

    # Start each entry as the agent would: the command from PATH, in the project.
    for entry, dotted in ((claude["mcpServers"]["moss"], True), (codex["mcp_servers"]["moss"], False)):
        params = StdioServerParameters(command=str(BIN / entry["command"]), args=entry["args"], cwd=str(repo), env={**os.environ})
        async with Client(params, mode="legacy") as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
        assert ("moss.store" in names) is dotted and ("moss_store" in names) is not dotted
        assert all("." not in name for name in names) or dotted


def test_an_existing_mcp_json_keeps_its_servers(repo: Path) -> None:
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "other-server"}}}))
    assert install(repo, "claude").returncode == 0
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"] == {
        "other": {"command": "other-server"},
        "moss": {"command": "moss", "args": ["serve"]},
    }

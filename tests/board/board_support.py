"""Helpers the board's tests share: a workspace with a board, its lease set; the CLI in-process;
a real MCP client over the `moe` tool set that checks every result."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mcp import Client
from mcp_support import make_workspace
from typer.testing import CliRunner

from moss_files.board import editing
from moss_files.cli.main import app
from moss_files.foundation.context import AGENT, Context
from moss_files.mcp.server import build_server


def board(root: Path, *, lease_ms: int | None = None, approval: str | None = None, extra: str = "") -> Path:
    """A workspace (`moss init`) with project.md, its lease and approval mode set as given."""
    make_workspace(root)
    editing.init_board(Context(root))
    project = root / ".moss" / "board" / "project.md"
    text = project.read_text()
    if lease_ms is not None:
        text = text.replace("stale_worker_timeout_ms: 1800000", f"stale_worker_timeout_ms: {lease_ms}")
    if approval is not None:
        text = text.replace("approval_mode: CONTROL", f"approval_mode: {approval}")
    if extra:
        text = text.replace("  chat_max_agent_hops: 4\n", f"  chat_max_agent_hops: 4\n{extra}")
    project.write_text(text)
    return root


def moss(root: Path, *args: str, input: str | None = None, code: int = 0) -> Any:
    """`moss ARGS --json --root ROOT` in-process: the JSON on stdout (or the error body)."""
    done = CliRunner().invoke(app, [*args, "--json", "--root", str(root)], input=input)
    assert done.exit_code == code, (done.stdout, done.stderr, done.exception)
    return json.loads(done.stdout if code == 0 else done.stderr)


@asynccontextmanager
async def connect(root: Path, mode: str = "auto", *, worker: str | None = None) -> AsyncIterator[Client]:
    """A real MCP client on an in-memory `moe` server acting as an agent."""
    server = build_server(Context(root, home=root.parent / "home", actor=AGENT, worker_id=worker), ("moe",))
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


class Clock:
    """A clock the test moves by hand (leases are measured by the context's clock)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 21, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def activity_files(root: Path) -> list[Path]:
    """The board's activity log files in the order they are read: the legacy file, then a
    file per day."""
    base = root / ".moss" / "board"
    legacy = [base / "activity.jsonl"] if (base / "activity.jsonl").exists() else []
    return legacy + sorted((base / "activity").glob("*.jsonl"))


def activity_lines(root: Path) -> list[str]:
    """Every line of the board's activity log, file after file."""
    return [line for path in activity_files(root) for line in path.read_text(encoding="utf-8").splitlines()]

"""An MCP client for the agent runtime: one connection per configured server, over stdio or
streamable HTTP, through the official SDK. Edge layer (processes and sockets); with the server
modules, the only place that imports the `mcp` SDK, and only `moss agent` imports this one.

A connection lists the server's tools when it opens and answers calls with plain values
(`RemoteTool`, `ToolAnswer`), so the runtime never touches SDK types. Every failure becomes a
MossError with a code the runtime logs as `tool.failed`: a server that cannot start or dies is
SERVER_UNAVAILABLE, a call past its deadline TOOL_TIMEOUT, a JSON-RPC error TOOL_FAILED. Nothing
here waits without a deadline: connecting is bounded by `connect_timeout`, each call by its
timeout, and closing by the SDK's own escalation (close stdin, then terminate, then kill).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.abc
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, Implementation

from moss_files import __version__
from moss_files.foundation.errors import AgentFailure, MossError

CLIENT_NAME = "moss-agent"
CLOSE_TIMEOUT = 15.0  # seconds for every server to stop: the SDK's own escalation takes at most about 6


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """What a tool call returned: its text (content blocks joined; the structured content as
    JSON when there is no text), whether the server marked it an error, and how long it took."""

    is_error: bool
    text: str
    structured: Any = None
    duration_ms: int = 0


@dataclass
class Connection:
    """One MCP server to connect to. `serve` keeps the connection open in a task of its own
    (the SDK's client must be closed by the task that opened it) until `stop`; `call` may be
    awaited from any task. A `Pool` runs the connections of a run."""

    name: str
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    errlog: TextIO | None = None
    connect_timeout: float = 30.0
    tools: list[RemoteTool] = field(default_factory=list)
    server_info: dict[str, str | None] = field(default_factory=dict)
    error: MossError | None = None
    _client: Any = None
    _stop: Any = None
    _closed: Any = None

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, list the tools, report started (with `error` set when that failed), and
        hold the connection until `stop`. Never raises: a failure is kept in `error`."""
        self._stop = anyio.Event()
        self._closed = anyio.Event()
        started = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout) as scope:
                async with self._client_for() as client:
                    self.tools = await self._list_tools(client)
                    info = client.server_info
                    self.server_info = {"name": getattr(info, "name", None), "version": getattr(info, "version", None)}
                    self._client = client
                    scope.deadline = math.inf
                    started = True
                    task_status.started()
                    await self._stop.wait()
            if scope.cancelled_caught and not started:
                self.error = self._unavailable(f"did not answer within {self.connect_timeout:g}s of starting")
        except Exception as exc:  # the server failed to start, or broke while connected
            self.error = exc if isinstance(exc, MossError) else self._unavailable(_describe(exc))
        finally:
            self._client = None
            self._closed.set()
            if not started:
                task_status.started()

    def stop(self) -> None:
        """Let `serve` close the connection."""
        if self._stop is not None:
            self._stop.set()

    async def wait_closed(self) -> None:
        if self._closed is not None:
            await self._closed.wait()

    def _client_for(self) -> Any:
        implementation = Implementation(name=CLIENT_NAME, version=__version__)
        if self.url is not None:
            return _HttpClient(self.url, self.headers, implementation)
        assert self.command is not None
        params = StdioServerParameters(command=self.command, args=list(self.args), env=dict(self.env), cwd=self.cwd)
        return Client(stdio_client(params, errlog=self.errlog or sys.stderr), client_info=implementation, cache=None)

    async def _list_tools(self, client: Any) -> list[RemoteTool]:
        found: list[RemoteTool] = []
        cursor: str | None = None
        for _page in range(100):  # a server that pages forever is cut off
            listed = await client.list_tools(cursor=cursor)
            for tool in listed.tools:
                hints = tool.annotations
                found.append(
                    RemoteTool(
                        name=tool.name,
                        description=tool.description or "",
                        input_schema=dict(tool.input_schema or {"type": "object"}),
                        read_only=getattr(hints, "read_only_hint", None) if hints is not None else None,
                    )
                )
            cursor = listed.next_cursor
            if not cursor:
                break
        return found

    async def call(self, tool: str, arguments: Mapping[str, Any], *, timeout: float, meta: Mapping[str, Any] | None = None) -> ToolAnswer:
        """Call `tool` (`meta` goes along as the request's `_meta`). Raises MossError
        TOOL_TIMEOUT, SERVER_UNAVAILABLE or TOOL_FAILED."""
        client = self._client
        if client is None:
            raise self.error or self._unavailable("is not connected")
        started = time.monotonic()
        try:
            with anyio.fail_after(timeout):
                result = await client.call_tool(tool, dict(arguments), meta=dict(meta) if meta else None)
        except TimeoutError:
            raise AgentFailure(
                f"{self.name}.{tool} did not answer within {timeout:g}s",
                code="TOOL_TIMEOUT",
                status=504,
                details={"server": self.name, "tool": tool, "timeout_seconds": timeout},
            ) from None
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:  # the server exited, or its pipe broke
                raise self._unavailable("stopped answering (the connection closed)") from None
            raise AgentFailure(
                f"{self.name}.{tool} failed: {exc.error.message}",
                code="TOOL_FAILED",
                status=502,
                details={"server": self.name, "tool": tool, "rpc_code": exc.error.code},
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError, OSError) as exc:
            raise self._unavailable(f"stopped answering ({type(exc).__name__})") from None
        duration = int((time.monotonic() - started) * 1000)
        return ToolAnswer(bool(result.is_error), answer_text(result.content, result.structured_content), result.structured_content, duration)

    def _unavailable(self, why: str) -> MossError:
        where = self.url or " ".join([self.command or "", *self.args]).strip()
        return AgentFailure(
            f"MCP server {self.name!r} ({where}) {why}",
            code="SERVER_UNAVAILABLE",
            status=503,
            details={"server": self.name},
            hint=f"check [[mcp_servers]] {self.name}; a stdio server's stderr is in .moss/run/agent/{self.name}.log",
        )


class _HttpClient:
    """The SDK client over streamable HTTP with our own httpx2 client (for the headers), both
    closed together."""

    def __init__(self, url: str, headers: Mapping[str, str], implementation: Implementation) -> None:
        self.url, self.headers, self.implementation = url, headers, implementation
        self.stack = AsyncExitStack()

    async def __aenter__(self) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await self.stack.enter_async_context(httpx2.AsyncClient(headers=dict(self.headers), timeout=httpx2.Timeout(30.0, read=300.0)))
        client = Client(streamable_http_client(self.url, http_client=http), client_info=self.implementation, cache=None)
        try:
            return await self.stack.enter_async_context(client)
        except BaseException:
            await self.stack.aclose()
            raise

    async def __aexit__(self, *exc: Any) -> None:
        await self.stack.__aexit__(*exc)


class Pool:
    """The connections of a run, opened together (each server starts while the others do) and
    closed together. Use `async with`; a server that failed keeps its `error`."""

    def __init__(self, connections: Sequence[Connection]) -> None:
        self.connections = list(connections)
        self._group: Any = None

    async def __aenter__(self) -> Pool:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        try:
            async with anyio.create_task_group() as starting:
                for connection in self.connections:
                    starting.start_soon(self._group.start, connection.serve)
        except BaseException:
            await self._close(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        return await self._close(*exc)

    async def _close(self, *exc: Any) -> bool:
        for connection in self.connections:
            connection.stop()
        group, self._group = self._group, None
        if group is None:
            return False
        # Let each connection close itself first, even when the body was cancelled (Ctrl-C):
        # a server is shut down in order (stdin closed, then terminate, then kill, as the SDK
        # does), never left to a cancellation that could cut that sequence short.
        with anyio.CancelScope(shield=True) as waiting:
            waiting.deadline = anyio.current_time() + CLOSE_TIMEOUT
            for connection in self.connections:
                await connection.wait_closed()
        try:
            return bool(await group.__aexit__(*exc))
        except BaseExceptionGroup as grouped:
            # The connections' tasks never fail, so a group holds only what the body raised
            # (and cancellations): let that propagate as it was, not wrapped.
            original = exc[1]
            cancelled = anyio.get_cancelled_exc_class()
            if original is not None and all(leaf is original or isinstance(leaf, cancelled) for leaf in _leaves(grouped)):
                return False
            raise


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    found: list[BaseException] = []
    for item in group.exceptions:
        found.extend(_leaves(item) if isinstance(item, BaseExceptionGroup) else [item])
    return found


def answer_text(content: Sequence[Any], structured: Any) -> str:
    """A tool result as the text a model reads: its text blocks, a note for each other block,
    or the structured content as JSON when there is no text."""
    parts = []
    for block in content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        else:
            parts.append(f"[{kind or 'unknown'} content omitted]")
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False, default=str)
    return "\n".join(parts)


def _describe(exc: BaseException) -> str:
    """A failure to start or talk, in one line (an ExceptionGroup names its first cause)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"cannot be started: {exc.strerror or 'no such command'}"
    if isinstance(exc, MCPError):
        return f"refused the connection: {exc.error.message}"
    text = str(exc) or type(exc).__name__
    return f"failed: {text.splitlines()[0][:300]}"

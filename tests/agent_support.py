"""Helpers for the agent runtime tests: a loopback server that speaks the Anthropic Messages
API's streaming protocol, driven by a script per test, and workspace setup.

The fake answers POST /v1/messages with the next reply of its script: a text answer, tool
calls, an HTTP error (429, 529, 5xx, ...), a stream cut off in the middle, or a stream that
hangs until the test ends. It records every request (headers and JSON body), so a test can
check what the runtime sent. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN

from moss_files import scaffold

API_KEY = "sk-ant-test-0123456789abcdefSECRETKEY"
DEMO_SERVER = Path(__file__).resolve().parent / "agent" / "demo_mcp_server.py"


# --------------------------------------------------------------------------- script items


@dataclass
class Reply:
    """One scripted answer. kind: stream | error | cut | hang."""

    kind: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "end_turn"
    input_tokens: int = 100
    output_tokens: int = 20
    status: int = 200
    error_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int = 0  # events sent before a cut
    message: str = ""


def text(answer: str, *, input_tokens: int = 100, output_tokens: int = 20) -> Reply:
    return Reply("stream", [{"type": "text", "text": answer}], "end_turn", input_tokens, output_tokens)


def tool(name: str, arguments: dict[str, Any], *, say: str = "", call_id: str | None = None, more: list[tuple[str, dict[str, Any]]] = ()) -> Reply:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": say}] if say else []
    for index, (tool_name, tool_args) in enumerate([(name, arguments), *more]):
        ident = call_id if (call_id and index == 0) else f"toolu_{os.urandom(6).hex()}"
        blocks.append({"type": "tool_use", "id": ident, "name": tool_name, "input": tool_args})
    return Reply("stream", blocks, "tool_use", 150, 30)


def error(status: int, error_type: str, *, headers: dict[str, str] | None = None, message: str = "") -> Reply:
    return Reply("error", status=status, error_type=error_type, headers=headers or {}, message=message)


def cut(answer: str = "This answer breaks off in the mid", after: int = 3) -> Reply:
    return Reply("cut", [{"type": "text", "text": answer}], cut_after=after)


def hang(answer: str = "Thinking") -> Reply:
    return Reply("hang", [{"type": "text", "text": answer}])


def stream_events(reply: Reply, message_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed reply, as the Messages API sends them."""
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5-5",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
                },
            },
        )
    ]
    for index, block in enumerate(reply.blocks):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}))
            words = block["text"].split(" ")
            for number, word in enumerate(words):
                piece = word if number == len(words) - 1 else word + " "
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}))
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
            raw = json.dumps(block["input"])
            for offset in range(0, len(raw), 7):  # partial JSON, as the API streams tool input
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": raw[offset : offset + 7]}},
                    )
                )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None}, "usage": {"output_tokens": reply.output_tokens}},
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# --------------------------------------------------------------------------- the fake API


class FakeMessagesAPI:
    """The fake Messages API on 127.0.0.1 (a free port); `url` is its base URL."""

    def __init__(self, script: list[Reply | Callable[[dict[str, Any]], Reply]] | None = None) -> None:
        self.script = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.release = threading.Event()
        self.got_request = threading.Condition(self.lock)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                with fake.lock:
                    fake.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                    number = len(fake.requests)
                    item = fake.script.pop(0) if fake.script else None
                    fake.got_request.notify_all()
                if callable(item):
                    item = item(body)
                if item is None:
                    return self._error(400, "invalid_request_error", {}, "the test's script has no reply left")
                if item.kind == "error":
                    return self._error(item.status, item.error_type, item.headers, item.message or f"scripted {item.status}")
                events = stream_events(item, f"msg_{number:04d}")
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                limit = item.cut_after if item.kind == "cut" else 2 if item.kind == "hang" else len(events)
                for name, data in events[:limit]:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                if item.kind == "cut":
                    self.wfile.write(b'event: content_block_delta\ndata: {"type": "content_bl')  # half an event, then the cut
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                elif item.kind == "hang":
                    fake.release.wait(120)  # until the test lets go; then the stream just ends, broken

            def _error(self, status: int, error_type: str, headers: dict[str, str], message: str) -> None:
                data = json.dumps({"type": "error", "error": {"type": error_type, "message": message}}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-messages-api")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeMessagesAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def add(self, *items: Reply | Callable[[dict[str, Any]], Reply]) -> None:
        with self.lock:
            self.script.extend(items)

    def wait_requests(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Block until `count` requests arrived (a deadline, never a bare sleep)."""
        with self.got_request:
            if not self.got_request.wait_for(lambda: len(self.requests) >= count, timeout=timeout):
                raise AssertionError(f"timed out waiting for {count} model requests (got {len(self.requests)})")
            return list(self.requests)


# --------------------------------------------------------------------------- workspaces


def make_workspace(root: Path) -> Path:
    """A project folder as `moss init` makes it."""
    root.mkdir(parents=True, exist_ok=True)
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    return root


def write_settings(
    root: Path,
    extra: str = "",
    *,
    demo: bool = True,
    moss: bool = True,
    timeout: float = 15,
    orient: bool = False,
    max_steps: int = 8,
    max_output_bytes: int = 262144,
) -> None:
    """A `.moss/agent.toml` for tests: fast retries, this venv's `moss serve`, the demo server."""
    servers = ""
    if moss:
        servers += f'[[mcp_servers]]\nname = "moss"\ncommand = "{BIN / "moss"}"\nargs = ["serve"]\ntool_map = "moss"\n\n'
    if demo:
        servers += f'[[mcp_servers]]\nname = "demo"\ncommand = "{BIN / "python"}"\nargs = ["{DEMO_SERVER}"]\n\n'
    text = f"""
[llm]
model = "claude-sonnet-5-5"
retries = 3
retry_base_seconds = 0.01
max_steps = {max_steps}
orient = {"true" if orient else "false"}

[mcp]
timeout_seconds = {timeout}
max_output_bytes = {max_output_bytes}

{extra}

{servers}"""
    (root / ".moss" / "agent.toml").write_text(text)


def agent_env(api: FakeMessagesAPI | None, **more: str) -> dict[str, str]:
    """The environment of an agent command: the key, the fake's URL, this venv first on PATH."""
    env = {"ANTHROPIC_API_KEY": API_KEY, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **more}
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.url
    return env


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as fake:
        yield fake


@pytest.fixture(autouse=False)
def anyio_workers_finish() -> Iterator[None]:
    """Wait (with a deadline) for AnyIO's worker threads to end after a run's event loop closed."""
    yield
    for thread in threading.enumerate():
        if thread.name in ("AnyIO worker thread", "moss-agent-model"):
            thread.join(timeout=15)


def files_under(root: Path) -> list[Path]:
    """Every regular file under `root` (the test greps them)."""
    return [path for path in root.rglob("*") if path.is_file() and not path.is_symlink()]


def read_events(root: Path) -> list[dict[str, Any]]:
    """Every event of every session log in the workspace, file by file, in order."""
    events = []
    for path in sorted((root / ".moss" / "agent" / "sessions").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                events.append(json.loads(line))
    return events

"""`moss serve --http HOST:PORT`: one shared MCP daemon per project on streamable HTTP.

Entry layer (owns a socket, signals and the run record). It binds loopback only, unless a
bearer token is configured; then every request must carry `Authorization: Bearer <token>`.
While it runs it holds the lock `.moss/run/.mcp.lock` (so a second daemon for the project is
refused with ALREADY_RUNNING) and keeps the record `.moss/run/mcp.json`:
`{port, pid, startedAt, projectPath, host, url}`. A record whose lock is free was left by a
daemon that died; it is replaced. SIGTERM or SIGINT stops it cleanly: open requests finish
(within GRACE_SECONDS), the record is removed, and the exit status is 0. `.moss/run/` is
per machine and git-ignored by construction (it holds its own `.gitignore`).
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import json
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from moss_files.foundation import fs
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, RepoError, error_body
from moss_files.foundation.httpguard import check_request, is_loopback
from moss_files.foundation.ids import format_time, system_clock

RUN_DIR = Path(".moss") / "run"
RECORD_NAME = "mcp.json"
LOCK_NAME = "mcp"  # fs.locked turns it into .moss/run/.mcp.lock
MCP_PATH = "/mcp"
GRACE_SECONDS = 3
Log = Callable[[str], None]


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT` for IPv6; port 0 picks a free one) -> (host, port).

    Raises InvalidRequest for anything else.
    """
    host, sep, port_text = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise InvalidRequest(f"--http wants HOST:PORT, such as 127.0.0.1:8765, not {text!r}")
    return host, int(port_text)


def record_path(root: Path) -> Path:
    """Where the running daemon's record is."""
    return Path(root) / RUN_DIR / RECORD_NAME


def read_record(root: Path) -> dict[str, Any] | None:
    """The daemon record of the project at `root`, if there is one (it may be stale)."""
    try:
        data = json.loads(fs.read_bytes(record_path(root), max_bytes=65536))
    except (FileNotFoundError, NotADirectoryError, ValueError, MossError):
        return None
    return data if isinstance(data, dict) else None


class _Guard:
    """ASGI wrapper: `moss_files.foundation.httpguard`'s Host, Origin and content-type rules, answered with
    the shared error body (the sidecar applies the same rules)."""

    def __init__(self, app: Any, bind_host: str) -> None:
        self.app = app
        self.bind_host = bind_host

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers") or ()}
            refusal = check_request(
                self.bind_host,
                host=headers.get("host"),
                origin=headers.get("origin"),
                method=scope.get("method", "GET"),
                content_type=headers.get("content-type"),
            )
            if refusal is not None:
                err = MossError(refusal.message, code=refusal.code, status=refusal.status)
                await _send_error(send, err, refusal.status)
                return
        await self.app(scope, receive, send)


async def _send_error(send: Any, err: MossError, status: int, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(error_body(err)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _BearerToken:
    """ASGI wrapper: HTTP requests without the configured bearer token get a 401 error body."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                err = MossError("this server requires a bearer token (Authorization: Bearer ...)", code="UNAUTHORIZED", status=401)
                await _send_error(send, err, 401, [(b"www-authenticate", b"Bearer")])
                return
        await self.app(scope, receive, send)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: after a graceful stop it re-raises the signal,
    which would kill the process before the record is removed. `Daemon` handles signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Daemon:
    """One HTTP daemon serving `server` for the project at `root`."""

    def __init__(
        self,
        server: MCPServer,
        root: Path,
        host: str,
        port: int,
        *,
        token: str | None = None,
        clock: Callable[[], Any] = system_clock,
        log: Log | None = None,
    ) -> None:
        if not is_loopback(host) and not token:
            raise InvalidRequest(
                f"refusing to serve on {host}, which other machines can reach, without a token",
                code="TOKEN_REQUIRED",
                hint="bind 127.0.0.1, or set a token with --token (or MOSS_MCP_TOKEN)",
            )
        self.server = server
        self.root = Path(root).resolve()
        self.host, self.port, self.token = host, port, token
        self.clock = clock
        self.log = log or (lambda text: None)
        self.url: str | None = None
        self.ready = threading.Event()
        self._uvicorn: _Uvicorn | None = None

    def stop(self) -> None:
        """Ask the daemon to stop (safe from signal handlers and other threads)."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True

    def run(self) -> int:
        """Serve until stopped; return the exit status (0).

        Raises Conflict ALREADY_RUNNING (another daemon serves this project), Conflict CONFLICT
        (the port is taken), InvalidRequest TOKEN_REQUIRED.
        """
        run_dir = self.root / RUN_DIR
        self._prepare(run_dir)
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(fs.locked(run_dir / LOCK_NAME, timeout=0))
            except Conflict:
                running = read_record(self.root) or {}
                raise Conflict(
                    "an MCP daemon is already running for this project",
                    code="ALREADY_RUNNING",
                    path=record_path(self.root),
                    details={key: running[key] for key in ("pid", "url", "port") if key in running},
                    hint="use it (its url is in the record), or stop it first",
                ) from None
            stale = read_record(self.root)
            if stale is not None:
                # The lock was free, so whoever wrote this record is gone (killed, or crashed).
                self.log(f"moss serve: removing a stale record left by pid {stale.get('pid', '?')}")
                record_path(self.root).unlink(missing_ok=True)
            sock = stack.enter_context(self._bind())
            self.port = sock.getsockname()[1]
            shown = f"[{self.host}]" if ":" in self.host else self.host
            self.url = f"http://{shown}:{self.port}{MCP_PATH}"
            config = uvicorn.Config(self._app(), log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACE_SECONDS)
            self._uvicorn = _Uvicorn(config)
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGTERM, signal.SIGINT):
                    previous = signal.signal(signum, lambda *_: self.stop())
                    stack.callback(signal.signal, signum, previous)
            record = {
                "port": self.port,
                "pid": os.getpid(),
                "startedAt": format_time(self.clock()),
                "projectPath": str(self.root),
                "host": self.host,
                "url": self.url,
            }
            fs.write_atomic(record_path(self.root), (json.dumps(record, indent=2) + "\n").encode())
            stack.callback(record_path(self.root).unlink, missing_ok=True)
            self.log(f"moss serve: MCP on {self.url} for {self.root} (pid {os.getpid()}; stop with SIGTERM)")
            self.ready.set()
            self._uvicorn.run(sockets=[sock])
            self.log("moss serve: stopped")
        return 0

    def _prepare(self, run_dir: Path) -> None:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            ignore = run_dir / ".gitignore"
            if not ignore.exists():
                # Per-machine state; ignored even where `moss init` never added .gitignore lines.
                fs.create_exclusive(ignore, b"# moss serve: per-machine daemon state\n*\n")
        except OSError as exc:
            raise RepoError(f"cannot create {run_dir}: {exc.strerror}", code="NOT_WRITABLE", path=run_dir) from None

    @contextlib.contextmanager
    def _bind(self) -> Iterator[socket.socket]:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host, self.port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise Conflict(f"port {self.port} on {self.host} is in use", details={"host": self.host, "port": self.port}) from None
                raise InvalidRequest(f"cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
            sock.listen(128)
            yield sock
        finally:
            sock.close()

    def _app(self) -> Any:
        # The SDK's own Host/Origin check is left off: `_Guard` applies ours, the one the
        # sidecar applies too, before anything else runs.
        off = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app: Any = self.server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=off, host=self.host)
        if self.token:
            app = _BearerToken(app, self.token)
        return _Guard(app, self.host)

"""`moss serve --http HOST:PORT`: one shared daemon per project on HTTP: the MCP endpoint
(streamable HTTP at `/mcp`) and the web view's pages (every other path, `moss_files.web`).

Entry layer (owns a socket, signals and the run record). It serves with the one HTTP server
of the toolkit (`foundation.httpserver`, which the sidecar runs too): every connection waits on
an event loop, and a request reaches the apps only once it has arrived whole within its
deadlines, so slow or silent clients hold nothing. It binds loopback only, unless a
bearer token is configured; then every MCP request must carry `Authorization: Bearer <token>`,
and the pages ask for the same token (the header, or a sign-in form that sets a cookie; never a
URL). Wrong tokens slow their client down (`httpguard.FailureThrottle`, one for the MCP
endpoint and the pages). Every request passes the one Host/Origin guard (`foundation.httpguard`) first; the
pages' same-origin HTML forms are let through it, and checked for their CSRF token by the web
app. While it runs it holds the lock `.moss/run/.mcp.lock` (so a second daemon for the project
is refused with ALREADY_RUNNING) and keeps the record `.moss/run/mcp.json`:
`{port, requestedPort, pid, startedAt, projectPath, host, url, web}` (`url` the MCP endpoint,
`web` the pages; `port` the one it listens on, `requestedPort` the one asked for: with `--http
HOST` alone the default, DEFAULT_PORT, from which it scans up to the first free one as Moe's
daemon does). A record whose lock is free was left by a daemon that died; it is replaced. SIGTERM or
SIGINT stops it cleanly: the pages' event streams end, open requests finish (within
GRACE_SECONDS), the file watcher stops, the search index's watcher (`moss index watch`, which
the daemon runs beside itself so that searches skip the walk) stops, the record is removed,
and the exit status is 0.
`.moss/run/` is per machine and git-ignored by construction (it holds its own `.gitignore`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from moss_files.foundation import config, fs
from moss_files.foundation.context import HUMAN, Context
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, RepoError, error_body
from moss_files.foundation.httpguard import FailureThrottle, bearer_matches, check_request, is_loopback, retry_after
from moss_files.foundation.httpserver import HttpServer, Limits, listen_from
from moss_files.foundation.ids import format_time, system_clock
from moss_files.foundation.loglevels import say, shows

RUN_DIR = Path(".moss") / "run"
RECORD_NAME = "mcp.json"
LOCK_NAME = "mcp"  # fs.locked turns it into .moss/.locks/run/.mcp.lock
MCP_PATH = "/mcp"
GRACE_SECONDS = 3
# A tool call's arguments (an import's JSONL, a capsule) can be large; the pages cap their
# forms lower themselves (web.app.MAX_FORM_BYTES).
MAX_BODY = 32 * 1024 * 1024
PORT_HINT = "pick another port: --http 127.0.0.1:PORT, or --http 127.0.0.1:0 for a free one"
DEFAULT_PORT = 8765  # `--http HOST` alone: this port, or the next free one of PORT_SCAN (MOSS_DEFAULT_PORT moves it)
DEFAULT_PORT_ENV = "MOSS_DEFAULT_PORT"
SLEEVE_ENV = "NEEDLECAST_SLEEVE"  # the name this workspace's messages are sent under
Log = Callable[[str], None]


def parse_address(text: str) -> tuple[str, int | None]:
    """`HOST:PORT` (`[::1]:PORT` for IPv6; port 0 picks a free one) -> (host, port); `HOST`
    alone (`127.0.0.1`, `localhost`, `[::1]`) -> (host, None): the default port, or the next
    free one.

    Raises InvalidRequest for anything else.
    """
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]") and len(stripped) > 2:
        return stripped[1:-1], None
    if stripped and not stripped.isdigit() and ":" not in stripped and "/" not in stripped and " " not in stripped:
        return stripped, None
    host, sep, port_text = stripped.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise InvalidRequest(f"--http wants HOST:PORT, such as 127.0.0.1:8765, or HOST alone for the default port, not {text!r}")
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


def running_record(root: Path) -> dict[str, Any] | None:
    """The record of the daemon serving the project at `root` now; None when none runs (a
    record whose lock nobody holds is stale)."""
    record = read_record(root)
    if record is None:
        return None
    run_dir = Path(root) / RUN_DIR
    if not run_dir.is_dir():
        return None
    try:
        with fs.locked(run_dir / LOCK_NAME, timeout=0):
            return None  # the lock was free: whoever wrote the record is gone
    except Conflict:
        return record


class _Guard:
    """ASGI wrapper: `moss_files.foundation.httpguard`'s Host, Origin and content-type rules, answered with
    the shared error body (the sidecar applies the same rules). The pages (every path but
    `/mcp`) may also take a same-origin HTML form; a browser asking them for HTML is refused
    with a page (`refusal_page`) rather than JSON."""

    def __init__(
        self,
        app: Any,
        bind_host: str,
        refusal_page: Callable[[MossError], tuple[bytes, list[tuple[str, str]]]] | None = None,
        log: Log | None = None,
    ) -> None:
        self.app = app
        self.bind_host = bind_host
        self.refusal_page = refusal_page
        self.log = log or (lambda text: None)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and shows(self.log, "debug"):
            # LOG_LEVEL=debug: one line per request, with the status it got.
            statuses: list[int] = []

            async def noting(message: dict[str, Any]) -> None:
                if message.get("type") == "http.response.start":
                    statuses.append(int(message.get("status") or 0))
                await send(message)

            try:
                await self._guarded(scope, receive, noting)
            finally:
                what = f"{scope.get('method', '?')} {scope.get('path', '?')}"
                say(self.log, "debug", f'http: {client_of(scope)} "{what}" {statuses[0] if statuses else "-"}')
            return
        await self._guarded(scope, receive, send)

    async def _guarded(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers") or ()}
            refusal = check_request(
                self.bind_host,
                host=headers.get("host"),
                origin=headers.get("origin"),
                method=scope.get("method", "GET"),
                content_type=headers.get("content-type"),
                forms=not _is_mcp(scope.get("path") or "/"),
            )
            if refusal is not None:
                err = MossError(refusal.message, code=refusal.code, status=refusal.status)
                path = scope.get("path") or "/"
                if self.refusal_page is not None and not _is_mcp(path) and "text/html" in headers.get("accept", ""):
                    body, extra = self.refusal_page(err)
                    sent = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode())]
                    sent += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in extra]
                    await send({"type": "http.response.start", "status": refusal.status, "headers": sent})
                    await send({"type": "http.response.body", "body": body})
                    return
                await _send_error(send, err, refusal.status)
                return
        await self.app(scope, receive, send)


def _is_mcp(path: str) -> bool:
    return path == MCP_PATH or path.startswith(MCP_PATH + "/")


class _Split:
    """ASGI dispatch: `/mcp` (and the lifespan events, which the MCP app needs) to the MCP
    app, every other request to the web view."""

    def __init__(self, mcp_app: Any, web_app: Any) -> None:
        self.mcp_app = mcp_app
        self.web_app = web_app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.web_app is not None and not _is_mcp(scope.get("path") or "/"):
            await self.web_app(scope, receive, send)
        else:
            await self.mcp_app(scope, receive, send)


async def _send_error(send: Any, err: MossError, status: int, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(error_body(err)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def client_of(scope: dict[str, Any]) -> str:
    """The client's address, which wrong tokens are counted by."""
    client = scope.get("client")
    return str(client[0]) if client else "-"


async def send_throttled(send: Any, seconds: float) -> None:
    err = MossError("too many wrong tokens from this address; wait before trying again", code="TOO_MANY_ATTEMPTS", status=429)
    await _send_error(send, err, 429, [(b"retry-after", retry_after(seconds).encode())])


class _BearerToken:
    """ASGI wrapper: HTTP requests without the configured bearer token get a 401 error body;
    a client that gave wrong tokens too often gets 429 until its wait is over (`throttle`,
    shared with the pages; called on the event loop only)."""

    def __init__(self, app: Any, token: str, throttle: FailureThrottle) -> None:
        self.app = app
        self.token = token
        self.throttle = throttle

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization")
            header = given.decode("latin-1") if given is not None else None
            client = client_of(scope)
            if header is not None and (wait := self.throttle.wait(client, time.monotonic())) > 0:
                await send_throttled(send, wait)
                return
            if not bearer_matches(header, self.token):
                if header is not None:
                    self.throttle.failed(client, time.monotonic())
                err = MossError("this server requires a bearer token (Authorization: Bearer ...)", code="UNAUTHORIZED", status=401)
                await _send_error(send, err, 401, [(b"www-authenticate", b"Bearer")])
                return
            self.throttle.succeeded(client)
        await self.app(scope, receive, send)


class Daemon:
    """One HTTP daemon serving `server` and the web view for the project at `root`.

    `web` false serves the MCP endpoint alone; `web_context` is the context the pages act in
    (by default a person's, actor HUMAN, over `root` with its settings and NEEDLECAST_SLEEVE's
    name); `poll` makes the pages' file watcher poll instead of using inotify. `index_watch`
    runs `moss index watch` beside the daemon while it serves, so searches (the daemon's and
    every `moss search` in the workspace) skip the walk of the files.
    """

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
        web: bool = True,
        web_context: Context | None = None,
        poll: bool = False,
        index_watch: bool = False,
        scan: int = 1,
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
        self.requested_port = port
        self.scan = scan
        self.clock = clock
        self.log = log or (lambda text: None)
        self.url: str | None = None
        self.web_url: str | None = None
        self.ready = threading.Event()
        self._server: HttpServer | None = None
        self._stop_requested = False
        self.throttle = FailureThrottle()  # wrong tokens, for the MCP endpoint and the pages alike
        self.web = web
        self.web_context = web_context
        self.poll = poll
        self.index_watch = index_watch
        self._web_app: Any = None

    def stop(self) -> None:
        """Ask the daemon to stop (safe from signal handlers and other threads)."""
        self._stop_requested = True
        if self._web_app is not None:
            self._web_app.changes.close()  # event streams end, so the graceful stop need not wait for them
        if self._server is not None:
            self._server.stop()

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
                say(self.log, "warn", f"moss serve: removing a stale record left by pid {stale.get('pid', '?')}")
                record_path(self.root).unlink(missing_ok=True)
            # From here on a SIGTERM stops the daemon cleanly, also one that arrives while it
            # starts (the index watcher, the web view's watcher and its probe, the MCP app):
            # stop() is remembered, and the server stops as soon as it exists.
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGTERM, signal.SIGINT):
                    previous = signal.signal(signum, lambda *_: self.stop())
                    stack.callback(signal.signal, signum, previous)
            # Conflict when the port is taken (every one of the `scan` ports from it, for the default).
            sock = listen_from(self.host, self.requested_port, scan=self.scan, port_hint=PORT_HINT)
            stack.callback(sock.close)
            self.port = sock.getsockname()[1]
            if self.requested_port and self.port != self.requested_port:
                self.log(f"moss serve: port {self.requested_port} is in use; took {self.port}, the next free one")
            if self.index_watch:
                from moss_files.index import watch

                watcher = watch.start_beside(self.root, log=self.log)
                if watcher is not None:
                    stack.callback(watch.stop_beside, watcher, log=self.log)
            shown = f"[{self.host}]" if ":" in self.host else self.host
            self.url = f"http://{shown}:{self.port}{MCP_PATH}"
            if self.web:
                self.web_url = f"http://{shown}:{self.port}/"
                self._web_app = self._make_web_app()
                self._web_app.start()
                stack.callback(self._web_app.stop)
            self._server = HttpServer(self._app(), sock, limits=Limits(max_body=MAX_BODY), lifespan=True, grace_seconds=GRACE_SECONDS, log=self.log)
            record = {
                "port": self.port,
                "requestedPort": self.requested_port,
                "pid": os.getpid(),
                "startedAt": format_time(self.clock()),
                "projectPath": str(self.root),
                "host": self.host,
                "url": self.url,
                "web": self.web_url,
            }
            fs.write_atomic(record_path(self.root), (json.dumps(record, indent=2) + "\n").encode())
            stack.callback(record_path(self.root).unlink, missing_ok=True)
            self.log(f"moss serve: MCP on {self.url} for {self.root} (pid {os.getpid()}; stop with SIGTERM)")
            if self.web_url:
                self.log(f"moss serve: pages on {self.web_url} (live updates by {self._web_app.watcher.mode})")
            self.ready.set()
            # The path-history record `moss history` reads, made (or brought up to HEAD) while
            # the daemon serves: in a long history its first build takes seconds.
            threading.Thread(target=self._keep_history_record, name="history-record", daemon=True).start()
            if self._stop_requested:  # a signal before the server existed
                self._server.stop()
            self._server.run()
            self.log("moss serve: stopped")
        return 0

    def _keep_history_record(self) -> None:
        from moss_files.capsules import history  # GitPython and SQLite: loaded in this thread only

        self.log(f"moss serve: {history.keep_record(self.root)}")

    def _prepare(self, run_dir: Path) -> None:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            ignore = run_dir / ".gitignore"
            if not ignore.exists():
                # Per-machine state; ignored even where `moss init` never added .gitignore lines.
                fs.create_exclusive(ignore, b"# moss serve: per-machine daemon state\n*\n")
        except OSError as exc:
            raise RepoError(f"cannot create {run_dir}: {exc.strerror}", code="NOT_WRITABLE", path=run_dir) from None

    def _make_web_app(self) -> Any:
        # Imported here: the pages load the board, the index and the agent runtime's readers,
        # which a daemon started with web=False never needs.
        from moss_files.web.app import WebApp

        context = self.web_context
        if context is None:
            context = Context(self.root, clock=self.clock, config=config.load_config(self.root), actor=HUMAN, sleeve=os.environ.get(SLEEVE_ENV) or None)
        return WebApp(context, token=self.token, log=self.log, poll=self.poll, throttle=self.throttle)

    def _app(self) -> Any:
        # The SDK's own Host/Origin check is left off: `_Guard` applies ours, the one the
        # sidecar applies too, before anything else runs.
        off = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        app: Any = self.server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=off, host=self.host)
        if self.token:
            app = _BearerToken(app, self.token, self.throttle)
        return _Guard(_Split(app, self._web_app), self.host, self._web_app.refusal_page if self._web_app is not None else None, self.log)

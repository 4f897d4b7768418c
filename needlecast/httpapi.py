"""The sidecar's HTTP API. Edge layer: owns the listening socket (stdlib http.server).

    GET  /health   {"status": "ok"}                    (no token needed; 405 for other methods)
    GET  /status   sleeve, workspace + cstack stats, needlecast counts, router, process
    GET  /outbox   pending messages of this workspace's outbox
    GET  /inbox    messages of this workspace's inbox (`?unread=1` for unread only)
    GET  /inbox/events   server-sent events: one `message` event per new inbox message, for a
                   client that stays connected (`?unread=1` sends the unread ones first)
    POST /inbox    deliver one message (a message object) or several ({"messages": [...]}),
                   idempotent by (from, id); 201 when something was added, 200 when not
    POST /sleeves/{name}/inbox   the same, into the inbox of the local sleeve `name`
    GET  /sleeves  the sleeves this sidecar delivers to

Errors use the shared body `{"ok": false, "error": {code, message, status, ...}}`. Every
request first passes `moss_files.foundation.httpguard` (the Host, Origin and content-type rules the MCP
daemon applies too). When the server has a token, every route but /health requires
`Authorization: Bearer <token>`; peers (other hosts' sidecars) instead sign their requests
with a token of their own (`needlecast.signing`) and may only deliver.

Load: requests are served by a fixed pool of WORKERS threads; up to QUEUED more wait for one,
and the kernel holds up to BACKLOG connections not yet accepted. Past that, a request is
answered at once with 503 SERVER_BUSY and `Retry-After`, never with a reset connection.
An event stream holds its worker for as long as the client stays; at most MAX_STREAMS streams
run at once (one more is answered 503 SERVER_BUSY), so they never take every worker. Request
bodies are capped at MAX_BODY bytes (413 FILE_TOO_LARGE, answered before the body is
read, which is then drained so the client can read the answer) and sockets time out, so no
client can hold a worker for ever.
"""

from __future__ import annotations

import hmac
import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from moss_files.foundation.errors import InvalidRequest, MossError, NotFound, error_body
from moss_files.foundation.httpguard import check_request
from needlecast.signing import NONCE_HEADER, PEER_HEADER, TIME_HEADER, WINDOW_SECONDS, Peer, ReplayGuard, verify

MAX_BODY = 1024 * 1024
SOCKET_TIMEOUT = 10.0
WORKERS = 16
QUEUED = 256
BACKLOG = 512
RETRY_AFTER_SECONDS = 1
MAX_STREAMS = 4
BUSY_WAIT_SECONDS = 0.2  # how long a 503 waits for the client to finish sending and close
# How much of a refused oversized body is read and dropped so the client sees the 413.
DRAIN_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Call:
    """One request as a handler sees it: the query, the JSON body (None for a GET), the path's
    parameters (`{name}` parts of the route) and the peer that signed it (None for a request
    with the bearer token, or an open loopback server's)."""

    query: dict[str, list[str]]
    body: Any
    params: dict[str, str]
    peer: str | None = None


@dataclass(frozen=True, slots=True)
class EventStream:
    """A handler's answer that streams server-sent events: `chunks` yields each one ready to
    send (`format_event`, `format_comment`), or `b""` now and then while nothing happens so the
    server can see whether the client is still there, and ends when the stream should; it is
    closed when the client goes away."""

    chunks: Generator[bytes, None, None]


def format_event(event: str, data: Any, ident: str | None = None) -> bytes:
    """One server-sent event: `event:`, `id:` (when given) and the JSON of `data` on one line."""
    lines = [f"event: {event}"] + ([f"id: {ident}"] if ident else []) + [f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}"]
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def format_comment(text: str) -> bytes:
    """A comment line, which clients ignore (keep-alives, the stream's first word)."""
    return f": {text}\n\n".encode()


Handler = Callable[[Call], tuple[int, Any]]
_PARAM = re.compile(r"\{(\w+)\}")


class Api:
    """Routes (method, path pattern) to callables returning (status, JSON body), and decides who
    may call them: the bearer `token` for every route but /health, and peers (requests signed
    with their own token, see `needlecast.signing`) for the routes added with `peers=True`."""

    def __init__(
        self,
        token: str | None,
        log: Callable[[str], None],
        *,
        peers: Mapping[str, Peer] | None = None,
        clock: Callable[[], float] = time.time,
        remember: Callable[[str, str, float], None] | None = None,
        guard: ReplayGuard | None = None,
    ) -> None:
        self.token = token
        self.log = log
        self.peers = dict(peers or {})
        self.clock = clock
        self.remember = remember  # records an accepted nonce beyond this process (peers.NonceLog)
        self.guard = guard or ReplayGuard()
        self._guard_lock = threading.Lock()
        self.streams = threading.BoundedSemaphore(MAX_STREAMS)
        self.routes: dict[tuple[str, str], Handler] = {}
        self.peer_routes: set[tuple[str, str]] = set()
        self._patterns: list[tuple[re.Pattern[str], str]] = []

    def add(self, method: str, path: str, handler: Handler, *, peers: bool = False) -> None:
        self.routes[(method, path)] = handler
        if peers:
            self.peer_routes.add((method, path))
        if "{" in path and all(pattern != path for _, pattern in self._patterns):
            regex = "^" + _PARAM.sub(lambda m: f"(?P<{m.group(1)}>[^/]+)", path) + "$"
            self._patterns.append((re.compile(regex), path))

    def match(self, path: str) -> tuple[str, dict[str, str]]:
        """The route pattern `path` falls under and its parameters (the path itself if none)."""
        if any(p == path for (_m, p) in self.routes):
            return path, {}
        for regex, pattern in self._patterns:
            found = regex.match(path)
            if found:
                return pattern, found.groupdict()
        return path, {}

    def authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        if not header or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[7:].strip().encode(), self.token.encode())

    def verify_peer(self, headers: Mapping[str, str], method: str, target: str, body: bytes) -> str:
        """The peer that signed the request (see `signing.verify`, which raises the refusals)."""
        with self._guard_lock:
            name = verify(headers, method, target, body, self.peers, self.clock(), self.guard)
            if self.remember is not None:
                self.remember(name, headers[NONCE_HEADER], self.clock() + 2 * WINDOW_SECONDS)
        return name


def _body_of(err: MossError, status: int | None = None) -> bytes:
    body = error_body(err)
    if status is not None:
        body["error"]["status"] = status  # 401, 405, 413 … have no class of their own
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


class _RequestHandler(BaseHTTPRequestHandler):
    server_version = "needlecast-sidecar"
    # HTTP/1.0 (http.server's default): one request per connection, so an idle client never
    # holds one of the few workers between requests.
    timeout = SOCKET_TIMEOUT
    api: Api  # set on the subclass made by `make_server`
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        self.api.log(f"http: {self.address_string()} {format % args}")

    def _send(self, status: int, body: Any, extra: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="needlecast"')
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, err: MossError, status: int | None = None) -> None:
        self._send(status or err.status, _body_of(err, status))

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        refusal = check_request(
            self.server.bind_host,
            host=self.headers.get("Host"),
            origin=self.headers.get("Origin"),
            method=method,
            content_type=self.headers.get("Content-Type"),
        )
        if refusal is not None:
            self.close_connection = True
            self._error(InvalidRequest(refusal.message, code=refusal.code), refusal.status)
            self._drain()
            return
        pattern, params = self.api.match(path)
        known_methods = [m for (m, p) in self.api.routes if p == pattern]
        if not known_methods:
            self._error(NotFound(f"no endpoint {path}"))
            return
        peer: str | None = None
        raw: bytes | None = None
        if pattern != "/health":
            try:
                if self.headers.get(PEER_HEADER) is not None:
                    # A peer's signature covers the body: read it (within the limit) first.
                    raw = self._read_body() if method in ("POST", "PUT") else b""
                    signed = {name: self.headers.get(name) or "" for name in (PEER_HEADER, TIME_HEADER, NONCE_HEADER, "Authorization")}
                    peer = self.api.verify_peer(signed, method, self.path, raw)
                    if (method, pattern) not in self.api.peer_routes:
                        raise InvalidRequest(f"peers may not use {method} {pattern}", code="PEER_NOT_ALLOWED", status=403)
                elif not self.api.authorized(self.headers.get("Authorization")):
                    raise InvalidRequest("a bearer token is required", code="UNAUTHORIZED", status=401)
            except MossError as err:
                self.close_connection = True
                self._error(err, 413 if err.code == "FILE_TOO_LARGE" else None)
                self._drain()
                return
        handler = self.api.routes.get((method, pattern))
        if handler is None:
            self.close_connection = True
            self._error(InvalidRequest(f"{method} is not allowed on {path}; use {', '.join(sorted(known_methods))}"), 405)
            self._drain()
            return
        try:
            if method == "POST":
                payload = self._parse_json(raw if raw is not None else self._read_body())
            else:
                payload = None
            status, body = handler(Call(parse_qs(parts.query), payload, params, peer))
        except MossError as err:
            self._error(err, 413 if err.code == "FILE_TOO_LARGE" else None)
            self._drain()
            return
        except Exception as exc:  # a bug must not kill the worker or leak a traceback to clients
            self.api.log(f"http: internal error on {method} {path}: {type(exc).__name__}: {exc}")
            self._error(MossError("internal error"))
            return
        if isinstance(body, EventStream):
            self._stream(status, body)
            return
        self._send(status, body)

    def _stream(self, status: int, stream: EventStream) -> None:
        """Send `stream`'s events until it ends or the client goes away."""
        self.close_connection = True
        if not self.api.streams.acquire(blocking=False):
            stream.chunks.close()
            self._error(MossError(f"{MAX_STREAMS} event streams are open already", code="SERVER_BUSY", hint="retry later"), 503)
            return
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            for chunk in stream.chunks:
                if chunk:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                elif self._client_left():
                    break
        except OSError:
            pass  # the client went away: nothing left to send it
        finally:
            stream.chunks.close()
            self.api.streams.release()

    def _client_left(self) -> bool:
        """Whether the client closed its end: the request was read whole, so anything readable
        on the socket now is its end of file."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _read_body(self) -> bytes:
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self.close_connection = True
            raise InvalidRequest("a JSON body with Content-Length is required")
        length = int(length_text)
        if length > MAX_BODY:
            self.close_connection = True
            raise InvalidRequest(f"body is {length} bytes; the limit is {MAX_BODY}", code="FILE_TOO_LARGE", details={"max_bytes": MAX_BODY})
        data = self.rfile.read(length)
        self._body_read = True
        return data

    @staticmethod
    def _parse_json(data: bytes) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            raise InvalidRequest("the body is not valid JSON") from None

    def _drain(self) -> None:
        """Read and drop an unread request body before the connection closes: closing a socket
        with unread data makes the kernel reset it, and the client would lose our answer."""
        if getattr(self, "_body_read", False) or not self.close_connection:
            return
        length_text = self.headers.get("Content-Length") or "0"
        remaining = min(int(length_text), DRAIN_LIMIT) if length_text.isdigit() else 0
        self.wfile.flush()
        try:
            while remaining > 0:
                chunk = self.rfile.read1(min(remaining, 65536))
                if not chunk:
                    break
                remaining -= len(chunk)
        except OSError:
            pass  # the client gave up; nothing left to protect

    def handle_expect_100(self) -> bool:
        # A client that asks before sending a large body (curl does) is refused before it sends.
        length_text = self.headers.get("Content-Length") or "0"
        if length_text.isdigit() and int(length_text) > MAX_BODY:
            self.close_connection = True
            err = InvalidRequest(f"body is {length_text} bytes; the limit is {MAX_BODY}", code="FILE_TOO_LARGE", details={"max_bytes": MAX_BODY})
            self._body_read = True  # nothing was sent, nothing to drain
            self._error(err, 413)
            return False
        return super().handle_expect_100()

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


_BUSY_BODY = _body_of(MossError("the sidecar is busy; retry shortly", code="SERVER_BUSY", hint=f"retry after {RETRY_AFTER_SECONDS}s"), 503)
_BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    + f"Retry-After: {RETRY_AFTER_SECONDS}\r\nContent-Length: {len(_BUSY_BODY)}\r\nConnection: close\r\n\r\n".encode()
    + _BUSY_BODY
)


class _Server(HTTPServer):
    """An HTTP server with a bounded pool of worker threads and an honest answer when full."""

    request_queue_size = BACKLOG  # socketserver's default is 5: bursts were reset by the kernel

    def __init__(self, address: tuple[str, int], handler: type[_RequestHandler], bind_host: str) -> None:
        self.address_family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
        self.bind_host = bind_host
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="needlecast-http")
        self.slots = threading.BoundedSemaphore(WORKERS + QUEUED)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self._busy(request)
            return
        try:
            self.pool.submit(self._work, request, client_address)
        except RuntimeError:  # the pool is shutting down
            self.slots.release()
            self.shutdown_request(request)

    def _work(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self.slots.release()

    def _busy(self, request: socket.socket) -> None:
        """Answer 503 from the accepting thread, waiting on the client for a moment at most."""
        try:
            request.settimeout(BUSY_WAIT_SECONDS)
            request.sendall(_BUSY_RESPONSE)
            request.shutdown(socket.SHUT_WR)
            # Read what the client sends until it closes: closing with its request unread
            # would make the kernel reset the connection, and the client lose the answer.
            while request.recv(65536):
                pass
        except OSError:
            pass  # a slow or vanished client: it had its answer, or had left
        finally:
            request.close()

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=True, cancel_futures=True)


def make_server(api: Api, host: str, port: int) -> HTTPServer:
    """A bound (not yet serving) server for `api`. Raises OSError if the port is taken."""
    handler = type("SidecarRequestHandler", (_RequestHandler,), {"api": api})
    return _Server((host, port), handler, host)

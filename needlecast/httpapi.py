"""The sidecar's HTTP API. Edge layer: the routes, who may call them, and the application the
shared HTTP server (`moss_files.foundation.httpserver`) runs.

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
`Authorization: Bearer <token>` (the scheme in any case); peers (other hosts' sidecars) instead
sign their requests with a token of their own (`needlecast.signing`) and may only deliver.

Load: the shared server holds every connection on one event loop and hands on a request only
once it has arrived whole, within its deadlines (the head within 10 s, the body without a pause
of 2 s: 408 REQUEST_TIMEOUT otherwise), so slow or silent clients hold no thread. Complete
requests run on a fixed pool of WORKERS threads; up to QUEUED more wait for one; past that a
request is answered at once with 503 SERVER_BUSY and `Retry-After`. /health is answered on the
event loop. Request bodies are capped at MAX_BODY bytes (413 FILE_TOO_LARGE, answered before
the body is read, which is then drained so the client can read the answer).
An event stream (`GET /inbox/events`) holds no worker: its events are made on a thread of
its own, at most MAX_STREAMS at once (one more is answered 503 SERVER_BUSY), and it ends when
the client goes away or the stream does.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from moss_files.foundation import structured
from moss_files.foundation.errors import InvalidDocument, InvalidRequest, MossError, NotFound, error_body
from moss_files.foundation.httpguard import bearer_matches, check_request
from moss_files.foundation.httpserver import HttpServer, Limits, listen_from
from moss_files.foundation.loglevels import say
from needlecast.signing import NONCE_HEADER, PEER_HEADER, TIME_HEADER, WINDOW_SECONDS, Peer, ReplayGuard, verify

MAX_BODY = 1024 * 1024
WORKERS = 16
QUEUED = 256
RETRY_AFTER_SECONDS = 1
MAX_STREAMS = 4


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
        """True when no token is needed, or the Authorization header carries it."""
        return self.token is None or bearer_matches(header, self.token)

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


@dataclass(frozen=True, slots=True)
class Request:
    """One complete request as the server read it: the target exactly as sent (a peer's
    signature covers it), its path, the headers by lower-case name, the body."""

    method: str
    target: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    client: str


Answer = tuple[int, bytes | EventStream, dict[str, str]]  # an event stream is sent as it comes


def answer(api: Api, request: Request, bind_host: str) -> Answer:
    """The status, JSON body and extra headers for `request` (runs the handler: a worker thread
    calls it, or the event loop for /health, which reads nothing)."""
    path = request.path.rstrip("/") or "/"
    headers = request.headers
    refusal = check_request(bind_host, host=headers.get("host"), origin=headers.get("origin"), method=request.method, content_type=headers.get("content-type"))
    if refusal is not None:
        return _error(InvalidRequest(refusal.message, code=refusal.code), refusal.status)
    pattern, params = api.match(path)
    known_methods = [m for (m, p) in api.routes if p == pattern]
    if not known_methods:
        return _error(NotFound(f"no endpoint {path}"))
    peer: str | None = None
    try:
        if pattern != "/health":
            if headers.get(PEER_HEADER.lower()) is not None:
                # A peer's signature covers the body and the target as sent.
                signed = {name: headers.get(name.lower()) or "" for name in (PEER_HEADER, TIME_HEADER, NONCE_HEADER, "Authorization")}
                peer = api.verify_peer(signed, request.method, request.target, request.body if request.method in ("POST", "PUT") else b"")
                if (request.method, pattern) not in api.peer_routes:
                    raise InvalidRequest(f"peers may not use {request.method} {pattern}", code="PEER_NOT_ALLOWED", status=403)
            elif not api.authorized(headers.get("authorization")):
                raise InvalidRequest("a bearer token is required", code="UNAUTHORIZED", status=401)
        handler = api.routes.get((request.method, pattern))
        if handler is None:
            return _error(InvalidRequest(f"{request.method} is not allowed on {path}; use {', '.join(sorted(known_methods))}"), 405)
        payload = _parse_json(request.body) if request.method == "POST" else None
        status, body = handler(Call(parse_qs(request.query), payload, params, peer))
    except MossError as err:
        return _error(err)
    except Exception as exc:  # a bug must not kill the worker or leak a traceback to clients
        say(api.log, "error", f"http: internal error on {request.method} {path}: {type(exc).__name__}: {exc}")
        return _error(MossError("internal error"))
    if isinstance(body, EventStream):
        return status, body, {}
    return status, json.dumps(body, ensure_ascii=False).encode("utf-8"), {}


def _error(err: MossError, status: int | None = None) -> Answer:
    status = status or err.status
    extra = {"WWW-Authenticate": 'Bearer realm="needlecast"'} if status == 401 else {}
    return status, _body_of(err, status), extra


def _parse_json(data: bytes) -> Any:
    try:
        return structured.loads_json(data)
    except ValueError:
        raise InvalidRequest("the body is not valid JSON") from None
    except InvalidDocument as err:  # JSON_TOO_DEEP: a request, not a file, so a bad request
        raise InvalidRequest(f"the body is not usable JSON: {err.message}", code=err.code) from None


_BUSY = _error(MossError("the sidecar is busy; retry shortly", code="SERVER_BUSY", hint=f"retry after {RETRY_AFTER_SECONDS}s"), 503)


class ApiApp:
    """The API as an ASGI application for the shared server: a complete request (the server
    read it within its limits) runs on one of WORKERS threads; up to QUEUED more wait for one;
    past that it is answered 503 SERVER_BUSY with Retry-After at once. /health is answered on
    the event loop itself, so it stays quick whatever the workers do."""

    def __init__(self, api: Api, bind_host: str) -> None:
        self.api = api
        self.bind_host = bind_host
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="needlecast-http")
        self.stream_pool = ThreadPoolExecutor(max_workers=MAX_STREAMS, thread_name_prefix="needlecast-events")
        self.slots = threading.BoundedSemaphore(WORKERS + QUEUED)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        message = await receive()
        raw_path = scope["raw_path"].decode("latin-1")
        query = scope["query_string"].decode("latin-1")
        client = scope.get("client")
        request = Request(
            scope["method"],
            raw_path + (f"?{query}" if query else ""),
            scope["path"],
            query,
            {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]},
            message.get("body", b""),
            client[0] if client else "-",
        )
        if (request.path.rstrip("/") or "/") == "/health":
            status, data, extra = answer(self.api, request, self.bind_host)
        elif not self.slots.acquire(blocking=False):
            status, data, extra = _BUSY
            extra = {"Retry-After": str(RETRY_AFTER_SECONDS)}
        else:
            try:
                status, data, extra = await asyncio.get_running_loop().run_in_executor(self.pool, answer, self.api, request, self.bind_host)
            finally:
                self.slots.release()
        if isinstance(data, EventStream):
            status, data, extra = await self._stream(status, data, receive, send)
            if not data:
                self.api.log(f'http: {request.client} "{request.method} {request.target} HTTP/{scope["http_version"]}" {status} (event stream)')
                return
        assert isinstance(data, bytes)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        headers += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in extra.items()]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})
        self.api.log(f'http: {request.client} "{request.method} {request.target} HTTP/{scope["http_version"]}" {status} {len(data)}')

    async def _stream(self, status: int, stream: EventStream, receive: Any, send: Any) -> Answer:
        """Send `stream`'s events as they come until it ends or the client goes away (the
        server's `receive()` answers `http.disconnect` then). Its events are made on a thread of
        the streams' own pool, one step at a time, so a stream holds no worker; the generator
        yields `b""` now and then while nothing happens, so each step ends soon. Answers what
        to send instead (503 when MAX_STREAMS streams run already), or (status, b"", {}) once
        streamed."""
        if not self.api.streams.acquire(blocking=False):
            stream.chunks.close()
            return _error(MossError(f"{MAX_STREAMS} event streams are open already", code="SERVER_BUSY", hint="retry later"), 503)
        loop = asyncio.get_running_loop()
        left = asyncio.ensure_future(receive())
        try:
            headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            while True:
                step = loop.run_in_executor(self.stream_pool, next, stream.chunks, None)
                await asyncio.wait({step, left}, return_when=asyncio.FIRST_COMPLETED)
                chunk = await step  # a step under way finishes before the generator is closed
                if left.done() or chunk is None:
                    break
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not left.done():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away: nothing left to send it
        finally:
            left.cancel()
            await loop.run_in_executor(self.stream_pool, stream.chunks.close)
            self.api.streams.release()
        return status, b"", {}

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.stream_pool.shutdown(wait=True, cancel_futures=True)


class Server:
    """The sidecar's server: the shared HTTP server (`foundation.httpserver`) over `ApiApp`."""

    def __init__(self, api: Api, host: str, port: int, *, scan: int = 1) -> None:
        sock = listen_from(host, port, scan=scan, port_hint="pick another with --port, or --port 0 for a free one")
        self.app = ApiApp(api, host)
        self.http = HttpServer(self.app, sock, limits=Limits(max_body=MAX_BODY), log=api.log)
        self.port = self.http.port

    def run(self) -> None:
        """Serve until `stop` (blocks; run it in a thread of its own)."""
        self.http.run()

    def stop(self) -> None:
        self.http.stop()

    def close(self) -> None:
        """Release the socket and the worker threads (after `run` has returned, or instead of it)."""
        self.http.close()
        self.app.close()


def make_server(api: Api, host: str, port: int, *, scan: int = 1) -> Server:
    """A bound (not yet serving) server for `api`, on `port` or, with `scan`, the first free one
    of the `scan` ports from it. Raises Conflict CONFLICT if they are taken."""
    return Server(api, host, port, scan=scan)

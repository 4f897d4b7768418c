"""The one HTTP/1.1 server of every HTTP surface (the sidecar's API, `moss serve --http` with
its MCP endpoint and web view): one asyncio event loop holds every connection without a thread,
each request must arrive within deadlines, and only a complete request reaches the application,
an ASGI 3 callable. Edge layer: owns the listening socket and the connections; standard
library only.

Why a server of our own: the sidecar's http.server gave each connection one of 16 threads, so
17 clients sending a byte every 5 s held the whole API (issue 24); uvicorn holds slow clients
cheaply but sets no bound on how long a request may take to arrive, so a body shorter than its
Content-Length kept its connection for ever. Here, for every connection:

- the head (request line and headers) must be complete within `head_seconds` of the connection
  being accepted (on a kept-alive connection, of the next request's first byte) and hold at most
  `max_head` bytes: else 408 REQUEST_TIMEOUT, or 431; a connection that sends nothing at all is
  closed then without an answer;
- the body must keep coming: no pause longer than `body_gap_seconds`, and all of it within
  `head_seconds` plus its size at `body_rate` bytes a second: else 408 REQUEST_TIMEOUT. A client
  that closes its side before the whole body is sent gets 400 at once. A body over `max_body`
  gets 413 FILE_TOO_LARGE before it is read (after `Expect: 100-continue`, before it is sent);
  what the client sends anyway is read and dropped (up to `drain_bytes`), so it sees the answer
  instead of a reset connection;
- a kept-alive connection idle for `idle_seconds` is closed; an answer the client does not read
  for `write_seconds` ends its connection;
- past `max_connections` (by default well below the process's limit of open files) a new
  connection is answered 503 SERVER_BUSY with `Retry-After` at once.

The server answers these refusals itself, with the shared JSON error body; everything else is
the application's. The application gets the whole body in its first `receive()`; a later
`receive()` waits until the client goes away (`http.disconnect`), which is how a stream of
server-sent events learns that its reader left. A response without Content-Length is sent
chunked. `run` blocks in the calling thread (a thread of its own, or the main one) until `stop`
is called from anywhere, even a signal handler; open requests then get `grace_seconds` to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import re
import resource
import socket
import threading
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, error_body
from moss_files.foundation.loglevels import say

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]
Log = Callable[[str], None]

BACKLOG = 512  # the kernel's queue of connections not yet accepted (Linux's default is 4096, socketserver's 5)
RETRY_AFTER_SECONDS = 1
MAX_HEADERS = 100
READ_SIZE = 64 * 1024
LINGER_SECONDS = 1.0  # after an error answer, how long the client may take to close its side
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TARGET = re.compile(rb"[\x21-\x7e]+")  # visible ASCII: no spaces, no controls
_FORBIDDEN_IN_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_NO_BODY = frozenset({204, 304})


def default_max_connections() -> int:
    """How many connections to hold at once: the process's limit of open files, less an eighth
    (at least 64) for the files, pipes and watches the rest of the process needs."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    return max(16, soft - max(64, soft // 8))


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds a request must keep to (see the module's docstring)."""

    head_seconds: float = 10.0
    body_gap_seconds: float = 2.0
    body_rate: float = 64 * 1024
    idle_seconds: float = 5.0
    write_seconds: float = 30.0
    max_head: int = 64 * 1024
    max_body: int = 1024 * 1024
    drain_bytes: int = 64 * 1024 * 1024
    max_connections: int = field(default_factory=default_max_connections)


PORT_SCAN = 50  # ports a daemon tries from its default one up, as Moe's daemon does (MOE_PORT_RANGE)


def listen(host: str, port: int, *, port_hint: str, backlog: int = BACKLOG) -> socket.socket:
    """A socket listening on `host:port` (port 0 picks a free one).

    Raises Conflict (code CONFLICT, with `port_hint` as its hint) when the port is in use, and
    InvalidRequest when the address cannot be used at all.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise Conflict(f"port {port} on {host} is in use", details={"host": host, "port": port}, hint=port_hint) from None
        raise InvalidRequest(f"cannot listen on {host}:{port}: {exc.strerror}", details={"host": host, "port": port}) from None
    return sock


def listen_from(host: str, port: int, *, scan: int, port_hint: str, backlog: int = BACKLOG) -> socket.socket:
    """A socket listening on `host` at `port`, or, when it is in use, at the first free one of
    the next `scan - 1` ports up (Moe's daemon scans so from its default port). The socket's
    own address says which was taken.

    Raises Conflict (code CONFLICT) when all of them are in use, InvalidRequest when the
    address cannot be used at all."""
    last = min(port + max(scan, 1) - 1, 65535)
    for candidate in range(port, last + 1):
        try:
            return listen(host, candidate, port_hint=port_hint, backlog=backlog)
        except Conflict:
            continue
    raise Conflict(f"ports {port} to {last} on {host} are all in use", details={"host": host, "port": port, "last": last}, hint=port_hint)


@dataclass(frozen=True, slots=True)
class Head:
    """A request's line and headers as read: the method, the target as sent, the version
    (`1.0`, `1.1`) and the headers in order, names in lower case."""

    method: str
    target: bytes
    version: str
    headers: tuple[tuple[bytes, bytes], ...]

    def values(self, name: bytes) -> list[bytes]:
        return [value for key, value in self.headers if key == name]


class Refusal(Exception):
    """A request the server answers itself, and then closes the connection."""

    def __init__(self, status: int, message: str, *, code: str = "INVALID_REQUEST", details: dict[str, Any] | None = None, drain: int = 0) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.details, self.drain = status, message, code, details or {}, drain


def parse_head(data: bytes) -> Head:
    """The request line and headers of `data` (without the blank line that ends them).

    Raises Refusal (400 malformed, 431 too many headers, 505 another HTTP version).
    """
    lines = data.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise Refusal(400, "the request line is not `METHOD TARGET HTTP/1.1`")
    method, target, version = parts
    if not _TOKEN.fullmatch(method) or not _TARGET.fullmatch(target):
        raise Refusal(400, "the request line is not `METHOD TARGET HTTP/1.1`")
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        if re.fullmatch(rb"HTTP/\d(\.\d)?", version):
            raise Refusal(505, f"HTTP version {version.decode()[5:]} is not supported; use HTTP/1.1")
        raise Refusal(400, "the request line is not `METHOD TARGET HTTP/1.1`")
    if len(lines) - 1 > MAX_HEADERS:
        raise Refusal(431, f"a request may carry {MAX_HEADERS} headers at most")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        # A folded line (starting with a space) and a space before the colon are refused, as
        # RFC 9112 asks: read differently by two servers, they smuggle requests.
        if not colon or not _TOKEN.fullmatch(name):
            raise Refusal(400, "a header line is malformed")
        value = value.strip(b" \t")
        if _FORBIDDEN_IN_VALUE.search(value):
            raise Refusal(400, "a header value holds control characters")
        headers.append((name.lower(), value))
    return Head(method.decode("ascii"), target, version.decode("ascii")[5:], tuple(headers))


@dataclass(frozen=True, slots=True)
class Framing:
    """How a request's body is sent: its Content-Length, or chunked (length None)."""

    length: int | None
    expect_continue: bool


def body_framing(head: Head) -> Framing:
    """The body's framing from the headers. Raises Refusal (400 contradictory or malformed,
    501 a transfer coding other than chunked)."""
    codings = [part.strip().lower() for value in head.values(b"transfer-encoding") for part in value.split(b",")]
    lengths = {part.strip() for value in head.values(b"content-length") for part in value.split(b",")}
    expect = any(value.lower() == b"100-continue" for value in head.values(b"expect")) and head.version == "1.1"
    if codings:
        if lengths:
            raise Refusal(400, "a request may not carry both Transfer-Encoding and Content-Length")
        if codings != [b"chunked"] or head.version != "1.1":
            raise Refusal(501, "only the chunked transfer coding is supported")
        return Framing(None, expect)
    if not lengths:
        return Framing(0, False)
    if len(lengths) != 1 or not next(iter(lengths)).isdigit():
        raise Refusal(400, "the Content-Length header is not one number")
    return Framing(int(next(iter(lengths))), expect)


def _error_bytes(status: int, code: str, message: str, details: dict[str, Any]) -> bytes:
    return json.dumps(error_body(MossError(message, code=code, status=status, details=details)), ensure_ascii=False).encode("utf-8")


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


def _clean(value: bytes) -> bytes:
    if b"\r" in value or b"\n" in value:
        raise RuntimeError("a response header holds a line break")
    return value


class HttpServer:
    """Serves the ASGI `app` on the listening socket `sock` (from `listen`) until `stop`.

    `lifespan` runs the app's lifespan protocol around serving (the MCP SDK's app needs it);
    `log` hears the app's failures (with their tracebacks) and nothing else.
    """

    def __init__(
        self,
        app: App,
        sock: socket.socket,
        *,
        limits: Limits | None = None,
        lifespan: bool = False,
        grace_seconds: float = 3.0,
        log: Log | None = None,
        backlog: int = BACKLOG,
    ) -> None:
        self.app = app
        self.sock = sock
        self.limits = limits or Limits()
        self.lifespan = lifespan
        self.grace_seconds = grace_seconds
        self.log = log or (lambda text: None)
        self.backlog = backlog
        self.ready = threading.Event()
        self.address: tuple[Any, ...] = sock.getsockname()
        self._stop_requested = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._connections: set[_Connection] = set()
        self._closing: set[asyncio.BaseTransport] = set()  # closed, still sending their last bytes
        self._state: dict[str, Any] = {}

    @property
    def port(self) -> int:
        return int(self.address[1])

    @property
    def connections(self) -> int:
        """Connections open now (read from the loop's thread, or roughly from another)."""
        return len(self._connections)

    def run(self) -> None:
        """Serve until `stop` is called; then close the socket and every connection."""
        try:
            asyncio.run(self._main())
        finally:
            self.sock.close()

    def stop(self) -> None:
        """Ask the server to stop (from any thread, or a signal handler)."""
        self._stop_requested.set()
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: it stopped already
                loop.call_soon_threadsafe(stopping.set)

    def close(self) -> None:
        """Release the socket of a server that never ran (or has stopped)."""
        self.sock.close()

    # ----------------------------------------------------------------- the loop

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop_requested.is_set():
            return
        lifespan = _Lifespan(self.app, self._state, self.log) if self.lifespan else None
        if lifespan is not None:
            await lifespan.startup()
        server = await asyncio.start_server(self._accepted, sock=self.sock, backlog=self.backlog, limit=READ_SIZE)
        try:
            self.ready.set()
            await self._stopping.wait()
        finally:
            server.close()
            await self._close_connections()
            if lifespan is not None:
                await lifespan.shutdown(self.grace_seconds)

    async def _close_connections(self) -> None:
        """Close idle connections at once; give busy ones `grace_seconds`, then cancel them."""
        for connection in list(self._connections):
            if not connection.busy:
                connection.writer.transport.abort()  # its read ends at once; no answer was due
        busy = [connection.task for connection in self._connections if connection.task is not None]
        if busy:
            _done, pending = await asyncio.wait(busy, timeout=self.grace_seconds)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=self.grace_seconds)
        for transport in list(self._closing):
            self._abort(transport)

    def _close_transport(self, transport: asyncio.WriteTransport) -> None:
        """Close a connection once what is written to it has gone out; a client that reads none
        of it within `write_seconds` has its connection aborted."""
        if transport.is_closing():
            return
        pending = transport.get_write_buffer_size()
        transport.close()
        if pending:
            self._closing.add(transport)
            asyncio.get_running_loop().call_later(self.limits.write_seconds, self._abort, transport)

    def _abort(self, transport: asyncio.BaseTransport) -> None:
        self._closing.discard(transport)
        if isinstance(transport, asyncio.WriteTransport):
            transport.abort()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._stopping is not None
        if len(self._connections) >= self.limits.max_connections or self._stopping.is_set():
            try:
                await _refuse_busy(reader, writer)
            finally:
                self._close_transport(writer.transport)
            return
        connection = _Connection(self, reader, writer)
        self._connections.add(connection)
        try:
            await connection.serve()
        except asyncio.CancelledError:
            if not self._stopping.is_set():
                raise
            # Stopping cancelled a request past its grace: the task ends quietly (a cancelled
            # connection task would be logged by asyncio's streams as an error).
        except Exception as exc:  # a bug here must not reach asyncio's logger as a stray traceback
            say(self.log, "error", "http: a connection failed:\n" + "".join(traceback.format_exception(exc)).rstrip())
        finally:
            self._connections.discard(connection)


async def _refuse_busy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    body = _error_bytes(503, "SERVER_BUSY", "the server holds as many connections as it can; retry shortly", {})
    head = (
        f"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {RETRY_AFTER_SECONDS}\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await _linger(reader, writer)


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Send what is written, say we are done, and read until the client closes (a moment at
    most): closing with its bytes unread would make the kernel reset the connection, and the
    client lose our answer."""
    try:
        async with asyncio.timeout(LINGER_SECONDS):
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
            while await reader.read(READ_SIZE):
                pass
    except (TimeoutError, OSError):
        pass


class _Lifespan:
    """The ASGI lifespan protocol: startup before serving, shutdown after."""

    def __init__(self, app: App, state: dict[str, Any], log: Log) -> None:
        self.app, self.state, self.log = app, state, log
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        loop = asyncio.get_running_loop()
        self.started: asyncio.Future[None] = loop.create_future()
        self.ended: asyncio.Future[None] = loop.create_future()
        self.task = asyncio.create_task(self._run())
        self.queue.put_nowait({"type": "lifespan.startup"})
        await self.started

    async def shutdown(self, grace: float) -> None:
        self.queue.put_nowait({"type": "lifespan.shutdown"})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.ended), grace)
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self.task, grace)

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        try:
            await self.app(scope, self.queue.get, self._send)
        except Exception as exc:
            if not self.started.done():
                self.started.set_exception(exc)
            else:
                say(self.log, "error", "http: the application's lifespan failed:\n" + "".join(traceback.format_exception(exc)).rstrip())
        finally:
            if not self.started.done():
                self.started.set_exception(RuntimeError("the application ended its lifespan before starting"))
            if not self.ended.done():
                self.ended.set_result(None)

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete" and not self.started.done():
            self.started.set_result(None)
        elif kind == "lifespan.startup.failed" and not self.started.done():
            self.started.set_exception(RuntimeError(message.get("message") or "the application failed to start"))
        elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed") and not self.ended.done():
            self.ended.set_result(None)


class _Connection:
    """One client connection: reads requests within the limits, runs the app for each, writes
    its answers, keeps the connection alive between requests while both sides want it."""

    def __init__(self, server: HttpServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.limits = server.limits
        self.reader, self.writer = reader, writer
        self.task = asyncio.current_task()
        self.loop = asyncio.get_running_loop()
        self.opened = self.loop.time()
        self.buffer = bytearray()
        self.eof = False
        self.busy = False  # inside the application: stopping gives it the grace period
        peer = writer.get_extra_info("peername")
        sockname = writer.get_extra_info("sockname")
        self.client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        self.local = (str(sockname[0]), int(sockname[1])) if isinstance(sockname, tuple) else None

    async def serve(self) -> None:
        first = True
        try:
            while True:
                head = await self._read_head(first)
                first = False
                if head is None:
                    break
                body = await self._read_body(head)
                if not await self._respond(head, body):
                    break
                assert self.server._stopping is not None
                if self.eof or self.server._stopping.is_set():
                    break
        except Refusal as refusal:
            await self._refuse(refusal)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            self.close()

    def close(self) -> None:
        self.server._close_transport(self.writer.transport)

    # ----------------------------------------------------------------- reading

    async def _fill(self, deadline: float, gap: float | None = None) -> bool:
        """Read what the client sends next into the buffer; False at its end of stream.
        Raises TimeoutError at `deadline` (loop time) or after `gap` seconds without a byte."""
        if self.eof:
            return False
        wait = deadline - self.loop.time()
        if gap is not None:
            wait = min(wait, gap)
        if wait <= 0:
            raise TimeoutError
        async with asyncio.timeout(wait):
            data = await self.reader.read(READ_SIZE)
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    async def _read_head(self, first: bool) -> Head | None:
        limits = self.limits
        if first:
            deadline = self.opened + limits.head_seconds
        else:
            if not self.buffer:
                try:
                    if not await self._fill(self.loop.time() + limits.idle_seconds):
                        return None
                except TimeoutError:
                    return None  # idle between requests: close quietly
            deadline = self.loop.time() + limits.head_seconds
        while True:
            while self.buffer[:2] == b"\r\n":  # empty lines before a request are to be ignored (RFC 9112)
                del self.buffer[:2]
            end = self.buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self.buffer) > limits.max_head:
                raise Refusal(431, f"the request's head is over {limits.max_head} bytes")
            try:
                more = await self._fill(deadline)
            except TimeoutError:
                if not self.buffer:
                    return None  # a connection that never sent a byte: nobody to answer
                raise Refusal(408, f"the request's head did not arrive within {limits.head_seconds:g} s", code="REQUEST_TIMEOUT") from None
            if not more:
                if not self.buffer:
                    return None
                raise Refusal(400, "the connection was closed in the middle of a request's head")
        if end + 4 > limits.max_head:
            raise Refusal(431, f"the request's head is over {limits.max_head} bytes")
        head = parse_head(bytes(self.buffer[:end]))
        del self.buffer[: end + 4]
        return head

    async def _read_body(self, head: Head) -> bytes:
        limits = self.limits
        framing = body_framing(head)
        if framing.length is not None and framing.length > limits.max_body:
            too_large = self._too_large(framing.length)
            # Told to wait (Expect: 100-continue), the client has sent nothing to drain.
            too_large.drain = 0 if framing.expect_continue else min(framing.length, limits.drain_bytes)
            raise too_large
        if framing.expect_continue and not self.buffer:
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if framing.length is not None:
            return await self._read_exactly(framing.length, self.loop.time() + limits.head_seconds + framing.length / limits.body_rate)
        return await self._read_chunked()

    def _too_large(self, size: int | None) -> Refusal:
        said = f"{size} bytes" if size is not None else "longer"
        return Refusal(413, f"the body is {said}; the limit is {self.limits.max_body}", code="FILE_TOO_LARGE", details={"max_bytes": self.limits.max_body})

    async def _read_exactly(self, size: int, deadline: float) -> bytes:
        while len(self.buffer) < size:
            try:
                more = await self._fill(deadline, self.limits.body_gap_seconds)
            except TimeoutError:
                raise Refusal(408, f"the request's body stopped arriving ({len(self.buffer)} of {size} bytes came)", code="REQUEST_TIMEOUT") from None
            if not more:
                raise Refusal(400, f"the connection was closed with {len(self.buffer)} of the body's {size} bytes sent")
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    async def _read_chunked(self) -> bytes:
        limits = self.limits
        deadline = self.loop.time() + limits.head_seconds + limits.max_body / limits.body_rate
        body = bytearray()
        while True:
            line = await self._line(deadline)
            size_text = line.split(b";", 1)[0].strip()
            if not size_text or not re.fullmatch(rb"[0-9A-Fa-f]{1,8}", size_text):
                raise Refusal(400, "a chunk's size is not a hexadecimal number")
            size = int(size_text, 16)
            if size == 0:
                while await self._line(deadline):  # trailer fields, ignored
                    pass
                return bytes(body)
            if len(body) + size > limits.max_body:
                raise self._too_large(None)
            body += await self._read_exactly(size, deadline)
            if await self._line(deadline):
                raise Refusal(400, "a chunk does not end with a line break")

    async def _line(self, deadline: float) -> bytes:
        """The next line of a chunked body, without its CRLF."""
        while (end := self.buffer.find(b"\r\n")) < 0:
            if len(self.buffer) > 4096:
                raise Refusal(400, "a line of the chunked body is too long")
            try:
                more = await self._fill(deadline, self.limits.body_gap_seconds)
            except TimeoutError:
                raise Refusal(408, "the request's body stopped arriving", code="REQUEST_TIMEOUT") from None
            if not more:
                raise Refusal(400, "the connection was closed in the middle of the body")
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 2]
        return line

    # ----------------------------------------------------------------- answering

    async def _refuse(self, refusal: Refusal) -> None:
        body = _error_bytes(refusal.status, refusal.code, refusal.message, refusal.details)
        head = (
            f"HTTP/1.1 {refusal.status} {_reason(refusal.status).decode()}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode()
        try:
            self.writer.write(head + body)
            await self._drain_request(refusal.drain)
            await _linger(self.reader, self.writer)
        except OSError:
            pass

    async def _drain_request(self, size: int) -> None:
        """Read and drop up to `size` bytes of a refused body, while they keep coming."""
        remaining = size - len(self.buffer)
        self.buffer.clear()
        deadline = self.loop.time() + self.limits.head_seconds + size / self.limits.body_rate
        with contextlib.suppress(TimeoutError):
            while remaining > 0 and await self._fill(deadline, self.limits.body_gap_seconds):
                remaining -= len(self.buffer)
                self.buffer.clear()

    async def _respond(self, head: Head, body: bytes) -> bool:
        """Run the app for one request; True when the connection may serve another."""
        cycle = _Cycle(self, head, body)
        self.busy = True
        try:
            await self.server.app(cycle.scope(), cycle.receive, cycle.send)
        except Exception as exc:
            say(self.server.log, "error", f"http: {head.method} {head.target.decode('latin-1')} failed:\n" + "".join(traceback.format_exception(exc)).rstrip())
            if not cycle.started:
                with contextlib.suppress(OSError):
                    await cycle.send_error(500, "INTERNAL", "internal error")
            cycle.keep_alive = False
        finally:
            self.busy = False
            await cycle.finish()
        if not cycle.complete:
            return False  # the app ended without finishing its answer: the client must not wait for more
        return cycle.keep_alive and not cycle.gone.is_set()


class _Cycle:
    """One request and its answer: the ASGI `receive` and `send` of one app call."""

    def __init__(self, connection: _Connection, head: Head, body: bytes) -> None:
        self.connection = connection
        self.head = head
        self.body: bytes | None = body
        self.writer = connection.writer
        self.started = False
        self.complete = False
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunked = False
        self.head_sent = False
        connection_tokens = {part.strip().lower() for value in head.values(b"connection") for part in value.split(b",")}
        self.keep_alive = head.version == "1.1" and b"close" not in connection_tokens
        self.gone = asyncio.Event()  # the client went away
        self.wake = asyncio.Event()  # the client went away, or the answer is complete
        self.watcher: asyncio.Task[None] | None = None

    def scope(self) -> dict[str, Any]:
        raw_path, _, query = self.head.target.partition(b"?")
        if not raw_path.startswith(b"/"):
            # The absolute form (`http://host/path`), which proxies send; `*` for OPTIONS.
            rest = raw_path.split(b"://", 1)[-1]
            raw_path = b"/" + rest.split(b"/", 1)[1] if b"/" in rest else b"/"
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": self.head.version,
            "method": self.head.method,
            "scheme": "http",
            "path": unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": list(self.head.headers),
            "client": self.connection.client,
            "server": self.connection.local,
            "state": dict(self.connection.server._state),
        }

    async def receive(self) -> Message:
        if self.body is not None:
            body, self.body = self.body, None
            return {"type": "http.request", "body": body, "more_body": False}
        if not self.wake.is_set():
            if self.watcher is None:
                self.watcher = asyncio.create_task(self._watch())
            await self.wake.wait()
        return {"type": "http.disconnect"}

    async def _watch(self) -> None:
        """Wait for the client to go away, keeping what it sends meanwhile (a next request)."""
        connection = self.connection
        try:
            while len(connection.buffer) <= connection.limits.max_head:
                data = await connection.reader.read(READ_SIZE)
                if not data:
                    connection.eof = True
                    break
                connection.buffer += data
            else:
                return  # a client piling up requests: no more reading until this answer is done
        except OSError:
            pass
        self.gone.set()
        self.wake.set()

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("the response has started already")
            self.started = True
            self.status = int(message["status"])
            self.headers = [(bytes(name).lower(), bytes(value)) for name, value in message.get("headers") or ()]
            return
        if kind != "http.response.body":
            raise RuntimeError(f"unexpected ASGI message {kind!r}")
        if not self.started:
            raise RuntimeError("the response body came before its start")
        if self.complete or self.gone.is_set():
            return  # the client left: nothing to send it
        data = bytes(message.get("body") or b"")
        more = bool(message.get("more_body", False))
        out = bytearray()
        if not self.head_sent:
            out += self._head()
            self.head_sent = True
        if self.head.method != "HEAD" and self.status not in _NO_BODY and self.status >= 200:
            if self.chunked:
                if data:
                    out += b"%x\r\n%s\r\n" % (len(data), data)
                if not more:
                    out += b"0\r\n\r\n"
            else:
                out += data
        if not more:
            self.complete = True
            self.wake.set()
        self.writer.write(bytes(out))
        await self._drain()

    async def _drain(self) -> None:
        try:
            async with asyncio.timeout(self.connection.limits.write_seconds):
                await self.writer.drain()
        except (TimeoutError, OSError):
            # A client that reads nothing of its answer, or has gone: end the connection.
            self.writer.transport.abort()
            self.keep_alive = False
            self.gone.set()
            self.wake.set()

    def _head(self) -> bytes:
        names = {name for name, _ in self.headers}
        headers = list(self.headers)
        if any(name == b"connection" and b"close" in value.lower() for name, value in headers):
            self.keep_alive = False
        bodiless = self.status < 200 or self.status in _NO_BODY
        if b"content-length" not in names and not bodiless and self.head.method != "HEAD":
            if self.head.version == "1.1":
                self.chunked = True
                headers.append((b"transfer-encoding", b"chunked"))
            else:
                self.keep_alive = False  # the end of the connection ends the body
        assert self.connection.server._stopping is not None
        if self.connection.server._stopping.is_set():
            self.keep_alive = False
        if not self.keep_alive and b"connection" not in names:
            headers.append((b"connection", b"close"))
        if b"date" not in names:
            headers.append((b"date", formatdate(usegmt=True).encode("ascii")))
        lines = [b"HTTP/1.1 %d %s" % (self.status, _reason(self.status))]
        lines += [_clean(name) + b": " + _clean(value) for name, value in headers]
        return b"\r\n".join(lines) + b"\r\n\r\n"

    async def send_error(self, status: int, code: str, message: str) -> None:
        body = _error_bytes(status, code, message, {})
        self.keep_alive = False
        await self.send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]}
        )
        await self.send({"type": "http.response.body", "body": body})

    async def finish(self) -> None:
        """After the app returned: stop watching for the client's leaving."""
        if self.watcher is not None and not self.watcher.done():
            self.watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watcher
        if self.started and not self.complete:
            self.writer.transport.abort()  # an answer cut short: the client must see the connection end

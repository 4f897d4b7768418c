"""The sidecar's HTTP API. Edge layer: owns the listening socket (stdlib http.server).

    GET  /health   {"status": "ok"}                    (no token needed; 405 for other methods)
    GET  /status   sleeve, workspace + cstack stats, needlecast counts, router, process
    GET  /outbox   pending messages of this workspace's outbox
    GET  /inbox    messages of this workspace's inbox (`?unread=1` for unread only)
    POST /inbox    deliver one message (a message object) or several ({"messages": [...]}),
                   idempotent by (from, id); 201 when something was added, 200 when not

Errors use the shared body `{"ok": false, "error": {code, message, status, ...}}`. When the
server has a token, every route but /health requires `Authorization: Bearer <token>`.
Request bodies are capped at MAX_BODY bytes and sockets time out, so no client can hold a
worker forever.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from moss_files.errors import InvalidRequest, MossError, NotFound, error_body

MAX_BODY = 1024 * 1024
SOCKET_TIMEOUT = 10.0

Handler = Callable[[dict[str, list[str]], Any], tuple[int, Any]]


class Api:
    """Routes (method, path) to callables returning (status, JSON body)."""

    def __init__(self, token: str | None, log: Callable[[str], None]) -> None:
        self.token = token
        self.log = log
        self.routes: dict[tuple[str, str], Handler] = {}

    def add(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    def authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        if not header or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[7:].strip().encode(), self.token.encode())


class _RequestHandler(BaseHTTPRequestHandler):
    server_version = "needlecast-sidecar"
    timeout = SOCKET_TIMEOUT
    api: Api  # set on the subclass made by `make_server`

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        self.api.log(f"http: {self.address_string()} {format % args}")

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="needlecast"')
        self.end_headers()
        self.wfile.write(data)

    def _error(self, err: MossError, status: int | None = None) -> None:
        body = error_body(err)
        if status is not None:
            body["error"]["status"] = status  # 401 and 405 have no class of their own
        self._send(status or err.status, body)

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        known_methods = [m for (m, p) in self.api.routes if p == path]
        if not known_methods:
            self._error(NotFound(f"no endpoint {path}"))
            return
        if path != "/health" and not self.api.authorized(self.headers.get("Authorization")):
            self._error(InvalidRequest("a bearer token is required", code="UNAUTHORIZED"), 401)
            return
        handler = self.api.routes.get((method, path))
        if handler is None:
            self.close_connection = True
            self._error(InvalidRequest(f"{method} is not allowed on {path}; use {', '.join(sorted(known_methods))}"), 405)
            return
        try:
            payload = self._read_json() if method == "POST" else None
            status, body = handler(parse_qs(parts.query), payload)
        except MossError as err:
            self._error(err)
            return
        except Exception as exc:  # a bug must not kill the worker or leak a traceback to clients
            self.api.log(f"http: internal error on {method} {path}: {type(exc).__name__}: {exc}")
            self._error(MossError("internal error"))
            return
        self._send(status, body)

    def _read_json(self) -> Any:
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            raise InvalidRequest("a JSON body with Content-Length is required")
        length = int(length_text)
        if length > MAX_BODY:
            self.close_connection = True
            raise InvalidRequest(f"body over {MAX_BODY} bytes", code="FILE_TOO_LARGE")
        data = self.rfile.read(length)
        try:
            return json.loads(data)
        except ValueError:
            raise InvalidRequest("the body is not valid JSON") from None

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")


def make_server(api: Api, host: str, port: int) -> ThreadingHTTPServer:
    """A bound (not yet serving) threaded server for `api`. Raises OSError if the port is taken."""
    handler = type("SidecarRequestHandler", (_RequestHandler,), {"api": api})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server

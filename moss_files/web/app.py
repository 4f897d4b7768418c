"""The web view's ASGI application: routes, sign-in, the CSRF check, live updates by server-sent
events, and the vendored static files. Entry layer: it parses a request, calls one page
function (which gathers through the use cases) on a worker thread, and renders the answer.

`moss_files.mcp.daemon` serves it beside the MCP endpoint, behind the one Host/Origin guard
(`foundation.httpguard`, with same-origin HTML forms allowed). Who may look:

- without a token (a loopback daemon), anyone on this machine, as with the MCP endpoint;
- with one (required off loopback), a request carrying `Authorization: Bearer <token>` (the
  scheme in any case), or a browser that signed in: `/login` takes the token in a form, never
  in a URL, and answers with a session cookie (HttpOnly, SameSite=Strict) that names a random
  session this process keeps. Wrong tokens, in the header or the form, slow their client down
  (`httpguard.FailureThrottle`, shared with the MCP endpoint): the tokens are checked, and the
  throttle kept, on the event loop, never on a worker thread.

Every POST is a form carrying a CSRF token: an HMAC, under a key this process draws at start,
of a random value in the `moss_csrf` cookie (HttpOnly, SameSite=Strict). A page of another
site can make a browser post a form, but can neither read our pages nor compute the token;
the guard has refused its Origin already. Every page is sent with a Content-Security-Policy
that allows only our own script and style, so markup that escaped escaping would still not run.
A visitor who has not signed in sees no navigation; a refusal is a page for a browser (it
asks for HTML) and the JSON error body for any other client.

Live pages: each full rendering of a page that follows the files is remembered as a snapshot
(digests of its parts, `html.snapshot`) under a random render id the page carries. When files
change, the page's script asks for the same URL with `X-Moss-Live: <render id>` and is answered
with JSON naming only what changed since (`html.changes`): nothing, some keyed parts (a card,
a column's count, a column's order), or the whole main content.

At start the board is read once on a thread of its own, so that the first person to open the
board does not wait for every task file to be parsed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from moss_files.board.model import is_valid_name
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError, NotFound, error_body
from moss_files.foundation.httpguard import FailureThrottle, bearer_matches, retry_after, split_host
from moss_files.foundation.loglevels import say
from moss_files.web import agents, board, capsules, memory, messages, search, watch
from moss_files.web.html import Html, Page, Snapshot, button, changes, error_notice, esc, hidden, join, layout, snapshot, url

CSRF_COOKIE = "moss_csrf"
SESSION_COOKIE = "moss_session"
WORKER_COOKIE = "moss_worker"  # the worker name a person last claimed as, offered again
LIVE_HEADER = "x-moss-live"  # a live page asking what changed since its render id
FETCH_HEADER = "x-moss-fetch"  # the page's script posting a form: answered with JSON
MAX_FORM_BYTES = 256 * 1024
MAX_SESSIONS = 1000
MAX_SNAPSHOTS = 200  # live renderings remembered; an older page gets its whole content again
STREAM_TICK = 0.5  # how often an event stream checks that the server is stopping
KEEPALIVE_SECONDS = 15.0
SECURITY_HEADERS = (
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),  # "no-referrer" would make a browser send `Origin: null` with our own forms
    ("x-frame-options", "DENY"),
    ("cache-control", "no-store"),
)
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
Log = Callable[[str], None]


@dataclass(slots=True)
class Request:
    """What a page function needs of an HTTP request."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    cookies: dict[str, str]
    form: dict[str, str] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)  # every value of each form field
    csrf: str = ""  # the token this request's pages put in their forms
    new_nonce: str | None = None  # a CSRF cookie value to set with the answer
    signed_in: bool = False
    client: str = "-"  # the client's address: wrong tokens are counted by it
    bearer: bool = False  # the Authorization header carries the token (checked on the event loop)
    authorized: bool = False  # may see the pages (no token needed, the bearer token, or signed in)
    new_cookies: list[str] = field(default_factory=list)  # more Set-Cookie values for the answer

    @property
    def wants_html(self) -> bool:
        """A browser (it asks for HTML) rather than a script or a program."""
        return "text/html" in self.headers.get("accept", "")

    @property
    def target(self) -> str:
        """The path with the query, as a `next=` after signing in."""
        return url(self.path, self.query)


@dataclass(slots=True)
class Response:
    """An HTTP answer: status, body, content type and extra headers."""

    status: int
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def redirect(location: str, status: int = 303) -> Response:
    """A redirect to one of our own paths."""
    return Response(status, b"", headers=[("location", location)])


def safe_next(value: str | None) -> str:
    """Where to go after signing in: one of our own paths, never another site."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value or any(ord(ch) < 32 for ch in value):
        return "/"
    return value


class Changes:
    """Tells every open event stream that files changed: the watcher's thread publishes, each
    stream's queue receives on the server's event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[asyncio.Queue[Any], asyncio.AbstractEventLoop] = {}
        self.version = 0
        self.closed = False

    def publish(self, kinds: frozenset[str]) -> None:
        """From any thread: one change notice (`{version, kinds}`) to every stream."""
        with self._lock:
            self.version += 1
            item = {"version": self.version, "kinds": sorted(kinds)}
            streams = list(self._streams.items())
        for queue, loop in streams:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # that stream's loop has closed
                pass

    def subscribe(self) -> asyncio.Queue[Any]:
        """A new stream's queue (call on the event loop)."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        with self._lock:
            self._streams[queue] = asyncio.get_running_loop()
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Any]) -> None:
        with self._lock:
            self._streams.pop(queue, None)

    @property
    def streams(self) -> int:
        with self._lock:
            return len(self._streams)

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        self.closed = True


def _static_files() -> dict[str, tuple[bytes, str, str]]:
    """name -> (bytes, content type, etag) of every vendored static file."""
    found: dict[str, tuple[bytes, str, str]] = {}
    folder = resources.files("moss_files.web") / "static"
    for entry in folder.iterdir():
        suffix = Path(entry.name).suffix
        if entry.is_file() and suffix in STATIC_TYPES:
            data = entry.read_bytes()
            found[entry.name] = (data, STATIC_TYPES[suffix], '"' + hashlib.sha256(data).hexdigest()[:16] + '"')
    return found


class WebApp:
    """The pages of the workspace `ctx.root` as an ASGI application.

    `ctx` is a person's context (actor HUMAN): the buttons act as `moss task …` does. `token`
    is the daemon's bearer token (None on loopback without one).
    """

    def __init__(self, ctx: Context, *, token: str | None = None, log: Log | None = None, poll: bool = False, throttle: FailureThrottle | None = None) -> None:
        self.ctx = ctx
        self.token = token
        self.throttle = throttle or FailureThrottle()
        self.log = log or (lambda text: None)
        self.workspace = ctx.root.name or str(ctx.root)
        self.changes = Changes()
        self.watcher = watch.Watcher(ctx.root, self.changes.publish, sleeve_folders=lambda: messages.sleeve_folders(ctx), poll=poll, log=self.log)
        self._key = secrets.token_bytes(32)
        self._sessions: dict[str, None] = {}
        self._sessions_lock = threading.Lock()
        self._static = _static_files()
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self._snapshots_lock = threading.Lock()
        self._warming: threading.Thread | None = None

    # ----------------------------------------------------------------- life

    def start(self) -> None:
        """Start watching the workspace for live updates (pages work without them when the
        watcher cannot start at all, said in the log), and read the board once, on a thread."""
        try:
            self.watcher.start()
        except (OSError, MossError) as exc:
            self.watcher.stop()
            say(self.log, "warn", f"moss serve: live updates are off: the workspace cannot be watched ({exc})")
        self._warming = threading.Thread(target=self._warm, name="moss-web-warm", daemon=True)
        self._warming.start()

    def _warm(self) -> None:
        """Read the board and build its first page (`board.BoardPages` keeps it) before the
        first visitor asks. Twice: the board store watches its files from its second load on
        (setting up those watches is the second load's cost), so the first visitor's load
        checks only the files changed since."""
        started = time.monotonic()
        try:
            for _ in range(2):
                board.board_page(self.ctx, board.BoardQuery())
        except MossError as err:
            say(self.log, "warn", f"moss serve: the board could not be read ahead ({err.code}); the first page reads it")
            return
        except Exception:
            say(self.log, "error", "moss serve: reading the board ahead failed:\n" + traceback.format_exc())
            return
        say(self.log, "info", f"moss serve: board read ahead in {time.monotonic() - started:.1f} s")

    def stop(self) -> None:
        """End the event streams and stop watching."""
        self.changes.close()
        self.watcher.stop()
        if self._warming is not None:
            self._warming.join(timeout=30)

    # ----------------------------------------------------------------- ASGI

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        try:
            request = await self._read(scope, receive)
        except InvalidRequest as err:
            await self._send(send, self._error_response(err, None))
            return
        client = scope.get("client")
        request.client = str(client[0]) if client else "-"
        throttled = self._check_header(request)
        if throttled is not None:
            await self._send(send, throttled)
            return
        if (request.path.rstrip("/") or "/") == "/login":
            # On the event loop: the form's token is checked where the throttle lives (the
            # sign-in page reads no file).
            await self._send(send, self.handle(request))
            return
        if request.method == "GET" and request.path == "/events":
            if not self._authorized(request):
                await self._send(send, self._json_error(MossError("sign in first", code="UNAUTHORIZED", status=401), request))
                return
            await self._stream(receive, send)
            return
        if request.path.startswith("/static/"):
            await self._send(send, self._static_response(request))
            return
        response = await asyncio.to_thread(self.handle, request)
        if scope.get("method") == "HEAD":
            response.body = b""
        await self._send(send, response)

    async def _read(self, scope: dict[str, Any], receive: Any) -> Request:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers") or ()}
        query = {key: values[0] for key, values in parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True).items()}
        method = "GET" if scope.get("method") == "HEAD" else str(scope.get("method", "GET"))
        request = Request(method, scope.get("path") or "/", query, headers, _cookies(headers.get("cookie")))
        if method == "POST":
            body = bytearray()
            while True:
                message = await receive()
                body += message.get("body", b"")
                if len(body) > MAX_FORM_BYTES:
                    raise InvalidRequest("the form is too large", status=413)
                if not message.get("more_body"):
                    break
            try:
                fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=200, strict_parsing=False)
            except (UnicodeDecodeError, ValueError):
                raise InvalidRequest("the form cannot be read") from None
            # A textarea sends CRLF line ends; the files keep LF.
            request.lists = {key: [value.replace("\r\n", "\n") for value in values] for key, values in fields.items()}
            request.form = {key: values[0] for key, values in request.lists.items()}
        return request

    async def _send(self, send: Any, response: Response) -> None:
        headers = [(b"content-type", response.content_type.encode()), (b"content-length", str(len(response.body)).encode())]
        headers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})

    # ----------------------------------------------------------------- requests

    def handle(self, request: Request) -> Response:
        """Answer one request (on a worker thread: the page functions read files; the sign-in
        page, which reads none, on the event loop)."""
        nonce = request.cookies.get(CSRF_COOKIE, "")
        if len(nonce) < 16 or len(nonce) > 64 or not nonce.replace("-", "").replace("_", "").isalnum():
            nonce = secrets.token_urlsafe(24)
            request.new_nonce = nonce
        request.csrf = self._csrf_token(nonce)
        request.authorized = self._authorized(request)
        request.signed_in = self.token is not None and request.authorized
        try:
            response = self._route(request)
        except MossError as err:
            response = self._error_response(err, request)
        except Exception:
            say(self.log, "error", "moss serve: a page failed:\n" + traceback.format_exc())
            response = self._error_response(MossError("the page failed; the daemon's log has the details"), request)
        if request.new_nonce:
            response.headers.append(("set-cookie", f"{CSRF_COOKIE}={request.new_nonce}; Path=/; HttpOnly; SameSite=Strict"))
        response.headers += [("set-cookie", cookie) for cookie in request.new_cookies]
        return response

    def _route(self, request: Request) -> Response:
        path, method = request.path.rstrip("/") or "/", request.method
        if path == "/login":
            return self._login(request)
        if not request.authorized:
            if method == "GET":
                return redirect(url("/login", {"next": request.target}))
            return self._json_error(MossError("sign in first", code="UNAUTHORIZED", status=401), request)
        if method == "POST":
            self._check_csrf(request)
            if path == "/logout":
                return self._logout(request)
            if path == "/tasks/new":
                return self._create_task(request)
            parts = path.split("/")
            if len(parts) == 4 and parts[1] == "tasks" and parts[3] in board.ACTIONS:
                return self._task_action(request, parts[2], parts[3])
            raise NotFound(f"nothing to post to at {path}", status=404)
        if method != "GET":
            raise InvalidRequest(f"{method} is not supported here", status=405)
        return self._page(request, self._get(request, path))

    def _get(self, request: Request, path: str) -> Page:
        q, ctx = request.query, self.ctx
        parts = path.split("/")[1:]
        if path in ("/", "/board"):
            return board.board_page(ctx, board.BoardQuery.of(q), csrf=request.csrf)
        if len(parts) == 2 and parts[0] == "tasks":
            return board.task_page(ctx, parts[1], csrf=request.csrf, done=q.get("done"), worker=self._worker_of(request))
        if path == "/capsules":
            return capsules.capsules_page(
                ctx, workspace=q.get("workspace") or None, offset=capsules.offset_of(q.get("offset")), deleted=q.get("deleted") == "1"
            )
        if len(parts) == 2 and parts[0] == "capsules":
            return capsules.capsule_page(ctx, parts[1])
        if len(parts) == 3 and parts[0] == "capsules" and parts[2] == "history":
            return capsules.history_page(ctx, parts[1], at=q.get("at") or None, base=q.get("base") or None, to=q.get("to") or None)
        if path == "/messages":
            return messages.messages_page(ctx, sleeve=q.get("sleeve") or None, thread=q.get("thread") or None)
        if path == "/memory":
            return memory.memory_page(ctx)
        if path == "/search":
            return search.search_page(ctx, query=q.get("q", ""), offset=search.page_offset(q.get("offset")), match_all=q.get("all") == "1")
        if path == "/expand":
            ids = [part for part in q.get("id", "").split(",") if part.strip()]
            return search.expand_page(ctx, ids, fragment=q.get("fragment") == "1")
        if path == "/agents":
            return agents.agents_page(ctx)
        if len(parts) == 2 and parts[0] == "agents":
            return agents.session_page(ctx, parts[1])
        raise NotFound(f"no page at {path}")

    def _page(self, request: Request, page: Page) -> Response:
        if request.query.get("fragment") == "1":
            return Response(page.status, page.body.encode("utf-8"), headers=list(SECURITY_HEADERS))
        since = request.headers.get(LIVE_HEADER)
        if since is not None and page.live and page.status == 200:
            return self._live_answer(since, page)
        render = self._remember(snapshot(page)) if page.live and page.status == 200 else ""
        document = layout(
            page,
            workspace=self.workspace,
            current=request.path,
            csrf=request.csrf,
            query=request.query.get("q", ""),
            signed_in=request.signed_in,
            nav=request.authorized,
            render=render,
        )
        return Response(page.status, document.encode("utf-8"), headers=[*SECURITY_HEADERS, *page.headers])

    # ----------------------------------------------------------------- live pages

    def _remember(self, shot: Snapshot) -> str:
        """Keep a page's snapshot; its render id."""
        render = secrets.token_urlsafe(9)
        with self._snapshots_lock:
            self._snapshots[render] = shot
            while len(self._snapshots) > MAX_SNAPSHOTS:
                self._snapshots.popitem(last=False)
        return render

    def _live_answer(self, since: str, page: Page) -> Response:
        """What changed on a page since the rendering `since`, as JSON (`html.changes`) with the
        new render id: `{render}` alone when nothing did."""
        with self._snapshots_lock:
            before = self._snapshots.get(since)
        found = changes(before, page)
        if not found and before is not None:
            with self._snapshots_lock:
                self._snapshots.move_to_end(since)
            render = since
        else:
            render = self._remember(snapshot(page))
            if before is not None:
                with self._snapshots_lock:
                    self._snapshots.pop(since, None)
        answer = {"render": render, "title": page.title, **found}
        return Response(200, json.dumps(answer, ensure_ascii=False).encode("utf-8"), "application/json", headers=list(SECURITY_HEADERS))

    # ----------------------------------------------------------------- actions

    def _acted(self, request: Request, result: dict[str, Any], location: str) -> Response:
        """After an action: the page's script gets JSON, a form post a redirect (POST, redirect, GET)."""
        if request.headers.get(FETCH_HEADER):
            body = json.dumps({"ok": True, "location": location, "result": result}, ensure_ascii=False, default=str).encode("utf-8")
            return Response(200, body, "application/json", headers=list(SECURITY_HEADERS))
        return redirect(location)

    def _refused(self, request: Request, err: MossError, page: Callable[[], Page]) -> Response:
        """An action the use case refused: JSON for the page's script, else `page` again with the error."""
        status = err.status if err.status >= 400 else 409
        if request.headers.get(FETCH_HEADER):
            return Response(status, json.dumps(error_body(err)).encode(), "application/json", headers=list(SECURITY_HEADERS))
        shown = page()
        return self._page(request, Page(shown.title, shown.body, shown.live, status=status, parts=shown.parts, lists=shown.lists))

    def _task_action(self, request: Request, task_id: str, action: str) -> Response:
        """An action on a task: the use case, then back to the task; a refusal shows the task
        page again with the error."""
        try:
            result = board.act(self.ctx, task_id, action, request.form, request.lists)
        except MossError as err:
            problem = error_body(err)["error"]
            return self._refused(request, err, lambda: board.task_page(self.ctx, task_id, csrf=request.csrf, error=problem, worker=self._worker_of(request)))
        if action == "claim":
            worker = request.form.get("worker", "").strip()
            request.new_cookies.append(f"{WORKER_COOKIE}={worker}; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000")
        return self._acted(request, result, url(f"/tasks/{task_id}", {"done": action}))

    def _create_task(self, request: Request) -> Response:
        """The New task form: the task created, then back to the board it was made on."""
        target = safe_next(request.form.get("next")) if request.form.get("next") else "/board"
        try:
            result = board.create(self.ctx, request.form)
        except MossError as err:
            problem = error_body(err)["error"]
            return self._refused(request, err, lambda: _with_error(board.board_page(self.ctx, board.BoardQuery(), csrf=request.csrf), problem))
        created = result["task"]["id"]
        joiner = "&" if "?" in target else "?"
        return self._acted(request, result, f"{target}{joiner}created={url(created)}")

    def _worker_of(self, request: Request) -> str:
        """The worker name this browser last claimed as (its cookie), when it is a name."""
        name = request.cookies.get(WORKER_COOKIE, "")
        return name if name and is_valid_name(name) else ""

    # ----------------------------------------------------------------- signing in

    def _check_header(self, request: Request) -> Response | None:
        """Check an Authorization header's token (on the event loop): sets `request.bearer`;
        a 429 answer when this client must wait after wrong tokens."""
        header = request.headers.get("authorization")
        if self.token is None or header is None:
            return None
        wait = self.throttle.wait(request.client, time.monotonic())
        if wait > 0:
            return self._throttled(wait, request=request)
        request.bearer = bearer_matches(header, self.token)
        if request.bearer:
            self.throttle.succeeded(request.client)
        else:
            self.throttle.failed(request.client, time.monotonic())
        return None

    def _throttled(self, wait: float, page: Response | None = None, *, request: Request | None = None) -> Response:
        err = MossError(f"too many wrong tokens from this address; try again in {retry_after(wait)} s", code="TOO_MANY_ATTEMPTS", status=429)
        response = page or self._json_error(err, request)
        response.headers.append(("retry-after", retry_after(wait)))
        return response

    def _authorized(self, request: Request) -> bool:
        if self.token is None or request.bearer:
            return True
        session = request.cookies.get(self._session_cookie(request), "")
        with self._sessions_lock:
            return bool(session) and session in self._sessions

    def _session_cookie(self, request: Request) -> str:
        # Cookies are kept per host, not per port: two daemons on one machine keep theirs apart.
        parsed = split_host(request.headers.get("host", ""))
        port = parsed[1] if parsed and parsed[1] else 80
        return f"{SESSION_COOKIE}_{port}"

    def _login(self, request: Request) -> Response:
        target = safe_next(request.form.get("next") if request.method == "POST" else request.query.get("next"))
        if self.token is None:
            return redirect(target)
        if request.method == "POST":
            self._check_csrf(request)
            given = request.form.get("token", "")
            wait = self.throttle.wait(request.client, time.monotonic())
            if wait > 0:
                # Not even checked: one guess per wait, whatever the token.
                problem = {"code": "TOO_MANY_ATTEMPTS", "message": f"too many wrong tokens from this address; try again in {retry_after(wait)} s"}
                return self._throttled(wait, self._page(request, self._login_page(request, target, problem=problem, status=429)))
            if given and hmac.compare_digest(given.encode(), self.token.encode()):
                self.throttle.succeeded(request.client)
                session = secrets.token_urlsafe(32)
                with self._sessions_lock:
                    self._sessions[session] = None
                    while len(self._sessions) > MAX_SESSIONS:
                        self._sessions.pop(next(iter(self._sessions)))
                response = redirect(target)
                response.headers.append(("set-cookie", f"{self._session_cookie(request)}={session}; Path=/; HttpOnly; SameSite=Strict"))
                return response
            self.throttle.failed(request.client, time.monotonic())
            problem = {"code": "UNAUTHORIZED", "message": "that is not this server's token"}
            return self._page(request, self._login_page(request, target, problem=problem, status=401))
        if request.method != "GET":
            raise InvalidRequest(f"{request.method} is not supported here", status=405)
        return self._page(request, self._login_page(request, target))

    def _login_page(self, request: Request, target: str, *, problem: dict[str, str] | None = None, status: int = 200) -> Page:
        notice = error_notice(problem) if problem else Html("")
        form = Html(
            f'<form method="post" action="/login" class="login">{hidden("csrf", request.csrf)}{hidden("next", target)}'
            '<label>Token <input type="password" name="token" autocomplete="current-password" required autofocus></label>'
            f"{button('Sign in', kind='primary')}</form>"
        )
        body = join([Html("<h1>Sign in</h1>"), notice, Html("<p>This server asks for its token (the one given to <code>moss serve --token</code>).</p>"), form])
        return Page("Sign in", body, status=status)

    def _logout(self, request: Request) -> Response:
        name = self._session_cookie(request)
        with self._sessions_lock:
            self._sessions.pop(request.cookies.get(name, ""), None)
        response = redirect("/login" if self.token else "/")
        response.headers.append(("set-cookie", f"{name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"))
        return response

    # ----------------------------------------------------------------- CSRF

    def _csrf_token(self, nonce: str) -> str:
        return hmac.new(self._key, nonce.encode(), hashlib.sha256).hexdigest()[:40]

    def _check_csrf(self, request: Request) -> None:
        """Raises CSRF_TOKEN_INVALID unless the form carries the token of the browser's cookie."""
        nonce = request.cookies.get(CSRF_COOKIE, "")
        given = request.form.get("csrf", "")
        if not nonce or not given or request.new_nonce or not hmac.compare_digest(given.encode(), self._csrf_token(nonce).encode()):
            raise MossError("the form's CSRF token is missing or stale: reload the page and try again", code="CSRF_TOKEN_INVALID", status=403)

    # ----------------------------------------------------------------- answers

    def _error_response(self, err: MossError, request: Request | None) -> Response:
        status = err.status if 400 <= err.status < 600 else 500
        if request is None:
            return self._json_error(err)
        if request.headers.get(FETCH_HEADER) or request.headers.get(LIVE_HEADER):
            return Response(status, json.dumps(error_body(err)).encode(), "application/json", headers=list(SECURITY_HEADERS))
        back = '<p><a href="/">Back to the board</a></p>' if request.authorized else ""
        body = join([Html(f"<h1>{esc(err.code)}</h1>"), error_notice(error_body(err)["error"]), Html(back)])
        return self._page(request, Page(err.code, body, status=status))

    def _json_error(self, err: MossError, request: Request | None = None) -> Response:
        """The error body as JSON; for a browser (it asks for HTML), a page saying the same."""
        if request is not None and request.wants_html and not request.headers.get(FETCH_HEADER):
            body, headers = self.refusal_page(err)
            return Response(err.status, body, headers=headers)
        return Response(err.status, json.dumps(error_body(err)).encode(), "application/json", headers=list(SECURITY_HEADERS))

    def refusal_page(self, err: MossError) -> tuple[bytes, list[tuple[str, str]]]:
        """A refusal (a request refused before any page: the Host or Origin guard, signing in,
        a throttled client) as a page for a browser, without navigation, with its headers."""
        body = join([Html(f"<h1>{esc(err.code)}</h1>"), error_notice(error_body(err)["error"])])
        document = layout(Page(err.code, body, status=err.status), workspace=self.workspace, current="", csrf="", nav=False)
        return document.encode("utf-8"), list(SECURITY_HEADERS)

    def _static_response(self, request: Request) -> Response:
        found = self._static.get(request.path[len("/static/") :])
        if found is None:
            return self._json_error(NotFound(f"no static file {request.path}"), request)
        data, content_type, etag = found
        headers = [("etag", etag), ("cache-control", "no-cache"), ("x-content-type-options", "nosniff")]
        if request.headers.get("if-none-match") == etag:
            return Response(304, b"", content_type, headers)
        return Response(200, data, content_type, headers)

    async def _stream(self, receive: Any, send: Any) -> None:
        """`GET /events`: server-sent events, one `change` event per burst of file changes,
        until the browser goes away or the server stops."""
        queue = self.changes.subscribe()
        gone = asyncio.Event()

        async def watch_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        listener = asyncio.create_task(watch_disconnect())
        try:
            headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store"), (b"x-accel-buffering", b"no")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            hello = json.dumps({"version": self.changes.version, "watching": self.watcher.mode})
            await send({"type": "http.response.body", "body": f"retry: 1000\nevent: hello\ndata: {hello}\n\n".encode(), "more_body": True})
            idle = 0.0
            while not gone.is_set() and not self.changes.closed:
                try:
                    item = await asyncio.wait_for(queue.get(), timeout=STREAM_TICK)
                except TimeoutError:
                    idle += STREAM_TICK
                    if idle >= KEEPALIVE_SECONDS:
                        idle = 0.0
                        await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
                    continue
                idle = 0.0
                await send({"type": "http.response.body", "body": f"event: change\ndata: {json.dumps(item)}\n\n".encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            listener.cancel()
            self.changes.unsubscribe(queue)


def _cookies(header: str | None) -> dict[str, str]:
    if not header:
        return {}
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _with_error(page: Page, error: dict[str, Any]) -> Page:
    """`page` with an error banner above its content."""
    return Page(page.title, Html(error_notice(error) + page.body), page.live, page.status, page.headers, page.parts, page.lists)

"""Who may talk to our HTTP servers: the one check every HTTP surface runs before routing.

Core layer: pure functions over header values (standard library only). Used by the sidecar
(`needlecast sidecar`) and the MCP daemon (`moss serve --http`, with the web view), both on
`foundation.httpserver`, so both refuse the same requests with the same codes and statuses:

- **Host** (DNS rebinding): a server bound to a loopback address answers only requests whose
  `Host` names this machine (`127.0.0.1`, `localhost`, `[::1]`, any port or none); otherwise
  421 HOST_NOT_ALLOWED. A page on `evil.example` whose name an attacker re-points at
  127.0.0.1 sends `Host: evil.example`, and gets nothing. A server bound elsewhere requires a
  bearer token, which a foreign page cannot know, so its Host is not restricted.
- **Origin** (cross-site requests): a browser adds `Origin` to cross-site requests; one that is
  present must be the server's own origin (the scheme and the request's `Host`) or a loopback
  origin when the server is bound to loopback; otherwise 403 ORIGIN_NOT_ALLOWED. Clients that
  are not browsers send none.
- **Content type**: every POST must declare `application/json` (parameters such as
  `charset` allowed), or it gets 415 UNSUPPORTED_MEDIA_TYPE. A page can send a "simple"
  cross-site POST as `text/plain` without asking first; it cannot send JSON that way.
- **Credentials**: `Authorization: <scheme> <credentials>` is read with the scheme in any
  case (`Bearer`, `bearer`, `BEARER`: RFC 9110 makes schemes case-insensitive), by every
  server that takes a token and by the peers' signatures.
- **Wrong tokens** (`FailureThrottle`): after WAIT_AFTER wrong tokens from one client
  address, that client waits before its next try (1 s, doubling with each further failure, at
  most MAX_WAIT_SECONDS) and is answered 429 TOO_MANY_ATTEMPTS, its token unchecked, until
  then. A right token, or FORGET_SECONDS without a failure, clears its count. Other addresses
  are not affected, so an attacker elsewhere cannot lock the real user out, and one at the same
  address gets one guess per MAX_WAIT_SECONDS.
- **Forms** (the web view's pages, `forms=True`): a POST may also be an HTML form
  (`application/x-www-form-urlencoded`). Any page can post a form to any site, so a form POST
  must carry an `Origin` naming this very server (scheme and the request's `Host`; another
  port of this machine is another origin), or it gets 403 ORIGIN_NOT_ALLOWED. The web view
  then checks the form's CSRF token as well (`moss_files.web.app`).
"""

from __future__ import annotations

import hmac
import math
from dataclasses import dataclass

from moss_files.foundation import hosts

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WAIT_AFTER = 3  # wrong tokens a client may give before it must wait
FIRST_WAIT_SECONDS = 1.0
MAX_WAIT_SECONDS = 30.0
FORGET_SECONDS = 15 * 60.0
MAX_CLIENTS = 4096  # clients remembered; the longest quiet are forgotten first


def is_loopback(host: str) -> bool:
    """True for names and addresses only this machine can reach, in any spelling the resolver
    reads (`127.1`, `[::ffff:127.0.0.1]`; the one parser of `hosts`). Not the unspecified
    address: a server bound to `0.0.0.0` listens on every interface."""
    if host == "localhost":
        return True
    address = hosts.ip_address_of(host)
    return address is not None and hosts.is_loopback_address(address)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused: the HTTP status, our stable code and a message."""

    status: int
    code: str
    message: str


def split_host(value: str) -> tuple[str, int | None] | None:
    """(`host`, port or None) of a Host header or an origin's authority; None when malformed."""
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        host, _, port_text = value.partition(":")
    if port_text:
        if not port_text.isdigit() or int(port_text) > 65535:
            return None
        return host, int(port_text)
    return host, None


def check_request(bind_host: str, *, host: str | None, origin: str | None, method: str, content_type: str | None, forms: bool = False) -> Refusal | None:
    """The refusal for a request to a server bound to `bind_host`, or None to let it through.

    `host`, `origin` and `content_type` are the request's header values (None when absent);
    `forms` lets a same-origin HTML form POST through (the web view's pages).
    """
    local = is_loopback(bind_host)
    parsed = split_host(host) if host else None
    if local and (parsed is None or not is_loopback(parsed[0])):
        return Refusal(421, "HOST_NOT_ALLOWED", f"this server answers only requests for this machine, not Host {host!r}")
    if origin is not None and not _origin_allowed(origin, host, local):
        return Refusal(403, "ORIGIN_NOT_ALLOWED", f"requests from {origin!r} are not accepted")
    if method == "POST" and forms and is_form(content_type):
        if origin is None or not same_origin(origin, host):
            return Refusal(403, "ORIGIN_NOT_ALLOWED", "a form must be posted from a page of this server (its Origin header names it)")
        return None
    if method == "POST" and not is_json(content_type):
        return Refusal(415, "UNSUPPORTED_MEDIA_TYPE", "a POST must carry Content-Type: application/json")
    return None


def _origin_allowed(origin: str, host: str | None, local: bool) -> bool:
    if origin == "null":
        return False  # sandboxed frames and file:// pages
    scheme, sep, netloc = origin.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not netloc or "/" in netloc or "@" in netloc:
        return False
    if same_origin(origin, host):
        return True  # a page this server itself served
    authority = split_host(netloc)
    return local and authority is not None and is_loopback(authority[0])


def same_origin(origin: str, host: str | None) -> bool:
    """True when `origin` (`http://127.0.0.1:8765`) names the server the request's `Host`
    header names: the same authority, over http or https."""
    scheme, sep, netloc = origin.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or host is None:
        return False
    return netloc.lower() == host.strip().lower() and "/" not in netloc and "@" not in netloc


def is_form(content_type: str | None) -> bool:
    """True for `application/x-www-form-urlencoded`, with or without parameters."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/x-www-form-urlencoded"


def is_json(content_type: str | None) -> bool:
    """True for `application/json`, with or without parameters."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def credentials(header: str | None, scheme: str) -> str | None:
    """The credentials of an Authorization header value whose scheme is `scheme`, compared
    without regard to case (RFC 9110, section 11.1); None for another scheme or none."""
    if not header:
        return None
    given, _, rest = header.strip().partition(" ")
    if given.lower() != scheme.lower():
        return None
    return rest.strip() or None


def bearer_matches(header: str | None, token: str) -> bool:
    """True when the Authorization header value carries `token` as a bearer token (compared in
    constant time)."""
    given = credentials(header, "Bearer")
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


@dataclass(slots=True)
class _Failures:
    """One client's run of failed attempts, and when it may try again."""

    count: int
    until: float  # no try before this moment
    last: float  # the last failure


class FailureThrottle:
    """Wrong tokens per client address, and how long each client must wait before its next try.

    Core: the caller passes the time (monotonic seconds) and makes the calls from one thread
    (the HTTP servers call it from their event loop only).
    """

    def __init__(self) -> None:
        self._clients: dict[str, _Failures] = {}

    def wait(self, client: str, now: float) -> float:
        """Seconds `client` must still wait before its token is checked again (0: check it now)."""
        entry = self._clients.get(client)
        if entry is None:
            return 0.0
        if now - entry.last >= FORGET_SECONDS:
            del self._clients[client]
            return 0.0
        return max(0.0, entry.until - now)

    def failed(self, client: str, now: float) -> None:
        """Count a wrong token from `client`."""
        entry = self._clients.pop(client, None)
        if entry is None or now - entry.last >= FORGET_SECONDS:
            entry = _Failures(0, now, now)
        entry.count += 1
        entry.last = now
        waits = entry.count - WAIT_AFTER
        entry.until = now + (min(MAX_WAIT_SECONDS, FIRST_WAIT_SECONDS * 2.0 ** min(waits, 32)) if waits >= 0 else 0.0)
        self._clients[client] = entry  # last in the order: the longest quiet are first to go
        while len(self._clients) > MAX_CLIENTS:
            del self._clients[next(iter(self._clients))]

    def succeeded(self, client: str) -> None:
        """The right token from `client`: its count is cleared."""
        self._clients.pop(client, None)


def retry_after(seconds: float) -> str:
    """A Retry-After value (whole seconds, rounded up) for a wait of `seconds`."""
    return str(max(1, math.ceil(seconds)))

"""Requests between hosts: who a peer is, how its requests are signed, and how replays are refused.

Core layer: no I/O; the clock's reading and the nonces come in as arguments. A peer is another
host's sidecar with a token that only this pair of hosts shares (never one secret for all).
Its requests carry no token: they carry an HMAC-SHA256 of the request made with the token,

    X-Needlecast-Peer:  <the sender's name in the receiver's peer table>
    X-Needlecast-Time:  <unix seconds>
    X-Needlecast-Nonce: <32 hex digits, fresh for every request>
    Authorization:      Needlecast-HMAC-SHA256 <hex digest>     (the scheme in any case)

over the method, the path with its query, the peer's name, the time, the nonce and the SHA-256
of the body, so a request read off the wire can be neither altered nor sent to another sleeve,
and the token never crosses it. Replays are refused with a timestamp window and a nonce: a
request older or newer than WINDOW_SECONDS is refused (REQUEST_EXPIRED), and a nonce seen
within the window is refused (REPLAYED_REQUEST). The window alone would let a request be
replayed for its whole length, and nonces alone would have to be remembered for ever; together
they are exact and the memory is bounded by the window.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from moss_files.foundation.errors import InvalidRequest
from moss_files.foundation.httpguard import credentials

PEER_HEADER = "X-Needlecast-Peer"
TIME_HEADER = "X-Needlecast-Time"
NONCE_HEADER = "X-Needlecast-Nonce"
SCHEME = "Needlecast-HMAC-SHA256"
WINDOW_SECONDS = 120  # clocks of two hosts may differ by this much; NTP keeps them far closer
_NONCE = re.compile(r"[0-9a-f]{32}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class Peer:
    """Another host's sidecar: its name, its address (None when it only sends to us) and the
    token this pair of hosts shares (kept out of repr, so no log line can show it)."""

    name: str
    url: str | None
    token: str = field(repr=False)


def check_peer_name(name: str) -> str:
    """`name` when it can name a peer (as a sleeve name: letters, digits, `.`, `_`, `-`).
    Raises InvalidRequest otherwise."""
    if not _NAME.fullmatch(name):
        raise InvalidRequest(f"{name!r} cannot name a peer (letters, digits, . _ -)", code="INVALID_REQUEST")
    return name


def parse_peer_spec(spec: str) -> tuple[str, str | None]:
    """`NAME=URL` (a peer we send to and hear from) or `NAME` (one we only hear from) as (name,
    url). Raises InvalidRequest for a malformed spec."""
    name, _, url = spec.strip().partition("=")
    check_peer_name(name.strip())
    url = url.strip().rstrip("/")
    if url and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        raise InvalidRequest(f"peer {name!r}: {url!r} is not an http(s) address", code="INVALID_REQUEST")
    return name.strip(), url or None


def token_variable(name: str) -> str:
    """The environment variable that holds peer `name`'s token: NEEDLECAST_PEER_TOKEN_<NAME>,
    upper case, every character other than a letter or digit turned into `_`."""
    return "NEEDLECAST_PEER_TOKEN_" + re.sub(r"[^A-Z0-9]", "_", name.upper())


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def signature(token: str, method: str, target: str, peer: str, stamp: str, nonce: str, body: bytes) -> str:
    """The hex HMAC-SHA256, keyed with `token`, of one request's canonical form."""
    canonical = "\n".join((method.upper(), target, peer, stamp, nonce, body_digest(body))).encode("utf-8")
    return hmac.new(token.encode("utf-8"), canonical, hashlib.sha256).hexdigest()


def signed_headers(peer: str, token: str, method: str, target: str, body: bytes, *, now: float, nonce: str) -> dict[str, str]:
    """The headers that sign one request from `peer` (our name at the receiver) with `token`."""
    stamp = str(int(now))
    return {
        PEER_HEADER: peer,
        TIME_HEADER: stamp,
        NONCE_HEADER: nonce,
        "Authorization": f"{SCHEME} {signature(token, method, target, peer, stamp, nonce, body)}",
    }


class ReplayGuard:
    """The nonces accepted within the window, each with when it may be forgotten. Not
    thread-safe by itself: the HTTP server serialises calls to `check_and_remember`."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], float] = {}

    def load(self, entries: list[tuple[str, str, float]], now: float) -> None:
        """Remember (peer, nonce, forget_at) entries recorded by an earlier process."""
        for peer, nonce, forget_at in entries:
            if forget_at > now:
                self._seen[(peer, nonce)] = forget_at

    def seen(self, peer: str, nonce: str, now: float) -> bool:
        self._forget(now)
        return (peer, nonce) in self._seen

    def remember(self, peer: str, nonce: str, now: float) -> float:
        """Remember a nonce; return when it may be forgotten (after any request bearing it would
        be refused as expired anyway)."""
        forget_at = now + 2 * WINDOW_SECONDS
        self._seen[(peer, nonce)] = forget_at
        return forget_at

    def __len__(self) -> int:
        return len(self._seen)

    def _forget(self, now: float) -> None:
        if len(self._seen) > 4096:
            self._seen = {key: at for key, at in self._seen.items() if at > now}


def _refused(message: str, code: str) -> InvalidRequest:
    return InvalidRequest(message, code=code, status=401, hint="check the peer's name, its token and this host's clock")


def verify(headers: Mapping[str, str], method: str, target: str, body: bytes, peers: Mapping[str, Peer], now: float, guard: ReplayGuard) -> str:
    """The name of the peer that signed this request (its nonce is then remembered).

    Raises InvalidRequest, status 401, with code UNAUTHORIZED (no such peer, or a signature
    that no peer's token makes), PEER_MISMATCH (the signature is right for another peer's
    token: a token used by the wrong host), REQUEST_EXPIRED (outside the time window) or
    REPLAYED_REQUEST (a nonce already used within the window).
    """
    name = headers.get(PEER_HEADER) or ""
    stamp = headers.get(TIME_HEADER) or ""
    nonce = headers.get(NONCE_HEADER) or ""
    given = credentials(headers.get("Authorization"), SCHEME) or ""
    if not given or not stamp.isdigit() or not _NONCE.fullmatch(nonce):
        raise _refused("a signed request needs the peer, time, nonce and signature headers", "UNAUTHORIZED")
    peer = peers.get(name)
    if peer is None:
        raise _refused(f"no peer named {name!r} is known here", "UNAUTHORIZED")
    expected = signature(peer.token, method, target, name, stamp, nonce, body)
    if not hmac.compare_digest(given.strip(), expected):
        for other in peers.values():
            if other.name != name and hmac.compare_digest(given.strip(), signature(other.token, method, target, name, stamp, nonce, body)):
                raise _refused(f"the request names peer {name!r} but is signed with another peer's token", "PEER_MISMATCH")
        raise _refused(f"the signature does not match peer {name!r}'s token", "UNAUTHORIZED")
    if abs(now - int(stamp)) > WINDOW_SECONDS:
        raise _refused(f"the request's time is {int(now) - int(stamp)} s from this host's clock; the window is {WINDOW_SECONDS} s", "REQUEST_EXPIRED")
    if guard.seen(name, nonce, now):
        raise _refused("this request was already received (same nonce)", "REPLAYED_REQUEST")
    guard.remember(name, nonce, now)
    return name

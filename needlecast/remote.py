"""Talking to another host's sidecar over HTTP (the envoy side). Edge layer: the only client.

Uses the stdlib only. Every call has a timeout; every failure becomes a MossError with code
SLEEVE_UNAVAILABLE (network, non-JSON, 5xx) or the error code the sidecar returned.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from moss_files.foundation.errors import ERROR_CODES, InvalidRequest, MossError, NotFound

DEFAULT_TIMEOUT = 5.0


# Signs one request: (method, path with query, body) -> headers to add.
Signer = Callable[[str, str, bytes], dict[str, str]]


def call(
    url: str, method: str = "GET", payload: Any = None, *, token: str | None = None, signer: Signer | None = None, timeout: float = DEFAULT_TIMEOUT
) -> Any:
    """Send one JSON request and return the decoded JSON reply, with the bearer `token` or
    signed by `signer` (a peer's request).

    Raises NotFound SLEEVE_UNAVAILABLE when the sidecar cannot be reached or answers with
    something that is not our JSON, and InvalidRequest carrying the sidecar's own error code
    when it refused the request.
    """
    data = None if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if signer is not None:
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for name, value in signer(method, target, data or b"").items():
            request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()
        exc.close()
        error = _error_of(body)
        if error is not None and exc.code < 500:
            code = error.get("code")
            raise InvalidRequest(
                f"{url}: {error.get('message', 'refused')}", code=code if code in ERROR_CODES else None, details={"status": exc.code}
            ) from None
        raise NotFound(f"{url}: HTTP {exc.code}", code="SLEEVE_UNAVAILABLE", details={"status": exc.code}) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NotFound(f"{url}: cannot reach the sidecar ({reason})", code="SLEEVE_UNAVAILABLE") from None
    try:
        return json.loads(body)
    except ValueError:
        raise NotFound(f"{url}: the reply is not JSON", code="SLEEVE_UNAVAILABLE") from None


def _error_of(body: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else None


def post_inbox(
    base_url: str, messages: list[dict[str, Any]], *, token: str | None, signer: Signer | None = None, timeout: float = DEFAULT_TIMEOUT
) -> list[str]:
    """Deliver messages to a remote sleeve's inbox; return each one's status."""
    reply = call(f"{base_url}/inbox", "POST", {"messages": messages}, token=token, signer=signer, timeout=timeout)
    results = reply.get("results") if isinstance(reply, dict) else None
    if not isinstance(results, list) or len(results) != len(messages):
        raise MossError(f"{base_url}/inbox: unexpected reply", code="SLEEVE_UNAVAILABLE")
    return [str(item.get("status")) for item in results]

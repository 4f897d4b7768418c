"""The Ollama client behind AI summaries: asks a local Ollama server for one-line summaries,
and says why not when it cannot. Edge layer: the only module that talks to Ollama.

Two calls of Ollama's HTTP API: `GET /api/tags` (is the server there, does it have the model;
the answer is kept for AVAILABILITY_TTL seconds, so a batch asks once) and `POST /api/generate`
with `stream: false` (the summary, in `response`). Every request is bounded by the settings'
`timeout_seconds` as a whole, not per read; replies are capped at `ai.MAX_REPLY_BYTES`. Requests
go straight to the endpoint: no proxy from the environment (the text of insights must not pass
through one), no redirects. A server that does not answer or is too slow is taken as away for
AVAILABILITY_TTL, so a rebuild over many items does not wait on it once per item; a reply that
is not a usable summary counts against that item only.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moss_files.foundation import structured
from moss_files.foundation.errors import InvalidDocument
from moss_files.loopflow import ai
from moss_files.loopflow.ai import AiSettings

AVAILABILITY_TTL = 60.0


@dataclass(frozen=True, slots=True)
class AiSummary:
    """The model's one-line summary, or why there is none (`ai.REASONS`)."""

    summary: str | None
    reason: str | None = None
    detail: str | None = None  # what went wrong, for a person (the server's message, a status)


class _Failure(Exception):
    """A request that produced no usable answer: the reason (`ai.REASONS`) and detail."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class Summarizer:
    """AI summaries from one Ollama server. Safe to share between threads."""

    def __init__(self, settings: AiSettings, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._scheme, self._host, self._port, self._base = ai.check_endpoint(settings)
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._known: tuple[float, str | None, str | None] | None = None  # (when, reason or None, detail)

    # ----------------------------------------------------------------- use

    def summarize(self, text: str, what: str = "note") -> AiSummary:
        """The model's summary of `text` (an insight, a session, ...), or the reason the caller
        must fall back on the heuristic summary."""
        skip = ai.wants_ai(self.settings, text)
        if skip is not None:
            return AiSummary(None, skip)
        away = self.unavailable()
        if away is not None:
            return AiSummary(None, away[0], away[1])
        try:
            status, body = self._request("POST", "/api/generate", ai.build_request(self.settings, text, what))
            if status != 200:
                data = _json_or_none(body)
                error = str(data.get("error"))[:200] if isinstance(data, dict) and data.get("error") else None
                if status == 404 and error and "not found" in error:
                    self._remember("model_missing", error)
                    return AiSummary(None, "model_missing", error)
                return AiSummary(None, "http_error", f"HTTP {status}" + (f": {error}" if error else ""))
            return AiSummary(ai.read_reply(_json(body)))
        except _Failure as failure:
            if failure.reason in ("unreachable", "timeout"):
                self._remember(failure.reason, failure.detail)
            return AiSummary(None, failure.reason, failure.detail)
        except ValueError as exc:
            return AiSummary(None, "bad_reply", str(exc))

    def unavailable(self) -> tuple[str, str | None] | None:
        """None when the server answers and has the model; else (reason, detail). Asked of the
        server at most once per AVAILABILITY_TTL seconds."""
        with self._lock:
            known = self._known
        if known is not None and self._monotonic() - known[0] < AVAILABILITY_TTL:
            return None if known[1] is None else (known[1], known[2])
        reason: str | None = None
        detail: str | None = None
        try:
            status, body = self._request("GET", "/api/tags", None)
            names = ai.models_in(_json_or_none(body)) if status == 200 else None
            if status != 200:
                reason, detail = "http_error", f"GET /api/tags: HTTP {status}"
            elif names is None:
                reason, detail = "bad_reply", "GET /api/tags did not answer with Ollama's list of models"
            elif not ai.has_model(names, self.settings.model):
                reason, detail = "model_missing", f"the server has no model {self.settings.model!r}: ollama pull {self.settings.model}"
        except _Failure as failure:
            reason, detail = failure.reason, failure.detail
        self._remember(reason, detail)
        return None if reason is None else (reason, detail)

    def _remember(self, reason: str | None, detail: str | None) -> None:
        with self._lock:
            self._known = (self._monotonic(), reason, detail)

    # ----------------------------------------------------------------- HTTP

    def _request(self, method: str, path: str, payload: dict[str, Any] | None) -> tuple[int, bytes]:
        """(status, body) of one request, within the timeout as a whole. Raises _Failure."""
        timeout = self.settings.timeout
        deadline = self._monotonic() + timeout
        data = None if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        factory = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        connection = factory(self._host, self._port, timeout=timeout)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            connection.request(method, self._base + path, body=data, headers=headers)
            self._within(connection, deadline)
            response = connection.getresponse()
            chunks: list[bytes] = []
            size = 0
            while True:
                self._within(connection, deadline)
                chunk = response.read1(64 * 1024)
                if not chunk:
                    break
                size += len(chunk)
                if size > ai.MAX_REPLY_BYTES:
                    raise _Failure("bad_reply", f"the reply is larger than {ai.MAX_REPLY_BYTES} bytes")
                chunks.append(chunk)
            return response.status, b"".join(chunks)
        except TimeoutError:
            raise _Failure("timeout", f"no answer within {timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Failure("unreachable", f"{self.settings.endpoint}: {exc.__class__.__name__}: {exc}"[:300]) from None
        finally:
            connection.close()

    def _within(self, connection: http.client.HTTPConnection, deadline: float) -> None:
        """Give the next socket operation only the time left of the whole request."""
        left = deadline - self._monotonic()
        if left <= 0:
            raise TimeoutError
        if connection.sock is not None:
            connection.sock.settimeout(left)


def _json(body: bytes) -> Any:
    """A reply's JSON. Raises ValueError when it is not JSON (or nests too deeply to read)."""
    try:
        return structured.loads_json(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, InvalidDocument) as exc:
        raise ValueError(f"the reply is not JSON ({exc.__class__.__name__})") from None


def _json_or_none(body: bytes) -> Any:
    try:
        return _json(body)
    except ValueError:
        return None

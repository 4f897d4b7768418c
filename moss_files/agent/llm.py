"""The model adapter: Anthropic's Messages API with streaming and tool use, through the official
`anthropic` SDK. Edge layer (network); the only module that imports the SDK, and only the
agent commands import this one, so no other command pays its start-up.

One `complete()` is one model call: the request goes out as a stream, text deltas are handed
to `on_text` as they arrive, and the whole reply comes back once `message_stop` arrived. A
429, 529, 5xx, an in-stream overload or API error, a connection failure, or a stream that breaks
off before `message_stop` is retried after a backoff (the server's `retry-after` when it sends
one), `retries` times at most; each retry is reported to `on_retry` first. The SDK's own retries
are off, so every attempt is visible in the event log. Anything else (400, 401, 403, 404, ...)
fails at once. The API key is given explicitly (the SDK then consults no environment variable,
profile or credentials file) and never appears in an error text: the SDK's messages carry the
response body, and the runtime redacts every text it writes anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anthropic
import anyio
import httpx2

from moss_files.agent.stream import IncompleteStream, ModelRequest, Reply, ReplyBuilder, Retry, parse_retry_after, retry_delay
from moss_files.foundation.errors import AgentFailure

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
RETRY_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


class AnthropicModel:
    """A client of the Messages API (one per process; `aclose` when done)."""

    def __init__(self, *, api_key: str, base_url: str | None, timeout: float, retries: int, retry_base: float) -> None:
        self.retries = retries
        self.retry_base = retry_base
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url or "https://api.anthropic.com",
            timeout=timeout,
            max_retries=0,
            open_telemetry=False,
        )

    async def aclose(self) -> None:
        await self.client.close()

    async def complete(self, request: ModelRequest, *, on_text: Callable[[str, int], None], on_retry: Callable[[Retry], None]) -> tuple[Reply, int]:
        """The reply, and the attempt that gave it. Raises AgentFailure MODEL_ERROR when the API
        refuses the request or keeps failing past the retries."""
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": list(request.messages),
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = list(request.tools)
        attempt = 0
        while True:
            attempt += 1
            builder = ReplyBuilder()
            try:
                stream = await self.client.messages.create(**params, stream=True)
                async with stream:
                    async for event in stream:
                        text = builder.feed(event.to_dict())
                        if text:
                            on_text(text, attempt)
                return builder.reply(), attempt
            except Exception as exc:
                failure = _classify(exc)
                if failure is None:
                    raise
                retryable, reason, status, retry_after = failure
                if not retryable or attempt > self.retries:
                    raise AgentFailure(
                        f"the model API {reason}" + ("" if not retryable else f" (after {attempt} attempts)"),
                        code="MODEL_ERROR",
                        details={"status": status, "attempts": attempt},
                        hint="check the API key and llm.model" if status in (401, 403, 404) else None,
                    ) from None
                delay = retry_delay(attempt, self.retry_base, retry_after)
                on_retry(Retry(attempt, reason, status, delay))
                await anyio.sleep(delay)


def _classify(exc: Exception) -> tuple[bool, str, int | None, float | None] | None:
    """(retryable, reason, HTTP status, retry-after seconds) for a failed attempt; None for an
    exception that is not the API's or the network's (a bug, which must not be retried)."""
    if isinstance(exc, IncompleteStream):
        return True, f"stream broke off: {exc}", None, None
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        error_type, message = _error_of(exc.body)
        retry_after = parse_retry_after({k.lower(): v for k, v in exc.response.headers.items()})
        if status == 200:  # an `error` event inside the stream
            return error_type in RETRY_ERROR_TYPES, f"sent an error in the stream: {error_type}: {message}", None, retry_after
        return status in RETRY_STATUSES or status >= 500, f"answered {status} ({error_type}): {message}", status, retry_after
    if isinstance(exc, anthropic.APITimeoutError):
        return True, "did not answer in time", None, None
    if isinstance(exc, anthropic.APIConnectionError):
        return True, f"could not be reached: {exc}", None, None
    if isinstance(exc, httpx2.HTTPError | OSError):
        return True, f"stream broke off: {type(exc).__name__}: {exc}", None, None
    return None


def _error_of(body: Any) -> tuple[str, str]:
    if isinstance(body, Mapping):
        found = body.get("error")
        inner: Mapping[str, Any] = found if isinstance(found, Mapping) else body
        return str(inner.get("type") or "error"), str(inner.get("message") or "")[:500]
    return "error", str(body or "")[:500]

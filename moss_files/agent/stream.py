"""Assembling one streamed Messages API reply from its events. Core layer (pure).

The stream (message_start, content_block_start / content_block_delta / content_block_stop per
block, message_delta with the stop reason and usage, message_stop) is fed event by event as
plain dicts; `reply()` gives the whole message once message_stop arrived. A stream that ends
before it is a broken stream, which the caller retries. Blocks are kept as the API sent them
(thinking blocks with their signatures included), because a tool loop must send them back
unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from moss_files.agent.model import Usage


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call: the model, the system prompt, the conversation and the tools."""

    model: str
    system: str
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]]
    max_tokens: int


@dataclass(frozen=True, slots=True)
class Retry:
    """An attempt that failed and will be repeated after `delay` seconds."""

    attempt: int
    reason: str
    status: int | None
    delay: float


class IncompleteStream(ValueError):
    """The stream ended (or broke) before message_stop."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool_use block: the model asks for tool `name` with `input`."""

    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Reply:
    """One complete assistant message."""

    content: tuple[Mapping[str, Any], ...]
    stop_reason: str | None
    usage: Usage
    model: str | None = None

    @property
    def text(self) -> str:
        return message_text(self.content)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tool_calls_of(self.content)


def message_text(content: Sequence[Mapping[str, Any]]) -> str:
    """The text blocks of a message, joined."""
    return "".join(str(block.get("text", "")) for block in content if block.get("type") == "text")


def tool_calls_of(content: Sequence[Mapping[str, Any]]) -> tuple[ToolCall, ...]:
    """The tool_use blocks of a message."""
    calls = []
    for block in content:
        if block.get("type") == "tool_use":
            raw = block.get("input")
            calls.append(ToolCall(str(block.get("id", "")), str(block.get("name", "")), raw if isinstance(raw, Mapping) else {}))
    return tuple(calls)


class ReplyBuilder:
    """Feeds on stream events; `feed` returns the text a text_delta adds (for live output)."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, list[str]] = {}
        self.stop_reason: str | None = None
        self.model: str | None = None
        self.usage: dict[str, int] = {}
        self.started = False
        self.stopped = False

    def feed(self, event: Mapping[str, Any]) -> str | None:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.started = True
            self.model = message.get("model")
            self._usage(message.get("usage"))
        elif kind == "content_block_start":
            index = int(event.get("index", len(self.blocks)))
            block = dict(event.get("content_block") or {})
            if block.get("type") == "tool_use":
                block["input"] = {}
                self.partial_json[index] = []
            self.blocks[index] = block
            if block.get("type") == "text" and block.get("text"):
                return str(block["text"])
        elif kind == "content_block_delta":
            return self._delta(int(event.get("index", 0)), event.get("delta") or {})
        elif kind == "content_block_stop":
            index = int(event.get("index", 0))
            if index in self.partial_json:
                text = "".join(self.partial_json.pop(index))
                try:
                    parsed = json.loads(text) if text.strip() else {}
                except ValueError:
                    parsed = {"_unparsed_input": text}
                self.blocks[index]["input"] = parsed if isinstance(parsed, dict) else {"_unparsed_input": text}
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = delta["stop_reason"]
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return None

    def _delta(self, index: int, delta: Mapping[str, Any]) -> str | None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text", ""))
            block["text"] = block.get("text", "") + text
            return text
        if kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(str(delta.get("partial_json", "")))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        return None

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, Mapping):
            return
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = value  # message_delta's counts are cumulative

    def reply(self) -> Reply:
        """The message. Raises IncompleteStream before message_stop."""
        if not (self.started and self.stopped):
            raise IncompleteStream("the stream ended before message_stop")
        if self.partial_json:
            raise IncompleteStream("a tool_use block never stopped")
        usage = Usage(
            self.usage.get("input_tokens", 0),
            self.usage.get("output_tokens", 0),
            self.usage.get("cache_read_input_tokens", 0),
            self.usage.get("cache_creation_input_tokens", 0),
        )
        content = tuple(self.blocks[index] for index in sorted(self.blocks))
        return Reply(content, self.stop_reason, usage, self.model)


def retry_delay(attempt: int, base: float, retry_after: float | None, *, cap: float = 30.0) -> float:
    """Seconds to wait before attempt `attempt + 1`: the server's retry-after when it gave one
    (up to a minute), else `base` doubled per attempt, at most `cap`."""
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, 60.0)
    return min(base * (2 ** max(attempt - 1, 0)), cap)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a 429/529 answer asks for: `retry-after-ms`, else `retry-after` in seconds."""
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(key)
        if value is None:
            continue
        try:
            return max(float(value) * scale, 0.0)
        except ValueError:
            continue
    return None

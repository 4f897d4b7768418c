"""AI summaries (LoopFlow's optional Ollama summariser): its settings, the request it sends and
how a reply becomes a summary. Core layer: pure functions (no network: `ollama` is the client).

Settings, in `.moss/config.toml` (or `~/.moss/config.toml`), table `[summaries]`; the seed's
camel-case names are read too:

    ai = false                 (enableAi)  ask the model; off by default
    ollama_endpoint = "http://localhost:11434"   (ollamaEndpoint)
    ollama_model = "phi3"      (ollamaModel)
    ai_threshold = 200         (aiThreshold)  text shorter than this keeps its heuristic summary
    timeout_seconds = 20       the most one request may take, 0.1 to 120
    allow_remote = false       an endpoint that is not this machine must be allowed here

The heuristic summary (`foundation.summaries`) is always the fallback: AI off, text short, the
server down, slow or answering something that is not a one-line summary. Why a summary is not
the model's is one of REASONS.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from moss_files.foundation import hosts, summaries
from moss_files.foundation.errors import InvalidDocument

TABLE = "summaries"
DEFAULT_ENDPOINT = "http://localhost:11434"
DEFAULT_MODEL = "phi3"
DEFAULT_THRESHOLD = 200
DEFAULT_TIMEOUT = 20.0
MAX_TIMEOUT = 120.0
MAX_INPUT_CHARS = 6000  # what the model is shown of a long text: its summary lies in the start
MAX_REPLY_BYTES = 1024 * 1024
# Why a summary is the heuristic's, as results and `moss index rebuild --summaries ai` report it.
REASONS = {
    "disabled": "AI summaries are off ([summaries] ai = false)",
    "short": "the text is shorter than ai_threshold: the heuristic summary is the text itself or its first sentence",
    "unreachable": "the Ollama server did not answer (not running, or the endpoint is wrong)",
    "timeout": "the Ollama server took longer than timeout_seconds",
    "model_missing": "the Ollama server does not have the model (ollama pull MODEL)",
    "http_error": "the Ollama server answered with an error status",
    "bad_reply": "the reply was not Ollama's JSON with a one-line summary in `response`",
}
_KEYS = {
    "ai": ("ai", "enable_ai", "enableAi"),
    "endpoint": ("ollama_endpoint", "ollamaEndpoint"),
    "model": ("ollama_model", "ollamaModel"),
    "threshold": ("ai_threshold", "aiThreshold"),
    "timeout": ("timeout_seconds",),
    "allow_remote": ("allow_remote",),
}
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")
_LEAD = re.compile(r"^(?:(?:here is |here's )?(?:a |the )?(?:one[- ]line |one[- ]sentence )?summary\s*[:\-–—]\s*)", re.IGNORECASE)
_QUOTES = "\"'“”‘’`*_"


@dataclass(frozen=True, slots=True)
class AiSettings:
    """The `[summaries]` settings, checked."""

    enabled: bool = False
    endpoint: str = DEFAULT_ENDPOINT
    model: str = DEFAULT_MODEL
    threshold: int = DEFAULT_THRESHOLD
    timeout: float = DEFAULT_TIMEOUT
    allow_remote: bool = False


def _value(table: Mapping[str, Any], name: str, where: str) -> Any:
    given = [key for key in _KEYS[name] if key in table]
    if len(given) > 1 and len({repr(table[key]) for key in given}) > 1:
        raise _schema(where, f"{TABLE}.{given[0]} and {TABLE}.{given[1]} disagree: give one of them")
    return table[given[0]] if given else None


def read_settings(data: Mapping[str, Any], *, where: str = "config") -> AiSettings:
    """The AI summary settings of a merged config (`Config.data`); defaults for what is missing.

    Raises InvalidDocument SCHEMA_ERROR naming the key for a value of the wrong type, and, when
    AI is on, for an endpoint off this machine unless `allow_remote` (the text of insights would
    leave it; `check_endpoint` checks it again wherever a request is made).
    """
    table = data.get(TABLE, {})
    if not isinstance(table, Mapping):
        raise _schema(where, f"[{TABLE}] must be a table")
    enabled = _value(table, "ai", where)
    allow_remote = _value(table, "allow_remote", where)
    for name, value in (("ai", enabled), ("allow_remote", allow_remote)):
        if value is not None and not isinstance(value, bool):
            raise _schema(where, f"{TABLE}.{name} must be true or false")
    endpoint = _value(table, "endpoint", where)
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint.strip()):
        raise _schema(where, f"{TABLE}.ollama_endpoint must be a URL such as {DEFAULT_ENDPOINT}")
    model = _value(table, "model", where)
    if model is not None and (not isinstance(model, str) or not _MODEL.match(model)):
        raise _schema(where, f"{TABLE}.ollama_model must be a model name such as {DEFAULT_MODEL} or llama3.2:3b")
    threshold = _value(table, "threshold", where)
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0):
        raise _schema(where, f"{TABLE}.ai_threshold must be a whole number of characters, 0 or more")
    timeout = _value(table, "timeout", where)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0.1 <= timeout <= MAX_TIMEOUT):
        raise _schema(where, f"{TABLE}.timeout_seconds must be a number of seconds from 0.1 to {MAX_TIMEOUT:g}")
    settings = AiSettings(
        enabled=bool(enabled),
        endpoint=(endpoint or DEFAULT_ENDPOINT).strip().rstrip("/"),
        model=model or DEFAULT_MODEL,
        threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        timeout=DEFAULT_TIMEOUT if timeout is None else float(timeout),
        allow_remote=bool(allow_remote),
    )
    check_endpoint(settings, where=where, sending=settings.enabled)
    return settings


def check_endpoint(settings: AiSettings, *, where: str = "config", sending: bool = True) -> tuple[str, str, int, str]:
    """(scheme, host, port, base path) of the endpoint. Raises InvalidDocument SCHEMA_ERROR for
    a URL that is not plain http(s), or (when text is to be `sending` there) names a host off
    this machine without `allow_remote`."""
    url = settings.endpoint
    scheme, sep, _rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise _schema(where, f"{TABLE}.ollama_endpoint {url!r} must start with http:// or https://")
    try:
        host = hosts.url_host(url)
    except hosts.AmbiguousURL as exc:
        raise _schema(where, f"{TABLE}.ollama_endpoint {url!r}: {exc}") from None
    if sending and not settings.allow_remote and not hosts.is_local_destination(host):
        raise _schema(
            where,
            f"{TABLE}.ollama_endpoint {url!r} is not on this machine; insight and session text would be sent there: "
            f"set {TABLE}.allow_remote = true to allow it",
        )
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise _schema(where, f"{TABLE}.ollama_endpoint {url!r} must not hold a query or fragment")
    port = parts.port or (443 if scheme.lower() == "https" else 80)
    return scheme.lower(), host, port, parts.path.rstrip("/")


def _schema(where: str, message: str) -> InvalidDocument:
    return InvalidDocument(message, code="SCHEMA_ERROR", path=where)


def wants_ai(settings: AiSettings, text: str) -> str | None:
    """None when `text` should go to the model; else the reason it keeps the heuristic summary
    (`disabled`, `short`)."""
    if not settings.enabled:
        return "disabled"
    if len(summaries.plain_text(text, enough=settings.threshold + 1)) < max(settings.threshold, 1):
        return "short"
    return None


def build_request(settings: AiSettings, text: str, what: str) -> dict[str, Any]:
    """The body of Ollama's `POST /api/generate` asking for a one-line summary of `text` (an
    insight, a session, ...), whole, not streamed."""
    shown = summaries.plain_text(text, enough=MAX_INPUT_CHARS)[:MAX_INPUT_CHARS]
    prompt = (
        f"Write a one-sentence summary, at most 15 words, of the following {what} from a software project's notes. "
        "Reply with the sentence only: no preamble, no quotes, no markdown.\n\n"
        f"{shown}"
    )
    return {"model": settings.model, "prompt": prompt, "stream": False, "options": {"temperature": 0}}


def read_reply(data: Any) -> str:
    """The summary in a decoded `/api/generate` reply (`{response, done, ...}`). Raises
    ValueError naming what is wrong: an `error`, no text `response`, not `done`, or a response
    that holds no usable line."""
    if not isinstance(data, dict):
        raise ValueError("the reply is not a JSON object")
    if isinstance(data.get("error"), str):
        raise ValueError(f"the server said: {data['error'][:200]}")
    response = data.get("response")
    if not isinstance(response, str):
        raise ValueError("the reply has no text `response`")
    if data.get("done") is False:
        raise ValueError("the reply is not complete (done: false)")
    line = clean_summary(response)
    if line is None:
        raise ValueError("the response holds no one-line summary")
    return line


def clean_summary(response: str, max_length: int = summaries.MAX_SUMMARY) -> str | None:
    """One line from a model's response: its first line of text without a `Summary:` lead,
    quotes or markup, cut at a word to `max_length`; None when nothing usable is left (empty,
    control characters, a lone word of punctuation)."""
    for raw in response.splitlines():
        line = summaries.plain_text(raw.lstrip(" \t•"))  # markdown out: `# `, `- `, `**`, links
        line = _LEAD.sub("", line).strip().strip(_QUOTES).strip()
        if line:
            break
    else:
        return None
    if any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in line):
        return None
    if sum(char.isalnum() for char in line) < 3:
        return None
    return summaries.truncate_at_word(line, max_length)


def models_in(data: Any) -> set[str] | None:
    """The model names of a decoded `GET /api/tags` reply (`{models: [{name, model}]}`), each
    also without its `:latest` tag; None when the reply is not that shape."""
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        return None
    names: set[str] = set()
    for item in data["models"]:
        if not isinstance(item, dict):
            continue
        for key in ("name", "model"):
            value = item.get(key)
            if isinstance(value, str) and value:
                names.add(value)
                names.add(value.removesuffix(":latest"))
    return names


def has_model(names: set[str], model: str) -> bool:
    """Whether `model` (with or without a tag) is among the server's models."""
    return model in names or model.removesuffix(":latest") in names or f"{model}:latest" in names

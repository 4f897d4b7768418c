"""Observations (LoopFlow's record of what happened in a session: a tool call, a file edit, a
shell command, a prompt, a note) as markdown files: model, parse, render.

Core layer: pure functions over documents and values (no I/O, no clock: times come in).
One file per observation, `.moss/observations/<id>.md`; the body is what was observed, byte
for byte. Frontmatter keys, in the order a new file lists them:

    id       OBS-20260121-7f3k9q2m (collision-free)
    time     when it happened, RFC 3339 UTC
    session  the session it belongs to (optional)
    kind     note | tool_call | file_edit | shell_command | user_prompt
    summary  one line (optional: generated from the body when absent)
    context  a mapping of details of its kind, e.g. {tool: Edit, file: src/app.py} (optional)

An observation is written once and not edited by the tools; unknown keys a person adds are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moss_files.foundation import document, formats, summaries
from moss_files.foundation.document import Document
from moss_files.foundation.errors import InvalidRequest
from moss_files.foundation.fields import FieldReader
from moss_files.foundation.ids import format_time, is_safe_id

ID_PREFIX = "OBS"
FOLDER = Path(".moss") / "observations"
KINDS = ("note", "tool_call", "file_edit", "shell_command", "user_prompt")
DEFAULT_KIND = "note"
FIELDS = ("id", "time", "session", "kind", "summary", "context")
MAX_TEXT_CHARS = 64_000  # an observation is a line or a paragraph, not a transcript
MAX_CONTEXT_KEYS = 32


@dataclass(frozen=True, slots=True)
class Observation:
    """One observation as stored. `summary` is None when the file has none."""

    id: str
    text: str
    time: str | None = None
    kind: str = DEFAULT_KIND
    session: str | None = None
    summary: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def effective_summary(self) -> str:
        """The stored summary, else one generated from the text."""
        return self.summary if self.summary else summaries.summarize(self.text)


# --------------------------------------------------------------------------- reading


def parse_observation(doc: Document, path: Path | str | None = None, *, fallback_id: str | None = None) -> Observation:
    """An Observation from a parsed document; the id defaults to `fallback_id` (the file's stem).

    Raises InvalidDocument SCHEMA_ERROR (with the key's line) for a wrong shape or value.
    """
    formats.check_document("observation", doc, path)
    reader = FieldReader(doc, path)
    observation_id = reader.item_id("observation", fallback_id)
    context_key, context = reader.mapping("context")
    if any(not isinstance(key, str) for key in context):
        raise reader.error(context_key, "'context' must map names to values")
    summary = reader.text("summary")
    return Observation(
        id=observation_id,
        text=doc.body,
        time=_blank_to_none(reader.text("time")),
        kind=reader.choice("kind", KINDS, DEFAULT_KIND),
        session=_blank_to_none(reader.text("session")),
        summary=_blank_to_none(summary),
        context=dict(context),
    )


def _blank_to_none(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


# --------------------------------------------------------------------------- writing


def check_kind(value: str) -> str:
    """The observation kind `value` names. Raises InvalidRequest SCHEMA_ERROR for another word."""
    normalized = value.strip().lower().replace("-", "_")
    if normalized not in KINDS:
        raise InvalidRequest(f"kind {value!r} is not one of {', '.join(KINDS)}", code="SCHEMA_ERROR", details={"field": "kind"})
    return normalized


def check_time(value: str) -> str:
    """An RFC 3339 time (with its offset) as files store times: UTC, seconds, `Z`.

    Raises InvalidRequest for anything else."""
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None or "T" not in text.upper():
        raise InvalidRequest(f"time {value!r} is not an RFC 3339 time such as 2026-01-21T10:00:00Z", details={"field": "time"})
    return format_time(moment.astimezone(UTC))


def check_context(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """The details of an observation: names to texts, numbers, true/false or lists of texts.

    Raises InvalidRequest for another shape (nested mappings: one level is enough to search)."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequest("context must be a mapping of names to values", details={"field": "context"})
    if len(value) > MAX_CONTEXT_KEYS:
        raise InvalidRequest(f"context may hold at most {MAX_CONTEXT_KEYS} names", details={"field": "context"})
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip() or "\n" in key:
            raise InvalidRequest(f"context name {key!r} must be one line of text", details={"field": "context"})
        scalar = (str, int, float, bool)
        if item is None or isinstance(item, scalar) or (isinstance(item, list) and all(isinstance(entry, scalar) for entry in item)):
            out[key.strip()] = item
        else:
            raise InvalidRequest(f"context value of {key!r} must be a text, number, true/false or a list of those", details={"field": "context"})
    return out


def new_observation(
    observation_id: str,
    text: str,
    *,
    time: str,
    kind: str | None = None,
    session: str | None = None,
    summary: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> Observation:
    """A new, validated observation. Raises InvalidRequest for empty text or a bad value."""
    if not text.strip():
        raise InvalidRequest("an observation needs text", details={"field": "text"})
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidRequest(f"an observation may hold at most {MAX_TEXT_CHARS} characters", details={"field": "text", "chars": len(text)})
    if not is_safe_id(observation_id, max_length=128):
        raise InvalidRequest(f"bad observation id {observation_id!r}")
    if session is not None and session.strip() and not is_safe_id(session.strip(), max_length=128):
        raise InvalidRequest(f"bad session id {session!r}", details={"field": "session"})
    line = summary.strip() if summary is not None and summary.strip() else None
    if line is not None and "\n" in line:
        raise InvalidRequest("the summary must be one line", details={"field": "summary"})
    return Observation(
        id=observation_id,
        text=text if text.endswith("\n") else text + "\n",
        time=check_time(time),
        kind=check_kind(kind) if kind else DEFAULT_KIND,
        session=session.strip() if session is not None and session.strip() else None,
        summary=line,
        context=check_context(context),
    )


def observation_meta(observation: Observation) -> dict[str, Any]:
    """The frontmatter of a new file, keys in FIELDS order, empty values left out."""
    meta: dict[str, Any] = {"id": observation.id, "time": observation.time}
    if observation.session:
        meta["session"] = observation.session
    meta["kind"] = observation.kind
    if observation.summary:
        meta["summary"] = observation.summary
    if observation.context:
        meta["context"] = dict(observation.context)
    return meta


def render_observation(observation: Observation) -> str:
    """The text of a new observation file."""
    return document.render(formats.stamp("observation", observation_meta(observation)), observation.text)


# --------------------------------------------------------------------------- JSON shapes


def observation_to_dict(observation: Observation, *, path: str | None = None) -> dict[str, Any]:
    """The full record (the seed's ObservationRecord: `{id, timestamp, type, summary, context,
    session_id}`, with `text` and, when known, `path`)."""
    data: dict[str, Any] = {
        "id": observation.id,
        "timestamp": observation.time,
        "type": observation.kind,
        "summary": observation.effective_summary,
        "text": observation.text,
        "context": dict(observation.context) or None,
        "session_id": observation.session,
    }
    if path is not None:
        data["path"] = path
    return data

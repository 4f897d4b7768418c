"""Feedback: the pain points, feature ideas and bugs agents capture while they work
(LoopFlow's `loop_painpoint`, listed by `loop_feedback_list`), one markdown file each under
`.moss/feedback/`.

Core layer: pure functions over documents and values. The body is the description; the
frontmatter, in the order a new file lists it:

    id        FB-20260122-7f3k9q2m
    type      pain_point | feature_idea | bug
    title     one line
    severity  low | medium | high | critical
    status    queued | shared | dismissed   (queued until a person shares or dismisses it)
    context   what the agent was doing, sanitized before it is stored
    warnings  what may still be personal in it, for the person who reviews it
    created, updated   RFC 3339 UTC
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moss_files.foundation import document, formats
from moss_files.foundation.document import Document
from moss_files.foundation.errors import InvalidDocument, InvalidRequest
from moss_files.foundation.fields import FieldReader
from moss_files.foundation.ids import is_safe_id

ID_PREFIX = "FB"
FOLDER = Path(".moss") / "feedback"
TYPES = ("pain_point", "feature_idea", "bug")
SEVERITIES = ("low", "medium", "high", "critical")
STATUSES = ("queued", "shared", "dismissed")
CONTEXT_CHARS = 500


@dataclass(frozen=True, slots=True)
class Feedback:
    """One captured pain point, idea or bug."""

    id: str
    type: str
    title: str
    description: str
    severity: str = "medium"
    status: str = "queued"
    context: str | None = None
    warnings: tuple[str, ...] = ()
    created: str | None = None
    updated: str | None = None


def _choice(value: str, allowed: Sequence[str], what: str) -> str:
    word = value.strip().lower().replace("-", "_").replace(" ", "_")
    if word not in allowed:
        raise InvalidRequest(f"{what} {value!r} is not one of {', '.join(allowed)}", code="SCHEMA_ERROR", details={"field": what})
    return word


def parse_feedback(doc: Document, path: Path | str | None = None, *, fallback_id: str | None = None) -> Feedback:
    """The feedback a document holds. Raises InvalidDocument SCHEMA_ERROR with the key's line."""
    formats.check_document("feedback", doc, path)
    reader = FieldReader(doc, path)
    item_id = (reader.text("id") or "").strip() or (fallback_id or "")
    if not item_id or not is_safe_id(item_id, max_length=128):
        raise InvalidDocument(f"feedback id {item_id!r} is missing or not usable", code="SCHEMA_ERROR", path=path, line=1)
    title = (reader.text("title") or "").strip()
    if not title:
        raise InvalidDocument("feedback has no title", code="SCHEMA_ERROR", path=path, line=1)
    return Feedback(
        id=item_id,
        type=reader.choice("type", TYPES, "pain_point"),
        title=title,
        description=doc.body,
        severity=reader.choice("severity", SEVERITIES, "medium"),
        status=reader.choice("status", STATUSES, "queued"),
        context=reader.text("context"),
        warnings=reader.items("warnings"),
        created=reader.text("created"),
        updated=reader.text("updated"),
    )


def new_feedback(
    item_id: str,
    *,
    type: str,
    title: str,
    description: str,
    now: str,
    severity: str | None = None,
    context: str | None = None,
    warnings: Sequence[str] = (),
) -> Feedback:
    """A new, queued feedback item (its context already sanitized by the caller).

    Raises InvalidRequest for a bad type or severity, a title that is not one line, an empty
    description."""
    name = " ".join((title or "").split())
    if not name:
        raise InvalidRequest("feedback needs a title", details={"field": "title"})
    if not description or not description.strip():
        raise InvalidRequest("feedback needs a description", details={"field": "description"})
    return Feedback(
        id=item_id,
        type=_choice(type, TYPES, "type"),
        title=name,
        description=description if description.endswith("\n") else description + "\n",
        severity=_choice(severity, SEVERITIES, "severity") if severity else "medium",
        status="queued",
        context=context or None,
        warnings=tuple(warnings),
        created=now,
        updated=now,
    )


def render_feedback(item: Feedback) -> str:
    """The text of a new feedback file."""
    meta: dict[str, Any] = {"id": item.id, "type": item.type, "title": item.title, "severity": item.severity, "status": item.status}
    if item.context:
        meta["context"] = item.context
    if item.warnings:
        meta["warnings"] = list(item.warnings)
    meta["created"] = item.created
    meta["updated"] = item.updated
    return document.render(formats.stamp("feedback", meta), item.description)


def feedback_to_dict(item: Feedback, *, path: str | None = None) -> dict[str, Any]:
    """The full record."""
    data: dict[str, Any] = {
        "id": item.id,
        "type": item.type,
        "title": item.title,
        "description": item.description,
        "severity": item.severity,
        "status": item.status,
        "context": item.context,
        "warnings": list(item.warnings),
        "created_at": item.created,
        "updated_at": item.updated,
    }
    if path is not None:
        data["path"] = path
    return data


def feedback_brief(item: Feedback) -> dict[str, Any]:
    """LoopFlow's list shape: `{id, type, title, severity, status, created_at}`."""
    return {"id": item.id, "type": item.type, "title": item.title, "severity": item.severity, "status": item.status, "created_at": item.created}


def check_statuses(values: Sequence[str]) -> set[str]:
    """Statuses from a caller. Raises InvalidRequest SCHEMA_ERROR."""
    return {_choice(value, STATUSES, "status") for value in values}

"""Insights (LoopFlow's zettelkasten notes) as markdown files: model, parse, render, edits.

Core layer: pure functions over documents and values (no I/O, no clock: times come in).
One file per insight, `.moss/insights/<id>.md`; the body is the insight's content, byte for
byte. Frontmatter keys, in the order a new file lists them:

    id       INS-20260121-7f3k9q2m (collision-free; LoopFlow's INS-001 is read too)
    type     process | domain | architecture | edge_case | technical
    status   unprocessed | discussed
    tags     [list]            links    [ids of related insights or any other item]
    source   {task: LF-049, session: SES-...}   where it was learned (optional)
    summary  one line; context: 2-3 sentences  (optional: generated from the body when absent)
    summary_source  ai | heuristic when a tool generated the stored summary (absent: a person
             wrote it, and no tool ever replaces it)
    notes    free text (optional)
    created, updated   RFC 3339 UTC
    deleted_at   RFC 3339 UTC, set by a soft delete, which moves the file to `deleted/`

Reading is strict about shapes (a list where text belongs is SCHEMA_ERROR with its line) and
about the two enumerations; unknown keys are kept and never touched by edits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moss_files.foundation import document, formats, summaries
from moss_files.foundation.document import Document
from moss_files.foundation.errors import InvalidRequest
from moss_files.foundation.fields import FieldReader
from moss_files.foundation.ids import is_safe_id

ID_PREFIX = "INS"
FOLDER = Path(".moss") / "insights"
TYPES = ("process", "domain", "architecture", "edge_case", "technical")
STATUSES = ("unprocessed", "discussed")
DEFAULT_TYPE = "technical"
DEFAULT_STATUS = "unprocessed"
FIELDS = ("id", "type", "status", "tags", "links", "source", "summary", "summary_source", "context", "notes", "created", "updated", "deleted_at")
SOURCE_KEYS = ("task", "session")
DELETED_FOLDER = "deleted"  # soft-deleted insights: .moss/insights/deleted/<id>.md
SUMMARY_SOURCES = ("ai", "heuristic", "human")
GENERATED = ("ai", "heuristic")  # summary sources a tool may replace

_TAG = re.compile(r"^[^\s,]{1,64}$")


@dataclass(frozen=True, slots=True)
class Insight:
    """One insight as stored. `summary`/`context` are None when the file has none."""

    id: str
    content: str
    type: str = DEFAULT_TYPE
    status: str = DEFAULT_STATUS
    tags: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    source: Mapping[str, str] = field(default_factory=dict)
    summary: str | None = None
    context: str | None = None
    notes: str | None = None
    created: str | None = None
    updated: str | None = None
    summary_source: str | None = None  # ai | heuristic: the stored summary was generated
    deleted: str | None = None  # deleted_at

    @property
    def effective_summary(self) -> str:
        """The stored summary, else one generated from the content."""
        return self.summary if self.summary else summaries.summarize(self.content)

    @property
    def effective_summary_source(self) -> str:
        """How the effective summary came about: `ai` or `heuristic` (generated), `human`."""
        if not self.summary:
            return "heuristic"
        return self.summary_source or "human"

    @property
    def summary_is_generated(self) -> bool:
        """Whether a tool may replace the summary: none stored, or a generated one."""
        return not self.summary or self.summary_source in GENERATED

    @property
    def effective_context(self) -> str | None:
        return self.context if self.context else summaries.extract_context(self.content)


def is_valid_id(text: str) -> bool:
    """Whether `text` can be an insight or session id (and so a file name)."""
    return is_safe_id(text, max_length=128)


def file_name(insight_id: str) -> str:
    return f"{insight_id}.md"


# --------------------------------------------------------------------------- reading


def parse_insight(doc: Document, path: Path | str | None = None, *, fallback_id: str | None = None) -> Insight:
    """An Insight from a parsed document; the id defaults to `fallback_id` (the file's stem).

    Raises InvalidDocument SCHEMA_ERROR (with the key's line) for a wrong shape or value.
    """
    formats.check_document("insight", doc, path)
    reader = FieldReader(doc, path)
    insight_id = reader.item_id("insight", fallback_id)
    return Insight(
        id=insight_id,
        content=doc.body,
        type=reader.choice("type", TYPES, DEFAULT_TYPE),
        status=reader.choice("status", STATUSES, DEFAULT_STATUS),
        tags=reader.items("tags", comma_separated=True),
        links=reader.items("links", comma_separated=True),
        source=_source(reader),
        summary=_blank_to_none(reader.text("summary")),
        context=_blank_to_none(reader.text("context")),
        notes=_blank_to_none(reader.text("notes")),
        created=reader.text("created") or reader.text("created_at"),
        updated=reader.text("updated") or reader.text("updated_at"),
        summary_source=_summary_source(reader),
        deleted=_blank_to_none(reader.text("deleted_at")),
    )


def _summary_source(reader: FieldReader) -> str | None:
    """Who wrote the stored summary (`summary_source`): ai | heuristic | human, None when absent."""
    value = reader.text("summary_source")
    if value is None or not value.strip():
        return None
    normalized = value.strip().lower()
    if normalized not in SUMMARY_SOURCES:
        raise reader.error(reader.key("summary_source"), f"summary_source {value!r} is not one of {', '.join(SUMMARY_SOURCES)}")
    return None if normalized == "human" else normalized


def _source(reader: FieldReader) -> dict[str, str]:
    """Where an insight was learned: `{task, session}`; a bare text names the task."""
    key, value = reader.raw("source")
    if value is None:
        return {}
    if isinstance(value, str):
        return {"task": value} if value.strip() else {}
    if not isinstance(value, dict):
        raise reader.error(key, "'source' must be a mapping such as {task: LF-1, session: SES-...}")
    out: dict[str, str] = {}
    for item_key, item in value.items():
        if item is None:
            continue
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise reader.error(key, f"source.{item_key} must be text")
        out[str(item_key)] = str(item)
    return out


def _blank_to_none(value: str | None) -> str | None:
    return value if value is not None and value.strip() else None


# --------------------------------------------------------------------------- writing


def check_type(value: str) -> str:
    """The insight type `value` names. Raises InvalidRequest SCHEMA_ERROR for another word."""
    normalized = value.strip().lower().replace("-", "_")
    if normalized not in TYPES:
        raise InvalidRequest(f"type {value!r} is not one of {', '.join(TYPES)}", code="SCHEMA_ERROR")
    return normalized


def check_status(value: str) -> str:
    """The insight status `value` names. Raises InvalidRequest SCHEMA_ERROR for another word."""
    normalized = value.strip().lower()
    if normalized not in STATUSES:
        raise InvalidRequest(f"status {value!r} is not one of {', '.join(STATUSES)}", code="SCHEMA_ERROR")
    return normalized


def check_names(values: Iterable[str], what: str) -> tuple[str, ...]:
    """Tags or links, trimmed and without repeats. Raises InvalidRequest for blanks or spaces."""
    out: list[str] = []
    for value in values:
        name = str(value).strip()
        if not _TAG.match(name):
            raise InvalidRequest(f"{what} {value!r} must be one word without commas (1-64 characters)")
        if name not in out:
            out.append(name)
    return tuple(out)


def new_insight(
    insight_id: str,
    content: str,
    *,
    now: str,
    type: str | None = None,
    tags: Iterable[str] = (),
    links: Iterable[str] = (),
    source: Mapping[str, str | None] | None = None,
    summary: str | None = None,
    context: str | None = None,
    notes: str | None = None,
    summary_source: str | None = None,
) -> Insight:
    """A new, validated insight; `summary_source` (ai | heuristic) marks a `summary` a tool
    generated. Raises InvalidRequest for empty content or a bad value."""
    if not content.strip():
        raise InvalidRequest("an insight needs content")
    if not is_valid_id(insight_id):
        raise InvalidRequest(f"bad insight id {insight_id!r}")
    return Insight(
        id=insight_id,
        content=content if content.endswith("\n") else content + "\n",
        type=check_type(type) if type else DEFAULT_TYPE,
        status=DEFAULT_STATUS,
        tags=check_names(tags, "tag"),
        links=check_names(links, "link"),
        source={key: str(value) for key, value in (source or {}).items() if value},
        summary=_single_line(summary, "summary"),
        context=_blank_to_none(context),
        notes=_blank_to_none(notes),
        created=now,
        updated=now,
        summary_source=summary_source if summary and summary_source in GENERATED else None,
    )


def _single_line(value: str | None, what: str) -> str | None:
    if value is None or not value.strip():
        return None
    if "\n" in value.strip():
        raise InvalidRequest(f"the {what} must be one line")
    return value.strip()


def insight_meta(insight: Insight) -> dict[str, Any]:
    """The frontmatter of a new file, keys in FIELDS order, empty values left out."""
    meta: dict[str, Any] = {"id": insight.id, "type": insight.type, "status": insight.status}
    if insight.tags:
        meta["tags"] = list(insight.tags)
    if insight.links:
        meta["links"] = list(insight.links)
    if insight.source:
        meta["source"] = dict(insight.source)
    if insight.summary is not None:
        meta["summary"] = insight.summary
        if insight.summary_source in GENERATED:
            meta["summary_source"] = insight.summary_source
    for name in ("context", "notes"):
        value = getattr(insight, name)
        if value is not None:
            meta[name] = value
    meta["created"] = insight.created
    meta["updated"] = insight.updated
    if insight.deleted is not None:
        meta["deleted_at"] = insight.deleted
    return meta


def render_insight(insight: Insight) -> str:
    """The text of a new insight file."""
    return document.render(formats.stamp("insight", insight_meta(insight)), insight.content)


@dataclass(frozen=True, slots=True)
class Update:
    """What `insight update` may change; None leaves a field alone."""

    status: str | None = None
    type: str | None = None
    tags: tuple[str, ...] | None = None
    add_tags: tuple[str, ...] = ()
    remove_tags: tuple[str, ...] = ()
    links: tuple[str, ...] | None = None
    add_links: tuple[str, ...] = ()
    remove_links: tuple[str, ...] = ()
    notes: str | None = None
    summary: str | None = None
    context: str | None = None
    content: str | None = None  # the body: the insight itself


def new_content(insight: Insight, update: Update) -> str | None:
    """The body `update` gives the insight (ending in a newline), or None when it keeps its own.

    Raises InvalidRequest for empty content."""
    if update.content is None:
        return None
    if not update.content.strip():
        raise InvalidRequest("an insight needs content")
    body = update.content if update.content.endswith("\n") else update.content + "\n"
    return None if body == insight.content else body


def plan_update(insight: Insight, update: Update, now: str, *, generated: tuple[str, str] | None = None) -> dict[str, Any]:
    """The frontmatter changes (for `document.edit_frontmatter`) that apply `update`;
    empty when nothing would change. `updated` moves only when something else does.

    A summary the update gives is a person's: it drops `summary_source`. New content makes a
    generated summary stale: it is replaced by `generated` (summary, source), when given, or
    removed (the summary is then made from the content when read); a person's summary stays.

    Raises InvalidRequest for a bad status, type, tag or link.
    """
    wanted: dict[str, Any] = {}
    if update.status is not None and check_status(update.status) != insight.status:
        wanted["status"] = check_status(update.status)
    if update.type is not None and check_type(update.type) != insight.type:
        wanted["type"] = check_type(update.type)
    tags = _merged(insight.tags, update.tags, update.add_tags, update.remove_tags, "tag")
    if tags != insight.tags:
        wanted["tags"] = list(tags) if tags else document.DELETE
    links = _merged(insight.links, update.links, update.add_links, update.remove_links, "link")
    if links != insight.links:
        wanted["links"] = list(links) if links else document.DELETE
    for name in ("notes", "summary", "context"):
        value = getattr(update, name)
        if value is None:
            continue
        if name == "summary":
            value = _single_line(value, "summary") or ""
        current = getattr(insight, name)
        if (value.strip() or None) != current:
            wanted[name] = value if value.strip() else document.DELETE
        if name == "summary" and insight.summary_source is not None and (value.strip() or current is not None):
            wanted["summary_source"] = document.DELETE  # now a person's summary (or none)
    body = new_content(insight, update)
    if body is not None and update.summary is None and insight.summary_is_generated:
        if generated is not None and generated[1] in GENERATED:
            if generated[0] != insight.summary:
                wanted["summary"] = generated[0]
            if generated[1] != insight.summary_source:
                wanted["summary_source"] = generated[1]
        elif insight.summary is not None:
            wanted["summary"] = document.DELETE
            wanted["summary_source"] = document.DELETE
    if wanted or body is not None:
        wanted["updated"] = now
    return wanted


def _merged(current: tuple[str, ...], replace: tuple[str, ...] | None, add: tuple[str, ...], remove: tuple[str, ...], what: str) -> tuple[str, ...]:
    base = list(check_names(replace, what)) if replace is not None else list(current)
    for name in check_names(add, what):
        if name not in base:
            base.append(name)
    dropped = set(check_names(remove, what))
    return tuple(name for name in base if name not in dropped)


# --------------------------------------------------------------------------- JSON shapes


def insight_to_dict(insight: Insight, *, path: str | None = None) -> dict[str, Any]:
    """The full record (`loop_expand`'s insight shape, plus summary, context and path)."""
    data: dict[str, Any] = {
        "id": insight.id,
        "content": insight.content,
        "summary": insight.effective_summary,
        "context": insight.effective_context,
        "type": insight.type,
        "status": insight.status,
        "tags": list(insight.tags),
        "links": list(insight.links),
        "source": dict(insight.source) or None,
        "summary_source": insight.effective_summary_source,
        "notes": insight.notes,
        "created_at": insight.created,
        "updated_at": insight.updated,
    }
    if insight.deleted is not None:
        data["deleted_at"] = insight.deleted
    if path is not None:
        data["path"] = path
    return data


def insight_brief(insight: Insight) -> dict[str, Any]:
    """The compact shape for lists and orientation: no content."""
    return {
        "id": insight.id,
        "summary": insight.effective_summary,
        "type": insight.type,
        "status": insight.status,
        "tags": list(insight.tags),
        "created_at": insight.created,
    }

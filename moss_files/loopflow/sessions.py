"""Work sessions (LoopFlow's orient → work → handoff loop) as markdown files.

Core layer: pure functions over documents and values (no I/O, no clock: times come in).
One file per session, `.moss/sessions/<id>.md`. Frontmatter keys, in the order a new file
lists them (lists and values absent until known):

    id           SES-20260121-7f3k9q2m (collision-free; LoopFlow's 2026-01-22-S21 is read too)
    task         what the session works on (an id or a title)
    agent        who works in it (optional)
    started      RFC 3339 UTC; `ended` is set by the handoff, and its absence means active
    outcome      COMPLETE | PARTIAL | BLOCKED | INTERRUPTED (IN_PROGRESS is read too)
    mode         graceful | emergency (how the handoff was made)
    headline     the session in one line, what search shows (optional: made from the
                 `## Summary` when absent)
    headline_source  ai when a tool generated the headline (absent: a person wrote it, and no
                 tool ever replaces it)
    next_actions, completed, in_progress, blocked_on    lists of one-line items

The body holds the prose, under `## Summary`, `## Learnings` and `## Hot context`; a handoff
replaces the text under those headings and leaves any other text of the body alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moss_files.foundation import document, formats, summaries
from moss_files.foundation.document import Document
from moss_files.foundation.errors import InvalidRequest
from moss_files.foundation.fields import FieldReader
from moss_files.foundation.ids import is_safe_id

ID_PREFIX = "SES"
FOLDER = Path(".moss") / "sessions"
OUTCOMES = ("COMPLETE", "PARTIAL", "BLOCKED", "INTERRUPTED")
READ_OUTCOMES = (*OUTCOMES, "IN_PROGRESS")
MODES = ("graceful", "emergency")
LIST_FIELDS = ("next_actions", "completed", "in_progress", "blocked_on")
FIELDS = ("id", "task", "agent", "started", "ended", "outcome", "mode", "headline", "headline_source", *LIST_FIELDS)
HEADLINE_SOURCES = ("ai", "heuristic", "human")
GENERATED = ("ai", "heuristic")  # headline sources a tool may replace
SECTIONS = ("Summary", "Learnings", "Hot context")
BRIEF_SUMMARY = 300

_LEGACY_ID = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})-S\d+[a-z]?$")
_PREFIXED_DATE = re.compile(r"^[A-Z]+-(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})-")
_HEADING = re.compile(r"^(?P<marks>#{1,6})[ \t]+(?P<title>.*?)[ \t#]*\r?$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True, slots=True)
class Session:
    """One session as stored. `ended` None means the session is still active."""

    id: str
    task: str | None = None
    agent: str | None = None
    started: str | None = None
    ended: str | None = None
    outcome: str | None = None
    mode: str | None = None
    next_actions: tuple[str, ...] = ()
    completed: tuple[str, ...] = ()
    in_progress: tuple[str, ...] = ()
    blocked_on: tuple[str, ...] = ()
    summary: str | None = None
    learnings: str | None = None
    hot_context: str | None = None
    body: str = ""
    headline: str | None = None
    headline_source: str | None = None  # ai | heuristic: the stored headline was generated

    @property
    def headline_is_generated(self) -> bool:
        """Whether a tool may replace the headline: none stored, or a generated one."""
        return not self.headline or self.headline_source in GENERATED

    @property
    def effective_headline(self) -> str:
        """The one line search shows: the stored headline, else the `## Summary` summarized,
        else the next actions, else the status and task."""
        if self.headline:
            return self.headline
        if self.summary:
            return summaries.summarize(self.summary)
        if self.next_actions:
            return summaries.summarize("Next: " + "; ".join(self.next_actions))
        return f"{self.status} session" + (f" on {self.task}" if self.task else "")

    @property
    def active(self) -> bool:
        return self.ended is None

    @property
    def date(self) -> str | None:
        """The day it started: from `started`, else from a dated id."""
        if self.started:
            return self.started[:10]
        legacy = _LEGACY_ID.match(self.id)
        if legacy:
            return legacy.group("date")
        dated = _PREFIXED_DATE.match(self.id)
        if dated:
            return f"{dated.group('y')}-{dated.group('m')}-{dated.group('d')}"
        return None

    @property
    def status(self) -> str:
        """`active` while running, else the outcome in lowercase (`ended` without one)."""
        if self.active:
            return "active"
        return (self.outcome or "ended").lower()


# --------------------------------------------------------------------------- body sections


def section_spans(body: str) -> dict[str, tuple[int, int]]:
    """`{title casefolded: (heading line index, end line index)}` of the body's `#`/`##`
    sections (a section ends at the next heading of level 1 or 2; fenced code is skipped)."""
    lines = body.splitlines(keepends=True)
    headings: list[tuple[int, str]] = []
    in_fence = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else _HEADING.match(line.rstrip("\n"))
        if match and len(match.group("marks")) <= 2:
            headings.append((index, match.group("title").strip().casefold()))
    spans: dict[str, tuple[int, int]] = {}
    for number, (index, title) in enumerate(headings):
        end = headings[number + 1][0] if number + 1 < len(headings) else len(lines)
        spans.setdefault(title, (index, end))
    return spans


def read_section(body: str, title: str) -> str | None:
    """The text under `## title` (trimmed), or None when the body has no such section."""
    return read_sections(body, (title,))[title]


def read_sections(body: str, titles: Iterable[str]) -> dict[str, str | None]:
    """`{title: text under it, or None}` for several sections, reading the body once."""
    spans = section_spans(body)
    lines = body.splitlines(keepends=True)
    out: dict[str, str | None] = {}
    for title in titles:
        span = spans.get(title.casefold())
        out[title] = ("".join(lines[span[0] + 1 : span[1]]).strip() or None) if span else None
    return out


def set_sections(body: str, values: Mapping[str, str | None], newline: str = "\n") -> str:
    """`body` with the text under each `## title` in `values` replaced (None: left alone);
    missing sections are added at the end in `values` order. Applying the same values twice
    gives the same text."""
    result = body
    for title, text in values.items():
        if text is None:
            continue
        lines = result.splitlines(keepends=True)
        span = section_spans(result).get(title.casefold())
        content = [newline] + [line + newline for line in text.strip().splitlines()] if text.strip() else []
        if span is None:
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += newline
            if lines and lines[-1].strip():
                lines.append(newline)
            lines.append(f"## {title}{newline}")
            lines.extend(content)
        else:
            start, end = span
            block = list(content)
            if end < len(lines):
                block.append(newline)  # keep one blank line before the next heading
            lines[start + 1 : end] = block
        result = "".join(lines)
    return result


# --------------------------------------------------------------------------- reading


def parse_session(doc: Document, path: Path | str | None = None, *, fallback_id: str | None = None) -> Session:
    """A Session from a parsed document; the id defaults to `fallback_id` (the file's stem).

    Raises InvalidDocument SCHEMA_ERROR (with the key's line) for a wrong shape or value.
    """
    formats.check_document("session", doc, path)
    reader = FieldReader(doc, path)
    session_id = reader.item_id("session", fallback_id)
    outcome = reader.text("outcome")
    if outcome is not None and outcome.strip():
        outcome = outcome.strip().upper().replace("-", "_").replace(" ", "_")
        if outcome not in READ_OUTCOMES:
            raise reader.error(reader.key("outcome"), f"outcome {outcome!r} is not one of {', '.join(READ_OUTCOMES)}")
    else:
        outcome = None
    mode = reader.text("mode")
    if mode is not None and mode.strip():
        mode = mode.strip().lower()
        if mode not in MODES:
            raise reader.error(reader.key("mode"), f"mode {mode!r} is not one of {', '.join(MODES)}")
    else:
        mode = None
    lists = {name: reader.items(name, comma_separated=True) for name in LIST_FIELDS}
    headline = _text(reader.text("headline"))
    if headline is not None and "\n" in headline:
        raise reader.error(reader.key("headline"), "the headline must be one line")
    headline_source = _text(reader.text("headline_source"))
    if headline_source is not None:
        headline_source = headline_source.lower()
        if headline_source not in HEADLINE_SOURCES:
            raise reader.error(reader.key("headline_source"), f"headline_source {headline_source!r} is not one of {', '.join(HEADLINE_SOURCES)}")
        headline_source = None if headline_source == "human" else headline_source
    body = doc.body
    sections = read_sections(body, SECTIONS)
    return Session(
        id=session_id,
        task=_text(reader.text("task")),
        agent=_text(reader.text("agent")),
        started=_text(reader.text("started") or reader.text("date")),
        ended=_text(reader.text("ended")),
        outcome=outcome,
        mode=mode,
        summary=sections["Summary"],
        learnings=sections["Learnings"],
        hot_context=sections["Hot context"],
        body=body,
        headline=headline,
        headline_source=headline_source,
        **lists,
    )


def _text(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


# --------------------------------------------------------------------------- writing


def new_session(session_id: str, *, now: str, task: str | None = None, agent: str | None = None) -> Session:
    """A new, active session. Raises InvalidRequest for a bad id or a multi-line task."""
    if not is_safe_id(session_id, max_length=128):
        raise InvalidRequest(f"bad session id {session_id!r}")
    return Session(id=session_id, task=_one_line(task, "task"), agent=_one_line(agent, "agent"), started=now)


def _one_line(value: str | None, what: str) -> str | None:
    if value is None or not value.strip():
        return None
    if "\n" in value.strip():
        raise InvalidRequest(f"the {what} must be one line")
    return value.strip()


def session_meta(session: Session) -> dict[str, Any]:
    """The frontmatter of a new file, keys in FIELDS order, empty values left out."""
    meta: dict[str, Any] = {"id": session.id}
    for name in ("task", "agent", "started", "ended", "outcome", "mode", "headline"):
        value = getattr(session, name)
        if value is not None:
            meta[name] = value
    if session.headline and session.headline_source in GENERATED:
        meta["headline_source"] = session.headline_source
    for name in LIST_FIELDS:
        value = getattr(session, name)
        if value:
            meta[name] = list(value)
    return meta


def render_session(session: Session) -> str:
    """The text of a new session file."""
    body = set_sections(session.body, {"Summary": session.summary, "Learnings": session.learnings, "Hot context": session.hot_context})
    return document.render(formats.stamp("session", session_meta(session)), body)


@dataclass(frozen=True, slots=True)
class Handoff:
    """What a handoff records. Empty lists and None leave what the session has."""

    mode: str = "graceful"
    completed: tuple[str, ...] = ()
    in_progress: tuple[str, ...] = ()
    blocked_on: tuple[str, ...] = ()
    next_actions: tuple[str, ...] = ()
    hot_context: str | None = None
    summary: str | None = None
    learnings: str | None = None
    outcome: str | None = None
    task: str | None = None


def check_handoff(handoff: Handoff) -> Handoff:
    """The handoff with its values checked and trimmed. Raises InvalidRequest."""
    mode = handoff.mode.strip().lower()
    if mode not in MODES:
        raise InvalidRequest(f"mode {handoff.mode!r} is not one of {', '.join(MODES)}")
    outcome = None
    if handoff.outcome is not None and handoff.outcome.strip():
        outcome = handoff.outcome.strip().upper().replace("-", "_")
        if outcome not in OUTCOMES:
            raise InvalidRequest(f"outcome {handoff.outcome!r} is not one of {', '.join(OUTCOMES)}")
    return Handoff(
        mode=mode,
        completed=_items(handoff.completed, "completed"),
        in_progress=_items(handoff.in_progress, "in_progress"),
        blocked_on=_items(handoff.blocked_on, "blocked_on"),
        next_actions=_items(handoff.next_actions, "next_actions"),
        hot_context=handoff.hot_context,
        summary=handoff.summary,
        learnings=handoff.learnings,
        outcome=outcome,
        task=_one_line(handoff.task, "task"),
    )


def _items(values: Iterable[str], what: str) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        text = " ".join(str(value).split())
        if text and text not in out:
            out.append(text)
    return tuple(out)


def decide_outcome(mode: str, blocked_on: Iterable[str], in_progress: Iterable[str], explicit: str | None = None) -> str:
    """LoopFlow's outcome rule: explicit wins; an emergency handoff is INTERRUPTED; open
    blockers make it BLOCKED; unfinished work PARTIAL; otherwise COMPLETE."""
    if explicit:
        return explicit
    if mode == "emergency":
        return "INTERRUPTED"
    if tuple(blocked_on):
        return "BLOCKED"
    if tuple(in_progress):
        return "PARTIAL"
    return "COMPLETE"


@dataclass(frozen=True, slots=True)
class HandoffPlan:
    """The edits a handoff makes, in order: next actions first, then everything else."""

    next_actions: dict[str, Any]
    rest: dict[str, Any]
    sections: dict[str, str | None]
    outcome: str


def headline_text(summary: str | None, learnings: str | None) -> str:
    """What a session's headline summarizes: its `## Summary`, else its `## Learnings`."""
    return (summary or "").strip() or (learnings or "").strip()


def handoff_text(session: Session, handoff: Handoff) -> str:
    """The text the session's headline would summarize once `handoff` is recorded."""
    return headline_text(
        handoff.summary if handoff.summary is not None else session.summary, handoff.learnings if handoff.learnings is not None else session.learnings
    )


def plan_handoff(session: Session, handoff: Handoff, now: str, *, generated: tuple[str, str] | None = None) -> HandoffPlan:
    """The frontmatter changes and body sections that record `handoff` on `session`.

    An ended session keeps its `ended` time, so repeating a handoff changes nothing. A headline
    a person wrote stays; a generated one whose text the handoff changes is replaced by
    `generated` (headline, source), when given, or removed.
    """
    first: dict[str, Any] = {}
    if handoff.next_actions and handoff.next_actions != session.next_actions:
        first["next_actions"] = list(handoff.next_actions)
    rest: dict[str, Any] = {}
    lists = {name: getattr(handoff, name) or getattr(session, name) for name in ("completed", "in_progress", "blocked_on")}
    for name, value in lists.items():
        if value != getattr(session, name):
            rest[name] = list(value)
    if handoff.task and handoff.task != session.task:
        rest["task"] = handoff.task
    if session.ended is None:
        rest["ended"] = now
    if handoff.mode != session.mode:
        rest["mode"] = handoff.mode
    outcome = decide_outcome(handoff.mode, lists["blocked_on"], lists["in_progress"], handoff.outcome)
    if outcome != session.outcome:
        rest["outcome"] = outcome
    if session.headline_is_generated:
        stale = handoff_text(session, handoff) != headline_text(session.summary, session.learnings)
        if generated is not None and generated[1] in GENERATED and (stale or not session.headline):
            if generated[0] != session.headline:
                rest["headline"] = generated[0]
            if generated[1] != session.headline_source:
                rest["headline_source"] = generated[1]
        elif stale and session.headline:
            rest["headline"] = rest["headline_source"] = document.DELETE
    sections = {"Summary": handoff.summary, "Learnings": handoff.learnings, "Hot context": handoff.hot_context}
    return HandoffPlan(first, rest, sections, outcome)


def body_with_sections(text: str, sections: Mapping[str, str | None], path: Path | str | None = None) -> str:
    """A whole file's text with body sections replaced; the frontmatter bytes untouched."""
    doc = document.parse(text, path)
    new_body = set_sections(doc.body, sections, doc.newline)
    return text[: len(text) - len(doc.body)] + new_body


# --------------------------------------------------------------------------- JSON shapes


def session_to_dict(session: Session, *, path: str | None = None) -> dict[str, Any]:
    """The full record of a session."""
    data: dict[str, Any] = {
        "id": session.id,
        "date": session.date,
        "task": session.task,
        "agent": session.agent,
        "status": session.status,
        "active": session.active,
        "started_at": session.started,
        "ended_at": session.ended,
        "outcome": session.outcome,
        "mode": session.mode,
        "summary": session.summary,
        "learnings": session.learnings,
        "hot_context": session.hot_context,
        "headline": session.effective_headline,
        "headline_source": (session.headline_source or "human") if session.headline else "heuristic",
        "next_actions": list(session.next_actions),
        "completed": list(session.completed),
        "in_progress": list(session.in_progress),
        "blocked_on": list(session.blocked_on),
    }
    if path is not None:
        data["path"] = path
    return data


def session_brief(session: Session) -> dict[str, Any]:
    """`loop_orient`'s recent-session shape: the summary cut to 300 characters."""
    summary = session.summary
    return {
        "id": session.id,
        "date": session.date,
        "task": session.task,
        "status": session.status,
        "outcome": session.outcome,
        "summary": summaries.truncate_at_word(summaries.plain_text(summary), BRIEF_SUMMARY) if summary else None,
    }

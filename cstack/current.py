"""CURRENT.md: what an agent is doing now, in any of the three dialects. Core layer: pure
functions over text; imports the stdlib and moss_files' core only.

Dialects read (headings compared without case; a file may mix them):
- v1 (cortical-stack V1 and its Go parser): `## Current Task`, `## Focus`, `## Next Steps`;
- template (cortical-stack v1.5+ and our own template): `## Now`, `## Next Steps`,
  `## Active Task` with a `**Task:** … | **Status:** … | **Started:** …` line and
  `### Subtasks` checkboxes, `## Context` with a `- Blockers: …` item, and a
  `> **Last Updated:** … | **Active Task:** …` line near the top;
- protectorate (the sleeve spec): `## Status`, `## Task`, `## Progress` checkboxes,
  `## Blockers`, `## Next Steps`.
Optional YAML frontmatter keys `status`, `task`, `focus`, `blockers`, `next_steps` and
`started` take precedence over the body. Placeholders (`_none_`, `--`, `(none)`, an all-italic
line) read as absent. A missing or empty file is the empty state, not an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from cstack import markdown
from cstack.markdown import Outline, Section
from moss_files.foundation import document, formats
from moss_files.foundation.errors import InvalidDocument

_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+(?P<text>.*?)[ \t]*$")
_CHECKBOX = re.compile(r"^[ \t]*[-*+][ \t]+\[(?P<mark>[ xX>!~])\][ \t]+(?P<text>.*?)[ \t]*$")
_BOLD_FIELD = re.compile(r"\*\*(?P<key>[^*|]+?):\*\*(?P<space>[ \t]*)(?P<value>[^|]*?)(?P<trail>[ \t]*)(?=\||$)")
_STATES = {
    "working": "working",
    "wip": "working",
    "in progress": "working",
    "in_progress": "working",
    "active": "working",
    "busy": "working",
    "idle": "idle",
    "waiting": "idle",
    "blocked": "blocked",
    "stuck": "blocked",
    "done": "done",
    "complete": "done",
    "completed": "done",
    "finished": "done",
}
ACTIVE_STATUS = "WIP"


@dataclass(frozen=True, slots=True)
class Progress:
    """Checkbox counts from `## Progress` (or the template's `### Subtasks`)."""

    total: int = 0
    completed: int = 0


@dataclass(frozen=True, slots=True)
class Current:
    """A parsed CURRENT.md. `text` is kept so that `render_current(parse_current(t)) == t`."""

    dialect: str | None  # v1 | template | protectorate | None (empty or unrecognised)
    status: str | None  # as written
    state: str  # idle | working | blocked | done, derived from status and task
    task: str | None
    focus: str | None
    next_steps: tuple[str, ...]
    blockers: tuple[str, ...]
    progress: Progress
    started: str | None
    last_updated: str | None
    meta: dict[str, Any] = field(default_factory=dict)
    text: str = field(default="", repr=False)


def parse_current(text: str, path: Path | str | None = None) -> Current:
    """Read CURRENT.md text in any dialect (empty text is the empty state).

    Raises InvalidDocument for malformed frontmatter, or SCHEMA_ERROR when a frontmatter key
    read here has a type that cannot be used (a mapping where a string is expected).
    """
    doc = document.parse(text, path)
    formats.check_text("current", text, path)  # FORMAT_TOO_NEW: a newer toolkit wrote it
    shape = markdown.outline(text, doc.body_line)
    sections = {section.path[-1].casefold(): section for section in reversed(shape.sections)}
    top = {s.title.casefold(): s for s in reversed(shape.sections) if s.level == 2}

    active = _bold_line(shape, "task")
    banner = _bold_line(shape, "last updated")
    task = _text(shape, top.get("current task")) or _text(shape, top.get("task"))
    if task is None and active is not None:
        task = _value(active[1].get("task"))
    focus = _text(shape, top.get("focus")) or _text(shape, top.get("now"))
    status = _first_line(shape, top.get("status"))
    if status is None and active is not None:
        status = _value(active[1].get("status"))
    started = _value(active[1].get("started")) if active else None
    next_steps = _items(shape, top.get("next steps"))
    blockers = _items(shape, top.get("blockers"))
    if not blockers and "context" in top:
        blockers = _context_blockers(shape, top["context"])
    progress_section = top.get("progress") or sections.get("subtasks")
    progress = _progress(shape, progress_section)
    last_updated = _value(banner[1].get("last updated")) if banner else None

    meta = doc.meta
    status = _meta_text(meta, "status", path) or status
    task = _meta_text(meta, "task", path) or task
    focus = _meta_text(meta, "focus", path) or focus
    started = _meta_text(meta, "started", path) or started
    next_steps = _meta_list(meta, "next_steps", path) or next_steps
    blockers = _meta_list(meta, "blockers", path) or blockers

    return Current(
        dialect=_dialect(top),
        status=status,
        state=_state(status, task),
        task=task,
        focus=focus,
        next_steps=next_steps,
        blockers=blockers,
        progress=progress,
        started=started,
        last_updated=last_updated,
        meta=meta,
        text=text,
    )


def render_current(current: Current) -> str:
    """The file's text (reading keeps it whole)."""
    return current.text


def _dialect(top: Mapping[str, Section]) -> str | None:
    if {"status", "progress", "blockers", "task"} & top.keys():
        return "protectorate"
    if {"now", "active task"} & top.keys():
        return "template"
    if {"current task", "focus", "next steps"} & top.keys():
        return "v1"
    return None


def _state(status: str | None, task: str | None) -> str:
    if status:
        known = _STATES.get(status.strip().casefold())
        if known:
            return known
    return "working" if task else "idle"


def _own_lines(shape: Outline, section: Section | None) -> list[str]:
    if section is None:
        return []
    return [shape.content(i) for i in range(section.start + 1, section.own_end) if shape.visible(i)]


def _text(shape: Outline, section: Section | None) -> str | None:
    """A section's visible text (trimmed lines joined by newlines); None when a placeholder."""
    lines = [line.strip() for line in _own_lines(shape, section)]
    lines = [line for line in lines if line and not markdown.is_rule(line)]
    if not lines or all(markdown.is_placeholder_value(line) for line in lines):
        return None
    return "\n".join(line for line in lines if not markdown.is_placeholder_value(line))


def _first_line(shape: Outline, section: Section | None) -> str | None:
    text = _text(shape, section)
    return text.splitlines()[0] if text else None


def _items(shape: Outline, section: Section | None) -> tuple[str, ...]:
    """List items of a section (bullets or numbers); plain lines when it has no list."""
    lines = [line for line in _own_lines(shape, section) if line.strip() and not markdown.is_rule(line)]
    items = []
    for line in lines:
        match = _ITEM.match(line)
        if match:
            items.append(match.group("text"))
    if not items:
        items = [line.strip() for line in lines]
    return tuple(item for item in items if not markdown.is_placeholder_value(item))


def _context_blockers(shape: Outline, section: Section) -> tuple[str, ...]:
    for line in _own_lines(shape, section):
        match = _ITEM.match(line)
        if match and match.group("text").casefold().startswith("blockers:"):
            value = match.group("text").split(":", 1)[1].strip()
            return () if markdown.is_placeholder_value(value) else (value,)
    return ()


def _progress(shape: Outline, section: Section | None) -> Progress:
    total = completed = 0
    for line in _own_lines(shape, section):
        match = _CHECKBOX.match(line)
        if not match or markdown.is_placeholder_value(match.group("text")):
            continue
        total += 1
        completed += match.group("mark") in "xX"
    return Progress(total, completed)


def _bold_line(shape: Outline, first_key: str) -> tuple[int, dict[str, str]] | None:
    """The first visible line whose first `**Key:**` field is `first_key`, with its fields."""
    for index in range(shape.first, len(shape.lines)):
        if not shape.visible(index):
            continue
        fields = bold_fields(shape.content(index))
        if fields and next(iter(fields)) == first_key:
            return index, fields
    return None


def bold_fields(content: str) -> dict[str, str]:
    """`**Key:** value | **Key:** value` fields of a line, keys lower-cased."""
    body = content.lstrip()
    if body.startswith(">"):
        body = body[1:].lstrip()
    if not body.startswith("**"):
        return {}
    return {m.group("key").strip().casefold(): m.group("value") for m in _BOLD_FIELD.finditer(body)}


def _value(raw: str | None) -> str | None:
    if raw is None or markdown.is_placeholder_value(raw):
        return None
    return raw.strip()


def _meta_text(meta: Mapping[str, Any], name: str, path: Path | str | None) -> str | None:
    key = document.find_key(meta, name)
    if key is None or meta[key] is None:
        return None
    value = meta[key]
    if isinstance(value, (dict, list)):
        raise InvalidDocument(
            f"frontmatter key '{key}' must be a single value, not a {type(value).__name__}",
            code="SCHEMA_ERROR",
            path=path,
            details={"key": key},
        )
    text = str(value).strip()
    return None if markdown.is_placeholder_value(text) else text


def _meta_list(meta: Mapping[str, Any], name: str, path: Path | str | None) -> tuple[str, ...]:
    key = document.find_key(meta, name) or document.find_key(meta, name.replace("_", " "))
    if key is None or meta[key] is None:
        return ()
    value = meta[key]
    if isinstance(value, dict):
        raise InvalidDocument(f"frontmatter key '{key}' must be a list or a single value", code="SCHEMA_ERROR", path=path, details={"key": key})
    items = value if isinstance(value, list) else [value]
    return tuple(str(item).strip() for item in items if item is not None and not markdown.is_placeholder_value(str(item)))


# --------------------------------------------------------------------------- edits


def _set_bold_values(content: str, values: Mapping[str, str]) -> str:
    wanted = {key.casefold(): value for key, value in values.items()}

    def replace(match: re.Match[str]) -> str:
        key = match.group("key").strip().casefold()
        if key not in wanted:
            return match.group(0)
        space = match.group("space") or " "
        trail = match.group("trail")
        if not trail and match.end() < len(match.string):
            trail = " "  # keep `value |` apart from the next field
        return f"**{match.group('key')}:**{space}{wanted[key]}{trail}"

    return _BOLD_FIELD.sub(replace, content)


def _edit_bold_lines(text: str, changes: Mapping[str, Mapping[str, str]]) -> str:
    """Set fields on the first line led by each key of `changes`; other lines stay as they are."""
    doc = document.parse(text)
    shape = markdown.outline(text, doc.body_line)
    lines = list(shape.lines)
    for first_key, values in changes.items():
        found = _bold_line(shape, first_key)
        if found is None:
            continue
        index = found[0]
        content = shape.content(index)
        lines[index] = _set_bold_values(content, values) + markdown.ending_of(lines[index])
    return "".join(lines)


def activate_task(text: str, title: str, today: date) -> str:
    """CURRENT.md text with the Active Task line naming `title` (Status WIP, Started today) and
    the Last Updated line updated. Only those two lines change, and only where they exist."""
    stamp = today.isoformat()
    return _edit_bold_lines(
        text,
        {
            "task": {"task": title, "status": ACTIVE_STATUS, "started": stamp},
            "last updated": {"last updated": stamp, "active task": title},
        },
    )


def clear_task(text: str, title: str, today: date) -> str:
    """CURRENT.md text with the Active Task line reset, if it names `title` (any case).

    As the template says, finishing the active task clears it; a different active task is
    left alone.
    """
    doc = document.parse(text)
    shape = markdown.outline(text, doc.body_line)
    found = _bold_line(shape, "task")
    if found is None or (_value(found[1].get("task")) or "").casefold() != title.strip().casefold():
        return text
    return _edit_bold_lines(
        text,
        {
            "task": {"task": "_none_", "status": "--", "started": "--"},
            "last updated": {"last updated": today.isoformat(), "active task": "_none_"},
        },
    )


def current_to_dict(current: Current) -> dict[str, Any]:
    """The JSON shape of CURRENT.md's state."""
    return {
        "dialect": current.dialect,
        "status": current.status,
        "state": current.state,
        "task": current.task,
        "focus": current.focus,
        "next_steps": list(current.next_steps),
        "blockers": list(current.blockers),
        "progress": {"total": current.progress.total, "completed": current.progress.completed},
        "started": current.started,
        "last_updated": current.last_updated,
        "meta": current.meta,
    }

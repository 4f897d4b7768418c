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
from datetime import date
from pathlib import Path
from typing import Any, NamedTuple

from cstack import markdown
from cstack.markdown import Outline, Section
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument

FORMAT_MARKER = "moss_format"  # == formats.MARKER (a test checks)
_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+(?P<text>.*?)[ \t]*$")
_BOLD_FIELD = re.compile(r"\*\*(?P<key>[^*|]+?):\*\*(?P<space>[ \t]*)(?P<value>[^|]*?)(?P<trail>[ \t]*)(?=\||$)")
# Patterns as text, compiled by `re` (and kept in its cache) where first used: few commands use them,
# and compiling every pattern at import cost each process's start-up about 0.1 ms a pattern (issue 29).
_CHECKBOX = r"^[ \t]*[-*+][ \t]+\[(?P<mark>[ xX>!~])\][ \t]+(?P<text>.*?)[ \t]*$"
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
    "ready": "idle",
    "paused": "idle",
}
ACTIVE_STATUS = "WIP"


class Progress(NamedTuple):
    """Checkbox counts from `## Progress` (or the template's `### Subtasks`)."""

    total: int = 0
    completed: int = 0


class Current(NamedTuple):
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
    meta: dict[str, Any]
    text: str = ""


def parse_current(text: str, path: Path | str | None = None) -> Current:
    """Read CURRENT.md text in any dialect (empty text is the empty state).

    Raises InvalidDocument for malformed frontmatter, or SCHEMA_ERROR when a frontmatter key
    read here has a type that cannot be used (a mapping where a string is expected).
    """
    doc = document.parse(text, path)
    if FORMAT_MARKER in text:  # only a marked file can be of another format: the check loads for it alone
        from moss_files.foundation import formats

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
    checkbox = re.compile(_CHECKBOX).match
    for line in _own_lines(shape, section):
        match = checkbox(line)
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


# What each place says for each transition. Places: the template's `**Task:** … | **Status:**`
# line (and its `**Last Updated:**` banner), v1's `## Current Task`, the Protectorate sleeve's
# `## Task` and `## Status`, and the frontmatter keys `task`, `status`, `started`.
_TEMPLATE_STATUS = {"start": ACTIVE_STATUS, "block": "BLOCKED", "ready": "READY"}
_STATE_WORDS = {"start": "working", "block": "blocked", "ready": "idle", "done": "done", "close": "idle"}
FOLLOWED = ("start", "done", "close", "block", "ready")
V1_NO_TASK = "(No active task)"  # cortical-stack's V1 template
PROTECTORATE_NO_TASK = "(none)"


class Followed(NamedTuple):
    """CURRENT.md after a PLAN.md transition: its text, the places that changed (template,
    v1, protectorate, frontmatter) and, when nothing could change, why (for a person)."""

    text: str
    places: tuple[str, ...]
    note: str | None = None

    @property
    def updated(self) -> bool:
        return bool(self.places)


def follow_transition(text: str, action: str, title: str, today: date, path: Path | str | None = None) -> Followed:
    """CURRENT.md text after `action` (start, done, close, block, ready) on the task `title`.

    `start` names the task in every place the file has; the others change only the places
    that name it (any case). Only those lines change (and the `**Last Updated:**` banner);
    a place holding a placeholder gets the dialect's placeholder back when the task is
    cleared, with the file's own dash (`--`, or context-by-md's `—`).

    Raises InvalidDocument CURRENT_UNEDITABLE (nothing changed) when a `## Current Task`,
    `## Task` or `## Status` section holds several lines of text, which a one-line edit would
    have to throw away.
    """
    if action not in FOLLOWED:
        return Followed(text, ())
    doc = document.parse(text, path)
    shape = markdown.outline(text, doc.body_line)
    top = {s.title.casefold(): s for s in reversed(shape.sections) if s.level == 2}
    wanted = title.strip().casefold()
    places: list[str] = []
    edits: list[tuple[int, int, str | None]] = []  # (line index, lines replaced, new content): applied bottom-up

    def names(value: str | None) -> bool:
        return value is not None and value.strip().casefold() == wanted

    active = _bold_line(shape, "task")
    if active is not None and (action == "start" or names(_value(active[1].get("task")))):
        values = _template_values(action, title, today, _dash(shape))
        edits.append((active[0], 1, _set_bold_values(shape.content(active[0]), values)))
        places.append("template")
    current_task = top.get("current task")
    if current_task is not None:
        index, count, value = _section_text(shape, current_task, path, "v1")
        if action == "start" and not names(value):
            edits.append(_section_edit(shape, current_task, index, count, title))
            places.append("v1")
        elif action in ("done", "close") and names(value):
            edits.append(_section_edit(shape, current_task, index, count, V1_NO_TASK))
            places.append("v1")
    task_section = top.get("task")
    status_section = top.get("status")
    if task_section is not None or status_section is not None:
        index, count, value = _section_text(shape, task_section, path, "protectorate") if task_section else (0, 0, None)
        named = action == "start" or names(value)
        if named and task_section is not None and action in ("start", "close"):
            new_task = title if action == "start" else PROTECTORATE_NO_TASK
            if new_task != (value or ""):
                edits.append(_section_edit(shape, task_section, index, count, new_task))
        if named and status_section is not None:
            s_index, s_count, s_value = _section_text(shape, status_section, path, "protectorate")
            if s_value != _STATE_WORDS[action]:
                edits.append(_section_edit(shape, status_section, s_index, s_count, _STATE_WORDS[action]))
        if named and (task_section is not None or status_section is not None):
            places.append("protectorate")
    banner = _bold_line(shape, "last updated")
    if banner is not None and places:
        values = {"last updated": today.isoformat()}
        if action == "start":
            values["active task"] = title
        elif action in ("done", "close") and names(_value(banner[1].get("active task"))):
            values["active task"] = "_none_"
        edits.append((banner[0], 1, _set_bold_values(shape.content(banner[0]), values)))

    lines = list(shape.lines)
    for index, count, content in sorted(edits, key=lambda edit: edit[0], reverse=True):
        if content is None:
            continue
        if count == 0:  # an empty section: the value goes right under its heading
            lines.insert(index, content + shape.newline)
        else:
            lines[index] = content + markdown.ending_of(lines[index])
    new_text = "".join(lines)
    meta_changes = _frontmatter_changes(doc.meta, action, title, today, named_anywhere=bool(places) or action == "start")
    if meta_changes:
        new_text = document.edit_frontmatter(new_text, meta_changes, path)
        places.append("frontmatter")
    note = None
    if not places and action == "start":
        note = "CURRENT.md has no place for the active task (no `**Task:**` line, `## Current Task` or `## Task` section, or `task:` key); it was left as it is"
    elif action in ("block", "ready") and current_task is not None and names(_section_text(shape, current_task, path, "v1")[2]) and len(places) == 0:
        note = "CURRENT.md is in the v1 dialect, which has no status: its `## Current Task` still names the task"
    return Followed(new_text, tuple(dict.fromkeys(places)), note)


def _template_values(action: str, title: str, today: date, dash: str) -> dict[str, str]:
    if action == "start":
        return {"task": title, "status": ACTIVE_STATUS, "started": today.isoformat()}
    if action in ("done", "close"):
        return {"task": "_none_", "status": dash, "started": dash}
    return {"status": _TEMPLATE_STATUS[action]}


def _dash(shape: Outline) -> str:
    """The file's stand-in for an empty value: `--` (cortical-stack), or `—` where the file
    already uses it or comes from context-by-md (whose commands are `/context-task`)."""
    for index in range(shape.first, len(shape.lines)):
        content = shape.content(index)
        if shape.visible(index) and any(value.strip() == "—" for value in bold_fields(content).values()):
            return "—"
    return "—" if any("/context-task" in line for line in shape.lines) else "--"


def _section_text(shape: Outline, section: Section, path: Path | str | None, dialect: str) -> tuple[int, int, str | None]:
    """(index, count, value): the one line of text under a section's heading (count 1), or
    where it would go (count 0); value None for a placeholder or nothing.

    Raises InvalidDocument CURRENT_UNEDITABLE for a section with several lines of text."""
    found = [
        i
        for i in range(section.start + 1, section.own_end)
        if shape.visible(i) and not markdown.is_blank(shape.content(i)) and not markdown.is_rule(shape.content(i))
    ]
    if not found:
        return section.start + 1, 0, None
    if len(found) > 1:
        raise InvalidDocument(
            f"CURRENT.md's `## {section.title}` holds {len(found)} lines of text; a transition replaces one line, so it leaves the file as it is",
            code="CURRENT_UNEDITABLE",
            path=path,
            line=found[0] + 1,
            details={"dialect": dialect, "section": section.title, "lines": [i + 1 for i in found]},
            hint=f"keep `## {section.title}` to one line (move the rest to `## Notes`), then run the command again",
        )
    value = shape.content(found[0]).strip()
    return found[0], 1, None if markdown.is_placeholder_value(value) else value


def _section_edit(shape: Outline, section: Section, index: int, count: int, value: str) -> tuple[int, int, str]:
    if count == 0:
        return index, 0, value
    content = shape.content(index)
    indent = content[: len(content) - len(content.lstrip())]
    return index, 1, indent + value


def _frontmatter_changes(meta: Mapping[str, Any], action: str, title: str, today: date, *, named_anywhere: bool) -> dict[str, Any]:
    """Frontmatter keys the person wrote that say the same as the body: never a key added."""
    changes: dict[str, Any] = {}
    task_key = document.find_key(meta, "task")
    named = named_anywhere or (task_key is not None and str(meta[task_key] or "").strip().casefold() == title.strip().casefold())
    if not named:
        return changes
    if task_key is not None:
        if action == "start":
            changes[task_key] = title
        elif action in ("done", "close") and str(meta[task_key] or "").strip().casefold() == title.strip().casefold():
            changes[task_key] = None
    status_key = document.find_key(meta, "status")
    if status_key is not None:
        changes[status_key] = _STATE_WORDS[action]
    started_key = document.find_key(meta, "started")
    if started_key is not None:
        if action == "start":
            changes[started_key] = today.isoformat()
        elif action in ("done", "close"):
            changes[started_key] = None
    return {key: value for key, value in changes.items() if meta.get(key) != value}


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

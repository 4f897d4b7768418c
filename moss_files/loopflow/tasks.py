"""LoopFlow's tasks as PLAN.md tasks: the mapping of fields and statuses, the detail lines
that hold a task's description, acceptance criteria and notes, and line edits. Core layer:
pure functions over text and values (PLAN.md is parsed by cstack's public `parse_plan`, which
the shell calls; a parsed task comes in as any object with the attributes of `PlanTask`).

A LoopFlow task is one task line of PLAN.md with indented detail lines under it:

    - [ ] P1: [IMPL] Web UI dashboard (id: LF-108, depends: LF-100) | modified: 2026-01-22 | test: src/web.test.ts
      Local web dashboard using Hono.
      Acceptance: GET /api/tasks lists tasks with filters
      Notes: React + Vite.

- id: the task's `id:` (LoopFlow's caller-supplied LF-NNN); title: the line's title;
  depends_on: `depends:`; test_file: the `| test:` segment.
- status: TODO `[ ]`, IN_PROGRESS `[>]`, DONE `[x]`, BLOCKED `[!]`, CANCELLED `[~]` (cstack's
  pending, in_progress, done, blocked, closed), changed through cstack's transitions so the
  line moves between sections as cstack moves it.
- priority: high P1 (P0 reads as high too), medium P2 (and no priority), low P3.
- description: the detail lines without a label, one paragraph a line; acceptance criteria:
  `Acceptance:` lines, one criterion each; notes: `Notes:` lines, one paragraph each. A
  description paragraph that would read as something else is written after `Description:`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from moss_files.foundation.errors import InvalidRequest

STATUSES = ("TODO", "IN_PROGRESS", "DONE", "BLOCKED", "CANCELLED")
PRIORITIES = ("high", "medium", "low")
TO_PLAN = {"TODO": "pending", "IN_PROGRESS": "in_progress", "DONE": "done", "BLOCKED": "blocked", "CANCELLED": "closed"}
FROM_PLAN = {plan: loop for loop, plan in TO_PLAN.items()}
_STATUS_WORDS = {
    **{name.lower(): name for name in STATUSES},
    **{plan: loop for loop, plan in TO_PLAN.items()},
    "open": "TODO",
    "in progress": "IN_PROGRESS",
    "in-progress": "IN_PROGRESS",
    "started": "IN_PROGRESS",
    "complete": "DONE",
    "completed": "DONE",
    "canceled": "CANCELLED",
    "dropped": "CANCELLED",
}
PRIORITY_MARK = {"high": "P1", "medium": "P2", "low": "P3"}
TEST_KEY = "test"
MODIFIED_KEY = "modified"
DETAIL_INDENT = "  "
LABELS = {"acceptance": "acceptance", "accept": "acceptance", "ac": "acceptance", "notes": "notes", "note": "notes", "description": "description"}
_LABELED = re.compile(r"^(?P<label>[A-Za-z]+)[ \t]*:[ \t]*(?P<value>.*)$")
# A description paragraph starting like this would be read back as a label, a list item, a
# heading or a task: it is written after "Description: ".
_AMBIGUOUS = re.compile(r"^(?:[-*+>#]|\d+[.)]|\[|(?:acceptance|accept|ac|notes?|description)[ \t]*:)", re.IGNORECASE)
_TASK_PREFIX = re.compile(r"^(?P<prefix>[ \t]*[-*+][ \t]+\[.\][ \t]+)(?P<rest>.*?)(?P<end>[ \t]*)$")
_ID = re.compile(r"^[A-Za-z0-9][\w.-]*$")


class PlanTask(Protocol):
    """What this module reads of a task cstack parsed (`cstack.Task`)."""

    line: int
    status: str
    priority: str | None
    title: str
    labels: tuple[str, ...]
    id: str | None
    depends: tuple[str, ...]
    parent: str | None
    section: tuple[str, ...]
    text: str

    def field(self, key: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Details:
    """What a task's detail lines hold."""

    description: str | None = None
    acceptance: tuple[str, ...] = ()
    notes: str | None = None


# --------------------------------------------------------------------------- values


def check_status(value: str) -> str:
    """A LoopFlow status (TODO, IN_PROGRESS, DONE, BLOCKED, CANCELLED) from what a caller
    wrote (any case; cstack's names work too). Raises InvalidRequest SCHEMA_ERROR."""
    word = " ".join(value.strip().lower().split())
    found = _STATUS_WORDS.get(word) or _STATUS_WORDS.get(word.replace(" ", "_").replace("-", "_"))
    if found is None:
        raise InvalidRequest(f"status {value!r} is not one of {', '.join(STATUSES)}", code="SCHEMA_ERROR", details={"field": "status"})
    return found


def check_priority(value: str) -> str:
    """high, medium or low (P0/P1, P2, P3 work too). Raises InvalidRequest SCHEMA_ERROR."""
    word = value.strip().lower()
    if word in PRIORITIES:
        return word
    if re.fullmatch(r"p\d", word):
        return priority_of(word.upper())
    raise InvalidRequest(f"priority {value!r} is not one of {', '.join(PRIORITIES)}", code="SCHEMA_ERROR", details={"field": "priority"})


def priority_of(mark: str | None) -> str:
    """A PLAN.md priority mark as LoopFlow's word: P0 and P1 high, P2 or none medium, P3 low."""
    if mark is None:
        return "medium"
    level = int(mark[1:]) if mark[1:].isdigit() else 2
    return "high" if level <= 1 else "medium" if level == 2 else "low"


def check_id(value: str | None) -> str:
    """A task id as PLAN.md can hold it. Raises InvalidRequest."""
    text = (value or "").strip()
    if not text or not _ID.match(text):
        raise InvalidRequest(f"task id {value!r} must be letters, digits, '.', '_' or '-' (as LF-104)", details={"field": "id"})
    return text


def check_title(value: str | None) -> str:
    """A title that fits on a task line. Raises InvalidRequest."""
    text = " ".join((value or "").split())
    if not text:
        raise InvalidRequest("a task needs a title", details={"field": "title"})
    if "|" in text:
        raise InvalidRequest("a title cannot hold '|' (PLAN.md separates a task's fields with it)", details={"field": "title"})
    return text


def check_lines(values: Sequence[str] | None, what: str) -> tuple[str, ...] | None:
    """Acceptance criteria: each on one line. Raises InvalidRequest."""
    if values is None:
        return None
    if isinstance(values, str):
        raise InvalidRequest(f"{what} must be a list of strings", details={"field": what})
    out = tuple(" ".join(item.split()) for item in values if item.strip())
    return out


def transitions(current: str, wanted: str) -> list[str]:
    """cstack's transition actions that take a task from LoopFlow status `current` to
    `wanted` (an empty list when they are the same)."""
    if current == wanted:
        return []
    finished = current in ("DONE", "CANCELLED")
    steps = ["reopen"] if finished else []
    here = "TODO" if finished else current
    target = {"TODO": "ready", "IN_PROGRESS": "start", "DONE": "done", "BLOCKED": "block", "CANCELLED": "close"}[wanted]
    if here == wanted:
        return steps
    if wanted == "TODO":
        return [*steps, "ready"] if here != "TODO" else steps
    return [*steps, target]


# --------------------------------------------------------------------------- detail lines


def _indent_width(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def detail_range(lines: Sequence[str], task_line: int, task_lines: set[int]) -> tuple[int, int]:
    """The 0-based range [start, end) of the detail lines under the task on 1-based line
    `task_line`: the lines after it indented deeper, up to a blank line or another task."""
    base = _indent_width(lines[task_line - 1])
    end = task_line
    while end < len(lines):
        line = lines[end].rstrip("\r\n")
        if not line.strip() or _indent_width(line) <= base or (end + 1) in task_lines:
            break
        end += 1
    return task_line, end


def parse_details(lines: Sequence[str]) -> Details:
    """A task's description, acceptance criteria and notes from its detail lines."""
    description: list[str] = []
    acceptance: list[str] = []
    notes: list[str] = []
    for raw in lines:
        text = raw.strip()
        labeled = _LABELED.match(text)
        kind = LABELS.get(labeled.group("label").lower()) if labeled else None
        if kind is None:
            description.append(text)
        elif labeled is not None and labeled.group("value").strip():
            {"acceptance": acceptance, "notes": notes, "description": description}[kind].append(labeled.group("value").strip())
    return Details("\n\n".join(description) or None, tuple(acceptance), "\n\n".join(notes) or None)


def _paragraphs(text: str | None) -> list[str]:
    return [" ".join(part.split()) for part in re.split(r"\n[ \t]*\n", text or "") if part.strip()]


def render_details(details: Details, indent: str = DETAIL_INDENT) -> list[str]:
    """The detail lines (without line endings) for a task's description, criteria and notes."""
    out: list[str] = []
    for paragraph in _paragraphs(details.description):
        out.append(f"{indent}{'Description: ' if _AMBIGUOUS.match(paragraph) else ''}{paragraph}")
    out.extend(f"{indent}Acceptance: {item}" for item in details.acceptance)
    out.extend(f"{indent}Notes: {paragraph}" for paragraph in _paragraphs(details.notes))
    return out


# --------------------------------------------------------------------------- the task line


def _split(line: str) -> tuple[str, str, list[str], str]:
    """A task line as (prefix up to the marker, head, segments, trailing space)."""
    match = _TASK_PREFIX.match(line)
    if match is None:
        raise InvalidRequest("not a task line", details={"line": line})
    head, _, tail = match.group("rest").partition("|")
    segments = [part.strip() for part in tail.split("|")] if tail or match.group("rest").endswith("|") else []
    return match.group("prefix"), head.strip(), segments, match.group("end")


def _segment_key(segment: str) -> str | None:
    labeled = re.match(r"^([A-Za-z][\w-]*)[ \t]*:", segment)
    return labeled.group(1).casefold() if labeled else None


def edit_line(
    task: PlanTask,
    *,
    title: str | None = None,
    priority: str | None = None,
    depends: Sequence[str] | None = None,
    test_file: str | None = None,
    modified: str | None = None,
) -> str:
    """The task's line with the given fields changed (None leaves a field alone; a test_file
    of '' removes it). The head (priority, title, labels, id group) is written anew when one of
    its parts changes; other segments keep their text."""
    prefix, head, segments, end = _split(task.text)
    keys = [_segment_key(segment) for segment in segments]
    if depends is not None and "depends" in keys:
        at = keys.index("depends")
        segments[at] = f"depends: {', '.join(depends)}" if depends else ""
    if title is not None or priority is not None or (depends is not None and "depends" not in keys):
        mark = PRIORITY_MARK[priority] if priority is not None else task.priority
        group = []
        if task.id and "id" not in keys:
            group.append(f"id: {task.id}")
        wanted = tuple(depends) if depends is not None else task.depends
        if wanted and "depends" not in keys:
            group.append(f"depends: {', '.join(wanted)}")
        if task.parent and "parent" not in keys:
            group.append(f"parent: {task.parent}")
        head = (f"{mark}: " if mark else "") + (title if title is not None else task.title)
        head += "".join(f" #{label}" for label in task.labels)
        head += f" ({', '.join(group)})" if group else ""
    for key, value in ((TEST_KEY, test_file), (MODIFIED_KEY, modified)):
        if value is None:
            continue
        keys = [_segment_key(segment) for segment in segments]
        if key in keys:
            segments[keys.index(key)] = f"{key}: {value}" if value else ""
        elif value:
            segments.append(f"{key}: {value}")
    kept = [segment for segment in segments if segment]
    return prefix + head + "".join(f" | {segment}" for segment in kept) + end


# --------------------------------------------------------------------------- JSON shapes


def task_to_dict(task: PlanTask, details: Details, *, path: str) -> dict[str, Any]:
    """The full record of a task (LoopFlow's task shape, plus where it lives)."""
    return {
        "id": task.id,
        "title": task.title,
        "description": details.description,
        "status": FROM_PLAN.get(task.status, "TODO"),
        "priority": priority_of(task.priority),
        "depends_on": list(task.depends),
        "acceptance_criteria": list(details.acceptance),
        "notes": details.notes,
        "test_file": task.field(TEST_KEY) or task.field("test_file"),
        "labels": list(task.labels),
        "section": "/".join(task.section),
        "modified": task.field(MODIFIED_KEY),
        "path": path,
        "line": task.line,
    }


def task_brief(task: PlanTask) -> dict[str, Any]:
    """The list shape: `{id, title, status, priority, depends_on}`."""
    return {
        "id": task.id,
        "title": task.title,
        "status": FROM_PLAN.get(task.status, "TODO"),
        "priority": priority_of(task.priority),
        "depends_on": list(task.depends),
    }

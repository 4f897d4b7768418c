"""PLAN.md: task lines, sections, addressing, transitions and dependencies. Core layer: pure
functions over text (no I/O; `today` is passed in). Imports the stdlib and moss_files' core.

A task line is `- [m] P1: Title #label #label (id: a, depends: b, c, parent: d) | key: value |
free text`, where everything after the marker except the title is optional. Markers:
`[ ]` pending, `[>]` in_progress, `[x]` done (`[X]` is read too), `[!]` blocked, `[~]` closed
(dropped without finishing). The `(id: …)` group belongs before the first `|`; `id:`,
`depends:` and `parent:` are also read from `| key: value` segments. Lines under `## Notes`
and `## Legend`, inside HTML comments and inside code fences are text, never tasks.

Counting (`plan_stats`, the `{open, ready, in_progress, blocked, closed, total}` shape):
- total: every task line in the file, the Backlog included;
- closed: tasks marked `[x]` or `[~]`; open: every other task (total = open + closed);
- in_progress: tasks marked `[>]`;
- a dependency is met when every task carrying that `id:` is finished (`[x]` or `[~]`: a
  dropped prerequisite no longer holds anyone back); an id no task carries is unmet;
- ready: pending tasks outside the Backlog, Completed and Closed sections whose dependencies
  are all met;
- blocked: tasks marked `[!]` anywhere, plus pending tasks outside the Backlog whose
  dependencies are not all met (what `cstack blocked` lists, each with its reason).

Transitions change the task's own line (its marker and its `modified:`, `blocked:`,
`closed:` and `reason:` segments, each updated in place or appended as ` | key: value`) and
may move that line (with its indented detail lines) to another section; every other byte of
the file stays as it was. Moves: done → Completed, close → Closed, reopen → Tasks, and start
of a Backlog item → Tasks. A moved line goes after the last task of its new section; in a
section without tasks it takes the place of a placeholder line such as `_None._` (the
templates' stand-in for "empty"); failing that it follows the section's last line of text.
A missing section is created at the end of the file. Placeholders are never written back.

Cost: `transition` and `add_task` plan on a condensed copy of the text in which each run of
finished tasks the edit cannot touch is one stand-in line (see "condensing" below), so a plan
with thousands of closed tasks is not parsed whole for a one-line change; the answer is the
full parse's, byte for byte, and the full parse decides whenever that cannot be shown.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from datetime import date
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any, NamedTuple

from cstack import markdown
from cstack.markdown import Outline
from moss_files.foundation import document
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound

MARKER_STATUS = {" ": "pending", ">": "in_progress", "x": "done", "X": "done", "!": "blocked", "~": "closed"}
STATUS_MARKER = {"pending": " ", "in_progress": ">", "done": "x", "blocked": "!", "closed": "~"}
STATUSES = ("pending", "in_progress", "done", "blocked", "closed")
FINISHED = frozenset({"done", "closed"})
OPEN = frozenset({"pending", "in_progress", "blocked"})
STATUS_ALIASES = {
    "open": OPEN,
    "todo": {"pending"},
    "wip": {"in_progress"},
    "active": {"in_progress"},
    "in-progress": {"in_progress"},
    "started": {"in_progress"},
    "completed": {"done"},
    "finished": FINISHED,
    "dropped": {"closed"},
}
# Section kinds, by the heading's name; other `##` sections are "other" and count as work.
_KIND_NAMES = {
    "tasks": "tasks",
    "task": "tasks",
    "todo": "tasks",
    "active": "tasks",
    "in progress": "tasks",
    "notes": "notes",
    "legend": "legend",
    "completed": "completed",
    "done": "completed",
    "closed": "closed",
    "backlog": "backlog",
}
NOT_TASKS = frozenset({"notes", "legend"})
SECTIONS = {
    "tasks": ("Tasks",),
    "completed": ("Completed",),
    "closed": ("Closed",),
    "backlog": ("Backlog",),
    "backlog-bugs": ("Backlog", "Bugs"),
    "backlog-debt": ("Backlog", "Debt"),
    "backlog-ideas": ("Backlog", "Ideas"),
}

FORMAT_MARKER = "moss_format"  # == formats.MARKER (a test checks)
_TASK_LINE = re.compile(r"^(?P<indent>[ \t]*)[-*+][ \t]+\[(?P<marker>[ xX>!~])\][ \t]+(?P<rest>\S.*?)[ \t]*$")
_CHECKBOX_LIKE = re.compile(r"^[ \t]*[-*+][ \t]+\[(?P<marker>[^\]\s]{0,12}|[ \t]{2,})\](?=[ \t]|$)")
_BARE_MARKER = re.compile(r"^[ \t]*\[(?P<marker>[A-Z]{2,10})\][ \t]+\S")  # context-by-md's `[BUG] P2: …` backlog lines
# context-by-md (the project cortical-stack grew from) marks tasks with words; cstack reads
# its own five markers only, and says so for each such line.
CONTEXT_BY_MD_MARKERS = {"WIP": "[>]", "READY": "[ ]", "BLOCKED": "[!]", "PAUSED": "[ ] or [!]", "BUG": "- [!]", "DEBT": "- [ ]", "IDEA": "- [ ]"}
_PRIORITY = re.compile(r"^P(?P<level>\d+)[ \t]*:[ \t]*")
# `(id: a, depends: b, parent: c)`, also with a bare id first: `(task-002, parent: task-001)`.
_GROUP = re.compile(r"[ \t]*\((?P<inner>[ \t]*(?:[A-Za-z0-9][\w.-]*[ \t]*,[ \t]*)?(?:id|depends|parent)[ \t]*:[^()]*)\)", re.IGNORECASE)
_GROUP_KEY = re.compile(r"^[ \t]*(?P<key>id|depends|parent)[ \t]*:[ \t]*(?P<value>.*?)[ \t]*$", re.IGNORECASE)
_LABEL = re.compile(r"(?<!\S)#(?P<name>[A-Za-z][\w./-]*)")
_PIPE = re.compile(r"\|")
_KEYED = re.compile(r"^(?P<key>[A-Za-z][\w-]*)[ \t]*:(?:[ \t]+(?P<value>.*))?$")
# Patterns as text, compiled by `re` (and kept in its cache) where first used: few commands use them,
# and compiling every pattern at import cost each process's start-up about 0.1 ms a pattern (issue 29).
_ID = r"^[A-Za-z0-9][\w.-]*$"
_DATE = r"^\d{4}-\d{2}-\d{2}"


# The records of this module are NamedTuples: immutable values compared field by field, as the
# frozen dataclasses they were, but a NamedTuple class is made in a quarter of a frozen
# dataclass's time or less, which every task command paid at import (eight of them, issue 29).


class Segment(NamedTuple):
    """One `| …` part of a task line: `key: value`, or free text (key None)."""

    text: str
    key: str | None
    value: str
    start: int  # span of `text` in the line
    end: int
    pipe: int  # position of the `|` before it


class Task(NamedTuple):
    """One task line of PLAN.md, as read."""

    number: int  # 1-based position among all tasks of the file: the listing's number
    line: int  # 1-based line in the file
    status: str
    marker: str
    priority: str | None
    title: str
    labels: tuple[str, ...]
    id: str | None
    depends: tuple[str, ...]
    parent: str | None
    segments: tuple[Segment, ...]
    section: tuple[str, ...]  # heading path, e.g. ("Backlog", "Bugs"); () before any `##`
    kind: str  # tasks | completed | closed | backlog | other
    text: str  # the line without its ending
    marker_at: int
    nested_in: int | None = None  # the number of the task this one is indented under

    @property
    def nested(self) -> bool:
        return self.nested_in is not None

    def field(self, key: str) -> str | None:
        """The value of the first `| key: value` segment (key compared without case)."""
        wanted = key.casefold()
        for segment in self.segments:
            if segment.key == wanted:
                return segment.value
        return None

    @property
    def modified(self) -> str | None:
        return self.field("modified")

    @property
    def closed(self) -> str | None:
        return self.field("closed")

    @property
    def reason(self) -> str | None:
        return self.field("reason")

    @property
    def blocked(self) -> str | None:
        return self.field("blocked")

    @property
    def is_open(self) -> bool:
        return self.status in OPEN


class Plan(NamedTuple):
    """A parsed PLAN.md: its outline (lines and sections), tasks, frontmatter and warnings."""

    outline: Outline
    tasks: tuple[Task, ...]
    meta: dict[str, Any]
    warnings: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "".join(self.outline.lines)


class Change(NamedTuple):
    """The result of a planning function: the file's new text and the task as it now reads."""

    text: str
    task: Task
    before: Task | None  # None for a new task
    action: str
    moved_from: tuple[str, ...] | None = None


# --------------------------------------------------------------------------- reading


def section_kind(path: Sequence[str]) -> str:
    """The kind of a section path: tasks, notes, legend, completed, closed, backlog or other."""
    if not path:
        return "tasks"  # task lines before any `##` heading are plain work items
    # Compare words only, so "## ✅ Completed" and "## Tasks (this week)" are recognised too.
    name = " ".join(re.sub(r"[^\w ]+", " ", path[0]).casefold().split())
    for key, kind in _KIND_NAMES.items():
        if name == key or name.startswith(key + " "):
            return kind
    return "other"


def parse_task_line(content: str) -> dict[str, Any] | None:
    """The fields of one task line (without its ending), or None when it is not a task line."""
    match = _TASK_LINE.match(content)
    if not match:
        return None
    rest_at = match.start("rest")
    rest = match.group("rest")
    pipes = [rest_at + found.start() for found in _PIPE.finditer(rest)]
    head_end = pipes[0] if pipes else rest_at + len(rest)
    head = content[rest_at:head_end]
    segments: list[Segment] = []
    bounds = [*pipes, rest_at + len(rest)]
    for pipe, stop in pairwise(bounds):
        raw = content[pipe + 1 : stop]
        text = raw.strip()
        start = pipe + 1 + (len(raw) - len(raw.lstrip()))
        keyed = _KEYED.match(text)
        if keyed:
            key, value = keyed.group("key").casefold(), (keyed.group("value") or "").strip()
        else:
            key, value = None, text
        segments.append(Segment(text, key, value, start, start + len(text), pipe))

    priority = None
    body = head
    found = _PRIORITY.match(body)
    if found:
        priority = f"P{found.group('level')}"
        body = body[found.end() :]
    ident: str | None = None
    parent: str | None = None
    depends: list[str] = []
    group = _GROUP.search(body)
    if group:
        ident, parent, depends = _read_group(group.group("inner"))
        body = body[: group.start()] + body[group.end() :]
    labels = tuple(m.group("name") for m in _LABEL.finditer(body))
    title = " ".join(_LABEL.sub(" ", body).split())
    for segment in segments:
        if segment.key == "id" and ident is None and segment.value:
            ident = segment.value
        elif segment.key == "parent" and parent is None and segment.value:
            parent = segment.value
        elif segment.key == "depends":
            depends.extend(_split_ids(segment.value))
    marker = match.group("marker")
    return {
        "indent": match.group("indent"),
        "marker": marker,
        "marker_at": match.start("marker"),
        "status": MARKER_STATUS[marker],
        "priority": priority,
        "title": title,
        "labels": labels,
        "id": ident,
        "depends": tuple(dict.fromkeys(depends)),
        "parent": parent,
        "segments": tuple(segments),
    }


@functools.lru_cache(maxsize=32768)
def _task_line_once(content: str) -> dict[str, Any] | None:
    return parse_task_line(content) if not markdown.is_placeholder_line(content) else None


def _task_line_fields(content: str) -> dict[str, Any] | None:
    """The fields of a task line of the plan (None for text and for a template's placeholder
    line), remembered per line: the old and the new text of an edit share all lines but one or
    two, and its values are immutable (the dict itself is copied)."""
    fields = _task_line_once(content)
    return dict(fields) if fields is not None else None


def _read_group(inner: str) -> tuple[str | None, str | None, list[str]]:
    ident = parent = None
    depends: list[str] = []
    key = None
    for part in inner.split(","):
        keyed = _GROUP_KEY.match(part)
        if keyed:
            key, value = keyed.group("key").casefold(), keyed.group("value")
        else:
            value = part.strip()  # a further id of the list begun by the last key
        if not value:
            continue
        if key is None:  # a bare id before any key: `(task-002, parent: task-001)`
            ident = ident or value
            continue
        if key == "id":
            ident = value
        elif key == "parent":
            parent = value
        else:
            depends.append(value)
    return ident, parent, depends


def _split_ids(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"[,\s]+", text) if part.strip()]


def parse_plan(text: str, path: Path | str | None = None) -> Plan:
    """Parse PLAN.md text (a missing or empty file is an empty plan).

    Raises InvalidDocument when the optional frontmatter is malformed.
    """
    return _parse_plan_once(text, path)


# A transition plans on the file twice (a dry run before CURRENT.md is touched, then under the
# lock) and reads both the old and the new text each time: four parses of the same two texts,
# which with thousands of closed tasks cost most of the command. The result is immutable.
@functools.lru_cache(maxsize=4)
def _parse_plan_once(text: str, path: Path | str | None) -> Plan:
    doc = document.parse(text, path)
    if FORMAT_MARKER in text:  # only a marked file can be of another format: the check loads for it alone
        from moss_files.foundation import formats

        formats.check_text("plan", text, path)  # FORMAT_TOO_NEW: a newer toolkit wrote it
    shape = markdown.outline(text, doc.body_line)
    tasks: list[Task] = []
    warnings: list[str] = []
    open_items: list[tuple[int, Task]] = []  # (indent, task) of the list items a deeper one nests under
    current_section: tuple[str, ...] | None = None  # None: no line read yet
    kind = "tasks"
    for index in range(shape.first, len(shape.lines)):
        if not shape.visible(index):
            continue
        content = shape.content(index)
        section = shape.section_at(index)
        section_path = section.path if section else ()
        if section_path != current_section:
            current_section, open_items = section_path, []
            kind = section_kind(section_path)
        if kind in NOT_TASKS:
            continue
        fields = _task_line_fields(content)
        if fields is None:
            if not markdown.is_blank(content) and markdown.indent_width(content) == 0 and not _ITEM_START.match(content):
                open_items = []  # a paragraph ends the list
            warning = _marker_warning(content, index + 1)
            if warning:
                warnings.append(warning)
            continue
        width = markdown.indent_width(fields.pop("indent"))
        while open_items and open_items[-1][0] >= width:
            open_items.pop()
        outer = open_items[-1][1] if open_items else None
        if outer is not None and fields["parent"] is None:
            fields["parent"] = outer.id  # a subtask's parent is the task it is indented under
        task = Task(
            number=len(tasks) + 1,
            line=index + 1,
            section=section_path,
            kind=kind,
            text=content,
            nested_in=outer.number if outer is not None else None,
            **fields,
        )
        tasks.append(task)
        open_items.append((width, task))
    warnings.extend(_reference_warnings(tasks))
    # As `cstack add` refuses a P9, a hand-written one is reported; the task is still read.
    warnings.extend(f"line {task.line}: priority {task.priority} is not one of P0 to P3" for task in tasks if task.priority and int(task.priority[1:]) > 3)
    return Plan(shape, tuple(tasks), doc.meta, tuple(warnings))


_ITEM_START = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]")


def _marker_warning(content: str, line: int) -> str | None:
    """A warning for a line that looks like a task with a marker cstack does not read."""
    odd = _CHECKBOX_LIKE.match(content) or _BARE_MARKER.match(content)
    if not odd:
        return None
    marker = odd.group("marker")
    if marker.upper() in CONTEXT_BY_MD_MARKERS:
        return (
            f"line {line}: '[{marker}]' is a context-by-md marker, not one of cstack's ([ ] [>] [x] [!] [~]); "
            f"the line is read as text (as {CONTEXT_BY_MD_MARKERS[marker.upper()]} it would be a task)"
        )
    return f"line {line}: '[{marker}]' is not a task marker ([ ] [>] [x] [!] [~]); the line is read as text"


def render_plan(plan: Plan) -> str:
    """The file's text. Reading keeps every line, so `render_plan(parse_plan(t)) == t`."""
    return plan.text


def render_task_line(task: Task, indent: str = "") -> str:
    """A task line in the canonical layout, from the task's fields (no line ending)."""
    parts = [f"{indent}- [{task.marker}] "]
    if task.priority:
        parts.append(f"{task.priority}: ")
    parts.append(task.title)
    parts.extend(f" #{label}" for label in task.labels)
    group = _render_group(task.id, task.depends, task.parent, task.segments)
    if group:
        parts.append(f" ({group})")
    parts.extend(f" | {segment.text}" for segment in task.segments)
    return "".join(parts)


def _render_group(ident: str | None, depends: Sequence[str], parent: str | None, segments: Sequence[Segment]) -> str:
    in_segments = {segment.key for segment in segments}
    pieces = []
    if ident and "id" not in in_segments:
        pieces.append(f"id: {ident}")
    if depends and "depends" not in in_segments:
        pieces.append(f"depends: {', '.join(depends)}")
    if parent and "parent" not in in_segments:
        pieces.append(f"parent: {parent}")
    return ", ".join(pieces)


def _reference_warnings(tasks: Sequence[Task]) -> list[str]:
    warnings = []
    seen: dict[str, Task] = {}
    for task in tasks:
        if task.id is None:
            continue
        key = task.id.casefold()
        if key in seen:
            warnings.append(f"line {task.line}: id '{task.id}' is also used on line {seen[key].line}")
        else:
            seen[key] = task
    for task in tasks:
        for dep in task.depends:
            if dep.casefold() not in seen:
                warnings.append(f"line {task.line}: depends on '{dep}', which no task carries as its id")
        if task.parent and task.parent.casefold() not in seen:
            warnings.append(f"line {task.line}: parent '{task.parent}' is not the id of any task")
    return warnings


# --------------------------------------------------------------------------- addressing


def find_task(plan: Plan, ref: str, path: Path | str | None = None) -> Task:
    """The one task `ref` names: its number in the listing, its `id:`, its title, or a unique
    case-insensitive prefix of its title (an exact title beats a prefix).

    Raises InvalidRequest AMBIGUOUS_ADDRESSING (candidates in details) or NotFound.
    """
    wanted = ref.strip()
    if not wanted:
        raise InvalidRequest("no task given", details={"ref": ref})
    folded = wanted.casefold()
    exact = [task for task in plan.tasks if task.id is not None and task.id.casefold() == folded]
    if wanted.isdigit() and 1 <= int(wanted) <= len(plan.tasks):
        by_number = plan.tasks[int(wanted) - 1]
        if by_number not in exact:
            exact.append(by_number)
    for candidates in (
        exact,
        [task for task in plan.tasks if task.title.casefold() == folded],
        [task for task in plan.tasks if task.title.casefold().startswith(folded)],
    ):
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            raise InvalidRequest(
                f"'{wanted}' matches {len(candidates)} tasks; use its number or id",
                code="AMBIGUOUS_ADDRESSING",
                path=path,
                details={"ref": wanted, "candidates": [_brief(task) for task in candidates]},
            )
    raise NotFound(
        f"no task matches '{wanted}' (by number, id or title prefix)",
        path=path,
        details={"ref": wanted},
        hint="`cstack plan` lists the tasks with their numbers",
    )


def _brief(task: Task) -> dict[str, Any]:
    return {"number": task.number, "id": task.id, "title": task.title, "status": task.status, "line": task.line}


# --------------------------------------------------------------------------- editing lines


def set_field(content: str, key: str, value: str) -> str:
    """The task line with `| key: value` set: the value replaced in place, or appended."""
    fields = parse_task_line(content)
    assert fields is not None
    for segment in fields["segments"]:
        if segment.key == key.casefold():
            keyed = _KEYED.match(segment.text)
            assert keyed is not None
            prefix = segment.text[: keyed.start("value")] if keyed.group("value") is not None else segment.text + " "
            return content[: segment.start] + prefix + value + content[segment.end :]
    trimmed = content.rstrip()
    return f"{trimmed} | {key}: {value}{content[len(trimmed) :]}"


def remove_field(content: str, key: str) -> str:
    """The task line without its `| key: …` segments."""
    while True:
        fields = parse_task_line(content)
        assert fields is not None
        target = next((s for s in fields["segments"] if s.key == key.casefold()), None)
        if target is None:
            return content
        begin = target.pipe
        while begin > 0 and content[begin - 1] in " \t":
            begin -= 1
        content = content[:begin] + content[target.end :]


def set_marker(content: str, marker: str) -> str:
    """The task line with its marker character replaced."""
    fields = parse_task_line(content)
    assert fields is not None
    at = fields["marker_at"]
    return content[:at] + marker + content[at + 1 :]


# --------------------------------------------------------------------------- transitions


class _Rule(NamedTuple):
    allowed: frozenset[str]
    marker: str
    remove: tuple[str, ...] = ()
    needs_reason: bool = False
    move_to: str | None = None  # a SECTIONS key
    move_from: frozenset[str] = frozenset()  # kinds the move applies to


_RULES: dict[str, _Rule] = {
    "start": _Rule(frozenset({"pending", "blocked"}), ">", ("blocked",), move_to="tasks", move_from=frozenset({"backlog"})),
    "done": _Rule(frozenset(OPEN), "x", ("blocked",), move_to="completed", move_from=frozenset({"tasks", "other", "backlog", "closed"})),
    "close": _Rule(frozenset(OPEN), "~", ("blocked",), True, move_to="closed", move_from=frozenset({"tasks", "other", "backlog", "completed"})),
    "block": _Rule(frozenset(OPEN), "!", needs_reason=True),
    "ready": _Rule(frozenset({"blocked", "in_progress"}), " ", ("blocked",)),
    "reopen": _Rule(frozenset(FINISHED), " ", ("blocked", "closed", "reason"), move_to="tasks", move_from=frozenset({"completed", "closed"})),
}
ACTIONS = tuple(_RULES)


def transition(
    text: str,
    action: str,
    ref: str | None,
    today: date,
    *,
    reason: str | None = None,
    path: Path | str | None = None,
) -> Change:
    """Apply `action` (start, done, close, block, ready, reopen) to the task `ref` names (None:
    the one task in progress).

    Returns the new text and the task as it reads afterwards. `reason` is required for close
    and block, optional for done, ignored otherwise.

    Raises NotFound / InvalidRequest (addressing, a missing or multi-line reason) and Conflict
    INVALID_TRANSITION when the task's status does not allow the action.
    """
    if action in _RULES:
        words = ref.split() if ref is not None else []
        fast = _on_condensed(text, words[:1], lambda small: _transition_full(small, action, ref, today, reason=reason, path=path), path, ref)
        if fast is not None:
            return fast
    return _transition_full(text, action, ref, today, reason=reason, path=path)


def _transition_full(
    text: str,
    action: str,
    ref: str | None,
    today: date,
    *,
    reason: str | None = None,
    path: Path | str | None = None,
) -> Change:
    """`transition` on the whole parsed plan: the definition the condensed run must equal."""
    rule = _RULES[action]
    plan = parse_plan(text, path)
    task = find_task(plan, ref, path) if ref is not None else _only_active(plan, action, path)
    reason = _clean_reason(reason, required=rule.needs_reason, action=action)
    if task.status not in rule.allowed:
        raise Conflict(
            f"cannot {action} task {task.number} ('{task.title}'): it is {task.status}",
            code="INVALID_TRANSITION",
            path=path,
            line=task.line,
            details={"action": action, "status": task.status, "allowed_from": sorted(rule.allowed), "task": _brief(task)},
            hint=_transition_hint(action, task.status),
        )
    if action in ("done", "close"):
        _refuse_open_subtasks(plan, task, action, path)
    content = set_marker(task.text, rule.marker)
    for key in rule.remove:
        content = remove_field(content, key)
    stamp = today.isoformat()
    updates: list[tuple[str, str]] = []
    if action == "block":
        updates.append(("blocked", reason or ""))
    if action in ("done", "close"):
        updates.append(("closed", stamp))
        if reason:
            updates.append(("reason", reason))
    updates.append(("modified", stamp))
    for key, value in updates:
        content = set_field(content, key, value)

    shape = plan.outline
    index = task.line - 1
    # A subtask stays under its parent (its marker changes in place); a parent moves with its subtasks.
    target = SECTIONS[rule.move_to] if rule.move_to and task.kind in rule.move_from and not task.nested else None
    if target is None:
        lines = list(shape.lines)
        lines[index] = content + markdown.ending_of(lines[index])
        new_text = "".join(lines)
        moved_from = None
        new_index = index
    else:
        new_text, new_index = _move(shape, index, content, target)
        moved_from = task.section
    new_plan = parse_plan(new_text, path)
    after = next(t for t in new_plan.tasks if t.line == new_index + 1)
    return Change(new_text, after, task, action, moved_from)


def subtasks(plan: Plan, task: Task) -> tuple[Task, ...]:
    """Every task under `task`: those indented under it and those naming its id as `parent:`,
    and theirs in turn, in file order."""
    found: dict[int, Task] = {}
    todo = [task]
    while todo:
        outer = todo.pop()
        for other in plan.tasks:
            if other.number in found or other.number == task.number:
                continue
            if other.nested_in == outer.number or (outer.id and other.parent and other.parent.casefold() == outer.id.casefold()):
                found[other.number] = other
                todo.append(other)
    return tuple(sorted(found.values(), key=lambda t: t.number))


def _refuse_open_subtasks(plan: Plan, task: Task, action: str, path: Path | str | None) -> None:
    """Raise Conflict OPEN_SUBTASKS when `task` still has subtasks that are not finished."""
    waiting = [child for child in subtasks(plan, task) if child.is_open]
    if waiting:
        raise Conflict(
            f"cannot {action} task {task.number} ('{task.title}'): {len(waiting)} of its subtasks are still open",
            code="OPEN_SUBTASKS",
            path=path,
            line=task.line,
            details={"action": action, "task": _brief(task), "open_subtasks": [_brief(child) for child in waiting]},
            hint="finish or close each subtask first (`cstack done <subtask>`, `cstack close <subtask> --reason …`)",
        )


def also_in_progress(plan: Plan, task: Task) -> list[dict[str, Any]]:
    """The tasks in progress besides `task` (found by its line), each as `{number, id, title,
    status, line}`: while there are any, a transition without a task name is ambiguous."""
    return [_brief(other) for other in plan.tasks if other.status == "in_progress" and other.line != task.line]


def start_notes(text: str, task: Task, path: Path | str | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """What a start of `task` (as it reads in the plan `text` the start wrote) has to tell: the
    ids of its dependencies not met, and `also_in_progress`. The same answers as
    `dependencies` and `also_in_progress` over `parse_plan(text)`, read from the condensed
    text: condensing keeps each line that holds one of the task's dependency ids (so every
    task carrying such an id, whatever its status) and every unfinished task, and only the
    numbers and lines of the tasks it keeps are carried back to the full text's."""
    try:
        condensed = _condense(text, task.depends, path)
    except MossError:
        condensed = None
    if condensed is None:
        whole = parse_plan(text, path)
        return [dep.id for dep in dependencies(whole, task) if not dep.met], also_in_progress(whole, task)
    small_text, runs = condensed
    small = parse_plan(small_text, path)
    unmet = [dep.id for dep in dependencies(small, task) if not dep.met]
    others = []
    for other in small.tasks:
        if other.status == "in_progress":
            real = _real_task(other, small, runs)
            if real is not None and real.line != task.line:
                others.append(_brief(real))
    return unmet, others


def _only_active(plan: Plan, action: str, path: Path | str | None) -> Task:
    active = [task for task in plan.tasks if task.status == "in_progress"]
    if len(active) == 1:
        return active[0]
    if not active:
        raise NotFound(f"no task is in progress; name the task to {action}", path=path, details={"ref": None})
    raise InvalidRequest(
        f"{len(active)} tasks are in progress; name the one to {action}",
        code="AMBIGUOUS_ADDRESSING",
        path=path,
        details={"ref": None, "candidates": [_brief(task) for task in active]},
    )


def _transition_hint(action: str, status: str) -> str | None:
    if status in FINISHED and action != "reopen":
        return "reopen it first: `cstack reopen`"
    if action == "ready" and status == "pending":
        return "it is pending already"
    if action == "start" and status == "in_progress":
        return "it is in progress already"
    return None


def _clean_reason(reason: str | None, *, required: bool, action: str) -> str | None:
    if reason is not None:
        reason = reason.strip()
        if "\n" in reason or "\r" in reason:
            raise InvalidRequest("a reason must fit on one line", details={"action": action})
        if "|" in reason:
            raise InvalidRequest("a reason cannot hold '|', which separates the parts of a task line", details={"action": action})
    if required and not reason:
        raise InvalidRequest(f"{action} needs a reason", details={"action": action})
    return reason or None


def _is_task_content(content: str) -> bool:
    return _TASK_LINE.match(content) is not None


def _subtree_end(shape: Outline, index: int) -> int:
    """The end of the task on line `index` with what is indented under it: its detail lines
    and its subtasks (up to the first blank line or line indented no deeper)."""
    base = markdown.indent_width(shape.content(index))
    end = index + 1
    while end < len(shape.lines):
        content = shape.content(end)
        if markdown.is_blank(content) or markdown.indent_width(content) <= base:
            break
        end += 1
    return end


def _move(shape: Outline, index: int, content: str, target: tuple[str, ...]) -> tuple[str, int]:
    """Move the task on line `index` (with its detail lines and subtasks) into section `target`."""
    end = _subtree_end(shape, index)
    details = [shape.content(i) for i in range(index + 1, end)]
    text = "".join(shape.lines[:index] + shape.lines[end:])
    return _put(text, shape.first + 1, target, [content, *details])


def _put(text: str, first_line: int, target: tuple[str, ...], new: Sequence[str]) -> tuple[str, int]:
    """Insert `new` lines into section `target`; return the text and the first line's index."""
    shape = markdown.outline(text, first_line)
    section = _find_section(shape, target)
    if section is None:
        lines, position = markdown.append_section(shape.lines, shape, target, new)
        return "".join(lines), position
    # Placeholder lines (`_None._`) stay as written; the task goes after them.
    place = markdown.placement(shape, section, _is_task_content, keep_placeholders=True)
    lines = markdown.insert(shape.lines, place, new, shape.newline)
    return "".join(lines), place.line + markdown.added_before(shape.lines, place)


def _find_section(shape: Outline, target: tuple[str, ...]) -> markdown.Section | None:
    if len(target) == 1:
        kind = section_kind(target)
        for section in shape.sections:
            if section.level == 2 and section_kind(section.path) == kind:
                return section
        return None
    return shape.find(*target)


# --------------------------------------------------------------------------- adding


def add_task(
    text: str,
    spec: str,
    today: date,
    *,
    ident: str | None = None,
    depends: Sequence[str] = (),
    parent: str | None = None,
    section: str = "tasks",
    path: Path | str | None = None,
) -> Change:
    """Add a pending task written as `P1: Title #label | more` to `section` (a SECTIONS key).

    Raises InvalidRequest (empty title, bad priority, bad id, multi-line spec), Conflict
    ALREADY_EXISTS (the id is taken) and NotFound (a dependency or parent id no task carries).
    """
    fields = parse_task_line(f"- [ ] {spec.strip()}") if spec.strip() and "\n" not in spec and "\r" not in spec else None
    if fields is not None:
        # The plan matters to an addition through the ids it names (taken? known?) and the
        # place of the new line; both survive condensing when those ids are kept.
        names = [ident, parent, fields["id"], fields["parent"], *depends, *fields["depends"]]
        tokens = [word for name in names if name for word in name.split()[:1]]
        fast = _on_condensed(
            text,
            tokens,
            lambda small: _add_task_full(small, spec, today, ident=ident, depends=depends, parent=parent, section=section, path=path),
            path,
            None,
        )
        if fast is not None:
            return fast
    return _add_task_full(text, spec, today, ident=ident, depends=depends, parent=parent, section=section, path=path)


def _add_task_full(
    text: str,
    spec: str,
    today: date,
    *,
    ident: str | None = None,
    depends: Sequence[str] = (),
    parent: str | None = None,
    section: str = "tasks",
    path: Path | str | None = None,
) -> Change:
    """`add_task` on the whole parsed plan: the definition the condensed run must equal."""
    if section not in SECTIONS or section in ("completed", "closed"):
        raise InvalidRequest(
            f"cannot add to section '{section}'",
            details={"section": section, "allowed": [key for key in SECTIONS if key not in ("completed", "closed")]},
        )
    spec = spec.strip()
    if "\n" in spec or "\r" in spec:
        raise InvalidRequest("a task must fit on one line")
    if re.match(r"^\s*[-*+]\s+\[", spec):
        raise InvalidRequest("give the task without its '- [ ]' marker, e.g. \"P1: Title #label\"")
    priority = re.match(r"^P(\d+)\s*:", spec)
    if priority and int(priority.group(1)) > 3:
        raise InvalidRequest(f"priority P{priority.group(1)} is not one of P0 to P3", details={"spec": spec})
    fields = parse_task_line(f"- [ ] {spec}") if spec else None
    if fields is None or not fields["title"]:
        raise InvalidRequest("the task needs a title", details={"spec": spec})
    plan = parse_plan(text, path)
    ident = ident.strip() if ident else fields["id"]
    if fields["id"] and ident != fields["id"]:
        raise InvalidRequest("the id is given twice, in the text and as an option", code="AMBIGUOUS_ADDRESSING")
    if ident is not None:
        if not re.match(_ID, ident):
            raise InvalidRequest(f"'{ident}' is not a usable id (letters, digits, '.', '_', '-')", details={"id": ident})
        if any(task.id and task.id.casefold() == ident.casefold() for task in plan.tasks):
            raise Conflict(f"a task with id '{ident}' exists already", code="ALREADY_EXISTS", path=path, details={"id": ident})
    all_depends = tuple(dict.fromkeys([*fields["depends"], *(d.strip() for d in depends if d.strip())]))
    parent = parent.strip() if parent else fields["parent"]
    known = {task.id.casefold() for task in plan.tasks if task.id}
    missing = [dep for dep in (*all_depends, *([parent] if parent else [])) if dep.casefold() not in known]
    if missing:
        raise NotFound(
            f"no task has the id {', '.join(repr(m) for m in missing)}",
            path=path,
            details={"missing": missing},
            hint="dependencies and parents are named by a task's `id:`",
        )
    draft = Task(
        number=0,
        line=0,
        status="pending",
        marker=" ",
        priority=fields["priority"],
        title=fields["title"],
        labels=fields["labels"],
        id=ident,
        depends=all_depends,
        parent=parent,
        segments=tuple(s for s in fields["segments"] if s.key not in ("id", "depends", "parent")),
        section=(),
        kind="tasks",
        text="",
        marker_at=3,
    )
    content = set_field(render_task_line(draft), "modified", today.isoformat())
    new_text, index = _put(text, plan.outline.first + 1, SECTIONS[section], [content])
    new_plan = parse_plan(new_text, path)
    after = next(t for t in new_plan.tasks if t.line == index + 1)
    return Change(new_text, after, None, "add")


# --------------------------------------------------------------------------- condensing
#
# A plan that has lived a year holds thousands of finished tasks that a transition or an
# addition never looks at, yet parsing them costs most of the command. So `transition` and
# `add_task` first run on a condensed copy of the text: every run of consecutive finished tasks
# that cannot matter to the edit is replaced by one stand-in line, the edit is planned on that
# small text, and the stand-ins are then expanded back into the exact lines they replaced. The
# result (text, task, numbers, lines) is the full run's, byte for byte; whenever the copy cannot
# be shown to decide alike, the full run decides.
#
# A line may go into a run when it is visible (not frontmatter, comment or code), at indent 0,
# marked `[x]`, `[X]` or `[~]`, with a text of seven characters or more that does not start like
# a placeholder's (so it is a task), names no `parent`, holds none of the words the edit looks up
# (the task's reference, the ids an addition names) nor anything that opens hidden text, and the
# line after it is such a line too (so a run never ends a section's list,
# never carries indented detail lines or subtasks, and what follows it nests exactly as before).
# Such a task is finished, so no dependency or subtask check can be about it; its id is none the
# edit names; and the stand-in, a finished task line at indent 0 itself, takes its place for
# sections, nesting, placement and moves.

_STAND_IN = "\ue000"  # a private-use character: a plan holding it is never condensed
# Lines at indent 0 marked finished whose text is at least seven characters long and does not
# start with what a placeholder starts with (`(`, `_`, `*`, a dash), each with its line ending:
# a line that starts like this and ends with a line break (a line holds no other).
_CANDIDATE_START = re.compile(r"[-*+][ \t]+\[[xX~]\][ \t]+[^\s(_*\-\u2014\u2013][^\n]{6}")
_FLAGGED_RUN = re.compile(rb"\x01+")  # consecutive lines flagged as candidates
_MIN_RUN = 3  # shorter runs are not worth a stand-in
Run = tuple[str, int]  # the lines a stand-in replaces, as one text, and how many they are
_LOOKS_LIKE_TASK = r"[ \t]*[-*+][ \t]+\[[ xX>!~]\]"  # text: only a task named by its number needs it


def _condense(text: str, words: tuple[str, ...], path: Path | str | None, keep_tasks: int = 0) -> tuple[str, dict[str, Run]] | None:
    """The condensed text and, by stand-in line (without its ending), the lines it replaces;
    None when condensing would not take a quarter of its lines away. Nothing is condensed up
    to the `keep_tasks`-th line that looks like a task. Raises what `document.split` raises.

    Not cached: no command condenses one text twice (a transition's locked write reuses its
    dry run's change), and a cache's key hashed the whole text of every plan condensed."""
    folded = [word.casefold() for word in words]
    if _STAND_IN in text or any(_STAND_IN in word for word in folded):
        return None
    lines = markdown.split_lines(text)
    starts = [0, *accumulate(map(len, lines))]
    # The frontmatter's lines (document.split's three parts before the body) are hidden. The
    # rest of what document.parse checks (conflict markers, the YAML) the edit's own parse of
    # the condensed text checks: condensing leaves those lines as they are.
    head, frontmatter, tail, _body = document.split(text, path)
    hidden, marks = markdown.hiding(lines, (head + frontmatter + tail).count("\n"), joined=(text, starts))
    protected = 0  # lines before this index stay
    if keep_tasks > 0:
        looks_like_task = re.compile(_LOOKS_LIKE_TASK).match
        for index, line in enumerate(lines):
            keep_tasks -= 1 if not hidden[index] and looks_like_task(line) else 0
            if keep_tasks == 0:
                protected = index + 1
                break
        else:
            return None
    spans: list[tuple[int, int]] = []  # [first, last] line indexes of consecutive candidates
    # Excluded: the lines holding a word, and those that may open or close hidden text.
    holding = _lines_holding(text, ["parent", *folded], starts, len(lines) * 3 // 4, set(marks))
    if holding is None:
        return None  # a word found on most lines (a task named by a short number): little to gain
    excluded = sorted(holding)
    # Only a block holding an excluded word is looked at line by line.
    for first, last in _candidate_blocks(lines, protected):
        if hidden[first]:
            continue  # in a comment or code: none of its lines opens or closes one, so all are text
        inside = set(excluded[bisect_left(excluded, first) : bisect_right(excluded, last)])
        if not inside:
            spans.append((first, last))
            continue
        begin = None
        for index in range(first, last + 1):
            if hidden[index] or index in inside:
                if begin is not None:
                    spans.append((begin, index - 1))
                begin = None
            elif begin is None:
                begin = index
        if begin is not None:
            spans.append((begin, last))
    pieces: list[str] = []
    runs: dict[str, Run] = {}
    at = 0  # line index up to which `pieces` holds the text
    removed = 0
    for first, last in spans:
        if last - first < _MIN_RUN:
            continue
        # lines[first:last] go; lines[last] stays, so what follows nests and places as before.
        content = f"- [x] {_STAND_IN}{len(runs)}{_STAND_IN}"
        runs[content] = (text[starts[first] : starts[last]], last - first)
        pieces.append(text[starts[at] : starts[first]])
        pieces.append(content + markdown.ending_of(lines[first]))
        at = last
        removed += last - first - 1
    pieces.append(text[starts[at] :])
    return ("".join(pieces), runs) if runs and removed * 4 >= len(lines) else None


def _candidate_blocks(lines: Sequence[str], begin: int) -> list[tuple[int, int]]:
    """The blocks of consecutive candidate lines from line `begin` on, each as the indexes of
    its first and last line (runs as long as they go). Each line's start is tested in one
    C-level pass over the lines and the runs are found in the flags, where a regular expression
    for whole blocks stepped through every character of the text and the line breaks were
    counted again (tests/cstack/test_cstack_condensed.py keeps it as the reference)."""
    flags = bytearray(map(bool, map(_CANDIDATE_START.match, lines)))
    flags[:begin] = bytes(min(begin, len(flags)))
    if lines and not lines[-1].endswith("\n"):
        flags[-1] = 0  # a last line without its line break
    return [(run.start(), run.end() - 1) for run in _FLAGGED_RUN.finditer(flags)]


def _lines_holding(text: str, words: Sequence[str], starts: Sequence[int], limit: int, found: set[int]) -> set[int] | None:
    """`found` with the indexes of the lines whose case-folded text holds one of the
    (case-folded) `words` (None when they are more than `limit`); `starts` are the offsets at
    which the lines of `text` start.

    Case folding maps each character on its own to one or more characters and never makes or
    removes a line break, so the folded text has the same lines (at the same offsets when it is
    as long as the text), and a line holds a word exactly when its fold does."""
    folded = text.casefold()
    if len(folded) != len(text):
        starts = [0, *accumulate(map(len, markdown.split_lines(folded)))]
    if len(found) > limit:
        return None
    for word in words:
        if not word:
            return None
        at = folded.find(word)
        while at >= 0:
            line = bisect_right(starts, at) - 1
            found.add(line)
            if len(found) > limit:
                return None
            at = folded.find(word, starts[line + 1]) if line + 1 < len(starts) else -1
    return found


def _expand(text: str, runs: dict[str, Run]) -> str | None:
    """The condensed `text` with each stand-in replaced by its lines; None unless each stand-in
    is found exactly once, unchanged."""
    out: list[str] = []
    seen = 0
    for line in markdown.split_lines(text):
        if _STAND_IN in line:
            run = runs.get(markdown.strip_ending(line))
            if run is None or markdown.ending_of(line) != markdown.ending_of(run[0][: run[0].find("\n") + 1]):
                return None
            out.append(run[0])
            seen += 1
        else:
            out.append(line)
    return "".join(out) if seen == len(runs) else None


def _real_task(task: Task, small: Plan, runs: dict[str, Run]) -> Task | None:
    """`task` of the condensed plan `small` with the line and numbers it has in the full text;
    None for a stand-in."""
    if _STAND_IN in task.text:
        return None
    extra_lines = extra_tasks = 0
    extra_before_outer = 0
    numbers = {t.line: t.number for t in small.tasks}
    for index, line in enumerate(small.outline.lines):
        if index >= task.line - 1:
            break
        run = runs.get(markdown.strip_ending(line)) if _STAND_IN in line else None
        if run is None:
            continue
        extra_lines += run[1] - 1
        number = numbers.get(index + 1)
        if number is not None:
            extra_tasks += run[1] - 1
            if task.nested_in is not None and number < task.nested_in:
                extra_before_outer += run[1] - 1
    nested_in = task.nested_in + extra_before_outer if task.nested_in is not None else None
    return task._replace(line=task.line + extra_lines, number=task.number + extra_tasks, nested_in=nested_in)


def _on_condensed(
    text: str,
    words: Sequence[str],
    edit: Callable[[str], Change],
    path: Path | str | None,
    ref: str | None,
) -> Change | None:
    """`edit` run on the condensed text, its change carried back to the full text; None when
    the full text must decide (nothing to condense, an error to report with the file's own
    numbers, a task named by a number that condensing may have shifted)."""
    try:
        number = ref.strip() if ref is not None else ""
        condensed = _condense(text, tuple(words), path, int(number) if number.isdigit() else 0)
        if condensed is None:
            return None
        small_text, runs = condensed
        made = edit(small_text)
    except MossError:
        return None  # the full run raises the error, with the file's own lines and numbers
    new_text = _expand(made.text, runs)
    if new_text is None:
        return None
    after = _real_task(made.task, parse_plan(made.text, path), runs)
    before = _real_task(made.before, parse_plan(small_text, path), runs) if made.before is not None else None
    if after is None or (made.before is not None and before is None):
        return None
    if ref is not None and ref.strip().isdigit() and (before is None or made.before is None or not before.number == made.before.number == int(ref.strip())):
        return None  # a number names the n-th task of the whole file: only when none was condensed away before it
    return Change(new_text, after, before, made.action, made.moved_from)


# --------------------------------------------------------------------------- queries


def filter_tasks(
    plan: Plan,
    *,
    statuses: Iterable[str] = (),
    labels: Iterable[str] = (),
    priorities: Iterable[str] = (),
) -> tuple[Task, ...]:
    """Tasks matching every filter given: any of `statuses` (names or aliases such as open,
    ready), all of `labels` (with or without '#'), any of `priorities` (P1 or 1).

    Raises InvalidRequest for an unknown status or priority.
    """
    wanted_status: set[str] = set()
    want_ready = False
    for status in statuses:
        name = status.strip().casefold().replace(" ", "_")
        if name == "ready":
            want_ready = True
        elif name in STATUSES:
            wanted_status.add(name)
        elif name in STATUS_ALIASES:
            wanted_status |= set(STATUS_ALIASES[name])
        else:
            raise InvalidRequest(
                f"unknown status '{status}'",
                details={"status": status, "allowed": [*STATUSES, "ready", *STATUS_ALIASES]},
            )
    wanted_labels = {label.strip().lstrip("#").casefold() for label in labels if label.strip()}
    wanted_priorities = set()
    for priority in priorities:
        level = priority.strip().upper().removeprefix("P")
        if level not in ("0", "1", "2", "3"):
            raise InvalidRequest(f"unknown priority '{priority}' (P0 to P3)", details={"priority": priority})
        wanted_priorities.add(f"P{level}")
    ready = set(t.number for t in ready_tasks(plan)) if want_ready else set()
    chosen = []
    for task in plan.tasks:
        if (wanted_status or want_ready) and not (task.status in wanted_status or task.number in ready):
            continue
        if wanted_labels and not wanted_labels <= {label.casefold() for label in task.labels}:
            continue
        if wanted_priorities and task.priority not in wanted_priorities:
            continue
        chosen.append(task)
    return tuple(chosen)


def _by_id(plan: Plan) -> dict[str, list[Task]]:
    index: dict[str, list[Task]] = {}
    for task in plan.tasks:
        if task.id:
            index.setdefault(task.id.casefold(), []).append(task)
    return index


class Dependency(NamedTuple):
    """One `depends:` entry of a task and where it stands."""

    id: str
    status: str  # a task status, or "unknown" when no task carries the id
    met: bool
    title: str | None = None


def dependencies(plan: Plan, task: Task) -> tuple[Dependency, ...]:
    """Each dependency of `task` with its state (met when every task with that id is finished)."""
    return _dependencies(_by_id(plan), task)


def _dependencies(index: dict[str, list[Task]], task: Task) -> tuple[Dependency, ...]:
    found = []
    for dep in task.depends:
        holders = index.get(dep.casefold(), [])
        if not holders:
            found.append(Dependency(dep, "unknown", False))
            continue
        met = all(holder.status in FINISHED for holder in holders)
        pending = next((h for h in holders if h.status not in FINISHED), holders[0])
        found.append(Dependency(dep, pending.status, met, pending.title))
    return tuple(found)


def _schedulable(task: Task) -> bool:
    return task.kind in ("tasks", "other")


def ready_tasks(plan: Plan) -> tuple[Task, ...]:
    """Pending tasks outside Backlog/Completed/Closed whose dependencies are all met."""
    index = _by_id(plan)
    return tuple(task for task in plan.tasks if task.status == "pending" and _schedulable(task) and all(dep.met for dep in _dependencies(index, task)))


class Blocked(NamedTuple):
    """A blocked task and why: its `blocked:` reason and/or its unmet dependencies."""

    task: Task
    reason: str | None
    waiting_on: tuple[Dependency, ...]


def blocked_tasks(plan: Plan) -> tuple[Blocked, ...]:
    """Tasks marked `[!]`, and pending tasks outside the Backlog held back by dependencies."""
    found = []
    index = _by_id(plan)
    for task in plan.tasks:
        unmet = tuple(dep for dep in _dependencies(index, task) if not dep.met)
        if task.status == "blocked":
            found.append(Blocked(task, task.blocked, unmet))
        elif task.status == "pending" and _schedulable(task) and unmet:
            found.append(Blocked(task, None, unmet))
    return tuple(found)


def plan_stats(plan: Plan) -> dict[str, int]:
    """`{open, ready, in_progress, blocked, closed, total}` as defined in the module docstring."""
    total = len(plan.tasks)
    closed = sum(1 for task in plan.tasks if task.status in FINISHED)
    return {
        "open": total - closed,
        "ready": len(ready_tasks(plan)),
        "in_progress": sum(1 for task in plan.tasks if task.status == "in_progress"),
        "blocked": len(blocked_tasks(plan)),
        "closed": closed,
        "total": total,
    }


class StaleReport(NamedTuple):
    """Open tasks whose `modified:` date is more than `days` days before `today`."""

    today: str
    days: int
    stale: tuple[tuple[Task, int], ...]  # (task, age in days), oldest first
    undated: tuple[Task, ...]  # open tasks without a readable `modified:` date


def stale_tasks(plan: Plan, today: date, days: int = 7) -> StaleReport:
    """Open tasks outside the Backlog not modified for more than `days` days.

    Raises InvalidRequest for a negative `days`.
    """
    if days < 0:
        raise InvalidRequest("days must be zero or more", details={"days": days})
    stale: list[tuple[Task, int]] = []
    undated: list[Task] = []
    for task in plan.tasks:
        if not task.is_open or task.kind == "backlog":
            continue
        when = _read_date(task.modified)
        if when is None:
            undated.append(task)
            continue
        age = (today - when).days
        if age > days:
            stale.append((task, age))
    stale.sort(key=lambda item: (-item[1], item[0].number))
    return StaleReport(today.isoformat(), days, tuple(stale), tuple(undated))


def _read_date(value: str | None) -> date | None:
    if not value or not re.match(_DATE, value.strip()):
        return None
    try:
        return date.fromisoformat(value.strip()[:10])
    except ValueError:
        return None


# --------------------------------------------------------------------------- graph


class Graph(NamedTuple):
    """The dependency graph: tasks taking part, edges (task key → dependency key), roots."""

    nodes: tuple[Task, ...]
    edges: tuple[tuple[str, str], ...]
    roots: tuple[Task, ...]
    missing: tuple[str, ...]  # ids depended on that no task carries


def task_key(task: Task) -> str:
    """How the graph names a task: its id, or `#<number>` for a task without one."""
    return task.id if task.id else f"#{task.number}"


def dependency_graph(plan: Plan, ref: str | None = None, path: Path | str | None = None) -> Graph:
    """The graph of `depends:` links, rooted at the tasks nothing depends on (or at `ref`).

    Raises InvalidDocument DEPENDENCY_CYCLE (details: the cycle as a list of keys, first key
    repeated at the end) when the links loop.
    """
    index = _by_id(plan)
    children: dict[int, list[Task | str]] = {}
    depended: set[int] = set()
    edges: list[tuple[str, str]] = []
    missing: list[str] = []
    for task in plan.tasks:
        kids: list[Task | str] = []
        for dep in task.depends:
            holders = index.get(dep.casefold())
            if holders:
                kids.append(holders[0])
                depended.add(holders[0].number)
                edges.append((task_key(task), task_key(holders[0])))
            else:
                kids.append(dep)
                edges.append((task_key(task), dep))
                if dep not in missing:
                    missing.append(dep)
        children[task.number] = kids
    _check_cycles(plan, children, path)
    involved = [t for t in plan.tasks if children[t.number] or t.number in depended]
    roots: tuple[Task, ...]
    if ref is not None:
        roots = (find_task(plan, ref, path),)
    else:
        roots = tuple(t for t in involved if t.number not in depended)
    return Graph(tuple(involved), tuple(edges), roots, tuple(missing))


def _check_cycles(plan: Plan, children: dict[int, list[Task | str]], path: Path | str | None) -> None:
    state: dict[int, int] = {}  # 1: on the current path, 2: finished
    for start in plan.tasks:
        if state.get(start.number):
            continue
        stack: list[tuple[Task, int]] = [(start, 0)]
        trail: list[Task] = [start]
        state[start.number] = 1
        while stack:
            node, position = stack[-1]
            kids = [kid for kid in children[node.number] if isinstance(kid, Task)]
            if position >= len(kids):
                stack.pop()
                trail.pop()
                state[node.number] = 2
                continue
            stack[-1] = (node, position + 1)
            kid = kids[position]
            seen = state.get(kid.number)
            if seen == 1:
                loop = trail[trail.index(kid) :] + [kid]
                keys = [task_key(t) for t in loop]
                raise InvalidDocument(
                    f"task dependencies form a cycle: {' -> '.join(keys)}",
                    code="DEPENDENCY_CYCLE",
                    path=path,
                    line=kid.line,
                    details={"cycle": keys, "lines": [t.line for t in loop]},
                    hint="remove one of these `depends:` links",
                )
            if seen is None:
                state[kid.number] = 1
                stack.append((kid, 0))
                trail.append(kid)


def render_graph(plan: Plan, graph: Graph) -> str:
    """The graph as an ASCII tree: each root, then what it depends on, indented.

    A task met again below a different parent is shown once more, marked `(see above)`.
    """
    index = _by_id(plan)
    lines: list[str] = []
    expanded: set[int] = set()

    def label(node: Task | str) -> str:
        if isinstance(node, str):
            return f"[?] {node} (no such id)"
        key = f" ({task_key(node)})" if node.id else f" (#{node.number})"
        return f"[{node.marker}] {node.title}{key}"

    def kids_of(node: Task) -> list[Task | str]:
        found: list[Task | str] = []
        for dep in node.depends:
            holders = index.get(dep.casefold())
            found.append(holders[0] if holders else dep)
        return found

    def walk(node: Task | str, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└── " if last else "├── ")
        kids = kids_of(node) if isinstance(node, Task) else []
        again = isinstance(node, Task) and node.number in expanded and bool(kids)
        lines.append(f"{prefix}{branch}{label(node)}{' (see above)' if again else ''}")
        if not isinstance(node, Task) or again:
            return
        expanded.add(node.number)
        below = prefix if top else prefix + ("    " if last else "│   ")
        for position, kid in enumerate(kids):
            walk(kid, below, position == len(kids) - 1, False)

    for root in graph.roots:
        walk(root, "", True, True)
    return "\n".join(lines)


# --------------------------------------------------------------------------- JSON shapes


def task_to_dict(task: Task) -> dict[str, Any]:
    """The JSON shape of a task."""
    return {
        "number": task.number,
        "id": task.id,
        "status": task.status,
        "marker": task.marker,
        "priority": task.priority,
        "title": task.title,
        "labels": list(task.labels),
        "depends": list(task.depends),
        "parent": task.parent,
        "nested_in": task.nested_in,
        "section": "/".join(task.section),
        "line": task.line,
        "modified": task.modified,
        "closed": task.closed,
        "reason": task.reason,
        "blocked": task.blocked,
        "fields": {s.key: s.value for s in task.segments if s.key is not None},
        "notes": [s.text for s in task.segments if s.key is None],
        "text": task.text,
    }


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The JSON shape of a plan: its tasks, counts and warnings."""
    return {
        "tasks": [task_to_dict(task) for task in plan.tasks],
        "stats": plan_stats(plan),
        "warnings": list(plan.warnings),
    }


def dependency_to_dict(dep: Dependency) -> dict[str, Any]:
    return {"id": dep.id, "status": dep.status, "met": dep.met, "title": dep.title}


def blocked_to_dict(item: Blocked) -> dict[str, Any]:
    return {
        "task": task_to_dict(item.task),
        "reason": item.reason,
        "waiting_on": [dependency_to_dict(dep) for dep in item.waiting_on],
    }


def stale_to_dict(report: StaleReport) -> dict[str, Any]:
    return {
        "today": report.today,
        "days": report.days,
        "stale": [{**task_to_dict(task), "age_days": age} for task, age in report.stale],
        "undated": [task_to_dict(task) for task in report.undated],
    }


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    return {
        "nodes": [{"key": task_key(t), **_brief(t)} for t in graph.nodes],
        "edges": [{"from": a, "to": b} for a, b in graph.edges],
        "roots": [task_key(t) for t in graph.roots],
        "missing": list(graph.missing),
    }


def change_to_dict(change: Change) -> dict[str, Any]:
    return {
        "action": change.action,
        "task": task_to_dict(change.task),
        "from_status": change.before.status if change.before else None,
        "moved_from": "/".join(change.moved_from) if change.moved_from is not None else None,
    }

"""Three-way merges of the memory files, for the git merge driver. Core layer (pure).

- PLAN.md: each task line (with its indented detail lines) is an item, matched across the
  versions by its `id:`, else by its title. Tasks either side added are kept, in order; a
  field changed on one side wins; when both sides changed a task's status, the one further
  along the workflow wins (done, then closed, then blocked, then in progress, then pending)
  and the other side's line is kept beside it in an HTML comment, so nothing is dropped; a
  task one side deleted and the other edited stays, with a comment saying so. A task both
  sides added (a rebase or a cherry-pick gives each side its copy) has no base: every part of
  it is a change on both sides, so the same rules apply, and the result does not depend on
  which side is ours. Everything that is not a task line (headings, notes, prose) merges
  like text.
- CURRENT.md: section by section (`##`); a section both sides changed is a conflict left to
  the person, with git's markers around the two versions of the section.
- MEMORY.md: entries from both sides, once each, in each category; an entry one side removed
  is removed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cstack import markdown, plan
from moss_files.foundation import document
from moss_files.foundation.itemmerge import OURS, THEIRS, Item, Outcome, Piece, Result, merge_items, union_lines
from moss_files.foundation.textmerge import Hunk, Labels, render

# How far along the workflow a status is; the further one wins when both sides changed it.
# Statuses of one stage are ordered too (finished work over dropped work, a blocker over a
# start: the blocker is news the starting side lacked), so no tie falls to whichever side is ours.
_PROGRESS = {"pending": 0, "in_progress": 1, "blocked": 2, "closed": 3, "done": 4}
_STATUS_FIELDS = ("closed", "reason", "blocked")  # written by a transition, so they follow its status


# --------------------------------------------------------------------------- PLAN.md


def _task_keys(texts: Sequence[str]) -> dict[str, str]:
    """Title → id for every task that has an id in some version, so a task that gained an id
    on one side still matches its id-less self on the other."""
    ids: dict[str, set[str]] = {}
    for text in texts:
        for task in plan.parse_plan(text).tasks:
            if task.id:
                ids.setdefault(task.title.casefold(), set()).add(task.id)
    # A title that goes with two ids (one per side, say) names neither: matching an id-less
    # task by it would depend on which side is ours.
    return {title: next(iter(found)) for title, found in ids.items() if len(found) == 1}


def _plan_pieces(text: str, ids: dict[str, str]) -> list[Piece]:
    parsed = plan.parse_plan(text)
    shape = parsed.outline
    lines = list(shape.lines)
    own_ids = {task.id for task in parsed.tasks if task.id}
    pieces: list[Piece] = []
    at = 0
    for task in parsed.tasks:
        start = task.line - 1
        end = markdown.block_end(shape, start, lambda content: plan.parse_task_line(content) is not None)
        pieces.extend(lines[at:start])
        ident = task.id or (ids.get(task.title.casefold()) if ids.get(task.title.casefold()) not in own_ids else None)
        key = f"id:{ident}" if ident else f"title:{task.title.casefold()}"
        pieces.append(Item(key, tuple(lines[start:end])))
        at = end
    pieces.extend(lines[at:])
    return pieces


def _note(indent: str, text: str, newline: str) -> str:
    """A detail line, as an HTML comment so that no reader takes it for a task."""
    safe = text.replace("-->", "--&gt;").rstrip("\r\n")
    return f"{indent}  <!-- merge: {safe} -->{newline}"


def _newline(lines: Sequence[str]) -> str:
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def _head(content: str) -> str:
    """A task line's text between its marker and its first `|`."""
    fields = plan.parse_task_line(content)
    assert fields is not None
    start = fields["marker_at"] + 2
    pipes = [segment.pipe for segment in fields["segments"]]
    return content[start : pipes[0] if pipes else len(content)]


def _fields(content: str) -> dict[str, str]:
    fields = plan.parse_task_line(content)
    assert fields is not None
    found: dict[str, str] = {}
    for segment in fields["segments"]:
        if segment.key is not None and segment.key not in found:
            found[segment.key] = segment.value
    return found


def _status(line: str) -> str:
    fields = plan.parse_task_line(line)
    assert fields is not None
    return str(fields["status"])


def _merge_task_line(base: str | None, ours: str, theirs: str) -> tuple[str, str, list[str]]:
    """The merged task line, the side whose status won, and notes on what was not taken. A
    `base` of None (both sides added the task) makes every part a change on both sides."""
    notes: list[str] = []
    before = _status(base) if base is not None else None
    status = {OURS: _status(ours), THEIRS: _status(theirs)}
    result = ours
    won = OURS
    if status[OURS] != status[THEIRS] and status[THEIRS] != before:
        if status[OURS] == before or _PROGRESS[status[THEIRS]] > _PROGRESS[status[OURS]]:
            won = THEIRS
        if status[OURS] != before:
            notes.append(f"the other side's line was: {(theirs if won == OURS else ours).strip()}")
    if won == THEIRS:
        result = plan.set_marker(result, plan.parse_task_line(theirs)["marker"])  # type: ignore[index]
    heads = _head(base) if base is not None else None, _head(ours), _head(theirs)
    if heads[2] != heads[0] and heads[1] != heads[2]:
        if heads[1] == heads[0]:
            at = result.index(heads[1], plan.parse_task_line(result)["marker_at"])  # type: ignore[index]
            result = result[:at] + heads[2] + result[at + len(heads[1]) :]
        elif not notes:
            notes.append(f"the other side's line was: {theirs.strip()}")
    old, mine, other = _fields(base) if base is not None else {}, _fields(ours), _fields(theirs)
    for key in [*mine, *(k for k in other if k not in mine), *(k for k in old if k not in mine and k not in other)]:
        before, a, b = old.get(key), mine.get(key), other.get(key)
        if key in _STATUS_FIELDS and (before != a or before != b):
            value = b if won == THEIRS else a
        elif a == b or b == before:
            value = a
        elif a == before:
            value = b
        elif key == "modified" and a is not None and b is not None:
            value = max(a, b)
        else:
            value = a
            if not notes:
                notes.append(f"the other side's line was: {theirs.strip()}")
        if value is None and a is not None:
            result = plan.remove_field(result, key)
        elif value is not None and value != a:
            result = plan.set_field(result, key, value)
    ident = _field(ours, "id") or _field(theirs, "id")
    if ident and not _field(result, "id"):  # the other side's head won a title clash: its id stays
        result = plan.set_field(result, "id", ident)
    return result, won, notes


def _field(content: str, key: str) -> str | None:
    fields = plan.parse_task_line(content)
    return fields[key] if fields is not None else None


def _merge_task(base: Item | None, ours: Item | None, theirs: Item | None) -> Outcome:
    if ours is None and theirs is None:
        return Outcome(())
    if ours is None or theirs is None:
        kept, side = (theirs, THEIRS) if ours is None else (ours, OURS)
        assert kept is not None
        if base is None:
            return Outcome(kept.lines, side)  # added on one side
        if kept.lines == base.lines:
            return Outcome(())  # deleted on the other side, untouched here
        first = kept.lines[0]
        indent = first[: len(first) - len(first.lstrip())]
        gone = "this side" if side == THEIRS else "the other side"
        note = _note(indent, f"deleted on {gone} of a merge, edited on the other; kept", _newline(kept.lines))
        return Outcome((first, note, *kept.lines[1:]), side)
    if ours.lines == theirs.lines or (base is not None and theirs.lines == base.lines):
        return Outcome(ours.lines, OURS)
    if base is not None and ours.lines == base.lines:
        return Outcome(theirs.lines, THEIRS)
    if base is None and _ahead(theirs.lines, ours.lines):
        # Both sides added the task, differently: merged with the copy further along as ours,
        # so the result is the same whichever side merges.
        swapped = _merge_task(None, theirs, ours)
        return Outcome(swapped.lines, OURS if swapped.side == THEIRS else THEIRS)
    line, won, notes = _merge_task_line(base.lines[0] if base is not None else None, ours.lines[0], theirs.lines[0])
    newline = _newline(ours.lines)
    details = union_lines(base.lines[1:] if base is not None else (), ours.lines[1:], theirs.lines[1:])
    indent = line[: len(line) - len(line.lstrip())]
    noted = [_note(indent, note, newline) for note in notes]
    return Outcome((line, *noted, *details), won)


def _ahead(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether copy `first` of a task comes before `second` in a fixed order of two different
    copies: further along the workflow, then the one with an id, then modified later, then by
    their text."""

    def rank(lines: Sequence[str]) -> tuple[int, bool, str, Sequence[str]]:
        return _PROGRESS[_status(lines[0])], bool(_field(lines[0], "id")), _fields(lines[0]).get("modified", ""), lines

    return rank(first) > rank(second)


def merge_plan(base: str, ours: str, theirs: str, labels: Labels = Labels()) -> Result:
    """Merge three versions of PLAN.md (see the module docstring)."""
    ids = _task_keys((base, ours, theirs))
    return merge_items(base, ours, theirs, split=lambda text: _plan_pieces(text, ids), merge_item=_merge_task, labels=labels)


# --------------------------------------------------------------------------- CURRENT.md


def _section_pieces(text: str) -> list[Piece]:
    """Lines before the first `##` section as text, then each `##` section as one item."""
    doc = document.parse(text)
    shape = markdown.outline(text, doc.body_line)
    lines = list(shape.lines)
    sections = [section for section in shape.sections if section.level == 2]
    pieces: list[Piece] = list(lines[: sections[0].start] if sections else lines)
    for section in sections:
        pieces.append(Item(f"section:{section.title.casefold()}", tuple(lines[section.start : section.end])))
    return pieces


def _merge_section(base: Item | None, ours: Item | None, theirs: Item | None, labels: Labels) -> Outcome:
    versions = [item.lines if item is not None else () for item in (base, ours, theirs)]
    old, mine, other = versions
    if mine == other or other == old:
        return Outcome(mine, OURS)
    if mine == old:
        return Outcome(other, THEIRS)
    block, _ = render([Hunk(old, mine, other, None)], labels, newline=_newline(mine or other or old))
    return Outcome(tuple(block), conflict=True)


def merge_current(base: str, ours: str, theirs: str, labels: Labels = Labels()) -> Result:
    """Merge three versions of CURRENT.md section by section."""
    return merge_items(base, ours, theirs, split=_section_pieces, merge_item=lambda o, a, b: _merge_section(o, a, b, labels), labels=labels)


# --------------------------------------------------------------------------- MEMORY.md

_SPACE = re.compile(r"\s+")


def _memory_pieces(text: str) -> list[Piece]:
    """Each entry (a bullet with its detail lines, or a table row) under a `##` category is an
    item keyed by its category and its text (white space folded, case ignored)."""
    doc = document.parse(text)
    shape = markdown.outline(text, doc.body_line)
    lines = list(shape.lines)
    starts: dict[int, tuple[int, str]] = {}
    for section in shape.sections:
        if section.level != 2:
            continue
        index = section.start + 1
        while index < section.own_end:
            content = shape.content(index)
            is_entry = shape.visible(index) and (
                content.lstrip().startswith(("- ", "* ", "+ ")) or (content.strip().startswith("|") and not set(content.strip()) <= set("|-: "))
            )
            if is_entry:
                end = markdown.block_end(shape, index, lambda text: text.lstrip().startswith(("- ", "* ", "+ ", "|")))
                key = f"{section.title.casefold()}|{_SPACE.sub(' ', content.strip()).casefold()}"
                starts[index] = (end, key)
                index = end
            else:
                index += 1
    pieces: list[Piece] = []
    index = 0
    while index < len(lines):
        if index in starts:
            end, key = starts[index]
            pieces.append(Item(key, tuple(lines[index:end])))
            index = end
        else:
            pieces.append(lines[index])
            index += 1
    return pieces


def _merge_entry(base: Item | None, ours: Item | None, theirs: Item | None) -> Outcome:
    if ours is None or theirs is None:
        kept = ours if theirs is None else theirs
        if kept is None or base is not None:
            return Outcome(())  # removed on one side (an entry's text is its key: an edit is a new entry)
        return Outcome(kept.lines, OURS if theirs is None else THEIRS)
    if ours.lines == theirs.lines or (base is not None and theirs.lines == base.lines):
        return Outcome(ours.lines, OURS)
    if base is not None and ours.lines == base.lines:
        return Outcome(theirs.lines, THEIRS)
    # The same entry with different detail lines on each side: the details of both.
    return Outcome((ours.lines[0], *union_lines(base.lines[1:] if base is not None else (), ours.lines[1:], theirs.lines[1:])), OURS)


def merge_memory(base: str, ours: str, theirs: str, labels: Labels = Labels()) -> Result:
    """Merge three versions of MEMORY.md: every entry of both sides, once, in its category."""
    return merge_items(base, ours, theirs, split=_memory_pieces, merge_item=_merge_entry, labels=labels)

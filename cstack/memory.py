"""MEMORY.md: lasting project knowledge by category. Core layer: pure functions over text;
imports the stdlib and moss_files' core only.

Categories are the `##` sections Decisions, Gotchas, Preferences and Facts. Entries:
- Decisions: table rows `| Decision | Choice | Why | Date |` (header and separator skipped);
- Gotchas: `- **YYYY-MM-DD**: text`;
- Preferences and Facts: `- text`.
`remember` appends one entry to its section (after the section's last entry, else after its
last line of text) and leaves every other line as it was; a missing section is created at
the end of the file. An entry that would open an HTML comment or a code fence over the
entries after it (so that they no longer read) is refused. Without a category the text is
sorted by keywords, checked in this order: prefer/always/never → preferences;
decided/chose/because → decisions; gotcha/careful/turns out → gotchas; anything else → facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from cstack import markdown
from moss_files.foundation import document, formats
from moss_files.foundation.errors import InvalidRequest

CATEGORIES = ("decisions", "gotchas", "preferences", "facts")
_TITLES = {"decisions": "Decisions", "gotchas": "Gotchas", "preferences": "Preferences", "facts": "Facts"}
_ALIASES = {
    "decision": "decisions",
    "gotcha": "gotchas",
    "preference": "preferences",
    "pref": "preferences",
    "fact": "facts",
}
# Checked in order; the first rule with a match decides.
_KEYWORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("preferences", re.compile(r"\b(prefer\w*|always|never)\b", re.IGNORECASE)),
    ("decisions", re.compile(r"\b(decided|decide|decision|chose|chosen|because)\b", re.IGNORECASE)),
    ("gotchas", re.compile(r"\b(gotchas?|careful|turns?\s+out)\b", re.IGNORECASE)),
)
_BULLET = re.compile(r"^[ \t]*[-*+][ \t]+(?P<text>.*?)[ \t]*$")
_DATED = re.compile(r"^\*\*(?P<date>\d{4}-\d{2}-\d{2})\*\*:?[ \t]*(?P<text>.*)$")
_BECAUSE = re.compile(r"\s+(?=because\b)", re.IGNORECASE)
_CHOICE = re.compile(r"\b(?:decided\s+(?:to|on)|chose(?:\s+to)?|chosen|picked|went\s+with|settled\s+on|opted\s+(?:for|to))\s+(?P<choice>.+)$", re.IGNORECASE)
_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
_TABLE_SEPARATOR = re.compile(r"^[ \t]*\|(?:[ \t]*:?-+:?[ \t]*\|)+[ \t]*$")
DECISION_HEADER = ("| Decision | Choice | Why | Date |", "|----------|--------|-----|------|")


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One entry: its category, text, date (when it has one) and line in the file."""

    category: str
    text: str
    line: int
    date: str | None = None
    cells: tuple[str, ...] = ()  # a decision row's cells: decision, choice, why, date


@dataclass(frozen=True, slots=True)
class Memory:
    """A parsed MEMORY.md; `text` is kept whole so `render_memory(parse_memory(t)) == t`."""

    entries: tuple[MemoryEntry, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    text: str = field(default="", repr=False)


def category_of(name: str) -> str:
    """The canonical category for a name such as `Gotcha` or `facts`.

    Raises InvalidRequest for anything else.
    """
    folded = name.strip().casefold()
    folded = _ALIASES.get(folded, folded)
    if folded not in CATEGORIES:
        raise InvalidRequest(f"unknown category '{name}'", details={"category": name, "allowed": list(CATEGORIES)})
    return folded


def categorize(text: str) -> str:
    """The category `text` falls in by its keywords (see the module docstring)."""
    for category, pattern in _KEYWORDS:
        if pattern.search(text):
            return category
    return "facts"


def parse_memory(text: str, path: Path | str | None = None) -> Memory:
    """Read MEMORY.md text (empty text has no entries). Raises InvalidDocument for bad frontmatter."""
    doc = document.parse(text, path)
    formats.check_text("memory", text, path)  # FORMAT_TOO_NEW: a newer toolkit wrote it
    shape = markdown.outline(text, doc.body_line)
    entries: list[MemoryEntry] = []
    for section in shape.sections:
        if section.level != 2:
            continue
        category = _section_category(section)
        if category not in CATEGORIES:
            continue
        for index in range(section.start + 1, section.end):
            if not shape.visible(index):
                continue
            entry = _entry(category, shape.content(index), index + 1)
            if entry is not None:
                entries.append(entry)
    return Memory(tuple(entries), doc.meta, text)


def _section_category(section: markdown.Section) -> str:
    """The category a `##` section's title names (its title folded, when it names none)."""
    folded = section.title.casefold()
    return _ALIASES.get(folded, folded)


def _entry(category: str, content: str, line: int) -> MemoryEntry | None:
    if category == "decisions":
        if not _TABLE_ROW.match(content) or _TABLE_SEPARATOR.match(content):
            return None
        cells = tuple(cell.strip() for cell in _split_row(content))
        if [cell.casefold() for cell in cells[:2]] == ["decision", "choice"]:
            return None  # the header row
        when = cells[3] if len(cells) > 3 and cells[3] else None
        return MemoryEntry(category, cells[0] if cells else "", line, when, cells)
    match = _BULLET.match(content)
    if not match:
        return None
    text = match.group("text")
    dated = _DATED.match(text)
    if dated:
        return MemoryEntry(category, dated.group("text"), line, dated.group("date"))
    return MemoryEntry(category, text, line)


def _split_row(content: str) -> list[str]:
    inner = content.strip()[1:-1]
    return [cell.replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def render_memory(memory: Memory) -> str:
    """The file's text (reading keeps it whole)."""
    return memory.text


def render_entry(category: str, text: str, today: date) -> str:
    """The line `remember` writes for `text` in `category`."""
    if category == "gotchas":
        return f"- **{today.isoformat()}**: {text}"
    if category == "decisions":
        return _decision_row(text, today)
    return f"- {text}"


def _decision_row(text: str, today: date) -> str:
    # "topic | choice | why" fills the columns; otherwise "X because Y" splits into what and
    # why, "because" kept, so that the row reads back as the sentence that was written; the
    # choice is what follows "decided to", "chose", "went with" and the like, when said.
    if "|" in text:
        parts = [part.strip() for part in text.split("|")]
        if len(parts) > 3:
            parts = [parts[0], parts[1], " / ".join(parts[2:])]
    else:
        halves = _BECAUSE.split(text, maxsplit=1)
        what = halves[0].strip()
        choice = _CHOICE.search(what)
        parts = [what, choice.group("choice").strip() if choice else "", halves[1].strip() if len(halves) > 1 else ""]
    parts += [""] * (3 - len(parts))
    return "| " + " | ".join([*parts, today.isoformat()]) + " |"


@dataclass(frozen=True, slots=True)
class Remembered:
    """The result of `remember`: the new text and the entry as it now reads."""

    text: str
    entry: MemoryEntry


def remember(text: str, entry: str, today: date, category: str | None = None, path: Path | str | None = None) -> Remembered:
    """Append `entry` to MEMORY.md text under `category` (auto-sorted when None).

    Raises InvalidRequest for an empty or multi-line entry or an unknown category.
    """
    entry = entry.strip()
    if not entry:
        raise InvalidRequest("nothing to remember: the text is empty")
    if "\n" in entry or "\r" in entry:
        raise InvalidRequest("an entry must fit on one line")
    chosen = category_of(category) if category else categorize(entry)
    line = render_entry(chosen, entry, today)
    doc = document.parse(text, path)
    shape = markdown.outline(text, doc.body_line)
    title = _TITLES[chosen]
    section = next(
        (s for s in shape.sections if s.level == 2 and _section_category(s) == chosen),
        None,
    )
    new_lines = [line]
    if section is None:
        lines, index = markdown.append_section(shape.lines, shape, (title,), new_lines)
    else:
        if chosen == "decisions":
            is_item = _is_table_row
            if not any(shape.visible(i) and _is_table_row(shape.content(i)) for i in range(section.start + 1, section.own_end)):
                new_lines = [*DECISION_HEADER, line]
        else:
            is_item = _is_bullet
        place = markdown.placement(shape, section, is_item)
        lines = markdown.insert(shape.lines, place, new_lines, shape.newline)
        index = place.line + markdown.added_before(shape.lines, place) + len(new_lines) - 1
    new_text = "".join(lines)
    return Remembered(new_text, _read_back(new_text, shape, doc.body_line, index, path))


def _read_back(new_text: str, old: markdown.Outline, body_line: int, index: int, path: Path | str | None) -> MemoryEntry:
    """The entry at line `index` of `new_text` as `parse_memory` reads it, without reading the
    file's other entries again (10,000 of them took a `remember` 60 ms): the lines after the
    entry are the old file's last lines, unchanged, so they read as before unless the new lines
    opened an HTML comment or a code fence over them, which is refused.

    Raises InvalidRequest when the entry would hide what follows it or would not read as an
    entry itself."""
    shape = markdown.outline(new_text, body_line)
    after = len(shape.lines) - index - 1  # the old file's last lines, after the new ones
    if after > len(old.lines) or shape.hidden[index + 1 :] != old.hidden[len(old.lines) - after :]:
        raise InvalidRequest(
            "the entry opens an HTML comment or a code fence that would hide the entries after it",
            path=path,
            details={"line": index + 1},
            hint="close the comment (<!-- ... -->) on the same line, or leave the fence out",
        )
    for section in shape.sections:
        if section.level == 2 and section.start < index < section.end and shape.visible(index):
            category = _section_category(section)
            entry = _entry(category, shape.content(index), index + 1) if category in CATEGORIES else None
            if entry is not None:
                return entry
    raise InvalidRequest("the entry would not read back as an entry where it goes", details={"line": index + 1}, path=path)


def _is_table_row(content: str) -> bool:
    return bool(_TABLE_ROW.match(content))


def _is_bullet(content: str) -> bool:
    return bool(_BULLET.match(content))


def entry_to_dict(entry: MemoryEntry) -> dict[str, Any]:
    """The JSON shape of a memory entry."""
    shape: dict[str, Any] = {"category": entry.category, "text": entry.text, "date": entry.date, "line": entry.line}
    if entry.cells:
        shape["cells"] = list(entry.cells)
    return shape


def memory_to_dict(memory: Memory) -> dict[str, Any]:
    """The JSON shape of MEMORY.md: entries grouped by category."""
    return {category: [entry_to_dict(e) for e in memory.entries if e.category == category] for category in CATEGORIES}

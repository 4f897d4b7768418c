"""Line-level markdown shared by the three memory files. Core layer: pure, stdlib only.

The memory files are handled as lists of lines, each keeping its own line ending, so every
edit is a replacement, insertion or removal of whole lines and the bytes of every other line
stay as they were. Headings and list items inside HTML comments and fenced code blocks are
text, not structure: the templates keep example task lines inside `<!-- ... -->`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import NamedTuple

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_RULE = re.compile(r"^[ \t]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_ITALIC_LINE = re.compile(r"^[ \t]*_[^_\s].*_[ \t]*$|^[ \t]*_[^_\s]_[ \t]*$")
# Patterns as text, compiled by `re` (and kept in its cache) where first used: few commands use them,
# and compiling every pattern at import cost each process's start-up about 0.1 ms a pattern (issue 29).
_FENCE = r"^[ \t]{0,3}(```|~~~)"  # only lines holding a fence's characters are matched


# Section, Outline and Placement are NamedTuples: immutable values compared field by field, as
# the frozen dataclasses they were, made at import in a fraction of a dataclass's time (every
# task command loads this module; issue 29).


class Section(NamedTuple):
    """A `##` section (or a deeper heading inside one), as line indexes into the file.

    `start` is the heading's line, `end` the first line after the section (next heading of the
    same or a higher level, or the end of the file), and `own_end` the first line of the first
    sub-heading, so `[start + 1, own_end)` is the text directly under this heading.
    """

    title: str
    level: int
    path: tuple[str, ...]
    start: int
    end: int
    own_end: int


class Outline(NamedTuple):
    """The structure of a file: its lines, which of them are hidden text, and its sections."""

    lines: tuple[str, ...]
    hidden: tuple[bool, ...]  # inside an HTML comment or a fenced code block
    sections: tuple[Section, ...]
    first: int  # index of the first body line (after any frontmatter)
    newline: str

    def content(self, index: int) -> str:
        """Line `index` without its line ending."""
        return strip_ending(self.lines[index])

    def visible(self, index: int) -> bool:
        return not self.hidden[index]

    def find(self, *path: str) -> Section | None:
        """The first section whose heading path matches `path`, ignoring case."""
        wanted = tuple(part.casefold() for part in path)
        for section in self.sections:
            if tuple(part.casefold() for part in section.path) == wanted:
                return section
        return None

    def section_at(self, index: int) -> Section | None:
        """The innermost section holding line `index` (None before the first `##`)."""
        found = None
        for section in self.sections:
            if section.start <= index < section.end:
                found = section
        return found


# The characters besides `\n` at which `str.splitlines` also breaks a line: a CR alone is one,
# and a text with CRLF endings takes the general split (telling a lone CR from the CR of a
# CRLF costs more than the split saves).
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def split_lines(text: str) -> list[str]:
    """Split on `\\n` only, keeping line endings, so `"".join(result) == text`.

    (`str.splitlines` also breaks on form feeds, U+2028 and a lone `\\r`, which would shift
    line numbers: it is used only for a text that holds none of them and no `\\r` at all, where it
    gives the same lines in one C call, 0.7 ms instead of 1.1 on a 900 KB plan.)
    """
    if not any(char in text for char in _OTHER_BREAKS):
        return text.splitlines(keepends=True)
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def strip_ending(line: str) -> str:
    """A line without its `\\n` or `\\r\\n`."""
    if line.endswith("\n"):
        line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
    return line


def ending_of(line: str) -> str:
    """The line ending of `line` (empty for a last line without one)."""
    return line[len(strip_ending(line)) :]


def newline_of(text: str) -> str:
    """The file's line ending, judged by its first line."""
    end = text.find("\n")
    return "\r\n" if end > 0 and text[end - 1] == "\r" else "\n"


def outline(text: str, first_line: int = 1) -> Outline:
    """Read the structure of `text`; `first_line` (1-based) is where the body starts."""
    lines = tuple(split_lines(text))
    first = max(first_line - 1, 0)
    hidden = hidden_lines(lines, first)
    headings: list[tuple[int, int, str]] = []
    for index, line in enumerate(lines):
        if line[:1] == "#" and not hidden[index]:  # only a line starting with '#' can be a heading
            match = _HEADING.match(strip_ending(line))
            if match:
                headings.append((index, len(match.group(1)), match.group(2).strip()))
    return Outline(lines, tuple(hidden), _sections(headings, len(lines)), first, newline_of(text))


def hidden_lines(lines: Sequence[str], first: int = 0) -> list[bool]:
    """For each line, whether it is hidden text: before `first` (the frontmatter), inside an
    HTML comment or inside a fenced code block."""
    return hiding(lines, first)[0]


def hiding(lines: Sequence[str], first: int = 0, *, joined: tuple[str, Sequence[int]] | None = None) -> tuple[list[bool], list[int]]:
    """`hidden_lines`, and the indexes (ascending) of the lines from `first` on that hold
    `<!--`, `-->`, ``` or ~~~: the only lines that can open or close hidden text.

    `joined`, when the caller holds them: the lines' text and the offset at which each line
    starts in it, then the text's length (a long plan is then not copied once more)."""
    total = len(lines)
    first = min(max(first, 0), total)
    hidden = [True] * first + [False] * (total - first)
    # Only a line holding `<!--`, `-->`, ``` or ~~~ can open or close hidden text; the lines
    # between two such lines share one state. One search over the text finds them.
    text, starts = joined if joined is not None else ("".join(lines), [0, *accumulate(map(len, lines))])
    begin = starts[first]
    marked = sorted({bisect_right(starts, offset) - 1 for offset in _mark_offsets(text) if offset >= begin})
    in_comment = in_fence = False
    previous = first
    for index in marked:
        if in_comment or in_fence:
            hidden[previous:index] = [True] * (index - previous)
        hidden[index], in_comment, in_fence = _hiding_step(strip_ending(lines[index]), in_comment, in_fence)
        previous = index + 1
    if in_comment or in_fence:
        hidden[previous:] = [True] * (total - previous)
    return hidden, marked


_HIDING = r"<!--|-->|```|~~~"  # text: compiled only in the rare case that needs it
# Each mark and the character the search for it looks for, at that distance into the mark.
_MARK_KEYS = (("<", "<!--", 0), (">", "-->", 2), ("`", "```", 0), ("~", "~~~", 0))


def _mark_offsets(text: str) -> list[int]:
    """Offsets in `text` at which a mark of `_HIDING` starts, at least one on each line holding
    one (the lines are what counts). Each mark is looked for by one character of it that is rare
    in prose and plans (a single-character search runs at memory speed, ~50 times faster than
    the regular expression on a long plan); where those characters are common, by `_HIDING`."""
    found: list[int] = []
    budget = len(text) // 64 + 16
    for key, mark, back in _MARK_KEYS:
        at = text.find(key, back)
        while at >= 0:
            budget -= 1
            if budget < 0:
                return [match.start() for match in re.finditer(_HIDING, text)]
            if text.startswith(mark, at - back):
                found.append(at - back)
            at = text.find(key, at + 1)
    return found


def _hiding_step(content: str, in_comment: bool, in_fence: bool) -> tuple[bool, bool, bool]:
    """(hidden, in_comment, in_fence) for one line, given the state before it."""
    if in_fence:
        return True, in_comment, not re.match(_FENCE, content)
    if in_comment:
        return True, _still_in_comment(content, 0), in_fence
    if re.match(_FENCE, content):
        return True, in_comment, True
    opening = content.find("<!--")
    if opening >= 0:
        in_comment = _still_in_comment(content, opening + 4)
        if content.lstrip().startswith("<!--"):
            return True, in_comment, in_fence
    return False, in_comment, in_fence


def _still_in_comment(content: str, position: int) -> bool:
    """Whether a comment open at `position` is still open at the end of the line."""
    while True:
        closing = content.find("-->", position)
        if closing < 0:
            return True
        opening = content.find("<!--", closing + 3)
        if opening < 0:
            return False
        position = opening + 4


def _sections(headings: list[tuple[int, int, str]], total: int) -> tuple[Section, ...]:
    sections: list[Section] = []
    for position, (index, level, title) in enumerate(headings):
        if level < 2:
            continue
        end = total
        own_end = None
        for later_index, later_level, _title in headings[position + 1 :]:
            if own_end is None:
                own_end = later_index
            if later_level <= level:
                end = later_index
                break
        own_end = min(own_end if own_end is not None else total, end)
        path: tuple[str, ...] = (title,)
        if level > 2:
            parent = next((s for s in reversed(sections) if s.level < level and s.start < index < s.end), None)
            if parent is not None:
                path = (*parent.path, title)
        sections.append(Section(title, level, path, index, end, own_end))
    return tuple(sections)


def is_blank(content: str) -> bool:
    return not content.strip()


def is_rule(content: str) -> bool:
    """A thematic break such as `---`, which the templates put between sections."""
    return bool(_RULE.match(content))


def is_placeholder_line(content: str) -> bool:
    """A line the templates put where there are no entries yet: all in italics (`_None._`,
    `_No tasks. Add with …_`), all in parentheses (`(No tasks yet)`, `(No active task)`), or a
    list or checkbox item whose text is one of those (`- [ ] (Add your first task here)`,
    `- [ ] _subtask_`). Such a line is never data, and the tools never remove it."""
    if _ITALIC_LINE.match(content) or _PAREN_LINE.match(content):
        return True
    item = _PLACEHOLDER_ITEM.match(content)
    return item is not None and bool(item.group("text")) and is_placeholder_value(item.group("text")) and not _is_dash(item.group("text"))


_PLACEHOLDER_VALUES = {"", "--", "-", "—", "–", "(none)", "none", "n/a", "tbd"}
_PAREN_LINE = re.compile(r"^[ \t]*\([^()]*\)[ \t]*$")
_PLACEHOLDER_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+(?:\[[^\]]?\][ \t]+)?(?P<text>.*?)[ \t]*$")


def _is_dash(text: str) -> bool:
    return text.strip() in ("-", "--", "—", "–")


def is_placeholder_value(text: str) -> bool:
    """True for a value that stands for nothing: `_none_`, `--`, `—`, `(none)`, blank, or any
    text wholly in parentheses or italics (`(Awaiting initial directive)`, `_Not yet defined._`)."""
    stripped = text.strip()
    if stripped.casefold() in _PLACEHOLDER_VALUES:
        return True
    if len(stripped) >= 2 and stripped[0] == "(" and stripped[-1] == ")" and "(" not in stripped[1:-1] and ")" not in stripped[1:-1]:
        return True
    return len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "_*" and stripped.strip("_*") != ""


def indent_width(content: str) -> int:
    """Leading indentation in columns (a tab counts as four)."""
    width = 0
    for char in content:
        if char == " ":
            width += 1
        elif char == "\t":
            width += 4
        else:
            break
    return width


def block_end(doc: Outline, index: int, is_item: Callable[[str], bool]) -> int:
    """The end of the item on line `index`: it owns the following non-blank lines that are
    indented deeper and are not items themselves (its detail lines)."""
    base = indent_width(doc.content(index))
    end = index + 1
    while end < len(doc.lines):
        content = doc.content(end)
        if is_blank(content) or indent_width(content) <= base or (doc.visible(end) and is_item(content)):
            break
        end += 1
    return end


class Placement(NamedTuple):
    """Where a new line goes in a section: insert before line `line`, or replace line `line`."""

    line: int
    replace: bool = False
    blank_before: bool = False


def placement(doc: Outline, section: Section, is_item: Callable[[str], bool], *, keep_placeholders: bool = False) -> Placement:
    """Where a new item goes in `section`'s own text.

    After the last item there (and its detail lines). In a section without items: with
    `keep_placeholders`, right after its last placeholder line (which stays, as the person or
    template wrote it), else after its last line of text with no blank line added; without,
    in place of its first placeholder line, else after its last line of text, separated by a
    blank line.
    """
    begin, end = section.start + 1, section.own_end
    # The last item, looked for from the end: a section of a year's entries holds thousands.
    last = next((i for i in range(end - 1, begin - 1, -1) if doc.visible(i) and is_item(doc.content(i))), None)
    if last is not None:
        return Placement(block_end(doc, last, is_item))
    placeholders = [i for i in range(begin, end) if doc.visible(i) and is_placeholder_line(doc.content(i))]
    if keep_placeholders:
        if placeholders:
            return Placement(placeholders[-1] + 1)
        return Placement(_after_last_content(doc, section.start, end))
    if placeholders:
        return Placement(placeholders[0], replace=True)
    return Placement(_after_last_content(doc, section.start, end), blank_before=True)


def _after_last_content(doc: Outline, start: int, end: int) -> int:
    last = start
    for index in range(start, end):
        content = doc.content(index)
        if not is_blank(content) and not (doc.visible(index) and is_rule(content)):
            last = index
    return last + 1


def insert(lines: Sequence[str], at: Placement, new: Sequence[str], newline: str) -> list[str]:
    """Return `lines` with `new` (lines without endings) put at `at`."""
    out = list(lines)
    body = [text + newline for text in new]
    if at.replace:
        ending = ending_of(out[at.line]) or newline
        body[-1] = new[-1] + ending
        out[at.line : at.line + 1] = body
        return out
    if added_before(lines, at):
        body.insert(0, newline)
    if at.line > 0 and not out[at.line - 1].endswith("\n"):
        out[at.line - 1] += newline  # the file ended without a line break; the new line needs one
    out[at.line : at.line] = body
    return out


def append_section(lines: Sequence[str], doc: Outline, path: tuple[str, ...], new: Sequence[str]) -> tuple[list[str], int]:
    """Return `lines` with a section for `path` holding `new`, and the index of `new[0]`.

    A missing `##` section goes at the end of the file; a missing sub-section at the end of its
    parent (which is created first when it is missing too).
    """
    parent = doc.find(*path[:-1]) if len(path) > 1 else None
    block: list[str] = []
    if len(path) > 1 and parent is None:
        block += [f"## {path[0]}", ""]
        for level, title in enumerate(path[1:], start=3):
            block += [f"{'#' * level} {title}", ""]
    else:
        block += [f"{'#' * (len(path) + 1)} {path[-1]}", ""]
    block += list(new)
    at = _after_last_content(doc, parent.start, parent.end) if parent is not None else len(lines)
    place = Placement(at, blank_before=True)
    return insert(lines, place, block, doc.newline), at + added_before(lines, place) + len(block) - len(new)


def added_before(lines: Sequence[str], at: Placement) -> int:
    """How many blank lines `insert` puts before the new lines (0 or 1)."""
    return 1 if at.blank_before and at.line > 0 and not is_blank(lines[at.line - 1]) else 0

"""Backlog.md's task files read the way Backlog.md reads them (src/markdown/parser.ts and
structured-sections.ts at MrLesk/Backlog.md 6286bf97): the frontmatter split by its regular
expression and pre-quoted as it pre-quotes (`assignee: @name`), the body's sections found by
their `<!-- SECTION:…:BEGIN -->` markers (or, in files older than the markers, by their
headings), acceptance criteria and definition-of-done items by their `<!-- AC:… -->` and
`<!-- DOD:… -->` markers, and comments by `<!-- COMMENTS:… -->`. A marker, heading or item
inside another section's marked block (a fenced example of a `## Final Summary`) belongs to
that block, as in Backlog.md. Core layer (pure: text in, values out).

The one addition: the text of the body no section holds (a preamble, a `## Summary` after the
last marker) is returned too, so an import can keep it; Backlog.md shows it only in the file.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

# --------------------------------------------------------------------------- frontmatter

_FRONTMATTER = re.compile(r"^---\r?\n([\s\S]*?)\r?\n---")
_DUE_DATE = re.compile(r"^(\s*due_date:\s*)(.*)$")
_PEOPLE = re.compile(r"^(\s*(?:assignee|reporter):\s*)(.*)$")
_FLOW_LIST = re.compile(r"^\[(.*)\]\s*(#.*)?$")


def split_frontmatter(text: str) -> tuple[str, str] | None:
    """(frontmatter text, body) as Backlog.md splits a file: between a first line `---` and the
    next line that starts with `---`; the body is what follows that line. None without one."""
    match = _FRONTMATTER.match(text)
    if match is None:
        return None
    rest = text[match.end() :]
    newline = rest.find("\n")
    return match.group(1), "" if newline < 0 else rest[newline + 1 :]


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def preprocess(frontmatter: str) -> str:
    """The frontmatter as Backlog.md hands it to its YAML parser: `due_date`, `assignee` and
    `reporter` values quoted when bare (`assignee: @codex` is not valid YAML as written),
    `@names` in flow lists quoted, line ends made `\\n`. One line in, one line out, so a YAML
    error's line is the file's."""
    lines = []
    for line in re.split(r"\r?\n", frontmatter):
        due = _DUE_DATE.match(line)
        if due:
            scalar = re.match(r"^(.*?)(\s+#.*)?$", due.group(2))
            value = (scalar.group(1) if scalar else due.group(2)).strip()
            comment = (scalar.group(2) or "") if scalar else ""
            if value and not re.match(r"^(?:null|~)$", value, re.IGNORECASE) and not value.startswith(("'", '"')):
                lines.append(f"{due.group(1)}{_quoted(value)}{comment}")
                continue
        people = _PEOPLE.match(line)
        if not people:
            lines.append(line)
            continue
        prefix, value = people.group(1), people.group(2).strip()
        flow = _FLOW_LIST.match(value)
        if flow:
            items = [entry.strip() for entry in flow.group(1).split(",") if entry.strip()]
            items = [_quoted(entry) if entry.startswith("@") else entry for entry in items]
            lines.append(f"{prefix}[{', '.join(items)}]" + (f" {flow.group(2)}" if flow.group(2) else ""))
        elif value and not value.startswith(("[", "'", '"', "-")):
            lines.append(f"{prefix}{_quoted(value)}")
        else:
            lines.append(line)
    return "\n".join(lines)


# --------------------------------------------------------------------------- sections

STRUCTURED = {
    "description": ("Description", "DESCRIPTION"),
    "plan": ("Implementation Plan", "PLAN"),
    "notes": ("Implementation Notes", "NOTES"),
    "summary": ("Final Summary", "FINAL_SUMMARY"),
}
_KNOWN_TITLES = (
    "Description",
    "Acceptance Criteria",
    "Definition of Done",
    "Implementation Plan",
    "Implementation Notes",
    "Comments",
    "Final Summary",
    "Acceptance Criteria (Optional)",
    "Implementation Plan (Optional)",
    "Implementation Notes (Optional)",
    "Notes",
    "Notes & Comments (Optional)",
)
_TOKEN = re.compile(r"<!-- (SECTION:[A-Z][A-Z0-9_]*|COMMENTS|COMMENT|AC|DOD):(BEGIN|END) -->")
_ONLY_MARKERS = re.compile(r"^(?:\s*<!-- [A-Z:_]+ -->\s*)*$")

Span = tuple[int, int]


# The patterns of a section are made once per title (a body is scanned with each of them, and
# escaping the dozen known titles for every scan was a third of reading a board, issue 29).


def _section_end(title: str) -> str:
    """Where a section found by its heading ends: before the line breaks of the next known
    heading, or before the line breaks that end the body."""
    others = [re.escape(known) for known in _KNOWN_TITLES if known.lower() != title.lower()]
    return rf"\n+## (?:{'|'.join(others)})(?:\s|\Z)|\n*\Z"


def _text_until(end: str, first: str) -> str:
    """`([\\s\\S]*?)(?=<end>)`, the shortest text before a place where the pattern `end`
    matches, for an `end` that can match only where the character `first` is or at the body's
    end: written so the lookahead is tried there alone and the text between is taken in one
    step. The same match as the lazy form, which tried it at every character (most of the time
    of reading a long body)."""
    other = rf"[^{re.escape(first)}]"
    return rf"({other}*(?:(?!{end}){re.escape(first)}{other}*)*)(?={end})"


@functools.cache
def _sentinel_block(key: str) -> re.Pattern[str]:
    title, marker = STRUCTURED[key]
    closing = re.escape(f"<!-- SECTION:{marker}:END -->")
    text = _text_until(closing, "<")
    return re.compile(rf"## {re.escape(title)}\s*\n<!-- SECTION:{marker}:BEGIN -->\s*\n{text}{closing}", re.IGNORECASE)


def _headed(title: str) -> str:
    """A section by its heading: `## <title>`, the rest of that line, and its text."""
    text = _text_until(_section_end(title), "\n")
    return rf"## {re.escape(title)}\s*\n{text}"


@functools.cache
def _legacy(title: str) -> re.Pattern[str]:
    return re.compile(rf"(\n|^){_headed(title)}", re.IGNORECASE)


@functools.cache
def _header(title: str) -> re.Pattern[str]:
    return re.compile(_headed(title), re.IGNORECASE)


# Where a section's patterns can match. Each starts with its `## <title>` heading (the legacy one
# with the line break before it), so a body is not stepped through by each pattern, character by
# character (two thirds of reading Backlog.md's own board, issue 29): the headings are found in
# the body's case-blind fold with `str.find`, and each pattern is tried at those places alone.
#
# The fold: re's IGNORECASE lets an ASCII letter match itself in either case and four other
# characters ("İ", "ı", "ſ" and the Kelvin sign); those are given their letters, then all is
# lowered. No other character lowers to more than one, so offsets in the fold are the body's,
# and every place a pattern can match holds `## <title>` (lowered) in the fold.
_BLIND_LETTERS = "\u0130\u0131\u017f\u212a"
_TO_LETTERS = str.maketrans(dict(zip(_BLIND_LETTERS, "iisk", strict=True)))


@functools.lru_cache(maxsize=1)  # a body's sections are read one after another
def _folded(content: str) -> str:
    if not content.isascii() and any(char in content for char in _BLIND_LETTERS):
        content = content.translate(_TO_LETTERS)
    return content.lower()


def _heading_starts(content: str, title: str) -> list[int]:
    """The offsets at which `## <title>` starts in `content`, case-blind as the patterns are."""
    folded, heading = _folded(content), f"## {title.lower()}"
    starts = []
    at = folded.find(heading)
    while at >= 0:
        starts.append(at)
        at = folded.find(heading, at + 1)
    return starts


def _line_starts(content: str, title: str) -> list[int]:
    """Where `_legacy(title)` can match: the line break before a heading, or the body's start."""
    return [at - 1 if at else 0 for at in _heading_starts(content, title) if at == 0 or content[at - 1] == "\n"]


def _matches_at(pattern: re.Pattern[str], content: str, starts: list[int]) -> Iterator[re.Match[str]]:
    """What `pattern.finditer(content)` yields, for a pattern that matches only at `starts`
    (ascending) and never empty: tried at each, as finditer would reach it, resuming after a match."""
    resume = 0
    for start in starts:
        if start >= resume:
            match = pattern.match(content, start)
            if match is not None:
                resume = match.end()
                yield match


def _within(index: int, spans: list[Span]) -> bool:
    return any(start <= index < end for start, end in spans)


def _overlap(a: Span, b: Span) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _structured_spans(content: str) -> list[tuple[str, Span]]:
    """Every structured section's block (marked, or by heading where no marked one overlaps),
    as Backlog.md's getStructuredSectionRanges finds them."""
    found: list[tuple[str, Span]] = []
    for key, (title, _marker) in STRUCTURED.items():
        for match in _matches_at(_sentinel_block(key), content, _heading_starts(content, title)):
            found.append((key, match.span()))
        for match in _matches_at(_legacy(title), content, _line_starts(content, title)):
            span = match.span()
            if not any(_overlap(other, span) for _k, other in found):
                found.append((key, span))
    return found


def _first_outside(matches: Iterator[re.Match[str]], spans: list[Span]) -> re.Match[str] | None:
    return next((match for match in matches if not _within(match.start(), spans)), None)


def structured_section(content: str, key: str, *, blocks: list[tuple[str, Span]] | None = None) -> tuple[str | None, Span | None]:
    """A structured section's text (Backlog.md's extractStructuredSection) and the span of
    the block it came from; the block counts even when empty. `blocks`: the body's
    `_structured_spans`, when the caller has found them already."""
    title = STRUCTURED[key][0]
    starts = _heading_starts(content, title)
    if not starts:
        return None, None
    found = _structured_spans(content) if blocks is None else blocks
    others = [span for other, span in found if other != key]
    block = _first_outside(_matches_at(_sentinel_block(key), content, starts), others)
    if block is not None and block.group(1):
        return _text_or_none(block.group(1)), block.span()
    legacy = _first_outside(_matches_at(_header(title), content, starts), others)
    if legacy is not None:
        return _text_or_none(legacy.group(1)), legacy.span()
    return None, block.span() if block is not None else None


def _text_or_none(text: str) -> str | None:
    stripped = text.strip()
    return stripped if stripped and not _ONLY_MARKERS.match(stripped) else None


# --------------------------------------------------------------------------- checklists


@dataclass(frozen=True, slots=True)
class Check:
    """One acceptance criterion or definition-of-done item."""

    checked: bool
    text: str


@dataclass(frozen=True, slots=True)
class Checklist:
    """A checklist section as Backlog.md reads it: its items, the blocks they came from, and
    the lines of those blocks that are not items (prose, sub-headings, plain bullets)."""

    items: tuple[Check, ...] = ()
    spans: tuple[Span, ...] = ()
    bodies: tuple[str, ...] = ()
    prose: bool = False


_CHECKLISTS = {"AC": "Acceptance Criteria", "DOD": "Definition of Done"}


def _tokens(content: str) -> list[tuple[str, str, int, int]]:
    return [(match.group(1), match.group(2), match.start(), match.end()) for match in _TOKEN.finditer(content)]


def _paired(tokens: list[tuple[str, str, int, int]]) -> list[Span]:
    pending: list[tuple[str, str, int, int]] = []
    spans: list[Span] = []
    for token in tokens:
        if token[1] == "BEGIN":
            pending.append(token)
        elif pending:
            spans.append((pending.pop()[2], token[3]))
    return spans


def _marked_spans(tokens: list[tuple[str, str, int, int]]) -> list[Span]:
    """Every balanced pair of markers, family by family, merged (resolveKnownSentinelRanges)."""
    spans: list[Span] = []
    for family in {token[0] for token in tokens}:
        spans.extend(_paired([token for token in tokens if token[0] == family]))
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def checklist(content: str, marker: str) -> Checklist:
    """The acceptance criteria (`AC`) or definition of done (`DOD`) of a body, as Backlog.md's
    parseAllChecklistItems reads them: items of marked blocks (those under their heading),
    else of sections by heading; none when the markers are unbalanced."""
    title = _CHECKLISTS[marker]
    tokens = _tokens(content)
    foreign = _marked_spans([token for token in tokens if token[0] != marker])
    own = [token for token in tokens if token[0] == marker and not _within(token[2], foreign)]
    pairs: list[tuple[tuple[str, str, int, int], tuple[str, str, int, int]]] = []
    begin = None
    for token in own:
        if token[1] == "BEGIN":
            if begin is not None:
                return Checklist()
            begin = token
        elif begin is None:
            return Checklist()
        else:
            pairs.append((begin, token))
            begin = None
    if begin is not None:
        return Checklist()
    blocks: list[tuple[Span, int, str, bool]] = []  # (span, body start, body, marked)
    header = re.compile(rf"(?:\A|\n)(## {re.escape(title)})[\t ]*\n(?:[\t ]*\n)*[\t ]*\Z", re.IGNORECASE)
    for start_token, end_token in pairs:
        head = header.search(content[: start_token[2]])
        if head is None or _within(head.start(1), foreign):
            continue
        raw = content[start_token[3] : end_token[2]]
        lead = re.match(r"[\t ]*\n", raw)
        body_start = start_token[3] + (lead.end() if lead else 0)
        blocks.append(((head.start(1), end_token[3]), body_start, content[body_start : end_token[2]], True))
    if not blocks:
        headings = [
            (match.start(), match.end(), match.group(1).strip())
            for match in re.finditer(r"^##[\t ]+(.+?)[\t ]*$", content, re.MULTILINE)
            if not _within(match.start(), foreign)
        ]
        for index, (start, line_end, heading) in enumerate(headings):
            if heading.lower() != title.lower():
                continue
            end = headings[index + 1][0] if index + 1 < len(headings) else len(content)
            body_start = line_end + 1 if content[line_end : line_end + 1] == "\n" else line_end
            blocks.append(((start, end), body_start, content[body_start:end], False))
    items: list[Check] = []
    prose = False
    for _span, body_start, body, marked in blocks:
        masked = [
            (max(a, body_start) - body_start, min(b, body_start + len(body)) - body_start) for a, b in foreign if a < body_start + len(body) and body_start < b
        ]
        line_item = re.compile(r"^- \[([ x])\] (?:#\d+ )?(.+)$" if marked else r"^- \[([ x])\] (.+)$", re.MULTILINE)
        found = [match for match in line_item.finditer(body) if not _within(match.start(), masked)]
        items.extend(Check(match.group(1) == "x", match.group(2)) for match in found)
        taken = {match.start() for match in found}
        offset = 0
        for line in body.split("\n"):
            if line.strip() and offset not in taken and not _within(offset, masked) and not _ONLY_MARKERS.match(line):
                prose = True
            offset += len(line) + 1
    return Checklist(tuple(items), tuple(span for span, *_ in blocks), tuple(body for _s, _b, body, _m in blocks), prose)


# --------------------------------------------------------------------------- comments


@dataclass(frozen=True, slots=True)
class TaskComment:
    """One comment of a task's `## Comments` block."""

    body: str
    author: str | None = None
    created: str | None = None


_COMMENTS_BLOCK = re.compile(r"(\n|^)## Comments\s*\n<!-- COMMENTS:BEGIN -->\s*\n([\s\S]*?)<!-- COMMENTS:END -->", re.IGNORECASE)


def comments(content: str, *, blocks: list[tuple[str, Span]] | None = None) -> tuple[list[TaskComment], Span | None]:
    """A body's comments (Backlog.md's parseComments: the marked `## Comments` block, either
    `---`-delimited entries or `<!-- COMMENT:BEGIN -->` blocks) and the block's span.
    `blocks`: as for `structured_section`."""
    spans = [span for _key, span in (_structured_spans(content) if blocks is None else blocks)]
    match = _first_outside(_COMMENTS_BLOCK.finditer(content), spans)
    if match is None:
        return [], None
    section = match.group(2)
    if "<!-- COMMENT:BEGIN -->" not in section:
        return _delimited(section), match.span()
    found = []
    for block in re.finditer(r"<!-- COMMENT:BEGIN -->\s*\n([\s\S]*?)<!-- COMMENT:END -->", section, re.IGNORECASE):
        text = block.group(1).strip()
        if not text:
            continue
        split = re.search(r"\n\s*\n", text)
        meta, body = (text[: split.start()], text[split.start() :].strip()) if split else ("", text)
        if body:
            found.append(TaskComment(body, *_comment_meta(meta.split("\n"))))
    return found, match.span()


def _delimited(section: str) -> list[TaskComment]:
    lines = section.split("\n")
    found: list[TaskComment] = []
    at = 0
    while at < len(lines):
        while at < len(lines) and not lines[at].strip():
            at += 1
        if at >= len(lines):
            break
        meta = []
        while at < len(lines) and lines[at].strip() != "---":
            meta.append(lines[at])
            at += 1
        if at >= len(lines):
            break
        at += 1
        body = []
        while at < len(lines) and lines[at].strip() != "---":
            body.append(lines[at])
            at += 1
        if at >= len(lines):
            break
        at += 1
        text = "\n".join(body).strip()
        if text:
            found.append(TaskComment(text, *_comment_meta(meta)))
    return found


def _comment_meta(lines: list[str]) -> tuple[str | None, str | None]:
    author = created = None
    for line in lines:
        match = re.match(r"^([a-zA-Z_]+):\s*(.*)$", line)
        if not match:
            continue
        key, value = match.group(1).lower(), match.group(2)
        if key == "author":
            author = " ".join(value.split()) or None
        elif key == "created":
            created = value.strip() or None
    return author, created


# --------------------------------------------------------------------------- a whole body


@dataclass(frozen=True, slots=True)
class Body:
    """A task body as Backlog.md reads it, plus the text no section holds."""

    sections: dict[str, str] = field(default_factory=dict)  # structured key -> text
    present: frozenset[str] = frozenset()  # the structured keys whose block is there, empty or not
    criteria: Checklist = field(default_factory=Checklist)
    done: Checklist = field(default_factory=Checklist)
    comments: tuple[TaskComment, ...] = ()
    outside: str = ""  # text outside every block Backlog.md reads


def read_body(raw: str) -> Body:
    """Every part of a task body Backlog.md reads (its content is trimmed, line ends made
    `\\n`, as parseMarkdown does)."""
    content = raw.replace("\r\n", "\n").strip()
    sections: dict[str, str] = {}
    spans: list[Span] = []
    present = set()
    blocks = _structured_spans(content)  # once: every section's reading needs them all
    for key in STRUCTURED:
        text, span = structured_section(content, key, blocks=blocks)
        if text is not None:
            sections[key] = text
        if span is not None:
            spans.append(span)
            present.add(key)
    criteria, done = checklist(content, "AC"), checklist(content, "DOD")
    spans.extend(criteria.spans)
    spans.extend(done.spans)
    found, span = comments(content, blocks=blocks)
    if span is not None:
        spans.append(span)
    pieces = []
    position = 0
    for start, end in sorted(spans):
        if start > position:
            pieces.append(content[position:start])
        position = max(position, end)
    pieces.append(content[position:])
    # A marker left over by a hand edit (a second END) is not text anyone wrote.
    outside = "\n\n".join(piece.strip() for piece in pieces if piece.strip() and not _ONLY_MARKERS.match(piece))
    return Body(sections, frozenset(present), criteria, done, tuple(found), outside)


# --------------------------------------------------------------------------- milestones


def milestone_aliases(active: list[tuple[str, str]], archived: list[tuple[str, str]]) -> dict[str, str]:
    """Backlog.md's milestone alias map (src/core/milestones.ts): each milestone's id (and
    `m-N` / `N` for numbered ids) and its title when no other milestone shares it, lowercase,
    to the milestone's id; active milestones first. `active` and `archived` are (id, title)."""
    aliases: dict[str, str] = {}

    def id_keys(value: str) -> list[str]:
        key = value.strip().lower()
        keys = [key] if key else []
        number = re.fullmatch(r"m-(\d+)", key) or re.fullmatch(r"(\d+)", key)
        if number:
            keys += [f"m-{int(number.group(1))}", str(int(number.group(1)))]
        return keys

    reserved = {key for ident, _title in active + archived for key in id_keys(ident)}
    active_titles: dict[str, int] = {}
    for _ident, title in active:
        if title.strip():
            active_titles[title.strip().lower()] = active_titles.get(title.strip().lower(), 0) + 1
    archived_titles: dict[str, int] = {}
    for _ident, title in archived:
        key = title.strip().lower()
        if key and key not in active_titles:
            archived_titles[key] = archived_titles.get(key, 0) + 1
    for group, counts in ((active, active_titles), (archived, archived_titles)):
        for ident, title in group:
            if not ident.strip():
                continue
            for key in id_keys(ident):
                aliases.setdefault(key, ident.strip())
            title_key = title.strip().lower()
            if title_key and title_key not in reserved and counts.get(title_key) == 1:
                aliases.setdefault(title_key, ident.strip())
    return aliases


def resolve_milestone(value: str, aliases: Mapping[str, str]) -> str | None:
    """The id of the milestone a task's `milestone:` value names, or None."""
    key = value.strip().lower()
    if not key:
        return None
    if key in aliases:
        return aliases[key]
    number = re.fullmatch(r"m-(\d+)", key) or re.fullmatch(r"(\d+)", key)
    if number:
        return aliases.get(f"m-{int(number.group(1))}") or aliases.get(str(int(number.group(1))))
    return None

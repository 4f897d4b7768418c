"""One-line summaries and short contexts of markdown text, by LoopFlow's heuristic.

Core layer: pure functions over strings (stdlib only). A summary is at most 100 characters:
the whole text when it fits, else its first sentence when that fits, else the text cut at a
word boundary with "…" (one character, counted in the limit). Cuts never split a combining
mark or a joined emoji from its base character. Markdown markup (headings, list markers,
code fences, emphasis, link targets) is dropped first, so a capsule's `## Objective` heading
never becomes its summary.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MAX_SUMMARY = 100
MAX_CONTEXT = 300
ELLIPSIS = "…"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(?P<text>.*?))?[ \t#]*$")
_ITEM = re.compile(r"^[ \t]*(?:>[ \t]?)*(?:[-*+][ \t]+|\d{1,9}[.)][ \t]+)?(?:\[[ xX>!~]\][ \t]+)?")
_RULE = re.compile(r"^ {0,3}(?:[-*_][ \t]*){3,}$")
_LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\([^)]*\)")
_EMPHASIS = re.compile(r"(\*\*|__|`)")
_SPACE = re.compile(r"\s+")
# A sentence ends at . ! ? (or their CJK forms) followed by a blank or the end of the text.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[。！？]")
# The characters a line must start with (after up to three spaces, for the first three) for
# each pattern above to match it; \d of _ITEM is any decimal digit.
_FENCE_START = frozenset("`~")
_RULE_START = frozenset("-*_")
_ITEM_START = frozenset(" \t>-*+[")
# Characters that attach to the one before them: never end a cut right before one.
_JOINERS = frozenset({"\u200d", "\ufe0e", "\ufe0f"})


@dataclass(frozen=True, slots=True)
class Summarization:
    """A summary, an optional longer context, and how they were made."""

    summary: str
    context: str | None
    method: str = "heuristic"


def paragraphs(markdown: str, enough: int | None = None) -> list[str]:
    """The text's paragraphs as plain one-line strings, markup removed; headings only when
    the text has nothing else. With `enough`, stops once the paragraphs hold more than that
    many characters (a summary never needs the rest of a long body)."""
    result: list[str] = []
    headings: list[str] = []
    current: list[str] = []
    in_fence = False
    size = 0

    def close() -> None:
        nonlocal size
        if current:
            text = _clean(" ".join(current))
            result.append(text)
            size += len(text) + 1
            current.clear()

    # Each pattern is tried only on a line whose first characters could begin a match (the
    # index summarizes every file it reads; most lines are plain text). tests/index/
    # test_search_summaries.py checks the result against the patterns tried on every line.
    for line in markdown.splitlines():
        if enough is not None and size > enough:
            break
        first = line.lstrip(" ")[:1]
        if first in _FENCE_START and _FENCE.match(line):
            in_fence = not in_fence
            close()
            continue
        if in_fence:
            continue
        heading = _HEADING.match(line) if first == "#" else None
        if heading:
            close()
            if heading.group("text"):
                headings.append(_clean(heading.group("text")))
            continue
        if not line.strip() or (first in _RULE_START and _RULE.match(line)):
            close()
            continue
        start = line[:1]
        stripped = _ITEM.sub("", line, count=1) if start in _ITEM_START or start.isdecimal() else line
        if stripped != line.lstrip() and current:
            close()  # each list item reads as its own paragraph
        current.append(stripped)
    close()
    result = [text for text in result if text]
    return result or [text for text in headings if text]


def plain_text(markdown: str, enough: int | None = None) -> str:
    """The text without markdown markup, as one line (with `enough`: at least that much of it,
    when the text is longer)."""
    return " ".join(paragraphs(markdown, enough))


def _clean(text: str) -> str:
    if "](" in text:
        text = _LINK.sub(lambda match: match.group("text"), text)
    if "`" in text or "**" in text or "__" in text:
        text = _EMPHASIS.sub("", text)
    return " ".join(text.split())  # == _SPACE.sub(" ", text).strip(): both split at str.isspace()


def extract_first_sentence(text: str) -> str | None:
    """The first sentence of `text` (up to and including . ! or ?), or None without one."""
    text = _SPACE.sub(" ", text).strip()
    match = _SENTENCE_END.search(text)
    if match is None:
        return None
    return text[: match.end()].strip() or None


def truncate_at_word(text: str, max_length: int = MAX_SUMMARY) -> str:
    """`text` cut to at most `max_length` characters at a word boundary, ending in "…" when cut.

    A single word longer than the limit is cut inside the word.
    """
    if max_length < 1:
        raise ValueError("max_length must be at least 1")
    text = _SPACE.sub(" ", text).strip()
    if len(text) <= max_length:
        return text
    room = max_length - len(ELLIPSIS)
    cut = text[:room]
    if text[room] != " ":
        space = cut.rfind(" ")
        if space > 0:
            cut = cut[:space]
    cut = _safe_end(text, len(cut))
    cut = cut.rstrip(" ,;:-–—")
    return cut + ELLIPSIS


def _safe_end(text: str, end: int) -> str:
    """`text[:end]`, moved back so no combining mark or joiner is cut from its base."""
    while 0 < end < len(text) and (unicodedata.combining(text[end]) or text[end] in _JOINERS or text[end - 1] in _JOINERS):
        end -= 1
    return text[:end]


def summarize(content: str, max_length: int = MAX_SUMMARY) -> str:
    """A summary of markdown `content`: all of it when short, else the first sentence when it
    fits, else a word-boundary cut with "…". Empty content gives ""."""
    # Reading a little past the limit decides every case the whole text would.
    text = plain_text(content, enough=max_length + 1)
    if len(text) <= max_length:
        return text
    first = extract_first_sentence(text)
    if first is not None and len(first) <= max_length:
        return first
    return truncate_at_word(text, max_length)


def extract_context(content: str, max_length: int = MAX_CONTEXT) -> str | None:
    """Two or three sentences expanding on the summary: the first paragraph, sentence by
    sentence up to `max_length` characters. None for empty content."""
    parts = paragraphs(content, enough=max_length + 1)
    if not parts:
        return None
    first = parts[0]
    if len(first) <= max_length:
        return first
    taken = ""
    rest = first
    while rest:
        sentence = extract_first_sentence(rest)
        if sentence is None:
            break
        candidate = f"{taken} {sentence}".strip()
        if len(candidate) > max_length:
            break
        taken = candidate
        rest = rest[len(sentence) :].strip()
    return taken or truncate_at_word(first, max_length)


def summarize_task(title: str, task_type: str | None = None, max_length: int = MAX_SUMMARY) -> str:
    """A task's summary: its title, with a `[TYPE]` prefix kept (or added from `task_type`)."""
    text = _SPACE.sub(" ", title).strip()
    if task_type and not text.startswith("["):
        text = f"[{task_type.strip().upper()}] {text}"
    return truncate_at_word(text, max_length)


def summarize_heuristic(content: str, max_summary: int = MAX_SUMMARY, max_context: int = MAX_CONTEXT, include_context: bool = True) -> Summarization:
    """Summary and context of `content` by the heuristic (the spec's `summarizeHeuristic`)."""
    context = extract_context(content, max_context) if include_context else None
    return Summarization(summarize(content, max_summary), context)

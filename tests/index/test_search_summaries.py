"""Summaries by the heuristic: the spec's summarization table, plus markdown and Unicode."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.foundation.summaries import (
    ELLIPSIS,
    extract_context,
    extract_first_sentence,
    paragraphs,
    plain_text,
    summarize,
    summarize_heuristic,
    summarize_task,
    truncate_at_word,
)

LONG = "Token refresh must run before expiry, or the retry loop spins for a long while. " * 3


def test_short_content_is_its_own_summary() -> None:
    assert summarize("Short note. Two sentences.") == "Short note. Two sentences."


def test_content_with_a_clear_first_sentence_uses_it() -> None:
    assert summarize(LONG) == "Token refresh must run before expiry, or the retry loop spins for a long while."


@pytest.mark.parametrize("end", ["!", "?"])
def test_first_sentence_ends_at_any_terminator(end: str) -> None:
    text = f"Watch the lock{end} " + "word " * 40
    assert summarize(text) == f"Watch the lock{end}"


def test_content_without_a_period_truncates_at_a_word_boundary() -> None:
    text = "word " * 40
    summary = summarize(text)
    assert len(summary) <= 100
    assert summary.endswith(ELLIPSIS)
    assert summary[: -len(ELLIPSIS)].split() == ["word"] * len(summary[: -len(ELLIPSIS)].split())


def test_truncation_never_cuts_mid_word() -> None:
    words = ["alpha", "bravo", "charlie", "delta", "echo"] * 10
    summary = truncate_at_word(" ".join(words), 40)
    assert all(word in words for word in summary[: -len(ELLIPSIS)].split())


def test_ellipsis_only_when_truncated() -> None:
    assert truncate_at_word("exactly ten", 11) == "exactly ten"
    assert truncate_at_word("exactly ten", 10).endswith(ELLIPSIS)


def test_empty_content_gives_an_empty_summary() -> None:
    assert summarize("") == ""
    assert summarize("   \n\n") == ""
    assert extract_context("") is None


def test_a_very_long_single_word_is_cut_with_an_ellipsis() -> None:
    summary = summarize("x" * 500)
    assert summary == "x" * 99 + ELLIPSIS


def test_unicode_is_cut_between_characters_not_inside_them() -> None:
    accented = "e\u0301" * 80  # e + combining acute accent
    summary = truncate_at_word(accented, 50)
    assert len(summary) <= 50
    body = summary[: -len(ELLIPSIS)]
    assert not unicodedata.combining(body[0]) and body == "e\u0301" * (len(body) // 2)
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467 " * 30
    cut = truncate_at_word(family, 20)
    assert not cut[: -len(ELLIPSIS)].rstrip().endswith("\u200d")


def test_cjk_sentences() -> None:
    assert extract_first_sentence("これはテストです。次の文。") == "これはテストです。"


@given(st.text(max_size=400), st.integers(min_value=1, max_value=120))
def test_summaries_never_exceed_the_limit(text: str, limit: int) -> None:
    assert len(summarize(text, limit)) <= limit
    assert len(truncate_at_word(text, limit)) <= limit


def test_markdown_markup_is_not_part_of_the_summary() -> None:
    capsule = "## Objective\n- Keep the **login** flow working while [sessions](http://x) move.\n\n## Current status\n- ok\n"
    assert summarize(capsule) == "Keep the login flow working while sessions move. ok"
    assert summarize("```python\ncode()\n```\nThe real text.") == "The real text."
    assert summarize("# Only a heading") == "Only a heading"


def test_plain_text_keeps_list_items_apart() -> None:
    assert plain_text("- one\n- two\ncontinued") == "one two continued"


def test_context_extracts_the_first_paragraph() -> None:
    assert extract_context("First paragraph here. Second sentence.\n\nAnother paragraph.") == "First paragraph here. Second sentence."


def test_context_keeps_whole_sentences_within_its_limit() -> None:
    text = " ".join(f"Sentence number {n} is here." for n in range(40))
    context = extract_context(text, 100)
    assert context is not None and len(context) <= 100 and context.endswith(".")


def test_task_summary_keeps_the_type_prefix() -> None:
    assert summarize_task("[IMPL] Add search") == "[IMPL] Add search"
    assert summarize_task("Add search", "impl") == "[IMPL] Add search"
    long = summarize_task("[BUG] " + "very long title " * 20)
    assert long.startswith("[BUG] ") and len(long) <= 100


def test_summarize_heuristic_shape() -> None:
    result = summarize_heuristic(LONG)
    assert result.method == "heuristic"
    assert result.summary and result.context and len(result.context) <= 300
    assert summarize_heuristic(LONG, include_context=False).context is None


# The heuristic as it was before its patterns were tried only on lines that could match them:
# the reference the faster one must agree with.
_REF_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_REF_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(?P<text>.*?))?[ \t#]*$")
_REF_ITEM = re.compile(r"^[ \t]*(?:>[ \t]?)*(?:[-*+][ \t]+|\d{1,9}[.)][ \t]+)?(?:\[[ xX>!~]\][ \t]+)?")
_REF_RULE = re.compile(r"^ {0,3}(?:[-*_][ \t]*){3,}$")
_REF_LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\([^)]*\)")
_REF_EMPHASIS = re.compile(r"(\*\*|__|`)")
_REF_SPACE = re.compile(r"\s+")


def _reference_clean(text: str) -> str:
    text = _REF_LINK.sub(lambda match: match.group("text"), text)
    text = _REF_EMPHASIS.sub("", text)
    return _REF_SPACE.sub(" ", text).strip()


def reference_paragraphs(markdown: str, enough: int | None = None) -> list[str]:
    result: list[str] = []
    headings: list[str] = []
    current: list[str] = []
    in_fence = False
    size = 0

    def close() -> None:
        nonlocal size
        if current:
            text = _reference_clean(" ".join(current))
            result.append(text)
            size += len(text) + 1
            current.clear()

    for line in markdown.splitlines():
        if enough is not None and size > enough:
            break
        if _REF_FENCE.match(line):
            in_fence = not in_fence
            close()
            continue
        if in_fence:
            continue
        heading = _REF_HEADING.match(line)
        if heading:
            close()
            if heading.group("text"):
                headings.append(_reference_clean(heading.group("text")))
            continue
        if not line.strip() or _REF_RULE.match(line):
            close()
            continue
        stripped = _REF_ITEM.sub("", line, count=1)
        if stripped != line.lstrip() and current:
            close()
        current.append(stripped)
    close()
    result = [text for text in result if text]
    return result or [text for text in headings if text]


# Markdown's markup characters, digits of two scripts, every kind of white space and line
# break str.splitlines and \s know, letters, a combining mark.
MARKDOWN_ALPHABET = st.sampled_from(
    list("#`~-*_+>[]()!.?:xX 9٣") + ["\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u00a0", "\u2028", "\u3000", "a", "Z", "é", "\u0301", "。"]
)


@settings(max_examples=3000, deadline=None)
@given(text=st.text(MARKDOWN_ALPHABET, max_size=80), enough=st.one_of(st.none(), st.integers(0, 60)))
def test_paragraphs_agree_with_the_patterns_tried_on_every_line(text: str, enough: int | None) -> None:
    assert paragraphs(text, enough) == reference_paragraphs(text, enough)
    assert summarize(text) == reference_summary(text)


def reference_summary(content: str) -> str:
    text = " ".join(reference_paragraphs(content, enough=101))
    if len(text) <= 100:
        return text
    first = extract_first_sentence(text)
    if first is not None and len(first) <= 100:
        return first
    return truncate_at_word(text, 100)

"""The Backlog.md reader's fast way of finding a body's sections equals the plain one: the
patterns as Backlog.md writes them (a lazy `[\\s\\S]*?`, searched at every character), kept
here as the reference, give the same matches as the reader's patterns tried at the headings
its case-blind fold finds (issue 29: reading Backlog.md's own board was mostly these scans)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.migrate import backlog_format as bf


def reference_end(title: str) -> str:
    others = [re.escape(known) for known in bf._KNOWN_TITLES if known.lower() != title.lower()]
    return rf"(?=\n+## (?:{'|'.join(others)})(?:\s|\Z)|\n*\Z)"


def reference_patterns(key: str) -> dict[str, re.Pattern[str]]:
    title, marker = bf.STRUCTURED[key]
    return {
        "sentinel": re.compile(rf"## {re.escape(title)}\s*\n<!-- SECTION:{marker}:BEGIN -->\s*\n([\s\S]*?)<!-- SECTION:{marker}:END -->", re.IGNORECASE),
        "legacy": re.compile(rf"(\n|^)## {re.escape(title)}\s*\n([\s\S]*?){reference_end(title)}", re.IGNORECASE),
        "header": re.compile(rf"## {re.escape(title)}\s*\n([\s\S]*?){reference_end(title)}", re.IGNORECASE),
    }


def fast_matches(key: str, kind: str, content: str) -> list[re.Match[str]]:
    title = bf.STRUCTURED[key][0]
    if kind == "sentinel":
        return list(bf._matches_at(bf._sentinel_block(key), content, bf._heading_starts(content, title)))
    if kind == "legacy":
        return list(bf._matches_at(bf._legacy(title), content, bf._line_starts(content, title)))
    return list(bf._matches_at(bf._header(title), content, bf._heading_starts(content, title)))


# Pieces of bodies: every known heading in several cases (and with the four characters other
# than ASCII letters that a case-blind pattern takes for one), every section marker, opening and
# closing, line breaks, spaces, and text with marker-like characters.
PIECES = [
    *(f"## {title}" for title in bf._KNOWN_TITLES),
    "## description",
    "## IMPLEMENTATION PLAN",
    "## Descr\u0130ption",
    "## Final \u017fummary",
    "## Implementation Notes\t",
    "### Description",
    "##Description",
    *(f"<!-- SECTION:{marker}:{end} -->" for _title, marker in bf.STRUCTURED.values() for end in ("BEGIN", "END")),
    "<!-- section:description:end -->",
    "<!-- SECTION:PLAN:END --",
    "\n",
    "\n\n",
    "\r\n",
    "  ",
    "text",
    "<",
    "<!--",
    "#",
    "\u212a\u0131",
    "- [x] #1 done",
]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=40))
def test_the_reader_finds_the_sections_the_reference_patterns_find(pieces: list[str]) -> None:
    content = "".join(pieces)
    for key in bf.STRUCTURED:
        for kind, reference in reference_patterns(key).items():
            expected = [(match.span(), match.groups()) for match in reference.finditer(content)]
            assert [(match.span(), match.groups()) for match in fast_matches(key, kind, content)] == expected, (key, kind)


def test_known_bodies() -> None:
    bodies = [
        "## Description\n<!-- SECTION:DESCRIPTION:BEGIN -->\nFirst.\n<!-- SECTION:DESCRIPTION:END -->\n\n## Implementation Plan\n1. step\n",
        "## Description\n\nNo markers.\n\n\n## Acceptance Criteria\n- [ ] a\n\n## Notes\nlast\n\n",
        "intro\n## description\ntext\n## DESCRIPTION\nagain\n",
        "## Description\n<!-- SECTION:DESCRIPTION:BEGIN -->\nnever closed <b> <!-- x -->\n",
        "## Final \u017fummary\n<!-- SECTION:FINAL_SUMMARY:BEGIN -->\ndone\n<!-- SECTION:FINAL_SUMMARY:END -->",
        "",
        "## Description",
    ]
    for content in bodies:
        for key in bf.STRUCTURED:
            for kind, reference in reference_patterns(key).items():
                expected = [(match.span(), match.groups()) for match in reference.finditer(content)]
                assert [(match.span(), match.groups()) for match in fast_matches(key, kind, content)] == expected, (content, key, kind)
    # The fold keeps every offset where the characters a case-blind pattern takes for letters are.
    folded = bf._folded("a\u0130b\u0131c\u017fd\u212ae\u00c9")
    assert folded == "aibicsdke\u00e9" and len(folded) == 10


def test_a_section_without_its_closing_marker_is_read_by_its_heading() -> None:
    """A marked block never closed, over thousands of `<`: no marked block is found, and the
    heading's section runs to the body's end, as the reference patterns have it."""
    content = "## Description\n<!-- SECTION:DESCRIPTION:BEGIN -->\n" + "a<b " * 5000
    assert fast_matches("description", "sentinel", content) == []
    assert [match.span() for match in fast_matches("description", "header", content)] == [(0, len(content))]

"""MEMORY.md core: categories, keyword sorting, and appending entries without touching the rest."""

from __future__ import annotations

import difflib
from datetime import date
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cstack import memory
from moss_files.foundation.errors import InvalidRequest

TEMPLATE = resources.files("moss_files.templates").joinpath("cstack", "MEMORY.md").read_text(encoding="utf-8")
TODAY = date(2026, 1, 21)


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("I prefer tabs in Makefiles", "preferences"),
        ("Always run the linter", "preferences"),
        ("Never push to main", "preferences"),
        ("We decided to keep SQLite", "decisions"),
        ("Chose ruff over flake8", "decisions"),
        ("Plain files because git merges them", "decisions"),
        ("Gotcha: the cache ignores symlinks", "gotchas"),
        ("Be careful with tz-naive datetimes", "gotchas"),
        ("It turns out flock is per open file", "gotchas"),
        ("The API lives in src/api", "facts"),
        ("Always careful", "preferences"),  # rules are checked in order: preferences first
    ],
)
def test_auto_categorisation(text: str, category: str) -> None:
    assert memory.categorize(text) == category


def _added(old: str, new: str) -> list[str]:
    return [line[1:] for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line.startswith("+ ")]


def _removed(old: str, new: str) -> list[str]:
    return [line[1:] for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line.startswith("- ")]


def test_each_category_gets_its_entry_format() -> None:
    text = TEMPLATE
    for entry, category, expected in (
        ("Turns out git needs a user", None, " - **2026-01-21**: Turns out git needs a user"),
        ("Always write the test first", None, " - Always write the test first"),
        ("The docs live in docs/", None, " - The docs live in docs/"),
        ("Use SQLite because it is one file", None, " | Use SQLite |  | because it is one file | 2026-01-21 |"),
        ("Queue | none | not needed yet", "decisions", " | Queue | none | not needed yet | 2026-01-21 |"),
    ):
        new = memory.remember(text, entry, TODAY, category).text
        assert [line for line in _added(text, new) if line.strip()] == [expected]
        assert _removed(text, new) == []
        text = new
    parsed = memory.parse_memory(text)
    assert [(e.category, e.text) for e in parsed.entries] == [
        ("decisions", "Use SQLite"),
        ("decisions", "Queue"),
        ("gotchas", "Turns out git needs a user"),
        ("preferences", "Always write the test first"),
        ("facts", "The docs live in docs/"),
    ]


def test_a_decision_sentence_keeps_every_word_and_names_its_choice() -> None:
    """`remember "We decided to use Postgres because of JSONB"` once stored
    `| We decided to use Postgres |  | of JSONB |`: the word "because" was lost, so the why
    read as nonsense, and the choice was left empty."""
    new = memory.remember(TEMPLATE, "We decided to use Postgres because of JSONB", TODAY).text
    (row,) = [line for line in _added(TEMPLATE, new) if line.strip()]
    assert row == " | We decided to use Postgres | use Postgres | because of JSONB | 2026-01-21 |"
    (entry,) = memory.parse_memory(new).entries
    assert entry.cells == ("We decided to use Postgres", "use Postgres", "because of JSONB", "2026-01-21")
    assert f"{entry.cells[0]} {entry.cells[2]}" == "We decided to use Postgres because of JSONB"


def test_second_entry_goes_right_after_the_first() -> None:
    once = memory.remember(TEMPLATE, "one", TODAY, "facts").text
    twice = memory.remember(once, "two", TODAY, "facts")
    lines = twice.text.splitlines()
    assert lines[twice.entry.line - 2 : twice.entry.line] == ["- one", "- two"]


def test_explicit_category_and_aliases() -> None:
    done = memory.remember(TEMPLATE, "Always X", TODAY, "Gotcha")
    assert done.entry.category == "gotchas" and done.entry.date == "2026-01-21"
    with pytest.raises(InvalidRequest):
        memory.remember(TEMPLATE, "x", TODAY, "rumours")


def test_decisions_table_is_created_when_missing_and_sections_when_absent() -> None:
    text = "# Memory\n\n## Decisions\n\nNotes about choices.\n\n## Facts\n"
    done = memory.remember(text, "Chose X", TODAY)
    assert done.text == (
        "# Memory\n\n## Decisions\n\nNotes about choices.\n\n"
        "| Decision | Choice | Why | Date |\n|----------|--------|-----|------|\n| Chose X | X |  | 2026-01-21 |\n"
        "\n## Facts\n"
    )
    bare = memory.remember("", "a fact", TODAY)
    assert bare.text == "## Facts\n\n- a fact\n" and bare.entry.line == 3


@pytest.mark.parametrize("text", ["", "   ", "two\nlines"])
def test_bad_entries_are_refused(text: str) -> None:
    with pytest.raises(InvalidRequest):
        memory.remember(TEMPLATE, text, TODAY)


_LINES = st.sampled_from(
    [
        "## Decisions",
        "## Gotchas",
        "## Preferences",
        "## Facts",
        "## Elsewhere",
        "### Within",
        "",
        "- a fact",
        "- **2026-01-02**: a gotcha",
        "| Decision | Choice | Why | Date |",
        "|----------|--------|-----|------|",
        "| Pick X | X | because | 2026-01-03 |",
        "Plain words.",
        "<!-- a note -->",
        "<!--",
        "-->",
        "```",
        "~~~",
        "_None._",
    ]
)
_ENTRY = st.lists(st.sampled_from(["word", " ", "<!--", "-->", "```", "|", "**", "because", "always", "gotcha", "x"]), min_size=1, max_size=6).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINES, max_size=30), _ENTRY, st.sampled_from([None, *memory.CATEGORIES]))
def test_remember_answers_what_a_whole_parse_reads_and_never_changes_the_other_entries(lines: list[str], entry: str, category: str | None) -> None:
    """The entry `remember` answers is the one a parse of the whole new file reads on its line,
    and every other entry reads as it did: one that would open a comment or a fence over them
    is refused."""
    text = "".join(line + "\n" for line in lines)
    old = memory.parse_memory(text).entries
    try:
        done = memory.remember(text, entry, TODAY, category)
    except InvalidRequest:
        assert entry.strip() == "" or any(mark in entry for mark in ("<!--", "```", "~~~")) or "<!--" in text or "```" in text or "~~~" in text
        return
    full = memory.parse_memory(done.text).entries
    assert done.entry in full
    assert [(e.category, e.text, e.date, e.cells) for e in full if e is not done.entry and e.line != done.entry.line] == [
        (e.category, e.text, e.date, e.cells) for e in old
    ]


def test_an_entry_that_would_hide_the_ones_after_it_is_refused() -> None:
    text = "# Memory\n\n## Gotchas\n\n- **2026-01-02**: first\n\n## Facts\n\n- a fact\n"
    with pytest.raises(InvalidRequest, match="hide the entries after it"):
        memory.remember(text, "Gotcha: <!-- opens a comment", TODAY, "gotchas")
    done = memory.remember(text, "Gotcha: <!-- closed --> on its line", TODAY, "gotchas")
    assert [e.text for e in memory.parse_memory(done.text).entries] == ["first", "Gotcha: <!-- closed --> on its line", "a fact"]

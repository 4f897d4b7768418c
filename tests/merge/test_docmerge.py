"""Frontmatter documents merged field by field (foundation.docmerge), and which merge the
driver picks for a path (moss_files.merge.driver.merge_for)."""

from __future__ import annotations

import pytest

from moss_files.foundation import conflicts, document
from moss_files.foundation.docmerge import merge_document
from moss_files.merge.driver import merge_for

BASE = """---
id: 01J0000000000000000000000A
name: auth  # the name agents fetch it by
title: Login flow
tags: [auth]
updated_at: 2026-01-01T10:00:00Z
---
## Objective
Ship login.

## Status
Started.
"""


def test_fields_changed_on_different_sides_all_land_and_comments_stay() -> None:
    ours = BASE.replace("title: Login flow", "title: Login flow v2")
    theirs = BASE.replace("tags: [auth]", "tags: [auth, security]")
    merged = merge_document(BASE, ours, theirs)
    meta = document.parse(merged.text).meta
    assert merged.clean and meta["title"] == "Login flow v2" and meta["tags"] == ["auth", "security"]
    assert "name: auth  # the name agents fetch it by" in merged.text  # our line, as written


def test_modification_times_take_the_later_value() -> None:
    ours = BASE.replace("2026-01-01T10:00:00Z", "2026-01-02T10:00:00Z").replace("Started.", "Half done.")
    theirs = BASE.replace("2026-01-01T10:00:00Z", "2026-01-03T10:00:00Z").replace("Ship login.", "Ship login and logout.")
    merged = merge_document(BASE, ours, theirs)
    assert merged.clean and document.parse(merged.text).meta["updated_at"] == "2026-01-03T10:00:00Z"
    assert "Half done." in merged.text and "Ship login and logout." in merged.text  # the body by diff3


def test_a_field_both_sides_changed_differently_is_a_conflict_on_that_field_alone() -> None:
    ours, theirs = BASE.replace("title: Login flow", "title: Ours"), BASE.replace("title: Login flow", "title: Theirs")
    merged = merge_document(BASE, ours, theirs)
    assert merged.conflicted_keys == ("title",) and merged.body_conflicts == 0
    assert "<<<<<<< ours\ntitle: Ours\n||||||| base\ntitle: Login flow\n=======\ntitle: Theirs\n>>>>>>> theirs\n" in merged.text
    line = conflicts.first_marker_line(merged.text)
    assert line is not None and merged.text.splitlines()[line - 1] == "<<<<<<< ours"


def test_a_key_removed_on_one_side_and_untouched_on_the_other_is_removed() -> None:
    merged = merge_document(BASE, BASE.replace("tags: [auth]\n", ""), BASE)
    assert merged.clean and "tags" not in document.parse(merged.text).meta


def test_nested_mappings_merge_key_by_key() -> None:
    base = "---\nid: x\nlinks:\n  parent: a\n  next: b\n---\n"
    ours = base.replace("parent: a", "parent: c")
    theirs = base.replace("next: b", "next: d")
    merged = merge_document(base, ours, theirs)
    assert merged.clean and document.parse(merged.text).meta["links"] == {"parent": "c", "next": "d"}


def test_a_body_changed_in_one_place_by_both_is_a_body_conflict() -> None:
    merged = merge_document(BASE, BASE.replace("Started.", "A"), BASE.replace("Started.", "B"))
    assert merged.body_conflicts == 1 and merged.conflicted_keys == ()


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (".cstack/PLAN.md", "cstack-plan"),
        ("sleeves/bob/.cstack/CURRENT.md", "cstack-current"),
        (".cstack/MEMORY.md", "cstack-memory"),
        (".needlecast/outbox.md", "needlecast-mailbox"),
        ("sleeves/bob/.needlecast/inbox.md", "needlecast-mailbox"),
        (".moss/capsules/default/auth.md", "capsules-document"),
        (".moss/board/tasks/TASK-1.md", "board-item"),
        (".moss/insights/INS-1.md", "insights-document"),
        ("README.md", "text"),
    ],
)
def test_the_driver_picks_the_merge_by_path(path: str, kind: str) -> None:
    assert merge_for(path)[0] == kind


def test_a_board_item_finished_on_one_side_stays_finished() -> None:
    base = "---\nid: TASK-1\nstatus: WORKING\n---\n"
    _, merge = merge_for(".moss/board/tasks/TASK-1.md")
    from moss_files.foundation.textmerge import Labels

    text, count = merge(base, base.replace("WORKING", "DONE"), base.replace("WORKING", "REVIEW"), Labels())
    assert count == 0 and "status: DONE" in text
    text, count = merge(base, base.replace("WORKING", "PLANNING"), base.replace("WORKING", "REVIEW"), Labels())
    assert count == 1  # neither finished: a person decides

"""CURRENT.md core: the three dialects, frontmatter, placeholders, and the Active Task edits."""

from __future__ import annotations

from datetime import date
from importlib import resources
from pathlib import Path

import pytest

from cstack import current
from moss_files.foundation.errors import InvalidDocument

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cstack"
TEMPLATE = resources.files("moss_files.templates").joinpath("cstack", "CURRENT.md").read_text(encoding="utf-8")
TODAY = date(2026, 1, 21)


@pytest.mark.parametrize("text", ["", "\n\n", "# Current Context\n"])
def test_missing_or_empty_is_the_empty_state(text: str) -> None:
    state = current.parse_current(text)
    assert (state.task, state.status, state.focus, state.next_steps, state.blockers) == (None, None, None, (), ())
    assert state.state == "idle" and state.progress == current.Progress(0, 0)


def test_v1_bullets_may_use_stars() -> None:
    state = current.parse_current("## Current Task\nShip it\n\n## Next Steps\n* one\n* two\n")
    assert state.dialect == "v1" and state.task == "Ship it" and state.next_steps == ("one", "two")


def test_protectorate_progress_counts_checkboxes() -> None:
    state = current.parse_current((FIXTURES / "current_protectorate.md").read_text(encoding="utf-8"))
    assert state.progress == current.Progress(total=5, completed=2)
    assert state.blockers == ()  # "(none)"
    blocked = current.parse_current("## Status\nblocked\n\n## Blockers\n- waiting for keys\n- CI is red\n")
    assert blocked.state == "blocked" and blocked.blockers == ("waiting for keys", "CI is red")


def test_template_subtasks_skip_the_placeholder_and_count_uppercase_x() -> None:
    text = TEMPLATE.replace("- [ ] _subtask_", "- [ ] _subtask_\n- [X] wire the route\n- [ ] add the test")
    assert current.parse_current(text).progress == current.Progress(total=2, completed=1)


def test_frontmatter_wins_over_the_body() -> None:
    state = current.parse_current((FIXTURES / "current_frontmatter.md").read_text(encoding="utf-8"))
    assert state.status == "blocked" and state.blockers == ("waiting for the staging database",)
    assert state.task == "Migrate storage"  # not in the frontmatter: read from the body


def test_bad_frontmatter_and_wrong_types_are_errors_with_a_line() -> None:
    with pytest.raises(InvalidDocument) as caught:
        current.parse_current("---\nstatus: [working\n---\n## Task\nx\n", "CURRENT.md")
    assert caught.value.code.startswith("FRONTMATTER") and caught.value.path == "CURRENT.md" and caught.value.line
    with pytest.raises(InvalidDocument) as caught:
        current.parse_current("---\ntask:\n  nested: mapping\n---\n", "CURRENT.md")
    assert caught.value.code == "SCHEMA_ERROR"


def test_activate_changes_exactly_two_lines_and_clear_restores_the_template() -> None:
    active = current.activate_task(TEMPLATE, "User auth", TODAY)
    old, new = TEMPLATE.splitlines(), active.splitlines()
    assert len(old) == len(new)
    assert [(a, b) for a, b in zip(old, new, strict=True) if a != b] == [
        ("> **Last Updated:** -- | **Active Task:** _none_", "> **Last Updated:** 2026-01-21 | **Active Task:** User auth"),
        ("**Task:** _none_ | **Status:** -- | **Started:** --", "**Task:** User auth | **Status:** WIP | **Started:** 2026-01-21"),
    ]
    state = current.parse_current(active)
    assert (state.task, state.status, state.state, state.started) == ("User auth", "WIP", "working", "2026-01-21")
    cleared = current.clear_task(active, "USER AUTH", TODAY)
    assert cleared == TEMPLATE.replace("**Last Updated:** --", "**Last Updated:** 2026-01-21")


def test_clear_leaves_a_different_active_task_alone() -> None:
    active = current.activate_task(TEMPLATE, "User auth", TODAY)
    assert current.clear_task(active, "Something else", TODAY) == active


def test_dialects_without_the_active_task_line_are_left_unchanged() -> None:
    for name in ("current_v1.md", "current_protectorate.md"):
        text = (FIXTURES / name).read_text(encoding="utf-8")
        assert current.activate_task(text, "X", TODAY) == text


def test_edits_keep_crlf_and_the_rest_of_a_hand_edited_line() -> None:
    text = "**Task:** old | **Status:** WIP | **Started:** 2026-01-01 | **Owner:** ana\r\nbody\r\n"
    edited = current.activate_task(text, "new one", TODAY)
    assert edited == "**Task:** new one | **Status:** WIP | **Started:** 2026-01-21 | **Owner:** ana\r\nbody\r\n"

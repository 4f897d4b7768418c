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


def changed_lines(old: str, new: str) -> list[tuple[str, str]]:
    return [(a, b) for a, b in zip(old.splitlines(), new.splitlines(), strict=True) if a != b]


def test_start_changes_exactly_two_lines_and_done_restores_the_template() -> None:
    active = current.follow_transition(TEMPLATE, "start", "User auth", TODAY)
    assert active.places == ("template",)
    assert changed_lines(TEMPLATE, active.text) == [
        ("> **Last Updated:** -- | **Active Task:** _none_", "> **Last Updated:** 2026-01-21 | **Active Task:** User auth"),
        ("**Task:** _none_ | **Status:** -- | **Started:** --", "**Task:** User auth | **Status:** WIP | **Started:** 2026-01-21"),
    ]
    state = current.parse_current(active.text)
    assert (state.task, state.status, state.state, state.started) == ("User auth", "WIP", "working", "2026-01-21")
    cleared = current.follow_transition(active.text, "done", "USER AUTH", TODAY)
    assert cleared.text == TEMPLATE.replace("**Last Updated:** --", "**Last Updated:** 2026-01-21")


def test_block_and_ready_of_the_active_task_change_its_status_so_it_no_longer_says_wip() -> None:
    active = current.follow_transition(TEMPLATE, "start", "User auth", TODAY).text
    blocked = current.follow_transition(active, "block", "User auth", TODAY).text
    assert current.parse_current(blocked).state == "blocked" and "**Status:** BLOCKED |" in blocked
    ready = current.follow_transition(blocked, "ready", "user auth", TODAY).text
    assert current.parse_current(ready).state == "idle" and "**Status:** READY |" in ready
    assert changed_lines(active, ready) == [
        ("**Task:** User auth | **Status:** WIP | **Started:** 2026-01-21", "**Task:** User auth | **Status:** READY | **Started:** 2026-01-21")
    ]


def test_a_different_active_task_is_left_alone() -> None:
    active = current.follow_transition(TEMPLATE, "start", "User auth", TODAY).text
    for action in ("done", "close", "block", "ready"):
        assert current.follow_transition(active, action, "Something else", TODAY) == current.Followed(active, ())


def test_the_v1_and_protectorate_dialects_follow_too() -> None:
    v1 = (FIXTURES / "current_v1.md").read_text(encoding="utf-8")
    started = current.follow_transition(v1, "start", "X", TODAY)
    assert started.places == ("v1",) and changed_lines(v1, started.text) == [("Implement authentication service", "X")]
    done = current.follow_transition(started.text, "done", "X", TODAY)
    assert changed_lines(v1, done.text) == [("Implement authentication service", "(No active task)")]
    assert current.parse_current(done.text).task is None
    blocked = current.follow_transition(started.text, "block", "X", TODAY)  # v1 has no status: said, not hidden
    assert blocked.text == started.text and not blocked.updated and "v1" in (blocked.note or "")
    sleeve = (FIXTURES / "current_protectorate.md").read_text(encoding="utf-8")
    started = current.follow_transition(sleeve, "start", "X", TODAY)
    assert started.places == ("protectorate",) and changed_lines(sleeve, started.text) == [("Implementing user authentication module", "X")]
    blocked = current.follow_transition(started.text, "block", "X", TODAY)
    assert changed_lines(started.text, blocked.text) == [("working", "blocked")]
    done = current.follow_transition(blocked.text, "done", "X", TODAY)
    assert (current.parse_current(done.text).state, current.parse_current(done.text).task) == ("done", "X")


def test_edits_keep_crlf_and_the_rest_of_a_hand_edited_line() -> None:
    text = "**Task:** old | **Status:** WIP | **Started:** 2026-01-01 | **Owner:** ana\r\nbody\r\n"
    edited = current.follow_transition(text, "start", "new one", TODAY).text
    assert edited == "**Task:** new one | **Status:** WIP | **Started:** 2026-01-21 | **Owner:** ana\r\nbody\r\n"

"""What people write into the memory files by hand, read and edited faithfully: subtasks and
their parents, markers of other dialects, frontmatter that says what the body says, and
CURRENT.md shapes a one-line edit cannot update."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

import cstack
from cstack import current, plan
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidDocument
from moss_files.foundation.ids import fixed_clock

TODAY = date(2026, 1, 21)

NESTED = """# Plan

## Tasks

- [ ] Auth (id: task-001)
  - [ ] Design auth flow (task-002, parent: task-001)
  - [ ] Build the login form
    - [ ] Validate the email field
- [ ] Unrelated

## Completed

_None._
"""


def at(root: Path) -> Context:
    return Context(root, clock=fixed_clock(datetime(TODAY.year, TODAY.month, TODAY.day, 12, tzinfo=UTC)))


def stack(tmp_path: Path, **files: str) -> Path:
    root = tmp_path / "project"
    (root / ".cstack").mkdir(parents=True)
    for name, text in files.items():
        (root / ".cstack" / f"{name}.md").write_text(text)
    return root


def test_subtasks_keep_their_parent_by_indentation_or_by_a_bare_id_group() -> None:
    tasks = {task.title: task for task in plan.parse_plan(NESTED).tasks}
    assert (tasks["Design auth flow"].id, tasks["Design auth flow"].parent) == ("task-002", "task-001")
    assert tasks["Build the login form"].parent == "task-001" and tasks["Build the login form"].nested_in == tasks["Auth"].number
    assert tasks["Validate the email field"].nested_in == tasks["Build the login form"].number
    assert tasks["Unrelated"].nested_in is None and tasks["Unrelated"].parent is None
    assert [t.title for t in plan.subtasks(plan.parse_plan(NESTED), tasks["Auth"])] == ["Design auth flow", "Build the login form", "Validate the email field"]


def test_done_on_a_parent_with_open_subtasks_is_refused_and_nothing_is_orphaned() -> None:
    with pytest.raises(Conflict) as caught:
        plan.transition(NESTED, "done", "Auth", TODAY)
    assert caught.value.code == "OPEN_SUBTASKS" and caught.value.line == 5
    assert [t["title"] for t in caught.value.details["open_subtasks"]] == ["Design auth flow", "Build the login form", "Validate the email field"]


def test_a_subtask_is_done_in_place_and_a_finished_parent_moves_with_its_subtasks() -> None:
    text = NESTED
    for child in ("Design auth flow", "Validate the email field", "Build the login form"):
        change = plan.transition(text, "done", child, TODAY)
        assert change.moved_from is None and change.task.nested  # it stays under its parent
        text = change.text
    assert text.split("## Completed")[0].count("- [x]") == 3
    change = plan.transition(text, "done", "Auth", TODAY)
    assert change.moved_from == ("Tasks",)
    assert change.text.split("## Completed")[0] == "# Plan\n\n## Tasks\n\n- [ ] Unrelated\n\n"
    completed = change.text.split("## Completed")[1]
    assert completed == (
        "\n\n_None._\n"
        "- [x] Auth (id: task-001) | closed: 2026-01-21 | modified: 2026-01-21\n"
        "  - [x] Design auth flow (task-002, parent: task-001) | closed: 2026-01-21 | modified: 2026-01-21\n"
        "  - [x] Build the login form | closed: 2026-01-21 | modified: 2026-01-21\n"
        "    - [x] Validate the email field | closed: 2026-01-21 | modified: 2026-01-21\n"
    )
    moved = {task.title: task for task in plan.parse_plan(change.text).tasks}
    assert moved["Build the login form"].parent == "task-001" and moved["Validate the email field"].nested_in == moved["Build the login form"].number


def test_a_flat_child_naming_its_parent_holds_the_parent_back_too() -> None:
    text = "## Tasks\n\n- [>] Parent (id: p)\n- [ ] Child (id: c, parent: p)\n"
    with pytest.raises(Conflict) as caught:
        plan.transition(text, "close", "Parent", TODAY, reason="dropped")
    assert caught.value.code == "OPEN_SUBTASKS"


def test_context_by_md_markers_are_a_warning_not_silence(tmp_path: Path) -> None:
    text = "# Plan\n\n## Tasks\n\n- [WIP] P1: Sign-in | tokens\n- [READY] P2: Throttling\n- [PAUSED] P3: Docs\n\n## Backlog\n\n### Bugs\n[BUG] P2: Crash on save | app.py:10\n"
    parsed = plan.parse_plan(text)
    assert parsed.tasks == ()
    assert [warning.split(":")[0] for warning in parsed.warnings] == ["line 5", "line 6", "line 7", "line 12"]
    assert all("context-by-md" in warning for warning in parsed.warnings)
    root = stack(tmp_path, PLAN=text)
    said: list[str] = []
    listed = cstack.list_tasks(Context(root, notify=said.append))
    assert listed["tasks"] == [] and len(listed["warnings"]) == 4 and len(said) == 4 and "[WIP]" in said[0]


def test_placeholder_lines_of_every_release_are_not_data() -> None:
    for text in ("## Tasks\n(No tasks yet)\n", "## Tasks\n- [ ] (Add your first task here)\n", "## Tasks\n\n_No tasks. Add with `/cstack-task add`_\n"):
        assert plan.parse_plan(text).tasks == ()
    state = current.parse_current("## Current Task\n(No active task)\n\n## Focus\n(Awaiting initial directive)\n")
    assert (state.task, state.focus, state.state) == (None, None, "idle")


def test_frontmatter_follows_the_body_so_they_never_disagree(tmp_path: Path) -> None:
    text = "---\ntask: Old work   # set by hand\nstatus: working\nstarted: 2026-01-01\nowner: ana\n---\n## Current Task\nOld work\n"
    root = stack(tmp_path, PLAN="## Tasks\n\n- [ ] New work\n", CURRENT=text)
    cstack.transition(at(root), action="start", task="New work")
    started = (root / ".cstack/CURRENT.md").read_text()
    assert started == "---\ntask: New work   # set by hand\nstatus: working\nstarted: 2026-01-21\nowner: ana\n---\n## Current Task\nNew work\n"
    cstack.transition(at(root), action="block", task="New work", reason="waiting")
    assert cstack.read_status(root).current.state == "blocked"
    cstack.transition(at(root), action="ready", task="New work")
    assert cstack.read_status(root).current.state == "idle"
    cstack.transition(at(root), action="start", task="New work")
    cstack.transition(at(root), action="done", task="New work")
    state = cstack.read_status(root).current
    assert (state.task, state.state, state.started) == (None, "done", None)
    assert current.parse_current((root / ".cstack/CURRENT.md").read_text()).meta["owner"] == "ana"


def test_a_current_task_of_several_hand_written_lines_refuses_with_nothing_written(tmp_path: Path) -> None:
    text = "## Current Task\nRefactor the parser\nkeeping the old entry points for a release\n"
    plan_text = "## Tasks\n\n- [ ] Other work\n"
    root = stack(tmp_path, PLAN=plan_text, CURRENT=text)
    with pytest.raises(InvalidDocument) as caught:
        cstack.transition(at(root), action="start", task="Other work")
    assert caught.value.code == "CURRENT_UNEDITABLE" and caught.value.line == 2 and caught.value.details["dialect"] == "v1"
    assert (root / ".cstack/PLAN.md").read_text() == plan_text and (root / ".cstack/CURRENT.md").read_text() == text


def test_a_current_md_with_no_place_for_the_task_is_said_not_silently_skipped(tmp_path: Path) -> None:
    root = stack(tmp_path, PLAN="## Tasks\n\n- [ ] Work\n", CURRENT="# Scratch\n\nsome notes\n")
    said: list[str] = []
    result = cstack.transition(Context(root, clock=at(root).clock, notify=said.append), action="start", task="Work")
    assert result["current"]["updated"] is False and "no place for the active task" in result["current"]["note"]
    assert any("no place for the active task" in line for line in said)

"""Every historical template of cortical-stack (and context-by-md's and Protectorate's), through
add → start → block → ready → done on real files: each step changes only the task's line and
CURRENT.md's status lines, and every other byte (placeholders, dashes, blank lines) stays.

The fixtures are ours, with the structure of each version (tests/fixtures/cstack/history/README.md
names the commit each comes from). The table below is the matrix: lines changed in PLAN.md and
in CURRENT.md by each step, as `git diff` counts them (a line removed and one added count two).
"""

from __future__ import annotations

import difflib
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

import cstack
from cstack import markdown, store
from moss_files.foundation.context import Context
from moss_files.foundation.ids import fixed_clock

HISTORY = Path(__file__).parent.parent / "fixtures" / "cstack" / "history"
TODAY = date(2026, 1, 21)
TITLE = "Wire up the login form"
STEPS = ("add", "start", "block", "ready", "done")

# release: (PLAN.md fixture, CURRENT.md fixture, {step: (PLAN.md lines changed, CURRENT.md lines changed)})
MATRIX: dict[str, tuple[str, str, dict[str, tuple[int, int]]]] = {
    "0bcb83d (V1 templates)": (
        "plan_0bcb83d.md",
        "current_0bcb83d.md",
        {"add": (1, 0), "start": (2, 2), "block": (2, 0), "ready": (2, 0), "done": (5, 2)},
    ),
    "fd88986 (V1, checkbox placeholder)": (
        "plan_fd88986.md",
        "current_fd88986.md",
        {"add": (1, 0), "start": (2, 2), "block": (2, 0), "ready": (2, 0), "done": (5, 2)},
    ),
    "9d09ceb (v1.5 CURRENT, PLAN without Completed)": (
        "plan_9d09ceb.md",
        "current_9d09ceb.md",
        {"add": (1, 0), "start": (2, 4), "block": (2, 2), "ready": (2, 2), "done": (5, 4)},
    ),
    "caf41da..1920e83 (v1.5-v1.6)": (
        "plan_caf41da.md",
        "current_9d09ceb.md",
        {"add": (1, 0), "start": (2, 4), "block": (2, 2), "ready": (2, 2), "done": (2, 4)},
    ),
    "context-by-md d7035ec": (
        "plan_context_by_md_d7035ec.md",
        "current_context_by_md_d7035ec.md",
        {"add": (1, 0), "start": (2, 4), "block": (2, 2), "ready": (2, 2), "done": (5, 4)},
    ),
    "protectorate d5ef8a1 (sleeve CURRENT.md, v1.6 PLAN.md)": (
        "plan_caf41da.md",
        "current_protectorate_d5ef8a1.md",
        {"add": (1, 0), "start": (2, 4), "block": (2, 2), "ready": (2, 2), "done": (2, 2)},
    ),
}


def at(root: Path) -> Context:
    return Context(root, clock=fixed_clock(datetime(TODAY.year, TODAY.month, TODAY.day, 12, tzinfo=UTC)))


def diff(old: str, new: str) -> list[str]:
    """The lines removed (`- `) and added (`+ `), as git diff shows them."""
    return [line for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line[:2] in ("- ", "+ ")]


def run_step(root: Path, step: str) -> dict:
    ctx = at(root)
    if step == "add":
        return cstack.add_task(ctx, task=f"P1: {TITLE} #auth")
    return cstack.transition(ctx, action=step, task=TITLE, reason="waiting for the SSO sandbox" if step == "block" else None)


def workspace(tmp_path: Path, plan_fixture: str, current_fixture: str) -> Path:
    root = tmp_path / "project"
    (root / ".cstack").mkdir(parents=True)
    (root / ".cstack" / "PLAN.md").write_bytes((HISTORY / plan_fixture).read_bytes())
    (root / ".cstack" / "CURRENT.md").write_bytes((HISTORY / current_fixture).read_bytes())
    return root


# Lines a step may change in CURRENT.md besides the task's own: each dialect's status lines.
STATUS_LINE_PREFIXES = ("> **Last Updated:**", "**Task:**", "(No active task)", "(none)", "idle", "working", "blocked", "done")


@pytest.mark.parametrize("release", sorted(MATRIX))
def test_every_template_version_through_add_start_block_ready_done(tmp_path: Path, release: str) -> None:
    plan_fixture, current_fixture, expected = MATRIX[release]
    root = workspace(tmp_path, plan_fixture, current_fixture)
    plan_path, current_path = root / ".cstack" / "PLAN.md", root / ".cstack" / "CURRENT.md"
    original_plan, original_current = plan_path.read_text(), current_path.read_text()

    # A fresh template holds no task and no active task: its placeholders are not data.
    assert cstack.stats(root) == {"exists": True, "open": 0, "ready": 0, "in_progress": 0, "blocked": 0, "closed": 0, "total": 0}
    assert cstack.read_plan(root).warnings == ()
    assert cstack.read_status(root).current.task is None

    measured = {}
    for step in STEPS:
        plan_before, current_before = plan_path.read_text(), current_path.read_text()
        run_step(root, step)
        plan_after, current_after = plan_path.read_text(), current_path.read_text()
        plan_diff, current_diff = diff(plan_before, plan_after), diff(current_before, current_after)
        measured[step] = (len(plan_diff), len(current_diff))
        # PLAN.md: only the task's line, and the heading and blank line of a section it creates.
        assert all(TITLE in line or line in ("+ ## Completed", "+ ") for line in plan_diff), (step, plan_diff)
        # CURRENT.md: only status lines.
        assert all(line[2:].startswith(STATUS_LINE_PREFIXES) or line[2:] == TITLE for line in current_diff), (step, current_diff)
        assert "moss_format" not in plan_after + current_after
    assert measured == expected, (release, measured)

    # The cycle leaves PLAN.md as it was but for the finished task's line (and the Completed
    # section a template without one gains), and CURRENT.md as it was but for its date.
    final_plan = plan_path.read_text()
    done_line = next(line for line in final_plan.splitlines(keepends=True) if TITLE in line)
    assert done_line.startswith(f"- [x] P1: {TITLE} #auth | modified: 2026-01-21 | closed: 2026-01-21")
    created = "\n## Completed\n\n" if "## Completed" not in original_plan else ""
    assert final_plan.replace(done_line, "", 1).replace(created, "") == original_plan
    final_current = current_path.read_text()
    if "## Status" in original_current:  # a sleeve reports the task done (status done, task kept)
        assert final_current == original_current.replace("## Status\nidle", "## Status\ndone").replace("## Task\n(none)", f"## Task\n{TITLE}")
        assert (cstack.read_status(root).current.state, cstack.read_status(root).current.task) == ("done", TITLE)
    else:  # the active task is cleared, with the file's own placeholders and dashes
        assert final_current.replace("**Last Updated:** 2026-01-21", "**Last Updated:** " + ("—" if "—" in original_current else "--")) == original_current
        assert cstack.read_status(root).current.task is None
    placeholders = [line for line in original_plan.splitlines() if markdown.is_placeholder_line(line)]
    assert [line for line in final_plan.splitlines() if markdown.is_placeholder_line(line)] == placeholders


def test_the_matrix_covers_every_fixture() -> None:
    used = {name for plan_fixture, current_fixture, _ in MATRIX.values() for name in (plan_fixture, current_fixture)}
    assert used == {path.name for path in HISTORY.glob("*.md") if path.name != "README.md"}


def test_the_readme_names_the_commit_of_every_fixture() -> None:
    readme = (HISTORY / "README.md").read_text()
    for path in HISTORY.glob("*.md"):
        if path.name != "README.md":
            assert f"`{path.name}`" in readme, path.name


def test_each_step_reports_what_it_did_to_current_md(tmp_path: Path) -> None:
    root = workspace(tmp_path, "plan_0bcb83d.md", "current_0bcb83d.md")
    run_step(root, "add")
    started = run_step(root, "start")
    assert started["current"] == {"updated": True, "places": ["v1"], "note": None} and started["current_updated"] is True
    blocked = run_step(root, "block")  # the v1 dialect has no status line: said, not hidden
    assert blocked["current"]["updated"] is False and "v1" in blocked["current"]["note"]
    assert store.read_file(root, store.CURRENT).text.count(TITLE) == 1

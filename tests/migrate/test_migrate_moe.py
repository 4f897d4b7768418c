"""Moe: `.moe/` becomes the board, statuses, plans, times and links kept, the log appended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from migrate_support import commit_all, context, copy_fixture, files_under, make_workspace, snapshot

from moss_files.board import queries
from moss_files.board.store import BoardStore
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument
from moss_files.migrate import service


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "project")
    copy_fixture("moe", root)
    return root


def _by_source(root: Path, folder: str) -> dict[str, tuple[str, dict]]:
    """source id -> (file stem, frontmatter) of the board files in `folder`."""
    found = {}
    for path in (root / ".moss/board" / folder).glob("*.md"):
        meta = document.parse(path.read_text()).meta
        found[meta["source_id"]] = (path.stem, meta)
    return found


def test_the_whole_board_comes_over_and_reads_back_without_problems(root: Path) -> None:
    result = service.migrate_moe(context(root))
    assert (result["created"], result["changed"], result["skipped"]) == (9, 3, 0)
    assert result["version"] == "schemaVersion 6"
    assert any("2 of 32" in note and "4 of 8 hex" in note for note in result["notes"])  # both id shapes
    assert any(".moe/channels" in note for note in result["notes"])
    board = BoardStore(root, persist=False).load()
    assert board.problems == ()
    assert board.project.name == "moes" and board.project.settings.approval_mode == "TURBO"
    assert "eval(" in board.project.global_rails.forbidden_patterns
    tasks = _by_source(root, "tasks")
    epics = _by_source(root, "epics")
    old_short, old_long = tasks["task-f3b6132e"], tasks["task-1b5fe0a007984e91bdfdbc9b2dd47933"]
    archived = board.tasks[old_short[0]]
    assert (archived.status, archived.created_by, archived.first_claimed) == ("ARCHIVED", "WORKER", "2026-02-06T22:07:08Z")
    assert archived.plan[0].status == "COMPLETED" and archived.plan[0].completed == "2026-02-06T22:14:29Z"
    working = board.tasks[old_long[0]]
    assert (working.status, working.priority, working.assigned_worker, working.reopen_count) == ("WORKING", "HIGH", "worker-w1x2y3z4", 1)
    assert working.epic == epics["epic-a205c7a1"][0] == archived.epic
    assert working.depends_on == (old_short[0],) and working.parent == old_short[0]  # links remapped
    assert [step.status for step in working.plan] == ["COMPLETED", "IN_PROGRESS"]
    assert working.plan_approved == "2026-06-01T09:31:00Z"
    assert old_long[1]["source_fields"]["branch"] == "moe/epic-a205/task-1b5f"
    assert old_long[1]["source_fields"]["implementationPlan"]["step-1"]["amendments"][0]["amendmentId"] == "amend-1"
    blocked = board.tasks[tasks["task-0c4d8e2f"][0]]
    assert blocked.status == "PLANNING"  # Moe's BLOCKED column: back to where it was blocked from
    assert board.workers["worker-w1x2y3z4"].id == "worker-w1x2y3z4"
    team = next(iter(board.teams.values()))
    assert team.members == ("worker-w1x2y3z4",) and team.role == "worker"
    proposal = _by_source(root, "proposals")["prop-p1q2r3s4"][1]
    assert proposal["task"] == old_long[0]
    log = queries.get_activity_log(context(root), limit=10)
    events = {event["payload"]["source_id"]: event for event in log["events"]}
    assert set(events) == {"evt-001", "evt-003", "evt-2f0c9b8a7d6e4f3a9b1c2d3e4f5a6b7c"}
    assert events["evt-003"]["taskId"] == old_short[0] and events["evt-003"]["projectId"] == board.project.id
    assert (root / ".moe/project.json").is_file()  # the source stays


def test_a_second_run_changes_nothing(root: Path) -> None:
    service.migrate_moe(context(root))
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_moe(context(root))
    assert (again["created"], again["changed"], again["skipped"], again["report"]) == (0, 0, 12, None)
    assert snapshot(root) == before


def test_a_dry_run_writes_nothing(root: Path) -> None:
    commit_all(root)
    before = snapshot(root)
    dry = service.migrate_moe(context(root), dry_run=True)
    assert snapshot(root) == before
    assert dry["items"] == service.migrate_moe(context(root))["items"]


def test_two_clones_migrating_offline_write_the_same_files(root: Path, tmp_path: Path) -> None:
    other = make_workspace(tmp_path / "clone")
    copy_fixture("moe", other)
    service.migrate_moe(context(root))
    service.migrate_moe(context(other))
    ours = {path: data for path, data in files_under(root, ".moss/board").items() if "migrations" not in path}
    theirs = {path: data for path, data in files_under(other, ".moss/board").items() if "migrations" not in path}
    assert ours == theirs


def test_a_file_that_is_not_json_stops_the_source_naming_its_line(root: Path) -> None:
    (root / ".moe/tasks/task-99999999.json").write_text('{\n  "id": "task-99999999",\n  "title": "x",\n  "status": WORKING\n}\n')
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_moe(context(root))
    assert (caught.value.code, caught.value.path, caught.value.line) == ("SOURCE_INVALID", ".moe/tasks/task-99999999.json", 4)
    assert snapshot(root) == before


def test_a_value_of_the_wrong_shape_stops_the_source_naming_its_json_path(root: Path) -> None:
    task = json.loads((root / ".moe/tasks/task-0c4d8e2f.json").read_text())
    task["implementationPlan"] = [{"stepId": "step-1", "description": "x", "affectedFiles": "not-a-list"}]
    (root / ".moe/tasks/task-0c4d8e2f.json").write_text(json.dumps(task))
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_moe(context(root))
    assert caught.value.details["json_path"] == "implementationPlan[0].affectedFiles"
    assert snapshot(root) == before


def test_merge_conflicts_in_the_board_stop_the_run(root: Path) -> None:
    folder = root / ".moss/board/tasks"
    folder.mkdir(parents=True)
    (folder / "TASK-20260101-aaaaaaaa.md").write_text(
        "---\nid: TASK-20260101-aaaaaaaa\n<<<<<<< ours\nstatus: DONE\n=======\nstatus: WORKING\n>>>>>>> theirs\n---\n"
    )
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_moe(context(root), dry_run=True)
    assert caught.value.code == "MERGE_CONFLICT" and caught.value.line == 3
    assert snapshot(root) == before


def test_a_board_with_its_own_settings_keeps_them(root: Path) -> None:
    from moss_files.board import editing

    editing.init_board(context(root), name="mine")
    before = (root / ".moss/board/project.md").read_bytes()
    result = service.migrate_moe(context(root))
    assert (root / ".moss/board/project.md").read_bytes() == before
    assert [item["reason"] for item in result["items"] if item["kind"] == "project"] == [
        "the board has a project.md of its own; Moe's rails and settings are not merged into it"
    ]
    assert result["created"] == 8

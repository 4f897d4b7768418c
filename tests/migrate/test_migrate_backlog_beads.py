"""Backlog.md and Beads: the two most used markdown/git task tools, as board tasks."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrate_support import FIXTURES, commit_all, context, copy_fixture, make_workspace, snapshot

from moss_files.board.store import BoardStore
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument
from moss_files.migrate import service


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "project")


def _by_source(root: Path, folder: str) -> dict[str, tuple[str, dict]]:
    found = {}
    for path in (root / ".moss/board" / folder).glob("*.md"):
        meta = document.parse(path.read_text()).meta
        found[str(meta["source_id"])] = (path.stem, meta)
    return found


# --------------------------------------------------------------------------- Backlog.md


def test_backlog_tasks_keep_status_criteria_hierarchy_and_labels(root: Path) -> None:
    copy_fixture("backlog", root)
    result = service.migrate_backlog(context(root))
    assert result["created"] == 8 and result["skipped"] == 0
    assert any("backlog/docs" in note for note in result["notes"])
    board = BoardStore(root, persist=False).load()
    assert not board.problems
    tasks, epics = _by_source(root, "tasks"), _by_source(root, "epics")
    parent, child = board.tasks[tasks["BACK-222"][0]], board.tasks[tasks["BACK-222.1"][0]]
    assert (parent.status, parent.priority) == ("WORKING", "HIGH")
    assert parent.epic == epics["milestone:v1.30"][0] and board.epics[parent.epic].title == "Milestone v1.30"
    assert child.parent == parent.id and child.epic == epics["backlog:tasks"][0]
    assert child.definition_of_done[0].startswith("The task details modal shows a Parent section")
    assert "bunx tsc --noEmit passes when TypeScript touched" in child.definition_of_done  # its Definition of Done too
    assert "<!--" not in child.description and "## Implementation Plan" in child.description
    assert child.description.startswith("The task model has carried `parentTaskId`")
    fields = tasks["BACK-222.1"][1]["source_fields"]
    assert fields["assignee"] == ["@codex"] and fields["ordinal"] == 272000
    assert fields["checked"] == ["AC #1", "AC #2", "AC #3", "DoD #1", "DoD #3"]
    type_task = board.tasks[tasks["BACK-355"][0]]
    assert type_task.title == "Add task type field (bug, feature, enhancement, etc.)" and type_task.depends_on == (parent.id,)
    assert tasks["BACK-355"][1]["source_fields"]["labels"] == ["enhancement", "core"]
    old_style = board.tasks[tasks["TASK-7"][0]]  # the format before section markers
    assert old_style.status == "DONE" and old_style.definition_of_done == ("README explains the board", "CLI help mentions it")
    assert board.tasks[tasks["BACK-12"][0]].status == "ARCHIVED"
    assert tasks["DRAFT-2"][1]["source_fields"]["folder"] == "drafts"


def test_backlog_twice_changes_nothing_and_a_dry_run_writes_nothing(root: Path) -> None:
    copy_fixture("backlog", root)
    commit_all(root)
    before = snapshot(root)
    dry = service.migrate_backlog(context(root), dry_run=True)
    assert snapshot(root) == before
    assert dry["items"] == service.migrate_backlog(context(root))["items"]
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_backlog(context(root))
    assert (again["created"], again["skipped"]) == (0, 8) and snapshot(root) == before


def test_an_unquoted_colon_in_a_title_stops_the_source_at_its_line(root: Path) -> None:
    copy_fixture("backlog", root)
    (root / "backlog/tasks/back-400 - Broken.md").write_text("---\nid: BACK-400\ntitle: Fix: the parser\n  breaks: here\nstatus: To Do\n---\n")
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_backlog(context(root))
    assert caught.value.path == "backlog/tasks/back-400 - Broken.md" and caught.value.line is not None
    assert caught.value.code.startswith("FRONTMATTER")
    assert snapshot(root) == before


# --------------------------------------------------------------------------- Beads


def test_beads_issues_become_epics_and_tasks_with_their_links(root: Path) -> None:
    copy_fixture("beads", root)
    result = service.migrate_beads(context(root))
    assert (result["created"], result["skipped"]) == (6, 1)
    tombstone = next(item for item in result["items"] if item["action"] == "skip")
    assert tombstone["old_id"] == "bd-91ee" and "tombstone" in tombstone["reason"]
    board = BoardStore(root, persist=False).load()
    assert not board.problems
    tasks, epics = _by_source(root, "tasks"), _by_source(root, "epics")
    sync = board.epics[epics["bd-a3f8"][0]]
    assert (sync.title, sync.status) == ("Offline sync", "ACTIVE")
    ids, merge = board.tasks[tasks["bd-a3f8.1"][0]], board.tasks[tasks["bd-a3f8.2"][0]]
    assert ids.epic == merge.epic == sync.id
    assert (ids.status, ids.priority, ids.completed) == ("DONE", "CRITICAL", "2026-04-02T17:00:00Z")
    assert ids.definition_of_done == ("two clones never mint the same id", "old ids still resolve")
    assert "## Design" in ids.description and "## Notes" in ids.description
    assert merge.depends_on == (ids.id,)
    stale = tasks["bd-7c21"][1]
    assert stale["status"] == "BACKLOG" and stale["source_fields"]["status"] == "blocked"
    assert stale["source_fields"]["links"][0]["type"] == "discovered-from"
    assert tasks["bd-a3f8.1"][1]["source_fields"]["comments"][0]["text"] == "Birthday bound looks fine"
    loose = board.tasks[tasks["bd-5d0f"][0]]
    assert loose.epic == epics["beads:tasks"][0] and loose.priority == "LOW"


def test_beads_tombstones_come_as_archived_on_request(root: Path) -> None:
    copy_fixture("beads", root)
    result = service.migrate_beads(context(root), include_deleted=True)
    assert result["created"] == 7
    tasks = _by_source(root, "tasks")
    assert tasks["bd-91ee"][1]["status"] == "ARCHIVED" and tasks["bd-91ee"][1]["source_fields"]["delete_reason"] == "duplicate of bd-a3f8.1"


def test_beads_twice_changes_nothing(root: Path) -> None:
    copy_fixture("beads", root)
    service.migrate_beads(context(root))
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_beads(context(root))
    assert again["created"] == 0 and snapshot(root) == before


def test_a_beads_line_that_is_not_json_stops_the_source_at_its_line(root: Path) -> None:
    copy_fixture("beads", root)
    lines = (FIXTURES / "beads/.beads/issues.jsonl").read_text().splitlines()
    (root / ".beads/issues.jsonl").write_text("\n".join([*lines[:2], '{"id":"bd-x","title":', *lines[2:]]) + "\n")
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_beads(context(root))
    assert (caught.value.code, caught.value.path, caught.value.line) == ("SOURCE_INVALID", ".beads/issues.jsonl", 3)
    assert snapshot(root) == before

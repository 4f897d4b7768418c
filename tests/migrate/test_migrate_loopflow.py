"""LoopFlow: every format it used, detected and upgraded; old ids kept and findable; links remapped."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrate_support import FIXTURES, build_database, commit_all, context, copy_fixture, make_workspace, snapshot

import cstack
from moss_files.board.store import BoardStore
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument
from moss_files.index import service as index
from moss_files.loopflow.store import insight_store, session_store
from moss_files.migrate import service

SQL = FIXTURES / "loopflow" / "sqlite" / "loopflow.sql"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "project")


def _items(root: Path, folder: str) -> dict[str, tuple[str, dict, str]]:
    """source id -> (new id, frontmatter, body) of the files in `folder`."""
    found = {}
    for path in (root / folder).glob("*.md"):
        doc = document.parse(path.read_text())
        found[str(doc.meta["source_id"])] = (path.stem, doc.meta, doc.body)
    return found


def test_the_export_files_and_progress_log_come_over_with_links_remapped(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    result = service.migrate_loopflow(context(root))
    assert "export 0.1.0 (LoopFlow 1.x)" in result["version"] and "progress log" in result["version"]
    insights = _items(root, ".moss/insights")
    sessions = _items(root, ".moss/sessions")
    tasks = _items(root, ".moss/board/tasks")
    assert set(insights) == {"INS-071", "INS-061", "INS-060"}
    assert set(sessions) == {"2026-01-17-S0", "2026-01-21-S18", "2026-01-21-S18b"}  # the `18b` suffix too
    assert set(tasks) == {"LF-108", "LF-049", "LF-001.5", "LF-107", "LF-110"}
    new_060, meta_060, _body = insights["INS-060"]
    assert meta_060["links"] == [insights["INS-061"][0], tasks["LF-108"][0]]
    assert meta_060["source"] == {"task": tasks["LF-049"][0], "session": sessions["2026-01-21-S18"][0]}
    assert meta_060["tags"] == ["context-economy", "retrieval"] and meta_060["source_fields"]["tags"] == ["context economy", "retrieval"]
    assert meta_060["type"] == "process"  # deprecated in LoopFlow, still one of ours
    # "ad-hoc" names no task; a session LoopFlow never recorded stays as written.
    assert insights["INS-071"][1]["source"] == {"session": "2026-01-22"}
    # Every file reads back through the kinds' own stores.
    stored, problems = insight_store(root).read_all()
    assert not problems and len(stored) == 3
    stored_sessions, problems = session_store(root).read_all()
    assert not problems
    s18 = next(session for _path, session in stored_sessions if session.id == sessions["2026-01-21-S18"][0])
    assert s18.outcome == "PARTIAL" and s18.summary and "INS-061" in s18.summary
    s18b = next(session for _path, session in stored_sessions if session.id == sessions["2026-01-21-S18b"][0])
    assert s18b.outcome == "BLOCKED" and sessions["2026-01-21-S18b"][1]["source_fields"]["outcome"] == "BLOCKED (waiting on better-sqlite3 build)"
    board = BoardStore(root, persist=False).load()
    assert not board.problems
    dashboard = board.tasks[tasks["LF-108"][0]]
    assert (dashboard.status, dashboard.priority, dashboard.depends_on) == ("DONE", "HIGH", (tasks["LF-049"][0],))
    assert dashboard.definition_of_done == ("GET /api/tasks - list tasks with filters", "GET /api/insights - list insights")
    assert "## Notes" in dashboard.description
    assert board.tasks[tasks["LF-001.5"][0]].status == "ARCHIVED" and tasks["LF-001.5"][1]["source_fields"]["status"] == "CANCELLED"
    skipped = [item for item in result["items"] if item["action"] == "skip"]
    assert [item["old_id"] for item in skipped] == ["## 2026-01-22 notes from the retro"]
    assert skipped[0]["from"] == ".loop-flow/progress.txt:47"


def test_the_earliest_format_is_upgraded(root: Path) -> None:
    copy_fixture("loopflow/legacy", root)
    result = service.migrate_loopflow(context(root))
    assert ".agents/plan/insights.json: file-based 0.1.0" in result["version"]
    insights = _items(root, ".moss/insights")
    assert insights["INS-001"][1]["created"] == "2026-01-17T00:00:00Z"  # a day alone: midnight UTC
    assert insights["INS-002"][1]["links"] == [insights["INS-001"][0]]
    tasks = _items(root, ".moss/board/tasks")
    assert tasks["LF-001"][1]["depends_on"] == [tasks["LF-001.5"][0]]
    assert tasks["LF-001"][1]["created"] == "2026-01-17T00:00:00Z"  # a JSON task takes its file's date


def test_the_database_is_read_read_only_and_wins_over_its_exports(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    db = build_database(SQL, root / ".loop-flow" / "loopflow.db", wal=True)
    before = snapshot(db.parent)
    result = service.migrate_loopflow(context(root))
    assert snapshot(db.parent) == before
    assert result["version"].startswith("SQLite schema v3")
    assert any("repo_context" in note for note in result["notes"])
    superseded = {item["old_id"]: item for item in result["items"] if item["action"] == "skip" and item["kind"] != "session"}
    assert set(superseded) == {"INS-071", "LF-049"} and "loopflow.db" in superseded["INS-071"]["reason"]
    tasks = _items(root, ".moss/board/tasks")
    assert tasks["LF-049"][1]["status"] == "DONE" and tasks["LF-049"][1]["test_file"] == "src/db/__tests__/integration.test.ts"
    insights = _items(root, ".moss/insights")
    assert insights["INS-072"][1]["links"] == [insights["INS-071"][0]]
    sessions = _items(root, ".moss/sessions")
    s21 = sessions["2026-01-22-S21"]
    assert "## Summary" in s21[2] and "## Learnings" in s21[2] and s21[1]["task"] == "LF-078 [IMPL] Remove obsolete skills"


def test_old_ids_stay_findable_in_search(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    service.migrate_loopflow(context(root))
    for old, kind in (("INS-061", "insight"), ("LF-108", "task"), ("2026-01-21-S18b", "session")):
        found = index.scan(context(root), query=old)
        assert any(match["kind"] == kind for match in found["matches"]), (old, found)


def test_a_second_run_changes_nothing_and_a_dry_run_writes_nothing(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    copy_fixture("loopflow/legacy", root)
    commit_all(root)
    before = snapshot(root)
    dry = service.migrate_loopflow(context(root), dry_run=True)
    assert snapshot(root) == before
    real = service.migrate_loopflow(context(root))
    assert dry["items"] == real["items"]
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_loopflow(context(root))
    assert (again["created"], again["changed"], again["report"]) == (0, 0, None)
    assert snapshot(root) == before


def test_tasks_can_go_to_plan_md_instead(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    result = service.migrate_loopflow(context(root), tasks_to="plan")
    assert result["files"]["changed"] == [".cstack/PLAN.md"]
    plan = cstack.read_plan(root)
    by_id = {task.id: task for task in plan.tasks if task.id}
    assert set(by_id) == {"LF-108", "LF-049", "LF-001.5", "LF-107", "LF-110"}
    assert (by_id["LF-049"].status, by_id["LF-108"].status, by_id["LF-001.5"].status, by_id["LF-107"].status) == ("in_progress", "done", "closed", "blocked")
    assert by_id["LF-108"].priority == "P1" and "loopflow" in by_id["LF-108"].labels
    assert by_id["LF-107"].depends == ("LF-108",)
    assert not (root / ".moss/board/tasks").exists()
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_loopflow(context(root), tasks_to="plan")
    assert again["created"] == 0 and again["changed"] == 0 and snapshot(root) == before


def test_a_malformed_file_stops_the_source_and_nothing_is_written(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    path = root / ".loop-flow/insights.json"
    path.write_text(path.read_text().replace('"status": "discussed",', '"status": "discussed"', 1))
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_loopflow(context(root))
    assert (caught.value.code, caught.value.path) == ("SOURCE_INVALID", ".loop-flow/insights.json")
    assert caught.value.line is not None
    assert snapshot(root) == before


def test_an_item_without_content_names_its_json_path(root: Path) -> None:
    (root / ".loop-flow").mkdir()
    (root / ".loop-flow/insights.json").write_text('{"insights": [{"id": "INS-001", "content": "x"}, {"id": "INS-002", "type": "domain"}]}')
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_loopflow(context(root))
    assert caught.value.details["json_path"] == "insights[1].content"

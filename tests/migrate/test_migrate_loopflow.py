"""LoopFlow: every format it used, detected and upgraded; old ids kept and findable; links remapped."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import run_cli
from migrate_support import FIXTURES, build_database, commit_all, context, copy_fixture, make_workspace, snapshot

import cstack
from moss_files.board.store import BoardStore
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument
from moss_files.index import service as index
from moss_files.loopflow.store import insight_store, session_store
from moss_files.migrate import loopflow, service
from moss_files.migrate.ledger import DROPPED, KEPT, MAPPED, base_field
from moss_files.migrate.model import Where

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
    assert set(insights) == {"INS-071", "INS-061", "INS-060", "INS-062"}
    assert set(sessions) == {"2026-01-17-S0", "2026-01-17-S0b", "2026-01-21-S18", "2026-01-21-S18b", "2026-01-22-S20"}  # `0b`, `18b` too
    assert set(tasks) == {"LF-111", "LF-110", "LF-108", "LF-107", "LF-049", "LF-001.5"}
    meta_060 = insights["INS-060"][1]
    assert meta_060["links"] == [insights["INS-061"][0], tasks["LF-108"][0]]
    assert meta_060["source"] == {"task": tasks["LF-049"][0], "session": sessions["2026-01-21-S18"][0]}
    assert meta_060["source_fields"]["source"]["original_id"] == "L-004"
    assert meta_060["tags"] == ["context-economy", "retrieval"] and meta_060["source_fields"]["tags"] == ["context economy", "retrieval"]
    # "ad-hoc" names no task; a session LoopFlow never recorded stays as written.
    assert insights["INS-071"][1]["source"] == {"session": "2026-01-22"} and insights["INS-071"][1]["source_fields"]["source"]["task"] == "ad-hoc"
    # Every task a session's `Task:` line names is rewritten, not only the first.
    assert sessions["2026-01-22-S20"][1]["task"] == f"{tasks['LF-110'][0]}, {tasks['LF-111'][0]} (consolidated)"
    stored, problems = insight_store(root).read_all()
    assert not problems and len(stored) == 4
    stored_sessions, problems = session_store(root).read_all()
    assert not problems
    s18 = next(session for _path, session in stored_sessions if session.id == sessions["2026-01-21-S18"][0])
    assert s18.outcome == "COMPLETE" and s18.summary and "INS-061" in s18.summary
    assert sessions["2026-01-21-S18"][1]["source_fields"]["outcome"] == "COMPLETE (with bugs found)"
    board = BoardStore(root, persist=False).load()
    assert not board.problems
    dashboard = board.tasks[tasks["LF-108"][0]]
    assert (dashboard.status, dashboard.priority, dashboard.depends_on) == ("DONE", "HIGH", (tasks["LF-049"][0],))
    assert dashboard.definition_of_done == ("Lists tasks with filters", "Lists insights") and "## Notes" in dashboard.description
    assert board.tasks[tasks["LF-111"][0]].depends_on == (tasks["LF-110"][0], tasks["LF-049"][0])  # a task listed after it, too
    assert board.tasks[tasks["LF-107"][0]].depends_on == (tasks["LF-108"][0], "LF-099")  # one naming no task is kept as written
    assert board.tasks[tasks["LF-001.5"][0]].status == "ARCHIVED" and tasks["LF-001.5"][1]["source_fields"]["status"] == "CANCELLED"
    skipped = [item for item in result["items"] if item["action"] == "skip"]
    assert [item["old_id"] for item in skipped] == ["## 2026-01-22 notes from the retro"] and not skipped[0].get("loss")
    ledger = result["ledger"]["items"]
    assert ledger["in"] == 4 + 6 + 6 == ledger["out"] + ledger["skipped"] and ledger["added"] == 1 and result["ledger"]["lossless"]


def test_every_field_has_the_fate_the_ledger_reports(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    result = service.migrate_loopflow(context(root))
    base = root / ".loop-flow"
    _v, insights = loopflow.insights_file(json.loads((base / "insights.json").read_text()), Where(".loop-flow/insights.json"))
    _v, _p, tasks = loopflow.backlog_file(json.loads((base / "backlog.json").read_text()), Where(".loop-flow/backlog.json"))
    sessions = loopflow.progress_file((base / "progress.txt").read_text(), ".loop-flow/progress.txt")
    merged = loopflow.merge([loopflow.Layer(".loop-flow", "x", insights, tasks, sessions)])
    planned = loopflow.plan(merged, scope="loopflow", imported={}, tasks_to="board", today="20261125")
    fates = {(c.kind, c.old_id): list(c.fates) for c in planned.candidates if not c.made}
    expected: dict[str, Counter[str]] = {}
    for found in fates.values():
        for name, fate in {(f.field, f.fate) for f in found}:
            expected.setdefault(name, Counter())[fate] += 1
    fields = result["ledger"]["fields"]
    assert set(fields) == set(expected)
    for name, counts in expected.items():
        assert {fate: fields[name][fate] for fate in (MAPPED, KEPT, DROPPED)} == {fate: counts[fate] for fate in (MAPPED, KEPT, DROPPED)}, name
    written = {**_items(root, ".moss/insights"), **_items(root, ".moss/sessions"), **_items(root, ".moss/board/tasks")}
    for kind, items, prefix in (("insight", insights, "insight."), ("task", tasks, ""), ("session", sessions, "session.")):
        for _where, item in items:
            if "unreadable" in item:
                continue
            item_fates = fates[(kind, item["id"])]
            assert {key for key in item if not key.startswith("_")} <= {base_field(f.field.removeprefix(prefix)).split(".", 1)[0] for f in item_fates}, item[
                "id"
            ]
            kept = written[item["id"]][1].get("source_fields", {})
            for fate in item_fates:
                if fate.fate == KEPT and "." not in fate.field.removeprefix(prefix) and fate.home == f"source_fields.{fate.field.removeprefix(prefix)}":
                    assert kept[fate.field.removeprefix(prefix)] == item[fate.field.removeprefix(prefix)], (item["id"], fate.field)


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
    assert not any("no counterpart" in note for note in result["notes"])
    superseded = {item["old_id"]: item for item in result["items"] if item["action"] == "skip" and item["kind"] != "session"}
    assert set(superseded) == {"INS-071", "LF-049"} and "loopflow.db" in superseded["INS-071"]["reason"]
    tasks = _items(root, ".moss/board/tasks")
    assert tasks["LF-049"][1]["status"] == "DONE" and tasks["LF-049"][1]["test_file"] == "src/db/__tests__/integration.test.ts"
    assert tasks["LF-049"][1]["source_fields"]["summary"] == "[IMPL] SQLite store with FTS5"
    insights = _items(root, ".moss/insights")
    assert insights["INS-072"][1]["links"] == [insights["INS-071"][0]]
    sessions = _items(root, ".moss/sessions")
    s21 = sessions["2026-01-22-S21"]
    assert "## Summary" in s21[2] and "## Learnings" in s21[2] and s21[1]["task"] == "LF-078 [IMPL] Retire the old skills"
    # The repository context has a home: .moss/summary.md.
    text = (root / ".moss/summary.md").read_text()
    assert "A memory and task server for coding agents." in text and "## Suggested actions" in text and "## open_questions" in text
    assert f"updated_by_session: {s21[0]}" in text and "updated: '2026-01-22T11:06:00Z'" in text or "updated: 2026-01-22T11:06:00Z" in text
    fields = result["ledger"]["fields"]
    assert fields["context.open_questions"]["kept"] == 1 and fields["context.repo_summary"]["mapped"] == 1
    # So does feedback: a file under .moss/feedback/, its sharing record kept.
    feedback = _items(root, ".moss/feedback")["FB-001"]
    assert (feedback[1]["type"], feedback[1]["status"], feedback[1]["title"]) == ("pain_point", "shared", "Export drops task times")
    assert feedback[1]["source_fields"]["github_issue_url"] == "https://example.invalid/issues/1"
    assert result["ledger"]["lossless"]


def test_a_summary_of_the_workspaces_own_is_never_overwritten(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    build_database(SQL, root / ".loop-flow" / "loopflow.db")
    (root / ".moss/summary.md").write_text("---\nupdated: 2026-01-01T00:00:00Z\n---\n## Summary\nOurs.\n")
    result = service.migrate_loopflow(context(root))
    assert (root / ".moss/summary.md").read_text().endswith("Ours.\n")
    skipped = next(item for item in result["items"] if item["kind"] == "summary")
    assert skipped["action"] == "skip" and skipped["loss"] and "of its own" in skipped["reason"]


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


def test_tasks_can_go_to_plan_md_instead_with_every_dependency(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    result = service.migrate_loopflow(context(root), tasks_to="plan")
    assert result["files"]["changed"] == [".cstack/PLAN.md"]
    plan = cstack.read_plan(root)
    by_id = {task.id: task for task in plan.tasks if task.id}
    assert set(by_id) == {"LF-111", "LF-110", "LF-108", "LF-107", "LF-049", "LF-001.5"}
    assert (by_id["LF-049"].status, by_id["LF-108"].status, by_id["LF-001.5"].status, by_id["LF-107"].status) == ("in_progress", "done", "closed", "blocked")
    assert by_id["LF-108"].priority == "P1" and "loopflow" in by_id["LF-108"].labels
    # LF-111 is listed before LF-110, which it depends on: the dependency is written all the same.
    assert by_id["LF-111"].depends == ("LF-110", "LF-049") and by_id["LF-108"].depends == ("LF-049",)
    assert by_id["LF-107"].depends == ("LF-108",)
    items = {item["old_id"]: item for item in result["items"]}
    assert "LF-099 is not in the source" in items["LF-107"]["dropped"]["depends_on"]
    dropped = result["ledger"]["dropped"]
    assert dropped["description"] == 6 and dropped["acceptance_criteria"] == 5 and dropped["depends_on"] == 1
    assert not (root / ".moss/board/tasks").exists()
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_loopflow(context(root), tasks_to="plan")
    assert again["created"] == 0 and again["changed"] == 0 and snapshot(root) == before


def test_strict_refuses_what_plan_md_cannot_hold_and_passes_the_board(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_loopflow(context(root), tasks_to="plan", strict=True)
    assert caught.value.code == "MIGRATION_WOULD_DROP" and caught.value.details["dropped"]["description"] == 6
    assert snapshot(root) == before
    assert service.migrate_loopflow(context(root), strict=True)["ledger"]["lossless"]
    cli = run_cli("moss", "migrate", "loopflow", "--tasks", "plan", "--strict", "--json", cwd=root)
    assert cli.returncode == 4 and json.loads(cli.stderr)["error"]["code"] == "MIGRATION_WOULD_DROP"


def test_a_malformed_file_is_reported_and_the_rest_imported(root: Path) -> None:
    copy_fixture("loopflow/export", root)
    path = root / ".loop-flow/insights.json"
    path.write_text(path.read_text().replace('"status": "discussed",', '"status": "discussed"', 1))
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_loopflow(context(root), strict=True)
    assert caught.value.code == "MIGRATION_WOULD_DROP" and caught.value.details["lost"][0]["from"].startswith(".loop-flow/insights.json:")
    assert snapshot(root) == before
    result = service.migrate_loopflow(context(root))
    lost = result["ledger"]["items"]["lost"]
    assert [item["old_id"] for item in lost] == ["insights.json"] and "LoopFlow imports nothing of this file either" in lost[0]["reason"]
    assert len(_items(root, ".moss/board/tasks")) == 6 and len(_items(root, ".moss/sessions")) == 5


def test_an_item_without_content_is_skipped_naming_its_json_path(root: Path) -> None:
    (root / ".loop-flow").mkdir()
    (root / ".loop-flow/insights.json").write_text(
        '{"insights": [{"id": "INS-001", "content": "x"}, {"id": "INS-002", "type": "domain"}, {"content": "no id"}]}'
    )
    result = service.migrate_loopflow(context(root))
    lost = {item["old_id"]: item["reason"] for item in result["ledger"]["items"]["lost"]}
    assert "insights[1].content" in lost["INS-002"] and "insights[2].id" in lost["insights[2]"]
    assert set(_items(root, ".moss/insights")) == {"INS-001"}

"""`moss export --format loopflow`: LoopFlow's own files from the workspace, and the way back in:
an export migrated into a fresh workspace gives the same items, under the ids they had (the
LoopFlow ones as `source_id`); files it did not write are never replaced."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import run_cli
from migrate_support import context, copy_fixture, make_workspace, snapshot

import cstack
from moss_files.foundation import config, document
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, NotFound
from moss_files.foundation.ids import IdSource, fixed_clock, seeded_random
from moss_files.loopflow import backlog, service
from moss_files.loopflow.export import export_loopflow
from moss_files.loopflow.insights import Update
from moss_files.loopflow.sessions import Handoff
from moss_files.migrate import loopflow as loopflow_format
from moss_files.migrate import service as migrate
from moss_files.migrate.model import Where

FOLDERS = (".moss/insights", ".moss/sessions", ".moss/board/tasks", ".moss/board/epics")
LOOPFLOW_TYPES = {"process", "domain", "architecture", "edge_case", "technical"}


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for folder in FOLDERS for p in sorted((root / folder).glob("*.md"))}


def by_source(root: Path, folder: str) -> dict[str, tuple[str, dict, str]]:
    """source id -> (id, frontmatter, body) of the files in `folder`."""
    found = {}
    for path in (root / folder).glob("*.md"):
        doc = document.parse(path.read_text())
        found[str(doc.meta.get("source_id"))] = (path.stem, dict(doc.meta), doc.body)
    return found


def at(moment: datetime, root: Path, seed: int = 11):
    clock = fixed_clock(moment)
    return context(root).replace(clock=clock, ids=IdSource(clock=clock, random_bytes=seeded_random(seed)))


@pytest.fixture
def came(tmp_path: Path) -> Path:
    """A workspace that came from LoopFlow (its export fixture, tasks to the board) and then
    gained items of its own."""
    root = make_workspace(tmp_path / "came")
    copy_fixture("loopflow/export", root)
    migrate.migrate_loopflow(context(root))
    for path in sorted((root / ".loop-flow").iterdir()):
        path.unlink()
    (root / ".loop-flow").rmdir()
    return root


def test_an_export_migrated_into_a_fresh_workspace_gives_back_the_same_items(came: Path, tmp_path: Path) -> None:
    ctx = at(datetime(2026, 2, 3, 9, 0, tzinfo=UTC), came)
    ins_060 = by_source(came, ".moss/insights")["INS-060"][0]
    session = service.orient(ctx, task="LF-049 follow-up")["session"]["id"]
    mine = service.remember(ctx, "Ours: exports go back under the LoopFlow ids.", links=[ins_060], summary="Exports keep ids.", context="Said twice.")["id"]
    service.observe(ctx, "Ran the export.")
    dropped = service.remember(ctx, "Soon deleted.")["id"]
    service.delete_insight(ctx, dropped)
    service.handoff(ctx, Handoff(summary="Exported the lot.", completed=("export",), next_actions=("migrate back",)))
    backlog.create_task(ctx, id="LF-200", title="[IMPL] Leave LoopFlow's way", priority="high", acceptance_criteria=["round trip"])
    before = files_of(came)

    out = came / ".moss" / "exports" / "back"
    result = export_loopflow(ctx, path=str(out))
    assert result["folder"] == str(out / ".loop-flow") and result["files"] == [".loop-flow/insights.json", ".loop-flow/backlog.json", ".loop-flow/progress.txt"]
    assert result["counts"] == {"insights": 5, "tasks": 7, "sessions": 6}
    assert result["ids"]["insight"][ins_060] == "INS-060" and result["ids"]["insight"][mine] == mine
    assert result["ids"]["session"][session] == "2026-02-03-S1" and result["ids"]["task"]["LF-200"] == "LF-200"
    assert {(left["kind"], left["count"]) for left in result["not_exported"]} == {("insight", 1), ("observation", 1), ("epic", 1)}
    assert files_of(came) == before  # the export wrote only its own files
    assert {oct(os.stat(out / ".loop-flow" / name).st_mode & 0o777) for name in ("insights.json", "backlog.json", "progress.txt")} == {"0o600"}

    fresh = make_workspace(tmp_path / "fresh")
    back = migrate.migrate_loopflow(context(fresh), path=str(out))
    assert back["ledger"]["lossless"] and not [item for item in back["items"] if item["action"] == "skip"]
    theirs = files_of(fresh)
    came_from_loopflow = {path: data for path, data in before.items() if b"imported_from: loopflow" in data}
    assert {path: theirs.get(path) for path in came_from_loopflow} == came_from_loopflow  # the same files, byte for byte

    insight = by_source(fresh, ".moss/insights")[mine]
    assert insight[1]["links"] == [ins_060] and insight[1]["summary"] == "Exports keep ids." and insight[1]["context"] == "Said twice."
    assert insight[2] == "Ours: exports go back under the LoopFlow ids.\n"
    assert insight[1]["source"] == {"session": by_source(fresh, ".moss/sessions")["2026-02-03-S1"][0]}
    ours = by_source(fresh, ".moss/sessions")["2026-02-03-S1"]
    assert ours[1]["outcome"] == "COMPLETE" and "## Summary\n\nExported the lot." in ours[2] and "## Next actions\n\n- migrate back" in ours[2]
    task = by_source(fresh, ".moss/board/tasks")["LF-200"]
    assert (task[1]["title"], task[1]["priority"], task[1]["definition_of_done"]) == ("[IMPL] Leave LoopFlow's way", "HIGH", ["round trip"])
    assert dropped not in by_source(fresh, ".moss/insights")


def test_plan_md_tasks_go_back_to_plan_md(tmp_path: Path) -> None:
    came = make_workspace(tmp_path / "came")
    copy_fixture("loopflow/export", came)
    migrate.migrate_loopflow(context(came), tasks_to="plan")
    (came / ".loop-flow" / "backlog.json").unlink()
    out = came / ".moss" / "exports"
    result = export_loopflow(context(came), path=str(out))
    assert result["counts"]["tasks"] == 6 and not any(left["kind"] == "plan-task" for left in result["not_exported"])
    fresh = make_workspace(tmp_path / "fresh")
    migrate.migrate_loopflow(context(fresh), path=str(out), tasks_to="plan")

    def plan_of(root: Path) -> list[tuple]:
        return sorted((t.id, t.title, t.status, t.priority, tuple(t.depends)) for t in cstack.read_plan(root).tasks)

    assert plan_of(fresh) == plan_of(came)


def test_the_files_have_loopflows_shapes(came: Path) -> None:
    ctx = at(datetime(2026, 1, 21, 18, 0, tzinfo=UTC), came)
    for text in ("First evening session.", "Second evening session."):
        service.orient(ctx, new=True)
        service.handoff(ctx, Handoff(summary=text))
    ai = service.remember(ctx, "Generated summaries stay home.")
    path = came / ai["path"]
    path.write_text(path.read_text().replace("status: unprocessed\n", "status: unprocessed\nsummary: Made by a model.\nsummary_source: ai\n"))
    out = came / ".moss" / "exports"
    export_loopflow(ctx, path=str(out))
    folder = out / ".loop-flow"

    insights = json.loads((folder / "insights.json").read_text())
    assert list(insights)[:4] == ["schema_version", "description", "exported_at", "source"] and insights["source"] == "moss-files"
    for record in insights["insights"]:
        assert list(record)[:4] == ["id", "content", "type", "status"] and record["type"] in LOOPFLOW_TYPES and record["created"]
    generated = next(record for record in insights["insights"] if record["content"].startswith("Generated"))
    assert "summary" not in generated  # LoopFlow makes its own
    assert next(r for r in insights["insights"] if r["id"] == "INS-060")["tags"] == ["context economy", "retrieval"]  # as LoopFlow had them
    tasks = json.loads((folder / "backlog.json").read_text())
    assert list(tasks)[:5] == ["project", "last_updated", "notes", "exported_at", "source"] and tasks["project"] == "came"
    assert [task["id"] for task in tasks["tasks"]] == ["LF-111", "LF-110", "LF-108", "LF-107", "LF-049", "LF-001.5"]  # LoopFlow's order
    assert {task["status"] for task in tasks["tasks"]} <= {"TODO", "IN_PROGRESS", "DONE", "BLOCKED", "CANCELLED"}
    assert {task["priority"] for task in tasks["tasks"]} <= {"high", "medium", "low"}
    assert next(t for t in tasks["tasks"] if t["id"] == "LF-107")["depends_on"] == ["LF-108", "LF-099"]

    progress = (folder / "progress.txt").read_text()
    entries = loopflow_format.progress_file(progress, "progress.txt")
    days = [item["id"] for _where, item in entries]
    assert days == ["2026-01-17-S0", "2026-01-17-S0b", "2026-01-21-S18", "2026-01-21-S18b", "2026-01-21-S19", "2026-01-21-S20", "2026-01-22-S20"]
    assert "## 2026-01-21 | Session 18 (SQLite store)\nTask: LF-049 [IMPL] SQLite store with FTS5\nOutcome: COMPLETE (with bugs found)\n" in progress
    assert "### Summary\n\nFirst evening session." in progress and "\n## Summary" not in progress


def test_an_export_never_replaces_a_file_it_did_not_write(came: Path) -> None:
    out = came / ".moss" / "exports"
    (out / ".loop-flow").mkdir(parents=True)
    (out / ".loop-flow" / "backlog.json").write_text('{"project": "mine", "tasks": []}\n')
    before = snapshot(out)
    with pytest.raises(Conflict) as caught:
        export_loopflow(context(came), path=str(out))
    assert caught.value.code == "ALREADY_EXISTS" and snapshot(out) == before
    (out / ".loop-flow" / "backlog.json").unlink()
    first = export_loopflow(context(came), path=str(out))
    service.update_insight(context(came), "INS-060", Update(status="unprocessed"))
    again = export_loopflow(context(came), path=str(out))  # an earlier export of its own is replaced
    assert again["counts"] == first["counts"]
    assert next(r for r in json.loads((out / ".loop-flow" / "insights.json").read_text())["insights"] if r["id"] == "INS-060")["status"] == "unprocessed"


def test_where_an_export_may_go(came: Path, tmp_path: Path) -> None:
    ctx = context(came, home=tmp_path / "home")
    made = export_loopflow(ctx)
    assert Path(made["path"]).parent == tmp_path / "home" / ".moss" / "exports" and Path(made["folder"], "insights.json").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (came / ".moss" / "exports").mkdir(exist_ok=True)
    os.symlink(elsewhere, came / ".moss" / "exports" / "link")
    for path, reason in ((str(elsewhere), "not_allowed"), (str(came / ".moss" / "exports" / "link"), "symlink"), (f"{came}/.moss/exports/../x", "traversal")):
        with pytest.raises(InvalidRequest) as caught:
            export_loopflow(ctx, path=path)
        assert caught.value.details["reason"] == reason, path
    with pytest.raises(NotFound):
        export_loopflow(ctx.replace(config=config.Config(allowed_paths=(tmp_path,))), path=str(tmp_path / "missing"))
    allowed = ctx.replace(config=config.Config(allowed_paths=(elsewhere,)))
    assert Path(export_loopflow(allowed, path=str(elsewhere))["folder"]) == elsewhere / ".loop-flow"
    assert not any((elsewhere / ".loop-flow" / name).is_symlink() for name in ("insights.json", "backlog.json", "progress.txt"))


def test_an_unreadable_insight_stops_the_export_with_nothing_written(came: Path) -> None:
    broken = came / ".moss" / "insights" / "INS-20260121-broken00.md"
    broken.write_text("---\ntype: gotcha\n---\nx\n")
    out = came / ".moss" / "exports"
    with pytest.raises(InvalidDocument) as caught:
        export_loopflow(context(came), path=str(out))
    assert caught.value.code == "SCHEMA_ERROR" and caught.value.path.endswith("INS-20260121-broken00.md")
    assert not (out / ".loop-flow").exists()


def test_moss_export_format_loopflow(came: Path) -> None:
    out = came / ".moss" / "exports" / "cli"
    done = run_cli("moss", "export", "--format", "loopflow", "--path", str(out), "--json", cwd=came)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"] == {"insights": 4, "tasks": 6, "sessions": 5}
    text = run_cli("moss", "export", "--format", "loopflow", "--path", str(out), cwd=came)
    assert text.returncode == 0 and "not exported: 1 epic" in text.stderr
    for args in (["--format", "csv"], ["--format", "loopflow", "--workspace", "default"], ["--format", "loopflow", "--path", "/"]):
        refused = run_cli("moss", "export", *args, "--json", cwd=came)
        assert refused.returncode == 2, (args, refused.stderr)
        assert json.loads(refused.stderr)["error"]["code"] == "INVALID_REQUEST"


def test_loopflows_reader_takes_what_the_exporter_writes(came: Path) -> None:
    out = came / ".moss" / "exports"
    export_loopflow(context(came), path=str(out))
    version, insights = loopflow_format.insights_file(json.loads((out / ".loop-flow" / "insights.json").read_text()), Where("insights.json"))
    version_b, project, tasks = loopflow_format.backlog_file(json.loads((out / ".loop-flow" / "backlog.json").read_text()), Where("backlog.json"))
    assert version == "export 1.1.0 (LoopFlow 1.x)" and version_b == "export (LoopFlow 1.x)" and project == "came"
    assert len(insights) == 4 and len(tasks) == 6

"""Moe: `.moe/` read as Moe's daemon reads it, every item and every field accounted, each field
in its home on the board (the fixture's README names the published data each quirk comes from)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from migrate_support import FIXTURES, commit_all, context, copy_fixture, files_under, make_workspace, snapshot

from moss_files.board import conversation, queries
from moss_files.board.store import BoardStore
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument
from moss_files.migrate import moe, service
from moss_files.migrate.ledger import DROPPED, KEPT, MAPPED, base_field
from moss_files.migrate.model import Where
from moss_files.web import board as web_board

MOE = FIXTURES / "moe" / ".moe"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "project")
    copy_fixture("moe", root)
    return root


def _by_source(root: Path, folder: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """source id -> (file stem, frontmatter) of the board files in `folder`."""
    found = {}
    for path in (root / ".moss/board" / folder).glob("*.md"):
        meta = document.parse(path.read_text()).meta
        found[str(meta["source_id"])] = (path.stem, meta)
    return found


def _items(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["old_id"]: item for item in result["items"]}


def _source(base: Path) -> moe.Source:
    """The fixture's `.moe/` as the service gathers it (every file of it is valid JSON)."""

    def files(folder: str) -> list[tuple[Where, Any]]:
        return [(Where(f".moe/{folder}/{path.name}"), json.loads(path.read_text())) for path in sorted((base / folder).glob("*.json"))]

    messages = {
        path.stem: [(Where(f".moe/messages/{path.name}", n), json.loads(line)) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
        for path in sorted((base / "messages").glob("*.jsonl"))
    }
    log = [(Where(".moe/activity.log", n), json.loads(line)) for n, line in enumerate((base / "activity.log").read_text().splitlines(), 1)]
    kinds = {"epic": "epics", "task": "tasks", "worker": "workers", "team": "teams", "proposal": "proposals"}
    return moe.Source(
        (Where(".moe/project.json"), json.loads((base / "project.json").read_text())),
        {kind: files(folder) for kind, folder in kinds.items()},
        log,
        {},
        files("channels"),
        messages,
        files("decisions"),
    )


def test_every_item_is_counted_by_id_and_the_board_reads_it_back(root: Path) -> None:
    result = service.migrate_moe(context(root))
    source_items = [item for item in result["items"] if not item.get("made")]
    places = Counter((item["kind"], item["old_id"]) for item in source_items)
    entities = {
        (kind, json.loads(path.read_text())["id"])
        for kind, folder in (
            ("epic", "epics"),
            ("task", "tasks"),
            ("worker", "workers"),
            ("team", "teams"),
            ("proposal", "proposals"),
            ("channel", "channels"),
            ("decision", "decisions"),
        )
        for path in (MOE / folder).glob("*.json")
    }
    messages = {("message", json.loads(line)["id"]) for path in (MOE / "messages").glob("*.jsonl") for line in path.read_text().splitlines() if line.strip()}
    events = {("event", json.loads(line)["id"]) for line in (MOE / "activity.log").read_text().splitlines()}
    assert set(places) == entities | messages | events | {("project", "proj-5e1f0a2b")} and set(places.values()) == {1}
    ledger = result["ledger"]["items"]
    assert ledger["in"] == len(places) == ledger["out"] + ledger["skipped"] and result["ledger"]["lossless"]
    skipped = [item for item in source_items if item["action"] == "skip"]
    assert {item["old_id"] for item in skipped} == {"chan-aa11bb22", "chan-cc33dd44"}  # the board's #general and #qa exist always
    assert all("exists always" in item["reason"] for item in skipped)
    assert {item["old_id"] for item in result["items"] if item.get("made")} == {"chan-77889900", "dec-0a0b0c0d:verdict"}
    board = BoardStore(root, persist=False).load()
    assert board.problems == () and len(board.tasks) == 5 and len(board.epics) == 3
    assert board.project.name == "lantern" and board.project.settings.approval_mode == "TURBO" and board.project.settings.chat_max_agent_hops == 4
    assert not queries.list_tasks(context(root)).get("problems")
    # Each event is in the file of its own day, and reads back as one.
    logged = queries.get_activity_log(context(root), limit=1000)
    assert "problems" not in logged
    assert {e["payload"]["source_id"] for e in logged["events"] if "source_id" in e["payload"]} == {old for _, old in events}
    day_files = sorted((root / ".moss" / "board" / "activity").glob("*.jsonl"))
    assert day_files and not (root / ".moss" / "board" / "activity.jsonl").exists()
    assert all(json.loads(line)["timestamp"].startswith(path.stem) for path in day_files for line in path.read_text().splitlines())


def test_every_field_has_the_fate_the_ledger_reports(root: Path) -> None:
    result = service.migrate_moe(context(root))
    planned = moe.plan(_source(MOE), scope="proj-5e1f0a2b", imported={}, project=None, today="20261125", now="2026-11-25T12:00:00Z")
    fates: dict[str, list[Any]] = {c.old_id: list(c.fates) for c in planned.candidates if not c.made}
    fates["proj-5e1f0a2b"] = list(planned.project.fates) if planned.project else []
    fates.update({f"{line.kind}:{line.old_id}": list(line.fates) for line in planned.chat if not line.made})
    fates.update({f"event:{old}": list(made) for _where, old, _record, made in planned.events})
    expected: dict[str, Counter[str]] = {}
    for found in fates.values():
        for name, fate in {(f.field, f.fate) for f in found}:
            expected.setdefault(name, Counter())[fate] += 1
    fields = result["ledger"]["fields"]
    assert set(fields) == set(expected)
    for name, counts in expected.items():
        assert {fate: fields[name][fate] for fate in (MAPPED, KEPT, DROPPED)} == {fate: counts[fate] for fate in (MAPPED, KEPT, DROPPED)}, name
    assert not result["ledger"]["dropped"]
    # Every key of every task file has a fate, and a kept one is kept as it was.
    written = _by_source(root, "tasks")
    for path in (MOE / "tasks").glob("*.json"):
        record = json.loads(path.read_text())
        task_fates = fates[record["id"]]
        assert set(record) <= {base_field(f.field).split(".", 1)[0] for f in task_fates}, record["id"]
        kept = written[record["id"]][1].get("source_fields", {})
        for fate in task_fates:
            if fate.fate == KEPT and fate.home == f"source_fields.{fate.field}":
                assert kept[fate.field] == record[fate.field], (record["id"], fate.field)
    assert {name for name, entry in fields.items() if entry["changed"]} == {
        "implementationPlan[].status",
        "status",
        "definitionOfDone",
        "title",
        "channel.name",
    }


def test_plan_steps_keep_their_status_exactly(root: Path) -> None:
    result = service.migrate_moe(context(root))
    tasks = _by_source(root, "tasks")
    board = BoardStore(root, persist=False).load()
    early = board.tasks[tasks["task-dialog-export"][0]]
    # Moe's early `DONE` step status is its COMPLETED: the board counts them done.
    assert [step.status for step in early.plan] == ["COMPLETED", "COMPLETED"]
    assert tasks["task-dialog-export"][1]["source_fields"]["implementationPlan"] == {"step-1": {"status": "DONE"}, "step-2": {"status": "DONE"}}
    assert _items(result)["task-dialog-export"]["changed"]["implementationPlan[].status"] == "DONE -> COMPLETED; the source's step is kept"
    assert early.definition_of_done == ("The dialog opens in the last folder used",)  # the blank item is listed as changed
    working = board.tasks[tasks["task-2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e0b"][0]]
    assert [step.status for step in working.plan] == ["COMPLETED", "IN_PROGRESS"]
    assert working.plan[0].amendments[0]["amendmentId"] == "amend-1" and working.plan[1].new_files == ("internal/state/store_fail_test.go",)
    assert tasks["task-2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e0b"][1]["source_fields"]["implementationPlan"] == {"step-1": {"activeAmendmentId": "amend-1"}}


def test_comments_qa_history_evidence_handoffs_and_budgets_have_their_homes(root: Path) -> None:
    service.migrate_moe(context(root))
    tasks, epics = _by_source(root, "tasks"), _by_source(root, "epics")
    board = BoardStore(root, persist=False).load()
    working = board.tasks[tasks["task-2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e0b"][0]]
    listed = conversation.list_comments(context(root), task_id=working.id)["comments"]
    assert [(c["author"], c["timestamp"], c["content"]) for c in listed] == [
        ("worker-a1b2c3d4", "2026-06-01T10:11:00.000Z", "Scenes have the same bug; I amended step 1."),
        ("human", "2026-06-01T10:15:00.000Z", "Should scenes also fade?\n\nIf so, say so in the notes."),
    ]
    pending = conversation.get_pending_questions(context(root))
    assert json.dumps(pending).count(listed[1]["id"]) == 1 and working.id in json.dumps(pending)  # Moe's hasPendingQuestion
    text = run_cli("moss", "task", "comments", working.id, cwd=root)
    assert text.returncode == 0 and "no comments" not in text.stdout and "Should scenes also fade?" in text.stdout
    assert working.rejection_history == (
        {
            "reason": "The failing-save test is missing",
            "rejected": "2026-06-01T09:40:00.000Z",
            "reopen_count": 1,
            "failed_dod_items": ["A test makes the save fail"],
            "issues": [{"type": "missing_feature", "description": "no test forces the save to fail"}],
        },
    )
    assert working.failed_dod_items == ({"item": "A test makes the save fail", "rejected": "2026-06-01T09:40:00.000Z", "rejected_by": "qa-7"},)
    assert working.verification == {
        "commands": [{"command": "go test ./internal/state/...", "exit_code": 0, "output_tail": "ok  lantern/internal/state 0.41s"}],
        "reported": "2026-06-01T09:30:00.000Z",
    }
    assert (
        working.budget_ms == 7200000 and tasks["task-2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e0b"][1]["source_fields"]["budget"]["warnedAt"] == "2026-06-01T11:00:00.000Z"
    )
    assert working.handoffs[0]["what_is_done"] == "The save order is fixed" and working.handoffs[0]["released_by"] == "worker-e5f6"
    assert working.context_fetched_by == ("worker-a1b2c3d4",) and working.plan_size_warnings == ("2 steps touch 2 files: fine",)
    assert working.parent == working.depends_on[0] == tasks["task-8b2e4c1d"][0]
    shown = queries.show_task(context(root), task_id=working.id)
    assert shown["rejectionDetails"]["failedDodItems"] == ["A test makes the save fail"]
    assert shown["source"]["fields"]["planningNotes"]["risks"] == "Scenes share the map."
    # A rejection with no history to hold it is kept, and shown.
    fixed = tasks["task-5d7f9a0b"]
    assert (
        fixed[1]["source_fields"]["rejectionDetails"]["issues"][0]["line"] == 40
        and fixed[1]["source_fields"]["reviewCompletedAt"] == "2026-02-07T11:59:00.000Z"
    )
    assert board.tasks[fixed[0]].title == "Tray icon shows the wrong state" and fixed[1]["source_fields"]["title"] == "Tray icon   shows the wrong state"
    page = str(web_board.task_page(context(root), fixed[0], csrf="token").body)
    assert "Kept from the source" in page and "reviewCompletedAt" in page
    # An epic's rails under their early name `rails` are its rails.
    assert board.epics[epics["epic-fixes"][0]].epic_rails == ("Every fix comes with a test", "No change to the wire format")
    assert board.epics[epics["epic-3c9d1e7a"][0]].epic_rails == ("Fades never block the event loop",)
    blocked = board.tasks[tasks["task-0e1f2a3b"][0]]
    assert blocked.status == "PLANNING" and tasks["task-0e1f2a3b"][1]["source_fields"]["blockedReason"] == "waiting on the schedule format"


def test_channels_messages_and_decisions_come_into_the_boards_chat(root: Path) -> None:
    result = service.migrate_moe(context(root))
    assert not any("no such kind" in note and "channels" in note for note in result["notes"])
    channels = {row["id"]: row for row in conversation.chat_channels(context(root))["channels"]}
    assert channels["general"]["messageCount"] == 4 and channels["release-notes"]["type"] == "custom"
    assert channels["chan-77889900"]["messageCount"] == 2  # messages whose channel file is gone
    read = conversation.chat_read(context(root), channel="general", limit=10, max_content_chars=0)["messages"]
    assert [m["sender"] for m in read] == ["human", "system", "worker-a1b2c3d4", "worker-a1b2c3d4"]
    assert read[2]["replyTo"] == read[0]["id"] and read[2]["mentions"] == ["human"] and read[0]["timestamp"] == "2026-03-02T20:38:46.288Z"
    decisions = conversation.list_decisions(context(root))["decisions"]
    assert [(d["status"], d["approvedBy"], d["messageId"]) for d in decisions] == [("approved", "human", read[3]["id"])]
    assert any(".moe/skills: 6 file(s) in 5 nested folder(s)" in note for note in result["notes"])


def test_a_second_run_changes_nothing_and_a_dry_run_writes_nothing(root: Path) -> None:
    commit_all(root)
    before = snapshot(root)
    dry = service.migrate_moe(context(root), dry_run=True)
    assert snapshot(root) == before
    first = service.migrate_moe(context(root))
    assert dry["items"] == first["items"] and dry["ledger"] == first["ledger"] and dry["files"] == first["files"]
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_moe(context(root))
    assert (again["created"], again["changed"], again["report"]) == (0, 0, None) and again["ledger"]["items"]["out"] == 0
    assert snapshot(root) == before


def test_two_clones_migrating_offline_write_the_same_files(root: Path, tmp_path: Path) -> None:
    other = make_workspace(tmp_path / "clone")
    copy_fixture("moe", other)
    service.migrate_moe(context(root))
    service.migrate_moe(context(other))
    ours = {path: data for path, data in files_under(root, ".moss/board").items() if "migrations" not in path}
    theirs = {path: data for path, data in files_under(other, ".moss/board").items() if "migrations" not in path}
    assert ours == theirs


def test_an_odd_file_is_skipped_as_moe_skips_it_and_the_rest_imported(root: Path) -> None:
    (root / ".moe/tasks/task-99999999.json").write_text('{\n  "id": "task-99999999",\n  "title": "x",\n  "status": WORKING\n}\n')
    (root / ".moe/tasks/task-bom00001.json").write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "task-bom00001", "epicId": "epic-fixes", "title": "y"}).encode())
    (root / ".moe/tasks/task-noid0001.json").write_text('{"title": "no id"}')
    shaped = json.loads((root / ".moe/tasks/task-0e1f2a3b.json").read_text())
    shaped["implementationPlan"] = [{"stepId": "step-1", "description": "x", "affectedFiles": "not-a-list"}]
    (root / ".moe/tasks/task-0e1f2a3b.json").write_text(json.dumps(shaped))
    commit_all(root)
    before = snapshot(root)
    for dry_run in (True, False):
        with pytest.raises(InvalidDocument) as caught:
            service.migrate_moe(context(root), strict=True, dry_run=dry_run)
        assert caught.value.code == "MIGRATION_WOULD_DROP" and caught.value.exit_code == 4
        assert len(caught.value.details["lost"]) == 4
        assert snapshot(root) == before
    result = service.migrate_moe(context(root))
    lost = {item["from"]: item["reason"] for item in result["ledger"]["items"]["lost"]}
    assert lost[".moe/tasks/task-99999999.json:4"].startswith("SOURCE_INVALID") and "Moe skips this file too" in lost[".moe/tasks/task-99999999.json:4"]
    assert "byte-order mark" in lost[".moe/tasks/task-bom00001.json"] and "no id" in lost[".moe/tasks/task-noid0001.json"]
    assert "implementationPlan[0].affectedFiles" in lost[".moe/tasks/task-0e1f2a3b.json"]
    assert len(BoardStore(root, persist=False).load().tasks) == 4  # the other tasks come over
    assert result["ledger"]["items"]["in"] == result["ledger"]["items"]["out"] + result["ledger"]["items"]["skipped"]


def test_strict_passes_a_source_it_can_bring_whole(root: Path) -> None:
    result = service.migrate_moe(context(root), strict=True)
    assert result["ledger"]["lossless"] and result["created"] == 14
    cli = run_cli("moss", "migrate", "moe", "--strict", "--dry-run", cwd=root)
    assert cli.returncode == 0 and "ledger:" in cli.stdout


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
    skipped = _items(result)["proj-5e1f0a2b"]
    assert skipped["reason"] == "the board has a project.md of its own; Moe's rails and settings are not merged into it" and skipped["loss"]
    assert result["created"] == 13

"""Backlog.md and Beads: the two most used markdown/git task tools, read as they read their own
files, every item and every field accounted (the fixtures' READMEs name the published data
each quirk comes from)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from migrate_support import FIXTURES, commit_all, context, copy_fixture, make_workspace, snapshot

from moss_files.board import conversation, queries
from moss_files.board.store import MAX_FILE_BYTES, BoardStore
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument
from moss_files.migrate import backlog, beads, service, sources
from moss_files.migrate.ledger import DROPPED, KEPT, MAPPED, base_field
from moss_files.migrate.model import Where
from moss_files.web import board as web_board


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "project")


def _by_source(root: Path, folder: str) -> dict[str, tuple[str, dict[str, Any]]]:
    found = {}
    for path in (root / ".moss/board" / folder).glob("*.md"):
        meta = document.parse(path.read_text()).meta
        found[str(meta["source_id"])] = (path.stem, meta)
    return found


def _items(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["old_id"]: item for item in result["items"]}


def _conserved(result: dict[str, Any], source_places: set[str]) -> None:
    """Every source item is in the report once, created or skipped: in = out + skipped."""
    ledger = result["ledger"]["items"]
    places = Counter(item["from"] for item in result["items"] if not item.get("made"))
    assert set(places) == source_places and set(places.values()) == {1}
    assert ledger["in"] == len(source_places) == ledger["out"] + ledger["skipped"]
    assert ledger["out"] == sum(1 for item in result["items"] if not item.get("made") and item["action"] != "skip")


def _ledger_agrees(result: dict[str, Any], fates_by_item: dict[str, list[Any]]) -> None:
    """The report's per-field counts are the items' fates, counted again here."""
    expected: dict[str, Counter[str]] = {}
    for fates in fates_by_item.values():
        for name, fate in {(f.field, f.fate) for f in fates}:
            expected.setdefault(name, Counter())[fate] += 1
    fields = result["ledger"]["fields"]
    assert set(fields) == set(expected)
    for name, counts in expected.items():
        assert {fate: fields[name][fate] for fate in (MAPPED, KEPT, DROPPED)} == {fate: counts[fate] for fate in (MAPPED, KEPT, DROPPED)}, name


# --------------------------------------------------------------------------- Backlog.md


def _backlog_entries(base: Path) -> list[backlog.Entry]:
    """The entries the service gathers, read here through the same edge."""
    config = backlog.parse_config((base / "config.yml").read_text())[0]
    entries = []
    for folder in backlog.FOLDERS:
        for path, is_file in sources.list_entries(base / folder):
            text = path.read_text() if is_file and backlog.reads(folder, path.name, config) else None
            entries.append(backlog.Entry(Where(path.relative_to(base.parent).as_posix()), folder, path.name, is_file, text))
    return entries


def test_backlog_reads_the_files_backlog_md_reads_and_reports_the_rest(root: Path) -> None:
    copy_fixture("backlog", root)
    result = service.migrate_backlog(context(root))
    skipped = [item for item in result["items"] if item["action"] == "skip"]
    readmes = [item for item in skipped if item["old_id"] == "readme.md"]
    assert len(readmes) == 4 and all("not read by Backlog.md either" in item["reason"] and not item.get("loss") for item in readmes)
    broken = _items(result)["BACK-13"]
    assert broken["action"] == "skip" and broken["loss"] and broken["reason"].startswith("FRONTMATTER_SYNTAX")
    assert result["ledger"]["items"]["lost"] == [{"kind": "task", "old_id": "BACK-13", "from": broken["from"], "reason": broken["reason"]}]
    base = root / "backlog"
    places = {path.relative_to(root).as_posix() for folder in backlog.FOLDERS for path, _ in sources.list_entries(base / folder)}
    places = {place if not place.endswith("Broken-frontmatter.md") else broken["from"] for place in places}
    _conserved(result, places)
    assert any("backlog/docs: 1 file" in note for note in result["notes"]) and any("backlog/decisions: 1 file" in note for note in result["notes"])
    board = BoardStore(root, persist=False).load()
    assert not board.problems and len(board.tasks) == 10


def test_backlog_every_field_has_the_fate_the_ledger_reports(root: Path) -> None:
    copy_fixture("backlog", root)
    result = service.migrate_backlog(context(root))
    planned = backlog.plan(
        _backlog_entries(root / "backlog"),
        config=backlog.parse_config((root / "backlog/config.yml").read_text())[0],
        scope="Lantern",
        imported={},
        today="20261125",
    )
    made = [candidate for candidate in planned.candidates if not candidate.made]
    fates = {candidate.old_id: list(candidate.fates) for candidate in made}
    _ledger_agrees(result, fates)
    assert not result["ledger"]["dropped"]
    by_file = {candidate.where.file: candidate for candidate in made}
    written = {**_by_source(root, "tasks"), **_by_source(root, "epics")}
    for entry in _backlog_entries(root / "backlog"):
        if entry.where.file not in by_file:
            continue
        candidate = by_file[entry.where.file]
        meta = document.parse(backlog_frontmatter(entry.text or "")).meta
        assert set(meta) <= {base_field(fate.field) for fate in candidate.fates}, entry.name
        kept = written[candidate.old_id][1].get("source_fields", {})
        for fate in candidate.fates:
            if fate.fate == KEPT and fate.home == f"source_fields.{fate.field}" and fate.field in meta:
                assert kept[fate.field] == meta[fate.field], (candidate.old_id, fate.field)
            if fate.fate == MAPPED and fate.changed and fate.field in meta:
                assert kept[fate.field] == meta[fate.field], (candidate.old_id, fate.field)
    assert len(by_file) == 12


def backlog_frontmatter(text: str) -> str:
    """A task file's frontmatter as valid YAML (Backlog.md's pre-quoting applied)."""
    from moss_files.migrate import backlog_format

    split = backlog_format.split_frontmatter(text)
    assert split is not None
    return f"---\n{backlog_format.preprocess(split[0])}\n---\n"


def test_backlog_sections_are_read_by_their_markers_and_keep_their_headings(root: Path) -> None:
    copy_fixture("backlog", root)
    service.migrate_backlog(context(root))
    board = BoardStore(root, persist=False).load()
    tasks = _by_source(root, "tasks")
    stream = board.tasks[tasks["BACK-10"][0]]
    assert stream.description.startswith("Large boards run out of memory")
    for heading in ("## Implementation Plan", "## Implementation Notes", "## Final Summary"):
        assert heading in stream.description
    assert "<!--" not in stream.description and "Started on the writer" not in stream.description
    assert stream.definition_of_done == (
        "An export of ten thousand tasks stays under 100 MB of memory",
        "The output is byte-for-byte what the old exporter wrote",
        "tests pass",
        "the changelog says so",
    )
    assert tasks["BACK-10"][1]["source_fields"]["checked"] == ["AC #1", "DoD #1"]
    assert (stream.type, stream.priority, stream.order, stream.status) == ("feature", "HIGH", 3000, "WORKING")
    # A fenced example of a Final Summary inside the description stays in the description.
    summary = board.tasks[tasks["BACK-11"][0]].description
    assert summary.index("```markdown\n## Final Summary") < summary.index("Keep the example short.") < summary.index("\n## Final Summary\n\nThe guide now")
    assert summary.count("## Final Summary") == 2
    # Prose and a sub-heading beside the criteria are kept, in the description, as written.
    prose = board.tasks[tasks["BACK-12"][0]]
    assert prose.definition_of_done == ("Columns keep the board's order", "A renamed column keeps its place")
    assert "## Acceptance Criteria\n\nThe order is the board's, left to right.\n\n### Edge cases\n\n- Hidden columns are left out." in prose.description
    # Text no Backlog.md section holds comes after the description.
    chunked = board.tasks[tasks["BACK-10.01"][0]]
    assert chunked.description == "Write the stream in chunks of at most 64 KB.\n\n## Technical Notes\n\n- The chunk size is a constant, not a setting."
    assert chunked.parent == stream.id and chunked.depends_on == (board.tasks[tasks["BACK-11"][0]].id,)
    assert tasks["BACK-10.01"][1]["source_fields"]["assignee"] == "@bo" and tasks["BACK-10.01"][1]["source_fields"]["reporter"] == "@ana"
    draft = board.tasks[tasks["DRAFT-1"][0]]
    assert draft.description == "Just an idea: a dark theme for the browser view."


def test_backlog_comments_become_the_tasks_comments(root: Path) -> None:
    copy_fixture("backlog", root)
    service.migrate_backlog(context(root))
    task_id = _by_source(root, "tasks")["BACK-10"][0]
    listed = conversation.list_comments(context(root), task_id=task_id)["comments"]
    assert [(c["author"], c["timestamp"], c["content"]) for c in listed] == [
        ("@ana", "2026-03-02T10:15:00Z", "Started on the writer; the old tests still pass."),
        ("@bo", "2026-03-03T11:40:00Z", "Ready for a first look."),
    ]


def test_backlog_archive_drafts_milestones_and_twice_held_ids(root: Path) -> None:
    copy_fixture("backlog", root)
    result = service.migrate_backlog(context(root))
    board = BoardStore(root, persist=False).load()
    tasks, epics = _by_source(root, "tasks"), _by_source(root, "epics")
    parked = tasks["BACK-7"][1]
    assert parked["status"] == "ARCHIVED" and parked["source_fields"]["status"] == "In Progress" and parked["source_fields"]["folder"] == "archive/tasks"
    assert _items(result)["BACK-7"]["changed"]["status"].startswith("In Progress -> ARCHIVED")
    # One id, two files: both are Backlog.md's tasks, so both come over.
    license_task, renderer = tasks["BACK-4"], tasks["BACK-4 (back-4 - Try-a-second-renderer.md)"]
    assert license_task[1]["status"] == "DONE" and renderer[1]["source_fields"]["status"] == "Won't Do"
    assert tasks["DRAFT-2"][1]["status"] == "ARCHIVED" and tasks["DRAFT-2"][1]["source_fields"]["folder"] == "archive/drafts"
    streaming, alpha = board.epics[epics["milestone:m-2"][0]], board.epics[epics["milestone:m-1"][0]]
    assert (streaming.title, streaming.status, streaming.description) == ("Streaming", "ACTIVE", "Everything that makes exports and imports stream.")
    assert (alpha.title, alpha.status) == ("Alpha", "ARCHIVED")
    assert board.tasks[tasks["BACK-10"][0]].epic == streaming.id and board.tasks[tasks["BACK-3"][0]].epic == alpha.id
    legacy = board.epics[board.tasks[tasks["BACK-12"][0]].epic]
    assert legacy.title == "M1 - Alpha" and legacy.id == epics["value:M1 - Alpha"][0]
    assert tasks["BACK-12"][1]["source_fields"]["dependencies"] == ["task-3"] and not board.tasks[tasks["BACK-12"][0]].depends_on
    old_style = board.tasks[tasks["BACK-3"][0]]
    assert old_style.definition_of_done == ("The folders exist", "The first three tasks are written") and old_style.completed == "2025-06-10T00:00:00Z"
    assert "## Implementation Notes\n\nDone by hand" in old_style.description


def test_backlog_kept_fields_are_shown_by_task_show(root: Path) -> None:
    copy_fixture("backlog", root)
    service.migrate_backlog(context(root))
    task_id = _by_source(root, "tasks")["BACK-10"][0]
    shown = queries.show_task(context(root), task_id=task_id)
    assert shown["type"] == "feature"
    assert shown["source"]["system"] == "backlog:Lantern" and shown["source"]["id"] == "BACK-10"
    assert shown["source"]["fields"]["labels"] == ["export", "memory"] and shown["source"]["fields"]["references"] == ["src/export/writer.ts"]
    page = str(web_board.task_page(context(root), task_id, csrf="token").body)
    assert "<dt>type</dt><dd>feature</dd>" in page and "Kept from the source" in page and "src/export/writer.ts" in page
    text = run_cli("moss", "task", "show", task_id, cwd=root)
    assert text.returncode == 0 and "type feature" in text.stdout
    assert "imported from backlog:Lantern (BACK-10)" in text.stdout and '  labels: ["export", "memory"]' in text.stdout


def test_backlog_twice_changes_nothing_and_a_dry_run_writes_nothing(root: Path) -> None:
    copy_fixture("backlog", root)
    commit_all(root)
    before = snapshot(root)
    dry = service.migrate_backlog(context(root), dry_run=True)
    assert snapshot(root) == before
    first = service.migrate_backlog(context(root))
    assert dry["items"] == first["items"] and dry["ledger"] == first["ledger"]
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_backlog(context(root))
    assert again["created"] == 0 and again["ledger"]["items"]["out"] == 0 and snapshot(root) == before


def test_backlog_strict_refuses_a_run_that_would_leave_a_file_behind(root: Path) -> None:
    copy_fixture("backlog", root)
    commit_all(root)
    before = snapshot(root)
    for dry_run in (True, False):
        with pytest.raises(InvalidDocument) as caught:
            service.migrate_backlog(context(root), strict=True, dry_run=dry_run)
        assert caught.value.code == "MIGRATION_WOULD_DROP" and caught.value.exit_code == 4
        assert [lost["old_id"] for lost in caught.value.details["lost"]] == ["BACK-13"]
        assert snapshot(root) == before
    (root / "backlog/tasks/back-13 - Broken-frontmatter.md").unlink()
    result = service.migrate_backlog(context(root), strict=True)
    assert result["ledger"]["lossless"] and result["created"] == 14


def test_backlog_a_task_too_large_for_the_board_is_refused_in_the_plan(root: Path) -> None:
    copy_fixture("backlog", root)
    (root / "backlog/tasks/back-13 - Broken-frontmatter.md").unlink()
    huge = "---\nid: BACK-20\ntitle: A pasted log\nstatus: To Do\n---\n\n## Description\n\n" + "log line that goes on and on\n" * 70_000
    assert len(huge.encode()) > 2 * MAX_FILE_BYTES - 200_000
    (root / "backlog/tasks/back-20 - A-pasted-log.md").write_text(huge)
    result = service.migrate_backlog(context(root))
    refused = _items(result)["BACK-20"]
    assert refused["action"] == "skip" and refused["loss"] and "FILE_TOO_LARGE" in refused["reason"]
    assert "BACK-20" not in _by_source(root, "tasks")
    listed = queries.list_tasks(context(root))
    assert listed["counts"]["total"] == 10 and not listed.get("problems")
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_backlog(context(root), strict=True, dry_run=True)
    assert caught.value.code == "MIGRATION_WOULD_DROP"


def test_a_task_file_that_cannot_be_read_is_reported_and_the_rest_imported(root: Path) -> None:
    copy_fixture("backlog", root)
    (root / "backlog/tasks/back-14 - Binary.md").write_bytes(b"---\nid: BACK-14\ntitle: x\n---\n\xff\xfe")
    os.symlink("back-10 - Stream-the-export.md", root / "backlog/tasks/back-15 - Linked.md")
    result = service.migrate_backlog(context(root))
    items = _items(result)
    assert items["BACK-14"]["loss"] and "could not be read" in items["BACK-14"]["reason"]
    assert items["BACK-15"]["loss"] and "link" in items["BACK-15"]["reason"]
    assert result["created"] == 14 and len(result["ledger"]["items"]["lost"]) == 3


# --------------------------------------------------------------------------- Beads


def _beads_records(root: Path) -> list[tuple[Where, Any]]:
    return [(Where(".beads/issues.jsonl", number), record) for number, record in sources.load_jsonl(root / ".beads/issues.jsonl", ".beads/issues.jsonl")]


def test_beads_every_item_is_counted_and_tombstones_are_skipped_as_beads_hides_them(root: Path) -> None:
    copy_fixture("beads", root)
    result = service.migrate_beads(context(root))
    lines = (root / ".beads/issues.jsonl").read_text().splitlines()
    _conserved(result, {f".beads/issues.jsonl:{number}" for number in range(1, len(lines) + 1)})
    tombstone = _items(result)["bd-t5"]
    assert tombstone["action"] == "skip" and "tombstone" in tombstone["reason"] and not tombstone.get("loss")
    assert result["ledger"]["items"]["added"] == 1 and result["ledger"]["lossless"]
    assert not BoardStore(root, persist=False).load().problems


def test_beads_every_field_has_the_fate_the_ledger_reports(root: Path) -> None:
    copy_fixture("beads", root)
    result = service.migrate_beads(context(root))
    planned = beads.plan(_beads_records(root), scope="beads", imported={}, include_deleted=False, today="20261125")
    fates = {candidate.old_id: list(candidate.fates) for candidate in planned.every_candidate() if not candidate.made}
    _ledger_agrees(result, fates)
    written = {**_by_source(root, "tasks"), **_by_source(root, "epics")}
    for _where, record in _beads_records(root):
        if record["id"] not in fates:
            continue
        item_fates = fates[record["id"]]
        assert set(record) <= {base_field(fate.field) for fate in item_fates}, record["id"]
        kept = written[record["id"]][1].get("source_fields", {})
        for fate in item_fates:
            if fate.fate == KEPT and fate.home.startswith("source_fields."):
                name = fate.home.removeprefix("source_fields.")
                assert kept[name] == (record[name] if name != "comments" else kept[name]), (record["id"], name)
            if fate.fate == MAPPED and fate.changed:
                assert fate.field in ("title", "status", "priority", "comments") and kept[fate.field] == record[fate.field]


def test_beads_links_to_epics_and_to_what_beads_does_not_wait_on(root: Path) -> None:
    copy_fixture("beads", root)
    service.migrate_beads(context(root))
    tasks, epics = _by_source(root, "tasks"), _by_source(root, "epics")
    board = BoardStore(root, persist=False).load()
    merge = board.tasks[tasks["bd-e1.2"][0]]
    cleanup = epics["bd-e2"][0]
    assert cleanup in merge.depends_on and board.epics[cleanup].status == "COMPLETED"
    assert merge.epic == epics["bd-e1"][0]  # the first epic parent; the second is kept
    assert [dep["depends_on_id"] for dep in tasks["bd-e1.2"][1]["source_fields"]["dependencies"] if dep["type"] == "parent-child"] == ["bd-e1", "bd-e2"]
    ready = queries.ready_tasks(context(root))
    waiting = {row["id"]: row["waitingOn"] for row in ready["blocked"]}
    ready_ids = {row["id"] for row in ready["ready"]}
    # Beads waits on open issues only: not on a closed epic, a tombstone, a pinned issue or an id it does not hold.
    for old in ("bd-e1.2", "bd-t3", "bd-t6", "bd-w2"):
        assert tasks[old][0] in ready_ids, (old, waiting.get(tasks[old][0]))
    assert tasks["bd-w2"][1]["source_fields"]["dependencies"][0]["depends_on_id"] == "bd-w1" and not board.tasks[tasks["bd-w2"][0]].depends_on
    # An epic's own links are kept, not dropped.
    assert [dep["type"] for dep in epics["bd-e2"][1]["source_fields"]["dependencies"]] == ["parent-child", "blocks"]
    assert epics["bd-e2"][1]["source_fields"]["priority"] == 2


def test_beads_types_priorities_statuses_and_comments_have_homes(root: Path) -> None:
    copy_fixture("beads", root)
    result = service.migrate_beads(context(root))
    tasks, epics = _by_source(root, "tasks"), _by_source(root, "epics")
    board = BoardStore(root, persist=False).load()
    assert [board.tasks[tasks[old][0]].type for old in ("bd-e1.1", "bd-t3", "bd-t6", "bd-t7")] == ["feature", "bug", "gate", "event"]
    stale = tasks["bd-t3"][1]
    assert (stale["priority"], stale["source_fields"]["priority"]) == ("LOW", 4)
    assert (stale["status"], stale["source_fields"]["status"]) == ("BACKLOG", "blocked")
    assert stale["title"] == "Daemon leaves the database stale after a pull" and stale["source_fields"]["title"].endswith("\n")
    assert _items(result)["bd-t3"]["changed"]["priority"] == "4 -> LOW; the source's priority is kept"
    assert board.tasks[tasks["bd-t4"][0]].priority == "CRITICAL"  # no priority: Beads reads 0
    assert (board.tasks[tasks["bd-t6"][0]].status, tasks["bd-t6"][1]["source_fields"]["status"]) == ("WORKING", "hooked")
    ids = board.tasks[tasks["bd-e1.1"][0]]
    assert ids.definition_of_done == ("two clones never mint the same id", "old ids still resolve")
    assert "## Acceptance Criteria\n\n- [x] two clones" in ids.description  # the checked mark is kept as written
    listed = conversation.list_comments(context(root), task_id=ids.id)["comments"]
    assert [(c["author"], c["timestamp"]) for c in listed] == [("tomas", "2026-04-01T10:00:00Z"), ("mira", "2026-04-01T11:30:00Z")]
    assert listed[1]["content"].startswith("Agreed:\n\n```go")
    assert epics["bd-e1"][1]["source_fields"]["comments"][0]["author"] == "mira"
    shown = queries.show_epic(context(root), epic_id=epics["bd-e1"][0])
    assert shown["source"]["fields"]["comments"][0]["text"].startswith("## Plan")


def test_beads_tombstones_come_as_archived_on_request(root: Path) -> None:
    copy_fixture("beads", root)
    result = service.migrate_beads(context(root), include_deleted=True)
    assert result["ledger"]["items"]["skipped"] == 0
    tasks = _by_source(root, "tasks")
    assert tasks["bd-t5"][1]["status"] == "ARCHIVED" and tasks["bd-t5"][1]["source_fields"]["delete_reason"] == "duplicate of bd-e1.1"


def test_beads_twice_changes_nothing_and_a_dry_run_writes_nothing(root: Path) -> None:
    copy_fixture("beads", root)
    commit_all(root)
    before = snapshot(root)
    dry = service.migrate_beads(context(root), dry_run=True)
    assert snapshot(root) == before
    first = service.migrate_beads(context(root))
    assert dry["items"] == first["items"] and dry["files"] == first["files"]
    assert any(path.startswith(".moss/board/comments/") for path in first["files"]["created"])
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_beads(context(root))
    assert again["created"] == 0 and snapshot(root) == before


def test_beads_strict_refuses_a_record_it_would_leave_behind(root: Path) -> None:
    copy_fixture("beads", root)
    with (root / ".beads/issues.jsonl").open("a") as handle:
        handle.write(json.dumps({"title": "no id here", "status": "open", "priority": 2}) + "\n")
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_beads(context(root), strict=True)
    assert caught.value.code == "MIGRATION_WOULD_DROP" and caught.value.details["lost"][0]["from"] == ".beads/issues.jsonl:12"
    assert snapshot(root) == before
    result = service.migrate_beads(context(root))
    assert result["ledger"]["items"]["lost"][0]["reason"].startswith("the record has no id")


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


def test_backlog_format_reads_as_backlog_md_does() -> None:
    from moss_files.migrate import backlog_format as fmt

    assert fmt.preprocess("assignee: @ana\nreporter: @bo # who\nassignee: [@ana, 'x']\ndue_date: 2026-03-01\ntitle: @keep") == (
        'assignee: "@ana"\nreporter: "@bo # who"\nassignee: ["@ana", \'x\']\ndue_date: "2026-03-01"\ntitle: @keep'
    )
    assert fmt.split_frontmatter("---\nid: a\n---\nbody\n") == ("id: a", "body\n")
    assert fmt.split_frontmatter("no frontmatter") is None
    # A hand edit left a second BEGIN and a second END: the notes are empty, and the stray
    # marker is not taken for text.
    body = fmt.read_body(
        "## Implementation Notes\n\n<!-- SECTION:NOTES:BEGIN -->\n<!-- SECTION:NOTES:BEGIN -->\n<!-- SECTION:NOTES:END -->\n\n<!-- SECTION:NOTES:END -->\n"
    )
    assert "notes" in body.present and "notes" not in body.sections and body.outside == ""
    unbalanced = fmt.checklist("## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [x] #1 a\n", "AC")
    assert unbalanced.items == ()  # Backlog.md reads no criteria from unbalanced markers
    aliases = fmt.milestone_aliases([("m-7", "Agent CLI"), ("m-8", "Shared"), ("m-9", "Shared")], [("m-1", "CLI")])
    assert [fmt.resolve_milestone(value, aliases) for value in ("m-7", "7", "agent cli", "M-1", "cli", "Shared", "M3 - GUI")] == [
        "m-7",
        "m-7",
        "m-7",
        "m-1",
        "m-1",
        None,
        None,
    ]
    assert [backlog.canonical(ident, "BACK") for ident in ("back-24.02", "BACK-24.2", "24", "task-3")] == ["BACK-24.2", "BACK-24.2", "BACK-24", "TASK-3"]


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


def test_beads_an_id_held_twice_names_its_file_by_the_first_record_and_links_by_the_last(root: Path) -> None:
    """The plan goes through the file twice (sources.JsonLines) and keeps only a few facts of
    each issue between: which record of a repeated id counts for what must not change. The
    first record is the one imported (the second is reported); the status a link to it sees
    is the last record's, as Beads, reading the file in order, ends up with."""
    stamp = "2026-01-21T10:00:00Z"
    _jsonl(
        root / ".beads" / "issues.jsonl",
        [
            {"id": "bd-e", "title": "Epic", "issue_type": "epic", "status": "open", "created_at": stamp},
            {
                "id": "bd-x",
                "title": "First",
                "status": "open",
                "created_at": stamp,
                "dependencies": [{"issue_id": "bd-x", "depends_on_id": "bd-e", "type": "parent-child"}],
            },
            {
                "id": "bd-y",
                "title": "Waits",
                "status": "open",
                "created_at": stamp,
                "dependencies": [{"issue_id": "bd-y", "depends_on_id": "bd-x", "type": "blocks"}],
            },
            {"id": "bd-x", "title": "Second", "status": "pinned", "created_at": stamp},
        ],
    )
    result = service.migrate_beads(context(root))
    tasks = _by_source(root, "tasks")
    assert tasks["bd-x"][1]["title"] == "First"
    repeated = [item for item in result["items"] if item["old_id"] == "bd-x"]
    assert [item["action"] for item in repeated] == ["create", "skip"] and "twice" in repeated[1]["reason"]
    # The last record of bd-x is pinned, which Beads does not wait on: the link is kept, not mapped.
    assert not tasks["bd-y"][1].get("depends_on") and tasks["bd-y"][1]["source_fields"]["dependencies"][0]["depends_on_id"] == "bd-x"


def test_beads_lines_are_parsed_on_each_pass_and_let_go_on_the_last(root: Path) -> None:
    path = root / ".beads" / "issues.jsonl"
    _jsonl(path, [{"id": "bd-1", "title": "One"}, {"id": "bd-2", "title": "Two"}])
    records = sources.JsonLines(path, ".beads/issues.jsonl", passes=2)
    first = [(str(where), record["id"]) for where, record in records]
    assert first == [(".beads/issues.jsonl:1", "bd-1"), (".beads/issues.jsonl:2", "bd-2")] and len(records) == 2
    assert [(str(where), record["id"]) for where, record in records] == first
    assert records.lines == [None, None] and len(records) == 2
    with pytest.raises(RuntimeError, match="as many times as it was made for"):
        list(records)
    path.write_text('{"id": "bd-1", "title": "One"}\n\n{"id": "bd-2", "title": \n', encoding="utf-8")
    with pytest.raises(InvalidDocument) as caught:
        list(sources.JsonLines(path, ".beads/issues.jsonl"))
    assert caught.value.code == "SOURCE_INVALID" and caught.value.line == 3


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n",
        '\ufeff{"id": "bd-1"}\r\n \t\n\u3000\n{"id": "bd-2", "title": "caf\u00e9 \U0001f600"}'.encode(),
        '\ufeff\n\ufeff{"id": "bd-1"}\n\x85\n{"a": "\u0100"}'.encode(),
        b'{"id": "bd-1"}',
        b'{"id": "bd-1"}\n{"t": "\xe2\x82"}\n{"t": "\xff"}\n',  # a sequence cut short by the line's end, then a byte never UTF-8
        b'{"id": "bd-1"}\n{"t": "\xe2\x82\n"}\n',  # cut short by a newline inside the text
        b'{"id": "bd-1"}\n{"t": "\xff"}\n{"t": "a\x00"}\n',  # a NUL is reported before bad UTF-8, as for the whole text
        b"\xef\xbb",
    ],
)
def test_a_jsonl_source_read_as_line_bytes_holds_the_lines_and_raises_what_its_text_does(tmp_path: Path, data: bytes) -> None:
    """`sources.read_lines` (each line's bytes, so a large source is never one text four bytes a
    character) holds the lines the file's text (`read_text`) has that are not blank, BOM
    dropped, and refuses a file exactly as `read_text` does."""
    path = tmp_path / "issues.jsonl"
    path.write_bytes(data)

    def outcome(read: Any) -> Any:
        try:
            return read()
        except InvalidDocument as err:
            return (err.code, err.message, err.path, err.line, err.details)

    from_text = outcome(lambda: [(number, line) for number, line in enumerate(sources.read_text(path, "issues.jsonl").split("\n"), start=1) if line.strip()])
    from_bytes = outcome(lambda: [(number, line.decode("utf-8")) for number, line in sources.read_lines(path, "issues.jsonl")])
    assert from_bytes == from_text


def test_beads_a_comment_is_kept_verbatim_exactly_when_its_record_is_over_the_limit() -> None:
    """The size a comment's record is measured at is its compact JSON (`json.dumps`, no ASCII
    escapes) in UTF-8: at that many bytes it is a board comment, one byte fewer and it stays in
    `source_fields`."""
    record = {"id": "bd-1", "title": "One", "comments": [{"id": 7, "author": "ann", "text": 'café ✓ "quoted"', "created_at": "2026-01-02T03:04:05Z"}]}

    def plan(limit: int | None) -> tuple[list[dict[str, Any]], list[Any]]:
        result = beads.plan([(Where("issues.jsonl", 1), record)], scope="beads", imported={}, include_deleted=False, today="20260101", max_comment_bytes=limit)
        candidates = list(result.every_candidate())
        kept = [fate.value for candidate in candidates for fate in candidate.fates if fate.field == "comments" and fate.fate == KEPT]
        return [comment.record for comments in result.comments.values() for comment in comments], kept

    made, kept = plan(None)
    size = len(json.dumps(made[0], ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    assert len(made) == 1 and not kept and plan(size) == (made, [])
    assert plan(size - 1)[0] == [] and len(plan(size - 1)[1]) == 1


def test_beads_a_later_pass_reads_checked_lines_as_the_first_pass_did(root: Path) -> None:
    """A pass after the first parses the lines the first checked without the duplicate-key
    check: the same values, keys in the same order; a line the first pass never reached (it
    stopped early) is still checked."""
    path = root / ".beads" / "issues.jsonl"
    records_in = [{"id": "bd-1", "title": "One", "labels": ["a"], "deps": [{"z": 1, "a": {"b": None}}]}, {"title": "Two", "id": "bd-2", "n": 1.5}]
    _jsonl(path, records_in)
    records = sources.JsonLines(path, ".beads/issues.jsonl", passes=3)
    first = [(where, record, list(record)) for where, record in records]
    second = [(where, record, list(record)) for where, record in records]
    assert first == second == [(Where(".beads/issues.jsonl", number), record, list(record)) for number, record in enumerate(records_in, start=1)]
    path.write_text('{"id": "bd-1", "title": "One"}\n{"id": "bd-2", "id": "bd-3"}\n', encoding="utf-8")
    records = sources.JsonLines(path, ".beads/issues.jsonl", passes=2)
    for _where, _record in records:
        break  # the first pass stops after its first line
    with pytest.raises(InvalidDocument) as caught:
        list(records)
    assert caught.value.code == "JSON_DUPLICATE_KEY" and caught.value.line == 2

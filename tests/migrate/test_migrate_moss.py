"""Moss: its SQLite store (read-only) and its JSONL exports become capsule files, ids kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from migrate_support import FIXTURES, build_database, commit_all, context, files_under, make_workspace, snapshot

from moss_files.capsules import model as capsules
from moss_files.capsules import service as capsule_ops
from moss_files.capsules import transfer
from moss_files.capsules.store import CapsuleStore
from moss_files.foundation.errors import Conflict, InvalidDocument
from moss_files.migrate import service

EXPORT = FIXTURES / "moss" / "export.jsonl"
FIXTURE_IDS = ["01ARZ3NDEKTSV4RRFFQ69G5FAV", "01HQ3K8ZJ5X9V2B7N4M6P8R0TA", "01HQ3K8ZJ5X9V2B7N4M6P8R0TB", "01HQ3K8ZJ5X9V2B7N4M6P8R0TC"]
DERIVED = {"workspace_norm", "name_norm", "capsule_chars", "tokens_estimate"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "project")


def _records(path: Path) -> dict[str, dict]:
    return {record["id"]: record for record in map(json.loads, path.read_text().splitlines()) if "id" in record}


def test_an_export_becomes_capsule_files_with_their_ids_and_deleted_ones_wait_for_the_flag(root: Path) -> None:
    result = service.migrate_moss(context(root), jsonl=str(EXPORT))
    assert (result["created"], result["skipped"]) == (3, 1)
    skipped = [item for item in result["items"] if item["action"] == "skip"]
    assert skipped[0]["old_id"] == FIXTURE_IDS[3] and "soft-deleted" in skipped[0]["reason"]
    scan = CapsuleStore(root).scan(None)
    assert not scan.problems
    found = {stored.capsule.id: stored.capsule for stored in scan.capsules}
    assert sorted(found) == FIXTURE_IDS[:3]
    loud = found["01HQ3K8ZJ5X9V2B7N4M6P8R0TA"]
    # The awkward record: a workspace with spaces and case, an upper-case name, blank fields.
    assert (loud.workspace, loud.workspace_norm, loud.name, loud.name_norm) == ("  My Project  ", "my project", "LOUD_NAME", "loud_name")
    assert (loud.run_id, loud.phase, loud.role, loud.tags) == ("run-7", None, None, None)
    assert loud.chars == len(loud.text)  # recomputed, not the record's 1
    assert found["01HQ3K8ZJ5X9V2B7N4M6P8R0TB"].name is None
    report = json.loads((root / result["report"]).read_text())
    assert report["created"] == 3 and report["items"][1]["path"].startswith(".moss/capsules/")

    again = service.migrate_moss(context(root), jsonl=str(EXPORT), include_deleted=True)
    assert again["created"] == 1 and (root / ".moss/capsules/startupa/deleted/01HQ3K8ZJ5X9V2B7N4M6P8R0TC.md").is_file()
    deleted = CapsuleStore(root).find_by_id(FIXTURE_IDS[3], include_deleted=True)
    assert deleted is not None and deleted.capsule.deleted


def test_export_after_migration_gives_back_the_same_records(root: Path, tmp_path: Path) -> None:
    service.migrate_moss(context(root), jsonl=str(EXPORT), include_deleted=True)
    home = tmp_path / "home"
    out = transfer.export(context(root, home=home), path=str(root / ".moss/exports/round.jsonl"), include_deleted=True)
    assert out["count"] == 4
    original, exported = _records(EXPORT), _records(Path(out["path"]))
    assert set(original) == set(exported)
    for capsule_id, record in original.items():
        mine = exported[capsule_id]
        for key, value in record.items():
            if key in DERIVED:
                continue
            expected = value.strip() or None if key in ("run_id", "phase", "role") and isinstance(value, str) else value
            expected = expected or None if key == "tags" else expected
            assert mine[key] == expected, (capsule_id, key)
        assert mine["capsule_chars"] == capsules.count_chars(record["capsule_text"])


def test_the_store_is_read_read_only_and_gives_the_same_files_as_its_export(root: Path, tmp_path: Path) -> None:
    db = build_database(FIXTURES / "moss" / "moss.sql", tmp_path / "home" / ".moss" / "moss.db", wal=True)
    before = snapshot(db.parent)
    result = service.migrate_moss(context(root, home=tmp_path / "home"), include_deleted=True)
    assert result["created"] == 4 and result["version"] == "SQLite user_version 1"
    assert snapshot(db.parent) == before  # no -wal, no -shm, not a byte changed
    from_store = files_under(root, ".moss/capsules")
    other = make_workspace(tmp_path / "other")
    service.migrate_moss(context(other), jsonl=str(EXPORT), include_deleted=True)
    assert files_under(other, ".moss/capsules") == from_store


def test_one_workspace_can_be_chosen(root: Path) -> None:
    result = service.migrate_moss(context(root), jsonl=str(EXPORT), workspace="STARTUPA")
    assert result["created"] == 1
    assert sorted(item["reason"] for item in result["items"] if item["action"] == "skip")[0].startswith("in workspace")


def test_a_second_run_changes_nothing_and_writes_no_report(root: Path) -> None:
    service.migrate_moss(context(root), jsonl=str(EXPORT))
    commit_all(root)
    before = snapshot(root)
    again = service.migrate_moss(context(root), jsonl=str(EXPORT))
    assert (again["created"], again["changed"], again["report"]) == (0, 0, None)
    assert {item["reason"] for item in again["items"]} == {"already imported", "soft-deleted in Moss (--include-deleted brings it)"}
    assert snapshot(root) == before


def test_a_dry_run_writes_nothing_and_says_what_a_run_would_do(root: Path) -> None:
    commit_all(root)
    before = snapshot(root)
    dry = service.migrate_moss(context(root), jsonl=str(EXPORT), dry_run=True)
    assert snapshot(root) == before
    real = service.migrate_moss(context(root), jsonl=str(EXPORT))
    assert dry["items"] == real["items"] and dry["dry_run"] and dry["report"] is None


def test_a_malformed_line_stops_the_source_with_its_line_and_writes_nothing(root: Path, tmp_path: Path) -> None:
    lines = EXPORT.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines[:3], '{"id": "01HQ3K8ZJ5X9V2B7N4M6P8R0TZ", "workspace_raw": "w"', *lines[3:]]) + "\n")
    commit_all(root)
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_moss(context(root), jsonl=str(bad))
    assert (caught.value.code, caught.value.line) == ("SOURCE_INVALID", 4)
    invalid = tmp_path / "invalid.jsonl"
    invalid.write_text(lines[0] + "\n" + json.dumps({**json.loads(lines[1]), "capsule_text": ""}) + "\n")
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_moss(context(root), jsonl=str(invalid))
    assert (caught.value.code, caught.value.line) == ("SOURCE_INVALID", 2)
    assert snapshot(root) == before


def test_a_taken_name_stops_the_source_unless_renaming(root: Path) -> None:
    ctx = context(root)
    capsule_ops.store(ctx, workspace="startupA", name="auth", capsule_text=json.loads(EXPORT.read_text().splitlines()[1])["capsule_text"])
    before = files_under(root, ".moss/capsules")
    with pytest.raises(Conflict) as caught:
        service.migrate_moss(ctx, jsonl=str(EXPORT))
    assert caught.value.code == "NAME_ALREADY_EXISTS" and caught.value.details["collisions"][0]["name"] == "auth"
    assert files_under(root, ".moss/capsules") == before
    result = service.migrate_moss(ctx, jsonl=str(EXPORT), rename=True)
    assert result["created"] == 3
    assert any("auth-1" in (item.get("reason") or "") for item in result["items"])
    assert (root / ".moss/capsules/startupa/auth-1.md").is_file()


def test_merge_conflicts_in_the_capsule_folder_stop_the_run(root: Path) -> None:
    folder = root / ".moss/capsules/default"
    folder.mkdir(parents=True)
    (folder / "x.md").write_text("---\nname: x\n---\n<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n")
    before = snapshot(root)
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_moss(context(root), jsonl=str(EXPORT))
    assert caught.value.code == "MERGE_CONFLICT" and caught.value.path == ".moss/capsules/default/x.md"
    assert snapshot(root) == before


def test_a_database_that_is_not_moss_is_refused(root: Path, tmp_path: Path) -> None:
    db = build_database(FIXTURES / "loopflow" / "sqlite" / "loopflow.sql", tmp_path / "other.db")
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_moss(context(root), db=str(db))
    assert caught.value.code == "SOURCE_INVALID"
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(InvalidDocument) as caught:
        service.migrate_moss(context(root), db=str(junk))
    assert caught.value.code == "SOURCE_INVALID"

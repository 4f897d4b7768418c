"""A plan's new files: staged, made durable together, then each moved into a place no file
holds (renameat2 RENAME_NOREPLACE, or link and unlink where the kernel lacks it); all or
nothing when a place is taken meanwhile."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from migrate_support import context, copy_fixture, files_under, make_workspace

from moss_files.foundation import fs
from moss_files.foundation.errors import Conflict
from moss_files.migrate import beads, service, targets
from moss_files.migrate.model import Write

WRITES = [Write(f".moss/board/{folder}/{name}.md", f"{folder} {name}\n".encode()) for folder in ("tasks", "epics") for name in ("A", "B", "C")]


def _staged(root: Path) -> list[Path]:
    """The files left in the staging folders."""
    return [path for path in (root / targets.STAGING_DIR).rglob("*") if not path.is_dir()]


@pytest.mark.parametrize("way", ["new-folders-whole", "existing-folders-file-by-file", "without-renameat2"])
def test_new_files_are_moved_into_place_with_nothing_staged_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str) -> None:
    """Folders that do not exist yet are moved into place whole; into folders that exist (an
    empty one too: it is never replaced) each file is moved on its own; where renameat2 is
    missing (told by `fs.renameat2`'s remembered state, as after ENOSYS) each file is linked,
    then its staged name unlinked. The same files every way, each under one name."""
    if way != "new-folders-whole":
        (tmp_path / ".moss/board/epics").mkdir(parents=True)
        (tmp_path / ".moss/board/tasks").mkdir()
        (tmp_path / ".moss/board/tasks/hand-made.md").write_bytes(b"mine\n")
    if way == "without-renameat2":
        monkeypatch.setitem(fs._renameat2_state, "missing", True)
    targets.commit(tmp_path, WRITES)
    expected = {write.path: write.data for write in WRITES}
    if way != "new-folders-whole":
        expected[".moss/board/tasks/hand-made.md"] = b"mine\n"
    assert files_under(tmp_path, ".moss/board") == dict(sorted(expected.items()))
    assert all((tmp_path / write.path).stat().st_nlink == 1 for write in WRITES)
    assert _staged(tmp_path) == []


def test_a_crashed_runs_staging_is_cleared_by_the_next(tmp_path: Path) -> None:
    """A staging folder whose process is gone (its files, and folders of files) goes."""
    stale = tmp_path / targets.STAGING_DIR / "migrate-999999999-0badcafe"
    (stale / "0").mkdir(parents=True)
    (stale / "0" / "TASK-1.md").write_bytes(b"half")
    (stale / "7").write_bytes(b"an older build's flat staging")
    targets.commit(tmp_path, WRITES[:1])
    assert not stale.exists() and _staged(tmp_path) == []


@pytest.mark.parametrize("rename", [True, False], ids=["renameat2", "link-then-unlink"])
def test_a_place_taken_meanwhile_stops_the_commit_and_takes_back_every_file_it_placed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rename: bool) -> None:
    if not rename:
        monkeypatch.setitem(fs._renameat2_state, "missing", True)
    taken = tmp_path / WRITES[4].path  # epics/B: three tasks and an epic are placed before it
    taken.parent.mkdir(parents=True)
    taken.write_bytes(b"someone else's\n")
    with pytest.raises(Conflict) as caught:
        targets.commit(tmp_path, WRITES)
    assert caught.value.code == "ALREADY_EXISTS" and caught.value.path == WRITES[4].path
    assert files_under(tmp_path, ".moss/board") == {WRITES[4].path: b"someone else's\n"}
    assert _staged(tmp_path) == []


def test_a_beads_migration_pauses_the_cyclic_collector_and_leaves_it_as_it_found_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector is off while the plan is made and written (each full collection walked
    every object alive: 14% of the CPU at 100,000 issues), and afterwards as it was: on again
    after a run that wrote and after one that raised; still off where the caller turned it off."""
    root = make_workspace(tmp_path / "project")
    copy_fixture("beads", root)
    seen: list[bool] = []
    original = beads.plan

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(beads, "plan", watched)
    assert gc.isenabled()
    assert service.migrate_beads(context(root))["created"] > 0
    assert gc.isenabled()
    (root / ".beads" / "issues.jsonl").write_text("not json\n")
    with pytest.raises(Exception, match="not valid JSON"):
        service.migrate_beads(context(root))
    assert gc.isenabled()
    gc.disable()
    try:
        (root / ".beads" / "issues.jsonl").write_text("")
        service.migrate_beads(context(root))
        still_off = not gc.isenabled()
    finally:
        gc.enable()
    assert still_off and seen == [False, False, False]

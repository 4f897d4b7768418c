"""Bulk import as one batch: the same files as the file-by-file path, byte for byte, and all
or nothing across a kill -9 of the importing process before any one of its durable steps."""

from __future__ import annotations

import gc
import json
import os
import random
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from helpers import killed_at

from moss_files.capsules import service as ops
from moss_files.capsules import transfer
from moss_files.capsules.store import CapsuleStore
from moss_files.foundation import batch
from moss_files.foundation.config import Config
from moss_files.foundation.errors import Conflict
from moss_files.foundation.ids import IdSource, seeded_random

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
FULL = "## Objective\nShip login.\n\n## Status\nHalf.\n\n## Decisions\n- JWT\n\n## Next steps\n(none)\n\n## Files\n- a.py\n\n## Risks\n- none yet\n"
NAMES = ("auth", "Auth Flow", "naïve café", "con", "x: y", "true", "0755", "a#b", "tag list", "日本語", "trailing ", "  spaced  out")


def _ulid(rng: random.Random) -> str:
    return "01" + "".join(rng.choice(CROCKFORD) for _ in range(24))


def records(count: int, seed: int) -> list[dict[str, Any]]:
    """Varied records: odd names and workspaces, tags, orchestration fields, deleted ones."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        name = f"{rng.choice(NAMES)} {index}" if rng.random() < 0.8 else None
        extra: dict[str, Any] = {}
        if rng.random() < 0.5:
            extra["tags"] = rng.sample(["a", "b", "yes", "no", "x y", "12"], rng.randint(1, 3))
        if rng.random() < 0.3:
            extra.update(run_id=f"run-{index % 3}", phase=rng.choice(["plan", "on", "1.5"]), role="qa")
        if rng.random() < 0.1:
            extra["deleted_at"] = 300 + index
        text = FULL if rng.random() < 0.7 else f"héllo\r\nline {index}: value # not a comment"
        out.append(
            {
                "id": _ulid(rng),
                "workspace_raw": rng.choice(["default", "Startup A", "ws-ü"]),
                "name_raw": name,
                "title": rng.choice([None, "A title", "yes", f"t: {index}"]),
                "capsule_text": text,
                "created_at": 100 + index,
                "updated_at": 200 + index,
                **extra,
            }
        )
    return out


def write_export(folder: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    lines = [json.dumps({"_moss_export": True, "schema_version": "1.0", "exported_at": 1}), *(json.dumps(row, ensure_ascii=False) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def files_of(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every capsule file's bytes and permission bits (lock files aside: the file-by-file path
    leaves one per file it wrote, the batch none)."""
    base = root / ".moss" / "capsules"
    return {
        str(p.relative_to(base)): (p.read_bytes(), p.stat().st_mode & 0o777)
        for p in sorted(base.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock") and ".locks" not in p.parts
    }


def context(root: Path, home: Path, seed: int) -> ops.Context:
    (root / ".moss").mkdir(parents=True, exist_ok=True)

    def clock() -> datetime:
        return datetime(2026, 1, 19, 10, 0, tzinfo=UTC)

    return ops.Context(root, config=Config(), clock=clock, ids=IdSource(clock, seeded_random(seed)), home=home)


@pytest.mark.parametrize("mode", ["error", "replace", "rename"])
def test_the_batch_writes_the_files_the_file_by_file_path_writes(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    rows = records(120, seed=3)
    first = write_export(home / ".moss" / "exports", "first.jsonl", rows)
    # The second import collides with the first: replaced in place, moved (renamed or
    # deleted), renamed, and fresh capsules.
    rng = random.Random(5)
    again = [
        dict(
            row,
            capsule_text=row["capsule_text"] + "\nmore",
            name_raw=(row["name_raw"] + " moved" if row["name_raw"] and rng.random() < 0.3 else row["name_raw"]),
        )
        for row in rows[:60]
    ]
    again += [dict(row, id=_ulid(rng)) for row in rows[60:80]] + records(20, seed=9)
    second = write_export(home / ".moss" / "exports", "second.jsonl", again)
    results = {}
    for batched in (True, False):
        root = tmp_path / f"batched-{batched}"
        ctx = context(root, home, seed=11)
        assert transfer.import_capsules(ctx, path=str(first), batched=batched)["imported"] == 120
        outcome = transfer.import_capsules(ctx, path=str(second), mode=mode, batched=batched)
        results[batched] = (outcome, files_of(root))
    assert results[True] == results[False]
    assert results[True][1] and not [name for name in results[True][1] if ".tmp-" in name]
    if mode != "error":
        assert results[True][0]["imported"] == 100


def test_where_renameat2_is_missing_the_batch_links_and_writes_the_same_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay moves each new file into place with renameat2 RENAME_NOREPLACE; where the
    kernel or C library lacks it (told by `fs.renameat2`'s remembered state, as after ENOSYS),
    it links, then unlinks: both leave the same files, with nothing staged left behind."""
    home = tmp_path / "home"
    export = write_export(home / ".moss" / "exports", "some.jsonl", records(40, seed=4))
    found = {}
    for missing in (False, True):
        if missing:
            monkeypatch.setitem(batch.fs._renameat2_state, "missing", True)
        root = tmp_path / f"missing-{missing}"
        assert transfer.import_capsules(context(root, home, seed=2), path=str(export))["imported"] == 40
        found[missing] = files_of(root)
        base = root / ".moss" / "capsules"
        assert not batch.pending(base) and [p for p in base.rglob("*") if p.is_file() and p.stat().st_nlink != 1] == []
    assert found[False] == found[True] and len(found[True]) == 40


def test_an_import_pauses_the_cyclic_collector_and_leaves_it_as_it_found_it(tmp_path: Path) -> None:
    """The collector is off while an import runs (it walked every object alive, 7% of an
    import's CPU), and afterwards as it was before: on again after an import that wrote, one
    refused line by line, and one that raised; still off where the caller had turned it off."""
    home = tmp_path / "home"
    export = write_export(home / ".moss" / "exports", "some.jsonl", records(5, seed=6))
    too_large = home / ".moss" / "exports" / "large.jsonl"
    too_large.write_bytes(b"x" * (transfer.MAX_IMPORT_BYTES + 1))
    ctx = context(tmp_path / "p", home, seed=1)
    seen: list[bool] = []
    original = transfer._import

    def watched(*args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    assert gc.isenabled()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(transfer, "_import", watched)
        assert transfer.import_capsules(ctx, path=str(export))["imported"] == 5
        assert gc.isenabled()
        assert transfer.import_capsules(ctx, path=str(export))["errors"]  # every id collides
        assert gc.isenabled()
        with pytest.raises(transfer.InvalidDocument):
            transfer.import_capsules(ctx, path=str(too_large))
        assert gc.isenabled()
        gc.disable()
        try:
            assert transfer.import_capsules(ctx, path=str(export))["errors"]
            still_off = not gc.isenabled()
        finally:
            gc.enable()
    assert seen == [False, False, False, False] and still_off


def test_a_hand_made_file_in_a_planned_slot_stops_the_whole_batch(tmp_path: Path) -> None:
    root = tmp_path / "project"
    base = root / ".moss" / "capsules"
    changes = batch.FileBatch(base)
    changes.create(PurePosixPath("default/a.md"), b"a\n")
    changes.create(PurePosixPath("default/b.md"), b"b\n")
    (base / "default").mkdir(parents=True)
    (base / "default" / "b.md").write_bytes(b"mine\n")
    with pytest.raises(Conflict) as caught:
        changes.commit()
    assert caught.value.code == "ALREADY_EXISTS"
    assert sorted(p.name for p in base.rglob("*")) == ["b.md", "default"]
    assert (base / "default" / "b.md").read_bytes() == b"mine\n"


@pytest.mark.parametrize("count", [3, batch.LIST_FROM + 40])
@pytest.mark.parametrize("taken", ["a file", "a folder", "a symbolic link", "nothing"])
def test_a_taken_slot_is_found_whether_the_folder_is_listed_or_each_name_stat_ed(tmp_path: Path, count: int, taken: str) -> None:
    """From `LIST_FROM` new files into one folder, the commit lists the folder once instead of
    asking for each name: the answer is the same, whatever holds the place (and a removed
    file's place may be taken by a new one either way)."""
    base = tmp_path / "capsules"
    (base / "w").mkdir(parents=True)
    for index in range(200):  # files already there, none in a planned slot
        (base / "w" / f"old-{index}.md").write_bytes(b"old\n")
    (base / "w" / "leaving.md").write_bytes(b"leaving\n")
    before = sorted(str(p.relative_to(base)) for p in base.rglob("*"))
    clash = base / "w" / f"new-{count // 2}.md"
    if taken == "a file":
        clash.write_bytes(b"by hand\n")
    elif taken == "a folder":
        clash.mkdir()
    elif taken == "a symbolic link":
        clash.symlink_to("nowhere")
    changes = batch.FileBatch(base)
    changes.remove(PurePosixPath("w/leaving.md"), batch.fs.digest_of(b"leaving\n"))
    changes.create(PurePosixPath("w/leaving.md"), b"arriving\n")
    for index in range(count):
        changes.create(PurePosixPath(f"w/new-{index}.md"), f"{index}\n".encode())
    if taken == "nothing":
        changes.commit()
        assert (base / "w" / "leaving.md").read_bytes() == b"arriving\n"
        assert len(list((base / "w").iterdir())) == 200 + 1 + count
        return
    with pytest.raises(Conflict) as caught:
        changes.commit()
    assert caught.value.code == "ALREADY_EXISTS" and caught.value.path == str(clash)
    assert sorted(str(p.relative_to(base)) for p in base.rglob("*")) == sorted([*before, str(clash.relative_to(base))])


def test_recovery_finishes_a_committed_batch_and_drops_an_uncommitted_one(tmp_path: Path) -> None:
    base = tmp_path / ".moss" / "capsules"
    base.mkdir(parents=True)
    # An uncommitted batch: staged files, no journal.
    (base / ".batch.tmp-1-aa").mkdir()
    (base / ".batch.tmp-1-aa" / "000000").write_bytes(b"never\n")
    # A committed batch: its journal names two creates, one already done before the crash.
    staged = base / ".batch.tmp-2-bb"
    staged.mkdir()
    (staged / "000001").write_bytes(b"two\n")
    (base / "w").mkdir()
    (base / "w" / "one.md").write_bytes(b"one\n")
    journal = [
        {"batch": 1, "changes": 2},
        {"op": "create", "target": "w/one.md", "staged": "000000"},
        {"op": "create", "target": "w/two.md", "staged": "000001"},
    ]
    (base / ".batch.tmp-2-bb.journal").write_text("".join(json.dumps(line) + "\n" for line in journal))
    assert batch.pending(base)
    assert batch.recover(base) == 1
    assert not batch.pending(base)
    assert {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file()} == {"w/one.md": b"one\n", "w/two.md": b"two\n"}
    assert batch.recover(base) == 0


# The system calls a batch makes durable changes with (and `open`, which creates the staging
# files and the journal's temporary): a kill lands just before each of them in turn.
DURABLE_CALLS = ("open", "mkdir", "write", "fsync", "rename", "replace", "link", "unlink", "rmdir", "renameat2")


def _import_killed_at(ctx: ops.Context, export: Path, step: int) -> bool:
    """An import killed just before its `step`-th durable system call; True if it died there,
    False if the import finished first."""
    return killed_at(step, DURABLE_CALLS, lambda: transfer.import_capsules(ctx, path=str(export)))


@pytest.mark.slow
@pytest.mark.parametrize("flush", ["syncfs", "fsync each"])
def test_kill_9_at_every_durable_step_of_an_import_leaves_every_capsule_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush: str) -> None:
    """Issue 27 item 5: a kill -9 of an import, at each of its durable steps in turn (no timing
    involved), leaves every capsule or none once the next command has looked, and none of the
    batch's temporaries: its staging folder, its journal, or the journal's own temporary
    (`..batch.tmp-<pid>-<hex>.journal.tmp-<pid>-<hex>`, which a kill between its write and its
    rename left behind for good). The staged files and the journal's temporary are flushed by
    one syncfs, or (where the C library has none: `flush` "fsync each") one fsync each."""
    if flush == "fsync each":
        monkeypatch.setattr(batch, "_libc", [None])  # as on a C library without syncfs
    home = tmp_path / "home"
    export = write_export(home / ".moss" / "exports", "few.jsonl", records(4, seed=21))
    reference = tmp_path / "reference"
    assert transfer.import_capsules(context(reference, home, seed=1), path=str(export))["imported"] == 4
    expected = files_of(reference)
    outcomes = set()
    step = 0
    while True:
        step += 1
        project = tmp_path / f"crash-{step}"
        ctx = context(project, home, seed=1)
        crashed = _import_killed_at(ctx, export, step)
        # The next command settles whatever the killed process left, then sees all or nothing.
        listed = ops.inventory(ctx, include_deleted=True, limit=1)
        found = files_of(project)
        assert found in ({}, expected), f"kill at durable step {step}: {len(found)} of {len(expected)} files"
        assert listed["pagination"]["total"] == (4 if found else 0)
        base = project / ".moss" / "capsules"
        litter = sorted(str(p.relative_to(base)) for p in base.rglob("*") if ".tmp-" in p.name or p.name.startswith((".batch", "..batch")))
        assert litter == [], f"kill at durable step {step} left {litter}"
        outcomes.add(bool(found))
        if not crashed:
            break
    assert outcomes == {False, True} and step > 20  # kills landed before and after the commit point


def test_readers_of_a_store_recover_before_they_list(tmp_path: Path) -> None:
    ctx = context(tmp_path / "p", tmp_path / "home", seed=1)
    ops.store(ctx, capsule_text=FULL, name="kept")
    base = tmp_path / "p" / ".moss" / "capsules"
    (base / ".batch.tmp-9-cc").mkdir()
    (base / ".batch.tmp-9-cc" / "000000").write_bytes(b"half\n")
    assert [item["name"] for item in ops.list_capsules(ctx)["items"]] == ["kept"]
    assert not (base / ".batch.tmp-9-cc").exists()
    assert CapsuleStore(tmp_path / "p").scan().problems == ()


def test_a_file_made_by_hand_during_the_replay_is_kept_and_so_is_the_batchs_copy(tmp_path: Path) -> None:
    base = tmp_path / ".moss" / "capsules"
    (base / "w").mkdir(parents=True)
    (base / ".batch.tmp-3-dd").mkdir()
    (base / ".batch.tmp-3-dd" / "000000").write_bytes(b"batch\n")
    (base / ".batch.tmp-3-dd" / "000001").write_bytes(b"other\n")
    (base / "w" / "taken.md").write_bytes(b"by hand\n")
    journal = [
        {"batch": 1, "changes": 2},
        {"op": "create", "target": "w/taken.md", "staged": "000000"},
        {"op": "create", "target": "w/free.md", "staged": "000001"},
    ]
    (base / ".batch.tmp-3-dd.journal").write_text("".join(json.dumps(line) + "\n" for line in journal))
    with pytest.raises(Conflict) as caught:
        batch.recover(base)
    assert caught.value.details["paths"] == ["w/taken.md"]
    assert (base / "w" / "taken.md").read_bytes() == b"by hand\n" and (base / "w" / "free.md").read_bytes() == b"other\n"
    assert (base / ".batch-kept-3-dd" / "000000").read_bytes() == b"batch\n"
    assert not batch.pending(base) and batch.recover(base) == 0


def test_a_replay_cut_short_at_any_change_is_finished_by_the_next_recovery(tmp_path: Path) -> None:
    """A batch of creates, replaces and removes, committed (its journal written), then applied
    by hand up to each point a crash could stop the replay at (the link of a create done but
    not the removal of its staged name, a rename done, a remove done), and recovered: the
    folder ends as one uninterrupted commit leaves it."""

    def prepared(root: Path) -> batch.FileBatch:
        base = root / "capsules"
        (base / "w").mkdir(parents=True)
        for name in ("old-1.md", "old-2.md", "gone-1.md", "gone-2.md"):
            (base / "w" / name).write_bytes(f"{name} before\n".encode())
        changes = batch.FileBatch(base)
        for index in range(4):
            changes.create(PurePosixPath(f"w/new-{index}.md"), f"new {index}\n".encode())
            changes.create(PurePosixPath(f"v/new-{index}.md"), f"v {index}\n".encode())
        for name in ("old-1.md", "old-2.md"):
            changes.replace(PurePosixPath(f"w/{name}"), f"{name} after\n".encode(), batch.fs.digest_of(f"{name} before\n".encode()))
        for name in ("gone-1.md", "gone-2.md"):
            changes.remove(PurePosixPath(f"w/{name}"), batch.fs.digest_of(f"{name} before\n".encode()))
        return changes

    def tree(base: Path) -> dict[str, bytes]:
        return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}

    whole = tmp_path / "whole"
    prepared(whole).commit()
    expected = tree(whole / "capsules")
    assert len(expected) == 10 and not batch.pending(whole / "capsules")
    steps = len(prepared(tmp_path / "count").changes)
    for stop in range(steps + 1):
        for half in (False, True):
            root = tmp_path / f"cut-{stop}-{half}"
            changes = prepared(root)
            base = root / "capsules"
            # Commit up to the journal, as `commit` does, then apply `stop` changes by hand.
            token = f"{batch.BATCH_PREFIX}.tmp-1-{stop:04x}{int(half)}"
            (base / token).mkdir()
            entries = []
            for number, change in enumerate(changes.changes):
                entry: dict[str, object] = {"op": change.op, "target": str(change.target)}
                if change.expected is not None:
                    entry["expected"] = change.expected
                if change.data is not None:
                    (base / token / f"{number:06d}").write_bytes(change.data)
                    entry["staged"] = f"{number:06d}"
                entries.append(entry)
            (base / (token + batch.JOURNAL_SUFFIX)).write_bytes(batch._render_journal(entries))
            for entry in entries[:stop]:
                target = base / str(entry["target"])
                target.parent.mkdir(parents=True, exist_ok=True)
                staged = base / token / str(entry.get("staged"))
                if entry["op"] == "remove":
                    target.unlink()
                elif entry["op"] == "replace":
                    staged.rename(target)
                else:
                    os.link(staged, target)
                    staged.unlink()
            if half and stop < steps and entries[stop]["op"] == "create":
                # The crash fell between the link and the removal of the staged name.
                target = base / str(entries[stop]["target"])
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(base / token / str(entries[stop]["staged"]), target)
            assert batch.pending(base)
            assert batch.recover(base) == 1
            assert tree(base) == expected, (stop, half)
            assert not batch.pending(base)

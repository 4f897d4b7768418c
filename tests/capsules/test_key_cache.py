"""The capsule key cache (`index.capsule_keys`) behind an import's collision check: what
`CapsuleStore.keys` answers through it always equals what parsing every capsule file gives,
whatever happened to the files since (hand edits in the same clock tick, restored mtimes,
moves, deletions, a broken cache), and an import killed at any durable step and run again
leaves every capsule exactly once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import killed_at
from test_import_batch import DURABLE_CALLS, context, files_of, records, write_export

from moss_files.capsules import transfer
from moss_files.capsules.store import CapsuleStore
from moss_files.index import capsule_keys as key_cache
from moss_files.index.model import RACY_WINDOW_NS

OTHER_ID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"


def by_scan(root: Path) -> set[tuple[str, str, str | None, bool, str]]:
    """Every capsule's key as the full parse of every file gives it."""
    scan = CapsuleStore(root).scan(None, include_deleted=True)
    assert not scan.problems
    return {(s.capsule.id, s.capsule.workspace_norm, s.capsule.name_norm, s.capsule.deleted, s.relpath.as_posix()) for s in scan.capsules}


def by_keys(root: Path) -> set[tuple[str, str, str | None, bool, str]]:
    """Every capsule's key as `keys` gives it (through the cache)."""
    found, problems = CapsuleStore(root).keys()
    assert not problems
    assert len(found) == len({key.relpath for key in found})
    return {(k.id, k.workspace_norm, k.name_norm, k.deleted, k.relpath) for k in found}


def settle_cache(root: Path) -> None:
    """Store every cached entry as if stat'ed long after its file changed (no racy entry
    left), so the next `keys` trusts each file's ctime alone: the fast path under test."""
    cache = key_cache.KeyCache(root)
    entries = cache.load()
    assert entries
    base = CapsuleStore(root).base
    learned = []
    for relpath, entry in entries.items():
        st = os.lstat(base / relpath)
        learned.append(key_cache.Learned(relpath, st.st_mtime_ns, st.st_ctime_ns, entry.digest, entry.key))
    cache.save(learned, now_ns=time.time_ns() + 3_600 * 10**9)
    assert all(entry.sig is not None for entry in cache.load().values())


def imported(tmp_path: Path, count: int = 40) -> tuple[Path, list[Path]]:
    home = tmp_path / "home"
    root = tmp_path / "project"
    export = write_export(home / ".moss" / "exports", "x.jsonl", records(count, seed=7))
    assert transfer.import_capsules(context(root, home, seed=1), path=str(export))["imported"] == count
    files = sorted(p for p in (root / ".moss" / "capsules").rglob("*.md"))
    return root, files


def edit_in_place_keeping_stat(path: Path, old: bytes, new: bytes) -> None:
    """Change bytes in place (same size), then put the mtime back: what an editor writing in
    place within the same clock tick leaves. Only the ctime tells."""
    st = path.stat()
    data = path.read_bytes()
    assert old in data and len(old) == len(new)
    with open(path, "r+b") as handle:
        handle.write(data.replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


@pytest.mark.parametrize("settled", [False, True], ids=["racy-entries", "settled-entries"])
def test_keys_equal_the_full_scan_after_hand_edits_of_every_kind(tmp_path: Path, settled: bool) -> None:
    root, files = imported(tmp_path)
    assert by_keys(root) == by_scan(root)  # the first call fills the cache
    if settled:
        settle_cache(root)
    assert by_keys(root) == by_scan(root)
    named = [p for p in files if not p.name.startswith("@") and p.parent.name != "deleted"]
    # 1. the id changed in place, same size, mtime put back (the same clock tick)
    old_id = named[0].read_bytes().split(b"id: ", 1)[1][:26]
    edit_in_place_keeping_stat(named[0], b"id: " + old_id, b"id: " + OTHER_ID.encode())
    # 2. a live capsule marked deleted by hand in its slot (the name is free again)
    data = named[1].read_bytes()
    named[1].write_bytes(data.replace(b"\n---\n", b"\ndeleted_at: 2026-01-01T00:00:00Z\n---\n", 1))
    # 3. one moved under deleted/ by hand, one removed, one copied to a new slot without its id
    moved = named[2].parent / "deleted" / f"{named[2].read_bytes().split(b'id: ', 1)[1][:26].decode()}.md"
    moved.parent.mkdir(exist_ok=True)
    os.rename(named[2], moved)
    named[3].unlink()
    copy = named[4].with_name("hand-written.md")
    copy.write_bytes(b"---\nname: hand-written\n---\n## Objective\nBy hand.\n")
    first = by_keys(root)
    assert first == by_scan(root)
    assert any(key[0] == OTHER_ID for key in first)
    # 4. a touch of the copy (no id, no times: those derive from its path and mtime) moves its
    # ctime and mtime but not its bytes
    os.utime(copy, ns=(10**18, 10**18))
    assert by_keys(root) == by_scan(root)
    if settled:
        settle_cache(root)
    # 5. and again, in place, after the cache learned the edited files
    edit_in_place_keeping_stat(named[0], b"id: " + OTHER_ID.encode(), b"id: " + old_id)
    assert by_keys(root) == by_scan(root)


def test_a_broken_or_foreign_cache_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    root, _files = imported(tmp_path, count=10)
    cache = key_cache.KeyCache(root)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    for junk in (b"not a database at all" * 100, b""):
        cache.drop()
        cache.path.write_bytes(junk)
        assert by_keys(root) == by_scan(root)
        assert by_keys(root) == by_scan(root)
    assert cache.load()  # replaced by a working one


def test_an_import_after_hand_edits_sees_the_ids_and_names_they_made(tmp_path: Path) -> None:
    """The collision check reads edits the cache could not have known of."""
    root, files = imported(tmp_path, count=10)
    settle_cache(root)
    named = [p for p in files if not p.name.startswith("@") and p.parent.name != "deleted"]
    text = named[0].read_bytes()
    old_id = text.split(b"id: ", 1)[1][:26]
    edit_in_place_keeping_stat(named[0], b"id: " + old_id, b"id: " + OTHER_ID.encode())
    home = tmp_path / "home"
    row = dict(records(1, seed=99)[0], id=OTHER_ID, name_raw="fresh name", deleted_at=None)
    export = write_export(home / ".moss" / "exports", "one.jsonl", [row])
    result = transfer.import_capsules(context(root, home, seed=2), path=str(export))
    assert result["imported"] == 0 and [error["code"] for error in result["errors"]] == ["ID_COLLISION"]


@pytest.mark.slow
def test_an_import_killed_at_any_durable_step_and_run_again_leaves_each_capsule_once(tmp_path: Path) -> None:
    """A workspace with capsules and a settled key cache; an import killed just before each of
    its durable steps in turn, then the same import run again: every capsule exactly once (the
    second run imports the rest or finds them all there), and the cache still equals the scan."""
    home = tmp_path / "home"
    existing = write_export(home / ".moss" / "exports", "existing.jsonl", records(12, seed=31))
    export = write_export(home / ".moss" / "exports", "more.jsonl", records(5, seed=32))
    reference = tmp_path / "reference"
    for source in (existing, export):
        transfer.import_capsules(context(reference, home, seed=1), path=str(source))
    expected = files_of(reference)
    step = 0
    while True:
        step += 1
        project = tmp_path / f"crash-{step}"
        ctx = context(project, home, seed=1)
        assert transfer.import_capsules(ctx, path=str(existing))["imported"] == 12
        settle_cache(project)
        crashed = killed_at(step, DURABLE_CALLS, lambda ctx=ctx: transfer.import_capsules(ctx, path=str(export)))
        again = transfer.import_capsules(ctx, path=str(export))
        assert again["imported"] in (0, 5), f"kill at durable step {step}: {again}"
        if again["imported"] == 0:
            assert {error["code"] for error in again["errors"]} == {"ID_COLLISION"} and len(again["errors"]) == 5
        assert files_of(project) == expected, f"kill at durable step {step}"
        assert by_keys(project) == by_scan(project)
        if not crashed:
            break
    assert step > 20


def test_keys_report_the_problems_the_full_scan_reports(tmp_path: Path) -> None:
    """A broken file, a link in a capsule's place and a linked workspace folder: `keys` names
    each as `scan` does (an import then refuses, as before), cached or not."""
    root, files = imported(tmp_path, count=10)
    settle_cache(root)
    base = root / ".moss" / "capsules"
    files[0].write_bytes(b"---\nid: [unclosed\n---\nbody\n")
    os.symlink(files[1], files[1].with_name("linked.md"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.md").write_bytes(files[2].read_bytes())
    os.symlink(outside, base / "linked-ws")
    scan = CapsuleStore(root).scan(None, include_deleted=True)
    for _ in range(2):
        found, problems = CapsuleStore(root).keys()
        assert [(p.code, p.path) for p in problems] == [(p.code, p.path) for p in scan.problems]
        assert len(problems) == 3
        assert {k.relpath for k in found} == {s.relpath.as_posix() for s in scan.capsules}


def test_each_learned_key_is_judged_racy_at_the_moment_its_file_was_stat_ed(tmp_path: Path) -> None:
    """`keys` reads a file the cache holds no signature for (one an import wrote a moment
    ago) and stores it judged at the time taken just before that file's stat, not at the
    start of the call: stored with its signature once that moment is a racy window past the
    ctime (so the next import does not read it again), racy while it is not, whatever the
    save's own time."""
    root, files = imported(tmp_path, count=3)
    base = CapsuleStore(root).base
    relpath = files[0].relative_to(base).as_posix()
    entry = key_cache.KeyCache(root).load()[relpath]
    st = os.lstat(files[0])
    window = RACY_WINDOW_NS

    def stored(seen_ns: int | None, now_ns: int) -> int | None:
        cache = key_cache.KeyCache(root)
        cache.save([key_cache.Learned(relpath, st.st_mtime_ns, st.st_ctime_ns, entry.digest, entry.key, seen_ns)], now_ns=now_ns)
        return cache.load()[relpath].sig

    assert stored(st.st_ctime_ns + window, now_ns=st.st_ctime_ns) == st.st_ctime_ns
    assert stored(st.st_ctime_ns + 1, now_ns=st.st_ctime_ns + 3_600 * 10**9) is None
    assert stored(None, now_ns=st.st_ctime_ns + 1) is None
    assert stored(None, now_ns=st.st_ctime_ns + window) == st.st_ctime_ns
    # Whatever was stored, the keys equal the full parse's.
    assert by_keys(root) == by_scan(root)


def test_an_import_s_own_files_are_trusted_by_their_stat_at_once_and_edits_right_after_it_are_seen(tmp_path: Path) -> None:
    """The files a batched import wrote are stored with their signature at once (the batch
    proves they hold its bytes: their staged inode and mtime, older than its journal), so the
    next import does not read them again; a change made right after the import (within the
    racy window, maybe the same clock tick) still shows, because a write moves the mtime past
    the journal's and a replacement is another file."""
    root, files = imported(tmp_path, count=200)
    base = CapsuleStore(root).base
    entries = key_cache.KeyCache(root).load()
    assert {base / relpath for relpath in entries} == set(files)
    # Every file staged in a clock tick before the last one (so before the journal's) is
    # stored with its signature; those of the last tick stay racy.
    mtimes = {relpath: os.lstat(base / relpath).st_mtime_ns for relpath in entries}
    earlier = {relpath for relpath, mtime in mtimes.items() if mtime < max(mtimes.values())}
    assert earlier  # 200 files are not staged within one tick
    assert all(entries[relpath].sig == os.lstat(base / relpath).st_ctime_ns for relpath in earlier)
    assert by_keys(root) == by_scan(root)
    named = [p for p in files if not p.name.startswith("@") and p.parent.name != "deleted"]
    # at once: an id changed in place (same size), and a slot replaced by rename with a file
    # carrying the old one's mtime
    old_id = named[0].read_bytes().split(b"id: ", 1)[1][:26]
    data = named[0].read_bytes()
    with open(named[0], "r+b") as handle:
        handle.write(data.replace(b"id: " + old_id, b"id: " + OTHER_ID.encode(), 1))
    st = named[1].stat()
    other = named[1].with_name(".swap.tmp")
    other.write_bytes(named[1].read_bytes().replace(b"\n---\n", b"\ndeleted_at: 2026-01-01T00:00:00Z\n---\n", 1))
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(other, named[1])
    found = by_keys(root)
    assert found == by_scan(root)
    assert any(key[0] == OTHER_ID for key in found)
    # and a second import, at once, sees them too
    export = write_export(tmp_path / "home" / ".moss" / "exports", "y.jsonl", records(5, seed=8))
    assert transfer.import_capsules(context(root, tmp_path / "home", seed=2), path=str(export))["imported"] == 5
    assert by_keys(root) == by_scan(root)

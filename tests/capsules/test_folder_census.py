"""The capsule store's folder census (`CapsuleStore.census`, kept in .moss/cache/ while each
folder's ctime is unchanged) tells what a listing of the folders tells, after every kind of
change; `moss list`, `inventory` and `latest` through it still equal the file scan; and a
listing process loads none of the modules it no longer needs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

from moss_files.capsules import model as core
from moss_files.capsules import service as ops
from moss_files.capsules.model import Capsule
from moss_files.capsules.store import CapsuleStore, FolderCensus
from moss_files.index import service as index_service
from tests.capsules.test_list_through_index import FULL, QUERIES, generate, index_watcher, same
from tests.conftest import BIN
from tests.helpers import wait_for

CACHE = Path(".moss") / "cache" / FolderCensus.NAME


def folders_of(store: CapsuleStore) -> list[Path]:
    """The folders a census reads: the capsules folder, its workspaces, their deleted/."""
    workspaces = [path for path in store.base.iterdir() if path.is_dir() and not path.is_symlink()]
    return [store.base, *workspaces, *(path / "deleted" for path in workspaces if (path / "deleted").is_dir())]


def settled(store: CapsuleStore) -> bool:
    """Every capsule folder is older than the racy window (so a census may keep it)."""
    limit = time.time_ns() - int((FolderCensus.RACY_SECONDS + 0.1) * 1e9)
    return all(folder.lstat().st_ctime_ns < limit for folder in folders_of(store))


def kept(root: Path) -> dict[str, list[object]]:
    data = json.loads((root / CACHE).read_text())
    assert data["version"] == FolderCensus.VERSION
    folders: dict[str, list[object]] = data["folders"]
    return folders


def assert_census_is_the_listing(store: CapsuleStore) -> None:
    workspaces = [None, *(path.name for path in store.base.iterdir() if path.is_dir() and not path.is_symlink())]
    for workspace in workspaces:
        for include_deleted in (True, False):
            listing = store.listing(workspace, include_deleted=include_deleted, ordered=False)
            expected = (len(listing.files), bool(listing.strays))
            assert store.census(workspace, include_deleted=include_deleted) == expected, (workspace, include_deleted)


def small_store(root: Path) -> CapsuleStore:
    ctx = generate(root, 12, 7)
    (root / ".moss" / "cache").mkdir()
    ops.delete(ctx, id=ops.list_capsules(ctx, workspace="x")["items"][0]["id"])  # a deleted/ folder
    return CapsuleStore(root)


@pytest.mark.slow
def test_every_change_to_a_kept_folder_is_seen(tmp_path: Path) -> None:
    root = tmp_path / "project"
    store = small_store(root)
    base = store.base
    some = next((base / "default").glob("*.md"))

    def in_place_edit() -> None:
        some.write_text(some.read_text() + "\nmore\n")  # no entry changes: the count stays

    changes = [
        lambda: (base / "default" / "notes.txt").write_text("a stray"),
        lambda: (base / "default" / "notes.txt").unlink(),
        lambda: shutil.copy(some, base / "default" / "copy.md"),
        lambda: (base / "default" / "link.md").symlink_to(some),
        lambda: (base / "default" / "link.md").unlink(),
        lambda: (base / "default" / "folder.md").mkdir(),
        lambda: (base / "default" / "folder.md").rmdir(),
        lambda: (base / "default" / ".hidden.md").write_text("ignored, as a listing ignores it"),
        lambda: (base / "x" / "deleted" / "stray.txt").write_text("a stray among the deleted"),
        lambda: (base / "x" / "deleted" / "stray.txt").unlink(),
        lambda: (base / "README").write_text("a stray beside the workspaces"),
        lambda: (base / "README").unlink(),
        lambda: (base / "fresh").mkdir(),
        lambda: shutil.copy(some, base / "fresh" / "one.md"),
        lambda: (base / "fresh").rename(base / "renamed"),
        in_place_edit,
    ]
    for change in changes:
        wait_for(lambda: settled(store), timeout=30, message="the folders to leave the racy window")
        assert_census_is_the_listing(store)
        # Every folder is kept now, each under its identity and ctime.
        keys = {folder.relative_to(base).as_posix() if folder != base else "" for folder in folders_of(store)}
        assert keys <= set(kept(root)), keys - set(kept(root))
        change()
        assert_census_is_the_listing(store)


def test_a_kept_part_is_used_while_its_folder_is_unchanged_and_a_bad_cache_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "project"
    store = small_store(root)
    wait_for(lambda: settled(store), timeout=30, message="the folders to leave the racy window")
    files, strays = store.census("default", include_deleted=False)
    folders = kept(root)
    # The kept part answers (no listing) while the folder's identity and ctime match it.
    folders["default"][3] = files + 1000
    (root / CACHE).write_text(json.dumps({"version": FolderCensus.VERSION, "folders": folders}))
    assert store.census("default", include_deleted=False) == (files + 1000, strays)
    # A change to the folder makes it listed again.
    (store.base / "default" / "new.md").write_text("---\nid: x\n---\n")
    assert store.census("default", include_deleted=False) == (files + 1, strays)
    # A cache that is not ours, or not JSON, is read as empty.
    for text in ("not json", "[]", '{"version": 99, "folders": {}}', '{"version": 1, "folders": {"default": "x"}}'):
        (root / CACHE).write_text(text)
        assert_census_is_the_listing(store)


def test_no_cache_folder_means_no_cache_file(tmp_path: Path) -> None:
    root = tmp_path / "project"
    generate(root, 5, 8)
    store = CapsuleStore(root)
    assert_census_is_the_listing(store)
    assert not (root / ".moss" / "cache").exists()


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True])
def test_listings_through_a_kept_census_equal_the_file_scan(tmp_path: Path, warm: bool) -> None:
    root = tmp_path / "project"
    ctx = generate(root, 360, 9)
    index_service.index_rebuild(ctx)
    store = CapsuleStore(root)
    wait_for(lambda: settled(store), timeout=30, message="the folders to leave the racy window")
    with index_watcher(root) if warm else nullcontext():
        for call, kwargs in QUERIES:
            same(call, ctx, **kwargs)
        assert ops._through_index(ctx, None, True, (None, None, None), None, 10, 0, None) is not None
        assert set(kept(root)) >= {"", "default", "team+b", "x"}
        # A stray beside kept capsules: the listings read the files, and report it.
        (store.base / "team+b" / "stray.txt").write_text("not a capsule")
        assert same(ops.inventory, ctx)["problems"]
        assert same(ops.list_capsules, ctx, workspace="team b")["problems"]
        (store.base / "team+b" / "stray.txt").unlink()
        # A capsule file written in place (as a checkout writes it) is counted and listed first.
        later = Capsule(id="01KAAAAAAAAAAAAAAAAAAAAAAA", workspace="x", name="by hand", text=FULL, created_ms=1_900_000_000_000, updated_ms=1_900_000_000_000)
        (store.base / "x" / core.slot_filename("by hand")).write_text(core.render_capsule(later))
        assert same(ops.list_capsules, ctx, workspace="x", limit=3)["items"][0]["name"] == "by hand"
        same(ops.inventory, ctx, include_deleted=True)


# Modules a listing process has no use for: the index's readers (every kind's parser), OpenSSL's
# hashes, socket's enums, ctypes, html, the export/import module. Loading any of them again costs
# every `moss list|inventory|latest` process its start-up time (bench/capsules.py measures it).
NOT_LOADED = ("moss_files.index.readers", "_hashlib", "socket", "ctypes", "html", "moss_files.capsules.transfer")
PROBE = (
    "import sys\n"
    "sys.argv = ['moss', *sys.argv[1:]]\n"
    "from moss_files.cli.main import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
)


@pytest.mark.slow
def test_a_listing_process_loads_only_what_it_uses(tmp_path: Path) -> None:
    root = tmp_path / "project"
    folder = root / ".moss" / "capsules" / "w"
    folder.mkdir(parents=True)
    for number in range(330):  # files written directly, as a checkout writes them
        capsule = Capsule(
            id=f"01KAAAAAAAAAAAAAAAAAA{number:05d}",
            workspace="w",
            name=f"c{number}",
            text=FULL,
            created_ms=1_800_000_000_000,
            updated_ms=1_800_000_000_000 + number,
        )
        (folder / core.slot_filename(f"c{number}")).write_text(core.render_capsule(capsule))
    index_service.index_rebuild(ops.Context(root))
    env = {**os.environ, "MOSS_ROOT": str(root)}
    with index_watcher(root):
        for words in (["list", "--workspace", "w"], ["inventory"], ["latest", "--workspace", "w"], ["list", "-w", "w", "--json"]):
            done = subprocess.run([sys.executable, "-c", PROBE, *words], cwd=root, env=env, capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            loaded = set(done.stderr.split())
            # It did read through the index, asking the watcher.
            assert {"moss_files.index.database", "_socket"} <= loaded, words
            assert not loaded & set(NOT_LOADED), (words, loaded & set(NOT_LOADED))
            assert done.stdout == subprocess.run([str(BIN / "moss"), *words], cwd=root, env=env, capture_output=True, text=True, check=True).stdout

"""The index's fast paths give what its slow paths give, on generated workspaces with every
kind and after hand edits: a refresh of the files a watcher's events name equals a full build,
the walk by folder descriptors lists what a plain walk lists, and sources registered by name
read as the functions themselves."""

from __future__ import annotations

import os
import pickle
import random
import sys
from pathlib import Path

import pytest

from moss_files.agent import search as agent_search
from moss_files.foundation import summaries
from moss_files.index import board_reader, model, readers, scan, service, sources
from tests.helpers import wait_for

BENCH = Path(__file__).resolve().parents[2] / "bench"


def generated(root: Path, count: int, seed: int) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from corpus import generate_workspace
    finally:
        sys.path.remove(str(BENCH))
    generate_workspace(root, count, seed=seed)


def snapshot(root: Path, *, paths: set[str] | None = None, rebuild: bool = False) -> dict[str, object]:
    index = service.open_index(service.Context(root))
    index.ask_watcher = False
    if rebuild:
        index.rebuild()
    else:
        index.run(lambda view: None, paths=paths)
    return index.run(lambda view: view.snapshot(), refresh=False)


def hand_edits(root: Path, rng: random.Random) -> set[str]:
    """A round of what people and tools do to a workspace; returns the paths it touched (as
    a watcher's events would name them: each file written, made, removed or renamed)."""
    files = sorted(str(path.relative_to(root)) for path in root.rglob("*.md") if ".moss/cache" not in str(path))
    touched: set[str] = set()
    for relpath in rng.sample(files, 6):
        path = root / relpath
        if not path.exists():
            continue
        touched.add(relpath)
        action = rng.choice(["same-size", "append", "remove", "rename", "break", "link"])
        text = path.read_text(encoding="utf-8")
        if action == "same-size":  # in place, same size, mtime put back: only the ctime tells
            before = path.stat()
            swapped = text.replace("a", "e", 1) if "a" in text else text.replace("e", "a", 1)
            path.write_text(swapped, encoding="utf-8")
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        elif action == "append":
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("\nA line added by hand: zebra.\n")
        elif action == "remove":
            path.unlink()
        elif action == "rename":
            target = path.with_name(f"renamed-{rng.randrange(10**6)}.md")
            path.rename(target)
            touched.add(str(target.relative_to(root)))
        elif action == "break":
            path.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
        else:  # the file becomes a link: the walk never lists one
            path.unlink()
            path.symlink_to(root / files[0])
    extra = root / ".moss" / "insights" / f"INS-new-{rng.randrange(10**6)}.md"
    extra.write_text("---\nid: INS-new\ntype: technical\n---\nA new insight about a quokka.\n", encoding="utf-8")
    hidden = root / ".moss" / "insights" / ".draft.md"
    hidden.write_text("never indexed\n", encoding="utf-8")
    touched |= {str(extra.relative_to(root)), str(hidden.relative_to(root)), ".moss/insights/never-there.md", ".moss/cache/x.md"}
    return touched


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_refresh_of_the_named_files_equals_a_full_build(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "ws"
    generated(root, 300, seed)
    kept = root.parent / "kept"
    rng = random.Random(seed)
    snapshot(root, rebuild=True)
    for _ in range(4):
        touched = hand_edits(root, rng)
        targeted = snapshot(root, paths=touched)
        # A second index, built from scratch at the same moment, is the truth.
        os.replace(root / ".moss" / "cache", kept)
        try:
            assert targeted == snapshot(root, rebuild=True)
        finally:
            import shutil

            shutil.rmtree(root / ".moss" / "cache")
            os.replace(kept, root / ".moss" / "cache")


def test_a_refresh_of_named_files_reports_the_whole_index(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    generated(root, 60, 5)
    index = service.open_index(service.Context(root))
    index.ask_watcher = False
    total = index.rebuild().files
    (root / ".moss" / "insights" / "INS-x.md").write_text("---\nid: INS-x\n---\nnew\n", encoding="utf-8")
    index.run(lambda view: None, paths={".moss/insights/INS-x.md"})
    assert index.last_refresh is not None and (index.last_refresh.files, index.last_refresh.added) == (total + 1, 1)
    index.run(lambda view: None, paths={".moss/insights/INS-x.md"})  # nothing changed since
    assert index.last_refresh.files == total + 1 and index.last_refresh.added == 0


def test_the_walk_lists_what_a_plain_walk_lists(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    generated(root, 200, 9)
    (root / ".moss" / "insights" / "linked.md").symlink_to(root / ".cstack" / "PLAN.md")
    (root / ".moss" / "elsewhere").symlink_to(root / ".moss" / "insights", target_is_directory=True)
    (root / ".moss" / "insights" / "folder.md").mkdir()
    registry = sources.default_registry()
    tree = scan.walk(root, registry)
    expected: dict[str, int] = {}
    for folder, dirs, files in os.walk(root):
        relfolder = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if not d.startswith(".") or relfolder == "."]
        for name in files:
            relpath = os.path.join(relfolder, name)
            info = os.lstat(os.path.join(folder, name))
            if registry.source_for(relpath) is not None:
                expected[relpath] = info.st_ctime_ns
    assert tree.signatures() == expected
    assert tree.links == [".moss/elsewhere"]
    assert ".moss/insights/linked.md" in expected  # listed, to be refused when read
    assert scan.stat_paths(root, registry, [*expected, ".moss/elsewhere/x.md", ".moss/insights/folder.md", ".moss/insights/gone.md"]) == expected


def capsule_edits(root: Path, rng: random.Random, folder: str) -> None:
    """A round of hand edits in the capsule folder `folder` (relative) and outside it."""
    inside = sorted(str(path.relative_to(root)) for path in (root / folder).rglob("*.md"))
    outside = sorted(
        str(path.relative_to(root)) for path in (root / ".moss" / "capsules").rglob("*.md") if not str(path.relative_to(root)).startswith(folder + "/")
    )
    for relpath in [*rng.sample(inside, 5), *rng.sample(outside, 3)]:
        path = root / relpath
        if not path.exists():
            continue
        action = rng.choice(["same-size", "append", "remove", "rename", "break", "link"])
        text = path.read_text(encoding="utf-8")
        if action == "same-size":  # in place, same size, mtime put back: only the ctime tells
            before = path.stat()
            path.write_text(text.replace("a", "e", 1) if "a" in text else text.replace("e", "a", 1), encoding="utf-8")
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        elif action == "append":
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("\nA line added by hand: zebra.\n")
        elif action == "remove":
            path.unlink()
        elif action == "rename":
            path.rename(path.with_name(f"renamed-{rng.randrange(10**6)}.md"))
        elif action == "break":
            path.write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
        else:  # the file becomes a link: the walk lists it, the read refuses it
            path.unlink()
            path.symlink_to(root / inside[0])
    (root / folder / "deleted").mkdir(exist_ok=True)
    (root / folder / "deleted" / f"new-{rng.randrange(10**6)}.md").write_text("---\nid: x\n---\nnew\n", encoding="utf-8")
    (root / folder / "sub-folder-0.md").mkdir(exist_ok=True)


def below(snap: dict[str, object], folder: str) -> dict[str, list[object]]:
    """The rows of a snapshot of files below `folder`."""
    return {table: [row for row in rows if str(row[0]).startswith(folder + "/")] for table, rows in snap.items()}  # type: ignore[attr-defined]


def test_a_refresh_of_one_folder_equals_a_full_build_there_and_leaves_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    seed = 1
    generated(root, 200, seed)
    folders = sorted(str(path.relative_to(root)) for path in (root / ".moss" / "capsules").iterdir())
    rng = random.Random(seed)
    index = service.open_index(service.Context(root))
    index.ask_watcher = False
    before = snapshot(root, rebuild=True)
    for _ in range(3):
        folder = rng.choice(folders)
        capsule_edits(root, rng, folder)
        index.run(lambda view: None, scope=folder)
        scoped = index.run(lambda view: view.snapshot(), refresh=False)
        # The rows outside the folder are those of the last full build: only a walk of them
        # changes them.
        outside = {table: [row for row in rows if row not in below(scoped, folder)[table]] for table, rows in scoped.items()}  # type: ignore[attr-defined]
        assert outside == {table: [row for row in rows if row not in below(before, folder)[table]] for table, rows in before.items()}  # type: ignore[attr-defined]
        kept = root.parent / "kept"
        os.replace(root / ".moss" / "cache", kept)
        try:
            assert below(scoped, folder) == below(snapshot(root, rebuild=True), folder)
        finally:
            import shutil

            shutil.rmtree(root / ".moss" / "cache")
            os.replace(kept, root / ".moss" / "cache")
        before = snapshot(root, rebuild=True)


def test_a_folder_the_index_matched_is_walked_again_after_any_write(tmp_path: Path) -> None:
    """The fingerprint of a folder's tree lets its next refresh skip the comparison only while
    the index is unchanged: a file added (and indexed by another refresh) then removed again
    leaves the folder as it was when its fingerprint was taken, and must still leave the index."""
    root = tmp_path / "ws"
    generated(root, 80, 6)
    folder = ".moss/capsules/team-0"
    index = service.open_index(service.Context(root))
    index.ask_watcher = False
    index.rebuild()

    def remembered() -> bool:
        # Remembered once no file is new enough to be re-read (the index's racy window).
        index.run(lambda view: None, scope=folder)
        row = index.run(lambda view: view.conn.execute("SELECT value FROM meta WHERE key = 'tree'").fetchone(), refresh=False)
        return row is not None and f"{folder}\t" in row[0]

    wait_for(remembered, timeout=30, interval=0.2, message="the folder's tree remembered")
    extra = root / folder / "added-by-hand.md"
    extra.write_text("---\nid: 01ARZ3NDEKTSV4RRFFQ69G5FAV\n---\nA capsule written by hand.\n", encoding="utf-8")
    index.run(lambda view: None)  # a whole refresh indexes it
    extra.unlink()  # the folder is back as it was when its tree was remembered
    index.run(lambda view: None, scope=folder)
    scoped = index.run(lambda view: view.snapshot(), refresh=False)
    assert not [row for row in scoped["files"] if row[0] == f"{folder}/added-by-hand.md"]
    assert below(scoped, folder) == below(snapshot(root, rebuild=True), folder)


def test_a_refresh_of_one_folder_reports_the_files_the_whole_walk_lists_there(tmp_path: Path) -> None:
    """A scoped refresh counts the files below its folder (not the whole table), whether it
    found changes, found none, or matched the folder's remembered tree."""
    root = tmp_path / "ws"
    generated(root, 200, 7)
    folder = ".moss/capsules/team-1"
    index = service.open_index(service.Context(root))
    index.ask_watcher = False
    index.rebuild()

    def there() -> int:
        return sum(1 for path in scan.walk(root, sources.default_registry(), stat=False).paths if path.startswith(folder + "/"))

    rng = random.Random(7)
    for _ in range(2):
        capsule_edits(root, rng, folder)
        index.run(lambda view: None, scope=folder)
        assert index.last_refresh is not None and index.last_refresh.files == there()

    def remembered() -> bool:
        index.run(lambda view: None, scope=folder)
        row = index.run(lambda view: view.conn.execute("SELECT value FROM meta WHERE key = 'tree'").fetchone(), refresh=False)
        return row is not None and f"{folder}\t" in row[0]

    wait_for(remembered, timeout=30, interval=0.2, message="the folder's tree remembered")
    index.run(lambda view: None, scope=folder)
    assert index.last_refresh is not None and index.last_refresh.files == there() > 0
    assert index.last_refresh.files < index.run(lambda view: view._file_count(), refresh=False)


def test_the_walk_of_one_folder_lists_what_the_whole_walk_lists_there(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    generated(root, 120, 4)
    capsules = root / ".moss" / "capsules"
    (capsules / "linked").symlink_to(capsules / "team-0", target_is_directory=True)
    (capsules / ".hidden").mkdir()
    (capsules / ".hidden" / "a.md").write_text("x\n", encoding="utf-8")
    (capsules / "team-1" / "inner").mkdir()
    (capsules / "team-1" / "inner" / "b.md").write_text("x\n", encoding="utf-8")
    registry = sources.default_registry()
    whole = scan.walk(root, registry).signatures()
    for folder in [
        ".moss/capsules",
        ".moss/capsules/team-0",
        ".moss/capsules/team-1",
        ".moss/capsules/team-1/inner",
        ".moss/capsules/linked",  # a link: the whole walk never enters it
        ".moss/capsules/.hidden",  # hidden: nor this
        ".moss/capsules/missing",
        ".moss/capsules/team-0/capsule-000000.md",  # a file, not a folder
        ".moss/insights",
        ".moss",
        "elsewhere",
    ]:
        expected = {path: sig for path, sig in whole.items() if path.startswith(folder + "/")}
        assert scan.walk(root, registry, under=folder).signatures() == expected, folder
    assert scan.walk(root, registry, under=".moss/capsules/linked").paths == []
    assert scan.walk(root, registry, under=".moss/capsules/team-1/inner").paths == [".moss/capsules/team-1/inner/b.md"]


def test_sources_registered_by_name_read_as_their_functions(tmp_path: Path) -> None:
    registry = sources.default_registry()
    assert pickle.loads(pickle.dumps(registry)).fingerprint == registry.fingerprint
    by_name = {source.name: source for source in registry.sources}
    assert by_name["insight"].extract == model.Deferred("moss_files.index.readers", "insight_extract")
    file = model.FileInput(".moss/insights/INS-1.md", b"---\nid: INS-1\ntype: technical\n---\nBody text.\n")
    assert by_name["insight"].extract(file) == readers.insight_extract(file)
    assert by_name["insight"].record(file, "") == readers.insight_record(file, "")
    # The constants sources.py repeats so that registering loads no reader.
    assert sources.CAPSULES == readers.CAPSULES and sources.BOARD == board_reader.BOARD
    assert (sources.AGENT_SESSIONS, sources.AGENT_KINDS) == (agent_search.FOLDER, agent_search.KINDS)
    assert model.MAX_SUMMARY == summaries.MAX_SUMMARY

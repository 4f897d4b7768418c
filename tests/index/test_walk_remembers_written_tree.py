"""A walking refresh that wrote the changes it found remembers the tree it walked when the
index then holds exactly that tree's signatures, so the next query on an unchanged tree is
one fingerprint; never when a file was stored racy (its signature unknown), so a second write
in the same clock tick is still seen; and the index always equals a build from the files."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

from moss_files.index import database, model, scan, service, sources
from tests.helpers import wait_for


def insight(number: int, word: str = "quokka") -> str:
    return f"---\nid: INS-{number:05d}\ntype: technical\n---\nThe {word} note number {number}.\n"


def workspace(root: Path) -> database.SearchIndex:
    folder = root / ".moss" / "insights"
    folder.mkdir(parents=True)
    for number in range(20):
        (folder / f"INS-{number:05d}.md").write_text(insight(number), encoding="utf-8")
    index = service.open_index(service.Context(root))
    index.ask_watcher = False  # the walking path, whatever runs on this machine
    index.rebuild()
    return index


def remembered(index: database.SearchIndex) -> dict[str, str]:
    row = index.run(lambda view: view.conn.execute("SELECT value FROM meta WHERE key = 'tree'").fetchone(), refresh=False)
    return database._matched_trees(row[0] if row else None)


def edit_in_place(path: Path, word: str) -> None:
    """Same size, mtime put back: only the ctime tells."""
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("quokka", word), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def older_than_the_racy_window(*paths: Path) -> None:
    newest = max(path.stat().st_ctime_ns for path in paths)
    wait_for(lambda: time.time_ns() - newest > model.RACY_WINDOW_NS, timeout=10, interval=0.05, message="the files' changes out of the racy window")


def equals_a_build(root: Path, index: database.SearchIndex) -> None:
    """The index, as refreshed, holds what a build from the files (in a cache of its own) does."""
    walked = index.run(lambda view: view.snapshot(), refresh=False)
    built = database.SearchIndex(root, sources.default_registry(), cache_dir=root.parent / f"{root.name}-build-cache", ask_watcher=False)
    built.rebuild()
    assert walked == built.run(lambda view: view.snapshot(), refresh=False)


def test_a_refresh_that_wrote_the_changes_remembers_the_tree_and_later_edits_are_seen(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    index = workspace(root)
    folder = root / ".moss" / "insights"
    edit_in_place(folder / "INS-00003.md", "wombat")
    (folder / "INS-00007.md").unlink()
    (folder / "INS-00100.md").write_text(insight(100, "numbat"), encoding="utf-8")
    older_than_the_racy_window(folder / "INS-00003.md", folder / "INS-00100.md")
    index.run(lambda view: None)
    report = index.last_refresh
    assert report is not None and (report.changed, report.added, report.removed) == (1, 1, 1)
    # The refresh that wrote remembered the tree it walked (before, only the next one did).
    assert remembered(index) == {"": scan.walk(root, sources.default_registry()).fingerprint()}
    equals_a_build(root, index)
    # A later edit in place moves that file's ctime, so the tree's fingerprint, and is seen.
    edit_in_place(folder / "INS-00005.md", "bilby")
    older_than_the_racy_window(folder / "INS-00005.md")
    index.run(lambda view: None)
    assert index.last_refresh is not None and index.last_refresh.changed == 1
    equals_a_build(root, index)
    assert any("bilby" in str(row) for row in index.run(lambda view: view.snapshot(), refresh=False)["items"])


def test_a_refresh_that_stored_a_file_racy_does_not_remember_the_tree(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    index = workspace(root)
    path = root / ".moss" / "insights" / "INS-00004.md"
    for _attempt in range(5):
        edit_in_place(path, "wombat")
        index.run(lambda view: None)  # at once: the file changed within the racy window
        if time.time_ns() - path.stat().st_ctime_ns < model.RACY_WINDOW_NS:
            break
        path.write_text(insight(4), encoding="utf-8")  # too slow a machine this time: again
    else:
        raise AssertionError("no refresh ran within the racy window of its edit in 5 attempts")
    # The file is stored without a signature: the walked tree is not what the index holds,
    # and remembering it would let a second write in the same clock tick (same ctime) pass.
    assert remembered(index) == {}
    path.write_text(insight(4, "dingo"), encoding="utf-8")
    index.run(lambda view: None)
    equals_a_build(root, index)


def test_refreshes_across_git_checkouts_equal_a_build_each_time(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    index = workspace(root)
    folder = root / ".moss" / "insights"

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=root, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A", ".moss/insights")
    git("commit", "-q", "-m", "twenty insights")
    git("checkout", "-q", "-b", "other")
    (folder / "INS-00002.md").write_text(insight(2, "wombat"), encoding="utf-8")
    (folder / "INS-00009.md").unlink()
    (folder / "INS-00200.md").write_text(insight(200, "numbat"), encoding="utf-8")
    git("add", "-A", ".moss/insights")
    git("commit", "-q", "-m", "one changed, one removed, one added")
    for branch in ("main", "other", "main"):
        git("checkout", "-q", branch)
        older_than_the_racy_window(*folder.iterdir())
        index.run(lambda view: None)
        assert remembered(index) == {"": scan.walk(root, sources.default_registry()).fingerprint()}, branch
        equals_a_build(root, index)
        index.run(lambda view: None)  # the remembered tree: one fingerprint, the same answer
        equals_a_build(root, index)


def test_a_tree_is_not_remembered_when_another_connection_wrote_the_index_after_its_signatures_were_read(tmp_path: Path) -> None:
    """Another process's refresh may store rows from a walk older than this one's (and every
    write deletes the remembered tree); a refresh that read the stored signatures before that
    write must not vouch for the tree it walked."""
    root = tmp_path / "ws"
    index = workspace(root)

    def remember_with_no_other_write(view: database.View) -> None:
        view._remember_tree("first", "", since=view._data_version())

    index.run(remember_with_no_other_write, refresh=False)
    assert remembered(index) == {"": "first"}

    def remember_after_another_write(view: database.View) -> None:
        since = view._data_version()
        other = sqlite3.connect(index.path)  # another process's write, which forgets the tree
        with other:
            other.execute("DELETE FROM meta WHERE key = 'tree'")
        other.close()
        view._remember_tree("second", "", since=since)

    index.run(remember_after_another_write, refresh=False)
    assert remembered(index) == {}

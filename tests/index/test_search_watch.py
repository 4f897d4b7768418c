"""The warm index: `moss index watch` as a real process keeps the cache fresh from file events,
queries that find it skip the walk, and every change made before a query is seen: edits that
keep the size and mtime, files added and removed, folders created and renamed, and edits made
while the watcher was down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import BIN, run_cli
from helpers import wait_for

from moss_files.index import service, sources, watch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watcher uses Linux inotify")

FINGERPRINT = sources.default_registry().fingerprint


def insight(root: Path, name: str, body: str) -> Path:
    path = root / ".moss" / "insights" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nid: {name}\ntype: technical\ncreated: 2026-01-02T10:00:00Z\n---\n{body}\n", encoding="utf-8")
    return path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    insight(root, "INS-1", "alpha words here")
    insight(root, "INS-2", "other words there")
    (root / ".moss" / "notes").mkdir(parents=True)
    (root / ".moss" / "notes" / "plan.md").write_text("# Plan\n\nnothing yet\n", encoding="utf-8")
    return root


class Watching:
    """A `moss index watch --json` process serving `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.process = subprocess.Popen([str(BIN / "moss"), "index", "watch", "--json"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: self.process.poll() is not None or watch.synced(root, FINGERPRINT) is not None, message="the watcher to answer")
        assert self.process.poll() is None, self.process.communicate()

    def stop(self) -> dict[str, object]:
        self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=20)
        assert self.process.returncode == 0, err
        return json.loads(out)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=20)


@pytest.fixture
def watching(ws: Path) -> Iterator[Watching]:
    watcher = Watching(ws)
    try:
        yield watcher
    finally:
        watcher.kill()


def ids(root: Path, query: str) -> list[str]:
    return [match["id"] for match in service.scan(service.Context(root), query)["matches"]]


def served_warm(root: Path) -> bool:
    """Whether a query now is served by the watcher (no walk)."""
    index = service.open_index(service.Context(root))
    index.run(lambda view: None)
    assert index.last_refresh is not None
    return index.last_refresh.watched


def test_an_edit_that_keeps_size_and_mtime_is_seen_by_the_next_query(ws: Path, watching: Watching) -> None:
    path = ws / ".moss" / "insights" / "INS-1.md"
    for round_number in range(20):
        word = f"zq{round_number:02d}x"  # every round the same size
        before = path.stat()
        path.write_text(path.read_text(encoding="utf-8").rsplit("\n", 2)[0] + f"\n{word}\n", encoding="utf-8")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_size == before.st_size or round_number == 0
        assert ids(ws, word) == ["INS-1"], round_number
    assert served_warm(ws)


def test_files_added_removed_and_folders_created_and_renamed_are_seen(ws: Path, watching: Watching) -> None:
    insight(ws, "INS-3", "freshly added kumquat")
    assert ids(ws, "kumquat") == ["INS-3"]
    (ws / ".moss" / "insights" / "INS-3.md").unlink()
    assert ids(ws, "kumquat") == []
    # A new folder and a file in it at once: written before the watcher could watch the folder.
    deep = ws / ".moss" / "notes" / "deep" / "deeper"
    deep.mkdir(parents=True)
    (deep / "idea.md").write_text("# Idea\n\nquokka habitat\n", encoding="utf-8")
    assert len(service.scan(service.Context(ws), "quokka")["matches"]) == 1
    (ws / ".moss" / "notes").rename(ws / ".moss" / "jottings")
    found = service.expand(service.Context(ws), [service.scan(service.Context(ws), "quokka")["matches"][0]["id"]])
    assert found["items"][0]["path"] == ".moss/jottings/deep/deeper/idea.md"
    # The renamed folder is still watched under its new name.
    (ws / ".moss" / "jottings" / "deep" / "deeper" / "idea.md").write_text("# Idea\n\nwombat habitat\n", encoding="utf-8")
    assert service.scan(service.Context(ws), "wombat")["matches"] and not service.scan(service.Context(ws), "quokka")["matches"]
    assert served_warm(ws)
    # What the watcher kept equals what a build from scratch reads.
    kept = service.open_index(service.Context(ws)).run(lambda view: view.snapshot(), refresh=False)
    service.index_rebuild(service.Context(ws))
    assert service.open_index(service.Context(ws)).run(lambda view: view.snapshot(), refresh=False) == kept


def test_edits_made_while_the_watcher_is_down_are_seen(ws: Path) -> None:
    first = Watching(ws)
    try:
        summary = first.stop()
    finally:
        first.kill()
    assert set(summary) == {"root", "socket", "folders", "syncs", "refreshes", "rewatches"} and summary["syncs"] >= 1
    assert not watch.socket_path(ws).exists()
    insight(ws, "INS-1", "edited while nobody watched")
    assert ids(ws, "nobody") == ["INS-1"]  # no watcher: the query walks
    assert not served_warm(ws)
    insight(ws, "INS-2", "edited again before the watcher starts")
    second = Watching(ws)
    try:
        assert served_warm(ws)
        assert ids(ws, "again") == ["INS-2"]
        assert ids(ws, "legacy") == []
    finally:
        second.kill()


def test_the_watcher_stops_when_the_workspace_moves(tmp_path: Path, ws: Path) -> None:
    watcher = Watching(ws)
    try:
        moved = tmp_path / "moved"
        ws.rename(moved)
        assert watcher.process.wait(timeout=20) == 0  # it stops rather than index a path that is gone
        assert not ws.exists()  # and creates nothing where the workspace was
        assert ids(moved, "alpha") == ["INS-1"] and not served_warm(moved)
    finally:
        watcher.kill()


@pytest.mark.slow
def test_a_killed_watcher_leaves_queries_correct_and_can_be_replaced(ws: Path) -> None:
    first = Watching(ws)
    second = run_cli("moss", "index", "watch", "--json", cwd=ws)  # refuses while the first serves
    assert second.returncode == 7 and json.loads(second.stderr)["error"]["code"] == "CACHE_ERROR"
    first.process.send_signal(signal.SIGKILL)
    first.kill()
    assert watch.socket_path(ws).exists()  # left behind by the killed process
    insight(ws, "INS-1", "after the crash")
    assert ids(ws, "crash") == ["INS-1"] and not served_warm(ws)
    replacement = Watching(ws)
    try:
        insight(ws, "INS-2", "a replacement keeps it warm")
        assert ids(ws, "replacement") == ["INS-2"] and served_warm(ws)
    finally:
        replacement.kill()


def test_which_events_ask_for_what() -> None:
    registry = sources.default_registry()
    tops = registry.tops
    assert watch.classify(".moss/insights", watch.IN_MODIFY, "INS-1.md", registry, tops=tops) == watch.FILE
    assert watch.classify(".moss/insights", watch.IN_CREATE, ".INS-1.md.tmp-123", registry, tops=tops) == watch.IGNORE
    assert watch.classify(".moss/insights", watch.IN_MOVED_TO, "INS-1.md", registry, tops=tops) == watch.FILE
    assert watch.classify(".moss/insights", watch.IN_CREATE | watch.IN_ISDIR, "2026", registry, tops=tops) == watch.TREE
    assert watch.classify(".moss", watch.IN_CREATE | watch.IN_ISDIR, "cache", registry, tops=tops) == watch.IGNORE
    assert watch.classify(".moss", watch.IN_MODIFY, "notes.txt", registry, tops=tops) == watch.IGNORE
    assert watch.classify("", watch.IN_CREATE | watch.IN_ISDIR, ".cstack", registry, tops=tops) == watch.TREE
    assert watch.classify("", watch.IN_CREATE, "README.md", registry, tops=tops) == watch.IGNORE
    assert watch.classify("", watch.IN_MOVE_SELF, "", registry, tops=tops) == watch.GONE
    assert watch.classify(".moss/insights", watch.IN_Q_OVERFLOW, "", registry, tops=tops) == watch.TREE
    assert watch.classify(None, watch.IN_IGNORED, "", registry, tops=tops) == watch.IGNORE
    assert watch.classify(None, watch.IN_MODIFY, "x.md", registry, tops=tops) == watch.TREE
    assert watch.classify(".moss/notes", watch.IN_MOVE_SELF, "", registry, tops=tops) == watch.TREE


def test_no_watcher_and_a_stale_socket_mean_a_walk(ws: Path) -> None:
    assert watch.synced(ws, FINGERPRINT) is None
    watch.socket_path(ws).parent.mkdir(parents=True, exist_ok=True)
    watch.socket_path(ws).write_text("not a socket")
    assert watch.synced(ws, FINGERPRINT) is None
    assert ids(ws, "alpha") == ["INS-1"] and not served_warm(ws)


def test_a_burst_of_writes_is_seen_whole_by_the_next_query(ws: Path, watching: Watching) -> None:
    # Writes, rewrites and removals faster than the watcher settles: the query right after the
    # last one sees all of them, and what the watcher kept by refreshing only the files its
    # events named equals a build from scratch.
    folder = ws / ".moss" / "insights"
    for number in range(60):
        insight(ws, f"INS-b{number}", f"burst q{number}z of writes")
    for number in range(0, 60, 3):
        (folder / f"INS-b{number}.md").unlink()
    for number in range(1, 60, 3):
        insight(ws, f"INS-b{number}", f"burst r{number}z rewritten")
    assert ids(ws, "q2z") == ["INS-b2"] and ids(ws, "q3z") == [] and ids(ws, "q4z") == [] and ids(ws, "r4z") == ["INS-b4"]
    assert served_warm(ws)
    kept = service.open_index(service.Context(ws)).run(lambda view: view.snapshot(), refresh=False)
    service.index_rebuild(service.Context(ws))
    assert service.open_index(service.Context(ws)).run(lambda view: view.snapshot(), refresh=False) == kept


def test_a_watcher_started_with_its_parent_stops_when_the_parent_dies(ws: Path) -> None:
    # The way the daemons start it: a parent process whose death (even by SIGKILL) ends it.
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            f"child = subprocess.Popen([{str(BIN / 'moss')!r}, 'index', 'watch', '--with-parent'], stdout=subprocess.DEVNULL)\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(600)\n",
        ],
        cwd=ws,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        wait_for(lambda: watch.synced(ws, FINGERPRINT) is not None, timeout=30, message="the watcher to answer")
        assert served_warm(ws)
    finally:
        parent.kill()
        parent.communicate(timeout=20)

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        # Adopted by whatever reaps orphans here; a zombie not yet reaped has stopped too.
        with open(f"/proc/{child}/stat", encoding="utf-8") as handle:
            return handle.read().split(") ", 1)[1].startswith("Z")

    wait_for(gone, timeout=20, message="the orphaned watcher to stop")
    assert watch.synced(ws, FINGERPRINT) is None and not watch.socket_path(ws).exists()

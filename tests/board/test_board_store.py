"""The board store's caches: a fresh process reads the same board from `.moss/cache/board.json`
as from the files, sees every change made since (hand edits in place included), and ignores a
cache it cannot use."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import wait_for

from moss_files.board import claims, editing, files, queries, rules
from moss_files.board.model import Epic, Step, Task, Worker
from moss_files.board.store import _LAYOUT as LAYOUT
from moss_files.board.store import CACHE_FILE, CACHE_REWRITE_AFTER, CACHE_VERSION, BoardStore, Head, racy_window
from moss_files.foundation.context import AGENT, Context

STAMP = "2026-01-21T10:00:00Z"


def write_board(root: Path, count: int) -> list[Path]:
    base = root / ".moss" / "board"
    (base / "epics").mkdir(parents=True)
    (base / "tasks").mkdir()
    (base / "epics" / "EPIC-1.md").write_text(files.render_epic(Epic("EPIC-1", "One", created=STAMP, updated=STAMP)))
    paths = []
    for n in range(count):
        task = Task(
            id=f"TASK-{n:04d}",
            epic="EPIC-1",
            title=f"title {n:04d}",
            description=f"Body {n}.",
            order=n,
            depends_on=(f"TASK-{n - 1:04d}",) if n else (),
            definition_of_done=("a", "b"),
            plan=(Step("step-1", "do", "COMPLETED", ("x.py",), ("x.py",), "ok", STAMP, STAMP),) if n % 2 else (),
            created=STAMP,
            updated=STAMP,
        )
        path = base / "tasks" / f"{task.id}.md"
        path.write_text(files.render_task(task))
        paths.append(path)
    return paths


def settle(paths: list[Path]) -> None:
    """Wait until no file is too recent for its stat to be trusted (so it may be cached)."""

    def aged() -> bool:
        now = time.time_ns()
        return all(now - (st := p.stat()).st_ctime_ns >= racy_window(st.st_mtime_ns, st.st_ctime_ns) for p in paths)

    wait_for(aged, timeout=5, message="files older than the racy window")


@pytest.fixture
def board_root(repo: Path) -> tuple[Path, list[Path]]:
    paths = write_board(repo, CACHE_REWRITE_AFTER + 6)
    settle(paths)
    return repo, paths


def test_a_fresh_store_reads_the_same_board_from_the_cache_file(board_root: tuple[Path, list[Path]]) -> None:
    root, _ = board_root
    from_files = BoardStore(root).load()
    header = json.loads((root / CACHE_FILE).read_bytes().split(b"\n", 1)[0])  # written after a load that read every file
    assert header["folders"]["task"]["count"] == len(from_files.tasks)
    from_cache = BoardStore(root).load()
    assert from_cache.tasks == from_files.tasks and from_cache.epics == from_files.epics
    assert from_cache.tasks["TASK-0001"].plan[0].affected_files == ("x.py",)  # tuples come back as tuples
    assert BoardStore(root, persist=False).load().tasks == from_files.tasks


def test_changes_after_the_cache_was_written_are_seen(board_root: tuple[Path, list[Path]]) -> None:
    root, paths = board_root
    BoardStore(root).load()
    # A hand edit in place: same inode, same size, only the bytes differ.
    target = paths[3]
    inode = target.stat().st_ino
    with target.open("r+") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("title: title 0003", "title: TITLE 0003"))
    assert target.stat().st_ino == inode
    paths[4].unlink()
    added = Task(id="TASK-9999", epic="EPIC-1", title="new", created=STAMP, updated=STAMP)
    (root / ".moss" / "board" / "tasks" / "TASK-9999.md").write_text(files.render_task(added))
    board = BoardStore(root).load()
    assert board.tasks["TASK-0003"].title == "TITLE 0003"
    assert "TASK-0004" not in board.tasks and board.tasks["TASK-9999"].title == "new"
    assert not board.problems


SHORT_ROW = b'[[0,"x"]]'  # an outline group of one row: a place, and one value of many


def test_a_cache_it_cannot_use_is_ignored(board_root: tuple[Path, list[Path]]) -> None:
    root, _ = board_root
    expected = BoardStore(root, persist=False).load()
    cache = root / CACHE_FILE
    BoardStore(root).load()
    good = cache.read_bytes()
    header, body = good.split(b"\n", 1)
    meta = json.loads(header)

    def with_header(**changes: object) -> bytes:
        return json.dumps({**meta, **changes}).encode() + b"\n" + body

    tasks = meta["folders"]["task"]
    for junk in (
        b"{not json",
        b"[]\n",
        json.dumps({"version": 1, "items": {}}).encode(),
        with_header(version=CACHE_VERSION - 1),
        with_header(layout={**LAYOUT, "task": ["id"]}),
        with_header(byteorder="middle"),
        with_header(folders={"task": {**tasks, "count": tasks["count"] + 1}}),
        with_header(folders={"task": {**tasks, "keys": [0, 7]}}),  # keys of no whole file
        with_header(folders={"task": {**tasks, "names": [0, 3]}}),  # names that are no file names
        with_header(folders={"task": {**tasks, "statuses": []}}),  # a status byte that names no status
        with_header(folders={"task": {**tasks, "statuses": [7]}}),  # a status that is no text
        with_header(folders={"task": {**tasks, "statuses": "BACKLOG"}}),
        with_header(folders={"task": {**tasks, "statuses": ["WORKING"]}}),  # no group of that status
        with_header(folders={"task": {**tasks, "status": [tasks["status"][0], tasks["status"][1] - 1]}}),  # one byte short
        good[: len(good) // 2],  # cut short
        header + b"\n" + body.replace(b'"TASK-0003"', b'"TASK-0003", "x"', 1),  # a record that decodes to no task
        good + b"garbage that is no delta\n",
        # An outline row cut short (its group after the body, where a claim's front ranks it from).
        with_header(folders={"task": {**tasks, "groups": {**tasks["groups"], "BACKLOG": [len(body), len(body) + len(SHORT_ROW)]}}}) + SHORT_ROW + b"\n",
        # A rank row cut short, and no rank rows for a status.
        with_header(folders={"task": {**tasks, "ranks": {**tasks["ranks"], "BACKLOG": [len(body), len(body) + len(SHORT_ROW)]}}}) + SHORT_ROW + b"\n",
        with_header(folders={"task": {**tasks, "ranks": {}}}),
    ):
        for kind in ("load", "outline"):
            cache.write_bytes(junk)
            got = getattr(BoardStore(root), kind)()
            assert got.problems == () and got.tasks.keys() == expected.tasks.keys()
            if kind == "load":
                assert got.tasks == expected.tasks and got.epics == expected.epics
        # A claim's first look (the front of the BACKLOG queue: the first five and what they depend on).
        cache.write_bytes(junk)
        store = BoardStore(root)
        front = store.outline(("BACKLOG",), head=Head(frozenset({"BACKLOG"}), 5, lambda board: rules.claim_rank(board, None, False)))
        first = {f"TASK-{n:04d}" for n in range(5)}  # or every task, from a store that read the files again (a second load: it watches)
        assert front.problems == () and store.front in (first, None)
        assert set(front.tasks) == (first if store.front else set(expected.tasks)), junk[:80]
        assert all(front.tasks[task_id].title == expected.tasks[task_id].title for task_id in front.tasks)


def test_a_front_ranked_from_outline_rows_already_decoded_is_the_one_ranked_from_rank_rows(board_root: tuple[Path, list[Path]]) -> None:
    """A claim's first look ranks its candidates from their status's rank rows, or from its
    outline rows when a listing in the same store decoded them: the same front, the same tasks."""
    root, _ = board_root
    BoardStore(root).load()  # the cache file
    head = Head(frozenset({"BACKLOG"}), 5, lambda board: rules.claim_rank(board, None, False))
    fresh = BoardStore(root)
    expected = fresh.outline(("BACKLOG",), head=head)
    store = BoardStore(root)
    store._stop_watching()  # as on a file system without file events: every load may take a head
    listed = store.outline(("BACKLOG",))  # decodes BACKLOG's outline rows
    got = store.outline(("BACKLOG",), head=head)
    assert store.front == fresh.front == {f"TASK-{n:04d}" for n in range(5)}
    assert got.tasks == expected.tasks and all(got.tasks[task_id] == listed.tasks[task_id] for task_id in got.tasks)
    assert got.tasks == BoardStore(root, persist=False).outline(("BACKLOG",), head=head).tasks


ODD_NAMES = (
    "TASK-1.md",
    "a.md",
    "A_b-9.md",
    "a.b.md",
    "a..md",
    "a...md",
    "a..b.md",
    "..md",
    ".md",
    ".a.md",
    "-a.md",
    "_a.md",
    "a",
    "md",
    "a.md.md",
    "a.mdx",
    "a.MD",
    "a.m",
    "",
    "a b.md",
    "a/b.md",
    "../a.md",
    "a\\b.md",
    "a\r.md",
    "a\x00.md",
    "\u00e9.md",
    "a\u00e9.md",
    "\uff41.md",
    "a" * 64 + ".md",
    "a" * 65 + ".md",
    "a" * 63 + "..md",
    "a.md\n",
    "\na.md",
)


@pytest.mark.parametrize("odd", ODD_NAMES)
def test_a_names_column_is_valid_only_when_each_name_it_lists_is_a_board_file_name(odd: str) -> None:
    """The one check over a cache file's names column, as read, gives the answer of checking
    each name it splits into (the store's own rule for a board file name), wherever the odd
    name stands among good ones."""
    from moss_files.board.model import is_valid_name
    from moss_files.board.store import _cached_names_valid

    for names in ([odd], ["a.md", odd], [odd, "z.md"], ["a.md", odd, "z.md"], [odd, odd]):
        column = "\n".join(names).encode("utf-8")
        expected = all(name.endswith(".md") and is_valid_name(name[:-3]) for name in column.decode("utf-8").split("\n"))
        assert _cached_names_valid(column) == expected, names


def test_people_is_the_board_without_its_tasks(board_root: tuple[Path, list[Path]]) -> None:
    root, _paths = board_root
    workers = root / ".moss" / "board" / "workers"
    workers.mkdir()
    (workers / "dev.md").write_text(files.render_worker(Worker("dev", type="worker", created=STAMP, updated=STAMP)))
    (workers / "odd.md").write_text("---\nid: [unclosed\n---\n")
    whole, people = BoardStore(root).load(), BoardStore(root).people()
    assert (people.project, people.epics, people.workers, people.teams) == (whole.project, whole.epics, whole.workers, whole.teams)
    assert people.tasks == {} and len(whole.tasks) == CACHE_REWRITE_AFTER + 6
    assert [err.path for err in people.problems] == [".moss/board/workers/odd.md"] == [err.path for err in whole.problems]


def test_small_boards_do_not_write_a_cache_file(repo: Path) -> None:
    settle(write_board(repo, 3))
    BoardStore(repo).load()
    assert not (repo / CACHE_FILE).exists()


def test_a_long_lived_store_sees_its_own_and_others_writes(repo: Path) -> None:
    server = Context(repo, actor=AGENT)
    human = Context(repo)
    epic = editing.create_epic(human, title="E")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="t", status="WORKING")["task"]["id"]
    assert queries.list_tasks(server)["tasks"][0]["hasWorker"] is False
    claims.claim_next_task(Context(repo, actor=AGENT), statuses=["WORKING"], worker_id="elsewhere")
    # The claim just written is too recent to be cached, so the server reads it again.
    assert claims.claim_next_task(server, statuses=["WORKING"], worker_id="here") == {"hasNext": False}
    assert queries.list_tasks(server)["tasks"][0]["assignedWorkerId"] == "elsewhere"
    assert queries.show_task(server, task_id=task)["assignedWorkerId"] == "elsewhere"


def test_what_a_store_keeps_of_its_own_writes_is_what_reading_the_files_gives(repo: Path) -> None:
    """A store keeps each file it writes parsed from the read its edit's check made (no parse
    of its own): that entity must be the one a plain read of the file gives, for a frontmatter
    edit, a body edit, a hand-written `description:` key moved into the body, CRLF and a BOM."""
    paths = write_board(repo, 3)
    hand = paths[1].read_text().replace("---\n", "---\ndescription: said by hand # a comment\n", 1)
    paths[1].write_bytes(hand.encode())
    paths[2].write_bytes(b"\xef\xbb\xbf" + paths[2].read_text().replace("\n", "\r\n").encode())
    store = BoardStore(repo)
    store.load()
    edits = {
        "TASK-0000": lambda t: rules.claimed(t, "w1", "2026-01-22T10:00:00Z"),
        "TASK-0001": lambda t: replace(t, description="New body.\n\nTwo paragraphs.", status="PLANNING"),
        "TASK-0002": lambda t: replace(t, title="Crlf: and a colon", depends_on=("TASK-0000", "TASK-0001")),
    }
    for task_id, change in edits.items():
        with store.writing():
            store.update("task", task_id, change)
    kept = store.load().tasks
    plain = BoardStore(repo, persist=False)
    for task_id in edits:
        assert kept[task_id] == plain.get("task", task_id)
    assert "\ndescription:" not in paths[1].read_text() and kept["TASK-0001"].description.startswith("New body.")


def test_a_workers_next_write_starts_from_its_last_one_only_while_the_file_holds_those_bytes(repo: Path) -> None:
    """A store edits a worker file it wrote from the document it kept of it, without parsing
    it again, only while the file's bytes are the ones it wrote: a hand edit since (in place,
    same size, same mtime) is edited from, and survives the next write."""
    write_board(repo, 1)
    path = repo / ".moss" / "board" / "workers" / "w1.md"
    path.parent.mkdir()
    path.write_text(files.render_worker(Worker("w1", type="worker", last_epic="EPIC-1", created=STAMP, updated=STAMP)))
    store = BoardStore(repo)
    for beat in ("2026-01-22T10:00:00.000Z", "2026-01-22T10:00:01.000Z"):  # the second starts from the kept document
        with store.writing():
            store.update("worker", "w1", lambda w, beat=beat: replace(w, heartbeat=beat))
    assert store.load().workers["w1"] == BoardStore(repo, persist=False).get("worker", "w1")
    info = path.stat()
    text = path.read_text()
    assert "\nlast_epic: EPIC-1\n" in text
    with path.open("r+") as handle:  # a hand edit in place that keeps size and mtime
        handle.write(text.replace("\nlast_epic: EPIC-1\n", "\nlast_epic: EPIC-2\n"))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    with store.writing():
        written = store.update("worker", "w1", lambda w: replace(w, heartbeat="2026-01-22T10:00:02.000Z"))
    assert written.last_epic == "EPIC-2" and "\nlast_epic: EPIC-2\n" in path.read_text()
    assert written == BoardStore(repo, persist=False).get("worker", "w1")


@pytest.mark.parametrize(
    "change",
    [
        lambda w: replace(w, heartbeat="2026-01-22T10:00:00.123Z", last_epic="EPIC-1"),  # a claim's first heartbeat
        lambda w: replace(w, heartbeat="2026-01-22T10:00:00.123Z"),
        lambda w: replace(w, type=None, notes="Said by hand.\n"),  # a key removed, a body written
        lambda w: w,  # no change
    ],
)
def test_a_file_created_with_a_change_is_the_one_created_then_updated(repo: Path, change: Callable[[Worker], Worker]) -> None:
    """`create(..., then=)` writes in one file the bytes `create` and then `update` with the
    same change write in two, returns what `update` returns, and keeps what a plain read of
    the file gives."""
    worker = Worker("w1", type="worker", created=STAMP, updated=STAMP)
    two, one = repo / "two", repo / "one"
    BoardStore(two).create("worker", worker)
    updated = BoardStore(two).update("worker", "w1", change)
    store = BoardStore(one)
    made = store.create("worker", worker, then=change)
    relpath = Path(".moss", "board", "workers", "w1.md")
    assert (one / relpath).read_bytes() == (two / relpath).read_bytes()
    assert made == updated
    assert store.load().workers["w1"] == BoardStore(one, persist=False).get("worker", "w1")

"""The board page a long-lived server keeps (`web.board.BoardPages`): reused only while a load
of the board equals the one it was built from, so that after a hand edit in place, a new task
file, a deleted one and a `git checkout` that changes many, the next page is exactly the page a
fresh read of the files gives (no cache file, a new store), in process and over real HTTP.

The update is synchronous: every request loads the board, and the store's file events (inotify)
are queued by the kernel inside the write that makes them, so no wait is needed (the bound is
zero: the very next request shows the change)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from web_support import git, make_workspace, request, serve

from moss_files.board import editing, files
from moss_files.board.model import Task
from moss_files.board.store import BoardStore
from moss_files.foundation import document
from moss_files.foundation.context import Context
from moss_files.web import board as board_page
from moss_files.web.html import fill

CSRF = "0123456789abcdef0123456789abcdef01234567"
QUERIES = (
    board_page.BoardQuery(),
    board_page.BoardQuery(status="DONE", limit=5, offset=5),
    board_page.BoardQuery(priority="HIGH", limits={"BACKLOG": 3}),
)
MAIN = re.compile(r'<main id="main" data-render="[^"]*">(.*)</main>', re.DOTALL)
META_CSRF = re.compile(r'<meta name="moss-csrf" content="([0-9a-f]+)">')


def tasks_folder(root: Path) -> Path:
    return root / ".moss" / "board" / "tasks"


def hand_write(path: Path, change: Callable[[Task], Task]) -> None:
    """Rewrite a task file as a person or `git` would, without the toolkit's writer."""
    task = files.parse_task(document.parse(path.read_text()), path, fallback_id=path.stem)
    path.write_text(files.render_task(change(task)))


def make_board(root: Path, count: int = 40) -> list[str]:
    """A committed board of `count` tasks in every column, a third of them DONE at different times."""
    make_workspace(root)
    ctx = Context(root)
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    statuses = ("BACKLOG", "PLANNING", "WORKING")
    ids = [
        editing.create_task(ctx, epic_id=epic, title=f"Task {n:02d}", status=statuses[n % 3], priority=("HIGH", "LOW")[n % 2])["task"]["id"]
        for n in range(count)
    ]
    for n, task_id in enumerate(ids[::3]):
        hand_write(tasks_folder(root) / f"{task_id}.md", lambda task, n=n: replace(task, status="DONE", completed=f"2026-01-{n + 1:02d}T10:00:00Z"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a board")
    return ids


def fresh_page(root: Path, query: board_page.BoardQuery, csrf: str) -> board_page.Page:
    """The page as a fresh read of the files gives it: a new store that neither reads nor
    writes the cache file, and no kept pages."""
    return board_page.build_board_page(Context(root), BoardStore(root, persist=False).load(), query, csrf=csrf)


def edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Overwrite bytes of a file where they are (same inode, same size), as some editors save."""
    assert len(old) == len(new)
    data = path.read_bytes()
    at = data.index(old)
    with path.open("r+b") as handle:
        handle.seek(at)
        handle.write(new)


def changes(root: Path, ids: list[str]) -> list[tuple[str, Callable[[], None]]]:
    """Each kind of change the files can undergo behind the server's back, in order."""
    folder = tasks_folder(root)

    def in_place() -> None:
        edit_in_place(folder / f"{ids[1]}.md", b"Task 01", b"Task X1")  # the same size, within the racy window

    def new_file() -> None:
        text = (folder / f"{ids[2]}.md").read_text().replace(ids[2], "TASK-20260101-handmade").replace("Task 02", "Made by hand")
        (folder / "TASK-20260101-handmade.md").write_text(text)

    def deleted() -> None:
        (folder / f"{ids[4]}.md").unlink()

    def checkout() -> None:
        git(root, "checkout", "-q", "other")

    return [("in place", in_place), ("new file", new_file), ("deleted", deleted), ("checkout", checkout)]


def branch_with_many_changes(root: Path, ids: list[str]) -> None:
    """A branch `other` where many task files differ (titles, columns, completion times), some
    are gone and some are new; the work tree is left on main."""
    git(root, "checkout", "-q", "-b", "other")
    folder = tasks_folder(root)
    for n, task_id in enumerate(ids[5:30]):
        hand_write(
            folder / f"{task_id}.md",
            lambda task, n=n: replace(task, title=f"Other {n}", status=("DONE", "REVIEW", "BACKLOG")[n % 3], completed="2026-02-01T10:00:00Z"),
        )
    for task_id in ids[30:34]:
        (folder / f"{task_id}.md").unlink()
    source = (folder / f"{ids[35]}.md").read_text()
    for n in range(6):
        (folder / f"TASK-20260202-other{n:03d}.md").write_text(source.replace(ids[35], f"TASK-20260202-other{n:03d}").replace("Task 35", f"Branch task {n}"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "another board")
    git(root, "checkout", "-q", "main")


def test_the_kept_board_page_equals_a_fresh_build_after_every_kind_of_change(repo: Path) -> None:
    ids = make_board(repo)
    branch_with_many_changes(repo, ids)
    server = Context(repo)  # one context for the test's life, as the daemon keeps
    for query in QUERIES:  # the third load on: the store watches its files, the pages are kept
        for _ in range(3):
            assert board_page.board_page(server, query, csrf=CSRF) == fresh_page(repo, query, CSRF)
    # Kept indeed: asked again, the same markup comes back, not a new rendering.
    first, again = (board_page.board_page(server, QUERIES[0], csrf=CSRF) for _ in range(2))
    assert first.parts["counts"] is again.parts["counts"]
    for name, change in changes(repo, ids):
        change()
        for query in QUERIES:
            shown = board_page.board_page(server, query, csrf=CSRF)
            assert shown == fresh_page(repo, query, CSRF), (name, query)
    after = fill(board_page.board_page(server, board_page.BoardQuery(), csrf=CSRF))
    assert "Other 3" in after and "Branch task 5" in after and "Made by hand" in after and "Task X1" in after  # kept by the checkout: a local change
    # Another visitor's token goes where the first one's was, and nowhere else.
    other = board_page.board_page(server, board_page.BoardQuery(), csrf="f" * 40)
    assert fill(other) == fill(fresh_page(repo, board_page.BoardQuery(), "f" * 40)) and CSRF not in fill(other)


@pytest.mark.slow
def test_the_served_board_shows_what_a_fresh_read_shows_after_every_kind_of_change(repo: Path) -> None:
    ids = make_board(repo)
    branch_with_many_changes(repo, ids)
    with serve(repo) as served:
        cookie = {"Cookie": "moss_csrf=a-browser-nonce-of-mine-0123", "Accept": "text/html"}

        def served_main(path: str) -> tuple[str, str]:
            answer = request(served.base, path, headers=cookie)
            assert answer.status == 200, answer.text[:300]
            token = META_CSRF.search(answer.text)
            main = MAIN.search(answer.text)
            assert token and main
            return main.group(1), token.group(1)

        paths = {"/board": QUERIES[0], "/board?status=DONE&limit=5&offset=5": QUERIES[1], "/board?priority=HIGH&backlog=3": QUERIES[2]}
        for path, query in paths.items():
            for _ in range(3):
                main, token = served_main(path)
                assert main == fill(fresh_page(repo, query, token)), path
        for name, change in changes(repo, ids):
            change()
            for path, query in paths.items():
                main, token = served_main(path)  # the very next request: no wait
                assert main == fill(fresh_page(repo, query, token)), (name, path)
        assert "Branch task 5" in served_main("/board")[0]

"""The path-history record (`index.pathhistory`) against git itself, in real repositories:
its answer for a path equals `git log --follow -- PATH` (through `gitrepo.file_history`, which
asks git) after renames, moves between folders, copies, deletes and re-adds, merges, rewritten
history, in a shallow clone, under concurrent commits and writers, and after a kill -9."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import wait_for

from moss_files.foundation import gitrepo
from moss_files.index import pathhistory

UNDER = ".moss/capsules"
ENV = {"GIT_CONFIG_NOSYSTEM": "1"}


def git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    full = {**os.environ, **ENV, **(env or {})}
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=full).stdout.strip()


def commit(root: Path, message: str, *, when: int | None = None) -> None:
    stamp = {} if when is None else {"GIT_COMMITTER_DATE": f"{when} +0000", "GIT_AUTHOR_DATE": f"{when} +0000"}
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message, env=stamp)


def write(root: Path, relpath: str, text: str) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def body(n: int) -> str:
    """A file text long enough for git's rename detection to pair its edits (>= 50% alike)."""
    return "".join(f"line {i} of a capsule that stays mostly the same\n" for i in range(12)) + f"edit {n}\n"


def record(root: Path) -> pathhistory.PathHistory:
    return pathhistory.PathHistory(gitrepo.open_repo(root), root / ".moss" / "cache", UNDER)


def from_git(root: Path, relpath: str) -> list[gitrepo.Version]:
    return gitrepo.file_history(gitrepo.open_repo(root), relpath)


def from_record(root: Path, relpath: str) -> list[gitrepo.Version]:
    return [touch.version for touch in record(root).history(relpath)]


def assert_same(root: Path, *relpaths: str) -> None:
    for relpath in relpaths:
        assert from_record(root, relpath) == from_git(root, relpath), relpath


def p(name: str) -> str:
    return f"{UNDER}/{name}"


@pytest.fixture
def repo(repo: Path) -> Path:
    git(repo, "config", "user.name", "Test")
    git(repo, "config", "user.email", "test@example.invalid")
    return repo


def test_renames_moves_copies_deletes_and_readds(repo: Path) -> None:
    write(repo, p("a/one.md"), body(0))
    write(repo, "README.md", "outside\n")
    commit(repo, "add one")
    write(repo, p("a/one.md"), body(1))
    commit(repo, "edit one")
    git(repo, "mv", p("a/one.md"), p("a/two.md"))
    commit(repo, "rename one to two")
    (repo / p("b")).mkdir(parents=True)
    git(repo, "mv", p("a/two.md"), p("b/two.md"))
    write(repo, p("b/two.md"), body(2))
    commit(repo, "move two to b, edited")
    write(repo, p("b/copy.md"), body(2))
    commit(repo, "copy two")  # git log --follow finds copies of unchanged files too
    git(repo, "rm", "-q", p("b/two.md"))
    commit(repo, "delete two")
    write(repo, p("b/two.md"), "a new file under the old name\n")
    commit(repo, "add two again")
    write(repo, p("b/two.md"), "a new file under the old name, edited\n")
    commit(repo, "edit the new two")
    paths = ["a/one.md", "a/two.md", "b/two.md", "b/copy.md", "none.md"]
    assert_same(repo, *(p(name) for name in paths))
    versions = from_record(repo, p("b/copy.md"))
    assert [v.summary for v in versions] == ["copy two", "move two to b, edited", "rename one to two", "edit one", "add one"]
    assert [touch.blob is None for touch in record(repo).history(p("b/two.md"))] == [False, False, True, False, False, False, False]
    assert len(record(repo).history(p("b/two.md"), limit=3)) == 3


def test_a_rename_from_outside_the_folder_is_answered_by_git(repo: Path) -> None:
    write(repo, "notes/outside.md", body(0))
    commit(repo, "outside")
    (repo / UNDER).mkdir(parents=True)
    git(repo, "mv", "notes/outside.md", p("inside.md"))
    commit(repo, "move inside")
    with pytest.raises(pathhistory.Unavailable):
        record(repo).history(p("inside.md"))
    with pytest.raises(pathhistory.Unavailable):
        record(repo).history("notes/outside.md")


def test_merges_with_changes_on_both_sides_and_equal_dates(repo: Path) -> None:
    when = 1_750_000_000
    write(repo, p("shared.md"), body(0) + "top\n")
    write(repo, p("old.md"), body(100))
    commit(repo, "base", when=when)
    git(repo, "checkout", "-q", "-b", "side")
    for step in range(3):
        write(repo, p(f"side{step}.md"), body(step))
        write(repo, p("shared.md"), "side first\n" + body(0) + f"top {step}\n")
        commit(repo, f"side {step}", when=when + 10 * step + 5)  # between main's: git's walk interleaves
    write(repo, p("shared.md"), "side first\n" + body(0) + "top tie\n")
    commit(repo, "side tie", when=when + 40)  # the same second as one of main's: git's order decides
    git(repo, "mv", p("old.md"), p("renamed-on-side.md"))
    commit(repo, "rename on side", when=when + 45)
    git(repo, "checkout", "-q", "main")
    for step in range(5):
        write(repo, p("shared.md"), body(0) + f"top\nmain {step}\n")
        commit(repo, f"main {step}", when=when + 10 * step + (0 if step else 50))  # `main 0` has a skewed clock
    assert_same(repo, p("shared.md"))  # the record is at main's tip when the merge comes
    git(repo, "merge", "-q", "--no-edit", "-X", "theirs", "side", env={"GIT_COMMITTER_DATE": f"{when + 60} +0000"})
    assert_same(repo, p("shared.md"))
    write(repo, p("renamed-on-side.md"), body(101))
    commit(repo, "after the merge", when=when + 70)
    assert_same(repo, p("shared.md"), p("renamed-on-side.md"), p("old.md"), p("side1.md"))
    summaries = [v.summary for v in from_record(repo, p("shared.md"))]
    assert summaries.index("main 4") < summaries.index("side 2") < summaries.index("main 2")  # interleaved by date
    assert any(len(c.parents) == 2 for c in gitrepo.walk_commits(gitrepo.open_repo(repo), "HEAD"))


def test_rewritten_history_reset_amend_and_rebase(repo: Path) -> None:
    for step in range(4):
        write(repo, p("a.md"), body(step))
        commit(repo, f"a {step}")
    assert_same(repo, p("a.md"))
    git(repo, "reset", "-q", "--hard", "HEAD~2")  # HEAD went back
    assert_same(repo, p("a.md"))
    write(repo, p("a.md"), body(10))
    commit(repo, "a 10")
    git(repo, "commit", "-q", "--amend", "-m", "a 10, amended")
    assert_same(repo, p("a.md"))
    git(repo, "reset", "-q", "--hard", "HEAD@{3}")  # forward again, to commits seen before
    assert_same(repo, p("a.md"))
    base = git(repo, "rev-parse", "HEAD~1")
    git(repo, "checkout", "-q", "-b", "topic", base)
    write(repo, p("b.md"), body(20))
    commit(repo, "b on topic")
    git(repo, "rebase", "-q", "main")
    git(repo, "mv", p("a.md"), p("c.md"))
    commit(repo, "rename a to c after the rebase")
    assert_same(repo, p("a.md"), p("b.md"), p("c.md"))


def test_shallow_clone_then_deepened(repo: Path, tmp_path: Path) -> None:
    for step in range(8):
        write(repo, p("a.md"), body(step))
        commit(repo, f"a {step}")
    git(repo, "mv", p("a.md"), p("b.md"))
    commit(repo, "rename")
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "4", f"file://{repo}", str(clone))
    assert_same(clone, p("b.md"), p("a.md"))
    assert len(from_record(clone, p("b.md"))) == 4  # the boundary shows as the file's first version
    git(clone, "fetch", "-q", "--unshallow")  # HEAD stays; the boundary commit gains its parent
    assert_same(clone, p("b.md"), p("a.md"))
    assert len(from_record(clone, p("b.md"))) == 9


def test_root_commits_hidden_as_git_hides_them(repo: Path, tmp_path: Path) -> None:
    write(repo, p("a.md"), body(0))
    commit(repo, "root")
    write(repo, p("a.md"), body(1))
    commit(repo, "two")
    write(repo, p("a.md"), body(2))
    commit(repo, "three")
    git(repo, "config", "log.showRoot", "false")
    handle = gitrepo.open_repo(repo)
    assert not gitrepo.shows_root_commits(handle)
    hidden = [touch.version for touch in record(repo).history(p("a.md"), show_root=False)]
    assert hidden == from_git(repo, p("a.md")) and [v.summary for v in hidden] == ["three", "two"]
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "2", f"file://{repo}", str(clone))
    git(clone, "config", "log.showRoot", "false")  # the boundary is a root too
    assert [touch.version for touch in record(clone).history(p("a.md"), show_root=False)] == from_git(clone, p("a.md"))
    git(repo, "config", "log.showRoot", "true")
    assert gitrepo.shows_root_commits(gitrepo.open_repo(repo))


def test_history_unborn_branch_and_replacement_refs(repo: Path) -> None:
    assert record(repo).history(p("a.md")) == []
    write(repo, p("a.md"), body(0))
    commit(repo, "one")
    write(repo, p("a.md"), body(1))
    commit(repo, "two")
    assert_same(repo, p("a.md"))
    git(repo, "replace", "--graft", "HEAD")  # `two` without a parent: its diff is another
    with pytest.raises(pathhistory.Unavailable):
        record(repo).history(p("a.md"))


@pytest.mark.parametrize("seed", range(6))
def test_random_histories_answer_as_git_after_every_step(repo: Path, seed: int) -> None:
    """Random edits, renames, moves, copies, deletes, re-adds, branches and merges; after every
    few steps (the record extended, or its walk read anew) each path ever used answers as git."""
    chance = random.Random(seed)
    names = [f"{folder}/{stem}.md" for folder in ("x", "y") for stem in ("a", "b", "c", "d")]
    used: set[str] = set()
    counter = 0
    branches = ["main"]

    def live() -> list[str]:
        return [name for name in names if (repo / p(name)).exists()]

    write(repo, p(names[0]), body(0))
    commit(repo, "start")
    used.add(names[0])
    for step in range(36):
        counter += 1
        action = chance.choice(["edit", "edit", "add", "rename", "delete", "copy", "branch", "merge"])
        present = live()
        free = [name for name in names if name not in present]
        if action == "edit" and present:
            write(repo, p(chance.choice(present)), body(counter))
        elif action == "add" and free:
            name = chance.choice(free)
            write(repo, p(name), f"new text {counter}\n" * chance.choice((1, 8)))
            used.add(name)
        elif action == "rename" and present and free:
            source, target = chance.choice(present), chance.choice(free)
            (repo / p(target)).parent.mkdir(parents=True, exist_ok=True)
            git(repo, "mv", p(source), p(target))
            used.add(target)
        elif action == "delete" and len(present) > 1:
            git(repo, "rm", "-q", p(chance.choice(present)))
        elif action == "copy" and present and free:
            target = chance.choice(free)
            write(repo, p(target), (repo / p(chance.choice(present))).read_text())
            used.add(target)
        elif action == "branch":
            name = f"b{step}"
            git(repo, "checkout", "-q", "-b", name)
            branches.append(name)
            continue
        elif action == "merge" and len(branches) > 1:
            current = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
            other = chance.choice([b for b in branches if b != current])
            git(repo, "checkout", "-q", other)
            merged = subprocess.run(["git", "merge", "-q", "--no-edit", current], cwd=repo, capture_output=True, env={**os.environ, **ENV})
            if merged.returncode != 0:  # a conflict: committed as it stands, markers and all
                git(repo, "add", "-A")
                git(repo, "commit", "-q", "--no-edit")
            continue
        commit(repo, f"step {step}: {action}", when=1_750_000_000 + chance.randrange(0, 40) * 60)
        if step % 4 == 3:
            assert_same(repo, *(p(name) for name in sorted(used)))
    assert_same(repo, *(p(name) for name in sorted(used)))


def test_commits_landing_while_processes_update_the_record(repo: Path) -> None:
    """Commits land while several processes bring the record up to date at once: every one
    succeeds, and the record then answers as git does."""
    write(repo, p("a.md"), body(0))
    commit(repo, "start")
    stop = threading.Event()

    def committer() -> None:
        step = 0
        while not stop.is_set():
            step += 1
            write(repo, p("a.md" if step % 3 else f"n{step % 5}.md"), body(step))
            commit(repo, f"c {step}")

    script = (
        "import sys; from pathlib import Path; from moss_files.foundation import gitrepo; from moss_files.index import pathhistory\n"
        "root = Path(sys.argv[1])\n"
        "for _ in range(15):\n"
        "    pathhistory.PathHistory(gitrepo.open_repo(root), root / '.moss/cache', sys.argv[2]).history(sys.argv[2] + '/a.md')\n"
    )
    thread = threading.Thread(target=committer)
    thread.start()
    try:
        workers = [subprocess.Popen([sys.executable, "-c", script, str(repo), UNDER], stderr=subprocess.PIPE) for _ in range(4)]
        for worker in workers:
            _, err = worker.communicate(timeout=300)
            assert worker.returncode == 0, err.decode()
    finally:
        stop.set()
        thread.join()
    assert_same(repo, p("a.md"), *(p(f"n{i}.md") for i in range(5)))


@pytest.mark.slow
def test_kill_9_during_the_first_build_leaves_no_wrong_record(repo: Path) -> None:
    """A build killed mid-transaction leaves no record of a HEAD (SQLite rolls it back); the
    next use builds it whole, and it answers as git does."""
    commits = 12_000
    importer = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE)
    assert importer.stdin is not None
    for step in range(commits):
        name = "hot.md" if step % 10 == 0 else f"n{step % 700}.md"
        data = body(step).encode()
        importer.stdin.write(b"commit refs/heads/main\ncommitter T <t@x.invalid> %d +0000\ndata 4\nstep\n" % (1_700_000_000 + step))
        importer.stdin.write(b"M 100644 inline %s\ndata %d\n%s\n\n" % (p(name).encode(), len(data), data))
    importer.stdin.close()
    assert importer.wait() == 0
    git(repo, "reset", "-q", "--hard")
    script = (
        "import sys; from pathlib import Path; from moss_files.foundation import gitrepo; from moss_files.index import pathhistory\n"
        "root = Path(sys.argv[1])\n"
        "pathhistory.PathHistory(gitrepo.open_repo(root), root / '.moss/cache', sys.argv[2]).bring_up_to_date()\n"
    )
    database = repo / ".moss" / "cache" / pathhistory.DB_NAME
    wal = Path(f"{database}-wal")
    builder = subprocess.Popen([sys.executable, "-c", script, str(repo), UNDER])
    # Killed once its transaction has written pages to the WAL: inside the build's inserts.
    wait_for(lambda: (wal.exists() and wal.stat().st_size > 256 * 1024) or builder.poll() is not None, timeout=120, message="the build writing")
    builder.send_signal(signal.SIGKILL)
    builder.wait()
    assert builder.returncode == -signal.SIGKILL, "the build finished before it could be killed"
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM meta").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM commits").fetchone()[0] == 0
    assert_same(repo, p("hot.md"), p("n7.md"))
    assert len(from_record(repo, p("hot.md"))) == commits // 10


def test_an_unreadable_record_is_made_anew(repo: Path) -> None:
    write(repo, p("a.md"), body(0))
    commit(repo, "one")
    folder = repo / ".moss" / "cache"
    folder.mkdir(parents=True)
    (folder / pathhistory.DB_NAME).write_bytes(b"not a database at all" * 100)
    assert_same(repo, p("a.md"))
    assert (folder / ".gitignore").read_text().endswith("*\n")
    assert git(repo, "status", "--porcelain") == ""


def test_follow_replays_a_global_pathspec() -> None:
    """The pure replay: after a rename is met, the walk goes on with the old name from that
    place in the walk (git's one pathspec), never back to earlier steps."""
    steps = {
        "new": [pathhistory.Step(1, 1, "M"), pathhistory.Step(3, 3, "A")],
        "old": [pathhistory.Step(2, 2, "M"), pathhistory.Step(4, 4, "M"), pathhistory.Step(5, 5, "A")],
    }

    def touches(path: str, after: int) -> list[pathhistory.Step]:
        return [step for step in steps.get(path, []) if step.seq > after]

    sources = {(3, "new"): "old"}
    shown = [(step.seq, path) for step, path in pathhistory.follow("new", touches, lambda step, path: sources.get((step.seq, path)))]
    assert shown == [(1, "new"), (3, "new"), (4, "old"), (5, "old")]

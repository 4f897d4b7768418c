"""Lock and state files never reach git: in a project that was never `init`ed (no .gitignore
lines), in a worktree (where `.git` is a file), and in a folder that is no repository. The lock
of a file is one path whatever the state of git, so every process agrees on it."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

from conftest import run_cli

import cstack
from moss_files import scaffold
from moss_files.foundation import fs
from moss_files.foundation.context import Context
from moss_files.foundation.ids import fixed_clock
from needlecast import mailbox
from needlecast.mailbox import Mailbox
from needlecast.message import Message
from needlecast.router import Router

NOW = datetime(2026, 1, 21, 12, tzinfo=UTC)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout


def staged_by_add_all(root: Path) -> list[str]:
    """What `git add -A` would commit: every path it stages."""
    git(root, "add", "-A")
    return git(root, "diff", "--cached", "--name-only").split()


def work_in_cstack_and_needlecast(root: Path) -> None:
    """Writes through both tools in a project whose .gitignore lacks the scaffold's lines."""
    (root / ".cstack").mkdir()
    ctx = Context(root, clock=fixed_clock(NOW))
    cstack.add_task(ctx, task="P1: Ship it")
    cstack.transition(ctx, action="start", task="Ship it")
    cstack.remember(ctx, text="The staging database is shared")
    for name in ("alice", "bob"):
        mailbox.init_mailbox(root / "sleeves" / name, "v1")
    message = Message(id="m-1", sender="alice", to=("bob",), type="task", time="2026-01-21T09:00:00Z", body="hello")
    mailbox.append_outbox(Mailbox(root / "sleeves" / "alice"), message, NOW)
    report = Router(root / "sleeves", clock=lambda: NOW).route_all()
    assert report.delivered == 1


def test_a_project_never_initialised_commits_no_lock_or_state_file(repo: Path) -> None:
    assert not (repo / ".gitignore").exists()
    work_in_cstack_and_needlecast(repo)
    assert (repo / ".cstack/.locks/.PLAN.md.lock").exists() and (repo / "sleeves/bob/.needlecast/.state").is_dir()
    staged = staged_by_add_all(repo)
    assert staged and not [path for path in staged if ".lock" in path or "/.state/" in path or "/.locks/" in path], staged
    assert ".cstack/PLAN.md" in staged and "sleeves/bob/.needlecast/inbox.md" in staged
    assert not (repo / ".cstack/.PLAN.md.lock").exists()  # nothing beside the file any more


def test_a_worktree_whose_git_is_a_file_commits_none_either(repo: Path, tmp_path: Path) -> None:
    (repo / "README.md").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "start")
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", str(tree), "-b", "side")
    assert (tree / ".git").is_file()
    work_in_cstack_and_needlecast(tree)
    staged = staged_by_add_all(tree)
    assert staged and not [path for path in staged if ".lock" in path or "/.state/" in path or "/.locks/" in path], staged


def test_a_folder_that_is_no_repository_gets_the_same_locks(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    work_in_cstack_and_needlecast(root)
    assert (root / ".cstack/.locks/.gitignore").read_bytes() == fs.SELF_IGNORE
    assert (root / "sleeves/alice/.needlecast/.state/.gitignore").read_bytes() == fs.SELF_IGNORE
    # Made a repository afterwards, the folders are ignored from the first `git add`.
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    staged = staged_by_add_all(root)
    assert not [path for path in staged if ".lock" in path or "/.state/" in path or "/.locks/" in path], staged


def test_the_lock_path_depends_on_the_file_alone(repo: Path) -> None:
    """Processes agree on a lock whether or not .gitignore has the scaffold's lines, and
    however the path is spelled."""
    plan = repo / ".cstack" / "PLAN.md"
    before = fs.lock_path_for(plan)
    (repo / ".gitignore").write_text("\n".join(line for lines in scaffold.GITIGNORE_LINES.values() for line in lines) + "\n")
    assert fs.lock_path_for(plan) == before == repo / ".cstack/.locks/.PLAN.md.lock"
    assert fs.lock_path_for(Path(f"{repo}/./.cstack/PLAN.md")).resolve() == before.resolve()
    inbox_dir = repo / "sleeves/bob/.needlecast/inbox"
    assert fs.lock_path_for(inbox_dir) == repo / "sleeves/bob/.needlecast/.locks/.inbox.lock"
    assert fs.lock_path_for(repo / ".moss/capsules/default/a.md") == repo / ".moss/.locks/capsules/default/.a.md.lock"
    assert fs.lock_path_for(repo / "note.md") == repo / ".locks/.note.md.lock"  # outside the toolkit: beside it
    # The place is kept per path (`_lock_place`): the kept answer is the one computed afresh.
    for path in (plan, inbox_dir, repo / ".moss/capsules/default/a.md", repo / "note.md", Path(".moss/board/tasks/T-1.md")):
        assert fs._lock_place(path) == fs._lock_place.__wrapped__(path) == (fs._locks_root(path), fs.lock_path_for(path))


def test_the_cli_leaves_git_status_clean_of_locks(repo: Path) -> None:
    (repo / ".cstack").mkdir()
    for args in (("add", "P1: One"), ("start", "One"), ("done", "One")):
        done = run_cli("cstack", *args, cwd=repo, env={"MOSS_NOW": "2026-01-21"})
        assert done.returncode == 0, done.stderr
    untracked = [line for line in git(repo, "status", "--porcelain", "-uall").split("\n") if line]
    assert "?? .cstack/PLAN.md" in untracked and not [line for line in untracked if ".lock" in line], untracked

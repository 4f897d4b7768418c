"""The git edge, against real repositories."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from moss_files.foundation import gitrepo
from moss_files.foundation.errors import MossError


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def test_history_follows_renames_newest_first(repo: Path) -> None:
    (repo / "a.md").write_text("one\n")
    git(repo, "add", "a.md")
    git(repo, "commit", "-qm", "add a")
    (repo / "a.md").write_text("two\n")
    git(repo, "commit", "-qam", "edit a")
    (repo / "moved").mkdir()
    git(repo, "mv", "a.md", "moved/b.md")
    git(repo, "commit", "-qm", "move a")
    handle = gitrepo.open_repo(repo / "moved")
    versions = gitrepo.file_history(handle, "moved/b.md")
    assert [(v.summary, v.path) for v in versions] == [("move a", "moved/b.md"), ("edit a", "a.md"), ("add a", "a.md")]
    assert versions[0].author == "Test" and versions[0].email == "test@example.invalid"
    assert len(gitrepo.file_history(handle, "moved/b.md", limit=1)) == 1
    first = versions[-1].commit
    assert gitrepo.show_files(handle, [(first, "a.md"), (first, "moved/b.md")]) == [b"one\n", None]
    assert gitrepo.list_files(handle, "HEAD", "moved") == ["moved/b.md"]
    assert gitrepo.grep_files(handle, "HEAD", "two", "moved") == ["moved/b.md"]
    assert gitrepo.grep_files(handle, "HEAD", "absent", "moved") == []
    assert gitrepo.resolve(handle, "HEAD~2") == first


def test_empty_repository_has_no_history(repo: Path) -> None:
    assert gitrepo.file_history(gitrepo.open_repo(repo), "a.md") == []


def test_errors_are_translated(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(MossError) as caught:
        gitrepo.open_repo(outside)
    assert (caught.value.code, caught.value.exit_code) == ("REPO_ERROR", 6)
    (repo / "a.md").write_text("x")
    git(repo, "add", "a.md")
    git(repo, "commit", "-qm", "c")
    handle = gitrepo.open_repo(repo)
    for rev in ("nope", "HEAD~5"):  # an option such as --all is INVALID_REVISION (below)
        with pytest.raises(MossError) as caught:
            gitrepo.resolve(handle, rev)
        assert caught.value.code == "NOT_FOUND"
    with pytest.raises(MossError) as caught:
        gitrepo.file_history(handle, "a.md", rev="no-such-branch")
    assert caught.value.code == "REPO_ERROR"
    with pytest.raises(MossError):
        gitrepo.relpath_in_repo(handle, outside / "x")


def test_listing_and_resolving_agree_with_git(repo: Path) -> None:
    """`list_files` lists the blobs below a folder (not a sibling sharing its prefix, not a
    submodule), and `resolve` names the commit `git rev-parse` names."""
    for path in ("top/a.md", "top/deep/b.md", "topper/c.md", "top.md"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(path)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "files")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{git(repo, 'rev-parse', 'HEAD')},top/module")
    git(repo, "commit", "-qm", "a submodule entry")
    git(repo, "tag", "v1")
    handle = gitrepo.open_repo(repo)
    assert gitrepo.list_files(handle, "HEAD", "top") == ["top/a.md", "top/deep/b.md"]
    assert gitrepo.list_files(handle, "HEAD", "top/") == ["top/a.md", "top/deep/b.md"]
    assert gitrepo.list_files(handle, "HEAD", "nowhere") == []
    for rev in ("HEAD", "HEAD~1", "HEAD^", "v1", "main", git(repo, "rev-parse", "--short", "HEAD~1"), "HEAD^{commit}"):
        assert gitrepo.resolve(handle, rev) == git(repo, "rev-parse", f"{rev}^{{commit}}")


def test_open_repo_finds_what_git_finds_from_a_folder_a_file_and_a_worktree(repo: Path, tmp_path: Path) -> None:
    (repo / "deep" / "er").mkdir(parents=True)
    (repo / "deep" / "er" / "a.md").write_text("x\n")
    for start in (repo, repo / "deep" / "er", repo / "deep" / "er" / "a.md", repo / "deep" / "er" / "not-yet.md"):
        handle = gitrepo.open_repo(start)
        assert (handle.working_tree_dir, handle.git_dir, handle.common_dir) == (repo.resolve(), repo.resolve() / ".git", repo.resolve() / ".git")
    assert gitrepo.relpath_in_repo(gitrepo.open_repo(repo), repo / "deep" / "er" / "a.md") == "deep/er/a.md"
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    handle = gitrepo.open_repo(linked / "deep")
    assert handle.working_tree_dir == linked.resolve() and handle.common_dir == repo.resolve() / ".git" and handle.git_dir != handle.common_dir
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    handle = gitrepo.open_repo(bare)
    assert handle.working_tree_dir is None and handle.top == bare.resolve()
    assert gitrepo.head_commit(handle) == git(repo, "rev-parse", "HEAD")


def test_head_branch_and_show_root_are_read_without_gitpython(repo: Path) -> None:
    """The readings a warm history view makes run git itself, and agree with it; GitPython
    loads only for a command run through it."""
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from moss_files.foundation import gitrepo\n"
        "handle = gitrepo.open_repo(Path(sys.argv[1]))\n"
        "print(gitrepo.head_commit(handle), gitrepo.shows_root_commits(handle), 'git' in sys.modules)\n"
        "print(gitrepo.current_branch(Path(sys.argv[1])), 'git' in sys.modules)\n"
    )

    def run() -> list[str]:
        done = subprocess.run([sys.executable, "-c", probe, str(repo)], capture_output=True, text=True, check=True)
        return done.stdout.split()

    assert run() == ["None", "True", "False", "main", "True"]  # unborn: no head yet
    (repo / "a.md").write_text("x\n")
    git(repo, "add", "a.md")
    git(repo, "commit", "-qm", "a")
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "config", "log.showRoot", "false")
    assert run() == [head, "False", "False", "main", "True"]
    git(repo, "config", "log.showRoot", "yes")
    git(repo, "checkout", "-q", "--detach")
    assert run() == [head, "True", "False", "None", "True"]  # a detached HEAD has no branch

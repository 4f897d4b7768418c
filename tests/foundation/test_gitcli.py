"""Git's command line without GitPython (`gitcli`), against real repositories: each reading
equals what git itself answers, and what `gitrepo` (GitPython) answers for the same repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from moss_files.foundation import gitcli, gitrepo
from moss_files.foundation.errors import MossError


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def git_show(root: Path, commit: str, path: str) -> bytes | None:
    """git's own answer for one file at a commit: its bytes, or None (no such file, a folder)."""
    kind = subprocess.run(["git", "cat-file", "-t", f"{commit}:{path}"], cwd=root, capture_output=True, text=True)
    if kind.returncode != 0 or kind.stdout.strip() != "blob":
        return None
    return subprocess.run(["git", "cat-file", "blob", f"{commit}:{path}"], cwd=root, check=True, capture_output=True).stdout


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


@pytest.mark.parametrize("rev", ["HEAD", "HEAD~1", "main^", "HEAD^{commit}", "@", "main@{yesterday}", "HEAD@{2026-01-02 10:00:00}", "v1.2", "0123abcd"])
def test_a_revision_naming_one_commit_passes_the_check(rev: str) -> None:
    assert gitcli.check_revision(rev) == rev


@pytest.mark.parametrize(
    "rev",
    ["HEAD:../../etc/passwd", "HEAD:.moss", ":0:a.md", ":/fix", "HEAD..main", "main...HEAD", "-p", "--all", "", "HEAD\n", "HEAD^{tree}", "a b", "x" * 300],
)
def test_a_revision_that_is_not_one_commit_is_refused_before_git_sees_it(repo: Path, rev: str) -> None:
    (repo / "a.md").write_text("one\n")
    commit_all(repo, "add a")
    for reading in (lambda: gitcli.locate(repo, rev), lambda: gitrepo.resolve(gitrepo.open_repo(repo), rev)):
        with pytest.raises(MossError) as caught:
            reading()
        assert (caught.value.code, caught.value.exit_code) == ("INVALID_REVISION", 2)


def test_locate_finds_the_work_tree_and_the_commit_from_a_subfolder(repo: Path) -> None:
    (repo / "deep" / "er").mkdir(parents=True)
    (repo / "deep" / "er" / "a.md").write_text("one\n")
    first = commit_all(repo, "first")
    (repo / "deep" / "er" / "a.md").write_text("two\n")
    second = commit_all(repo, "second")
    git(repo, "tag", "-a", "v1", "-m", "an annotated tag", first)
    top, commit = gitcli.locate(repo / "deep" / "er", "HEAD~1")
    assert (top.resolve(), commit) == (repo.resolve(), first)
    assert gitcli.locate(repo, "v1")[1] == first  # an annotated tag names its commit
    assert gitcli.locate(repo, "main")[1] == second
    assert gitcli.relpath(top, repo / "deep" / "er" / "a.md") == "deep/er/a.md"
    handle = gitrepo.open_repo(repo)
    for rev in ("HEAD", "HEAD~1", "v1", "main^", git(repo, "rev-parse", "--short", "HEAD")):
        assert gitcli.resolve(top, rev) == gitrepo.resolve(handle, rev) == gitcli.locate(repo, rev)[1]


def test_locate_tells_a_missing_repository_from_a_missing_commit(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    for where in (outside, tmp_path / "absent"):
        with pytest.raises(MossError) as caught:
            gitcli.locate(where, "HEAD")
        assert (caught.value.code, caught.value.exit_code) == ("REPO_ERROR", 6)
        assert str(where) in caught.value.message
    with pytest.raises(MossError) as caught:
        gitcli.locate(repo, "HEAD")  # no commit yet
    assert caught.value.code == "NOT_FOUND"
    (repo / "a.md").write_text("x")
    commit_all(repo, "c")
    for rev in ("nope", "HEAD~5", "main@{99}"):
        with pytest.raises(MossError) as caught:
            gitcli.locate(repo, rev)
        assert caught.value.code == "NOT_FOUND"
        assert caught.value.details["rev"] == rev
    with pytest.raises(MossError) as caught:
        gitcli.relpath(repo, outside / "x")
    assert caught.value.code == "REPO_ERROR"


def test_batched_reads_answer_as_git_does_for_each_file(repo: Path) -> None:
    """`show_files` (one `git cat-file --batch`, or a file at a time where a name holds a
    newline) equals git's answer for each commit and path: a missing file, a folder, an empty
    file, a binary one and names with a space, a newline and non-ASCII letters among them."""
    names = ("dir/a b.md", "empty.md", "bin.dat", "new\nline.md", "é.md")
    (repo / "dir").mkdir()
    for name, data in zip(names, (b"one\n", b"", bytes(range(256)) + b"\n\n", b"nl\n", b"accent\n"), strict=True):
        (repo / name).write_bytes(data)
    first = commit_all(repo, "first")
    (repo / "dir" / "a b.md").write_text("two\nlines\n")
    (repo / "empty.md").unlink()
    second = commit_all(repo, "second")
    every = (*names, "dir", "absent.md", "dir/a b.md")
    plain = [(commit, path) for commit in (first, second) for path in every if "\n" not in path]
    mixed = [(commit, path) for commit in (first, second) for path in every]
    handle = gitrepo.open_repo(repo)
    for wanted in (plain, mixed):
        expected = [git_show(repo, commit, path) for commit, path in wanted]
        assert gitcli.show_files(repo, wanted) == expected
        assert gitrepo.show_files(handle, wanted) == expected
    assert gitcli.show_files(repo, plain)[:5] == [b"one\n", b"", bytes(range(256)) + b"\n\n", b"accent\n", None]
    assert gitcli.show_files(repo, []) == []
    blob = git(repo, "rev-parse", f"{first}:dir/a b.md")
    assert gitcli.read_objects(repo, [blob, first, "0" * 40]) == [b"one\n", None, None]


def test_listing_and_grep_name_every_file_as_it_is(repo: Path) -> None:
    """`list_files` and `grep_files` give each path as it is (not quoted as git quotes odd names
    for a terminal): a space, a newline and non-ASCII letters, below the folder asked only."""
    names = ("top/a b.md", "top/new\nline.md", "top/é.md", "top/deep/c.md", "topper/d.md")
    for name in names:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("hay\n" if name.startswith("topper/") or name.endswith("c.md") else f"needle in {name}\n")
    commit = commit_all(repo, "files")
    inside = sorted(name for name in names if name.startswith("top/"))
    assert gitcli.list_files(repo, commit, "top") == inside
    assert gitcli.grep_files(repo, commit, "needle", "top") == [name for name in inside if name != "top/deep/c.md"]
    assert gitcli.grep_files(repo, commit, "absent", "top") == []
    handle = gitrepo.open_repo(repo)
    assert gitrepo.list_files(handle, commit, "top") == inside
    assert gitrepo.grep_files(handle, commit, "needle", "top") == gitcli.grep_files(repo, commit, "needle", "top")
    with pytest.raises(MossError) as caught:
        gitcli.list_files(repo, "0" * 40, "top")
    assert caught.value.code == "REPO_ERROR"

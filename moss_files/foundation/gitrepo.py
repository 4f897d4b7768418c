"""Git for the history views and the migration's checks: GitPython's `git` runner for the
commands that walk history, and `gitcli`'s readings for the rest.

Edge layer. Every `git.exc.GitCommandError` (and a missing repository) becomes a RepoError here,
once, so callers match on codes. GitPython costs tens of milliseconds (and two `git version`
processes) to load, and a history question the path-history record answers needs none of it:
`open_repo` finds the repository with one `git rev-parse`, and GitPython is loaded on the first
call that runs a git command through it (`_run`: walking the commits, following a file the
record has not followed yet, the migration's status checks). The readings of one commit (a
revision, the files then, their bytes) are `gitcli`'s, which needs no GitPython; the functions
here pass them on.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moss_files.foundation import gitcli
from moss_files.foundation.errors import RepoError

if TYPE_CHECKING:
    import git

_FIELD = "\x1f"
_RECORD = "\x1e"


@dataclass(frozen=True, slots=True)
class Version:
    """One commit that touched a file, with the file's path in that commit."""

    commit: str
    date: str  # author date, ISO 8601 with offset
    author: str
    email: str
    summary: str
    path: str  # relative to the repository root


def version_to_dict(version: Version) -> dict[str, str]:
    """The JSON shape of a Version."""
    return {
        "commit": version.commit,
        "date": version.date,
        "author": version.author,
        "email": version.email,
        "summary": version.summary,
        "path": version.path,
    }


@dataclass(slots=True)
class Repo:
    """A git repository as `open_repo` finds it: the top of its work tree (`working_tree_dir`,
    None for a bare repository), its git folder and the folder its clones' worktrees share
    (`common_dir`: refs, grafts, shallow). GitPython's handle of it is made on first need."""

    git_dir: Path
    common_dir: Path
    working_tree_dir: Path | None
    _gitpython: Any = field(default=None, repr=False, compare=False)

    @property
    def top(self) -> Path:
        """Where git commands run: the work tree, or the git folder of a bare repository."""
        return self.working_tree_dir or self.git_dir

    def gitpython(self) -> git.Repo:
        """GitPython's handle of this repository (loads GitPython the first time)."""
        if self._gitpython is None:
            import git

            self._gitpython = git.Repo(self.top)
        handle: git.Repo = self._gitpython
        return handle


def open_repo(path: Path) -> Repo:
    """The git repository containing `path` (a folder, or a file whose folder is in one), found
    by git itself (`git rev-parse`: GIT_DIR and the like count as git counts them), with one
    process in a work tree. Raises RepoError (REPO_ERROR) outside a repository."""
    folder = path if path.is_dir() else path.parent
    if not folder.is_dir():
        raise gitcli.not_a_repository(path)
    asked = ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]
    done = gitcli.run_git(folder, [*asked, "--show-toplevel"])
    if done.returncode != 0:  # outside a repository, or in one without a work tree (bare)
        done = gitcli.run_git(folder, asked)
        if done.returncode != 0:
            raise gitcli.not_a_repository(path)
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) not in (2, 3):
        raise RepoError(f"git rev-parse gave {len(lines)} lines where 2 or 3 were asked for", path=path)
    return Repo(Path(lines[0]), Path(lines[1]), Path(lines[2]) if len(lines) == 3 else None)


def _run(repo: Repo, *args: str, **kwargs: object) -> str | bytes:
    from git.exc import GitCommandError

    try:
        return repo.gitpython().git.execute(["git", *args], **kwargs)  # type: ignore[call-overload]
    except GitCommandError as exc:
        stderr = (exc.stderr or "").strip().removeprefix("stderr: ").strip("'\n ")
        raise RepoError(f"git {args[0]} failed: {stderr or exc}", details={"status": exc.status}) from None


def relpath_in_repo(repo: Repo, path: Path) -> str:
    """`path` relative to the repository's work tree, with forward slashes."""
    return gitcli.relpath(repo.working_tree_dir or Path("."), path)


def changed_in_work_tree(repo: Repo, relpath: str) -> bool:
    """Whether `git status` shows the file at `relpath` changed, staged, new or gone."""
    return bool(gitcli.output(repo.top, "status", "--porcelain", "--", relpath).strip())


def file_history(repo: Repo, relpath: str, *, limit: int | None = None, rev: str = "HEAD") -> list[Version]:
    """Commits that changed a file, newest first, following renames (a soft delete is a rename).

    An empty list when the repository has no commits or never tracked the file.
    """
    args = ["log", "--follow", "--name-only", f"--format={_RECORD}%H{_FIELD}%aI{_FIELD}%an{_FIELD}%ae{_FIELD}%s"]
    if limit is not None:
        args.append(f"--max-count={limit}")
    args += [rev, "--", relpath]
    try:
        output = str(_run(repo, *args))
    except RepoError:
        # Asked only when git failed (one process less on every answer): no commits yet is
        # an empty history, anything else the error.
        if not _has_commits(repo):
            return []
        raise
    versions: list[Version] = []
    for chunk in output.split(_RECORD):
        if not chunk.strip():
            continue
        header, _, rest = chunk.partition("\n")
        fields = header.split(_FIELD)
        if len(fields) != 5:
            continue
        paths = [line for line in rest.splitlines() if line.strip()]
        versions.append(Version(fields[0], fields[1], fields[2], fields[3], fields[4], paths[0] if paths else relpath))
    return versions


def resolve(repo: Repo, rev: str) -> str:
    """The full commit id `rev` names (`gitcli.resolve`)."""
    return gitcli.resolve(repo.top, rev)


def show_files(repo: Repo, wanted: Sequence[tuple[str, str]]) -> list[bytes | None]:
    """The bytes of many (commit, relpath) files at once, in order; None where a commit has no
    such file (`gitcli.show_files`: one `git cat-file --batch`)."""
    return gitcli.show_files(repo.top, wanted)


def list_files(repo: Repo, commit: str, under: str) -> list[str]:
    """Paths of the files below a folder at a commit (recursive), sorted."""
    return gitcli.list_files(repo.top, commit, under)


def grep_files(repo: Repo, commit: str, pattern: str, under: str) -> list[str]:
    """Paths below `under` whose content at `commit` matches a fixed string."""
    return gitcli.grep_files(repo.top, commit, pattern, under)


def _has_commits(repo: Repo) -> bool:
    return head_commit(repo) is not None


def uncommitted(repo: Repo, relpaths: list[str]) -> dict[str, str]:
    """The paths among `relpaths` (relative to the work tree) whose work-tree content git could
    not bring back: `untracked`, `ignored`, or `changed` against the last commit. A path left
    out is committed and unchanged. Reads only (`--no-optional-locks`: no index refresh)."""
    if not relpaths:
        return {}
    if not _has_commits(repo):
        return dict.fromkeys(relpaths, "untracked")
    output = str(_run(repo, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--ignored=matching", "--untracked-files=all", "--", *relpaths))
    found: dict[str, str] = {}
    entries = output.split("\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":
            index += 1  # a rename or copy names its source next
        found[path] = {"??": "untracked", "!!": "ignored"}.get(code, "changed")
    return found


def worktree_status(root: Path, *, exclude: Sequence[str] = ()) -> str:
    """`git status --porcelain=v2 --branch` of the work tree at or above `root`, limited to
    `root` and leaving out its sub-folders `exclude`. Reads only (`--no-optional-locks`: no
    index refresh, no lock taken). Raises RepoError."""
    repo = open_repo(root)
    scope = relpath_in_repo(repo, root)
    prefix = "" if scope == "." else f"{scope}/"
    # `:(top)` alone is the whole tree; `:(top).` matches nothing through GitPython's call.
    specs = [f":(top){scope if scope != '.' else ''}", *(f":(top,exclude){prefix}{name}" for name in exclude)]
    return str(_run(repo, "--no-optional-locks", "status", "--porcelain=v2", "--branch", "--", *specs))


def current_branch(root: Path) -> str | None:
    """The branch checked out in the work tree at or above `root`; None on a detached HEAD.
    Raises RepoError outside a repository."""
    repo = open_repo(root)
    try:
        return str(_run(repo, "symbolic-ref", "--quiet", "--short", "HEAD")).strip() or None
    except RepoError as err:
        if err.details.get("status") == 1:
            return None  # symbolic-ref --quiet exits 1 for a detached HEAD
        raise


# --------------------------------------------------------------------------- for the history cache
# `index.pathhistory` keeps a derived record of which commits touched which paths; these
# read what it derives from. Every reading here is a pure function of its commit ids (and of
# the repository's grafts: `history_signature`), so what the cache keeps never goes stale.


@dataclass(frozen=True, slots=True)
class WalkedCommit:
    """One commit of a walk, with its parents (as this repository sees them: a shallow clone's
    boundary has none) and what a Version shows of it."""

    commit: str
    parents: tuple[str, ...]
    date: str
    author: str
    email: str
    summary: str


@dataclass(frozen=True, slots=True)
class PathChange:
    """One path a commit changed against its one parent (or, for a root, the empty tree), as
    `git diff-tree --no-renames --raw` gives it: `status` A, M, D or T; `blob` the new object
    (None after a delete), `mode` its file mode ("000000" after a delete)."""

    path: str
    status: str
    blob: str | None
    mode: str


def head_commit(repo: Repo) -> str | None:
    """The commit HEAD names; None on an unborn branch."""
    done = gitcli.run_git(repo.top, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
    if done.returncode != 0:
        return None
    return done.stdout.decode("ascii").strip() or None


def shows_root_commits(repo: Repo) -> bool:
    """Whether `git log` shows a root commit's changes here (`log.showRoot`, true unless set
    false): with it false, `git log --follow` leaves out the root commit (and a shallow
    clone's boundary) that added a file."""
    done = gitcli.run_git(repo.top, ["config", "--get", "log.showRoot"])
    if done.returncode != 0:
        return True  # not set (exit 1), or a configuration git cannot read: git's default
    return done.stdout.decode("utf-8", "replace").strip().lower() not in ("false", "no", "off", "0")


def history_signature(repo: Repo) -> str | None:
    """What, besides the commits, decides the parents git sees: the shallow boundary and the
    graft file, as one text. None when the repository has replacement refs (`git replace`),
    which change any commit's parents at any time: no derived record of history is safe then."""
    common = repo.common_dir
    replace = common / "refs" / "replace"
    if replace.is_dir() and any(replace.rglob("*")):
        return None
    try:
        if b" refs/replace/" in (common / "packed-refs").read_bytes():
            return None
    except FileNotFoundError:
        pass
    parts = []
    for name in ("shallow", "info/grafts"):
        try:
            parts.append((common / name).read_bytes().decode("ascii", "replace"))
        except FileNotFoundError:
            parts.append("")
    return "\n--\n".join(parts)


def walk_commits(repo: Repo, head: str, *, exclude: str | None = None) -> list[WalkedCommit]:
    """The commits reachable from `head` (and not from `exclude`), in the order `git log`
    walks them, which is the order `git log --follow` shows them in. Raises RepoError."""
    fields = f"%H{_FIELD}%P{_FIELD}%aI{_FIELD}%an{_FIELD}%ae{_FIELD}%s"
    args = ["-c", "log.showSignature=false", "log", "-z", "--no-decorate", "--no-color", f"--format={fields}", head]
    if exclude is not None:
        args.append(f"^{exclude}")
    output = _run(repo, *args, "--", stdout_as_string=False)
    assert isinstance(output, bytes)
    walked = []
    for record in output.decode("utf-8", "surrogateescape").split("\0"):
        if not record:
            continue
        parts = record.split(_FIELD)
        if len(parts) != 6 or not gitcli.OBJECT_ID.fullmatch(parts[0]):
            raise RepoError(f"git log gave an unreadable record: {record[:80]!r}")
        walked.append(WalkedCommit(parts[0], tuple(parts[1].split()), parts[2], parts[3], parts[4], parts[5]))
    return walked


def changed_paths(repo: Repo, commits: Sequence[str], under: str) -> dict[str, list[PathChange]]:
    """For each of `commits` (none a merge), the paths below the folder `under` it changed
    against its parent (a root, or a shallow clone's boundary, against the empty tree), renames
    as a delete and an add. `git diff-tree --stdin` answers them: for a long list, a few of them
    side by side on the machine's cores (reading each commit's trees is the whole cost, seconds
    for 50,000 commits). Raises RepoError."""
    if not commits:
        return {}
    parts = min(_DIFF_PROCESSES, os.cpu_count() or 1) if len(commits) >= _PARALLEL_DIFF_MIN else 1
    size = -(-len(commits) // parts)
    chunks = [commits[start : start + size] for start in range(0, len(commits), size)]
    if len(chunks) == 1:
        return _changed_paths(repo, chunks[0], under)
    from concurrent.futures import ThreadPoolExecutor  # only a first build of a long history needs it

    with ThreadPoolExecutor(len(chunks)) as pool:  # each thread waits on its own git process
        found: dict[str, list[PathChange]] = {}
        for part in pool.map(lambda chunk: _changed_paths(repo, chunk, under), chunks):
            found.update(part)
    return found


_DIFF_PROCESSES = 4
_PARALLEL_DIFF_MIN = 2000


def _changed_paths(repo: Repo, commits: Sequence[str], under: str) -> dict[str, list[PathChange]]:
    found: dict[str, list[PathChange]] = {commit: [] for commit in commits}
    request = "".join(f"{commit}\n" for commit in commits).encode("ascii")
    args = ("diff-tree", "--stdin", "-r", "--root", "--no-renames", "--raw", "-z", "--", *gitcli.folder_pathspec(under))
    printed = gitcli.output(repo.top, *args, stdin=request)
    tokens = printed.decode("utf-8", "surrogateescape").split("\0")
    current: list[PathChange] | None = None
    index = 0
    while index < len(tokens):
        token = tokens[index].strip("\n")
        index += 1
        if not token:
            continue
        if token.startswith(":"):
            meta = token[1:].split(" ")
            if current is None or len(meta) != 5 or index >= len(tokens):
                raise RepoError(f"git diff-tree gave an unreadable line: {token[:80]!r}")
            path, status = tokens[index], meta[4][:1]
            index += 1
            blob = None if status == "D" else meta[3]
            current.append(PathChange(path, status, blob, meta[1]))
        elif token in found:
            current = found[token]
        else:
            raise RepoError(f"git diff-tree named a commit it was not asked for: {token[:80]!r}")
    return found


def follow_source(repo: Repo, commit: str, relpath: str) -> str | None:
    """Where `git log --follow` goes on from `relpath` at `commit`, a commit that adds it: the
    path it was renamed or copied from (git's own detection: renames, and copies of any file
    of the parent), or None when it was new there."""
    output = _run(repo, "log", "--follow", "-n", "1", "--name-status", "-z", "--format=%H", commit, "--", relpath, stdout_as_string=False)
    assert isinstance(output, bytes)
    tokens = [token.strip("\n") for token in output.decode("utf-8", "surrogateescape").split("\0")]
    tokens = [token for token in tokens if token]
    if len(tokens) < 3 or tokens[0] != commit:
        return None
    if tokens[1][:1] in ("R", "C") and len(tokens) >= 4 and tokens[3] == relpath:
        return tokens[2]
    return None


def read_blobs(repo: Repo, blobs: Sequence[str]) -> list[bytes | None]:
    """The bytes of many blobs by object id, in order (None where one is missing or no blob)."""
    return gitcli.read_objects(repo.top, blobs)

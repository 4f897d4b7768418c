"""Git through its own command line, without GitPython: the readings of one commit that a
command which must start fast needs (`moss fetch --at`): where the work tree is, which commit
a revision names, the files below a folder then, which of them hold a text, and their bytes.

Edge layer. Loading GitPython costs tens of milliseconds and two `git version` processes, a
quarter of such a command; these readings need neither. A failing git becomes a RepoError
here (a revision naming no commit, NotFound), and `gitrepo` answers the same readings through
these functions, so both give the same answers and errors.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from moss_files.foundation.errors import InvalidRequest, NotFound, RepoError

# A full object id (SHA-1 or SHA-256), as git prints one.
OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# `@{...}` (a reflog entry or a date: `main@{yesterday}`, `HEAD@{2026-01-02 10:00}`) may hold
# any character but a brace; outside it, a revision is a ref, a commit id and their suffixes.
_REFLOG_PART = re.compile(r"@\{[^{}]*\}")
_MAX_REVISION = 256


def check_revision(rev: str) -> str:
    """`rev` when it names a commit the way `moss fetch --at` takes one: a branch, tag or
    commit id, with `~N`, `^N`, `^{commit}` or `@{...}` suffixes.

    Raises InvalidRequest INVALID_REVISION for anything else: an option (`-x`), a path inside a
    commit (`HEAD:../../etc/passwd`, `:0:file`, `:/text`), a range (`a..b`), control characters
    or an over-long text. Such a text would make git read another object than a commit.
    """
    outside = _REFLOG_PART.sub("", rev)
    reason = None
    if not rev.strip():
        reason = "is empty"
    elif len(rev) > _MAX_REVISION:
        reason = f"is longer than {_MAX_REVISION} characters"
    elif rev.startswith("-"):
        reason = "starts with '-'"
    elif any(ord(char) < 32 or ord(char) == 127 for char in rev):
        reason = "holds a control character"
    elif ":" in outside:
        reason = "names a path inside a commit (':'); give the commit alone"
    elif ".." in outside:
        reason = "is a range ('..'); give one commit"
    elif any(char.isspace() or char in "{}" for char in outside.replace("^{commit}", "")):
        reason = "holds a space or a brace outside '@{...}'"
    if reason is not None:
        raise InvalidRequest(
            f"revision {rev!r} {reason}",
            code="INVALID_REVISION",
            details={"rev": rev},
            hint="give a branch, tag or commit id, optionally with ~N, ^N or @{...} (HEAD~1, main@{yesterday})",
        )
    return rev


def not_a_repository(path: Path) -> RepoError:
    """The error for a folder outside any git work tree."""
    return RepoError(
        f"{path} is not inside a git repository",
        path=path,
        hint="capsule history comes from git: run `git init` and commit the .moss/ folder",
    )


def run_git(cwd: Path, args: Sequence[str], *, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS` run in `cwd`, its output captured, whatever its exit status. Raises RepoError
    when git cannot run at all."""
    try:
        return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    except OSError as exc:
        raise RepoError(f"git {args[0]} could not run: {exc}") from None


def _failed(args: Sequence[str], done: subprocess.CompletedProcess[bytes]) -> RepoError:
    stderr = done.stderr.decode("utf-8", "replace").strip()
    return RepoError(f"git {args[0]} failed: {stderr or f'exit status {done.returncode}'}", details={"status": done.returncode})


def output(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """What `git ARGS` prints, run in `cwd` (with `stdin` on its input). Raises RepoError when
    git cannot run or fails, with what it said."""
    done = run_git(cwd, args, stdin=stdin)
    if done.returncode != 0:
        raise _failed(args, done)
    return done.stdout


def _rev_parse_args(rev: str) -> list[str]:
    # git itself resolves the revision (walking `~N` through parents is git's work, not ours);
    # `^{commit}` refuses a tag of a tree and the like.
    return ["--verify", "--quiet", "--end-of-options", f"{check_revision(rev)}^{{commit}}"]


def _no_commit(rev: str, done: subprocess.CompletedProcess[bytes]) -> NotFound:
    reason = done.stderr.decode("utf-8", "replace").strip() or f"git rev-parse exited {done.returncode}"
    return NotFound(f"no commit {rev!r} in this repository", details={"rev": rev, "reason": reason})


def locate(path: Path, rev: str) -> tuple[Path, str]:
    """The top of the work tree holding `path`, and the full commit id `rev` names there, from
    one git process. Raises InvalidRequest INVALID_REVISION (see `check_revision`), RepoError
    outside a work tree, NotFound when `rev` names no commit."""
    args = ["rev-parse", "--show-toplevel", *_rev_parse_args(rev)]
    done = run_git(path, args) if path.is_dir() else None
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines() if done is not None else []
    if done is None or not lines:
        raise not_a_repository(path)  # git printed no work tree: there is none
    if done.returncode != 0 or len(lines) != 2:
        raise _no_commit(rev, done)
    return Path(lines[0]), lines[1]


def resolve(top: Path, rev: str) -> str:
    """The full commit id `rev` names in the repository at `top`. Raises InvalidRequest
    INVALID_REVISION (see `check_revision`), NotFound when it names no commit."""
    done = run_git(top, ["rev-parse", *_rev_parse_args(rev)])
    if done.returncode != 0:
        raise _no_commit(rev, done)
    return done.stdout.decode("ascii").strip()


def relpath(top: Path, path: Path) -> str:
    """`path` relative to the work tree at `top`, with forward slashes."""
    top = top.resolve()
    try:
        return PurePosixPath(path.resolve().relative_to(top)).as_posix()
    except ValueError:
        raise RepoError(f"{path} is outside the repository at {top}", path=path) from None


def folder_pathspec(under: str) -> list[str]:
    """The pathspec of everything below the folder `under` (none for the top): with a slash, so
    `top` leaves out its sibling `topper`."""
    return [f"{under.rstrip('/')}/"] if under.strip("/") else []


def list_files(top: Path, commit: str, under: str) -> list[str]:
    """Paths of the files below a folder at a commit (recursive), sorted."""
    found = []
    for entry in output(top, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *folder_pathspec(under)).split(b"\0"):
        meta, tab, path = entry.partition(b"\t")
        if tab and meta.split(b" ")[1] == b"blob":
            found.append(path.decode("utf-8", "surrogateescape"))
    return sorted(found)


def grep_files(top: Path, commit: str, pattern: str, under: str) -> list[str]:
    """Paths below `under` whose content at `commit` matches a fixed string."""
    args = ["grep", "-l", "-z", "-F", "-e", pattern, commit, "--", under]
    done = run_git(top, args)
    if done.returncode == 1:
        return []  # git grep exits 1 when nothing matched
    if done.returncode != 0:
        raise _failed(args, done)
    prefix = f"{commit}:"
    return sorted(name.removeprefix(prefix) for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name)


def show_files(top: Path, wanted: Sequence[tuple[str, str]]) -> list[bytes | None]:
    """The bytes of many (commit, relpath) files at once, in order; None where a commit has no
    such file (or a folder there). One `git cat-file --batch` answers them all."""
    if any("\n" in commit or "\n" in path for commit, path in wanted):
        # A batch line cannot hold a newline: such a file is asked for alone.
        return [_show_file(top, commit, path) for commit, path in wanted]
    return read_objects(top, [f"{commit}:{path}" for commit, path in wanted])


def _show_file(top: Path, commit: str, path: str) -> bytes | None:
    done = run_git(top, ["cat-file", "blob", f"{commit}:{path}"])
    return done.stdout if done.returncode == 0 else None  # git refuses a missing path or a folder


def read_objects(top: Path, specs: Sequence[str]) -> list[bytes | None]:
    """The blob each object name in `specs` (an id, or `commit:path`) names, in order, from one
    `git cat-file --batch`; None where one names nothing or no blob."""
    if not specs:
        return []
    out = output(top, "cat-file", "--batch", stdin="".join(f"{spec}\n" for spec in specs).encode("utf-8", "surrogateescape"))
    found: list[bytes | None] = []
    at = 0
    for _ in specs:
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        at = end + 1
        if len(header) == 3 and header[2].isdigit() and OBJECT_ID.fullmatch(header[0].decode("ascii", "replace")):
            size = int(header[2])
            found.append(out[at : at + size] if header[1] == b"blob" else None)
            at += size + 1  # the object, then a newline
        else:
            found.append(None)  # "<commit>:<path> missing" (or ambiguous): no such file then
    return found

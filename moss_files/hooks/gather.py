"""What the hooks read and keep: the hook's event on stdin, the git work tree's state, the tail
of a transcript, the per-session state and the log of failures. Edge layer.

Git is asked through one `git status` process, not GitPython: a hook is a process of its own
whose whole budget is a few hundred milliseconds, and loading GitPython alone costs a good
part of it (as `moss_files.scaffold` runs git for the same reason). The per-session state lives
in `.moss/run/hooks/` and the log in `.moss/run/hooks.log`: per machine, git-ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from moss_files.foundation import fs
from moss_files.foundation.errors import MossError

MAX_EVENT_BYTES = 1024 * 1024
TRANSCRIPT_TAIL_BYTES = 2 * 1024 * 1024
STATE_DIR = Path(".moss") / "run" / "hooks"
LOG_FILE = Path(".moss") / "run" / "hooks.log"
LOG_MAX_BYTES = 1024 * 1024
STATE_KEEP_SECONDS = 14 * 24 * 3600
GIT_TIMEOUT = 5.0
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree: what a first commit is compared with
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def read_event(stream: BinaryIO | None) -> dict[str, Any]:
    """The hook's event: the JSON object on stdin ({} when there is none, as when a person
    runs the command in a terminal). Raises ValueError for anything but a JSON object."""
    if stream is None or stream.isatty():
        return {}
    data = stream.read(MAX_EVENT_BYTES + 1)
    if len(data) > MAX_EVENT_BYTES:
        raise ValueError(f"the event on stdin is over {MAX_EVENT_BYTES} bytes")
    if not data.strip():
        return {}
    event = json.loads(data)
    if not isinstance(event, dict):
        raise ValueError("the event on stdin is not a JSON object")
    return event


# --------------------------------------------------------------------------- git


@dataclass(frozen=True, slots=True)
class GitState:
    """The work tree as `git status` sees it: branch, HEAD, and the changed paths."""

    branch: str | None = None
    head: str | None = None
    changed: tuple[str, ...] = ()


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else None


def git_state(root: Path) -> GitState | None:
    """The work tree's branch, HEAD and changed paths (tracked and untracked); None outside a
    work tree or without git."""
    out = _git(root, "status", "--porcelain=v2", "--branch", "--untracked-files=all", "-z")
    if out is None:
        return None
    branch = head = None
    changed: list[str] = []
    records = out.split("\0")
    index = 0
    while index < len(records):
        record = records[index]
        index += 1
        if record.startswith("# branch.head "):
            branch = record[len("# branch.head ") :]
        elif record.startswith("# branch.oid "):
            head = record[len("# branch.oid ") :]
        elif record.startswith(("1 ", "u ")):
            changed.append(record.split(" ", 8 if record[0] == "1" else 10)[-1])
        elif record.startswith("2 "):
            changed.append(record.split(" ", 9)[-1])
            index += 1  # the rename's source path follows
        elif record.startswith("? "):
            changed.append(record[2:])
    return GitState(branch if branch != "(detached)" else None, head if head != "(initial)" else None, tuple(changed))


def head_commit(root: Path) -> str | None:
    """The commit HEAD names, read from the repository's files (no git process: this runs at
    every session start); None before the first commit, outside a repository, or when the
    layout is one this reader does not know (then the stop hook sees no commits)."""
    git = None
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            git = folder / ".git"
            break
    if git is None:
        return None
    try:
        if git.is_file():  # a worktree or submodule: `gitdir: PATH`
            pointer = git.read_text(encoding="utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return None
            git = (git.parent / pointer[len("gitdir:") :].strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[len("ref:") :].strip()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
        for base in (git, common):
            if (base / ref).is_file():
                return (base / ref).read_text(encoding="utf-8").strip() or None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                parts = line.split(" ", 1)
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        return None
    return None


def committed_paths(root: Path, since: str, until: str) -> list[str]:
    """The paths the commits between two revisions changed ([] when git cannot tell)."""
    out = _git(root, "diff", "--name-only", "-z", since, until)
    return [path for path in (out or "").split("\0") if path]


def inbox_stamp(root: Path) -> list[int]:
    """What changes whenever a message reaches the inbox, read with two stats: inbox.md's
    (mtime, size, inode) and the inbox folder's (mtime, inode); zeros for what is missing."""
    stamp: list[int] = []
    for name in ("inbox.md", "inbox"):
        try:
            st = os.stat(root / ".needlecast" / name)
            stamp += [st.st_mtime_ns, st.st_size if name == "inbox.md" else 0, st.st_ino]
        except OSError:
            stamp += [0, 0, 0]
    return stamp


def mtime_ns(path: Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def signature(path: Path) -> list[int] | None:
    """A file's (mtime, size), to tell whether it changed; None when it is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


# --------------------------------------------------------------------------- transcripts


def transcript_tail(path: str | None, *, max_bytes: int = TRANSCRIPT_TAIL_BYTES) -> list[str]:
    """The last complete lines of a transcript file, up to `max_bytes` ([] when unreadable)."""
    if not path:
        return []
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - max_bytes))
            data = handle.read(max_bytes)
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[1:] if size > max_bytes else lines  # the first line may be cut


# --------------------------------------------------------------------------- per-session state


@dataclass
class SessionState:
    """What a hook remembers of one agent session between its hooks (per machine): when it
    started (a file modified since was changed in it), HEAD then, CURRENT.md's signature then,
    the inbox's messages (hashed) at the last prompt, the last reminder, the last checkpoint."""

    session: str
    started: float = 0.0
    head: str | None = None
    current: list[int] | None = None
    inbox_keys: list[str] = field(default_factory=list)
    inbox_stamp: list[int] | None = None
    reminded: str | None = None
    checkpoint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "started": self.started,
            "head": self.head,
            "current": self.current,
            "inbox_keys": self.inbox_keys,
            "inbox_stamp": self.inbox_stamp,
            "reminded": self.reminded,
            "checkpoint": self.checkpoint,
        }


def session_name(session_id: Any) -> str:
    """A file name for an agent's session id (`default` without one)."""
    text = str(session_id or "").strip()
    return _UNSAFE.sub("_", text)[:100] or "default"


def user_state_dir() -> Path:
    """The user's own state folder for moss-files (XDG_STATE_HOME, else ~/.local/state)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "moss-files"


def state_dir(root: Path) -> Path:
    """Where a workspace's hook state lives: `.moss/run/hooks/` (git-ignored), or, in a
    workspace without `.moss/` (a cstack-only one), the user's state folder: a hook never makes
    a folder the project did not have."""
    if (root / ".moss").is_dir():
        return root / STATE_DIR
    digest = hashlib.blake2b(str(root).encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
    return user_state_dir() / "hooks" / digest


def state_path(root: Path, session_id: Any) -> Path:
    return state_dir(root) / f"{session_name(session_id)}.json"


def load_state(root: Path, session_id: Any) -> SessionState | None:
    """The session's state, None when there is none (or it cannot be read)."""
    try:
        data = json.loads(fs.read_bytes(state_path(root, session_id), max_bytes=8 * 1024 * 1024))
    except (OSError, ValueError, MossError):
        return None
    if not isinstance(data, Mapping):
        return None
    state = SessionState(session=str(data.get("session") or session_name(session_id)))
    state.started = float(data.get("started") or 0.0)
    state.head = data.get("head") if isinstance(data.get("head"), str) else None
    current = data.get("current")
    state.current = [int(v) for v in current] if isinstance(current, list) and len(current) == 2 else None
    keys = data.get("inbox_keys")
    state.inbox_keys = [str(k) for k in keys] if isinstance(keys, list) else []
    stamp = data.get("inbox_stamp")
    state.inbox_stamp = [int(v) for v in stamp] if isinstance(stamp, list) and all(isinstance(v, int) for v in stamp) else None
    state.reminded = data.get("reminded") if isinstance(data.get("reminded"), str) else None
    state.checkpoint = data.get("checkpoint") if isinstance(data.get("checkpoint"), str) else None
    return state


def save_state(root: Path, state: SessionState) -> None:
    """Write the session's state (atomically; the folder is made when missing)."""
    path = state_path(root, state.session)
    path.parent.mkdir(parents=True, exist_ok=True)
    fs.write_atomic(path, json.dumps(state.to_dict(), separators=(",", ":")).encode("utf-8"))


def prune_states(root: Path, now: float, keep_seconds: float = STATE_KEEP_SECONDS) -> None:
    """Remove the state of sessions not heard of for `keep_seconds`."""
    folder = state_dir(root)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.name.endswith(".json") and now - entry.stat().st_mtime > keep_seconds:
                os.unlink(entry.path)
        except OSError:
            continue


# --------------------------------------------------------------------------- the log


def log_failure(root: Path | None, event_name: str, error: BaseException) -> None:
    """Note a hook's failure in `.moss/run/hooks.log` of the workspace (else, outside one or in
    one without `.moss/`, in the user's state folder); never raises: a hook must not fail the
    session over its own log."""
    folder = (root / LOG_FILE).parent if root is not None and (root / ".moss").is_dir() else user_state_dir()
    path = folder / LOG_FILE.name
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = json.dumps({"time": stamp, "hook": event_name, "error": type(error).__name__, "message": str(error)[:500]}, ensure_ascii=False)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))  # one old generation is kept
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except OSError:
        pass

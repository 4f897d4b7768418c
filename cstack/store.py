"""Where the memory files live and how they are read and written. Edge layer: the only cstack
module that touches the file system.

Every write is a read-modify-write through `moss_files.foundation.fs.modify`: it holds the file's lock
(so cooperating writers, in any process, take turns), re-runs the change on the new content
when the file changed between read and write (a hand edit, which takes no lock), and replaces
the file atomically. The change itself is a pure function of the file's text.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple, TypeVar

from moss_files.foundation import document, fs
from moss_files.foundation.errors import MossError, NotFound
from moss_files.foundation.fs import Snapshot
from moss_files.foundation.ids import format_time

STACK_DIR = ".cstack"
CURRENT = "CURRENT.md"
PLAN = "PLAN.md"
MEMORY = "MEMORY.md"
FILES = (CURRENT, PLAN, MEMORY)
FORMAT_KINDS = {CURRENT: "current", PLAN: "plan", MEMORY: "memory"}  # their kinds in foundation.formats

R = TypeVar("R")


class Loaded(NamedTuple):
    """A memory file's text as read; an absent file reads as empty text."""

    path: Path
    text: str
    exists: bool
    modified: str | None  # the file's mtime, RFC 3339 UTC


def stack_dir(root: Path) -> Path:
    """The `.cstack/` folder of the workspace at `root`."""
    return Path(root) / STACK_DIR


def has_stack(root: Path) -> bool:
    """Whether the workspace has a `.cstack/` folder."""
    return stack_dir(root).is_dir()


def require_stack(root: Path) -> Path:
    """The `.cstack/` folder. Raises NotFound when the workspace has none."""
    folder = stack_dir(root)
    if not folder.is_dir():
        raise NotFound(f"no {STACK_DIR}/ folder in {root}", path=folder, hint="run `cstack init` first")
    fs.check_confined(folder)
    return folder


def file_path(root: Path, name: str) -> Path:
    """The path of one memory file (CURRENT.md, PLAN.md or MEMORY.md)."""
    return stack_dir(root) / name


def read_file(root: Path, name: str) -> Loaded:
    """Read one memory file. Raises InvalidDocument for a file that is not UTF-8 text.

    For reading only: a change goes through `update`, which reads the file again under its lock
    and checks it did not change before writing.
    """
    path = file_path(root, name)
    data = fs.read_if_present(path)  # no fingerprint: nothing is written back from this read
    if data is None:
        return Loaded(path, "", False, None)
    text, _bom = document.decode(data, path)
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        mtime = None
    modified = format_time(datetime.fromtimestamp(mtime, UTC)) if mtime is not None else None
    return Loaded(path, text, True, modified)


def template_text(name: str) -> str:
    """The toolkit's template for a memory file."""
    from importlib import resources  # here: only a missing file needs it, and it costs milliseconds to load

    node = resources.files("moss_files.templates").joinpath("cstack", name)
    try:
        return node.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MossError(f"the toolkit's template {name} is missing; reinstall moss-files") from None


def update(root: Path, name: str, change: Callable[[str], tuple[str | None, R]], *, create: bool = True) -> R:
    """Apply `change` to a memory file's text under its lock and write the result atomically.

    `change(text)` returns `(new_text or None for no write, result)`; it may run more than once
    (when the file changes under it) and the last run's result is returned. A missing file
    starts from its template when `create` is true.

    Raises NotFound (no `.cstack/`, or a missing file with `create` false), InvalidDocument
    (the file is not UTF-8 text), Conflict STALE_WRITE / LOCK_TIMEOUT, and whatever `change`
    raises (the file is then left as it was).
    """
    require_stack(root)
    path = file_path(root, name)
    outcome: list[R] = []

    def step(snapshot: Snapshot) -> bytes | None:
        if snapshot.data is None:
            if not create:
                raise NotFound(f"no {name} in {STACK_DIR}/", path=path, hint="run `cstack init`")
            text, bom = template_text(name), False
        else:
            text, bom = document.decode(snapshot.data, path)
        new_text, result = change(text)
        outcome[:] = [result]
        if new_text is None:
            return None
        data = document.encode(new_text, bom)
        # A missing file is created even when the template needed no change.
        return data if snapshot.data is None or data != snapshot.data else None

    # kind: an edit of a file of an older format writes it at the current version.
    fs.modify(path, step, kind=FORMAT_KINDS[name], relpath=f"{STACK_DIR}/{name}")
    return outcome[0]

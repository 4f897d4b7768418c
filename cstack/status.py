"""What CURRENT.md says: the `cstack status` use case and the reader other packages use.

Shell layer. Kept apart from `service` so that `cstack status`, the command an agent runs at the
start of every session, loads CURRENT.md's parser only, not PLAN.md's or MEMORY.md's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cstack import current, store
from cstack.current import Current
from moss_files.foundation import conflicts
from moss_files.foundation.errors import error_body

if TYPE_CHECKING:
    from moss_files.foundation.context import Context


class Status(NamedTuple):
    """What CURRENT.md says, where it is, and when it last changed."""

    exists: bool
    path: str
    current: Current
    last_modified: str | None  # CURRENT.md's mtime, RFC 3339 UTC


def status_to_dict(status: Status) -> dict[str, Any]:
    """The JSON shape of `cstack status`."""
    return {
        "exists": status.exists,
        "path": status.path,
        **current.current_to_dict(status.current),
        "last_modified": status.last_modified,
    }


def read_status(root: Path) -> Status:
    """CURRENT.md's state (the empty state when the file or `.cstack/` is missing).

    Raises InvalidDocument when the file is malformed.
    """
    return _status_of(store.read_file(Path(root), store.CURRENT))


def _status_of(loaded: store.Loaded) -> Status:
    return Status(loaded.exists, str(loaded.path), current.parse_current(loaded.text, loaded.path), loaded.modified)


def conflicted_files(root: Path) -> list[dict[str, Any]]:
    """The error bodies of the memory files that hold git conflict markers (MERGE_CONFLICT
    with file and line), in CURRENT, PLAN, MEMORY order."""
    return _conflicts_in([store.read_file(Path(root), name) for name in store.FILES])


def _conflicts_in(files: list[store.Loaded]) -> list[dict[str, Any]]:
    found = []
    for loaded in files:
        line = conflicts.first_marker_line(loaded.text)
        if line is not None:
            found.append(error_body(conflicts.conflict_error(loaded.path, line))["error"])
    return found


def show_status(ctx: Context) -> dict[str, Any]:
    """`cstack status`: CURRENT.md's state with its path and last change, and `problems`: the
    memory files an unfinished git merge left with conflict markers (CURRENT.md's own fields
    read as empty when it is one of them).

    Raises NotFound when the workspace has no `.cstack/`, InvalidDocument when CURRENT.md is
    malformed.
    """
    store.require_stack(ctx.root)
    files = {name: store.read_file(ctx.root, name) for name in store.FILES}  # each read once
    problems = _conflicts_in(list(files.values()))
    if any(Path(problem["path"]).name == store.CURRENT for problem in problems):
        path = store.file_path(ctx.root, store.CURRENT)
        status = Status(True, str(path), current.parse_current("", path), None)
    else:
        status = _status_of(files[store.CURRENT])
    return {**status_to_dict(status), "problems": problems}

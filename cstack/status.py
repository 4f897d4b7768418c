"""What CURRENT.md says: the `cstack status` use case and the reader other packages use.

Shell layer. Kept apart from `service` so that `cstack status`, the command an agent runs at the
start of every session, loads CURRENT.md's parser only, not PLAN.md's or MEMORY.md's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cstack import current, store
from cstack.current import Current

if TYPE_CHECKING:
    from moss_files.foundation.context import Context


@dataclass(frozen=True, slots=True)
class Status:
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
    loaded = store.read_file(Path(root), store.CURRENT)
    return Status(loaded.exists, str(loaded.path), current.parse_current(loaded.text, loaded.path), loaded.modified)


def show_status(ctx: Context) -> dict[str, Any]:
    """`cstack status`: CURRENT.md's state with its path and last change.

    Raises NotFound when the workspace has no `.cstack/`, InvalidDocument when CURRENT.md is
    malformed.
    """
    store.require_stack(ctx.root)
    return status_to_dict(read_status(ctx.root))

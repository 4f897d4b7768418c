"""Finding the workspace a command acts on, the way git finds its repository.

Edge layer (stats the file system). A workspace is a folder holding at least one of the
toolkit's folders (`.moss/`, `.cstack/`, `.needlecast/`). Discovery walks up from the current
directory; an explicit root (the CLIs' `--root`, or the MOSS_ROOT environment variable read by
the entry points) wins over discovery.
"""

from __future__ import annotations

from pathlib import Path

from moss_files.foundation.errors import InvalidRequest, RepoError

MARKERS = (".moss", ".cstack", ".needlecast")
ROOT_ENV = "MOSS_ROOT"


def find_workspace(start: Path | None = None, explicit: Path | str | None = None) -> Path:
    """Return the workspace root for `start` (default: the current directory).

    Raises RepoError WORKSPACE_NOT_FOUND when no folder from `start` up to `/` holds a marker,
    and InvalidRequest when an explicit root is not a directory.
    """
    if explicit is not None and str(explicit) != "":
        root = Path(explicit).expanduser()
        if not root.is_dir():
            raise InvalidRequest(f"workspace root {root} is not a directory", path=root)
        return root.resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_workspace(folder):
            return folder
    raise RepoError(
        f"no workspace found in {here} or any parent (looked for {', '.join(MARKERS)})",
        code="WORKSPACE_NOT_FOUND",
        status=404,  # the caller's problem (a wrong folder), not the server's
        path=here,
        hint="run `moss init` (or `cstack init`) in the project, or pass --root",
    )


def is_workspace(folder: Path) -> bool:
    """True when `folder` holds one of the toolkit's folders."""
    return any((folder / marker).is_dir() for marker in MARKERS)


def require_workspace(root: Path) -> Path:
    """`root` (an explicit root, which `find_workspace` takes as given) when it is a workspace.

    Raises RepoError WORKSPACE_NOT_FOUND for a folder holding none of the toolkit's folders:
    a long-running server there would make it one with its own files (an audit log, a cache).
    """
    if is_workspace(root):
        return root
    raise RepoError(
        f"{root} is not a workspace (it holds none of {', '.join(MARKERS)})",
        code="WORKSPACE_NOT_FOUND",
        status=404,
        path=root,
        hint=f"run `moss init {root}` first, or name the workspace itself",
    )


def init_root(start: Path | None = None, explicit: Path | str | None = None) -> Path:
    """Where `init` commands create a workspace: the explicit root, else an existing workspace
    above `start`, else the top of the enclosing git work tree, else `start` itself."""
    if explicit is not None and str(explicit) != "":
        return find_workspace(start, explicit)
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).is_dir() for marker in MARKERS):
            return folder
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here

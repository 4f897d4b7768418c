"""Finding the workspace a command acts on, the way git finds its repository.

Edge layer (stats the file system). A workspace is a folder holding at least one of the
toolkit's folders (`.moss/`, `.cstack/`, `.needlecast/`). Discovery walks up from the current
directory; an explicit root (the CLIs' `--root` or `--project`, or the MOSS_ROOT environment
variable, or Moe's MOE_PROJECT_PATH, read by the entry points) wins over discovery. An explicit
root that is one word (`shop`, not `./shop`) may name a project of the registry
(`foundation.projects`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from moss_files.foundation.errors import InvalidRequest, RepoError

MARKERS = (".moss", ".cstack", ".needlecast")
ROOT_ENV = "MOSS_ROOT"
MOE_ROOT_ENV = "MOE_PROJECT_PATH"  # Moe's name for the project root; MOSS_ROOT wins when both are set
ROOT_ENVS = (ROOT_ENV, MOE_ROOT_ENV)


def root_from_env(environ: Mapping[str, str]) -> str | None:
    """The explicit root the environment names (MOSS_ROOT, else MOE_PROJECT_PATH), or None."""
    return next((environ[name] for name in ROOT_ENVS if environ.get(name)), None)


def current_folder() -> Path:
    """The current directory. Raises RepoError WORKSPACE_NOT_FOUND when it no longer exists:
    removed under the shell that stands in it, as a worktree or a temporary folder often is."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise RepoError(
            "the current directory no longer exists (it was removed after the shell entered it)",
            code="WORKSPACE_NOT_FOUND",
            status=404,
            hint="cd into the project again, or pass --root",
        ) from None


def find_workspace(start: Path | None = None, explicit: Path | str | None = None) -> Path:
    """Return the workspace root for `start` (default: the current directory).

    An explicit root is a folder, or the name of a registered project (see `explicit_root`).

    Raises RepoError WORKSPACE_NOT_FOUND when no folder from `start` up to `/` holds a marker,
    InvalidRequest when an explicit root is not a directory, NotFound PROJECT_NOT_FOUND for a
    name that is neither a folder nor a registered project.
    """
    if explicit is not None and str(explicit) != "":
        return explicit_root(str(explicit))
    here = (start or current_folder()).resolve()
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
    here = (start or current_folder()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).is_dir() for marker in MARKERS):
            return folder
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def explicit_root(text: str, *, home: Path | None = None) -> Path:
    """The folder an explicit root names: a path, or one word that names a project of the
    registry (`~/.moss/projects.json`, then Moe's `~/.moe/projects.json`).

    A word that is both a folder here and a project registered elsewhere is refused
    (AMBIGUOUS_ADDRESSING): the folder's full path says the folder. The text is read as the
    CLIs' `--root` hands it over, as a path (`./web` and `web/` are `web`). Raises InvalidRequest for a path that is
    no directory, NotFound PROJECT_NOT_FOUND for a word that is neither, NotFound when a
    registered project's folder is gone, InvalidDocument when our registry cannot be read.
    """
    root = Path(text).expanduser()
    here = root if root.is_absolute() else Path.cwd() / root
    text = str(Path(text))  # as typer hands --root over: `./web` is `web`, in every entry point alike
    if "/" not in text and _is_project_name(text):
        from moss_files.foundation import projects  # here: only a one-word root reads the registry
        from moss_files.foundation.errors import NotFound

        home = home or Path.home()
        registry = projects.read_registry(home)
        found = registry.named(text)
        if found is not None:
            target = Path(found.path).expanduser()
            if here.is_dir() and here.resolve() != target.resolve():
                raise InvalidRequest(
                    f"{text!r} is both a folder here and a registered project at {found.path}",
                    code="AMBIGUOUS_ADDRESSING",
                    details={"folder": str(here.resolve()), "project": found.path, "candidates": [str(here.resolve()), found.path]},
                    hint=f"give the folder's full path ({here.resolve()}), or the project's",
                )
            if not target.is_dir():
                registered = projects.moe_registry_path(home) if found.source == "moe" else projects.registry_path(home)
                raise NotFound(
                    f"the project {text!r} is registered at {found.path}, which is not a folder (any more)",
                    code="PROJECT_NOT_FOUND",
                    path=registered,
                    details={"name": text, "path": found.path, "source": found.source},
                    hint="`moss projects add PATH --name NAME` registers its new place",
                )
            return target.resolve()
        if not here.is_dir():
            raise projects.unknown_name(text, registry, home)
    if not here.is_dir():
        raise InvalidRequest(f"workspace root {root} is not a directory", path=root)
    return here.resolve()


def _is_project_name(text: str) -> bool:
    """`projects.is_name`, loaded only for a root without a separator (a path never names a
    project, and most roots are paths: their commands do not load the registry's module)."""
    from moss_files.foundation import projects

    return projects.is_name(text)

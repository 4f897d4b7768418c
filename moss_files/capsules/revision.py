"""A capsule as it was at a git revision (`moss fetch --at`, the web view's diffs).

Shell layer: git is read through `foundation.gitcli` alone, its command line without GitPython,
since this reads one commit and its start-up is most of what a command pays; the capsule model
parses what the commit held. Returns the shape `moss fetch --at --json` prints.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from moss_files.capsules import model as core
from moss_files.capsules.model import Capsule
from moss_files.capsules.store import CapsuleStore
from moss_files.foundation import document, gitcli
from moss_files.foundation.arguments import required
from moss_files.foundation.context import Context
from moss_files.foundation.errors import NotFound


def fetch_at(
    ctx: Context,
    *,
    rev: str | None,
    id: str | None = None,
    workspace: str | None = None,
    name: str | None = None,
    include_text: bool = True,
    include_deleted: bool = False,
) -> dict[str, Any]:
    """The capsule as it was at revision `rev`: the fetch shape plus `at: {rev, commit, path}`.

    Raises NotFound (no such revision, or no such capsule then), RepoError.
    """
    rev_text = required(rev, "rev")
    where = core.address(id, workspace, name)
    # git's command line alone (no GitPython): this is one commit's reading, and start-up is
    # most of its cost.
    top, commit = gitcli.locate(ctx.root, rev_text)
    base_rel = gitcli.relpath(top, CapsuleStore(ctx.root).base)
    if where.name_norm is not None:
        folder = f"{base_rel}/{core.workspace_dir(where.workspace_norm)}"
        candidates = [f"{folder}/{core.slot_filename(where.name_norm)}"]
        if include_deleted:
            candidates += gitcli.list_files(top, commit, f"{folder}/{core.DELETED_DIR}")
    else:
        assert where.id is not None
        if not core.is_capsule_id(where.id):
            candidates = []
        else:
            named = [p for p in gitcli.list_files(top, commit, base_rel) if where.id in p.rsplit("/", 1)[-1]]
            candidates = named + gitcli.grep_files(top, commit, where.id, base_rel)
    matches: list[tuple[Capsule, str]] = []
    unique = list(dict.fromkeys(candidates))
    for candidate, data in zip(unique, gitcli.show_files(top, [(commit, path) for path in unique]), strict=True):
        if data is None:
            continue
        doc = document.parse_bytes(data, f"{rev_text}:{candidate}")
        relpath = PurePosixPath(PurePosixPath(candidate).relative_to(base_rel).as_posix())
        found = core.parse_capsule(doc, relpath, mtime_ms=0, path=f"{rev_text}:{candidate}")
        wanted = found.id == where.id if where.id is not None else found.name_norm == where.name_norm
        if wanted and (include_deleted or not found.deleted):
            matches.append((found, candidate))
    if not matches:
        raise NotFound(f"capsule {where.shown()} not found at {rev_text}", details={"rev": rev_text, "commit": commit})
    capsule_at, at_path = max(matches, key=lambda m: (not m[0].deleted, m[0].updated_ms))
    data_out = core.capsule_to_dict(capsule_at, include_text=include_text)
    data_out["at"] = {"rev": rev_text, "commit": commit, "path": at_path}
    return data_out

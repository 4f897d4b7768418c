"""Capsule history from git: the committed versions of a capsule (a capsule as it was at one
revision is `revision`'s).

Shell layer: git is read only through `foundation.gitrepo` (which loads GitPython, so this
module is imported only by the commands that need history); the capsule model parses what
each commit held. Returns the shape `moss history --json` prints.
"""

from __future__ import annotations

import time
from pathlib import Path, PurePosixPath
from typing import Any

from moss_files.capsules import model as core
from moss_files.capsules.store import CapsuleStore, StoredCapsule
from moss_files.foundation import document, gitrepo
from moss_files.foundation.arguments import count
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError, NotFound
from moss_files.index import pathhistory

# The workspace's cache folder (as `index.database.CACHE_DIR`, not imported: the search index's
# modules are not needed here). The history record lives beside the search index, git-ignored.
CACHE_DIR = Path(".moss") / "cache"
# What the record keeps of a capsule file's blob: the id `_capsule_id_in` reads. Give it a new
# number whenever that reading changes, so no id read the old way is served again.
ID_DERIVATION = "capsule-id/1"


def history(
    ctx: Context,
    *,
    id: str | None = None,
    workspace: str | None = None,
    name: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """The committed versions of a capsule, newest first, following its moves (a delete is one).

    Addressed by id, only versions of that capsule are listed; by name, every capsule that held
    the name. Returns `{id?, workspace, name?, path, dirty, versions: [{commit, date, author,
    email, summary, path, id, removed}]}`. Raises RepoError outside a git repository, NotFound.
    """
    where = core.address(id, workspace, name)
    most = count(limit, "limit", default=0, minimum=0)  # 0: every version
    store_ = CapsuleStore(ctx.root)
    try:
        found: StoredCapsule | None = store_.find(where, include_deleted=True)
    except NotFound:
        if where.id is not None:
            raise
        found = None
    if found is not None:
        path = found.path
    else:
        assert where.name_norm is not None
        path = store_.base / core.workspace_dir(where.workspace_norm) / core.slot_filename(where.name_norm)
    repo = gitrepo.open_repo(ctx.root)
    relpath = gitrepo.relpath_in_repo(repo, path)
    # By name every version is shown, so the walk can stop at the limit; by id some are skipped.
    versions, read = _versions(ctx, repo, relpath, limit=most if most and where.id is None else None, base_rel=gitrepo.relpath_in_repo(repo, store_.base))
    rows: list[dict[str, Any]] = []
    for version, (present, blob_id) in zip(versions, read, strict=True):
        if where.id is not None and blob_id not in (where.id, None):
            continue
        # A commit that moved the file away (a soft delete) shows as removed from this path.
        rows.append({**gitrepo.version_to_dict(version), "id": blob_id, "removed": not present})
        if most and len(rows) >= most:
            break
    dirty = gitrepo.changed_in_work_tree(repo, relpath) if found is not None else False
    data: dict[str, Any] = {}
    if found is not None:
        data.update(id=found.capsule.id, workspace=found.capsule.workspace, name=found.capsule.name)
    else:
        data.update(workspace=where.workspace_norm, name=where.name_norm)
    data.update(path=relpath, dirty=dirty, versions=rows)
    return data


def keep_record(root: Path) -> str:
    """Bring the workspace's path-history record up to HEAD (the first time: build it from the
    whole history), as `moss serve --http` does when it starts, so that the first `moss
    history` finds it made. Returns a line for the daemon's log; never raises."""
    started = time.monotonic()
    try:
        repo = gitrepo.open_repo(root)
        record = pathhistory.PathHistory(repo, root / CACHE_DIR, gitrepo.relpath_in_repo(repo, CapsuleStore(root).base))
        head = record.bring_up_to_date()
    except (MossError, pathhistory.Unavailable) as exc:
        return f"history record not kept ({exc}); moss history asks git"
    if head is None:
        return "history record: no commits yet"
    return f"history record up to commit {head[:12]} ({time.monotonic() - started:.1f} s)"


def _versions(ctx: Context, repo: Any, relpath: str, *, limit: int | None, base_rel: str) -> tuple[list[gitrepo.Version], list[tuple[bool, str | None]]]:
    """The versions of the file at `relpath` as `git log --follow` lists them (at most
    `limit`), each with whether the file was there after it and the capsule id it held.

    Read from the workspace's history record (`index.pathhistory`), which keeps both;
    where the record cannot answer (outside the capsules folder, a repository with
    replacement refs, an unwritable cache folder), from git itself: the same answer, slower."""
    record = pathhistory.PathHistory(repo, ctx.root / CACHE_DIR, base_rel)
    try:
        touches = record.history(relpath, limit=limit, show_root=gitrepo.shows_root_commits(repo))
        return [touch.version for touch in touches], _ids_of(repo, record, touches, base_rel)
    except pathhistory.Unavailable:
        pass
    versions = gitrepo.file_history(repo, relpath, limit=limit)
    contents = gitrepo.show_files(repo, [(version.commit, version.path) for version in versions])
    return versions, [_capsule_id_in(content, v.commit, v.path, base_rel) for v, content in zip(versions, contents, strict=True)]


def _ids_of(repo: Any, record: pathhistory.PathHistory, touches: list[pathhistory.Touch], base_rel: str) -> list[tuple[bool, str | None]]:
    """(present, capsule id) of each version: ids the record kept, the others read from their
    blobs (one `git cat-file --batch`) and kept for the next time."""
    keys = [(touch.blob, touch.version.path) for touch in touches if touch.blob is not None and touch.mode != _GITLINK]
    known = record.derived(ID_DERIVATION, keys)
    missing = [key for key in dict.fromkeys(keys) if key not in known]
    if missing:
        read = {}
        for (blob, path), data in zip(missing, gitrepo.read_blobs(repo, [blob for blob, _ in missing]), strict=True):
            read[(blob, path)] = _capsule_id_in(data, blob, path, base_rel)[1] if data is not None else None
        try:
            record.remember(ID_DERIVATION, read)
        except pathhistory.Unavailable:
            pass  # kept next time, maybe; the answer stands
        known.update(read)
    found: list[tuple[bool, str | None]] = []
    for touch in touches:
        if touch.blob is None or touch.mode == _GITLINK:
            found.append((False, None))  # removed from this path (a submodule is no file: as git cat-file says)
        else:
            found.append((True, known[(touch.blob, touch.version.path)]))
    return found


_GITLINK = "160000"


def _capsule_id_in(data: bytes | None, commit: str, path: str, base_rel: str) -> tuple[bool, str | None]:
    """Whether the file existed at the commit (`data` is its bytes then, or None), and the id of
    the capsule it held (None if unreadable)."""
    if data is None:
        return False, None
    try:
        relpath = Path(path).relative_to(base_rel).as_posix()
        doc = document.parse_bytes(data, f"{commit[:12]}:{path}")
        return True, core.parse_capsule(doc, PurePosixPath(relpath), mtime_ms=0).id
    except (MossError, ValueError):
        return True, None

"""Moss's bulk operations over capsule files: `bulk_update` and `bulk_delete`, each with a dry run.

Shell layer. Both take Moss's filters (at least one; all must match), touch live capsules only,
and are all or nothing: under the store's writer lock every capsule in scope is read, and every
change decided and checked, before the first write; a file that cannot be read stops the
operation before anything is written (it could be one the filters match). When a write fails
midway (a hand edit raced it, a file stands where a capsule must go), the files already written
are put back byte for byte and the error is raised with `details.rolled_back`. A dry run decides
exactly as a real run and writes nothing. Results are Moss's `{updated|deleted, message}`, plus
what was matched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from moss_files.capsules import filters
from moss_files.capsules import model as core
from moss_files.capsules.model import Capsule
from moss_files.capsules.service import now_ms
from moss_files.capsules.store import CapsuleStore, StoredCapsule, raise_first
from moss_files.foundation import document, fs
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, MossError

__all__ = ["Context", "bulk_delete", "bulk_update"]

Undo = Callable[[], None]


def _matching(store_: CapsuleStore, where: filters.BulkFilter) -> list[StoredCapsule]:
    scan = store_.scan(where.workspace, include_deleted=False)
    raise_first(scan.problems)
    return sorted((s for s in scan.capsules if where.matches(s.capsule)), key=lambda s: s.relpath.as_posix())


def _item(capsule: Capsule, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"id": capsule.id, "workspace": capsule.workspace}
    if capsule.name is not None:
        data["name"] = capsule.name
    data.update(extra)
    return data


def _message(verbs: tuple[str, str], count: int, where: filters.BulkFilter, tail: str = "", *, dry_run: bool) -> str:
    if count == 0:
        return "No active capsules matched the filters"
    noun = "capsule" if count == 1 else "capsules"
    text = f"{'Would ' + verbs[0] if dry_run else verbs[1]} {count} {noun} matching {where.describe()}"
    return text + (f"; set {tail}" if tail else "")


def bulk_update(
    ctx: Context,
    *,
    workspace: str | None = None,
    tag: str | None = None,
    name_prefix: str | None = None,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
    set_phase: str | None = None,
    set_role: str | None = None,
    set_tags: Sequence[str] | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Set phase, role or tags ('' and [] clear them) on every live capsule the filters match.

    A capsule that holds those values already is counted but not rewritten. Returns
    `{updated, changed, message, dry_run, items: [{id, workspace, name?, changed}]}`.
    Raises InvalidRequest (no filter, no change, a bad value), the error of an unreadable
    capsule file, and the write error (after rolling back) when a write fails.
    """
    where = filters.bulk_filter(workspace=workspace, tag=tag, name_prefix=name_prefix, run_id=run_id, phase=phase, role=role)
    changes = filters.bulk_changes(set_phase=set_phase, set_role=set_role, set_tags=set_tags)
    now = now_ms(ctx)
    store_ = CapsuleStore(ctx.root)
    with store_.writing():
        matched = _matching(store_, where)
        plan: list[tuple[StoredCapsule, Capsule]] = []
        for stored in matched:
            new = changes.apply(stored.capsule, now)
            if new is not None:
                core.check_fields(new)
                plan.append((stored, new))
        if not dry_run:
            _apply(plan, lambda stored, new: _rewrite(store_, stored, new))
    changed = {stored.capsule.id for stored, _new in plan}
    return {
        "updated": len(matched),
        "changed": len(plan),
        "message": _message(("update", "Updated"), len(matched), where, changes.describe(), dry_run=dry_run),
        "dry_run": dry_run,
        "items": [_item(stored.capsule, changed=stored.capsule.id in changed) for stored in matched],
    }


def bulk_delete(
    ctx: Context,
    *,
    workspace: str | None = None,
    tag: str | None = None,
    name_prefix: str | None = None,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Soft-delete every live capsule the filters match (each moves to its workspace's
    `deleted/` folder, freeing its name, as `delete` does).

    Returns `{deleted, message, dry_run, items: [{id, workspace, name?}]}`. Raises as
    `bulk_update` does.
    """
    where = filters.bulk_filter(workspace=workspace, tag=tag, name_prefix=name_prefix, run_id=run_id, phase=phase, role=role)
    now = now_ms(ctx)
    store_ = CapsuleStore(ctx.root)
    with store_.writing():
        matched = _matching(store_, where)
        plan = [(stored, replace(stored.capsule, deleted_ms=now, updated_ms=now)) for stored in matched]
        if not dry_run:
            _apply(plan, lambda stored, new: _move_to_deleted(store_, stored, new))
    return {
        "deleted": len(matched),
        "message": _message(("soft-delete", "Soft-deleted"), len(matched), where, dry_run=dry_run),
        "dry_run": dry_run,
        "items": [_item(stored.capsule) for stored in matched],
    }


# --------------------------------------------------------------------------- applying


def _apply(plan: Sequence[tuple[StoredCapsule, Capsule]], write: Callable[[StoredCapsule, Capsule], Undo]) -> None:
    """Write every planned change; on a failure, undo the writes made so far (newest first)
    and raise the failure with `details.rolled_back` (and `details.not_rolled_back`, the files
    that could not be put back, should that happen too)."""
    undos: list[tuple[str, Undo]] = []
    try:
        for stored, new in plan:
            undos.append((str(stored.path), write(stored, new)))
    except MossError as err:
        failed: list[str] = []
        for path, undo in reversed(undos):
            try:
                undo()
            except (MossError, OSError):
                failed.append(path)
        err.details["rolled_back"] = len(undos) - len(failed)
        if failed:
            err.details["not_rolled_back"] = failed
        raise


def _rewrite(store_: CapsuleStore, stored: StoredCapsule, new: Capsule) -> Undo:
    """Write `new` over the file `stored` was read from (it must not have changed since);
    returns how to put the old bytes back."""
    written = store_.replace_file(stored, new)
    original = stored.snapshot.data
    assert original is not None

    def undo() -> None:
        with fs.locked(written.path):
            fs.write_if_unchanged(written.snapshot, original)

    return undo


def _move_to_deleted(store_: CapsuleStore, stored: StoredCapsule, new: Capsule) -> Undo:
    """Write the deleted capsule to its place under `deleted/`, then remove the live file
    (unless it changed since it was read); returns how to undo both."""
    original = stored.snapshot.data
    assert original is not None
    old_text, _bom = document.decode(original, str(stored.path), max_bytes=len(original) + 1)
    created = store_.create(new, text=core.edit_capsule(old_text, new, store_.display(stored.path)))
    try:
        store_.remove(stored)
    except MossError:
        fs.remove(created.path)
        raise

    def undo() -> None:
        with fs.locked(created.path):
            current = fs.read_snapshot(created.path)
            if current.digest != created.snapshot.digest:
                raise Conflict("file changed since the bulk operation wrote it", code="STALE_WRITE", path=store_.display(created.path))
            if not fs.create_exclusive(stored.path, original):
                raise Conflict("a file took the capsule's place", code="ALREADY_EXISTS", path=store_.display(stored.path))
            fs.remove(created.path)

    return undo

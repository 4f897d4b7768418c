"""Moss's capsules, from its SQLite store (`~/.moss/moss.db`, table `capsules`) or a JSONL export,
planned as capsule files. Core layer (pure).

A capsule keeps its Moss id (a ULID), so the id is the old id and a second run finds the
capsule by it. Rows are read as export records and go through the capsule model's own record
parser, so a row and an exported line of the same capsule become the same file, with the
derived fields (normalized names, character and token counts) recomputed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from moss_files.capsules import model as capsules
from moss_files.capsules import records
from moss_files.capsules.model import Capsule
from moss_files.foundation import structured
from moss_files.foundation.errors import Conflict, InvalidDocument
from moss_files.migrate.model import CREATE, SKIP, Candidate, Item, Where, source_error

STORE_TABLE = "capsules"
# The columns of Moss's `capsules` table (schema v1; v2 adds only the FTS table), in its order.
STORE_COLUMNS = (
    "id",
    "workspace_raw",
    "workspace_norm",
    "name_raw",
    "name_norm",
    "title",
    "capsule_text",
    "capsule_chars",
    "tokens_estimate",
    "tags_json",
    "source",
    "run_id",
    "phase",
    "role",
    "created_at",
    "updated_at",
    "deleted_at",
)
REQUIRED_COLUMNS = ("id", "workspace_raw", "capsule_text", "created_at", "updated_at")
CAPSULES_FOLDER = ".moss/capsules"


@dataclass(frozen=True, slots=True)
class Found:
    """One capsule read from the source, and where."""

    capsule: Capsule
    where: Where


def row_to_record(row: Mapping[str, Any], where: Where) -> dict[str, Any]:
    """An export record (the JSONL shape) from a row of the `capsules` table. Raises
    SOURCE_INVALID when `tags_json` is not a JSON list."""
    record = {key: value for key, value in row.items() if key != "tags_json"}
    tags_text = row.get("tags_json")
    tags: Any = None
    if tags_text not in (None, ""):
        try:
            tags = structured.loads_json(tags_text, unique_keys=True)
        except (TypeError, ValueError):
            raise source_error("tags_json is not JSON", where, column="tags_json") from None
        except InvalidDocument as err:  # nested too deeply, or a key twice
            raise source_error(f"tags_json: {err.message}", where, column="tags_json", cause=err.code) from None
    record["tags"] = tags
    return record


def parse_capsule(record: Any, where: Where, *, now_ms: int) -> Capsule | None:
    """The capsule of one export record or row (None for an export's header line). Raises
    SOURCE_INVALID with the record's line and the record parser's reason."""
    if not isinstance(record, dict):
        raise source_error("a record must be a JSON object", where)
    try:
        return records.parse_record(json.dumps(record, ensure_ascii=False), now_ms=now_ms)
    except records.RecordProblem as problem:
        raise source_error(problem.message, where, code_in_moss=problem.code, id=problem.id) from None


def capsule_path(capsule: Capsule) -> str:
    """Where the capsule's file goes, relative to the workspace root."""
    return f"{CAPSULES_FOLDER}/{capsules.capsule_relpath(capsule).as_posix()}"


def plan(
    found: Sequence[Found],
    existing: Sequence[Capsule],
    *,
    workspace: str | None,
    include_deleted: bool,
    rename: bool,
    new_id: Any,
) -> tuple[list[Item], list[Candidate]]:
    """Items and new files for Moss's capsules.

    Skipped: capsules of other workspaces (when one is chosen), soft-deleted ones unless
    `include_deleted`, and those whose id the workspace holds already. A live name taken by
    another capsule stops the source (Conflict NAME_ALREADY_EXISTS, every clash listed), or
    with `rename` becomes `name-1`, `name-2`, … as Moss's import does.
    """
    wanted = capsules.normalize(workspace) if workspace else None
    by_id = {capsule.id: capsule for capsule in existing}
    items: list[Item] = []
    chosen: list[tuple[int, Capsule]] = []
    wheres: dict[int, Where] = {}
    for index, entry in enumerate(found):
        capsule = entry.capsule
        if wanted is not None and capsule.workspace_norm != wanted:
            items.append(Item("capsule", capsule.id, entry.where, SKIP, reason=f"in workspace {capsule.workspace!r}, not the one chosen"))
            continue
        if capsule.deleted and not include_deleted:
            items.append(Item("capsule", capsule.id, entry.where, SKIP, reason="soft-deleted in Moss (--include-deleted brings it)"))
            continue
        held = by_id.get(capsule.id)
        if held is not None:
            same = _same(held, capsule)
            reason = "already imported" if same else "a capsule with this id exists and differs from the source; it is kept as it is"
            items.append(Item("capsule", capsule.id, entry.where, SKIP, reason=reason))
            continue
        chosen.append((index, capsule))
        wheres[index] = entry.where
    actions, errors = records.plan_import(existing, chosen, "rename" if rename else "error", new_id)
    if errors:
        clashes = [{"id": error.get("id"), "name": error.get("name"), "from": str(wheres[error["line"]]), "code": error["code"]} for error in errors]
        raise Conflict(
            f"{len(errors)} capsule(s) collide with capsules of this workspace: {', '.join(str(c['name'] or c['id']) for c in clashes[:5])}",
            code="NAME_ALREADY_EXISTS",
            details={"collisions": clashes},
            hint="rename or delete the capsules in the way, or pass --rename to import them as name-1, name-2, …",
        )
    candidates: list[Candidate] = []
    for action in actions:
        capsule = action.capsule
        original = found[action.line].capsule
        note = None
        if capsule.id != original.id:
            note = f"id taken: imported as {capsule.id}"
        if capsule.name != original.name:
            note = f"name taken: imported as {capsule.name!r}"
        text = capsules.render_capsule(capsule)
        candidates.append(Candidate("capsule", original.id, capsule.id, capsule_path(capsule), text.encode("utf-8"), wheres[action.line], note))
    return items, candidates


def _same(held: Capsule, capsule: Capsule) -> bool:
    """Whether the workspace's capsule says what the source's does (times to the second)."""
    left = replace(
        held, created_ms=held.created_ms // 1000, updated_ms=held.updated_ms // 1000, deleted_ms=None if held.deleted_ms is None else held.deleted_ms // 1000
    )
    right = replace(
        capsule,
        created_ms=capsule.created_ms // 1000,
        updated_ms=capsule.updated_ms // 1000,
        deleted_ms=None if capsule.deleted_ms is None else capsule.deleted_ms // 1000,
    )
    return left == right


def created_items(candidates: Sequence[Candidate]) -> list[Item]:
    """The items of new capsule files (for reports built without `model.decide`)."""
    return [Item(c.kind, c.old_id, c.where, CREATE, c.path, c.new_id, c.note) for c in candidates]

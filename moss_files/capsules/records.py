"""Capsule records: a JSONL line read into a capsule, and the plan of an import.

Core layer: pure functions over values (no I/O, no clock; times are passed in as milliseconds
since the epoch). Kept apart from `model` so the commands that only read capsules (`moss list`,
`inventory`, `fetch`) do not build what only an import uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from moss_files.capsules.model import Capsule, CapsuleKey, check_fields, is_capsule_id
from moss_files.foundation import structured
from moss_files.foundation.errors import InvalidDocument, InvalidRequest


@dataclass(frozen=True, slots=True)
class RecordProblem(Exception):
    """Why one JSONL line cannot be imported (Moss's per-line import error)."""

    code: str
    message: str
    id: str | None = None
    name: str | None = None


def parse_record(line: str, *, now_ms: int) -> Capsule | None:
    """A capsule from one JSONL line; None for the export header line.

    Derived fields (`*_norm`, `capsule_chars`, `tokens_estimate`) are recomputed, never read.
    Raises RecordProblem PARSE_ERROR or INVALID_RECORD.
    """
    try:
        data = structured.loads_json(line)
    except (ValueError, InvalidDocument) as exc:
        raise RecordProblem("PARSE_ERROR", f"invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RecordProblem("PARSE_ERROR", "a line must be a JSON object")
    if data.get("_moss_export") is True:
        return None
    record_id = data.get("id")
    raw_name = data.get("name_raw")
    shown_name = raw_name if isinstance(raw_name, str) else None
    if not isinstance(record_id, str) or not record_id:
        raise RecordProblem("INVALID_RECORD", "missing id field", name=shown_name)
    if not is_capsule_id(record_id):
        raise RecordProblem("INVALID_RECORD", f"id {record_id!r} is not a ULID", id=record_id, name=shown_name)

    def bad(message: str) -> RecordProblem:
        return RecordProblem("INVALID_RECORD", message, id=record_id, name=shown_name)

    workspace = data.get("workspace_raw")
    if not isinstance(workspace, str) or not workspace.strip():
        raise bad("missing workspace_raw field")
    text = data.get("capsule_text")
    if not isinstance(text, str) or text == "":
        raise bad("missing or empty capsule_text field")
    if "\0" in text:
        raise bad("capsule_text holds a NUL character")
    if raw_name is not None and (not isinstance(raw_name, str) or not raw_name.strip()):
        if raw_name == "":
            raw_name = None
        else:
            raise bad("name_raw must be a non-blank string or null")

    def optional(field: str) -> str | None:
        value = data.get(field)
        if value is None:
            return None
        if not isinstance(value, str):
            raise bad(f"{field} must be a string or null")
        return value if value.strip() else None

    tags_value = data.get("tags")
    tags: tuple[str, ...] | None = None
    if tags_value is not None:
        if not isinstance(tags_value, list) or not all(isinstance(tag, str) for tag in tags_value):
            raise bad("tags must be a list of strings or null")
        tags = tuple(tags_value) or None

    def stamp(field: str, default: int | None) -> int | None:
        value = data.get(field)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**40:
            raise bad(f"{field} must be unix seconds")
        return value * 1000

    created = stamp("created_at", now_ms)
    updated = stamp("updated_at", created)
    assert created is not None and updated is not None
    capsule = Capsule(
        id=record_id,
        workspace=workspace,
        name=raw_name,
        text=text,
        created_ms=created,
        updated_ms=updated,
        title=optional("title"),
        tags=tags,
        source=optional("source"),
        run_id=optional("run_id"),
        phase=optional("phase"),
        role=optional("role"),
        deleted_ms=stamp("deleted_at", None),
    )
    try:
        check_fields(capsule)
    except InvalidRequest as err:
        raise bad(err.message) from None
    return capsule


@dataclass(frozen=True, slots=True)
class ImportAction:
    """One write an import will make: create a capsule, or replace the capsule `replaces`."""

    capsule: Capsule
    line: int
    replaces: str | None = None  # id of the existing capsule this one overwrites


IMPORT_MODES = ("error", "replace", "rename")


def plan_import(
    existing: Sequence[Capsule | CapsuleKey],
    records: Sequence[tuple[int, Capsule]],
    mode: str,
    new_id: Any,
) -> tuple[list[ImportAction], list[dict[str, Any]]]:
    """Decide what an import writes, as Moss does, without writing anything.

    `error`: any id collision (deleted capsules included) or live-name collision is an error.
    `replace`: a record overwrites the capsule with its id, else the live capsule with its name
    (keeping that capsule's id); an id matching one capsule and a name another is
    AMBIGUOUS_COLLISION. `rename`: a colliding id gets a new ULID from `new_id()`, a colliding
    name becomes `name-1`, `name-2`, ... Collisions between records of the same file count too.
    Returns the actions and Moss-shaped per-line errors; any error means nothing is written.
    """
    by_id: dict[str, Capsule | CapsuleKey] = {c.id: c for c in existing}
    live_names: dict[tuple[str, str], str] = {(c.workspace_norm, c.name_norm): c.id for c in existing if c.name_norm and not c.deleted}
    actions: list[ImportAction] = []
    errors: list[dict[str, Any]] = []

    def error(line: int, record: Capsule, code: str, message: str) -> None:
        item: dict[str, Any] = {"line": line, "id": record.id}
        if record.name:
            item["name"] = record.name
        item.update(code=code, message=message)
        errors.append(item)

    def take(capsule: Capsule) -> None:
        old = by_id.get(capsule.id)
        if old is not None and old.name_norm and not old.deleted:
            live_names.pop((old.workspace_norm, old.name_norm), None)
        by_id[capsule.id] = capsule
        if capsule.name_norm and not capsule.deleted:
            live_names[(capsule.workspace_norm, capsule.name_norm)] = capsule.id

    for line, record in records:
        key = (record.workspace_norm, record.name_norm) if record.name_norm and not record.deleted else None
        named_holder = live_names.get(key) if key else None
        if mode == "error":
            if record.id in by_id:
                error(line, record, "ID_COLLISION", f"capsule with id {record.id!r} already exists")
                continue
            if named_holder is not None:
                error(line, record, "NAME_COLLISION", f"capsule with name {record.name!r} already exists in workspace {record.workspace!r}")
                continue
            actions.append(ImportAction(record, line))
            take(record)
        elif mode == "replace":
            id_holder = by_id.get(record.id)
            if id_holder is not None and named_holder is not None and named_holder != record.id:
                error(line, record, "AMBIGUOUS_COLLISION", f"id {record.id!r} matches one capsule but name {record.name!r} matches another")
                continue
            if id_holder is not None:
                actions.append(ImportAction(record, line, replaces=record.id))
                take(record)
            elif named_holder is not None:
                renamed = replace(record, id=named_holder)
                actions.append(ImportAction(renamed, line, replaces=named_holder))
                take(renamed)
            else:
                actions.append(ImportAction(record, line))
                take(record)
        else:
            capsule = record
            if capsule.id in by_id:
                capsule = replace(capsule, id=new_id())
            if key is not None and named_holder is not None:
                suffix = 1
                while (key[0], f"{key[1]}-{suffix}") in live_names:
                    suffix += 1
                new_name = f"{key[1]}-{suffix}"
                capsule = replace(capsule, name=new_name)
            actions.append(ImportAction(capsule, line))
            take(capsule)
    return actions, errors

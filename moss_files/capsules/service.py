"""Capsule use cases: Moss's operations over capsule files, returning Moss's JSON shapes.

Shell layer: each public function takes a `Context` plus the operation's parameters, exactly as
an MCP tool receives them (JSON types, Moss's names and defaults), checks them, and returns the
seed's output dict. `OPERATIONS` maps Moss's tool names to these functions, so the CLI and the
MCP server stay thin and return identical shapes. Errors are MossErrors with the seed's codes.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from moss_files.capsules import model as core
from moss_files.foundation import document, fs
from moss_files.capsules.model import Capsule
from moss_files.capsules.store import CapsuleStore, Scan, StoredCapsule, raise_first
from moss_files.foundation.config import Config
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound, error_body

if TYPE_CHECKING:
    from moss_files.foundation.ids import Clock, IdSource

MAX_IMPORT_BYTES = 25 * 1024 * 1024
MAX_IMPORT_LINE_BYTES = 1024 * 1024
EXPORTS_DIR = Path(".moss") / "exports"


@dataclass(frozen=True, slots=True)
class Context:
    """What every operation needs: the workspace root, settings, clock and id source."""

    root: Path
    config: Config = field(default_factory=Config)
    clock: Clock | None = None  # the system clock when None
    ids: IdSource | None = None
    home: Path | None = None  # for the default export folder; the user's home when None

    @property
    def store(self) -> CapsuleStore:
        return CapsuleStore(self.root)

    def now_ms(self) -> int:
        return core.datetime_to_ms(self.clock() if self.clock else datetime.now(UTC))

    def new_id(self) -> str:
        if self.ids is not None:
            return self.ids.ulid()
        # Loaded on first use: the ULID package costs tens of milliseconds to import, and
        # read-only commands never make ids.
        from moss_files.foundation.ids import IdSource, system_clock

        return IdSource(clock=self.clock or system_clock).ulid()

    def exports_dir(self) -> Path:
        return (self.home or Path.home()) / EXPORTS_DIR


# --------------------------------------------------------------------------- parameters


def _text(value: Any, field_name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidRequest(f"{field_name} must be a string", details={"field": field_name})


def _flag(value: Any, field_name: str, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    raise InvalidRequest(f"{field_name} must be true or false", details={"field": field_name})


def _count(value: Any, field_name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{field_name} must be a whole number", details={"field": field_name})
    if value < 0:
        raise InvalidRequest(f"{field_name} must not be negative", details={"field": field_name, "value": value})
    return value


def _tags(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise InvalidRequest("tags must be a list of strings", details={"field": "tags"})
    cleaned = tuple(tag.strip() for tag in value if tag.strip())
    return cleaned or None


def _optional(value: Any, field_name: str) -> str | None:
    """An optional text field: '' (or blanks) means 'no value', as in Moss."""
    text = _text(value, field_name)
    return text if text and text.strip() else None


def _workspace(value: Any) -> str:
    text = _text(value, "workspace")
    return text if text and text.strip() else core.DEFAULT_WORKSPACE


def _filter(value: Any, field_name: str) -> str | None:
    text = _text(value, field_name)
    return text if text and text.strip() else None


def _page(limit: Any, offset: Any, default: int, maximum: int) -> tuple[int, int]:
    wanted = _count(limit, "limit")
    start = _count(offset, "offset") or 0
    if not wanted:
        wanted = default
    return min(wanted, maximum), start


@dataclass(frozen=True, slots=True)
class Address:
    """Exactly one way to name a capsule: an id, or a workspace and a name (normalized)."""

    id: str | None
    workspace_norm: str
    name_norm: str | None


def address(id: Any = None, workspace: Any = None, name: Any = None) -> Address:
    """Check addressing. Raises InvalidRequest AMBIGUOUS_ADDRESSING for both, INVALID_REQUEST for neither."""
    id_text = _text(id, "id")
    name_text = _text(name, "name")
    has_id = bool(id_text)
    has_name = name_text is not None and name_text != ""
    if has_id and has_name:
        raise InvalidRequest(
            "address a capsule by id or by workspace+name, not both",
            code="AMBIGUOUS_ADDRESSING",
            details={"id": id_text, "name": name_text},
        )
    if has_id:
        assert id_text is not None
        return Address(id_text.strip(), core.DEFAULT_WORKSPACE, None)
    if not has_name:
        raise InvalidRequest("must specify either id or name")
    assert name_text is not None
    name_norm = core.normalize(name_text)
    if not name_norm:
        raise InvalidRequest("name must not be blank", details={"field": "name"})
    return Address(None, core.normalize(_workspace(workspace)), name_norm)


def _find(store: CapsuleStore, where: Address, *, include_deleted: bool = False) -> StoredCapsule:
    if where.id is not None:
        found = store.find_by_id(where.id, include_deleted=include_deleted)
    else:
        assert where.name_norm is not None
        found = store.find_by_name(where.workspace_norm, where.name_norm, include_deleted=include_deleted)
    if found is None:
        details = {"id": where.id} if where.id else {"workspace": where.workspace_norm, "name": where.name_norm}
        shown = where.id or f"{where.workspace_norm}/{where.name_norm}"
        raise NotFound(f"capsule {shown} not found", details=details)
    return found


def _ids(capsule: Capsule) -> dict[str, Any]:
    key = core.fetch_key(capsule)
    # v1.0 called it task_link; later Moss renamed it fetch_key. Both, for clients of either.
    return {"id": capsule.id, "task_link": key, "fetch_key": key}


def _problems(scan: Scan) -> dict[str, Any]:
    if not scan.problems:
        return {}
    return {"problems": [error_body(problem)["error"] for problem in scan.problems]}


def _newest_first(capsules: list[Capsule]) -> list[Capsule]:
    return sorted(capsules, key=lambda c: (c.updated_ms, c.id), reverse=True)


def _orchestration_match(capsule: Capsule, run_id: str | None, phase: str | None, role: str | None) -> bool:
    return (
        (run_id is None or capsule.run_id == run_id)
        and (phase is None or capsule.phase == phase)
        and (role is None or capsule.role == role)
    )


# --------------------------------------------------------------------------- store / fetch


def store(
    ctx: Context,
    capsule_text: Any = None,
    workspace: Any = None,
    name: Any = None,
    title: Any = None,
    tags: Any = None,
    source: Any = None,
    mode: Any = None,
    allow_thin: Any = None,
    run_id: Any = None,
    phase: Any = None,
    role: Any = None,
) -> dict[str, Any]:
    """Store a new capsule, or with `mode: "replace"` overwrite the live one of that name.

    Returns `{id, task_link, fetch_key}`. Raises Conflict NAME_ALREADY_EXISTS (mode error),
    InvalidDocument CAPSULE_TOO_LARGE / CAPSULE_TOO_THIN, InvalidRequest for bad fields.
    """
    with ctx.store.writing():
        return _store_locked(ctx, capsule_text, workspace, name, title, tags, source, mode, allow_thin, run_id, phase, role)


def _store_locked(
    ctx: Context,
    capsule_text: Any,
    workspace: Any,
    name: Any,
    title: Any,
    tags: Any,
    source: Any,
    mode: Any,
    allow_thin: Any,
    run_id: Any,
    phase: Any,
    role: Any,
) -> dict[str, Any]:
    text = _text(capsule_text, "capsule_text")
    if not text:
        raise InvalidRequest("capsule_text is required", details={"field": "capsule_text"})
    store_mode = _text(mode, "mode") or "error"
    if store_mode not in ("error", "replace"):
        raise InvalidRequest('mode must be "error" or "replace"', details={"field": "mode", "value": store_mode})
    name_text = _text(name, "name")
    if name_text is not None and name_text != "" and not core.normalize(name_text):
        raise InvalidRequest("name must not be blank", details={"field": "name"})
    name_raw = name_text or None
    core.check_text(text, max_chars=ctx.config.capsule_max_chars, allow_thin=_flag(allow_thin, "allow_thin", False))
    now = ctx.now_ms()
    title_text = _optional(title, "title")
    new = Capsule(
        id=ctx.new_id(),
        workspace=_workspace(workspace),
        name=name_raw,
        text=text,
        created_ms=now,
        updated_ms=now,
        title=title_text if title_text is not None else name_raw,
        tags=_tags(tags),
        source=_optional(source, "source"),
        run_id=_optional(run_id, "run_id"),
        phase=_optional(phase, "phase"),
        role=_optional(role, "role"),
    )
    core.check_fields(new)
    store_ = ctx.store
    if new.name_norm:
        slot = store_.read_slot(new.workspace_norm, new.name_norm)
        if slot is not None and slot.capsule.deleted:
            store_.relocate(slot)  # marked deleted by hand but still in the slot: free the name
            slot = None
        if slot is not None:
            if store_mode == "error":
                raise Conflict(
                    f"a capsule named {new.name!r} already exists in workspace {new.workspace!r}",
                    code="NAME_ALREADY_EXISTS",
                    details={"workspace": new.workspace, "name": new.name, "id": slot.capsule.id},
                    hint='use mode "replace" to overwrite it, or another name',
                )

            def overwrite(current: Capsule) -> Capsule:
                # Replace keeps identity (id, raw workspace and name, created time) and the
                # hand-written keys; everything editable takes the new values.
                return replace(
                    current,
                    text=new.text,
                    title=new.title,
                    tags=new.tags,
                    source=new.source,
                    run_id=new.run_id,
                    phase=new.phase,
                    role=new.role,
                    updated_ms=now,
                )

            return _ids(store_.rewrite(slot, overwrite).capsule)
    return _ids(store_.create(new).capsule)


def fetch(ctx: Context, id: Any = None, workspace: Any = None, name: Any = None, include_text: Any = None, include_deleted: Any = None) -> dict[str, Any]:
    """One capsule by id or by workspace+name, with its text unless `include_text` is false.

    Raises NotFound (soft-deleted ones too, unless `include_deleted`), InvalidRequest
    AMBIGUOUS_ADDRESSING.
    """
    where = address(id, workspace, name)
    found = _find(ctx.store, where, include_deleted=_flag(include_deleted, "include_deleted", False))
    return core.capsule_to_dict(found.capsule, include_text=_flag(include_text, "include_text", True))


def fetch_many(ctx: Context, items: Any = None, include_text: Any = None, include_deleted: Any = None) -> dict[str, Any]:
    """Up to 50 capsules; a failed item goes to `errors` with the caller's ref, the rest succeed.

    Read under the writers' lock, so no tool write lands between two items.
    """
    if not isinstance(items, list):
        raise InvalidRequest("items must be a list of {id} or {workspace, name} objects", details={"field": "items"})
    if len(items) > core.MAX_FETCH_MANY:
        raise InvalidRequest(f"too many items: {len(items)} (max {core.MAX_FETCH_MANY})", details={"max": core.MAX_FETCH_MANY, "actual": len(items)})
    with_text = _flag(include_text, "include_text", True)
    deleted_too = _flag(include_deleted, "include_deleted", False)
    found: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    store_ = ctx.store
    with store_.writing():
        for ref in items:
            try:
                if not isinstance(ref, Mapping):
                    raise InvalidRequest("each item must be an object with id, or workspace and name")
                where = address(ref.get("id"), ref.get("workspace"), ref.get("name"))
                stored = _find(store_, where, include_deleted=deleted_too)
            except MossError as err:
                errors.append({"ref": ref, "code": err.code, "message": err.message})
                continue
            found.append(core.capsule_to_dict(stored.capsule, include_text=with_text))
    return {"items": found, "errors": errors}


# --------------------------------------------------------------------------- change


def update(
    ctx: Context,
    id: Any = None,
    workspace: Any = None,
    name: Any = None,
    capsule_text: Any = None,
    title: Any = None,
    tags: Any = None,
    source: Any = None,
    run_id: Any = None,
    phase: Any = None,
    role: Any = None,
    allow_thin: Any = None,
) -> dict[str, Any]:
    """Change a live capsule's editable fields ('' clears an optional one); lint when the text changes.

    The change is applied to the file as it is at write time, so a hand edit made meanwhile is
    kept. Returns `{id, task_link, fetch_key}`. Raises NotFound, InvalidRequest (no field),
    CAPSULE_TOO_LARGE / CAPSULE_TOO_THIN.
    """
    where = address(id, workspace, name)
    changes: dict[str, Any] = {}
    text = _text(capsule_text, "capsule_text")
    if text is not None:
        if not text:
            raise InvalidRequest("capsule_text must not be empty", details={"field": "capsule_text"})
        core.check_text(text, max_chars=ctx.config.capsule_max_chars, allow_thin=_flag(allow_thin, "allow_thin", False))
        changes["text"] = text
    for field_name, value in (("title", title), ("source", source), ("run_id", run_id), ("phase", phase), ("role", role)):
        if value is not None:
            changes[field_name] = _optional(value, field_name)
    if tags is not None:
        changes["tags"] = _tags(tags)
    if not changes:
        raise InvalidRequest("at least one editable field must be given: capsule_text, title, tags, source, run_id, phase, role")
    now = ctx.now_ms()
    store_ = ctx.store
    with store_.writing():
        stored = _find(store_, where)

        def apply(current: Capsule) -> Capsule:
            if current.deleted:
                raise NotFound(f"capsule {current.id} was deleted", details={"id": current.id})
            updated = replace(current, **changes, updated_ms=now)
            core.check_fields(updated)
            return updated

        # relocate: a file kept under a name from before the Windows escape moves to its slot
        result = store_.relocate(store_.rewrite(stored, apply))
    return _ids(result.capsule)


def delete(ctx: Context, id: Any = None, workspace: Any = None, name: Any = None) -> dict[str, Any]:
    """Soft-delete a live capsule: stamp `deleted_at` and move it to `deleted/`, freeing its name.

    Returns `{deleted: true, id}`. Raises NotFound.
    """
    where = address(id, workspace, name)
    now = ctx.now_ms()
    store_ = ctx.store
    with store_.writing():
        stored = _find(store_, where)
        marked = store_.rewrite(stored, lambda current: None if current.deleted else replace(current, deleted_ms=now, updated_ms=now))
        if not marked.capsule.deleted:
            raise NotFound(f"capsule {stored.capsule.id} not found", details={"id": stored.capsule.id})
        store_.relocate(marked)
    return {"deleted": True, "id": marked.capsule.id}


def append(ctx: Context, section: Any = None, content: Any = None, id: Any = None, workspace: Any = None, name: Any = None) -> dict[str, Any]:
    """Add text to one markdown section of a live capsule (exact header name, any case).

    A placeholder body ('(none)', 'TBD', '-', empty, ...) is replaced, otherwise the content
    follows after a blank line. No lint; the size limit applies. Returns
    `{id, fetch_key?, section_hit, replaced}`. Raises InvalidRequest when the section is
    missing (details.available) or the capsule has no sections.
    """
    where = address(id, workspace, name)
    section_name = _text(section, "section")
    if not section_name or not section_name.strip():
        raise InvalidRequest("section is required", details={"field": "section"})
    addition = _text(content, "content")
    if not addition or not addition.strip():
        raise InvalidRequest("content is required", details={"field": "content"})
    if "\0" in addition:
        raise InvalidRequest("content must not contain NUL characters", details={"field": "content"})
    now = ctx.now_ms()
    outcome: dict[str, Any] = {}
    store_ = ctx.store

    def apply(current: Capsule) -> Capsule:
        if current.deleted:
            raise NotFound(f"capsule {current.id} was deleted", details={"id": current.id})
        sections = core.parse_sections(current.text)
        if not sections:
            raise InvalidRequest("append needs a markdown capsule with section headers (none found)", details={"id": current.id})
        target = core.find_section(sections, section_name, exact=True)
        if target is None:
            available = [s.name for s in sections]
            raise InvalidRequest(f"section {section_name!r} not found", details={"section": section_name, "available": available})
        new_text = core.insert_into_section(current.text, target, addition)
        chars = core.count_chars(new_text)
        limit = ctx.config.capsule_max_chars
        if limit > 0 and chars > limit:
            raise core.too_large_error("CAPSULE_TOO_LARGE", "Capsule would exceed capsule_max_chars", limit, chars)
        outcome.update(section_hit=target.header, replaced=target.placeholder)
        return replace(current, text=new_text, updated_ms=now)

    with store_.writing():
        stored = _find(store_, where)
        result = store_.rewrite(stored, apply).capsule
    data: dict[str, Any] = {"id": result.id}
    if result.name:
        data["fetch_key"] = core.fetch_key(result)
    data.update(outcome)
    return data


# --------------------------------------------------------------------------- browse


def latest(
    ctx: Context,
    workspace: Any = None,
    include_text: Any = None,
    include_deleted: Any = None,
    run_id: Any = None,
    phase: Any = None,
    role: Any = None,
) -> dict[str, Any]:
    """The most recently updated capsule of a workspace: `{item}` (a summary unless
    `include_text`), `{item: null}` when there is none."""
    ws = core.normalize(_workspace(workspace))
    deleted_too = _flag(include_deleted, "include_deleted", False)
    filters = (_filter(run_id, "run_id"), _filter(phase, "phase"), _filter(role, "role"))
    scan = ctx.store.scan(ws, include_deleted=deleted_too)
    candidates = [s.capsule for s in scan.capsules if (deleted_too or not s.capsule.deleted) and _orchestration_match(s.capsule, *filters)]
    ordered = _newest_first(candidates)
    item = None
    if ordered:
        item = core.capsule_to_dict(ordered[0], include_text=_flag(include_text, "include_text", False))
    return {"item": item, **_problems(scan)}


def list_capsules(
    ctx: Context,
    workspace: Any = None,
    limit: Any = None,
    offset: Any = None,
    include_deleted: Any = None,
    run_id: Any = None,
    phase: Any = None,
    role: Any = None,
) -> dict[str, Any]:
    """Summaries of one workspace's capsules, newest first, never their text.

    Returns `{items, pagination: {limit, offset, has_more, total}, sort: "updated_at_desc"}`.
    """
    ws = core.normalize(_workspace(workspace))
    page_limit, page_offset = _page(limit, offset, core.LIST_DEFAULT_LIMIT, core.LIST_MAX_LIMIT)
    deleted_too = _flag(include_deleted, "include_deleted", False)
    filters = (_filter(run_id, "run_id"), _filter(phase, "phase"), _filter(role, "role"))
    scan = ctx.store.scan(ws, include_deleted=deleted_too)
    chosen = [s.capsule for s in scan.capsules if (deleted_too or not s.capsule.deleted) and _orchestration_match(s.capsule, *filters)]
    return {**_paged(chosen, page_limit, page_offset), **_problems(scan)}


def inventory(
    ctx: Context,
    workspace: Any = None,
    tag: Any = None,
    name_prefix: Any = None,
    run_id: Any = None,
    phase: Any = None,
    role: Any = None,
    include_deleted: Any = None,
    limit: Any = None,
    offset: Any = None,
) -> dict[str, Any]:
    """Summaries across all workspaces, filtered, newest first, never their text (shape as list)."""
    ws_filter = _filter(workspace, "workspace")
    ws = core.normalize(ws_filter) if ws_filter else None
    tag_filter = _filter(tag, "tag")
    prefix_text = _filter(name_prefix, "name_prefix")
    # The prefix is matched against normalized names, literally (no wildcards), without the
    # trimming that would turn "my " into "my".
    prefix = re.sub(r"\s+", " ", prefix_text.lower()).lstrip() if prefix_text else None
    page_limit, page_offset = _page(limit, offset, core.INVENTORY_DEFAULT_LIMIT, core.INVENTORY_MAX_LIMIT)
    deleted_too = _flag(include_deleted, "include_deleted", False)
    filters = (_filter(run_id, "run_id"), _filter(phase, "phase"), _filter(role, "role"))
    scan = ctx.store.scan(ws, include_deleted=deleted_too)
    chosen = [
        s.capsule
        for s in scan.capsules
        if (deleted_too or not s.capsule.deleted)
        and _orchestration_match(s.capsule, *filters)
        and (tag_filter is None or tag_filter in (s.capsule.tags or ()))
        and (prefix is None or (s.capsule.name_norm or "").startswith(prefix) and s.capsule.name_norm is not None)
    ]
    return {**_paged(chosen, page_limit, page_offset), **_problems(scan)}


def _paged(capsules: list[Capsule], limit: int, offset: int) -> dict[str, Any]:
    ordered = _newest_first(capsules)
    page = ordered[offset : offset + limit]
    items = [{**core.summary_to_dict(c), "fetch_key": core.fetch_key(c)} for c in page]
    return {
        "items": items,
        "pagination": {"limit": limit, "offset": offset, "has_more": offset + len(page) < len(ordered), "total": len(ordered)},
        "sort": "updated_at_desc",
    }


# --------------------------------------------------------------------------- compose


def compose(ctx: Context, items: Any = None, format: Any = None, sections: Any = None, store_as: Any = None) -> dict[str, Any]:
    """Assemble capsules into one bundle, in the order given; all or nothing.

    Markdown parts are `## <title, else name, else id>` then the text, separated by `---`
    lines; `json` gives `{"parts": [...]}`. `sections` keeps only those sections (in that
    order; missing or placeholder ones skipped, capsules left empty omitted). `store_as`
    ({name, workspace?, mode?}) stores the bundle (linted, unless sections were filtered).
    Returns `{bundle_text, bundle_chars, parts_count, stored?}`. Raises NotFound for any missing
    capsule (with details.index), InvalidDocument COMPOSE_TOO_LARGE (413).
    """
    if not isinstance(items, list) or not items:
        raise InvalidRequest("items is required and must not be empty", details={"field": "items"})
    if len(items) > core.MAX_FETCH_MANY:
        raise InvalidRequest(f"too many items: {len(items)} (max {core.MAX_FETCH_MANY})", details={"max": core.MAX_FETCH_MANY, "actual": len(items)})
    bundle_format = _text(format, "format") or "markdown"
    if bundle_format not in ("markdown", "json"):
        raise InvalidRequest("format must be one of: markdown, json", details={"field": "format"})
    wanted: list[str] | None = None
    if sections is not None:
        if not isinstance(sections, list) or not all(isinstance(s, str) and s.strip() for s in sections):
            raise InvalidRequest("sections must be a list of section names", details={"field": "sections"})
        wanted = list(sections) or None
    target: dict[str, Any] | None = None
    if store_as is not None:
        if bundle_format == "json":
            raise InvalidRequest('format "json" cannot be stored: a JSON bundle is not a capsule', details={"field": "store_as"})
        if not isinstance(store_as, Mapping) or not _text(store_as.get("name"), "store_as.name"):
            raise InvalidRequest("store_as.name is required", details={"field": "store_as"})
        target = dict(store_as)
    limit = ctx.config.capsule_max_chars
    store_ = ctx.store
    with store_.writing():
        parts: list[dict[str, Any]] = []
        for index, ref in enumerate(items):
            try:
                if not isinstance(ref, Mapping):
                    raise InvalidRequest("each item must be an object with id, or workspace and name")
                found = _find(store_, address(ref.get("id"), ref.get("workspace"), ref.get("name"))).capsule
            except MossError as err:
                raise type(err)(
                    f"items[{index}]: {err.message}",
                    code=err.code,
                    status=err.status,
                    path=err.path,
                    line=err.line,
                    details={**err.details, "index": index, "ref": ref},
                ) from None
            text = found.text if wanted is None else core.select_sections(found.text, wanted)
            if not text:
                continue
            parts.append(
                {
                    "id": found.id,
                    "workspace": found.workspace,
                    "name": found.name or "",
                    "display_name": found.title or found.name or found.id,
                    "text": text,
                    "chars": core.count_chars(text),
                }
            )
        if bundle_format == "markdown":
            bundle = "\n\n---\n\n".join(f"## {part['display_name']}\n\n{part['text']}" for part in parts)
        else:
            bundle = json.dumps({"parts": parts}, ensure_ascii=False, indent=2)
        chars = core.count_chars(bundle)
        if limit > 0 and chars > limit:
            raise core.too_large_error("COMPOSE_TOO_LARGE", "Composed bundle exceeds capsule_max_chars", limit, chars)
        result: dict[str, Any] = {"bundle_text": bundle, "bundle_chars": chars, "parts_count": len(parts)}
        if target is not None:
            if not parts:
                raise InvalidRequest("nothing to store: the bundle is empty", details={"field": "store_as"})
            result["stored"] = _store_locked(
                ctx, bundle, target.get("workspace"), target.get("name"), None, None, None, target.get("mode"), wanted is not None, None, None, None
            )
    return result


# --------------------------------------------------------------------------- export / import / purge


def check_transfer_path(raw: Any, ctx: Context, *, reading: bool) -> Path:
    """Check an export/import path: `.jsonl`, no `..`, no symlinked file or parent folder, and
    (unless `allow_unsafe_paths`) directly inside an allowed folder: `~/.moss/exports/`, the
    workspace's `.moss/exports/`, or an `allowed_paths` entry.

    Raises InvalidRequest (details.reason) before anything is read or written.
    """
    text = _text(raw, "path")
    if not text:
        raise InvalidRequest("path is required", details={"field": "path"})
    if "\0" in text:
        raise InvalidRequest("path must not contain NUL characters", details={"reason": "nul"})
    path = Path(text).expanduser()
    if ".." in path.parts:
        raise InvalidRequest("path must not contain '..'", details={"reason": "traversal", "path": text})
    if path.suffix != ".jsonl" or path.name == ".jsonl":
        raise InvalidRequest("path must name a .jsonl file", details={"reason": "extension", "path": text})
    if not path.is_absolute():
        path = Path.cwd() / path
    parent = path.parent
    if parent.is_symlink():
        raise InvalidRequest("the folder of path is a symbolic link", details={"reason": "symlink", "path": text})
    if path.is_symlink():
        raise InvalidRequest("path is a symbolic link", details={"reason": "symlink", "path": text})
    if not ctx.config.allow_unsafe_paths:
        allowed = [ctx.exports_dir(), ctx.root / EXPORTS_DIR, *ctx.config.allowed_paths]
        real_parent = Path(os.path.realpath(parent))
        if not any(real_parent == Path(os.path.realpath(folder)) for folder in allowed):
            raise InvalidRequest(
                "path must be directly inside an allowed folder",
                details={"reason": "not_allowed", "path": text, "allowed": [str(folder) for folder in allowed]},
                hint="add the folder to allowed_paths in .moss/config.toml (or ~/.moss/config.toml)",
            )
    if reading and not path.exists():
        raise NotFound("no such import file", path=text)
    return path


def export(ctx: Context, path: Any = None, workspace: Any = None, include_deleted: Any = None) -> dict[str, Any]:
    """Write capsules to a JSONL file: Moss's header line, then one record per capsule (by id).

    The file is written atomically with mode 0600; a file that is not an earlier export is
    never replaced. Returns `{path, count, exported_at}`. Raises InvalidRequest for a refused
    path, Conflict ALREADY_EXISTS, and any unreadable capsule file's error (an export is whole).
    """
    now = ctx.now_ms()
    ws_text = _filter(workspace, "workspace")
    ws = core.normalize(ws_text) if ws_text else None
    deleted_too = _flag(include_deleted, "include_deleted", False)
    if path is None:
        folder = ctx.exports_dir()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        stamp = core.ms_to_rfc3339(now - now % 1000).replace("-", "").replace(":", "")
        label = core.encode_component(ws) if ws else "all"
        path = str(folder / f"{label}-{stamp}.jsonl")
    target = check_transfer_path(path, ctx, reading=False)
    if not target.parent.is_dir() and target.parent == ctx.root / EXPORTS_DIR:
        # The workspace's own export folder is git-ignored and made on first use, like the
        # home one; any other folder must exist already.
        with fs.folder_fd(target.parent, create=True):
            pass
    if not target.parent.is_dir():
        raise NotFound("the export folder does not exist", path=str(target.parent))
    scan = ctx.store.scan(ws, include_deleted=deleted_too)
    raise_first(scan.problems)
    chosen = sorted((s.capsule for s in scan.capsules if deleted_too or not s.capsule.deleted), key=lambda c: c.id)
    exported_at = now // 1000
    lines = [core.render_record(core.export_header(exported_at))]
    lines.extend(core.render_record(core.capsule_to_record(c)) for c in chosen)
    if target.exists() and not _is_export(target):
        raise Conflict("path exists and is not a moss export; refusing to replace it", code="ALREADY_EXISTS", path=str(target))
    fs.write_atomic(target, ("\n".join(lines) + "\n").encode("utf-8"), mode=0o600)
    os.chmod(target, 0o600)
    return {"path": str(target), "count": len(chosen), "exported_at": exported_at}


def _is_export(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            first = handle.readline(4096)
        return json.loads(first).get("_moss_export") is True
    except (OSError, ValueError, AttributeError):
        return False


def import_capsules(ctx: Context, path: Any = None, mode: Any = None) -> dict[str, Any]:
    """Restore capsules from a Moss JSONL export, all or nothing.

    Derived fields are recomputed. Returns `{imported, skipped, errors: [{line, id?, name?,
    code, message}]}`; any error means nothing was written. Raises InvalidRequest for a refused
    path or mode, InvalidDocument FILE_TOO_LARGE (413) past 25 MB.
    """
    import_mode = _text(mode, "mode") or "error"
    if import_mode not in core.IMPORT_MODES:
        raise InvalidRequest("mode must be one of: error, replace, rename", details={"field": "mode", "value": import_mode})
    source = check_transfer_path(path, ctx, reading=True)
    data = _read_no_follow(source)
    now = ctx.now_ms()
    records: list[tuple[int, Capsule]] = []
    errors: list[dict[str, Any]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        if len(raw) > MAX_IMPORT_LINE_BYTES:
            errors.append({"line": number, "code": "PARSE_ERROR", "message": f"line is longer than {MAX_IMPORT_LINE_BYTES} bytes"})
            continue
        try:
            parsed = core.parse_record(raw.decode("utf-8"), now_ms=now)
        except UnicodeDecodeError:
            errors.append({"line": number, "code": "PARSE_ERROR", "message": "line is not valid UTF-8"})
            continue
        except core.RecordProblem as problem:
            item: dict[str, Any] = {"line": number}
            if problem.id:
                item["id"] = problem.id
            if problem.name:
                item["name"] = problem.name
            item.update(code=problem.code, message=problem.message)
            errors.append(item)
            continue
        if parsed is not None:
            records.append((number, parsed))
    if errors:
        return {"imported": 0, "skipped": 0, "errors": errors}
    store_ = ctx.store
    with store_.writing():
        scan = store_.scan(None, include_deleted=True)
        raise_first(scan.problems)  # an unreadable capsule could be a collision we cannot see
        actions, errors = core.plan_import([s.capsule for s in scan.capsules], records, import_mode, ctx.new_id)
        if errors:
            return {"imported": 0, "skipped": 0, "errors": errors}
        _apply_import(store_, {s.capsule.id: s for s in scan.capsules}, actions)
    return {"imported": len(actions), "skipped": 0, "errors": []}


def _read_no_follow(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise NotFound("no such import file", path=str(path)) from None
    except OSError as exc:
        raise InvalidRequest(f"cannot open import file: {exc.strerror}", path=str(path), details={"reason": "open"}) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InvalidRequest("import path is not a regular file", path=str(path), details={"reason": "not_regular"})
        if info.st_size > MAX_IMPORT_BYTES:
            raise InvalidDocument(
                f"import file is {info.st_size} bytes; the limit is {MAX_IMPORT_BYTES}",
                code="FILE_TOO_LARGE",
                status=413,
                path=str(path),
                details={"max_bytes": MAX_IMPORT_BYTES, "actual_bytes": info.st_size},
            )
        return handle.read(MAX_IMPORT_BYTES + 1)


def _apply_import(store_: CapsuleStore, existing: dict[str, StoredCapsule], actions: Sequence[core.ImportAction]) -> None:
    # Files that move (a replace that changes name or deleted state) leave their place first, so
    # a create or another move can take the slot they held.
    pending: list[tuple[Capsule, str | None]] = []
    in_place: list[tuple[StoredCapsule, Capsule]] = []
    for action in actions:
        if action.replaces is None:
            pending.append((action.capsule, None))
            continue
        old = existing[action.replaces]
        if core.capsule_relpath(action.capsule) == old.relpath:
            in_place.append((old, action.capsule))
            continue
        assert old.snapshot.data is not None
        old_text, _bom = document.decode(old.snapshot.data, str(old.path))
        pending.append((action.capsule, core.edit_capsule(old_text, action.capsule, str(old.path))))
        store_.remove(old)
    for old, capsule in in_place:
        store_.replace_file(old, capsule)
    for capsule, text in pending:
        store_.create(capsule, text=text)


def purge(ctx: Context, workspace: Any = None, older_than_days: Any = None) -> dict[str, Any]:
    """Hard-delete soft-deleted capsules (of one workspace, or older than N days).

    Returns `{purged, message}`. Raises InvalidRequest for a negative `older_than_days`.
    """
    days = _count(older_than_days, "older_than_days")
    ws_text = _filter(workspace, "workspace")
    ws = core.normalize(ws_text) if ws_text else None
    now = ctx.now_ms()
    cutoff = None if days is None else now - days * 86_400_000
    store_ = ctx.store
    purged = 0
    with store_.writing():
        scan = store_.scan(ws, include_deleted=True)
        for stored in scan.capsules:
            deleted_at = stored.capsule.deleted_ms
            if deleted_at is None or (cutoff is not None and deleted_at > cutoff):
                continue
            store_.remove(stored)
            purged += 1
    noun = "capsule" if purged == 1 else "capsules"
    return {"purged": purged, "message": f"Purged {purged} soft-deleted {noun}", **_problems(scan)}


# --------------------------------------------------------------------------- history (git)


def history(ctx: Context, id: Any = None, workspace: Any = None, name: Any = None, limit: Any = None) -> dict[str, Any]:
    """The committed versions of a capsule, newest first, following its moves (a delete is one).

    Addressed by id, only versions of that capsule are listed; by name, every capsule that held
    the name. Returns `{id?, workspace, name?, path, dirty, versions: [{commit, date, author,
    email, summary, path, id, removed}]}`. Raises RepoError outside a git repository, NotFound.
    """
    from moss_files.foundation import gitrepo

    where = address(id, workspace, name)
    count = _count(limit, "limit")
    store_ = ctx.store
    try:
        found: StoredCapsule | None = _find(store_, where, include_deleted=True)
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
    versions = gitrepo.file_history(repo, relpath)
    base_rel = gitrepo.relpath_in_repo(repo, store_.base)
    rows: list[dict[str, Any]] = []
    for version in versions:
        present, blob_id = _capsule_id_at(repo, version.commit, version.path, base_rel)
        if where.id is not None and blob_id not in (where.id, None):
            continue
        # A commit that moved the file away (a soft delete) shows as removed from this path.
        rows.append({**gitrepo.version_to_dict(version), "id": blob_id, "removed": not present})
        if count and len(rows) >= count:
            break
    status = str(repo.git.status("--porcelain", "--", relpath)) if found is not None else ""
    data: dict[str, Any] = {}
    if found is not None:
        data.update(id=found.capsule.id, workspace=found.capsule.workspace, name=found.capsule.name)
    else:
        data.update(workspace=where.workspace_norm, name=where.name_norm)
    data.update(path=relpath, dirty=bool(status.strip()), versions=rows)
    return data


def _capsule_id_at(repo: Any, commit: str, path: str, base_rel: str) -> tuple[bool, str | None]:
    """Whether the file exists at the commit, and the id of the capsule it held (None if unreadable)."""
    from moss_files.foundation import gitrepo

    data = gitrepo.show_file(repo, commit, path)
    if data is None:
        return False, None
    try:
        relpath = Path(path).relative_to(base_rel).as_posix()
        doc = document.parse_bytes(data, f"{commit[:12]}:{path}")
        return True, core.parse_capsule(doc, PurePosixPath(relpath), mtime_ms=0).id
    except (MossError, ValueError):
        return True, None


def fetch_at(
    ctx: Context,
    rev: Any = None,
    id: Any = None,
    workspace: Any = None,
    name: Any = None,
    include_text: Any = None,
    include_deleted: Any = None,
) -> dict[str, Any]:
    """A capsule as it was at a git revision: the fetch shape plus `at: {rev, commit, path}`.

    Raises NotFound (no such revision, or no such capsule then), RepoError.
    """
    from moss_files.foundation import gitrepo

    rev_text = _text(rev, "rev")
    if not rev_text:
        raise InvalidRequest("rev is required", details={"field": "rev"})
    where = address(id, workspace, name)
    deleted_too = _flag(include_deleted, "include_deleted", False)
    repo = gitrepo.open_repo(ctx.root)
    commit = gitrepo.resolve(repo, rev_text)
    base_rel = gitrepo.relpath_in_repo(repo, ctx.store.base)
    if where.name_norm is not None:
        folder = f"{base_rel}/{core.workspace_dir(where.workspace_norm)}"
        candidates = [f"{folder}/{core.slot_filename(where.name_norm)}"]
        if deleted_too:
            candidates += gitrepo.list_files(repo, commit, f"{folder}/{core.DELETED_DIR}")
    else:
        assert where.id is not None
        if not core.is_capsule_id(where.id):
            candidates = []
        else:
            named = [p for p in gitrepo.list_files(repo, commit, base_rel) if where.id in p.rsplit("/", 1)[-1]]
            candidates = named + gitrepo.grep_files(repo, commit, where.id, base_rel)
    matches: list[tuple[Capsule, str]] = []
    for candidate in dict.fromkeys(candidates):
        data = gitrepo.show_file(repo, commit, candidate)
        if data is None:
            continue
        doc = document.parse_bytes(data, f"{rev_text}:{candidate}")
        relpath = PurePosixPath(PurePosixPath(candidate).relative_to(base_rel).as_posix())
        found = core.parse_capsule(doc, relpath, mtime_ms=0, path=f"{rev_text}:{candidate}")
        wanted = found.id == where.id if where.id is not None else found.name_norm == where.name_norm
        if wanted and (deleted_too or not found.deleted):
            matches.append((found, candidate))
    if not matches:
        shown = where.id or f"{where.workspace_norm}/{where.name_norm}"
        raise NotFound(f"capsule {shown} not found at {rev_text}", details={"rev": rev_text, "commit": commit})
    capsule_at, at_path = max(matches, key=lambda m: (not m[0].deleted, m[0].updated_ms))
    data_out = core.capsule_to_dict(capsule_at, include_text=_flag(include_text, "include_text", True))
    data_out["at"] = {"rev": rev_text, "commit": commit, "path": at_path}
    return data_out


OPERATIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "store": store,
    "fetch": fetch,
    "fetch_many": fetch_many,
    "update": update,
    "append": append,
    "delete": delete,
    "latest": latest,
    "list": list_capsules,
    "inventory": inventory,
    "compose": compose,
    "export": export,
    "import": import_capsules,
    "purge": purge,
    "history": history,
    "fetch_at": fetch_at,
}
"""Moss's operation names -> use cases; an MCP tool is `OPERATIONS[name](ctx, **arguments)`."""

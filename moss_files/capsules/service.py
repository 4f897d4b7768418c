"""Capsule use cases: Moss's operations over capsule files, returning Moss's JSON shapes.

Shell layer: each public function takes the foundation `Context` and the operation's typed
keyword parameters (Moss's names and defaults; a blank optional text means no value), and
returns the seed's output dict, the one `moss <op> --json` prints and the `moss.*` MCP tool
returns. Errors are MossErrors with the seed's codes. Export/import live in `transfer`, the
git history in `history`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from moss_files.capsules import model as core
from moss_files.capsules.model import Address, Capsule
from moss_files.capsules.store import CapsuleStore, Scan
from moss_files.foundation import document
from moss_files.foundation.arguments import choice, count, optional, refuse, required, texts
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, NotFound, error_body

__all__ = [
    "Context",
    "append",
    "compose",
    "delete",
    "fetch",
    "fetch_many",
    "inventory",
    "latest",
    "list_capsules",
    "purge",
    "store",
    "update",
]

STORE_MODES = ("error", "replace")
BUNDLE_FORMATS = ("markdown", "json")


# --------------------------------------------------------------------------- shared steps


def now_ms(ctx: Context) -> int:
    """The context's time in milliseconds since the epoch, as capsules store it."""
    return core.datetime_to_ms(ctx.now())


def _store_of(ctx: Context) -> CapsuleStore:
    return CapsuleStore(ctx.root)


def _workspace(value: str | None) -> str:
    """A workspace argument: blank means the default one."""
    return optional(value) or core.DEFAULT_WORKSPACE


def _page(limit: int | None, offset: int | None, default: int, maximum: int) -> tuple[int, int]:
    # Moss reads a limit of 0 as "the default", not as "nothing".
    wanted = count(limit, "limit", default=default, minimum=0) or default
    return min(wanted, maximum), count(offset, "offset", default=0, minimum=0)


def address_of(ref: Any) -> Address:
    """The address one item of a list names ({id} or {workspace, name}); the items may come
    from JSON the caller wrote (`--items`), so each is checked where it is used."""
    if not isinstance(ref, Mapping):
        raise InvalidRequest("each item must be an object with id, or workspace and name")
    return core.address(ref.get("id"), ref.get("workspace"), ref.get("name"))


def _tags(tags: Sequence[str] | None) -> tuple[str, ...] | None:
    # A text is a sequence of texts too, but tags are a list: "a,b" is refused, not one tag.
    if isinstance(tags, str):
        raise refuse("tags", "must be a list of strings")
    return texts(tags) or None


def _ids(capsule: Capsule) -> dict[str, Any]:
    key = core.fetch_key(capsule)
    # v1.0 called it task_link; later Moss renamed it fetch_key. Both, for clients of either.
    return {"id": capsule.id, "task_link": key, "fetch_key": key}


def problems_of(scan: Scan) -> dict[str, Any]:
    """`{problems: [...]}` for the files a scan could not read, `{}` when there are none."""
    if not scan.problems:
        return {}
    return {"problems": [error_body(problem)["error"] for problem in scan.problems]}


def _newest_first(capsules: list[Capsule]) -> list[Capsule]:
    return sorted(capsules, key=lambda c: (c.updated_ms, c.id), reverse=True)


def _orchestration_match(capsule: Capsule, run_id: str | None, phase: str | None, role: str | None) -> bool:
    return (run_id is None or capsule.run_id == run_id) and (phase is None or capsule.phase == phase) and (role is None or capsule.role == role)


def _without_bom(text: str | None) -> str | None:
    """A capsule text without the BOM of the file it was read from (`moss store < capsule.md`
    saved by Notepad): with it, the first section's header would not be a header."""
    return None if text is None else document.strip_bom(text)[0]


def _check_text(ctx: Context, capsule_text: str, *, allow_thin: bool) -> None:
    core.check_text(capsule_text, max_chars=ctx.config.capsule_max_chars, allow_thin=allow_thin)


# --------------------------------------------------------------------------- store / fetch


def store(
    ctx: Context,
    *,
    capsule_text: str | None,
    workspace: str | None = None,
    name: str | None = None,
    title: str | None = None,
    tags: Sequence[str] | None = None,
    source: str | None = None,
    mode: str | None = None,
    allow_thin: bool = False,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
) -> dict[str, Any]:
    """Store a new capsule, or with `mode: "replace"` overwrite the live one of that name.

    Returns `{id, task_link, fetch_key}`. Raises Conflict NAME_ALREADY_EXISTS (mode error),
    InvalidDocument CAPSULE_TOO_LARGE / CAPSULE_TOO_THIN, InvalidRequest for bad fields.
    """
    with _store_of(ctx).writing():
        return _store_locked(
            ctx,
            capsule_text=capsule_text,
            workspace=workspace,
            name=name,
            title=title,
            tags=tags,
            source=source,
            mode=mode,
            allow_thin=allow_thin,
            run_id=run_id,
            phase=phase,
            role=role,
        )


def _store_locked(
    ctx: Context,
    *,
    capsule_text: str | None,
    workspace: str | None,
    name: str | None,
    title: str | None = None,
    tags: Sequence[str] | None = None,
    source: str | None = None,
    mode: str | None,
    allow_thin: bool,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
) -> dict[str, Any]:
    # The text is kept byte for byte (a BOM from the file it was read from aside): only an empty
    # one is refused here, the lint judges the rest.
    capsule_text = _without_bom(capsule_text)
    if not capsule_text:
        raise refuse("capsule_text", "is required")
    store_mode = choice(optional(mode) or "error", STORE_MODES, "mode", upper=False)
    if name is not None and name != "" and not core.normalize(name):
        raise refuse("name", "must not be blank")
    name_raw = name or None
    _check_text(ctx, capsule_text, allow_thin=allow_thin)
    now = now_ms(ctx)
    title_text = optional(title)
    new = Capsule(
        id=ctx.new_ulid(),
        workspace=_workspace(workspace),
        name=name_raw,
        text=capsule_text,
        created_ms=now,
        updated_ms=now,
        title=title_text if title_text is not None else name_raw,
        tags=_tags(tags),
        source=optional(source),
        run_id=optional(run_id),
        phase=optional(phase),
        role=optional(role),
    )
    core.check_fields(new)
    store_ = _store_of(ctx)
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


def fetch(
    ctx: Context,
    *,
    id: str | None = None,
    workspace: str | None = None,
    name: str | None = None,
    include_text: bool = True,
    include_deleted: bool = False,
) -> dict[str, Any]:
    """One capsule by id or by workspace+name, with its text unless `include_text` is false.

    Raises NotFound (soft-deleted ones too, unless `include_deleted`), InvalidRequest
    AMBIGUOUS_ADDRESSING.
    """
    where = core.address(id, workspace, name)
    found = _store_of(ctx).find(where, include_deleted=include_deleted)
    return core.capsule_to_dict(found.capsule, include_text=include_text)


def fetch_many(
    ctx: Context,
    *,
    items: Sequence[Mapping[str, Any]],
    include_text: bool = True,
    include_deleted: bool = False,
) -> dict[str, Any]:
    """Up to 50 capsules; a failed item goes to `errors` with the caller's ref, the rest succeed.
    Each item is fetch's shape plus `task_link` (Moss's spec: each fetch_many item has one).

    Read under the writers' lock, so no tool write lands between two items.
    """
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise refuse("items", "must be a list of {id} or {workspace, name} objects")
    if len(items) > core.MAX_FETCH_MANY:
        raise InvalidRequest(f"too many items: {len(items)} (max {core.MAX_FETCH_MANY})", details={"max": core.MAX_FETCH_MANY, "actual": len(items)})
    found: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    store_ = _store_of(ctx)
    with store_.writing():
        for ref in items:
            try:
                stored = store_.find(address_of(ref), include_deleted=include_deleted)
            except MossError as err:
                errors.append({"ref": ref, "code": err.code, "message": err.message})
                continue
            item = core.capsule_to_dict(stored.capsule, include_text=include_text)
            found.append({**item, "task_link": item["fetch_key"]})
    return {"items": found, "errors": errors}


# --------------------------------------------------------------------------- change


def update(
    ctx: Context,
    *,
    id: str | None = None,
    workspace: str | None = None,
    name: str | None = None,
    capsule_text: str | None = None,
    title: str | None = None,
    tags: Sequence[str] | None = None,
    source: str | None = None,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
    allow_thin: bool = False,
) -> dict[str, Any]:
    """Change a live capsule's editable fields ('' clears an optional one); lint when the text changes.

    The change is applied to the file as it is at write time, so a hand edit made meanwhile is
    kept. Returns `{id, task_link, fetch_key}`. Raises NotFound, InvalidRequest (no field),
    CAPSULE_TOO_LARGE / CAPSULE_TOO_THIN.
    """
    where = core.address(id, workspace, name)
    changes: dict[str, Any] = {}
    capsule_text = _without_bom(capsule_text)
    if capsule_text is not None:
        if not capsule_text:
            raise refuse("capsule_text", "must not be empty")
        _check_text(ctx, capsule_text, allow_thin=allow_thin)
        changes["text"] = capsule_text
    for field_name, value in (("title", title), ("source", source), ("run_id", run_id), ("phase", phase), ("role", role)):
        if value is not None:
            changes[field_name] = optional(value)
    if tags is not None:
        changes["tags"] = _tags(tags)
    if not changes:
        raise InvalidRequest("at least one editable field must be given: capsule_text, title, tags, source, run_id, phase, role")
    now = now_ms(ctx)
    store_ = _store_of(ctx)
    with store_.writing():
        stored = store_.find(where)

        def apply(current: Capsule) -> Capsule:
            if current.deleted:
                raise NotFound(f"capsule {current.id} was deleted", details={"id": current.id})
            updated = replace(current, **changes, updated_ms=now)
            core.check_fields(updated)
            return updated

        # relocate: a file kept under a name from before the Windows escape moves to its slot
        result = store_.relocate(store_.rewrite(stored, apply))
    return _ids(result.capsule)


def delete(ctx: Context, *, id: str | None = None, workspace: str | None = None, name: str | None = None) -> dict[str, Any]:
    """Soft-delete a live capsule: stamp `deleted_at` and move it to `deleted/`, freeing its name.

    Returns `{deleted: true, id}`. Raises NotFound.
    """
    where = core.address(id, workspace, name)
    now = now_ms(ctx)
    store_ = _store_of(ctx)
    with store_.writing():
        stored = store_.find(where)
        marked = store_.rewrite(stored, lambda current: None if current.deleted else replace(current, deleted_ms=now, updated_ms=now))
        if not marked.capsule.deleted:
            raise NotFound(f"capsule {stored.capsule.id} not found", details={"id": stored.capsule.id})
        store_.relocate(marked)
    return {"deleted": True, "id": marked.capsule.id}


def append(
    ctx: Context,
    *,
    section: str | None,
    content: str | None,
    id: str | None = None,
    workspace: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Add text to one markdown section of a live capsule (exact header name, any case).

    A placeholder body ('(none)', 'TBD', '-', empty, ..., also as a list's only item: '- (none)')
    is replaced; a list item added to a list continues it; anything else follows after a blank
    line. No lint; the size limit applies. Returns
    `{id, fetch_key?, section_hit, replaced}`. Raises InvalidRequest when the section is
    missing (details.available) or the capsule has no sections.
    """
    where = core.address(id, workspace, name)
    section_name = required(section, "section")
    # The content is added as written (never stripped); only a blank one is refused.
    if content is None or not content.strip():
        raise refuse("content", "is required")
    if "\0" in content:
        raise refuse("content", "must not contain NUL characters")
    addition = content
    now = now_ms(ctx)
    outcome: dict[str, Any] = {}
    store_ = _store_of(ctx)

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
        stored = store_.find(where)
        result = store_.rewrite(stored, apply).capsule
    data: dict[str, Any] = {"id": result.id}
    if result.name:
        data["fetch_key"] = core.fetch_key(result)
    data.update(outcome)
    return data


# --------------------------------------------------------------------------- browse


def latest(
    ctx: Context,
    *,
    workspace: str | None = None,
    include_text: bool = False,
    include_deleted: bool = False,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
    through_index: bool | None = None,
) -> dict[str, Any]:
    """The most recently updated capsule of a workspace: `{item}` (a summary unless
    `include_text`), `{item: null}` when there is none. `through_index`: see `list_capsules`."""
    ws = core.normalize(_workspace(workspace))
    filters = (optional(run_id), optional(phase), optional(role))
    indexed = _through_index(ctx, ws, include_deleted, filters, None, 1, 0, through_index)
    if indexed is not None:
        page, _total = indexed
        return {"item": core.capsule_to_dict(page[0], include_text=include_text) if page else None}
    scan = _store_of(ctx).scan(ws, include_deleted=include_deleted)
    candidates = [s.capsule for s in scan.capsules if (include_deleted or not s.capsule.deleted) and _orchestration_match(s.capsule, *filters)]
    ordered = _newest_first(candidates)
    item = None
    if ordered:
        item = core.capsule_to_dict(ordered[0], include_text=include_text)
    return {"item": item, **problems_of(scan)}


def list_capsules(
    ctx: Context,
    *,
    workspace: str | None = None,
    limit: int | None = None,
    offset: int | None = None,
    include_deleted: bool = False,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
    through_index: bool | None = None,
) -> dict[str, Any]:
    """Summaries of one workspace's capsules, newest first, never their text.

    Returns `{items, pagination: {limit, offset, has_more, total}, sort: "updated_at_desc"}`.
    With many capsules (`through_index` None: INDEX_FROM files or more, a search index built
    already, and a page smaller than the scope) the order and count come from the index and
    only the page's files are read (and those of capsules whose filtered values the index
    holds casefolded but the file does not); wherever the index cannot answer exactly as the
    files would (see `_through_index`), the files are read instead. True or False forces one
    way (True still reads the files where the index cannot answer).
    """
    ws = core.normalize(_workspace(workspace))
    page_limit, page_offset = _page(limit, offset, core.LIST_DEFAULT_LIMIT, core.LIST_MAX_LIMIT)
    filters = (optional(run_id), optional(phase), optional(role))
    indexed = _through_index(ctx, ws, include_deleted, filters, None, page_limit, page_offset, through_index)
    if indexed is not None:
        return _page_dict(*indexed, page_limit, page_offset)
    scan = _store_of(ctx).scan(ws, include_deleted=include_deleted)
    chosen = [s.capsule for s in scan.capsules if (include_deleted or not s.capsule.deleted) and _orchestration_match(s.capsule, *filters)]
    return {**_paged(chosen, page_limit, page_offset), **problems_of(scan)}


def inventory(
    ctx: Context,
    *,
    workspace: str | None = None,
    tag: str | None = None,
    name_prefix: str | None = None,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
    include_deleted: bool = False,
    limit: int | None = None,
    offset: int | None = None,
    through_index: bool | None = None,
) -> dict[str, Any]:
    """Summaries across all workspaces, filtered, newest first, never their text (shape and
    `through_index` as list)."""
    ws_filter = optional(workspace)
    ws = core.normalize(ws_filter) if ws_filter else None
    tag_filter = optional(tag)
    # The prefix is matched against normalized names, literally (no wildcards), without the
    # trimming that would turn "my " into "my".
    prefix = re.sub(r"\s+", " ", name_prefix.lower()).lstrip() if name_prefix and name_prefix.strip() else None
    page_limit, page_offset = _page(limit, offset, core.INVENTORY_DEFAULT_LIMIT, core.INVENTORY_MAX_LIMIT)
    filters = (optional(run_id), optional(phase), optional(role))
    indexed = _through_index(ctx, ws, include_deleted, filters, prefix, page_limit, page_offset, through_index, tag_filter)
    if indexed is not None:
        return _page_dict(*indexed, page_limit, page_offset)
    scan = _store_of(ctx).scan(ws, include_deleted=include_deleted)
    chosen = [
        s.capsule
        for s in scan.capsules
        if (include_deleted or not s.capsule.deleted)
        and _orchestration_match(s.capsule, *filters)
        and (tag_filter is None or tag_filter in (s.capsule.tags or ()))
        and (prefix is None or (s.capsule.name_norm or "").startswith(prefix) and s.capsule.name_norm is not None)
    ]
    return {**_paged(chosen, page_limit, page_offset), **problems_of(scan)}


def _paged(capsules: list[Capsule], limit: int, offset: int) -> dict[str, Any]:
    ordered = _newest_first(capsules)
    return _page_dict(ordered[offset : offset + limit], len(ordered), limit, offset)


def _page_dict(page: list[Capsule], total: int, limit: int, offset: int) -> dict[str, Any]:
    items = [{**core.summary_to_dict(c), "fetch_key": core.fetch_key(c)} for c in page]
    return {
        "items": items,
        "pagination": {"limit": limit, "offset": offset, "has_more": offset + len(page) < total, "total": total},
        "sort": "updated_at_desc",
    }


# Below this many candidate files, reading them is quicker than opening the index.
INDEX_FROM = 300


def _through_index(
    ctx: Context,
    ws: str | None,
    include_deleted: bool,
    filters: tuple[str | None, str | None, str | None],
    prefix: str | None,
    limit: int,
    offset: int,
    through_index: bool | None,
    tag: str | None = None,
) -> tuple[list[Capsule], int] | None:
    """One page of capsules, newest first, and how many match, with the order and count taken
    from the search index; None where the files must be read instead (see `list_capsules`).

    The index is refreshed first (or vouched for by its watcher), so it holds every capsule
    file as it is now; what it cannot show is checked here: a stray entry beside the capsule
    files (the store's census of its folders: no file opened, and a folder listed only when
    it changed), a file it could not read, a count of items that differs from the census's
    count of files (a change in between), two capsules tied in the order at
    the page (the file scan's order of equals is its own), and a page file that changed since
    the refresh. The index holds run, phase, role, tags and names casefolded, and marks the
    capsules whose values are not: with such a filter, those capsules' files decide."""
    if through_index is False:
        return None
    store_ = _store_of(ctx)
    files, strays = store_.census(ws, include_deleted=include_deleted)
    if strays:
        return None
    run_id, phase, role = filters
    unfiltered = run_id is None and phase is None and role is None and tag is None and prefix is None
    # Few files, or a page that holds every file anyway: reading them all costs no more.
    if through_index is None and (files < INDEX_FROM or (unfiltered and offset == 0 and limit >= files)):
        return None
    from moss_files.index import service as index_service

    wanted = {field: value for field, value in (("run", run_id), ("phase", phase), ("role", role), ("tag", tag)) if value is not None}
    # One row before the page and one after it: a tie across the page's edge shows.
    first = max(offset - 1, 0)
    try:
        found = index_service.capsule_items(
            ctx,
            folder=None if ws is None else core.workspace_dir(ws),
            include_deleted=include_deleted,
            filters=wanted,
            name_prefix=prefix,
            start=first,
            count=offset - first + limit + 1,
            only_if_built=through_index is None,
        )
    except MossError:
        return None
    if found is None or found.unreadable or found.undated or found.items != files:
        return None
    window: list[tuple[int | None, str, str, bool, Capsule | None]] = []
    for path, capsule_id, updated, status, to_check in found.rows:
        updated_ms, deleted, capsule = core.parse_time(updated), status == "deleted", None
        if to_check:
            # A capsule whose filtered values differ from their casefolded form: its file decides.
            capsule = _read_as_indexed(store_, path, updated_ms, capsule_id, deleted)
            if capsule is None:
                return None
            if not (
                _orchestration_match(capsule, *filters)
                and (tag is None or tag in (capsule.tags or ()))
                and (prefix is None or (capsule.name_norm is not None and capsule.name_norm.startswith(prefix)))
            ):
                continue
        window.append((updated_ms, capsule_id, path, deleted, capsule))
    if found.total is None:
        total = len(window)
        window = window[first : offset + limit + 1]
    else:
        total = found.total
    keys = [(updated_ms, capsule_id) for updated_ms, capsule_id, _path, _deleted, _capsule in window]
    if any(key == following for key, following in zip(keys, keys[1:], strict=False)):
        return None
    page: list[Capsule] = []
    for updated_ms, capsule_id, path, deleted, capsule in window[offset - first : offset - first + limit]:
        capsule = capsule or _read_as_indexed(store_, path, updated_ms, capsule_id, deleted)
        if capsule is None:
            return None
        page.append(capsule)
    return page, total


def _read_as_indexed(store_: CapsuleStore, relpath: str, updated_ms: int | None, capsule_id: str, deleted: bool) -> Capsule | None:
    """The capsule in a file the index names, or None when the file no longer holds what the
    index says (changed since the refresh) or cannot be read."""
    try:
        stored = store_.read(store_.root / relpath)
    except MossError:
        return None
    if stored is None or (stored.capsule.updated_ms, stored.capsule.id, stored.capsule.deleted) != (updated_ms, capsule_id, deleted):
        return None
    return stored.capsule


# --------------------------------------------------------------------------- compose


def compose(
    ctx: Context,
    *,
    items: Sequence[Mapping[str, Any]],
    format: str | None = None,
    sections: Sequence[str] | None = None,
    store_as: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble capsules into one bundle, in the order given; all or nothing.

    Markdown parts are `## <title, else name, else id>` then the text, separated by `---`
    lines; `json` gives `{"parts": [...]}`. `sections` keeps only those sections (in that
    order; missing or placeholder ones skipped, capsules left empty omitted). `store_as`
    ({name, workspace?, mode?}) stores the bundle (linted, unless sections were filtered).
    Returns `{bundle_text, bundle_chars, parts_count, stored?}`. Raises NotFound for any missing
    capsule (with details.index), InvalidDocument COMPOSE_TOO_LARGE (413).
    """
    if isinstance(items, str | bytes) or not isinstance(items, Sequence) or not items:
        raise refuse("items", "is required and must not be empty")
    if len(items) > core.MAX_FETCH_MANY:
        raise InvalidRequest(f"too many items: {len(items)} (max {core.MAX_FETCH_MANY})", details={"max": core.MAX_FETCH_MANY, "actual": len(items)})
    bundle_format = choice(optional(format) or "markdown", BUNDLE_FORMATS, "format", upper=False)
    wanted: list[str] | None = None
    if sections is not None:
        if isinstance(sections, str) or not all(isinstance(s, str) and s.strip() for s in sections):
            raise refuse("sections", "must be a list of section names")
        wanted = list(sections) or None
    target: Mapping[str, Any] | None = None
    if store_as is not None:
        if bundle_format == "json":
            raise InvalidRequest('format "json" cannot be stored: a JSON bundle is not a capsule', details={"field": "store_as"})
        stored_name = store_as.get("name") if isinstance(store_as, Mapping) else None
        if not isinstance(stored_name, str) or not stored_name:
            raise InvalidRequest("store_as.name is required", details={"field": "store_as"})
        target = store_as
    limit = ctx.config.capsule_max_chars
    store_ = _store_of(ctx)
    with store_.writing():
        parts: list[dict[str, Any]] = []
        for index, ref in enumerate(items):
            try:
                found = store_.find(address_of(ref)).capsule
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
                ctx,
                capsule_text=bundle,
                workspace=_text_or_none(target.get("workspace"), "store_as.workspace"),
                name=_text_or_none(target.get("name"), "store_as.name"),
                mode=_text_or_none(target.get("mode"), "store_as.mode"),
                allow_thin=wanted is not None,
            )
    return result


def _text_or_none(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise refuse(field, "must be a string")
    return value


# --------------------------------------------------------------------------- purge


def purge(
    ctx: Context,
    *,
    workspace: str | None = None,
    older_than_days: int | None = None,
    dry_run: bool = False,
    only_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Hard-delete soft-deleted capsules (of one workspace, or older than N days); with
    `dry_run`, only say which. `only_ids` narrows it to capsules a person confirmed from a dry
    run, so one deleted meanwhile is not purged unseen.

    Returns `{purged, message, dry_run, items: [{id, workspace, name?, deleted_at}]}` (Moss's
    `{purged, message}`, extended). Raises InvalidRequest for a negative `older_than_days`.
    """
    days = None if older_than_days is None else count(older_than_days, "older_than_days", default=0, minimum=0)
    ws_text = optional(workspace)
    ws = core.normalize(ws_text) if ws_text else None
    wanted = None if only_ids is None else set(only_ids)
    now = now_ms(ctx)
    cutoff = None if days is None else now - days * 86_400_000
    store_ = _store_of(ctx)
    items: list[dict[str, Any]] = []
    with store_.writing():
        scan = store_.scan(ws, include_deleted=True)
        for stored in scan.capsules:
            capsule = stored.capsule
            deleted_at = capsule.deleted_ms
            if deleted_at is None or (cutoff is not None and deleted_at > cutoff) or (wanted is not None and capsule.id not in wanted):
                continue
            if not dry_run:
                store_.remove(stored)
            item: dict[str, Any] = {"id": capsule.id, "workspace": capsule.workspace}
            if capsule.name is not None:
                item["name"] = capsule.name
            item["deleted_at"] = core.ms_to_seconds(deleted_at)
            items.append(item)
    purged = len(items)
    noun = "capsule" if purged == 1 else "capsules"
    message = f"Would purge {purged} soft-deleted {noun}" if dry_run else f"Purged {purged} soft-deleted {noun}"
    return {"purged": purged, "message": message, "dry_run": dry_run, "items": items, **problems_of(scan)}

"""Sharing insights between workspaces: export a bundle, preview it, import it selectively
(`loop_export`, `loop_import_preview`, `loop_import`; `moss insight export|preview|import`).

Shell layer: reads the insight files (`store`), selects with the index when a query is given,
sanitizes what leaves (`sanitize`), decides with the pure bundle core (`bundles`), and writes
the bundle file or the imported insights. A bundle file lives where Moss's exports may (directly
in `~/.moss/exports/`, the workspace's `.moss/exports/`, or an `allowed_paths` folder, unless
`allow_unsafe_paths`), ends in `.json`, and is never reached through a link. An import decides
everything before its first write and takes the whole bundle or none of it: an unreadable entry,
an unreadable insight file or an unknown selected id stops it with nothing written.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from moss_files.foundation import datafiles, fs
from moss_files.foundation.arguments import given_path
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound
from moss_files.loopflow import bundles
from moss_files.loopflow import insights as insight_core
from moss_files.loopflow.bundles import Bundle, Local
from moss_files.loopflow.sanitize import sanitize
from moss_files.loopflow.store import insight_store

__all__ = ["Context", "export_bundle", "import_bundle", "preview_bundle"]

EXPORTS_DIR = Path(".moss") / "exports"
MAX_BUNDLE_BYTES = 25 * 1024 * 1024
QUERY_MATCHES = 10_000


# --------------------------------------------------------------------------- paths


def check_bundle_path(raw: str | None, ctx: Context, *, reading: bool) -> Path:
    """A bundle path the caller may use: `.json`, no `..`, no link (file or folder), directly
    inside an allowed folder unless `allow_unsafe_paths`. Raises InvalidRequest (details.reason),
    NotFound for a bundle to read that does not exist."""
    path = given_path(raw)
    if path.suffix != ".json" or path.name == ".json":
        raise InvalidRequest("path must name a .json file", details={"reason": "extension", "path": raw})
    if path.parent.is_symlink() or path.is_symlink():
        raise InvalidRequest("path (or its folder) is a symbolic link", details={"reason": "symlink", "path": raw})
    if not ctx.config.allow_unsafe_paths:
        allowed = [ctx.home_folder() / EXPORTS_DIR, ctx.root / EXPORTS_DIR, *ctx.config.allowed_paths]
        real_parent = Path(os.path.realpath(path.parent))
        if not any(real_parent == Path(os.path.realpath(folder)) for folder in allowed):
            raise InvalidRequest(
                "path must be directly inside an allowed folder",
                details={"reason": "not_allowed", "path": raw, "allowed": [str(folder) for folder in allowed]},
                hint="use .moss/exports/ of the workspace, or add the folder to allowed_paths in .moss/config.toml",
            )
    if reading and not path.exists():  # a FIFO or folder there is refused by the read, by name
        raise NotFound("no such bundle file", path=raw)
    return path


def _is_bundle(path: Path) -> bool:
    try:
        data = datafiles.load_json(fs.read_given_file(path, max_bytes=MAX_BUNDLE_BYTES, what="bundle"), str(path))
    except (OSError, MossError):
        return False
    return isinstance(data, dict) and data.get("version") == bundles.BUNDLE_VERSION and isinstance(data.get("insights"), list)


def read_bundle(ctx: Context, raw_path: str | None) -> tuple[Path, Bundle]:
    """The bundle file at `raw_path`, parsed. Raises InvalidRequest (path), NotFound,
    InvalidDocument (FILE_TOO_LARGE, PARSE_ERROR, SCHEMA_ERROR)."""
    path = check_bundle_path(raw_path, ctx, reading=True)
    data = fs.read_given_file(path, max_bytes=MAX_BUNDLE_BYTES, what="bundle")
    parsed = datafiles.load_json(data, str(path), code="PARSE_ERROR", what="the bundle", unique_keys=True)
    return path, bundles.parse_bundle(parsed, str(path))


# --------------------------------------------------------------------------- export


def _local_insights(ctx: Context) -> list[insight_core.Insight]:
    items, problems = insight_store(ctx.root).read_all()
    if problems:
        first = problems[0]
        # A file we cannot read could be one the export or import must see: stop, name it.
        raise InvalidDocument(
            f"{len(problems)} insight files cannot be read; first: {first['message']}",
            code=first["code"],
            path=first["path"],
            line=first.get("line"),
            details={"problems": problems},
        )
    return [item for _path, item in items]


def _query_matches(ctx: Context, query: str) -> list[str]:
    from moss_files.index import query as search_query
    from moss_files.index.service import open_index

    parsed = search_query.parse_query(query)
    if parsed.is_empty:
        raise InvalidRequest("the query has nothing to search for", details={"query": query})
    now = ctx.now()

    def work(view: Any) -> list[str]:
        found = view.search(parsed, now=now, kinds=("insight",), limit=QUERY_MATCHES)
        return [hit.id for hit in found.hits]

    return open_index(ctx).run(work)


def _cleaner(ctx: Context) -> tuple[Any, dict[str, int]]:
    counts: dict[str, int] = {}
    home = str(ctx.home_folder())

    def clean(text: str) -> str:
        result = sanitize(text, root=str(ctx.root), home=home)
        for kind, number in result.found.items():
            counts[kind] = counts.get(kind, 0) + number
        return result.text

    return clean, counts


def export_bundle(
    ctx: Context,
    *,
    path: str | None = None,
    ids: list[str] | None = None,
    tags: list[str] | None = None,
    types: list[str] | None = None,
    query: str | None = None,
    include_links: bool = True,
    reason: str | None = None,
) -> dict[str, Any]:
    """Write the chosen insights to a bundle file (`loop_export`): those named by id, else
    those passing the tag, type and query filters (every insight when none is given), plus the
    insights they link to. Secrets and machine paths are removed from every text on the way.

    Returns `{bundle_path, insights_exported, linked_insights_added, sanitized: {kind: n},
    message}`. Raises InvalidRequest (path, unknown id or type), InvalidDocument for an
    unreadable insight file, Conflict ALREADY_EXISTS for a path holding something else.
    """
    local = _local_insights(ctx)
    matched = _query_matches(ctx, query) if query and query.strip() else None
    chosen, added = bundles.select(local, ids=ids or (), tags=tags or (), types=types or (), matched=matched, include_links=include_links)
    if not chosen:
        raise InvalidRequest("no insight matches: nothing to export", details={"ids": ids or [], "tags": tags or [], "types": types or [], "query": query})
    now = ctx.stamp()
    if path is None:
        folder = ctx.root / EXPORTS_DIR
        with fs.folder_fd(folder, create=True):
            pass
        path = str(folder / f"insights-{now.replace(':', '').replace('-', '')}.json")
    target = check_bundle_path(path, ctx, reading=False)
    if not target.parent.is_dir() and os.path.realpath(target.parent) == os.path.realpath(ctx.root / EXPORTS_DIR):
        # The workspace's own export folder is made on first use; any other must exist.
        with fs.folder_fd(target.parent, create=True):
            pass
    if not target.parent.is_dir():
        raise NotFound("the bundle's folder does not exist", path=str(target.parent))
    if target.exists() and not _is_bundle(target):
        raise Conflict("path exists and is not an insight bundle; refusing to replace it", code="ALREADY_EXISTS", path=str(target))
    name = Path(ctx.root).name
    clean, counts = _cleaner(ctx)
    entries = tuple(bundles.entry_of(item, clean, bundles.repo_hash(name)) for item in chosen)
    metadata: dict[str, Any] = {"linked_added": len(added), "sanitized": counts}
    if reason and reason.strip():
        metadata["export_reason"] = clean(reason.strip())
    bundle = Bundle(entries=entries, source_name=name, source_hash=bundles.repo_hash(name), exported_at=now, metadata=metadata)
    data = json.dumps(bundles.bundle_to_dict(bundle), ensure_ascii=False, indent=2) + "\n"
    fs.write_atomic(target, data.encode("utf-8"), mode=0o600)
    removed = sum(counts.values())
    return {
        "bundle_path": str(target),
        "insights_exported": len(entries),
        "linked_insights_added": len(added),
        "sanitized": counts,
        "message": f"exported {len(entries)} insights ({len(added)} through links)" + (f"; {removed} secrets or paths removed" if removed else ""),
    }


# --------------------------------------------------------------------------- preview and import


def _locals(ctx: Context, items: list[insight_core.Insight]) -> list[Local]:
    clean, _counts = _cleaner(ctx)
    return [Local(item, frozenset({bundles.content_hash(item.content), bundles.content_hash(clean(item.content))})) for item in items]


def preview_bundle(ctx: Context, *, path: str | None) -> dict[str, Any]:
    """What importing a bundle would do, entry by entry, writing nothing (`loop_import_preview`).

    Returns `{new_insights, duplicates, conflicts, source_repo, exported_at, insights:
    [{original_id, summary, type, status, existing_id?}], unmapped_links, recommendation}`.
    """
    _path, bundle = read_bundle(ctx, path)
    local = _local_insights(ctx)
    verdicts = bundles.preview(bundle, _locals(ctx, local))
    counts = {status: sum(1 for v in verdicts if v.status == status) for status in bundles.STATUSES}
    if counts["conflict"]:
        advice = f"{counts['conflict']} entries differ from insights here: import skips them unless skip_conflicts is false (the local insight is then updated)"
    elif counts["new"]:
        advice = f"import the {counts['new']} new insights; the {counts['duplicate']} duplicates are skipped"
    else:
        advice = "nothing new: every entry is here already"
    return {
        "new_insights": counts["new"],
        "duplicates": counts["duplicate"],
        "conflicts": counts["conflict"],
        "source_repo": bundle.source_name,
        "exported_at": bundle.exported_at,
        "format": bundle.format,
        "insights": [bundles.verdict_to_dict(v) for v in verdicts],
        "unmapped_links": bundles.unmapped_links(verdicts, (item.id for item in local)),
        "recommendation": advice,
    }


def import_bundle(
    ctx: Context,
    *,
    path: str | None,
    selected_ids: list[str] | None = None,
    skip_duplicates: bool = True,
    skip_conflicts: bool = True,
) -> dict[str, Any]:
    """Import a bundle's entries (all, or `selected_ids`) as insights (`loop_import`): new ones
    get fresh ids and status unprocessed, links are rewritten to the ids here, duplicates and
    conflicts are skipped unless asked otherwise (see `bundles.plan_import`).

    Returns `{imported, updated, skipped, errors, ids: {original: id here}, skipped_ids:
    [{original_id, reason}], message}`. Raises before writing anything when the bundle, an
    insight file or a selected id is wrong; a write that fails midway removes the insights this
    import created and raises.
    """
    from moss_files.loopflow import service

    _path, bundle = read_bundle(ctx, path)
    local = _local_insights(ctx)
    verdicts = bundles.preview(bundle, _locals(ctx, local))
    plan = bundles.plan_import(
        bundle,
        verdicts,
        new_id=lambda: ctx.new_id(insight_core.ID_PREFIX),
        now=ctx.stamp(),
        selected=selected_ids,
        skip_duplicates=skip_duplicates,
        skip_conflicts=skip_conflicts,
    )
    files = insight_store(ctx.root)
    undo: list[tuple[str, Callable[[], None]]] = []
    written: dict[str, str] = {}
    try:
        for insight in plan.create:
            target = files.folder / insight_core.file_name(insight.id)
            if not fs.create_exclusive(target, insight_core.render_insight(insight).encode("utf-8")):
                raise Conflict(f"insight file {files.relpath(target)} exists already", code="ALREADY_EXISTS", path=files.relpath(target))
            undo.append((files.relpath(target), functools.partial(_remove, target)))
            written[insight.source[bundles.ORIGIN_KEY]] = insight.id
        originals = {target: original for original, target in plan.mapping.items()}
        for insight_id, change in plan.update:
            target, _found = files.find(insight_id)
            before = fs.read_snapshot(target)
            service.update_insight(ctx, insight_id, change)
            undo.append((files.relpath(target), functools.partial(_restore, target, before)))
            written[originals[insight_id]] = insight_id
    except MossError as err:
        failed = []
        for shown, step in reversed(undo):
            try:
                step()
            except (MossError, OSError):
                failed.append(shown)
        err.details["rolled_back"] = len(undo) - len(failed)
        if failed:
            err.details["not_rolled_back"] = failed
        raise
    return {
        "imported": len(plan.create),
        "updated": len(plan.update),
        "skipped": len(plan.skipped),
        "errors": [],
        "ids": written,
        "skipped_ids": [{"original_id": original, "reason": why} for original, why in plan.skipped],
        "message": f"imported {len(plan.create)} new insights, updated {len(plan.update)}, skipped {len(plan.skipped)}",
    }


def _remove(path: Path) -> None:
    fs.remove(path)


def _restore(path: Path, before: fs.Snapshot) -> None:
    """Put back the bytes an import replaced."""
    assert before.data is not None
    with fs.locked(path):
        fs.write_if_unchanged(fs.read_snapshot(path), before.data)

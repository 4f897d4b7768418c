"""Search use cases: scan → expand → timeline (LoopFlow's progressive disclosure) over every
artifact, and the index's upkeep (refresh, rebuild, status).

Shell layer: the index (`database`, which reads the disk through `scan`) gathers and answers,
the cores (`query`, `model`) decide. Each use case takes the foundation `Context` (its
`notify` hears what the index did, `progress(done, total)` follows a long build) and returns a
plain dict in the shape `moss search|expand|timeline --json` prints and the MCP tools
`loop_scan`, `loop_expand`, `loop_timeline` return. SQLite is loaded on first use, so a command
that only names these use cases never pays for it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from moss_files.foundation.errors import InvalidRequest, MossError, NotFound

if TYPE_CHECKING:
    from pathlib import Path

    from moss_files.foundation.context import Context
    from moss_files.index.database import Hit, SearchIndex

__all__ = [
    "Context",
    "expand",
    "index_at",
    "index_rebuild",
    "index_refresh",
    "index_status",
    "index_watch",
    "open_index",
    "rebuild_at",
    "refresh_at",
    "scan",
    "timeline",
]

SCAN_DEFAULT_LIMIT = 20
SCAN_MAX_LIMIT = 200
EXPAND_MAX_IDS = 100
TIMELINE_DEFAULT_DEPTH = 5
TIMELINE_MAX_DEPTH = 100


def __getattr__(name: str) -> Any:
    """`Context`, named here for this module's callers, loaded when first asked for: a
    refresh process (`refresh_at`) never builds one, nor loads the dataclasses it is made of."""
    if name == "Context":
        from moss_files.foundation.context import Context

        return Context
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_index(ctx: Context) -> SearchIndex:
    """The search index of the workspace."""
    return index_at(ctx.root, notify=ctx.notify, progress=ctx.progress)


def index_at(root: Path, *, notify: Callable[[str], None] | None = None, progress: Callable[[int, int], None] | None = None) -> SearchIndex:
    """The search index of the workspace at `root` (`open_index` without a Context)."""
    # Loaded here: sqlite3 and the readers cost start-up time that naming a use case must not.
    from moss_files.index import database, sources

    return database.SearchIndex(root, sources.default_registry(), notify=notify, progress=progress)


def _scan_item(hit: Hit, score: float | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"id": hit.id, "kind": hit.kind, "summary": hit.summary}
    if score is not None:
        item["score"] = score
    item["date"] = hit.date
    if hit.status:
        item["status"] = hit.status
    if hit.handle:
        item["handle"] = hit.handle
    return item


def scan(
    ctx: Context,
    query: str,
    *,
    kinds: Sequence[str] = (),
    limit: int = SCAN_DEFAULT_LIMIT,
    match: str = "any",
    raw: bool = False,
    offset: int = 0,
    filters: Mapping[str, Sequence[str] | str] | None = None,
) -> dict[str, Any]:
    """Search every artifact (`loop_scan`, `moss search`): ids with one-line summaries, best
    first. The index is refreshed first, so a file changed a moment ago is seen.

    Returns `{query, matches: [{id, kind, summary, score, date, status?, handle?}], truncated,
    hint}`, `handle` being the name an item is addressed by besides its id (a capsule's
    `workspace/name`)
    (+ `unindexed`: files the index could not read, `ignored`: query parts that match
    nothing). `score` is relative to the best match (1.0); `truncated` says more matches
    follow (page with `offset`). `kinds` and `filters` (`{"type": ["process"], "status":
    ["unprocessed"]}`, any field the query syntax has) add to the query's own filters, for
    callers that hold them as data (the MCP tool's `scope`, `types`, `statuses`).
    Raises InvalidRequest for a bad limit, match mode, filter field or date.
    """
    from moss_files.index import query as search_query

    if not 1 <= limit <= SCAN_MAX_LIMIT:
        raise InvalidRequest(f"limit must be between 1 and {SCAN_MAX_LIMIT}", details={"limit": limit})
    if offset < 0:
        raise InvalidRequest("offset must not be negative")
    if match not in ("any", "all"):
        raise InvalidRequest("match must be 'any' or 'all'")
    parsed = search_query.parse_query("" if raw else query)
    if filters:
        parsed = parsed._replace(filters=parsed.filters + search_query.filters_from(filters))
    now = ctx.now()
    if raw and not query.strip():
        raise InvalidRequest("an empty raw query matches nothing")
    if not raw and parsed.is_empty and not kinds:
        return {
            "query": query,
            "matches": [],
            "truncated": False,
            "hint": 'give search terms, "phrases" or field:value filters (kind:, status:, tag:, after:)',
        }

    def work(view: Any) -> dict[str, Any]:
        found = view.search(parsed, now=now, kinds=kinds, limit=limit, offset=offset, match_all=match == "all", raw=query if raw else None)
        top = max((hit.score for hit in found.hits), default=0.0)
        matches = [_scan_item(hit, round(hit.score / top, 4) if top > 0 else 0.0) for hit in found.hits]
        result: dict[str, Any] = {"query": query, "matches": matches, "truncated": found.more}
        if found.more:
            result["hint"] = (
                f"more matches: raise the limit (offset {offset + len(matches)} for the next page) or narrow the query; expand ids for full records"
            )
        else:
            result["hint"] = "expand ids for full records" if matches else "no matches: try fewer or shorter terms, or drop filters"
        unindexed = view.problem_files()
        if unindexed:
            result["unindexed"] = unindexed
        if parsed.ignored:
            result["ignored"] = list(parsed.ignored)
        return result

    return open_index(ctx).run(work)


def expand(ctx: Context, ids: Sequence[str], *, include_links: bool = False, include_timeline: bool = False, depth: int = 3) -> dict[str, Any]:
    """Full records of items by id (`loop_expand`, `moss expand`), read from their files now.

    Returns `{items: [{id, kind, path, line, record, source_id?, links?, timeline?}], not_found:
    [ids], errors?: [...]}`; every id asked for is in `items` or `not_found` (or `errors`, when
    its file can no longer be read). An id no item carries finds the items `moss migrate`
    brought over from an item of that id; they say so with `source_id`. Raises InvalidRequest
    for no ids or too many.
    """
    wanted = list(dict.fromkeys(i.strip() for i in ids if i.strip()))
    if not wanted:
        raise InvalidRequest("name at least one id to expand")
    if len(wanted) > EXPAND_MAX_IDS:
        raise InvalidRequest(f"expand at most {EXPAND_MAX_IDS} ids at once", details={"count": len(wanted)})
    if not 0 <= depth <= TIMELINE_MAX_DEPTH:
        raise InvalidRequest(f"depth must be between 0 and {TIMELINE_MAX_DEPTH}")

    def work(view: Any) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        not_found: list[str] = []
        errors: list[dict[str, Any]] = []
        for wanted_id, hits in view.lookup(wanted).items():
            if not hits:
                not_found.append(wanted_id)
                continue
            for hit in hits:
                try:
                    record = view.record(hit)
                except MossError as err:
                    errors.append({"id": wanted_id, "code": err.code, "message": err.message, "path": err.path or hit.path, "line": err.line})
                    continue
                if record is None:
                    not_found.append(wanted_id)
                    continue
                item: dict[str, Any] = {"id": hit.id, "kind": hit.kind, "path": hit.path, "line": hit.line, "record": record}
                if hit.id.casefold() != wanted_id.casefold():
                    item["source_id"] = wanted_id  # found by the id it had before `moss migrate`
                if include_links:
                    item["links"] = _linked(view, hit)
                if include_timeline and hit.date:
                    earlier, later = view.around(hit.date, before=depth, after=depth, anchor=hit)
                    item["timeline"] = {"before": [_scan_item(h) for h in earlier], "after": [_scan_item(h) for h in later]}
                items.append(item)
        result: dict[str, Any] = {"items": items, "not_found": list(dict.fromkeys(not_found))}
        if errors:
            result["errors"] = errors
        return result

    return open_index(ctx).run(work)


def _linked(view: Any, hit: Any) -> dict[str, Any]:
    targets = view.links_of(hit)
    found = view.lookup(targets) if targets else {}
    return {
        "items": [_scan_item(other) for target in targets for other in found.get(target, [])[:1]],
        "missing": [target for target in targets if not found.get(target)],
    }


def timeline(
    ctx: Context, anchor: str, *, before: int = TIMELINE_DEFAULT_DEPTH, after: int = TIMELINE_DEFAULT_DEPTH, kinds: Sequence[str] = ()
) -> dict[str, Any]:
    """What happened around an item or a moment (`loop_timeline`, `moss timeline`): up to
    `before` items dated earlier and `after` later, oldest first.

    `anchor` is an id (looked up first) or a time: RFC 3339, YYYY-MM-DD, today, 3d, now.
    Returns `{anchor: {id, kind, date, summary} | {date}, before: [...], after: [...]}`.
    Raises NotFound when the anchor is neither, InvalidRequest for bad depths or an undated item.
    """
    from moss_files.index import query as search_query

    for name, value in (("before", before), ("after", after)):
        if not 0 <= value <= TIMELINE_MAX_DEPTH:
            raise InvalidRequest(f"{name} must be between 0 and {TIMELINE_MAX_DEPTH}")
    now = ctx.now()
    text = anchor.strip()
    if not text:
        raise InvalidRequest("give an id or a time to center the timeline on")

    def work(view: Any) -> dict[str, Any]:
        hits = view.lookup([text])[text]
        if hits:
            hit = hits[0]
            if not hit.date:
                raise InvalidRequest(f"{hit.kind} {hit.id} has no date to place it in time", details={"id": hit.id})
            earlier, later = view.around(hit.date, before=before, after=after, kinds=kinds, anchor=hit)
            center: dict[str, Any] = {"id": hit.id, "kind": hit.kind, "date": hit.date, "summary": hit.summary}
            if hit.handle:
                center["handle"] = hit.handle
        else:
            moment = search_query.normalize_date(now) if text.lower() == "now" else None
            if moment is None:
                span = search_query.period(text, now)
                moment = span[0] if span else None
            if moment is None:
                raise NotFound(
                    f"no item {text!r}, and it is not a time",
                    details={"anchor": text},
                    hint="give an id from `moss search`, or a time such as 2026-01-21 or 3d",
                )
            earlier, later = view.around(moment, before=before, after=after, kinds=kinds)
            center = {"date": moment}
        return {"anchor": center, "before": [_scan_item(h) for h in earlier], "after": [_scan_item(h) for h in later]}

    return open_index(ctx).run(work)


# --------------------------------------------------------------------------- the index's upkeep


def index_refresh(ctx: Context) -> dict[str, Any]:
    """Bring the index in step with the files; returns what changed (`report_to_dict`)."""
    return refresh_at(ctx.root, notify=ctx.notify, progress=ctx.progress)


def refresh_at(root: Path, *, notify: Callable[[str], None] | None = None, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """`index_refresh` of the workspace at `root`, for `moss index refresh` in its common form
    (`cli.quick`): a Context would load the foundation's context, settings and ids modules, and
    the dataclasses they are made of, a fifth of what a no-change refresh of 10,000 files costs
    beyond its walk."""
    from moss_files.index.model import report_to_dict

    index = index_at(root, notify=notify, progress=progress)
    index.run(lambda view: None)
    assert index.last_refresh is not None  # every run refreshes
    return report_to_dict(index.last_refresh)


def rebuild_at(root: Path, *, notify: Callable[[str], None] | None = None, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """`index_rebuild` of the workspace at `root` with heuristic summaries, for `moss index
    rebuild` in its common form (`cli.quick`), without a Context (see `refresh_at`)."""
    from moss_files.index.model import report_to_dict

    return report_to_dict(index_at(root, notify=notify, progress=progress).rebuild())


def index_rebuild(ctx: Context, *, summaries: str = "heuristic") -> dict[str, Any]:
    """Build the index anew from every file (the old cache stays usable until the swap).

    With `summaries="ai"`, the insights and sessions whose files hold no summary of a person's
    or of the model's get one from the AI summariser, stored in the index alone (no artifact
    file is written); each lasts until its file changes or the index is rebuilt without it.
    An item the model cannot summarize (server down, slow, a reply that is no summary) keeps
    its heuristic summary, and the report's `summaries` says how many and why.

    Raises InvalidRequest for another `summaries`, InvalidDocument for bad `[summaries]` settings.
    """
    from moss_files.index.model import report_to_dict

    if summaries not in SUMMARY_METHODS:
        raise InvalidRequest(f"summaries must be one of {', '.join(SUMMARY_METHODS)}, not {summaries!r}", details={"field": "summaries"})
    if summaries == "ai":
        from dataclasses import replace

        from moss_files.loopflow import ai

        # Bad settings, or an endpoint off this machine, stop the command before the rebuild.
        ai.check_endpoint(replace(ai.read_settings(ctx.config.data), enabled=True))
    if summaries != "ai":
        return rebuild_at(ctx.root, notify=ctx.notify, progress=ctx.progress)
    index = open_index(ctx)
    result = report_to_dict(index.rebuild())
    if summaries == "ai":
        result["summaries"] = _ai_summaries(ctx, index)
    return result


SUMMARY_METHODS = ("heuristic", "ai")
AI_SUMMARY_KINDS = ("insight", "session")


def _ai_summaries(ctx: Context, index: SearchIndex) -> dict[str, Any]:
    """Ask the AI summariser for the one-line summary of every insight and session that has
    none of a person's or the model's in its file, and store the answers in the index."""
    from moss_files.loopflow import ai, summarizer

    settings = ai.read_settings(ctx.config.data)
    rows = index.run(lambda view: view.rows_of(AI_SUMMARY_KINDS), refresh=False)
    found: list[tuple[str, str, str, str]] = []
    reasons: dict[str, int] = {}
    kept = 0
    for number, (path, anchor, kind, _item_id, digest) in enumerate(rows, start=1):
        text, why = _summary_input(index, path, kind, digest)
        if text is None:
            if why == "kept":
                kept += 1
            else:
                reasons[why] = reasons.get(why, 0) + 1
            continue
        line, reason = summarizer.ai_summary(ctx, text, "insight" if kind == "insight" else "work session", force=True)
        if line is not None:
            found.append((path, anchor, digest, line))
        else:
            reasons[reason or "bad_reply"] = reasons.get(reason or "bad_reply", 0) + 1
        if number % 10 == 0 and number < len(rows):
            ctx.say(f"summaries: {number} of {len(rows)} items")
    stored = index.run(lambda view: view.set_summaries(found), refresh=False) if found else 0
    return {
        "method": "ai",
        "model": settings.model,
        "endpoint": settings.endpoint,
        "items": len(rows),
        "ai": stored,
        "kept": kept,
        "heuristic": len(rows) - kept - stored,
        "reasons": dict(sorted(reasons.items())),
    }


def _summary_input(index: SearchIndex, path: str, kind: str, digest: str) -> tuple[str | None, str]:
    """(the text to summarize of the item in `path`, "") or (None, why not): `kept` when its
    file holds a summary of a person's or the model's already, `changed` when it changed or
    became unreadable since it was indexed (its next refresh reads it anew)."""
    from moss_files.foundation import document
    from moss_files.index.scan import read_file
    from moss_files.loopflow import insights, sessions

    read = read_file(index.root, path)
    if read is None or read.problem is not None or read.digest != digest:
        return None, "changed"
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    try:
        doc = document.parse_bytes(read.data, path)
        if kind == "insight":
            insight = insights.parse_insight(doc, path, fallback_id=stem)
            if insight.summary_is_generated and insight.summary_source != "ai" and not insight.deleted:
                return insight.content, ""
            return None, "kept"
        session = sessions.parse_session(doc, path, fallback_id=stem)
        if not session.headline_is_generated or session.headline_source == "ai":
            return None, "kept"
        text = sessions.headline_text(session.summary, session.learnings)
        return (text, "") if text else (None, "short")
    except MossError:
        return None, "changed"


def index_status(ctx: Context) -> dict[str, Any]:
    """The index after a refresh: where it is, its counts, sources, and every file it could not
    (fully) read: `{path, schema, files, items, by_kind, problems, refresh, size_bytes, sources}`."""
    from moss_files.index import database
    from moss_files.index import scan as disk
    from moss_files.index.model import report_to_dict

    index = open_index(ctx)
    data = index.run(lambda view: {**view.counts(), "problems": view.problems()})
    data["problems"] = sorted([*data["problems"], *disk.folder_problems(index.root, index.registry)], key=lambda p: p["path"])
    assert index.last_refresh is not None  # every run refreshes
    size = sum(path.stat().st_size for path in index.dir.glob(f"{database.DB_NAME}*") if path.is_file() and ".tmp-" not in path.name)
    return {
        "path": str(index.path),
        "schema": database.SCHEMA_VERSION,
        **data,
        "refresh": report_to_dict(index.last_refresh),
        "size_bytes": size,
        "sources": [
            {
                "name": source.name,
                "kinds": list(source.kinds),
                "places": [place.folder + ("/" if place.names is None else "/{" + ",".join(sorted(place.names)) + "}") for place in source.places],
            }
            for source in index.registry.sources
        ],
    }


class CapsuleItems(NamedTuple):
    """What the index holds about the capsule files of one scope (see `capsule_items`)."""

    unreadable: int  # capsule files in the scope the index could not (fully) read
    items: int  # capsule items in the scope: one per file read without a problem
    undated: int  # of them, items without a usable `updated` time
    total: int | None  # items that pass the filters (None with `filters` or `name_prefix`: every row is given)
    rows: list[tuple[str, str, str, str, int]]  # (path, id, updated, status, to check), newest first


def capsule_items(
    ctx: Context,
    *,
    folder: str | None,
    include_deleted: bool,
    filters: Mapping[str, str] | None = None,
    name_prefix: str | None = None,
    start: int = 0,
    count: int | None = None,
    only_if_built: bool = False,
) -> CapsuleItems | None:
    """The capsule items the index holds below `.moss/capsules/` (or one workspace `folder` of
    it), the files there refreshed first, for `moss list`, `inventory` and `latest`, which read through
    the index and fall back to the files wherever it cannot answer as they would.

    The scope is the capsule files directly in the workspace folders, and with
    `include_deleted` those in their `deleted/` folders; soft-deleted items count only with
    `include_deleted`. The capsule reader turns every file it reads without a problem into
    exactly one item, so with no unreadable file the items are the files, one each. `rows`
    are in the order `updated` then `id`, both descending: `count` of them (all without
    `count`) from `start`, and `total` says how many there are. With `filters` (`{"run": …,
    "phase": …, "role": …, "tag": …}`, matched exactly) or `name_prefix` (a prefix of the
    normalized name), every row that may match is given, and those marked "to check" match
    only if their file says so: the index holds these values casefolded, and knows which
    capsules hold values that are not. With `only_if_built`, None when there is no cache
    file yet (building one costs more than reading the capsules once)."""
    # sources, not readers: naming the folder must not load every kind's reader.
    from moss_files.index.sources import CAPSULES

    base = f"{CAPSULES}/" if folder is None else f"{CAPSULES}/{folder}/"
    params: dict[str, Any] = {"base": base, "end": base[:-1] + "0", "rest": len(base) + 1}
    # A path in the scope: below `base`, and unless deleted ones count, not in a deleted/
    # folder (below a workspace folder for the whole store, right below `base` for one).
    in_deleted = "instr(substr(path, :rest), '/deleted/') != 0" if folder is None else "substr(path, :rest, 8) = 'deleted/'"
    within = "path > :base AND path < :end" + ("" if include_deleted else f" AND NOT {in_deleted}")
    capsules = "kind = 'capsule' AND path > :base AND path < :end"
    # An item in a deleted/ folder is always soft-deleted (status 'deleted'): without the
    # deleted ones, the rows left are the live ones, and the folder test is never needed.
    chosen = capsules if include_deleted else capsules + " AND status IS NOT 'deleted'"
    # A filter matches the casefolded facet; where the wanted value is not casefolded itself,
    # only capsules whose own value is not casefolded (`cased`) can hold it. Those with a
    # `cased` filtered field are the rows the caller must check against their files.
    checks: list[str] = []
    wanted = [(field, value, "value = :value{n}") for field, value in sorted((filters or {}).items())]
    if name_prefix:
        wanted.append(("name", name_prefix, "value >= :value{n} AND substr(value, 1, length(:value{n})) = :value{n}"))
    for number, (field, value, match) in enumerate(wanted):
        folded = value.casefold()
        params.update({f"field{number}": field, f"value{number}": folded})
        chosen += f" AND rowid IN (SELECT item FROM facets WHERE field = :field{number} AND {match.format(n=number)})"
        cased = f"rowid IN (SELECT item FROM facets WHERE field = 'cased' AND value = :field{number})"
        if folded != value:
            chosen += f" AND {cased}"
        checks.append(cased)
    check = " OR ".join(checks) or "0"

    def work(view: Any) -> CapsuleItems:
        conn = view.conn

        def one(query: str) -> Any:
            return conn.execute(query, params).fetchone()

        # Each count from a partial index of its own, never the wide rows: files with problems
        # and soft-deleted items (few, mostly), undated items (first in capsules_recent), and
        # every capsule item below `base` (one narrow entry each).
        (unreadable,) = one(f"SELECT count(*) FROM files INDEXED BY files_problems WHERE problems IS NOT NULL AND source = 'capsule' AND {within}")
        (undated,) = one(
            f"SELECT count(*) FROM items INDEXED BY capsules_recent WHERE {capsules} AND ts IS NULL{'' if include_deleted else f' AND NOT {in_deleted}'}"
        )
        (below,) = one(f"SELECT count(*) FROM items INDEXED BY capsules_scope WHERE {capsules}")
        deleted, in_folders = one(
            f"SELECT count(*), coalesce(sum({in_deleted}), 0) FROM items INDEXED BY capsules_deleted WHERE {capsules} AND status = 'deleted'"
        )
        items = below if include_deleted else below - in_folders
        total = None if checks else (items if include_deleted else below - deleted)
        if checks or count is None:
            # Every row that may match: read in table order (as many as the capsules, mostly),
            # cheaper than looking each up through an index.
            query = f"SELECT path, id, updated, status, {check} FROM items NOT INDEXED WHERE {chosen} ORDER BY ts DESC, id DESC"
        else:
            # One page, newest first, in capsules_recent's order: no sort, and it stops there.
            query = (
                f"SELECT path, id, updated, status, 0 FROM items INDEXED BY capsules_recent WHERE {chosen}"
                f" ORDER BY ts DESC, id DESC LIMIT {int(count)} OFFSET {int(start)}"
            )
        rows = conn.execute(query, params).fetchall()
        return CapsuleItems(unreadable, items, undated, total, rows)

    index = open_index(ctx)
    if only_if_built and not index.path.exists():
        return None
    # Every row read is of a file below `base`: without a watcher, the refresh walks that
    # folder alone (a workspace's tenth of 100,000 capsules, not every artifact).
    return index.run(work, scope=base[:-1])


def index_watch(
    ctx: Context,
    *,
    stop: Callable[[], bool] = lambda: False,
    ready: Callable[[dict[str, Any]], None] | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Keep the index warm until `stop()` (or an interrupt): follow file events, refresh the
    files they name, and answer queries' `sync` so they skip the walk (see `watch`). `ready`
    hears `{root, socket, folders}` once the watcher serves; `quiet` keeps routine refreshes
    out of `ctx.notify` (problems are still told). Returns `{root, socket, folders, syncs,
    refreshes, rewatches}`. Raises CacheError when another watcher serves the workspace or the
    system has no inotify."""
    from moss_files.index import watch

    index = open_index(ctx)
    index.ask_watcher = False  # it is the watcher: asking itself would wait for itself

    def refresh(paths: Collection[str] | None) -> Any:
        # A walk (or a look at the named files), never the watcher's own sync; the first one
        # builds a missing cache.
        index.run(lambda view: None, paths=paths)
        return index.last_refresh

    watcher = watch.Watcher(ctx.root, index.registry, refresh, log=ctx.notify, quiet=quiet)
    socket = str(watch.socket_path(ctx.root))

    def announce(stats: watch.WatchStats) -> None:
        if ready is not None:
            ready({"root": str(ctx.root), "socket": socket, "folders": stats.folders})

    stats = watcher.serve(stop=stop, ready=announce)
    return {"root": str(ctx.root), "socket": socket, "folders": stats.folders, "syncs": stats.syncs, "refreshes": stats.refreshes, "rewatches": stats.rewatches}

"""Moss's `search`: full-text search over capsules, ranked, with highlighted snippets.

Shell layer. The query runs through the workspace's search index (`index.service.open_index`,
SQLite FTS5 with bm25 and the title weighted above the text), restricted to capsules and
filtered by the index's facets (workspace, tag, run, phase, role); the page's capsules are then
read from their files, so the summaries and snippets are what the files hold now. The query
language is the index's (terms, "phrases", -exclusions); every term must match unless `match`
is "any". Returns Moss's shape: `{items: [summary + fetch_key + snippet], pagination, sort}`.
"""

from __future__ import annotations

from typing import Any

from moss_files.capsules import model as core
from moss_files.capsules.store import CapsuleStore
from moss_files.foundation.arguments import count, optional
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest

__all__ = ["Context", "search"]

MAX_MATCHES = 10_000  # matches counted in `total`; beyond them `total` says 10,000


def search(
    ctx: Context,
    *,
    query: str | None,
    workspace: str | None = None,
    tag: str | None = None,
    run_id: str | None = None,
    phase: str | None = None,
    role: str | None = None,
    limit: int | None = None,
    offset: int | None = None,
    include_deleted: bool = False,
    match: str | None = None,
) -> dict[str, Any]:
    """Capsules matching `query`, best first: `{items: [{...summary, fetch_key, snippet}],
    pagination: {limit, offset, has_more, total}, sort: "relevance"}`.

    `snippet` is HTML-safe (the text escaped; matches in `<b>`). Raises InvalidRequest for an
    empty or over-long query (1000 characters), a query with no searchable word, a bad
    limit, offset or match mode.
    """
    from moss_files.index import query as search_query
    from moss_files.index.service import open_index

    text = (query or "").strip()
    if not text:
        raise InvalidRequest("query is required", details={"field": "query"})
    if len(text) > core.MAX_QUERY_CHARS:
        raise InvalidRequest(f"query is longer than {core.MAX_QUERY_CHARS} characters", details={"max_chars": core.MAX_QUERY_CHARS, "actual": len(text)})
    mode = (optional(match) or "all").lower()
    if mode not in ("all", "any"):
        raise InvalidRequest("match must be 'all' or 'any'", details={"field": "match"})
    wanted = count(limit, "limit", default=core.SEARCH_DEFAULT_LIMIT, minimum=0) or core.SEARCH_DEFAULT_LIMIT
    page_limit = min(wanted, core.SEARCH_MAX_LIMIT)
    page_offset = count(offset, "offset", default=0, minimum=0)
    parsed = search_query.parse_query(text)
    if not parsed.has_text:
        raise InvalidRequest("the query has no word to search for", details={"query": text, "ignored": list(parsed.ignored)})
    # Filters are built as values, not query text: a workspace or run id may hold commas or
    # spaces. The index holds these values casefolded, so its filters find a superset; the
    # exact comparisons (workspace by folder, run, phase and role as written, tags ignoring
    # case) are made below.
    filters = []
    ws = optional(workspace)
    workspace_norm = core.normalize(ws) if ws else None
    if workspace_norm is not None:
        filters.append(search_query.Filter("workspace", (workspace_norm.casefold(),)))
    exact: dict[str, str] = {}
    for field, value in (("tag", tag), ("run", run_id), ("phase", phase), ("role", role)):
        cleaned = optional(value)
        if cleaned:
            filters.append(search_query.Filter(field, (cleaned.casefold(),)))
            if field != "tag":
                exact[field] = cleaned
    if include_deleted:
        filters.append(search_query.Filter("status", ("live", "deleted")))
    parsed = parsed._replace(filters=parsed.filters + tuple(filters))
    now = ctx.now()

    def work(view: Any) -> tuple[list[Any], dict[str, set[str]]]:
        # One ranked query for every match (up to MAX_MATCHES), to count them: paging through
        # them instead re-ranks all of them once per page (50 times at 10,000 matches).
        found = list(view.search(parsed, now=now, kinds=("capsule",), limit=MAX_MATCHES, offset=0, match_all=mode == "all").hits)
        cased: dict[str, set[str]] = {field: set() for field in exact}
        if exact:
            marks = ",".join("?" * len(exact))
            query = (
                f"SELECT f.value, i.path FROM facets f JOIN items i ON i.rowid = f.item WHERE f.field = 'cased' AND f.value IN ({marks}) AND i.kind = 'capsule'"
            )
            for field, path in view.conn.execute(query, list(exact)):
                cased[field].add(path)
        return found, cased

    hits, cased = open_index(ctx).run(work)
    store_ = CapsuleStore(ctx.root)
    if workspace_norm is not None:
        # The folder decides the workspace: two names that fold alike (Straße, strasse) are two.
        prefixes = tuple(f"{folder.relative_to(ctx.root).as_posix()}/" for folder in store_.workspace_folders(workspace_norm))
        hits = [hit for hit in hits if hit.path.startswith(prefixes)]
    read: dict[str, Any] = {}
    if exact:
        hits = [hit for hit in hits if _matches_exactly(hit.path, exact, cased, store_, ctx, read)]
    terms = [*parsed.terms, *parsed.phrases, *parsed.title_terms]
    items: list[dict[str, Any]] = []
    for hit in hits[page_offset : page_offset + page_limit]:
        stored = read[hit.path] if hit.path in read else store_.read(ctx.root / hit.path)
        if stored is None:  # removed since the index was refreshed a moment ago
            continue
        capsule = stored.capsule
        items.append({**core.summary_to_dict(capsule), "fetch_key": core.fetch_key(capsule), "snippet": core.snippet(capsule.text, terms)})
    return {
        "items": items,
        "pagination": {"limit": page_limit, "offset": page_offset, "has_more": page_offset + page_limit < len(hits), "total": len(hits)},
        "sort": "relevance",
    }


def _matches_exactly(path: str, exact: dict[str, str], cased: dict[str, set[str]], store_: CapsuleStore, ctx: Context, read: dict[str, Any]) -> bool:
    """Whether the capsule at `path`, whose casefolded run/phase/role matched, holds exactly
    the wanted values. A capsule whose own value is casefolded (no `cased` facet) holds the
    folded value, so only a wanted value that is itself casefolded can be it; one with a
    `cased` facet is read (and kept in `read`) to compare what its file says."""
    if not any(path in cased[field] for field in exact):
        return all(wanted == wanted.casefold() for wanted in exact.values())
    if path not in read:
        read[path] = store_.read(ctx.root / path)
    stored = read[path]
    if stored is None:
        return False
    capsule = stored.capsule
    values = {"run": capsule.run_id, "phase": capsule.phase, "role": capsule.role}
    return all(values[field] == wanted for field, wanted in exact.items())

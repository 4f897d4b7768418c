"""Moss's `search`: full-text search over capsules, ranked, with highlighted snippets.

Shell layer. The query runs through the workspace's search index (`index.service.open_index`,
SQLite FTS5 with bm25 and the title weighted above the text), restricted to capsules and
filtered by the index's facets (workspace, tag, run, phase, role); the page's capsules are then
read from their files, so the summaries and snippets are what the files hold now. The query
language is the index's (terms, "phrases", -exclusions); every term must match unless `match`
is "any". Returns Moss's shape: `{items: [summary + fetch_key + snippet], pagination, sort}`.
"""

from __future__ import annotations

from dataclasses import replace
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
    # spaces, and role, phase and run ids compare exactly (the query syntax folds case).
    filters = []
    ws = optional(workspace)
    if ws:
        filters.append(search_query.Filter("workspace", (core.normalize(ws),)))
    for field, value in (("tag", tag), ("run", run_id), ("phase", phase), ("role", role)):
        cleaned = optional(value)
        if cleaned:
            filters.append(search_query.Filter(field, (cleaned.casefold() if field == "tag" else cleaned,)))
    if include_deleted:
        filters.append(search_query.Filter("status", ("live", "deleted")))
    parsed = replace(parsed, filters=parsed.filters + tuple(filters))
    now = ctx.now()

    def work(view: Any) -> list[Any]:
        # One ranked query for every match (up to MAX_MATCHES), to count them: paging through
        # them instead re-ranks all of them once per page (50 times at 10,000 matches).
        return list(view.search(parsed, now=now, kinds=("capsule",), limit=MAX_MATCHES, offset=0, match_all=mode == "all").hits)

    hits = open_index(ctx).run(work)
    terms = [*parsed.terms, *parsed.phrases, *parsed.title_terms]
    store_ = CapsuleStore(ctx.root)
    items: list[dict[str, Any]] = []
    for hit in hits[page_offset : page_offset + page_limit]:
        stored = store_.read(ctx.root / hit.path)
        if stored is None:  # removed since the index was refreshed a moment ago
            continue
        capsule = stored.capsule
        items.append({**core.summary_to_dict(capsule), "fetch_key": core.fetch_key(capsule), "snippet": core.snippet(capsule.text, terms)})
    return {
        "items": items,
        "pagination": {"limit": page_limit, "offset": page_offset, "has_more": page_offset + page_limit < len(hits), "total": len(hits)},
        "sort": "relevance",
    }

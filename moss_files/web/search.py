"""The search page: the query language, results with their kind and one-line summary, each
expandable in place into its full record.

Shell layer: gathered through the search use cases (`index.service.scan` and `expand`, as
`moss search|expand --json` call them; the index refreshes itself before each query) and
rendered with `moss_files.web.html`. Without JavaScript a result's full record is a link to its
own page; with it, opening a result fetches the same record as a fragment and shows it there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest
from moss_files.index import service
from moss_files.web.html import Html, Page, badge, definition_list, empty, esc, join, json_block, link, pre, table, task_link, url, when
from moss_files.web.markdown import render_markdown

PAGE_SIZE = 20
LIVE = ("*",)
# The query language, as docs/search.md states it: (example, what it does).
SYNTAX = (
    ("auth token", "any of the terms (a term also matches longer words: dep finds deploy)"),
    ('"token refresh"', "a phrase: these words, in this order"),
    ("-legacy, NOT legacy", "leave out items containing it"),
    ("kind:insight,message", "only these kinds (also status:, type:, tag:, workspace:, …)"),
    ("-status:done", "a negated filter"),
    ("title:parser", "a term that must appear in the title"),
    ("after:2026-01-01, since:7d", "dated on or after"),
    ("before:2026-02, until:yesterday", "dated before"),
    ("date:2026-01, on:today", "dated within that year, month or day"),
)
# Record fields shown as markdown when a record holds them.
MARKDOWN_FIELDS = ("capsule_text", "body", "description", "text", "summary", "context", "notes")


def page_offset(value: str | None) -> int:
    """The `?offset=` of a results page. Raises InvalidRequest."""
    if not value:
        return 0
    if not value.isdigit():
        raise InvalidRequest("offset must be a whole number", details={"offset": value})
    return int(value)


def search_page(ctx: Context, *, query: str = "", offset: int = 0, match_all: bool = False) -> Page:
    """Results for `query` (the syntax help when there is none)."""
    form = Html(
        f'<form method="get" action="/search" class="search-big" role="search"><input type="search" name="q" value="{esc(query)}" '
        f'aria-label="query" placeholder="search every artifact" autofocus><label><input type="checkbox" name="all" value="1"{" checked" if match_all else ""}> every term</label>'
        '<button type="submit">Search</button></form>'
    )
    body = [Html('<div class="page-head"><h1>Search</h1></div>'), form]
    if query.strip():
        found = service.scan(ctx, query, limit=PAGE_SIZE, offset=offset, match="all" if match_all else "any")
        body.append(render_results(found, query=query, offset=offset, match_all=match_all))
    body.append(render_syntax())
    return Page(f"Search: {query}" if query.strip() else "Search", join(body), live=LIVE)


def render_results(found: Mapping[str, Any], *, query: str, offset: int, match_all: bool) -> Html:
    """The matches, each a `<details>` that expands into the full record."""
    matches = found.get("matches") or []
    parts: list[Html] = []
    if found.get("ignored"):
        parts.append(Html(f'<p class="notice info">Ignored (they match nothing): {esc(", ".join(found["ignored"]))}</p>'))
    if not matches:
        parts.append(empty(found.get("hint") or "No matches."))
    items = []
    for match in matches:
        expand = url("/expand", {"id": match["id"]})
        status = badge(match["status"], "status") if match.get("status") else ""
        handle = f' <span class="muted">{esc(match["handle"])}</span>' if match.get("handle") else ""
        items.append(
            f'<li class="result" data-id="{esc(match["id"])}"><details data-expand="{esc(url("/expand", {"id": match["id"], "fragment": 1}))}">'
            f'<summary>{badge(match["kind"], "kind")} <span class="summary">{esc(match.get("summary") or "")}</span> {status}'
            f'<span class="muted"> {esc(match["id"])}{handle} · {when(match.get("date"))}</span></summary>'
            f'<div class="expanded">{link(expand, "Open the full record")}</div></details></li>'
        )
    if items:
        parts.append(Html(f'<ol class="results" start="{offset + 1}">{"".join(items)}</ol>'))
    if found.get("truncated"):
        parts.append(
            Html(f'<p class="more">{link(url("/search", {"q": query, "offset": offset + len(matches), "all": 1 if match_all else None}), "more results")}</p>')
        )
    if found.get("unindexed"):
        parts.append(Html(f'<p class="notice info">{len(found["unindexed"]):,} files could not be read into the index.</p>'))
    return join(parts)


def render_syntax() -> Html:
    rows = [(Html(f"<code>{esc(example)}</code>"), meaning) for example, meaning in SYNTAX]
    return Html(f'<details class="syntax"><summary>Query language</summary>{table(("query", "finds"), rows)}</details>')


def expand_page(ctx: Context, ids: Sequence[str], *, fragment: bool = False) -> Page:
    """Full records of items by id (the whole page, or only the records for in-place expansion)."""
    found = service.expand(ctx, list(ids), include_links=True)
    parts = [render_item(item) for item in found["items"]]
    for missing in found.get("not_found") or []:
        parts.append(empty(f"{missing}: not found (deleted, or the index has not seen it yet)."))
    for error in found.get("errors") or []:
        parts.append(Html(f'<div class="notice error">{esc(error.get("code"))}: {esc(error.get("message"))}</div>'))
    body = join(parts)
    if fragment:
        return Page("Record", body)
    return Page(", ".join(ids), join([Html(f"<h1>{esc(', '.join(ids))}</h1>"), body]), live=LIVE)


def render_item(item: Mapping[str, Any]) -> Html:
    """One full record: where it lives, its fields, its long texts rendered, its links."""
    record = item.get("record") or {}
    texts = [(key, record[key]) for key in MARKDOWN_FIELDS if isinstance(record.get(key), str) and len(record[key]) > 80]
    scalars = [(key, value) for key, value in record.items() if key not in dict(texts) and not isinstance(value, dict | list)]
    nested = {key: value for key, value in record.items() if isinstance(value, dict | list) and value}
    where = f"{item.get('path')}" + (f":{item['line']}" if item.get("line") else "")
    parts = [
        Html(f'<p class="where">{badge(item["kind"], "kind")} <code>{esc(item["id"])}</code> <span class="muted">{esc(where)}</span> {_open_link(item)}</p>'),
        definition_list([(key, pre(value) if isinstance(value, str) and "\n" in value else esc(value)) for key, value in scalars]),
    ]
    for key, value in texts:
        parts.append(Html(f"<h4>{esc(key)}</h4>"))
        parts.append(render_markdown(value))
    if nested:
        parts.append(json_block(nested))
    links = item.get("links") or {}
    if any(links.values()) if isinstance(links, dict) else links:
        parts.append(json_block({"links": links}))
    return Html(f'<article class="record" data-id="{esc(item["id"])}">{join(parts)}</article>')


def _open_link(item: Mapping[str, Any]) -> Html:
    """A link to the item's own page in the web view, for kinds that have one."""
    kind, ident = item.get("kind"), str(item.get("id"))
    if kind == "task" and ident.startswith("TASK-"):
        return task_link(ident, "open on the board")
    if kind == "capsule":
        return link(url(f"/capsules/{ident}"), "open the capsule")
    if kind in ("task", "memory", "current"):
        return link("/memory", "open the memory page")
    if kind == "message":
        return link("/messages", "open the messages")
    if kind == "agent-session":
        return link(url(f"/agents/{ident}"), "open the session")
    return Html("")

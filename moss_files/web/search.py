"""The search page: the query language, and results that lead somewhere: each with its kind as
a person names it (a board task is not a plan item), its title, a snippet of the text around the
words searched for, and a link to its own page; each expandable in place into its record,
shown as fields rather than internals.

Shell layer: gathered through the search use cases (`index.service.scan` and `expand`, as
`moss search|expand --json` call them; the index refreshes itself before each query) and
rendered with `moss_files.web.html`; snippets are cut by `capsules.model.snippet`, the one
snippet cutter Moss's own search uses. Without JavaScript a result's record is a link to its own
page; with it, opening a result fetches the same record as a fragment and shows it there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from moss_files.capsules.model import snippet
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest
from moss_files.index import service
from moss_files.index.query import parse_query
from moss_files.web.html import Html, Page, badge, chip, definition_list, empty, esc, join, link, pre, seconds_time, table, url, when
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
# Record fields shown as markdown when a record holds them, and searched for a snippet.
MARKDOWN_FIELDS = ("capsule_text", "body", "description", "content", "text", "summary", "context", "notes", "prompt", "answer")
# A record's fields that are the index's or the file's internals, not the item's.
HIDDEN_FIELDS = frozenset({"id", "path", "line", "fetch_key", "number", "fields"})
# Fields that hold times (as RFC 3339 strings, or unix seconds for capsules).
TIME_FIELDS = frozenset({"created", "updated", "modified", "closed", "date", "time", "timestamp", "started", "ended", "dead_at", "ts"})
MAX_DEPTH = 3


def page_offset(value: str | None) -> int:
    """The `?offset=` of a results page. Raises InvalidRequest."""
    if not value:
        return 0
    if not value.isdigit():
        raise InvalidRequest("offset must be a whole number", details={"offset": value})
    return int(value)


def kind_label(kind: str, path: str | None) -> str:
    """An item's kind as a person names it: a board task and a PLAN.md task are not both
    `task`."""
    if kind == "task":
        return "plan item" if (path or "").startswith(".cstack/") else "board task"
    return {
        "memory": "memory",
        "current": "current state",
        "message": "message",
        "capsule": "capsule",
        "epic": "epic",
        "insight": "insight",
        "session": "work session",
        "document": "note",
        "agent-session": "agent session",
        "agent-run": "agent run",
        "agent-step": "agent step",
    }.get(kind, kind)


def page_of(kind: str, ident: str, path: str | None, record: Mapping[str, Any]) -> str:
    """The web view's page for an item (its record's page for kinds without one of their own)."""
    if kind == "task" and not (path or "").startswith(".cstack/"):
        return url(f"/tasks/{ident}")
    if kind == "epic":
        return url("/board", {"epic": ident})
    if kind == "capsule":
        return url(f"/capsules/{ident}")
    if kind == "task":
        return "/memory#plan"
    if kind == "memory":
        return "/memory#memory"
    if kind == "current":
        return "/memory#current"
    if kind == "message":
        return "/messages"
    if kind == "agent-session":
        return url(f"/agents/{ident}")
    if kind in ("agent-run", "agent-step") and isinstance(record.get("session"), str):
        return url(f"/agents/{record['session']}")
    return url("/expand", {"id": ident})


def title_of(kind: str, record: Mapping[str, Any], fallback: str) -> str:
    """The line a result is named by: its title, else what it says first."""
    cells = record.get("cells")
    if kind == "memory" and isinstance(cells, list) and cells:
        return " — ".join(str(cell) for cell in cells[:2] if cell)
    for key in ("title", "name", "subject"):
        if isinstance(record.get(key), str) and record[key].strip():
            return str(record[key])
    return fallback


def text_of(record: Mapping[str, Any]) -> str:
    """The text a snippet is cut from: the record's longest text field."""
    texts = [str(record[key]) for key in MARKDOWN_FIELDS if isinstance(record.get(key), str)]
    cells = record.get("cells")
    if isinstance(cells, list):
        texts.append(" · ".join(str(cell) for cell in cells if cell))
    return max(texts, key=len, default="")


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
        ids = list(dict.fromkeys(match["id"] for match in found.get("matches") or []))
        records = service.expand(ctx, ids) if ids else {"items": []}
        parsed = parse_query(query)
        terms = [*parsed.terms, *parsed.title_terms, *(word for phrase in parsed.phrases for word in phrase.split())]
        body.append(render_results(found, records["items"], terms=terms, query=query, offset=offset, match_all=match_all))
    body.append(render_syntax())
    return Page(f"Search: {query}" if query.strip() else "Search", join(body), live=LIVE)


def render_results(found: Mapping[str, Any], items: Sequence[Mapping[str, Any]], *, terms: Sequence[str], query: str, offset: int, match_all: bool) -> Html:
    """The matches, each with its kind, title (a link to its page), status, date and snippet,
    and a `<details>` that expands into the full record."""
    matches = found.get("matches") or []
    by_id: dict[tuple[str, str], Mapping[str, Any]] = {}
    for item in items:
        by_id.setdefault((str(item.get("kind")), str(item.get("id"))), item)
    parts: list[Html] = []
    if found.get("ignored"):
        parts.append(Html(f'<p class="notice info">Ignored (they match nothing): {esc(", ".join(found["ignored"]))}</p>'))
    if not matches:
        parts.append(empty(found.get("hint") or "No matches."))
    rows = []
    for match in matches:
        item = by_id.get((match["kind"], match["id"])) or {}
        record = item.get("record") or {}
        path = item.get("path")
        kind = kind_label(match["kind"], path)
        title = title_of(match["kind"], record, match.get("summary") or match["id"])
        text = text_of(record)
        # The snippet is escaped text with <b> around matches; its quotes are escaped too, as
        # everywhere else on our pages.
        cut = Html(f'<p class="snippet">{snippet(text, terms).replace(chr(34), "&quot;").replace(chr(39), "&#x27;")}</p>') if text.strip() else Html("")
        status = badge(match["status"], "status") if match.get("status") else ""
        handle = f' <span class="muted">{esc(match["handle"])}</span>' if match.get("handle") else ""
        expand = url("/expand", {"id": match["id"], "fragment": 1})
        rows.append(
            f'<li class="result" data-id="{esc(match["id"])}" data-kind="{esc(match["kind"])}">'
            f'<div class="result-head">{chip(kind, kind="kind")} <a class="result-title" href="{esc(page_of(match["kind"], match["id"], path, record))}">{esc(title)}</a>'
            f' {status}{handle} <span class="muted">{when(match.get("date"))}</span></div>{cut}'
            f'<details data-expand="{esc(expand)}"><summary>Record</summary>'
            f'<div class="expanded">{link(url("/expand", {"id": match["id"]}), "Open the full record")}</div></details></li>'
        )
    if rows:
        parts.append(Html(f'<ol class="results" start="{offset + 1}">{"".join(rows)}</ol>'))
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


def _is_time(key: str) -> bool:
    return key in TIME_FIELDS or key.endswith(("At", "_at"))


def render_value(key: str, value: Any, depth: int = 0) -> Html | None:
    """One field's value as a person reads it: times humanised, lists as chips or items,
    nested records as nested fields, long text as markdown; None for an empty value."""
    if value is None or value == "" or value == [] or value == {}:
        return None
    if _is_time(key) and isinstance(value, int | float) and not isinstance(value, bool):
        return when(seconds_time(value))
    if _is_time(key) and isinstance(value, str):
        return when(value)
    if isinstance(value, bool):
        return Html("yes" if value else "no")
    if isinstance(value, int | float):
        return esc(f"{value:,}" if isinstance(value, int) else value)
    if isinstance(value, str):
        if key in MARKDOWN_FIELDS and (len(value) > 80 or "\n" in value):
            return render_markdown(value)
        return pre(value) if "\n" in value else esc(value)
    if isinstance(value, list):
        if all(isinstance(entry, str | int | float) for entry in value):
            return join([chip(entry) for entry in value[:100]], " ")
        if depth >= MAX_DEPTH:
            return esc(f"{len(value)} items")
        shown = [render_fields(entry, depth + 1) if isinstance(entry, Mapping) else render_value(key, entry, depth + 1) or Html("") for entry in value[:50]]
        more = f'<li class="muted">… {len(value) - 50:,} more</li>' if len(value) > 50 else ""
        return Html(f'<ol class="record-list">{"".join(f"<li>{entry}</li>" for entry in shown)}{more}</ol>')
    if isinstance(value, Mapping):
        return render_fields(value, depth + 1) if depth < MAX_DEPTH else esc(f"{len(value)} fields")
    return esc(value)


def render_fields(record: Mapping[str, Any], depth: int = 0) -> Html:
    """A record's fields (internals left out), each value as `render_value` shows it."""
    rows = []
    for key, value in record.items():
        if (key in HIDDEN_FIELDS and depth == 0) or str(key).endswith("_norm"):
            continue
        shown = render_value(str(key), value, depth)
        if shown is not None:
            rows.append((str(key), shown))
    return definition_list(rows)


def render_item(item: Mapping[str, Any]) -> Html:
    """One full record: its kind and title with a link to its page, where its file is, its
    fields, and the items it links to."""
    record = item.get("record") or {}
    kind, ident, path = str(item.get("kind")), str(item["id"]), item.get("path")
    where = f"{path}" + (f":{item['line']}" if item.get("line") else "")
    title = title_of(kind, record, ident)
    parts = [
        Html(
            f'<p class="where">{chip(kind_label(kind, path), kind="kind")} <a href="{esc(page_of(kind, ident, path, record))}">{esc(title)}</a> '
            f'<code>{esc(ident)}</code> <span class="muted">{esc(where)}</span></p>'
        ),
        render_fields(record),
    ]
    links = item.get("links") or {}
    linked = links.get("items") if isinstance(links, Mapping) else None
    if linked:
        found = [
            Html(f"{chip(kind_label(str(row.get('kind')), None), kind='kind')} {link(url('/expand', {'id': row['id']}), row.get('summary') or row['id'])}")
            for row in linked
        ]
        parts.append(Html(f'<p class="links">Links to: {join(found, " · ")}</p>'))
    if isinstance(links, Mapping) and links.get("missing"):
        parts.append(Html(f'<p class="links muted">Links to items not found: {esc(", ".join(map(str, links["missing"])))}</p>'))
    return Html(f'<article class="record" data-id="{esc(ident)}">{join(parts)}</article>')

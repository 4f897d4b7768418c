"""HTML building for the web view: escaping, links, the page layout, forms with their CSRF
token. Core layer (pure: values in, markup out).

Every value that reaches a page passes through `esc` (text and attribute values alike: it
escapes `& < > " '`), and only `Html` is ever inserted unescaped: markup this module or
`moss_files.web.markdown` built. Links to our own pages are built by `url` from a path and
query values, each percent-encoded.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

APP_NAME = "moss"
# The pages of the navigation bar: (path, label).
NAV = (("/board", "Board"), ("/capsules", "Capsules"), ("/messages", "Messages"), ("/memory", "Memory"), ("/search", "Search"), ("/agents", "Agents"))
# Characters of a value shown in full before it is cut (a huge line stays one line, scrolled).
LONG_TEXT = 200_000
# RFC 3986's unreserved characters: every other byte of a URL part is percent-encoded.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class Html(str):
    """Markup that is safe to insert as it is: built here from escaped parts."""

    __slots__ = ()


def esc(value: Any) -> Html:
    """`value` as text safe inside an element or a quoted attribute (None is empty)."""
    if value is None:
        return Html("")
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def join(parts: Iterable[Html | str], separator: str = "") -> Html:
    """Markup parts joined; plain strings among them are escaped."""
    return Html(separator.join(part if isinstance(part, Html) else esc(part) for part in parts))


def percent(text: str, safe: str = "") -> str:
    """`text` percent-encoded as UTF-8, all but the unreserved characters and `safe`."""
    kept = _UNRESERVED | frozenset(safe.encode())
    return "".join(chr(byte) if byte in kept else f"%{byte:02X}" for byte in text.encode("utf-8"))


def url(path: str, query: Mapping[str, Any] | None = None) -> str:
    """A link to one of our pages: `path` segments percent-encoded (slashes kept), then the
    query values that are not None. The result still needs `esc` inside an attribute."""
    text = percent(path, safe="/")
    pairs = [f"{percent(str(key))}={percent(str(value))}" for key, value in (query or {}).items() if value is not None and value != ""]
    return f"{text}?{'&'.join(pairs)}" if pairs else text


def link(href: str, text: Any, *, cls: str | None = None) -> Html:
    """An `<a>` to `href` (one of our own URLs, from `url`) showing `text`."""
    klass = f' class="{esc(cls)}"' if cls else ""
    return Html(f'<a href="{esc(href)}"{klass}>{esc(text)}</a>')


def task_link(task_id: str, text: Any | None = None) -> Html:
    """A link to a board task's page."""
    return link(url(f"/tasks/{task_id}"), text if text is not None else task_id)


def badge(text: Any, kind: str = "") -> Html:
    """A small label (`status`, `priority`, `kind`), styled by its kind and value."""
    slug = "".join(ch if ch.isalnum() else "-" for ch in str(text).lower())
    return Html(f'<span class="badge {esc(kind)} {esc(kind)}-{esc(slug)}">{esc(text)}</span>')


def when(stamp: Any) -> Html:
    """A time shown as written, in a `<time>` element (browsers may show it in local time)."""
    if not stamp:
        return Html('<span class="muted">—</span>')
    return Html(f'<time datetime="{esc(stamp)}">{esc(stamp)}</time>')


def pre(text: Any, *, cls: str = "") -> Html:
    """Text kept as written (escaped, wrapped at the box's edge, a huge value cut)."""
    value = "" if text is None else str(text)
    cut = len(value) > LONG_TEXT
    shown = value[:LONG_TEXT]
    klass = f' class="{esc(cls)}"' if cls else ""
    more = f'\n<span class="muted">… {len(value) - LONG_TEXT:,} more characters</span>' if cut else ""
    return Html(f"<pre{klass}>{esc(shown)}{more}</pre>")


def json_block(value: Any) -> Html:
    """A JSON value, indented, escaped."""
    return pre(json.dumps(value, indent=2, ensure_ascii=False, default=str), cls="json")


def definition_list(rows: Sequence[tuple[str, Html | str | None]]) -> Html:
    """A `<dl>` of label/value rows; rows whose value is None or empty are left out."""
    items = [f"<dt>{esc(label)}</dt><dd>{value if isinstance(value, Html) else esc(value)}</dd>" for label, value in rows if value not in (None, "")]
    return Html(f'<dl class="fields">{"".join(items)}</dl>') if items else Html("")


def table(headers: Sequence[str], rows: Iterable[Sequence[Html | str | None]], *, cls: str = "") -> Html:
    """A table; cell values that are not `Html` are escaped."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell if isinstance(cell, Html) else esc(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return Html(f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


def section(title: str, body: Html, *, anchor: str | None = None, count: int | None = None) -> Html:
    """A titled section of a page."""
    ident = f' id="{esc(anchor)}"' if anchor else ""
    shown = f' <span class="count">{count:,}</span>' if count is not None else ""
    return Html(f"<section{ident}><h2>{esc(title)}{shown}</h2>{body}</section>")


def empty(text: str) -> Html:
    """What a section shows when it has nothing."""
    return Html(f'<p class="empty">{esc(text)}</p>')


def problem_list(problems: Sequence[Mapping[str, Any]]) -> Html:
    """The files a page was built without (each problem's code, path, line and message)."""
    if not problems:
        return Html("")
    items = []
    for problem in problems:
        where = f"{problem.get('path') or ''}" + (f":{problem['line']}" if problem.get("line") else "")
        items.append(f"<li>{badge(problem.get('code', 'PROBLEM'), 'code')} <code>{esc(where)}</code> {esc(problem.get('message', ''))}</li>")
    return Html(f'<div class="problems" role="alert"><p>Built without these files:</p><ul>{"".join(items)}</ul></div>')


def notice(text: str, kind: str = "info") -> Html:
    """A banner: `info`, `done` or `error`."""
    role = ' role="alert"' if kind == "error" else ""
    return Html(f'<div class="notice {esc(kind)}"{role}>{esc(text)}</div>')


def error_notice(body: Mapping[str, Any]) -> Html:
    """A banner for an error body (`{code, message, path?, line?, hint?}`)."""
    where = f"{body.get('path')}" + (f":{body['line']}" if body.get("line") else "") if body.get("path") else ""
    parts = [f"{badge(body.get('code', 'ERROR'), 'code')} {esc(body.get('message', ''))}"]
    if where:
        parts.append(f" <code>{esc(where)}</code>")
    if body.get("hint"):
        parts.append(f'<br><span class="muted">{esc(body["hint"])}</span>')
    return Html(f'<div class="notice error" role="alert">{"".join(parts)}</div>')


# --------------------------------------------------------------------------- forms


def hidden(name: str, value: Any) -> Html:
    return Html(f'<input type="hidden" name="{esc(name)}" value="{esc(value)}">')


def post_form(action: str, csrf: str, body: Html, *, cls: str = "") -> Html:
    """A form that posts to `action` (one of our URLs) with the page's CSRF token."""
    return Html(f'<form method="post" action="{esc(action)}" class="{esc(cls)}">{hidden("csrf", csrf)}{body}</form>')


def button(label: str, *, name: str | None = None, kind: str = "") -> Html:
    named = f' name="{esc(name)}"' if name else ""
    return Html(f'<button type="submit" class="{esc(kind)}"{named}>{esc(label)}</button>')


def text_area(name: str, label: str, *, required: bool = False, placeholder: str = "") -> Html:
    need = " required" if required else ""
    return Html(f'<label>{esc(label)}<textarea name="{esc(name)}" rows="2" maxlength="10000" placeholder="{esc(placeholder)}"{need}></textarea></label>')


# --------------------------------------------------------------------------- the page


@dataclass(frozen=True, slots=True)
class Page:
    """One rendered page: its title, its main content, the kinds of change that make it
    refresh itself (`board`, `capsules`, …, or `*`), and its HTTP status."""

    title: str
    body: Html
    live: tuple[str, ...] = ()
    status: int = 200
    headers: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def layout(page: Page, *, workspace: str, current: str, csrf: str, query: str = "", signed_in: bool = False) -> Html:
    """The whole document around a page's content: head, navigation, search box, main."""
    nav = "".join(f'<a href="{esc(path)}"{" aria-current=page" if current.startswith(path) else ""}>{esc(label)}</a>' for path, label in NAV)
    logout = post_form("/logout", csrf, button("Sign out", kind="link"), cls="logout") if signed_in else ""
    live = " ".join(page.live)
    return Html(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(page.title)} · {esc(workspace)} · {APP_NAME}</title>"
        '<link rel="stylesheet" href="/static/style.css"><link rel="icon" href="/static/icon.svg" type="image/svg+xml">'
        '<script src="/static/live.js" defer></script></head>'
        f'<body data-live="{esc(live)}">'
        f'<header><a class="brand" href="/">{esc(APP_NAME)}</a><span class="workspace" title="workspace">{esc(workspace)}</span>'
        f'<nav aria-label="pages">{nav}</nav>'
        f'<form class="search" method="get" action="/search" role="search"><input type="search" name="q" value="{esc(query)}" placeholder="Search" aria-label="Search"></form>'
        f'<span class="live-state" aria-live="polite" title="live updates"></span>{logout}</header>'
        f'<main id="main">{page.body}</main></body></html>'
    )

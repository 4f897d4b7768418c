"""HTML building for the web view: escaping, links, times, tables, the page layout, forms with
their CSRF token, and the keyed parts a live page is updated by. Core layer (pure: values in,
markup out).

Every value that reaches a page passes through `esc` (text and attribute values alike: it
escapes `& < > " '`, and a NUL becomes U+FFFD as browsers read it), and only `Html` is ever
inserted unescaped: markup this module or `moss_files.web.markdown` built. Links to our own
pages are built by `url` from a path and query values, each percent-encoded.

A live page may be built of keyed parts (`Live`): its body is a template holding a marker per
part (and per ordered list of parts), filled in by `fill`. `snapshot` keeps a digest of the
template and of each part; `changes` compares a snapshot with a new rendering and answers only
what changed (the parts, and the lists whose order changed), so an open page that follows the
files is sent a card, not the board.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

APP_NAME = "moss"
# The pages of the navigation bar: (path, label).
NAV = (("/board", "Board"), ("/capsules", "Capsules"), ("/messages", "Messages"), ("/memory", "Memory"), ("/search", "Search"), ("/agents", "Agents"))
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# A part's or a list's marker in a live page's template: NUL, p or l, a colon, the key, NUL
# (`esc` turns every NUL of a value into U+FFFD, so no value can forge one).
_HOLE = re.compile("\x00([pl]):([^\x00]*)\x00")
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
    return Html(html.escape(str(value).replace("\x00", "\ufffd"), quote=True))


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


def parse_time(stamp: Any) -> datetime | None:
    """An RFC 3339 time or a date (`2026-01-21T10:00:00.123Z`, `2026-01-21`) as an aware UTC
    datetime; None for anything else."""
    if not isinstance(stamp, str) or not 10 <= len(stamp) <= 40:
        return None
    try:
        found = datetime.fromisoformat(stamp.replace("z", "Z"))
    except ValueError:
        return None
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found.astimezone(UTC)


def human_time(stamp: Any) -> str | None:
    """A time as a person reads it: `21 Jan 2026 10:00 UTC` (a date alone: `21 Jan 2026`);
    None when `stamp` is no time."""
    found = parse_time(stamp)
    if found is None:
        return None
    day = f"{found.day} {_MONTHS[found.month - 1]} {found.year}"
    return day if len(stamp.strip()) == 10 else f"{day} {found:%H:%M} UTC"


def when(stamp: Any) -> Html:
    """A time in a `<time>` element: humanised (`21 Jan 2026 10:00 UTC`, which the page's
    script turns into `5 min ago` in the reader's time zone), the exact time on hover. A value
    that is no time is shown as written."""
    if not stamp:
        return Html('<span class="muted">—</span>')
    shown = human_time(stamp)
    if shown is None:
        return Html(f"<span>{esc(stamp)}</span>")
    return Html(f'<time datetime="{esc(stamp)}" title="{esc(stamp)}">{esc(shown)}</time>')


def clock(stamp: Any) -> Html:
    """A time of day (`14:27:21`) in a `<time>` element, the exact time on hover (timelines,
    where the day is the same from line to line)."""
    found = parse_time(stamp)
    if found is None:
        return esc(stamp or "")
    return Html(f'<time class="clock" datetime="{esc(stamp)}" title="{esc(stamp)}">{found:%H:%M:%S}</time>')


def seconds_time(seconds: Any) -> str | None:
    """A unix time (seconds) as RFC 3339 UTC; None for no number."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    try:
        return datetime.fromtimestamp(float(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


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
    """A table; cell values that are not `Html` are escaped. Each cell carries its column's
    name (`data-label`): on a narrow screen a row is shown as a card of labelled lines, and a
    wide table scrolls in its own box, never the page."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    labels = [f' data-label="{esc(h)}"' if h else "" for h in headers]
    body = "".join(
        "<tr>"
        + "".join(f"<td{labels[i] if i < len(labels) else ''}>{cell if isinstance(cell, Html) else esc(cell)}</td>" for i, cell in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return Html(f'<div class="table-wrap"><table class="stack {esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>')


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


def button(label: str, *, name: str | None = None, value: str | None = None, kind: str = "") -> Html:
    named = f' name="{esc(name)}"' if name else ""
    valued = f' value="{esc(value)}"' if value is not None else ""
    return Html(f'<button type="submit" class="{esc(kind)}"{named}{valued}>{esc(label)}</button>')


def text_area(name: str, label: str, *, required: bool = False, placeholder: str = "", rows: int = 2) -> Html:
    need = " required" if required else ""
    return Html(f'<label>{esc(label)}<textarea name="{esc(name)}" rows="{rows}" maxlength="10000" placeholder="{esc(placeholder)}"{need}></textarea></label>')


def text_input(name: str, label: str, *, value: str = "", required: bool = False, placeholder: str = "", maxlength: int = 500) -> Html:
    need = " required" if required else ""
    return Html(
        f'<label>{esc(label)}<input type="text" name="{esc(name)}" value="{esc(value)}" maxlength="{maxlength}" placeholder="{esc(placeholder)}"{need}></label>'
    )


def select(name: str, label: str, options: Sequence[tuple[str, str]], *, chosen: str | None = None, required: bool = False) -> Html:
    """A `<select>` of (value, label) options, `chosen` selected."""
    need = " required" if required else ""
    items = "".join(f'<option value="{esc(value)}"{" selected" if value == chosen else ""}>{esc(text)}</option>' for value, text in options)
    return Html(f'<label>{esc(label)}<select name="{esc(name)}"{need}>{items}</select></label>')


def chip(text: Any, href: str | None = None, *, kind: str = "", remove: str | None = None) -> Html:
    """A small rounded label; a link when `href` is given; with `remove`, a ✕ link that takes
    it away (a filter chip)."""
    inner = link(href, text) if href else esc(text)
    cross = f'<a class="remove" href="{esc(remove)}" aria-label="remove {esc(text)}">✕</a>' if remove else ""
    return Html(f'<span class="chip {esc(kind)}">{inner}{cross}</span>')


# --------------------------------------------------------------------------- the page


class Live:
    """The keyed parts of a live page, gathered while it is built: `part` and `items` return
    the markers its template holds in their place; `fill` puts the parts back."""

    def __init__(self) -> None:
        self.parts: dict[str, Html] = {}
        self.lists: dict[str, tuple[str, ...]] = {}

    def part(self, key: str, markup: Html) -> Html:
        """`markup` (one element carrying `data-key="<key>"`) as a part of the page."""
        self.parts[key] = markup
        return Html(f"\x00p:{key}\x00")

    def items(self, list_key: str, items: Iterable[tuple[str, Html]]) -> Html:
        """Keyed elements in order, the children of the element carrying `data-list="<list_key>"`."""
        keys = []
        for key, markup in items:
            self.parts[key] = markup
            keys.append(key)
        self.lists[list_key] = tuple(keys)
        return Html(f"\x00l:{list_key}\x00")


@dataclass(frozen=True, slots=True)
class Page:
    """One rendered page: its title, its main content, the kinds of change that make it
    refresh itself (`board`, `capsules`, …, or `*`), and its HTTP status. A live page built of
    keyed parts holds its template in `body` and the parts in `parts` and `lists` (`Live`)."""

    title: str
    body: Html
    live: tuple[str, ...] = ()
    status: int = 200
    headers: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    parts: Mapping[str, Html] = field(default_factory=dict)
    lists: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def fill(page: Page) -> Html:
    """The page's main content: its template with every part put in its place."""
    if not page.parts:
        return page.body

    def one(found: re.Match[str]) -> str:
        if found.group(1) == "l":
            return "".join(page.parts[key] for key in page.lists.get(found.group(2), ()))
        return page.parts.get(found.group(2), "")

    return Html(_HOLE.sub(one, page.body))


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a browser was sent of a live page: digests of the template and of each part, and
    the keys of each list in order."""

    template: str
    parts: Mapping[str, str]
    lists: Mapping[str, tuple[str, ...]]


def snapshot(page: Page) -> Snapshot:
    """The snapshot of a rendered page (a page without parts is one template)."""
    if not page.parts:
        return Snapshot(_digest(page.body), {}, {})
    return Snapshot(_digest(page.body), {key: _digest(markup) for key, markup in page.parts.items()}, dict(page.lists))


def changes(before: Snapshot | None, page: Page) -> dict[str, Any]:
    """What a browser showing `before` needs to show `page`: `{}` when nothing changed,
    `{"main": html}` when more than keyed parts did (or `before` is unknown), else
    `{"parts": {key: html}, "lists": {list: [keys]}}` with only the changed parts and the lists
    whose order changed."""
    after = snapshot(page)
    if before is None or before.template != after.template or set(before.lists) != set(after.lists):
        return {"main": fill(page)}
    changed = {key: page.parts[key] for key, digest in after.parts.items() if before.parts.get(key) != digest}
    lists = {key: list(keys) for key, keys in after.lists.items() if before.lists.get(key) != keys}
    found: dict[str, Any] = {}
    if changed:
        found["parts"] = changed
    if lists:
        found["lists"] = lists
    return found


def layout(page: Page, *, workspace: str, current: str, csrf: str, query: str = "", signed_in: bool = False, nav: bool = True, render: str = "") -> Html:
    """The whole document around a page's content: head, navigation, search box, main. With
    `nav` false (a visitor who has not signed in), only the name and the page: no navigation,
    no search box, no token for the page's script."""
    links = "".join(f'<a href="{esc(path)}"{" aria-current=page" if current.startswith(path) else ""}>{esc(label)}</a>' for path, label in NAV)
    logout = post_form("/logout", csrf, button("Sign out", kind="link"), cls="logout") if signed_in and nav else ""
    live = " ".join(page.live) if nav else ""
    token = f'<meta name="moss-csrf" content="{esc(csrf)}">' if nav else ""
    tools = (
        f'<form class="search" method="get" action="/search" role="search"><input type="search" name="q" value="{esc(query)}" placeholder="Search" aria-label="Search"></form>'
        f'<span class="live-state" aria-live="polite" title="live updates"></span>{logout}'
        f'<nav aria-label="pages">{links}</nav>'
        if nav
        else ""
    )
    marked = f' data-render="{esc(render)}"' if render else ""
    return Html(
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(page.title)} · {esc(workspace)} · {APP_NAME}</title>{token}"
        '<link rel="stylesheet" href="/static/style.css"><link rel="icon" href="/static/icon.svg" type="image/svg+xml">'
        '<script src="/static/live.js" defer></script></head>'
        f'<body data-live="{esc(live)}">'
        f'<header><a class="brand" href="/">{esc(APP_NAME)}</a><span class="workspace" title="workspace">{esc(workspace)}</span>{tools}</header>'
        f'<main id="main"{marked}>{fill(page)}</main>'
        '<div class="toast" role="status" aria-live="polite" hidden></div></body></html>'
    )

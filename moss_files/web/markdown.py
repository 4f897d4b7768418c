"""Markdown for the web view: file content is untrusted input, rendered by markdown-it-py with
raw HTML shown as text. Core layer (pure: text in, markup out).

CommonMark plus tables and strikethrough. Raw HTML in the text (`<script>`, `<img onerror>`)
is escaped, never passed through; a link or image whose target is not http, https, mailto, a
fragment or a relative path (`javascript:`, `vbscript:`, `data:`, `file:`) stays text; links
open without sending a referrer. The page's Content-Security-Policy (`moss_files.web.app`) is
the second wall: no inline script runs and no image loads from elsewhere even if one got
through. markdown-it-py is imported here only, on the first page that renders markdown.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from moss_files.web.html import LONG_TEXT, Html

# What a link may point at: a scheme we allow, or no scheme at all (a path or a fragment).
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def safe_link(target: str) -> bool:
    """True when a (normalized) link target may become an `href`/`src`."""
    found = _SCHEME.match(target.strip())
    return found is None or found.group(1).lower() in SAFE_SCHEMES


@cache
def _parser() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(["table", "strikethrough"])
    md.validateLink = safe_link  # type: ignore[method-assign,assignment]  # an instance attribute, called with the URL only

    def link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        return str(self.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


def render_markdown(text: str | None) -> Html:
    """`text` as HTML: markdown rendered, its raw HTML escaped, unsafe links left as text."""
    if not text:
        return Html("")
    shown = text if len(text) <= LONG_TEXT else text[:LONG_TEXT]
    rendered = str(_parser().render(shown))
    if len(text) > LONG_TEXT:
        rendered += f'<p class="muted">… {len(text) - LONG_TEXT:,} more characters not shown</p>'
    return Html(f'<div class="markdown">{rendered}</div>')


def render_inline(text: str | None) -> Html:
    """One line of markdown (a title, a plan step) without a paragraph around it."""
    if not text:
        return Html("")
    return Html(str(_parser().renderInline(text[:LONG_TEXT])))

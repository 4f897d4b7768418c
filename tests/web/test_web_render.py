"""The web view's pure parts: escaping, markdown with raw HTML and unsafe links refused, the
board's cards, diffs, which file changes refresh which pages, and the guard's form rule."""

from __future__ import annotations

import re

import pytest

from moss_files.foundation.httpguard import check_request
from moss_files.web import board, capsules, html, markdown, watch

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_escaping_covers_text_and_attributes() -> None:
    assert html.esc(HOSTILE) == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert html.esc("it's") == "it&#x27;s" and html.esc(None) == "" and html.esc(html.Html("<b>")) == "<b>"
    assert html.link(html.url("/tasks/a b", {"q": "x&y", "none": None}), HOSTILE) == (
        '<a href="/tasks/a%20b?q=x%26y">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</a>'
    )
    assert "<script>" not in html.join(["<script>", html.Html("<b>ok</b>")])
    page = html.layout(html.Page(HOSTILE, html.Html("<p>body</p>"), live=("board",)), workspace=HOSTILE, current="/board", csrf="c0ffee", query='"><script>')
    assert "<script>alert" not in page and '"><script>' not in page
    assert '<body data-live="board">' in page and '<script src="/static/live.js" defer></script>' in page


def test_a_huge_value_is_cut_and_says_so() -> None:
    shown = html.pre("W" * (html.LONG_TEXT + 10))
    assert shown.count("W") == html.LONG_TEXT and "10 more characters" in shown


@pytest.mark.parametrize(
    "text",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](&#x6A;avascript:alert(1))",
        "[x](  javascript:alert(1) )",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html,<script>alert(1)</script>)",
        "![x](data:image/svg+xml,<svg onload=alert(1)>)",
        "[x](file:///etc/passwd)",
        "<javascript:alert(1)>",
        '<a href="javascript:alert(1)">x</a>',
        "[x]: javascript:alert(1)\n\n[link][x]",
    ],
)
def test_markdown_never_makes_an_unsafe_link(text: str) -> None:
    rendered = markdown.render_markdown(text)
    assert not re.search(r"""(href|src)\s*=\s*["']?\s*(javascript|vbscript|data|file):""", rendered, re.IGNORECASE), rendered


def test_markdown_escapes_raw_html_and_keeps_safe_links() -> None:
    rendered = markdown.render_markdown(
        f"# Title\n\n{HOSTILE}\n\n[ok](https://example.org/a?b=1) [rel](docs/x.md) [frag](#top)\n\n| a | b |\n|---|---|\n| <b>1</b> | 2 |\n"
    )
    assert "<script>" not in rendered and "<img" not in rendered and "<b>1</b>" not in rendered
    assert "&lt;script&gt;" in rendered and "&lt;b&gt;1&lt;/b&gt;" in rendered and "<table>" in rendered and "<h1>Title</h1>" in rendered
    assert '<a href="https://example.org/a?b=1" rel="noopener noreferrer nofollow">ok</a>' in rendered
    assert '<a href="docs/x.md"' in rendered and '<a href="#top"' in rendered
    assert markdown.render_inline("**bold** <i>x</i>") == "<strong>bold</strong> &lt;i&gt;x&lt;/i&gt;"
    huge = markdown.render_markdown("W" * (html.LONG_TEXT + 5))
    assert "5 more characters not shown" in huge


def test_a_card_shows_owner_priority_and_reopens_escaped() -> None:
    card = board.render_card(
        {"id": "TASK-1", "title": HOSTILE, "status": "WORKING", "priority": "high", "assignedWorkerId": "dev", "reopenCount": 2, "dependsOn": ["TASK-0"]}
    )
    assert 'data-task="TASK-1"' in card and 'data-owner="dev"' in card and "@dev" in card and "↺ 2" in card and "priority-high" in card
    assert "<script>" not in card and 'href="/tasks/TASK-1"' in card
    plain = board.render_card({"id": "TASK-2", "title": "t", "status": "BACKLOG", "priority": None, "assignedWorkerId": None})
    assert 'data-owner=""' in plain and "↺" not in plain


def test_buttons_follow_the_status() -> None:
    waiting = board.render_actions({"id": "T-1", "status": "AWAITING_APPROVAL"}, "tok")
    assert 'action="/tasks/T-1/approve"' in waiting and 'action="/tasks/T-1/reject-plan"' in waiting and 'name="csrf" value="tok"' in waiting
    review = board.render_actions({"id": "T-1", "status": "REVIEW"}, "tok")
    assert 'action="/tasks/T-1/qa-approve"' in review and 'action="/tasks/T-1/qa-reject"' in review
    assert board.render_actions({"id": "T-1", "status": "WORKING"}, "tok") == ""
    with pytest.raises(Exception) as caught:
        board.card_limit("0")
    assert getattr(caught.value, "code", None) == "INVALID_REQUEST"
    assert board.card_limit(None) == board.DEFAULT_CARDS and board.card_limit("500") == 500


def test_a_diff_marks_lines_and_escapes_them() -> None:
    shown = capsules.render_diff("a\n<script>\nc\n", "a\n<b>\nc\n", "old", "new")
    assert '<span class="del">-&lt;script&gt;</span>' in shown and '<span class="add">+&lt;b&gt;</span>' in shown
    assert "No difference" in capsules.render_diff("same\n", "same\n", "a", "b")


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (".moss/board/tasks/TASK-1.md", "board"),
        (".moss/board/activity.jsonl", "board"),
        (".moss/board/tasks/.TASK-1.md.tmp-12-ab", None),
        (".moss/capsules/web/login.md", "capsules"),
        (".moss/insights/INS-1.md", "loopflow"),
        (".moss/sessions/S-1.md", "loopflow"),
        (".moss/agent/sessions/01ABC.jsonl", "agents"),
        (".moss/config.toml", "settings"),
        (".moss/run/.board.lock", None),
        (".moss/run/mcp.json", None),
        (".moss/cache/index.db-wal", None),
        (".cstack/PLAN.md", "memory"),
        (".needlecast/inbox.md", "messages"),
        ("alice/.needlecast/outbox/m1.md", "messages"),
        ("src/main.py", None),
        ("README.md", None),
        (".moss", None),
    ],
)
def test_which_changes_refresh_which_pages(path: str, kind: str | None) -> None:
    assert watch.kind_of(path) == kind


@pytest.mark.parametrize(
    ("origin", "content_type", "expected"),
    [
        ("http://127.0.0.1:8765", "application/x-www-form-urlencoded", None),
        ("http://127.0.0.1:8765", "application/x-www-form-urlencoded; charset=utf-8", None),
        (None, "application/x-www-form-urlencoded", 403),  # a form must say where it comes from
        ("http://127.0.0.1:9999", "application/x-www-form-urlencoded", 403),  # another port is another origin
        ("http://evil.example", "application/x-www-form-urlencoded", 403),
        ("null", "application/x-www-form-urlencoded", 403),
        ("http://127.0.0.1:8765", "text/plain", 415),
        ("http://127.0.0.1:8765", "multipart/form-data; boundary=x", 415),
    ],
)
def test_the_guard_lets_through_only_same_origin_forms(origin: str | None, content_type: str, expected: int | None) -> None:
    refusal = check_request("127.0.0.1", host="127.0.0.1:8765", origin=origin, method="POST", content_type=content_type, forms=True)
    assert (refusal.status if refusal else None) == expected
    # The MCP endpoint keeps its rule: JSON only.
    assert check_request("127.0.0.1", host="127.0.0.1:8765", origin=None, method="POST", content_type="application/x-www-form-urlencoded").status == 415  # type: ignore[union-attr]

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
    review = board.render_actions({"id": "T-1", "status": "REVIEW", "definitionOfDone": ["tests pass", "docs <b>"]}, "tok")
    assert 'action="/tasks/T-1/qa-approve"' in review and 'action="/tasks/T-1/qa-reject"' in review
    # QA names the failed items of the definition of done by their numbers, as --failed-dod does.
    assert 'name="failed" value="1"> tests pass' in review and 'name="failed" value="2"> docs &lt;b&gt;' in review
    working = board.render_actions({"id": "T-1", "status": "WORKING"}, "tok")
    assert "approve" not in working and 'action="/tasks/T-1/claim"' in working and 'action="/tasks/T-1/move"' in working
    assert '<option value="REVIEW">' in working and '<option value="DONE">' not in working  # the moves the state machine allows
    held = board.render_actions({"id": "T-1", "status": "DONE", "assignedWorkerId": "dev"}, "tok")
    assert 'action="/tasks/T-1/release"' in held and 'action="/tasks/T-1/archive"' in held and "/claim" not in held
    with pytest.raises(Exception) as caught:
        board.card_limit("0")
    assert getattr(caught.value, "code", None) == "INVALID_REQUEST"
    assert board.card_limit(None) == board.DEFAULT_CARDS and board.card_limit("500") == 500
    assert board.card_limit("999999") == board.MAX_CARDS  # more than the most is the most, not an error


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


def test_times_are_humanised_with_the_exact_time_on_hover() -> None:
    shown = html.when("2026-01-21T10:00:00.123Z")
    assert shown == '<time datetime="2026-01-21T10:00:00.123Z" title="2026-01-21T10:00:00.123Z">21 Jan 2026 10:00 UTC</time>'
    assert ">21 Jan 2026<" in html.when("2026-01-21") and "+02:00" in html.when("2026-01-21T12:00:00+02:00")
    assert ">21 Jan 2026 10:00 UTC<" in html.when("2026-01-21T12:00:00+02:00")  # shown in UTC
    assert html.when("next tuesday <b>") == "<span>next tuesday &lt;b&gt;</span>" and "—" in html.when(None)
    assert html.seconds_time(1795778612) == "2026-11-27T11:23:32Z" and html.seconds_time("x") is None
    assert html.clock("2026-01-21T10:00:05Z").endswith(">10:00:05</time>")


def test_a_nul_in_a_value_cannot_forge_a_part_marker() -> None:
    assert html.esc("a\x00p:card\x00b") == "a\ufffdp:card\ufffdb"


def test_tables_label_their_cells_and_scroll_in_their_own_box() -> None:
    shown = html.table(("when", "", "what"), [("1", "2", html.Html("<b>3</b>"))])
    assert shown.startswith('<div class="table-wrap"><table class="stack ')
    assert '<td data-label="when">1</td><td>2</td><td data-label="what"><b>3</b></td>' in shown


def _page(cards: dict[str, str], order: list[str], head: str = "h") -> html.Page:
    live = html.Live()
    body = html.Html(f"<h1>{head}</h1><ol data-list='col'>{live.items('col', ((key, html.Html(text)) for key, text in ((k, cards[k]) for k in order)))}</ol>")
    body = html.Html(body + live.part("count", html.Html(f"<p data-key='count'>{len(order)}</p>")))
    return html.Page("t", body, live=("board",), parts=live.parts, lists=live.lists)


def test_a_live_page_sends_only_what_changed() -> None:
    cards = {"a": "<li data-key='a'>A</li>", "b": "<li data-key='b'>B</li>", "c": "<li data-key='c'>C</li>"}
    before = _page(cards, ["a", "b", "c"])
    assert (
        html.fill(before) == "<h1>h</h1><ol data-list='col'><li data-key='a'>A</li><li data-key='b'>B</li><li data-key='c'>C</li></ol><p data-key='count'>3</p>"
    )
    shot = html.snapshot(before)
    assert html.changes(shot, _page(cards, ["a", "b", "c"])) == {}
    edited = {**cards, "b": "<li data-key='b'>B2</li>"}
    assert html.changes(shot, _page(edited, ["a", "b", "c"])) == {"parts": {"b": "<li data-key='b'>B2</li>"}}
    assert html.changes(shot, _page(cards, ["c", "a", "b"])) == {"lists": {"col": ["c", "a", "b"]}}
    removed = html.changes(shot, _page(cards, ["a", "c"]))
    assert removed == {"parts": {"count": "<p data-key='count'>2</p>"}, "lists": {"col": ["a", "c"]}}
    assert html.changes(shot, _page(cards, ["a", "b", "c"], head="other")) == {"main": html.fill(_page(cards, ["a", "b", "c"], head="other"))}
    assert "main" in html.changes(None, before)  # a render the server no longer knows: everything


def test_the_done_column_is_ordered_by_completion_and_labels_come_from_type_and_source() -> None:
    from moss_files.board import rules
    from moss_files.board.model import Task

    early = Task("T-1", "E", "early", status="DONE", priority="CRITICAL", created="2026-01-01T00:00:00Z", completed="2026-01-05T00:00:00Z")
    late = Task("T-2", "E", "late", status="DONE", priority="LOW", created="2026-01-02T00:00:00Z", completed="2026-03-01T00:00:00Z")
    unknown = Task("T-3", "E", "no time", status="DONE", updated="2026-02-01T00:00:00Z")
    assert [t.id for t in rules.column_order("DONE", [early, late, unknown], {})] == ["T-2", "T-3", "T-1"]
    assert [t.id for t in rules.column_order("BACKLOG", [late, early], {})] == ["T-1", "T-2"]  # queue order: priority first
    labelled = Task("T-4", "E", "x", type="bug", source={"system": "backlog", "id": "b-1", "fields": {"labels": ["ui", "bug", 3]}})
    assert rules.task_labels(labelled) == ("bug", "ui") and rules.task_labels(early) == ()


def test_a_search_record_shows_fields_not_internals() -> None:
    from moss_files.web import search

    shown = search.render_fields(
        {"id": "x", "path": "p", "name_norm": "n", "created_at": 1795778612, "title": "T", "empty": None, "tags": ["a", "b"], "meta": {"k": 1}}
    )
    assert "created_at" in shown and "1795778612" not in shown and ">27 Nov 2026 11:23 UTC<" in shown
    assert "name_norm" not in shown and "<dt>path</dt>" not in shown and "<dt>empty</dt>" not in shown and "{" not in shown
    assert '<span class="chip ">a</span>' in shown and "<dt>k</dt><dd>1</dd>" in shown
    assert search.kind_label("task", ".moss/board/tasks/T.md") == "board task" and search.kind_label("task", ".cstack/PLAN.md") == "plan item"
    assert (
        search.page_of("task", "T-1", ".moss/board/tasks/T-1.md", {}) == "/tasks/T-1" and search.page_of("task", "p", ".cstack/PLAN.md", {}) == "/memory#plan"
    )
    assert search.title_of("memory", {"cells": ["Cache", "SQLite", "safe to delete"]}, "x") == "Cache — SQLite"


def test_an_agent_event_is_one_line() -> None:
    from moss_files.web import agents

    said = {"kind": "assistant.message", "data": {"content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "name": "demo__echo"}]}}
    assert agents.event_line(said) == "Checking. → calls demo__echo"
    done = {"kind": "tool.succeeded", "data": {"tool": "demo.echo", "output": "echo:\n  hi", "duration_ms": 3}}
    assert agents.event_line(done) == "demo.echo → echo: hi (3 ms)"
    assert len(agents.event_line({"kind": "x.y", "data": {"text": "w " * 500}})) <= 140


def test_decisions_keep_their_why_and_threads_are_named_by_their_first_words() -> None:
    from moss_files.web import memory, messages

    shown = memory.render_memory(
        {"decisions": [{"text": "Cache", "date": "2026-01-02", "cells": ["Cache", "SQLite", "one file, safe to delete", "2026-01-02"]}]}
    )
    assert "<th>why</th>" in shown and 'data-label="why">one file, safe to delete</td>' in shown
    rows = [
        {"message": {"thread": "t-9", "time": "2026-01-02T00:00:00Z", "body": "Second"}},
        {"message": {"thread": "t-9", "time": "2026-01-01T00:00:00Z", "body": "## Can you take the rounding task?\nmore"}},
        {"message": {"thread": "t-8", "time": "2026-01-01T00:00:00Z", "body": ""}},
    ]
    assert messages.thread_titles(rows) == {"t-9": "Can you take the rounding task?", "t-8": "t-8"}

"""Insight files: parse, render, edits that change only their own lines, bad input."""

from __future__ import annotations

import difflib

import pytest

from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument, InvalidRequest
from moss_files.loopflow.insights import (
    Update,
    insight_brief,
    insight_to_dict,
    new_insight,
    parse_insight,
    plan_update,
    render_insight,
)

NOW = "2026-01-21T10:00:00Z"
LATER = "2026-01-22T09:30:00Z"

HAND_WRITTEN = """---
# written by hand
id: INS-001
type: Edge-Case   # LoopFlow's spelling, any case
status: unprocessed
tags: [mcp, gotcha]
links:
  - INS-002
source: {task: LF-049, session: 2026-01-21-S18}
reviewer: alice
created: 2026-01-21T08:48:53.156Z
---
Chicken-and-egg problem when developing the MCP server: the server that runs is the old build.

It needs a restart after every change.
"""


def parse(text: str, name: str = "INS-001"):
    return parse_insight(document.parse(text, f".moss/insights/{name}.md"), f".moss/insights/{name}.md", fallback_id=name)


def test_reads_loopflow_style_files() -> None:
    found = parse(HAND_WRITTEN)
    assert found.id == "INS-001"
    assert found.type == "edge_case"
    assert found.tags == ("mcp", "gotcha")
    assert found.links == ("INS-002",)
    assert found.source == {"task": "LF-049", "session": "2026-01-21-S18"}
    assert found.created == "2026-01-21T08:48:53.156Z"
    assert found.content.startswith("Chicken-and-egg")


def test_summary_and_context_are_generated_when_absent() -> None:
    found = parse(HAND_WRITTEN)
    assert found.summary is None
    assert found.effective_summary == "Chicken-and-egg problem when developing the MCP server: the server that runs is the old build."
    assert found.effective_context == found.effective_summary
    written = parse(HAND_WRITTEN.replace("reviewer: alice", "summary: MCP servers need restarts"))
    assert written.effective_summary == "MCP servers need restarts"


def test_id_defaults_to_the_file_name() -> None:
    found = parse("---\ntype: domain\n---\nBody.\n", name="INS-20260121-abcdefgh")
    assert found.id == "INS-20260121-abcdefgh"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("---\ntype: gotcha\n---\nx\n", 2),
        ("---\nstatus: open\n---\nx\n", 2),
        ("---\ntags: {a: 1}\n---\nx\n", 2),
        ("---\nid: x\nsummary: [a, b]\n---\nx\n", 3),
        ("---\nsource: [a]\n---\nx\n", 2),
        ("---\nid: ../../etc\n---\nx\n", 2),
    ],
)
def test_wrong_shapes_and_values_name_the_line(text: str, line: int) -> None:
    with pytest.raises(InvalidDocument) as caught:
        parse(text)
    assert caught.value.code == "SCHEMA_ERROR"
    assert caught.value.line == line
    assert caught.value.path == ".moss/insights/INS-001.md"


def test_new_insight_renders_and_reads_back() -> None:
    made = new_insight(
        "INS-20260121-7f3k9q2m", "Watch the lock.", now=NOW, type="architecture", tags=["lock", "lock", "db"], source={"task": "LF-1", "session": None}
    )
    text = render_insight(made)
    assert text.splitlines()[:6] == ["---", "id: INS-20260121-7f3k9q2m", "type: architecture", "status: unprocessed", "tags:", "  - lock"]
    again = parse(text, name=made.id)
    assert again == made
    assert insight_to_dict(again)["source"] == {"task": "LF-1"}
    assert set(insight_brief(again)) == {"id", "summary", "type", "status", "tags", "created_at"}


@pytest.mark.parametrize(
    "kwargs",
    [{"content": "  \n"}, {"type": "gotcha"}, {"tags": ["two words"]}, {"tags": [""]}, {"summary": "two\nlines"}],
)
def test_new_insight_refuses_bad_values(kwargs: dict) -> None:
    args = {"content": "x", **kwargs}
    with pytest.raises(InvalidRequest):
        new_insight("INS-1", args.pop("content"), now=NOW, **args)


def _apply(text: str, update: Update) -> str:
    found = parse(text)
    changes = plan_update(found, update, LATER)
    return document.edit_frontmatter(text, changes) if changes else text


def _changed_lines(before: str, after: str) -> list[str]:
    return [
        line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0) if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]


def test_status_change_is_a_small_diff_keeping_hand_written_bytes() -> None:
    after = _apply(HAND_WRITTEN, Update(status="discussed"))
    assert _changed_lines(HAND_WRITTEN, after) == ["-status: unprocessed", "+status: discussed", "+updated: 2026-01-22T09:30:00Z"]
    assert "# written by hand" in after and "reviewer: alice" in after
    assert after.endswith("It needs a restart after every change.\n")


def test_add_tags_and_links_keep_order_and_skip_repeats() -> None:
    after = parse(_apply(HAND_WRITTEN, Update(add_tags=("gotcha", "restart"), add_links=("LF-049",), remove_links=("INS-002",))))
    assert after.tags == ("mcp", "gotcha", "restart")
    assert after.links == ("LF-049",)


def test_replacing_and_clearing() -> None:
    after = _apply(HAND_WRITTEN, Update(tags=(), notes="Seen twice.", summary="Restart the server."))
    found = parse(after)
    assert found.tags == () and "tags" not in document.parse(after).meta
    assert found.notes == "Seen twice." and found.summary == "Restart the server."
    cleared = parse(_apply(after, Update(summary="")))
    assert cleared.summary is None


def test_an_update_that_changes_nothing_moves_nothing() -> None:
    assert plan_update(parse(HAND_WRITTEN), Update(status="unprocessed", add_tags=("mcp",)), LATER) == {}


def test_update_refuses_bad_values() -> None:
    with pytest.raises(InvalidRequest):
        plan_update(parse(HAND_WRITTEN), Update(status="done"), LATER)
    with pytest.raises(InvalidRequest):
        plan_update(parse(HAND_WRITTEN), Update(type="nonsense"), LATER)

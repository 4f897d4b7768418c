"""Session files: body sections, the outcome rule, handoff planning, bad input."""

from __future__ import annotations

import pytest

from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument, InvalidRequest
from moss_files.loopflow.sessions import (
    Handoff,
    body_with_sections,
    check_handoff,
    decide_outcome,
    new_session,
    parse_session,
    plan_handoff,
    read_section,
    render_session,
    session_brief,
    set_sections,
)

NOW = "2026-01-21T10:00:00Z"
END = "2026-01-21T12:00:00Z"


def parse(text: str, name: str = "SES-20260121-abcdefgh"):
    return parse_session(document.parse(text), f".moss/sessions/{name}.md", fallback_id=name)


def test_sections_are_replaced_in_place_and_added_at_the_end() -> None:
    body = "Intro kept.\n\n## Summary\nold text\n## Other\nkept too\n```\n## Summary\nnot a heading inside a fence\n```\n"
    new = set_sections(body, {"Summary": "new text", "Learnings": "- one"})
    assert new == ("Intro kept.\n\n## Summary\n\nnew text\n\n## Other\nkept too\n```\n## Summary\nnot a heading inside a fence\n```\n\n## Learnings\n\n- one\n")
    assert set_sections(new, {"Summary": "new text", "Learnings": "- one"}) == new
    assert read_section(new, "summary") == "new text"
    assert read_section(new, "Hot context") is None


def test_none_leaves_a_section_alone_and_empty_text_clears_it() -> None:
    body = "## Summary\n\nkeep\n"
    assert set_sections(body, {"Summary": None}) == body
    assert read_section(set_sections(body, {"Summary": ""}), "Summary") is None


@pytest.mark.parametrize(
    ("mode", "blocked", "in_progress", "explicit", "expected"),
    [
        ("graceful", (), (), None, "COMPLETE"),
        ("graceful", (), ("docs",), None, "PARTIAL"),
        ("graceful", ("review",), ("docs",), None, "BLOCKED"),
        ("emergency", ("review",), (), None, "INTERRUPTED"),
        ("emergency", (), (), "COMPLETE", "COMPLETE"),
    ],
)
def test_outcome_rule(mode: str, blocked: tuple, in_progress: tuple, explicit: str | None, expected: str) -> None:
    assert decide_outcome(mode, blocked, in_progress, explicit) == expected


def test_new_session_round_trips() -> None:
    made = new_session("SES-20260121-abcdefgh", now=NOW, task="LF-049 search", agent="claude")
    text = render_session(made)
    assert text == "---\nid: SES-20260121-abcdefgh\ntask: LF-049 search\nagent: claude\nstarted: 2026-01-21T10:00:00Z\nmoss_format: 2\n---\n"
    again = parse(text)
    assert again.active and again.status == "active" and again.date == "2026-01-21"


def test_handoff_plan_saves_next_actions_first_and_is_idempotent() -> None:
    session = parse(render_session(new_session("SES-20260121-abcdefgh", now=NOW)))
    request = check_handoff(Handoff(next_actions=("finish docs",), in_progress=("docs",), summary="Wrote the parser."))
    plan = plan_handoff(session, request, END)
    assert plan.next_actions == {"next_actions": ["finish docs"]}
    assert plan.rest == {"in_progress": ["docs"], "ended": END, "mode": "graceful", "outcome": "PARTIAL"}
    text = render_session(session)
    text = document.edit_frontmatter(text, plan.next_actions)
    text = document.edit_frontmatter(text, plan.rest)
    text = body_with_sections(text, plan.sections)
    done = parse(text)
    assert done.outcome == "PARTIAL" and done.summary == "Wrote the parser." and not done.active
    again = plan_handoff(done, request, "2026-01-21T13:00:00Z")
    assert again.next_actions == {} and again.rest == {}
    assert body_with_sections(text, again.sections) == text


def test_a_later_handoff_keeps_what_it_does_not_mention() -> None:
    done = parse(
        "---\nid: SES-1\nstarted: 2026-01-21T10:00:00Z\nended: 2026-01-21T11:00:00Z\noutcome: BLOCKED\nmode: graceful\nblocked_on: [review]\nnext_actions: [x]\n---\n"
    )
    plan = plan_handoff(done, check_handoff(Handoff()), END)
    assert plan.next_actions == {} and plan.rest == {}
    assert plan.outcome == "BLOCKED"


def test_reads_loopflow_session_ids_and_dates() -> None:
    legacy = parse("---\noutcome: in progress\n---\n", name="2026-01-22-S21b")
    assert legacy.id == "2026-01-22-S21b" and legacy.date == "2026-01-22" and legacy.outcome == "IN_PROGRESS"
    brief = session_brief(parse("---\nid: SES-20260121-x\nended: now\n---\n## Summary\n\n" + "word " * 100))
    assert brief["date"] == "2026-01-21" and len(brief["summary"]) <= 300


@pytest.mark.parametrize(
    ("text", "line"),
    [("---\nid: SES-1\noutcome: maybe\n---\n", 3), ("---\nmode: fast\n---\n", 2), ("---\nnext_actions: {a: b}\n---\n", 2)],
)
def test_bad_values_name_the_line(text: str, line: int) -> None:
    with pytest.raises(InvalidDocument) as caught:
        parse(text)
    assert (caught.value.code, caught.value.line) == ("SCHEMA_ERROR", line)


@pytest.mark.parametrize("request_", [Handoff(mode="panic"), Handoff(outcome="GREAT"), Handoff(task="two\nlines")])
def test_check_handoff_refuses_bad_values(request_: Handoff) -> None:
    with pytest.raises(InvalidRequest):
        check_handoff(request_)

"""Orient / remember / handoff on real files: LoopFlow's session loop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from moss_files.foundation import document
from moss_files.foundation.errors import InvalidRequest, NotFound
from moss_files.foundation.ids import IdSource, seeded_random
from moss_files.index import service as search
from moss_files.loopflow import service as loopflow
from moss_files.loopflow.sessions import Handoff


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 21, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ctx(tmp_path: Path, clock: Clock) -> loopflow.Context:
    (tmp_path / ".moss").mkdir()
    return loopflow.Context(tmp_path, clock=clock, ids=IdSource(clock, seeded_random(2)))


def test_orient_opens_a_session_then_resumes_it(ctx: loopflow.Context) -> None:
    first = loopflow.orient(ctx, task="LF-49 search")
    assert first["resumed"] is False and first["session"]["status"] == "active"
    assert first["session"]["task"] == "LF-49 search"
    assert set(first) == {
        "session",
        "resumed",
        "repo",
        "repo_summary",
        "suggested_actions",
        "recent_sessions",
        "insights",
        "memory",
        "inbox",
        "quick_stats",
        "problems",
        "hints",
    }
    again = loopflow.orient(ctx)
    assert again["resumed"] is True and again["session"]["id"] == first["session"]["id"]
    fresh = loopflow.orient(ctx, new=True)
    assert fresh["session"]["id"] != first["session"]["id"]


def test_orient_shows_summaries_never_full_text(ctx: loopflow.Context) -> None:
    long_text = "Short first sentence. " + "More detail. " * 200
    made = loopflow.remember(ctx, long_text)
    loopflow.remember(ctx, "Already discussed.")
    oriented = loopflow.orient(ctx, insight_limit=1)
    items = oriented["insights"]["items"]
    assert items == [
        {"id": made["id"], "summary": "Short first sentence.", "type": "technical", "status": "unprocessed", "tags": [], "created_at": "2026-01-21T09:00:00Z"}
    ]
    assert oriented["insights"]["total_count"] == 2 and oriented["insights"]["is_complete"] is False
    assert len(str(oriented)) < 3000


def test_orient_reads_memory_files_when_present(ctx: loopflow.Context) -> None:
    (ctx.root / ".cstack").mkdir()
    (ctx.root / ".cstack" / "PLAN.md").write_text("# Plan\n\n## Tasks\n- [ ] P1: Ready task\n- [>] Busy task\n")
    (ctx.root / ".cstack" / "CURRENT.md").write_text("# Current\n\n## Now\nWiring search.\n")
    memory = loopflow.orient(ctx)["memory"]
    assert memory["focus"] == "Wiring search."
    assert memory["plan"]["ready"] == 1 and memory["plan"]["in_progress"] == 1


def test_handoff_saves_next_actions_and_records_the_outcome(ctx: loopflow.Context, clock: Clock) -> None:
    started = loopflow.orient(ctx, task="LF-49")["session"]
    clock.now += timedelta(hours=2)
    result = loopflow.handoff(
        ctx, Handoff(next_actions=("write the docs",), completed=("parser",), in_progress=("docs",), summary="Parser done.", learnings="- bm25 wants weights")
    )
    session = result["session"]
    assert result["created"] is False and result["next_actions_saved"] is True and result["changed"] is True
    assert session["id"] == started["id"] and result["outcome"] == "PARTIAL"
    assert session["ended_at"] == "2026-01-21T11:00:00Z" and session["next_actions"] == ["write the docs"]
    assert session["summary"] == "Parser done." and session["learnings"] == "- bm25 wants weights"
    text = (ctx.root / session["path"]).read_text()
    meta = document.parse(text).meta
    assert list(meta)[:3] == ["id", "task", "started"]
    # The next session is told what to do first.
    oriented = loopflow.orient(ctx)
    assert oriented["resumed"] is False and oriented["suggested_actions"] == ["write the docs"]
    assert oriented["recent_sessions"][0]["summary"] == "Parser done."


def test_handoff_is_idempotent_without_an_active_session(ctx: loopflow.Context, clock: Clock) -> None:
    loopflow.orient(ctx)
    request = Handoff(next_actions=("next",), blocked_on=("review",))
    first = loopflow.handoff(ctx, request)
    path = ctx.root / first["session"]["path"]
    before = path.read_bytes()
    clock.now += timedelta(minutes=5)
    second = loopflow.handoff(ctx, request)
    assert second["session"]["id"] == first["session"]["id"] and second["changed"] is False
    assert path.read_bytes() == before
    assert second["outcome"] == "BLOCKED"


def test_handoff_without_any_session_creates_one(ctx: loopflow.Context) -> None:
    result = loopflow.handoff(ctx, Handoff(mode="emergency", next_actions=("recover",), hot_context="The build is red."))
    assert result["created"] is True and result["outcome"] == "INTERRUPTED"
    session = result["session"]
    assert session["next_actions"] == ["recover"] and session["hot_context"] == "The build is red."
    assert session["started_at"] == session["ended_at"] == "2026-01-21T09:00:00Z"


def test_handoff_keeps_hand_written_body_text(ctx: loopflow.Context) -> None:
    session = loopflow.orient(ctx)["session"]
    path = ctx.root / session["path"]
    path.write_text(path.read_text() + "My own notes, kept.\n")
    loopflow.handoff(ctx, Handoff(summary="Done."))
    body = document.parse(path.read_text()).body
    assert body == "My own notes, kept.\n\n## Summary\n\nDone.\n"


def test_named_session_and_errors(ctx: loopflow.Context) -> None:
    first = loopflow.orient(ctx)["session"]["id"]
    loopflow.orient(ctx, new=True)
    ended = loopflow.handoff(ctx, Handoff(outcome="complete"), session_id=first)
    assert ended["session"]["id"] == first and ended["outcome"] == "COMPLETE"
    assert loopflow.list_sessions(ctx, active=True)["total"] == 1
    assert loopflow.show_session(ctx, first)["status"] == "complete"
    with pytest.raises(NotFound):
        loopflow.handoff(ctx, Handoff(), session_id="SES-nope")
    with pytest.raises(InvalidRequest):
        loopflow.handoff(ctx, Handoff(mode="sideways"))


def test_sessions_are_searchable(ctx: loopflow.Context) -> None:
    loopflow.orient(ctx, task="LF-77 tokenizer")
    loopflow.handoff(ctx, Handoff(summary="Tokenizer rewritten for CJK."))
    found = search.scan(ctx, "tokenizer kind:session")
    assert [m["summary"] for m in found["matches"]] == ["Tokenizer rewritten for CJK."]

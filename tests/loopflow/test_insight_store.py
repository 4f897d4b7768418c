"""Insight use cases on real files: remember, list, show, update, link."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from moss_files.foundation.errors import Conflict, InvalidRequest, NotFound
from moss_files.foundation.ids import IdSource, fixed_clock, seeded_random
from moss_files.loopflow import service as loopflow
from moss_files.loopflow.insights import Update

NOW = datetime(2026, 1, 21, 10, 0, tzinfo=UTC)


@pytest.fixture
def ctx(tmp_path: Path) -> loopflow.Context:
    (tmp_path / ".moss").mkdir()
    return loopflow.Context(tmp_path, clock=fixed_clock(NOW), ids=IdSource(fixed_clock(NOW), seeded_random(1)))


def test_remember_writes_one_file_with_a_dated_random_id(ctx: loopflow.Context) -> None:
    made = loopflow.remember(ctx, "Locks are per file. The lock file stays.", type="architecture", tags=["lock"], task="LF-3")
    assert made["id"].startswith("INS-20260121-")
    path = ctx.root / made["path"]
    assert path.read_text() == (
        f"---\nid: {made['id']}\ntype: architecture\nstatus: unprocessed\ntags:\n  - lock\nsource:\n  task: LF-3\n"
        "created: 2026-01-21T10:00:00Z\nupdated: 2026-01-21T10:00:00Z\nmoss_format: 2\n---\nLocks are per file. The lock file stays.\n"
    )
    assert made["summary"] == "Locks are per file. The lock file stays."
    other = loopflow.remember(ctx, "Another.")
    assert other["id"] != made["id"]


def test_remember_records_the_active_session(ctx: loopflow.Context) -> None:
    session = loopflow.orient(ctx)["session"]["id"]
    made = loopflow.remember(ctx, "Learned in a session.")
    assert made["insight"]["source"] == {"session": session}


def test_list_show_update_link(ctx: loopflow.Context) -> None:
    first = loopflow.remember(ctx, "First insight.", tags=["a"])["id"]
    second = loopflow.remember(ctx, "Second insight.", type="domain")["id"]
    listed = loopflow.list_insights(ctx)
    assert {i["id"] for i in listed["insights"]} == {first, second} and listed["problems"] == []
    assert [i["id"] for i in loopflow.list_insights(ctx, types=["domain"])["insights"]] == [second]
    assert [i["id"] for i in loopflow.list_insights(ctx, tags=["A"])["insights"]] == [first]
    assert loopflow.show_insight(ctx, first.lower())["content"] == "First insight.\n"

    updated = loopflow.update_insight(ctx, first, Update(status="discussed", add_tags=("b",)))
    assert updated["changed"] == ["status", "tags"]
    assert loopflow.update_insight(ctx, first, Update(status="discussed"))["changed"] == []

    linked = loopflow.link_insight(ctx, first, [second, "LF-3"], both=True)
    assert linked["links"] == [second, "LF-3"] and linked["back_linked"] == [second] and linked["not_insights"] == ["LF-3"]
    assert loopflow.show_insight(ctx, second)["links"] == [first]
    unlinked = loopflow.link_insight(ctx, first, [second], remove=True)
    assert unlinked["links"] == ["LF-3"]


def test_hand_written_content_survives_an_update(ctx: loopflow.Context) -> None:
    path = ctx.root / ".moss" / "insights" / "INS-001.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "---\nid: INS-001   # LoopFlow id\nstatus: unprocessed\nowner: me\n---\nBody with trailing spaces   \n\n\n"
    path.write_text(text)
    loopflow.update_insight(ctx, "INS-001", Update(status="discussed"))
    # A hand-written file is format 1: the edit writes it at format 2 (the marker goes first,
    # as the upgrade adds it, then the key the edit adds).
    assert path.read_text() == text.replace("status: unprocessed", "status: discussed").replace(
        "owner: me\n", "owner: me\nmoss_format: 2\nupdated: 2026-01-21T10:00:00Z\n"
    )


def test_errors(ctx: loopflow.Context) -> None:
    with pytest.raises(NotFound):
        loopflow.show_insight(ctx, "INS-nope")
    with pytest.raises(NotFound):
        loopflow.show_insight(ctx, "../escape")
    with pytest.raises(InvalidRequest):
        loopflow.remember(ctx, "  ")
    made = loopflow.remember(ctx, "x")["id"]
    with pytest.raises(InvalidRequest):
        loopflow.link_insight(ctx, made, [made])
    with pytest.raises(InvalidRequest):
        loopflow.update_insight(ctx, made, Update(status="closed"))


def test_a_broken_file_is_listed_as_a_problem(ctx: loopflow.Context) -> None:
    loopflow.remember(ctx, "fine")
    bad = ctx.root / ".moss" / "insights" / "INS-bad.md"
    bad.write_text("---\nid: INS-bad\ntype: nonsense\n---\nx\n")
    listed = loopflow.list_insights(ctx)
    assert len(listed["insights"]) == 1
    assert listed["problems"] == [{"path": ".moss/insights/INS-bad.md", "code": "SCHEMA_ERROR", "message": listed["problems"][0]["message"], "line": 3}]


def test_concurrent_updates_lose_nothing(ctx: loopflow.Context) -> None:
    made = loopflow.remember(ctx, "shared")["id"]
    errors: list[BaseException] = []

    def add(tag: str) -> None:
        try:
            loopflow.update_insight(ctx, made, Update(add_tags=(tag,)))
        except Conflict as exc:  # would mean a lost race; reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(f"t{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert sorted(loopflow.show_insight(ctx, made)["tags"]) == sorted(f"t{n}" for n in range(8))

"""The Context every use case takes: its defaults, that it cannot be changed in place, and what
`replace` copies (every field but the resources, which the copy shares)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from moss_files.foundation.config import Config
from moss_files.foundation.context import AGENT, HUMAN, Context
from moss_files.foundation.ids import system_clock


def fixed_clock() -> datetime:
    return datetime(2026, 1, 21, 10, 0, tzinfo=UTC)


def test_defaults(tmp_path: Path) -> None:
    ctx = Context(tmp_path)
    assert (ctx.root, ctx.clock, ctx.ids, ctx.actor, ctx.home, ctx.sleeve) == (tmp_path, system_clock, None, HUMAN, None, None)
    assert (ctx.worker_id, ctx.task_id, ctx.notify, ctx.progress) == (None, None, None, None)
    assert ctx.config == Config()


def test_fields_keep_the_constructors_order(tmp_path: Path) -> None:
    heard: list[str] = []
    ctx = Context(tmp_path, fixed_clock, None, Config(capsule_max_chars=5), AGENT, tmp_path / "home", "s1", "w1", "t1", heard.append, None)
    assert [getattr(ctx, name) for name in Context.FIELDS] == [
        tmp_path,
        fixed_clock,
        None,
        Config(capsule_max_chars=5),
        AGENT,
        tmp_path / "home",
        "s1",
        "w1",
        "t1",
        heard.append,
        None,
    ]
    ctx.say("hello")
    assert heard == ["hello"] and ctx.today() == "2026-01-21" and ctx.stamp() == "2026-01-21T10:00:00Z"


def test_a_context_is_read_only(tmp_path: Path) -> None:
    ctx = Context(tmp_path)
    with pytest.raises(AttributeError, match="read-only"):
        ctx.actor = AGENT  # type: ignore[misc]
    with pytest.raises(AttributeError, match="read-only"):
        del ctx.root
    with pytest.raises(AttributeError):
        ctx.extra = 1  # type: ignore[attr-defined]
    assert ctx.actor == HUMAN


def test_replace_changes_what_it_names_and_keeps_the_rest(tmp_path: Path) -> None:
    ctx = Context(tmp_path, clock=fixed_clock, sleeve="s1", worker_id="w1")
    copy = ctx.replace(actor=AGENT, task_id="t9")
    assert (copy.actor, copy.task_id) == (AGENT, "t9")
    assert [getattr(copy, name) for name in Context.FIELDS if name not in ("actor", "task_id")] == [
        getattr(ctx, name) for name in Context.FIELDS if name not in ("actor", "task_id")
    ]
    assert (ctx.actor, ctx.task_id) == (HUMAN, None)


def test_a_copy_shares_the_resources_of_the_context_it_came_from(tmp_path: Path) -> None:
    """A long-lived context (the MCP server's) hands each call a copy; the copies must find the
    warm resources the long-lived one keeps (the board's parsed files, an open index)."""
    server = Context(tmp_path)
    made: list[int] = []
    kept = server.resource("store", lambda: made.append(1) or {"warm": True})
    assert server.replace(notify=print).resource("store", lambda: made.append(2) or {}) is kept
    assert made == [1]
    assert Context(tmp_path).resource("store", lambda: {"cold": True}) == {"cold": True}  # a new context starts empty


def test_replace_refuses_a_name_that_is_not_a_field(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        Context(tmp_path).replace(actr=AGENT)
    with pytest.raises(TypeError):
        Context(tmp_path).replace(_resources={})

"""LoopFlow's tasks as PLAN.md tasks: create, update (any status to any), list, the detail lines,
through the use cases, the CLI and an MCP client; cstack reads what they write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from mcp import Client
from mcp_support import anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

import cstack
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import Conflict, InvalidRequest, NotFound
from moss_files.loopflow import backlog
from moss_files.loopflow import tasks as core
from moss_files.mcp.server import build_server


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


def plan_text(ws: Path) -> str:
    return (ws / ".cstack" / "PLAN.md").read_text()


# --------------------------------------------------------------------------- the pure mapping


def test_statuses_priorities_and_transition_paths() -> None:
    assert [core.check_status(word) for word in ("todo", "In Progress", "done", "blocked", "canceled", "closed", "pending")] == [
        "TODO", "IN_PROGRESS", "DONE", "BLOCKED", "CANCELLED", "CANCELLED", "TODO",
    ]  # fmt: skip
    with pytest.raises(InvalidRequest):
        core.check_status("later")
    assert [core.priority_of(mark) for mark in ("P0", "P1", "P2", None, "P3")] == ["high", "high", "medium", "medium", "low"]
    assert core.check_priority("P1") == "high" and core.check_priority("LOW") == "low"
    for current in core.STATUSES:
        for wanted in core.STATUSES:
            steps = core.transitions(current, wanted)
            assert (steps == []) == (current == wanted)
    assert core.transitions("DONE", "IN_PROGRESS") == ["reopen", "start"]
    assert core.transitions("BLOCKED", "TODO") == ["ready"]
    assert core.transitions("CANCELLED", "TODO") == ["reopen"]


def test_detail_lines_round_trip() -> None:
    details = core.Details("First paragraph\nwraps.\n\n- looks like a list\n\nNotes: looks like a label", ("GET /a lists", "Notes: inside"), "One.\n\nTwo.")
    lines = core.render_details(details)
    assert lines == [
        "  First paragraph wraps.",
        "  Description: - looks like a list",
        "  Description: Notes: looks like a label",
        "  Acceptance: GET /a lists",
        "  Acceptance: Notes: inside",
        "  Notes: One.",
        "  Notes: Two.",
    ]
    back = core.parse_details(lines)
    assert back == core.Details("First paragraph wraps.\n\n- looks like a list\n\nNotes: looks like a label", details.acceptance, "One.\n\nTwo.")


# --------------------------------------------------------------------------- use cases


def test_create_update_list_through_every_status(ws: Path) -> None:
    ctx = Context(ws)
    made = backlog.create_task(
        ctx,
        id="LF-108",
        title="[IMPL] Web UI dashboard",
        description="Local dashboard using Hono.\n\nServes the JSON API too.",
        priority="high",
        acceptance_criteria=["GET /api/tasks lists tasks", "GET /api/insights lists insights"],
        notes="React + Vite.",
        test_file="src/web.test.ts",
    )
    assert made["created"] is True and made["message"] == "Task LF-108 created"
    task = made["task"]
    assert (task["status"], task["priority"], task["section"], task["test_file"]) == ("TODO", "high", "Tasks", "src/web.test.ts")
    assert task["description"] == "Local dashboard using Hono.\n\nServes the JSON API too."
    assert task["acceptance_criteria"] == ["GET /api/tasks lists tasks", "GET /api/insights lists insights"]
    backlog.create_task(ctx, id="LF-109", title="[DOCS] Describe the API", depends_on=["LF-108"])

    # cstack reads the same tasks: the file is the truth.
    plan = cstack.read_plan(ws)
    [ui] = [t for t in plan.tasks if t.id == "LF-108"]
    assert ui.priority == "P1" and ui.status == "pending" and ui.field("test") == "src/web.test.ts"
    assert [t["id"] for t in cstack.list_ready(ctx)["tasks"]] == ["LF-108"]

    seen = []
    for status in ("IN_PROGRESS", "BLOCKED", "TODO", "DONE", "IN_PROGRESS", "CANCELLED", "BLOCKED", "DONE", "TODO"):
        changed = backlog.update_task(ctx, id="LF-108", status=status, reason="waiting on the API" if status == "BLOCKED" else None)
        seen.append((changed["task"]["status"], changed["task"]["section"]))
        assert changed["changes"] == ["status"]
        assert changed["task"]["description"] == "Local dashboard using Hono.\n\nServes the JSON API too."  # details travel with the line
    assert seen == [
        ("IN_PROGRESS", "Tasks"), ("BLOCKED", "Tasks"), ("TODO", "Tasks"), ("DONE", "Completed"), ("IN_PROGRESS", "Tasks"),
        ("CANCELLED", "Closed"), ("BLOCKED", "Tasks"), ("DONE", "Completed"), ("TODO", "Tasks"),
    ]  # fmt: skip

    edited = backlog.update_task(ctx, id="lf-108", title="[IMPL] Web dashboard", priority="low", notes="", acceptance_criteria=["Loads in 1 s"], test_file="")
    assert edited["task"]["title"] == "[IMPL] Web dashboard" and edited["task"]["priority"] == "low"
    assert edited["task"]["notes"] is None and edited["task"]["acceptance_criteria"] == ["Loads in 1 s"] and edited["task"]["test_file"] is None
    assert edited["task"]["description"] == "Local dashboard using Hono.\n\nServes the JSON API too."

    listing = backlog.list_tasks(ctx, statuses=["todo"], priorities=["low"])
    assert listing == {
        "tasks": [{"id": "LF-108", "title": "[IMPL] Web dashboard", "status": "TODO", "priority": "low", "depends_on": []}],
        "count": 1,
        "total": 1,
        "truncated": False,
    }
    assert backlog.list_tasks(ctx, limit=1)["truncated"] is True
    full = backlog.list_tasks(ctx, ids=["LF-109", "LF-404"])
    assert full["tasks"][0]["depends_on"] == ["LF-108"] and full["not_found"] == ["LF-404"]


def test_refusals_leave_plan_md_as_it_was(ws: Path) -> None:
    ctx = Context(ws)
    backlog.create_task(ctx, id="LF-1", title="[IMPL] First")
    before = plan_text(ws)
    with pytest.raises(Conflict) as taken:
        backlog.create_task(ctx, id="LF-1", title="[IMPL] Again")
    assert taken.value.code == "ALREADY_EXISTS"
    for bad in (
        {"id": "LF 2", "title": "x"},
        {"id": "LF-2", "title": "a | b"},
        {"id": "LF-2", "title": "Tagged #label"},
        {"id": "LF-2", "title": "x", "priority": "urgent"},
        {"id": "LF-2", "title": "x", "status": "someday"},
    ):
        with pytest.raises(InvalidRequest):
            backlog.create_task(ctx, **bad)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        backlog.create_task(ctx, id="LF-2", title="x", depends_on=["LF-404"])
    with pytest.raises(NotFound):
        backlog.update_task(ctx, id="LF-404", status="DONE")
    with pytest.raises(InvalidRequest):
        backlog.update_task(ctx, id="LF-1")
    with pytest.raises(InvalidRequest):
        backlog.update_task(ctx, id="LF-1", depends_on=["LF-1"])
    with pytest.raises(InvalidRequest):
        backlog.update_task(ctx, id="LF-1", title="Has (id: other) in it")
    assert plan_text(ws) == before


def test_a_hand_written_task_line_keeps_its_other_segments(ws: Path) -> None:
    ctx = Context(ws)
    path = ws / ".cstack" / "PLAN.md"
    text = path.read_text().replace("## Tasks\n", "## Tasks\n\n- [ ] P2: Hand made #ops (id: H-1) | owner: ana | free words\n", 1)
    path.write_text(text)
    changed = backlog.update_task(ctx, id="H-1", priority="high", description="Added later.")
    assert changed["task"]["labels"] == ["ops"] and changed["task"]["description"] == "Added later."
    line = next(line for line in plan_text(ws).splitlines() if "(id: H-1)" in line)
    assert line.startswith("- [ ] P1: Hand made #ops (id: H-1) | owner: ana | free words | modified: ")


# --------------------------------------------------------------------------- CLI and MCP


def test_the_backlog_commands(ws: Path) -> None:
    added = run_cli("moss", "backlog", "add", "LF-1", "[IMPL] Search", "-p", "high", "--accept", "finds words", "-d", "Add search.", "--json", cwd=ws)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["task"]["acceptance_criteria"] == ["finds words"]
    done = run_cli("moss", "backlog", "update", "LF-1", "--status", "done", cwd=ws)
    assert done.stdout.startswith("LF-1  DONE")
    assert run_cli("cstack", "plan", "--json", cwd=ws).stdout.count('"id": "LF-1"') == 1
    shown = run_cli("moss", "backlog", "list", "--id", "LF-1", cwd=ws).stdout
    assert "description: Add search." in shown and "section: Completed" in shown
    again = run_cli("moss", "backlog", "add", "LF-1", "[IMPL] Twice", "--json", cwd=ws)
    assert again.returncode == 5 and json.loads(again.stderr)["error"]["code"] == "ALREADY_EXISTS"


@pytest.mark.anyio
async def test_the_task_tools_over_mcp(ws: Path) -> None:
    server = build_server(Context(ws, actor=AGENT), ("loop",))
    async with Client(server) as client:
        made = await client.call_tool("loop_task_create", {"id": "LF-7", "title": "[BUG] Fix the lock", "status": "IN_PROGRESS"})
        assert not made.is_error and made.structured_content["task"]["status"] == "IN_PROGRESS"
        blocked = await client.call_tool("loop_task_update", {"id": "LF-7", "status": "BLOCKED", "reason": "needs a review"})
        assert blocked.structured_content["task"]["status"] == "BLOCKED"
        listed = await client.call_tool("loop_task_list", {"status": ["BLOCKED"]})
        assert [t["id"] for t in listed.structured_content["tasks"]] == ["LF-7"]
        wrong = await client.call_tool("loop_task_update", {"id": "LF-7", "status": "LATER"})
        assert wrong.is_error and wrong.structured_content["error"]["code"] == "SCHEMA_ERROR"
    assert "| blocked: needs a review" in plan_text(ws)

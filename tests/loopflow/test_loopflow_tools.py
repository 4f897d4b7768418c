"""LoopFlow's remaining tools: insight update, connect (find and make links), the repository
summary, probe, pain points and the feedback list; through the use cases, the CLI and MCP."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import run_cli
from mcp import Client
from mcp_support import anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)

from moss_files.foundation import document
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import InvalidRequest, NotFound
from moss_files.index import service as search
from moss_files.loopflow import backlog, service
from moss_files.loopflow.insights import Update
from moss_files.loopflow.sessions import Handoff
from moss_files.mcp.server import build_server


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


def test_insight_update_changes_content_and_refuses_an_empty_update(ws: Path) -> None:
    ctx = Context(ws)
    made = service.remember(ctx, "First wording.", tags=["a"])
    path = ws / made["path"]
    head_before = path.read_text().split("---\n")[1]
    changed = service.update_insight(ctx, made["id"], Update(content="Second wording.\n\nWith more."))
    assert changed["changed"] == ["content"] and changed["updated"] is True
    text = path.read_text()
    assert text.endswith("---\nSecond wording.\n\nWith more.\n")
    assert [line for line in text.split("---\n")[1].splitlines() if not line.startswith("updated:")] == [
        line for line in head_before.splitlines() if not line.startswith("updated:")
    ]
    same = service.update_insight(ctx, made["id"], Update(content="Second wording.\n\nWith more.\n"))
    assert same["updated"] is False and same["changed"] == []
    with pytest.raises(InvalidRequest):
        service.update_insight(ctx, made["id"], Update())
    with pytest.raises(InvalidRequest):
        service.update_insight(ctx, made["id"], Update(content="  "))


def test_connect_finds_related_items_and_makes_links_that_expand_shows(ws: Path) -> None:
    ctx = Context(ws)
    backlog.create_task(ctx, id="LF-3", title="[IMPL] Cookies consent banner")
    cookies = service.remember(ctx, "Cookies need SameSite=Lax for the OAuth redirect.", tags=["auth"])["id"]
    oauth = service.remember(ctx, "The OAuth callback must be on the same site.")["id"]

    made = service.connect(ctx, id=cookies, to=[oauth, "LF-3"], both=True)
    assert made["links"] == [oauth, "LF-3"] and made["back_linked"] == [oauth] and made["not_insights"] == ["LF-3"]
    expanded = search.expand(ctx, [cookies], include_links=True)["items"][0]["links"]
    assert [item["id"] for item in expanded["items"]] == [oauth, "LF-3"] and expanded["missing"] == []

    found = service.connect(ctx, query="SameSite cookies")
    assert [item["id"] for item in found["insights"]] == [cookies] and found["insights"][0]["links"] == [oauth, "LF-3"]
    assert {(item["id"], item["via"]) for item in found["linked"]} == {(oauth, "link"), ("LF-3", "link")}
    assert [task["id"] for task in found["tasks"]] == ["LF-3"]
    assert service.connect(ctx, query="SameSite cookies", include_tasks=False)["tasks"] == []
    assert service.connect(ctx, query="zebra")["suggestion"].startswith("no direct matches")

    unlinked = service.connect(ctx, id=cookies, to=["LF-3"], remove=True)
    assert unlinked["links"] == [oauth]
    for wrong in ({}, {"query": "x", "id": cookies, "to": [oauth]}):
        with pytest.raises(InvalidRequest):
            service.connect(ctx, **wrong)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        service.connect(ctx, id="INS-404", to=[oauth])


def ticking() -> Callable[[], datetime]:
    """A clock a second further on at every reading: which write came later is then clear."""
    moments = (datetime(2026, 3, 1, 9, 0, tzinfo=UTC) + timedelta(seconds=n) for n in itertools.count())
    return lambda: next(moments)


def test_the_repository_summary_is_kept_and_orient_shows_it(ws: Path) -> None:
    ctx = Context(ws, clock=ticking())
    session = service.orient(ctx, agent="claude")["session"]["id"]
    assert service.orient(ctx, agent="claude")["repo_summary"]["description"] is None
    first = service.update_summary(ctx, repo_summary="A login service.", folder_structure="src/ the code\ntests/ the tests")
    assert first["updated"] == ["repo_summary", "folder_structure"] and first["repo_summary"]["updated_by_session"] == session
    path = ws / ".moss" / "summary.md"
    # A person adds a section of their own; the next update keeps it.
    path.write_text(path.read_text() + "\n## Contacts\n\nAsk the platform team.\n")
    service.update_summary(ctx, suggested_actions="- Add rate limiting\n- Rotate the keys")
    doc = document.parse(path.read_text())
    assert "## Contacts\n\nAsk the platform team." in doc.body and "A login service." in doc.body
    with pytest.raises(InvalidRequest):
        service.update_summary(ctx)

    service.handoff(ctx, Handoff(summary="Stopped.", next_actions=("Older next action",)), agent="claude")
    oriented = service.orient(ctx, agent="claude")
    assert oriented["repo_summary"]["description"] == "A login service." and oriented["repo_summary"]["folder_structure"].startswith("src/")
    assert oriented["suggested_actions"] == ["Older next action"]  # the handoff came after the summary
    service.update_summary(ctx, suggested_actions="Newer: write the docs")
    assert service.orient(ctx, agent="claude")["suggested_actions"] == ["Newer: write the docs"]

    path.write_text("---\nupdated: [broken\n---\n")
    broken = service.orient(ctx, agent="claude")  # orientation goes on and names the problem
    assert any(problem["path"] == ".moss/summary.md" for problem in broken["problems"])


def test_probe_formats_a_question_and_writes_nothing(ws: Path) -> None:
    ctx = Context(ws)
    asked = service.probe(ctx, question="Which  store?", why="Sessions must survive restarts.", options=["redis", "sqlite"], default_option="sqlite")
    assert asked == {
        "formatted_question": {
            "ask": "Which store?",
            "context": "Sessions must survive restarts.",
            "options": [{"label": "redis", "is_default": False}, {"label": "sqlite", "is_default": True}],
            "note": "If unsure, 'sqlite' is a safe choice.",
        },
        "instruction": "Present this question to the user. Wait for their answer before proceeding.",
    }
    assert service.probe(ctx, question="Go on?", why="Scope.")["formatted_question"]["options"] is None
    for bad in ({"question": " ", "why": "x"}, {"question": "q", "why": ""}, {"question": "q", "why": "w", "options": ["a"], "default_option": "b"}):
        with pytest.raises(InvalidRequest):
            service.probe(ctx, **bad)  # type: ignore[arg-type]


def test_a_pain_point_is_stored_sanitized_and_listed(ws: Path, tmp_path: Path) -> None:
    ctx = Context(ws, home=tmp_path / "home" / "ana", clock=ticking())
    context = (
        f"Ran `moss search` in {ws}/src with API_KEY=sk-live-0123456789abcdefghij and {tmp_path}/home/ana/.ssh/id_rsa; "
        "mail ana@example.com from 10.1.2.3, run 123e4567-e89b-12d3-a456-426614174000. Ana Lopez saw it."
    )
    made = service.painpoint(ctx, type="bug", title="Search is slow", description="It took ten seconds.", context=context, severity="high")
    assert made["captured"] is True and made["context_sanitized"] is True and made["path"].startswith(".moss/feedback/FB-")
    stored = (ws / made["path"]).read_text()
    for leaked in ("sk-live-0123456789abcdefghij", str(ws), str(tmp_path), "ana@example.com", "10.1.2.3", "123e4567-e89b"):
        assert leaked not in stored, leaked
    assert "src" in stored and "[EMAIL]" in stored and made["removed"]["email"] == 1
    assert made["sanitization_warnings"] == ["text may contain names: Ana Lopez"]  # the name stays: only a person can judge it
    idea = service.painpoint(ctx, type="feature-idea", title="Search by date", description="Filter by week.")
    listed = service.list_feedback(ctx)
    assert [item["id"] for item in listed["feedback_specs"]] == [idea["id"], made["id"]] and listed["total"] == 2
    assert service.list_feedback(ctx, statuses=["dismissed"])["feedback_specs"] == []
    for bad in ({"type": "rant"}, {"severity": "extreme"}, {"title": " "}, {"description": ""}):
        with pytest.raises(InvalidRequest):
            service.painpoint(ctx, **{"type": "bug", "title": "t", "description": "d", **bad})  # type: ignore[arg-type]
    # Feedback files are documents like any other: the index finds them.
    assert search.scan(ctx, "slow", kinds=["feedback"])["matches"][0]["id"] == made["id"]


def test_the_session_and_feedback_commands(ws: Path) -> None:
    set_it = run_cli("moss", "session", "summary", "--summary", "A demo repo.", "--suggest", "Write tests", "--json", cwd=ws)
    assert set_it.returncode == 0, set_it.stderr
    assert json.loads(set_it.stdout)["repo_summary"]["suggested_actions"] == "Write tests"
    assert "description: A demo repo." in run_cli("moss", "session", "summary", cwd=ws).stdout
    probe = run_cli("moss", "session", "probe", "Ship today?", "--why", "The demo is tomorrow.", "--option", "yes", "--option", "no", "--default", "no", cwd=ws)
    assert probe.stdout.splitlines() == ["Ship today?", "  why: The demo is tomorrow.", "  - yes", "  - no (default)"]
    added = run_cli(
        "moss",
        "feedback",
        "add",
        "Docs are thin",
        "--type",
        "pain_point",
        "--context",
        "reading /home/ana/notes.txt",
        cwd=ws,
        input="The MCP page lacks examples.\n",
    )
    assert added.returncode == 0 and added.stdout.startswith("FB-")
    listed = json.loads(run_cli("moss", "feedback", "list", "--json", cwd=ws).stdout)
    assert [item["title"] for item in listed["feedback_specs"]] == ["Docs are thin"]
    run_cli("moss", "insight", "add", "Cookies need SameSite=Lax.", cwd=ws)
    related = run_cli("moss", "insight", "connect", "samesite", "--json", cwd=ws)
    found = json.loads(related.stdout)["insights"][0]
    assert found["summary"] == "Cookies need SameSite=Lax."
    reworded = run_cli("moss", "insight", "update", found["id"], "--content", "Cookies need SameSite=Strict.", "--json", cwd=ws)
    assert reworded.returncode == 0, reworded.stderr
    assert json.loads(reworded.stdout)["changed"] == ["content"]
    assert (
        (ws / json.loads(run_cli("moss", "insight", "show", found["id"], "--json", cwd=ws).stdout)["path"])
        .read_text()
        .endswith("---\nCookies need SameSite=Strict.\n")
    )
    bad = run_cli("moss", "feedback", "add", "x", "-d", "y", "--type", "rant", "--json", cwd=ws)
    assert bad.returncode == 2 and json.loads(bad.stderr)["error"]["code"] == "SCHEMA_ERROR"


@pytest.mark.anyio
async def test_summary_probe_and_feedback_over_mcp(ws: Path) -> None:
    async with Client(build_server(Context(ws, actor=AGENT), ("loop", "share"))) as client:
        noted = await client.call_tool("loop_update_summary", {"repo_summary": "Shop backend.", "suggested_actions": "Fix the cart"})
        assert not noted.is_error
        oriented = await client.call_tool("loop_orient", {"agent": "codex"})
        assert oriented.structured_content["repo_summary"]["description"] == "Shop backend."
        assert oriented.structured_content["suggested_actions"] == ["Fix the cart"]
        empty = await client.call_tool("loop_update_summary", {})
        assert empty.is_error and empty.structured_content["error"]["code"] == "INVALID_REQUEST"
        asked = await client.call_tool("loop_probe", {"question": "Which cart?", "why": "Two exist."})
        assert asked.structured_content["instruction"].startswith("Present this question")
        pain = await client.call_tool(
            "loop_painpoint", {"type": "bug", "title": "Cart drops items", "description": "Twice today.", "context": "token=abcd1234efgh"}
        )
        assert pain.structured_content["removed"] == {"secret": 1}
        listed = await client.call_tool("loop_feedback_list", {"status": ["queued"]})
        assert [item["id"] for item in listed.structured_content["feedback_specs"]] == [pain.structured_content["id"]]

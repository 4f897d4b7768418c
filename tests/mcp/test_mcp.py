"""MCP server tests with the SDK's in-memory client, in both protocol modes: every tool, the
annotations, tool sets and names, the error contract, CLI parity, and concurrent writers."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from conftest import BIN, run_cli
from mcp import Client
from mcp_support import CAPSULE, anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)
from pydantic import Field

import needlecast
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import ERROR_CODES, InvalidRequest
from moss_files.mcp import server as mcp_server
from moss_files.mcp.server import TOOL_SETS, ToolRegistry, build_server

MODES = ["auto", "legacy"]


# (read_only, destructive, idempotent) for every tool: what each one does to the files.
ANNOTATIONS = {
    "moss.store": (False, True, False),
    "moss.fetch": (True, False, True),
    "moss.fetch_many": (True, False, True),
    "moss.update": (False, True, False),
    "moss.append": (False, False, False),
    "moss.delete": (False, True, True),
    "moss.latest": (True, False, True),
    "moss.list": (True, False, True),
    "moss.inventory": (True, False, True),
    "moss.compose": (False, True, False),
    "moss.export": (False, True, False),
    "moss.import": (False, True, False),
    "moss.purge": (False, True, True),
    "moss.search": (True, False, True),
    "moss.bulk_update": (False, True, True),
    "moss.bulk_delete": (False, True, True),
    "loop_scan": (True, False, True),
    "loop_expand": (True, False, True),
    "loop_timeline": (True, False, True),
    "loop_orient": (False, False, False),
    "loop_remember": (False, False, False),
    "loop_observe": (False, False, False),
    "loop_handoff": (False, True, True),
    "loop_insight_update": (False, True, True),
    "loop_connect": (False, True, True),
    "loop_task_create": (False, False, False),
    "loop_task_update": (False, True, True),
    "loop_task_list": (True, False, True),
    "loop_update_summary": (False, True, False),
    "loop_probe": (True, False, True),
    "cstack.status": (True, False, True),
    "cstack.plan": (True, False, True),
    "cstack.ready": (True, False, True),
    "cstack.stats": (True, False, True),
    "cstack.add": (False, False, False),
    "cstack.start": (False, True, False),
    "cstack.done": (False, True, False),
    "cstack.block": (False, True, False),
    "cstack.close": (False, True, False),
    "cstack.remember": (False, False, False),
    "needlecast.send": (False, False, False),
    "needlecast.inbox": (True, False, True),
    "needlecast.read": (False, False, True),
    "needlecast.wait": (True, False, True),
    "needlecast.outbox": (True, False, True),
}


FOUR = ("moss", "loop", "cstack", "needlecast")  # the default sets before the core set


@pytest.fixture
def team(tmp_path: Path) -> Path:
    """An envoy folder with two scaffolded sleeves, alice and bob."""
    for name in ("alice", "bob"):
        make_workspace(tmp_path / "team" / name)
    return tmp_path / "team"


@asynccontextmanager
async def connect(root: Path, mode: str, sets: tuple[str, ...] = (), **kwargs: Any) -> AsyncIterator[Client]:
    server = build_server(Context(root, home=root.parent / "home", actor=AGENT), sets, **kwargs)
    options: dict[str, Any] = {"raise_exceptions": True} if mode == "auto" else {}
    async with Client(server, mode=mode, **options) as client:
        yield client


class Calls:
    """Calls tools, checks the result's invariants, and records which tools were called."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.called: set[str] = set()

    async def ok(self, tool: str, /, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args)
        assert not result.is_error, result.content[0].text
        assert json.loads(result.content[0].text) == result.structured_content
        self.called.add(tool)
        return result.structured_content

    async def error(self, tool: str, code: str, /, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args)
        assert result.is_error
        body = result.structured_content
        assert body["ok"] is False and body["error"]["code"] == code, result.content[0].text
        assert set(body["error"]) >= {"code", "message", "status", "details"}
        assert result.content[0].text.startswith(f"{code}: ")
        assert json.loads(result.content[0].text.split("\n", 1)[1]) == body
        assert "Traceback" not in result.content[0].text
        self.called.add(tool)
        return body["error"]


# --------------------------------------------------------------------------- every tool


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_answers_in_both_protocol_modes(team: Path, mode: str) -> None:
    alice = team / "alice"
    async with connect(alice, mode, FOUR) as client:
        calls = Calls(client)
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert listed == set(ANNOTATIONS)

        # capsules
        stored = await calls.ok("moss.store", capsule_text=CAPSULE, name="Auth", tags=["auth"], source="test")
        assert set(stored) == {"id", "task_link", "fetch_key"}
        await calls.error("moss.store", "NAME_ALREADY_EXISTS", capsule_text=CAPSULE, name="auth")
        thin = await calls.error("moss.store", "CAPSULE_TOO_THIN", capsule_text="## Objective\nonly this\n", name="thin")
        assert thin["status"] == 422 and "missing" in thin["details"]
        replaced = await calls.ok("moss.store", capsule_text=CAPSULE.replace("Ship", "Finish"), name="auth", mode="replace")
        assert replaced["id"] == stored["id"]
        fetched = await calls.ok("moss.fetch", name="auth")
        assert fetched["capsule_text"].startswith("## Objective\nFinish")
        peek = await calls.ok("moss.fetch", id=stored["id"], include_text=False)
        assert "capsule_text" not in peek and peek["name"] == "Auth"
        await calls.error("moss.fetch", "AMBIGUOUS_ADDRESSING", id=stored["id"], name="auth")
        many = await calls.ok("moss.fetch_many", items=[{"name": "auth"}, {"id": "01NOPE"}])
        assert [item["id"] for item in many["items"]] == [stored["id"]] and many["errors"][0]["code"] == "NOT_FOUND"
        await calls.ok("moss.update", name="auth", title="Auth flow", tags=["auth", "web"])
        appended = await calls.ok("moss.append", name="auth", section="Decisions", content="- CSRF tokens per form.")
        assert appended["section_hit"] == "## Decisions"
        second = await calls.ok("moss.store", capsule_text=CAPSULE, name="ui", workspace="web", allow_thin=True)
        latest = await calls.ok("moss.latest", workspace="web")
        assert latest["item"]["id"] == second["id"] and "capsule_text" not in latest["item"]
        listing = await calls.ok("moss.list", limit=5)
        assert [item["name"] for item in listing["items"]] == ["Auth"] and listing["pagination"]["total"] == 1
        inventory = await calls.ok("moss.inventory", tag="auth")
        assert [item["id"] for item in inventory["items"]] == [stored["id"]]
        composed = await calls.ok("moss.compose", items=[{"name": "auth"}, {"workspace": "web", "name": "ui"}], sections=["Decisions"])
        assert composed["parts_count"] == 2 and "CSRF" in composed["bundle_text"]
        export_path = alice / ".moss" / "exports" / "all.jsonl"
        export_path.parent.mkdir(parents=True, exist_ok=True)
        exported = await calls.ok("moss.export", path=str(export_path))
        assert exported["count"] == 2 and export_path.is_file()
        deleted = await calls.ok("moss.delete", workspace="web", name="ui")
        assert deleted == {"deleted": True, "id": second["id"]}
        await calls.error("moss.delete", "NOT_FOUND", workspace="web", name="ui")
        imported = await calls.ok("moss.import", path=str(export_path), mode="rename")
        assert imported["imported"] == 2 and imported["errors"] == []
        purged = await calls.ok("moss.purge")
        assert purged["purged"] == 1

        # memory
        assert (await calls.ok("cstack.stats"))["exists"] is True
        added = await calls.ok("cstack.add", task="P1: Build the login form #web", id="form")
        assert added["task"]["title"] == "Build the login form" and added["task"]["id"] == "form"
        await calls.ok("cstack.add", task="Wire the API", id="api", depends=["form"])
        ready = await calls.ok("cstack.ready")
        assert [task["id"] for task in ready["tasks"]] == ["form"]
        started = await calls.ok("cstack.start", task="form")
        assert started["task"]["status"] == "in_progress"
        await calls.error("cstack.start", "INVALID_TRANSITION", task="form")
        assert (await calls.ok("cstack.status"))["task"] is not None
        done = await calls.ok("cstack.done", reason="works")
        assert done["task"]["status"] == "done"
        blocked = await calls.ok("cstack.block", task="api", reason="waiting for keys")
        assert blocked["task"]["status"] == "blocked"
        await calls.ok("cstack.add", task="Old idea", id="old", section="backlog-ideas")
        closed = await calls.ok("cstack.close", task="old", reason="dropped")
        assert closed["task"]["status"] == "closed"
        plan = await calls.ok("cstack.plan", status=["open"])
        assert [task["id"] for task in plan["tasks"]] == ["api"] and plan["stats"]["closed"] == 2
        entry = await calls.ok("cstack.remember", text="Never log session cookies", category="gotchas")
        assert entry["category"] == "gotchas"

        # messages: alice writes, the router delivers, bob reads
        sent = await calls.ok("needlecast.send", body="Which endpoint does login use?", to=["bob"], type="question", thread="auth")
        assert sent["message"]["from"] == "alice" and sent["message"]["to"] == ["bob"]
        outbox = await calls.ok("needlecast.outbox")
        assert [m["message"]["id"] for m in outbox["messages"]] == [sent["message"]["id"]]
        await calls.error("needlecast.send", "INVALID_REQUEST", body="to nobody")

        # retrieval and sessions
        oriented = await calls.ok("loop_orient", task="login", agent="claude")
        assert oriented["resumed"] is False and oriented["memory"]["plan"]["closed"] == 2
        remembered = await calls.ok("loop_remember", content="Cookies need SameSite=Lax for the OAuth redirect.", type="edge_case", tags=["auth"])
        observed = await calls.ok("loop_observe", text="Edited the cookie settings.", kind="file_edit", context={"file": "auth.py"})
        assert observed["path"] == f".moss/observations/{observed['id']}.md"
        assert (await calls.ok("loop_scan", query="cookie settings", scope=["observations"]))["matches"][0]["id"] == observed["id"]
        await calls.error("loop_observe", "SCHEMA_ERROR", text="x", kind="dream")
        found = await calls.ok("loop_scan", query="SameSite cookies", scope=["insights"])
        assert found["matches"][0]["id"] == remembered["id"] and found["truncated"] is False
        typed = await calls.ok("loop_scan", query="cookies", scope="all", types=["edge_case"], statuses=["unprocessed"])
        assert [m["id"] for m in typed["matches"]] == [remembered["id"]]
        assert (await calls.ok("loop_scan", query="cookies", scope="insight", types=["domain"]))["matches"] == []
        everything = await calls.ok("loop_scan", query="login")
        assert {m["kind"] for m in everything["matches"]} >= {"capsule", "task"}
        expanded = await calls.ok("loop_expand", ids=[remembered["id"], "INS-nope"], include_links=True)
        assert expanded["items"][0]["record"]["content"].startswith("Cookies") and expanded["not_found"] == ["INS-nope"]
        around = await calls.ok("loop_timeline", anchor=remembered["id"], depth_before=2, depth_after=2)
        assert around["anchor"]["id"] == remembered["id"]
        await calls.error("loop_timeline", "NOT_FOUND", anchor="no-such-thing")
        handed = await calls.ok("loop_handoff", summary="Login works.", next_actions=["Add rate limiting"], completed=["form"], agent="claude")
        assert handed["outcome"] == "COMPLETE" and handed["next_actions_saved"] is True
        again = await calls.ok("loop_handoff", summary="Login works.", next_actions=["Add rate limiting"], completed=["form"], session=handed["session"]["id"])
        assert again["changed"] is False

        # Moss's later capsule tools
        hits = await calls.ok("moss.search", query="login flow")
        assert hits["sort"] == "relevance" and hits["items"] and "<b>login</b>" in hits["items"][0]["snippet"]
        await calls.error("moss.search", "INVALID_REQUEST", query=" ")
        planned = await calls.ok("moss.bulk_update", workspace="default", set_phase="review", dry_run=True)
        assert planned["dry_run"] is True and planned["updated"] >= 1
        await calls.error("moss.bulk_update", "INVALID_REQUEST", set_phase="review")
        dropped = await calls.ok("moss.bulk_delete", workspace="nowhere")
        assert dropped["deleted"] == 0

        # LoopFlow's task, insight, summary and probe tools
        task = await calls.ok("loop_task_create", id="LF-1", title="[IMPL] Rate limiting", priority="high", acceptance_criteria=["429 after ten tries"])
        assert task["task"]["status"] == "TODO" and task["task"]["acceptance_criteria"] == ["429 after ten tries"]
        await calls.error("loop_task_create", "ALREADY_EXISTS", id="LF-1", title="[IMPL] Again")
        finished = await calls.ok("loop_task_update", id="LF-1", status="DONE", notes="Done with a token bucket.")
        assert finished["task"]["status"] == "DONE" and finished["task"]["section"] == "Completed"
        listed = await calls.ok("loop_task_list", status=["DONE"], priority=["high"])
        assert [t["id"] for t in listed["tasks"]] == ["form", "LF-1"]  # both P1, both done
        changed = await calls.ok("loop_insight_update", id=remembered["id"], status="discussed", add_tags=["oauth"])
        assert changed["changed"] == ["status", "tags"] and changed["updated"] is True
        await calls.error("loop_insight_update", "INVALID_REQUEST", id=remembered["id"])
        linked = await calls.ok("loop_connect", id=remembered["id"], to=["LF-1"])
        assert linked["links"] == ["LF-1"]
        related = await calls.ok("loop_connect", query="SameSite")
        assert related["insights"][0]["id"] == remembered["id"] and related["linked"][0]["id"] == "LF-1"
        await calls.error("loop_connect", "INVALID_REQUEST")
        noted = await calls.ok("loop_update_summary", repo_summary="A login service.", suggested_actions="Add rate limiting")
        assert noted["updated"] == ["repo_summary", "suggested_actions"]
        asked = await calls.ok(
            "loop_probe", question="Which store?", why="Sessions must survive restarts.", options=["redis", "sqlite"], default_option="sqlite"
        )
        assert asked["formatted_question"]["options"][1] == {"label": "sqlite", "is_default": True}

    needlecast.route_once(Context(team))
    async with connect(team / "bob", mode, ("needlecast",)) as client:
        bob = Calls(client)
        inbox = await bob.ok("needlecast.inbox", unread=True)
        [row] = inbox["messages"]
        assert row["read"] is False and row["message"]["body"].startswith("Which endpoint")
        read = await bob.ok("needlecast.read", id=row["message"]["id"])
        assert read["read"] is True
        after = await bob.ok("needlecast.inbox", unread=True)
        assert after["messages"] == [] and after["unread"] == 0 and inbox["unread"] == 1
        waited = await bob.ok("needlecast.wait", timeout=0.1)
        assert waited["timed_out"] is True and waited["messages"] == []
        await bob.error("needlecast.wait", "INVALID_REQUEST", timeout=-1)
        await bob.error("needlecast.read", "NOT_FOUND", id="msg-nope")
        calls.called |= bob.called

    assert calls.called == set(ANNOTATIONS)


# --------------------------------------------------------------------------- listing


def _titles(node: Any) -> list[str]:
    """The `title` keywords of a JSON schema (a property named "title" is not one)."""
    if isinstance(node, list):
        return [found for item in node for found in _titles(item)]
    if not isinstance(node, dict):
        return []
    found = [node["title"]] if isinstance(node.get("title"), str) else []
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            found.extend(title for sub in value.values() for title in _titles(sub))
        elif key != "title":
            found.extend(_titles(value))
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_annotations_schemas_and_descriptions(team: Path, mode: str) -> None:
    async with connect(team / "alice", mode, FOUR) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        hints = tool.annotations
        assert hints is not None and hints.open_world_hint is False
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == ANNOTATIONS[tool.name], tool.name
        assert tool.description and len(tool.description) < 400
        assert tool.output_schema is None
        assert not _titles(tool.input_schema), tool.name  # pydantic's titles are dropped
        assert all("description" in prop for prop in tool.input_schema.get("properties", {}).values()), tool.name


@pytest.mark.anyio
async def test_tool_sets_choose_what_is_listed(team: Path) -> None:
    for sets in (("moss",), ("loop",), ("cstack",), ("needlecast",), ("cstack", "loop")):
        async with connect(team / "alice", "auto", sets) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
        prefixes = {"loop": "loop_"}
        assert names == {name for name in ANNOTATIONS if any(name.startswith(prefixes.get(s, f"{s}.")) for s in sets)}
    defaults = tuple(name for name, toolset in TOOL_SETS.items() if toolset.default)
    assert defaults == ("core",)
    assert mcp_server.parse_sets(None) == mcp_server.parse_sets("") == defaults
    assert mcp_server.parse_sets(" Loop , moss,loop") == ("loop", "moss")
    assert mcp_server.parse_sets("all") == tuple(TOOL_SETS)
    with pytest.raises(InvalidRequest) as caught:
        mcp_server.parse_sets("moss,board")
    assert caught.value.details["unknown"] == ["board"]


@pytest.mark.anyio
async def test_underscore_names_for_hosts_that_refuse_dots(team: Path) -> None:
    async with connect(team / "alice", "legacy", FOUR, names="underscore") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {mcp_server.underscored(name) for name in ANNOTATIONS}
        assert all("." not in name for name in tools)
        served_text = json.dumps([[tool.description, tool.input_schema] for tool in tools.values()])
        assert "as in cstack_plan" in served_text and not re.search(r"\b(moss|cstack|needlecast)\.\w", served_text)
        stored = await client.call_tool("moss_store", {"capsule_text": CAPSULE, "name": "n"})
        # Either spelling reaches the tool, so prompts written for the seeds' names keep working.
        fetched = await client.call_tool("moss.fetch", {"name": "n", "include_text": False})
        assert not stored.is_error and fetched.structured_content["id"] == stored.structured_content["id"]
    with pytest.raises(InvalidRequest):
        mcp_server.check_name_style("camel")


@pytest.mark.anyio
async def test_disabled_tools_from_the_workspace_config_are_not_served(team: Path) -> None:
    alice = team / "alice"
    async with connect(alice, "auto", ("moss",), disabled=("moss.purge", "moss_import")) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "moss.purge" not in names and "moss.import" not in names and "moss.store" in names
        missing = await client.call_tool("moss.purge", {})
        assert missing.is_error and missing.structured_content["error"]["code"] == "NOT_FOUND"


# --------------------------------------------------------------------------- errors


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_bad_arguments_are_rejected_with_clear_messages(team: Path, mode: str) -> None:
    async with connect(team / "alice", mode, ("moss", "loop")) as client:
        calls = Calls(client)
        wrong_type = await calls.error("moss.fetch", "INVALID_REQUEST", id=5, include_text="maybe")
        assert {p["field"] for p in wrong_type["details"]["errors"]} == {"id", "include_text"}
        missing = await calls.error("moss.store", "INVALID_REQUEST", name="x")
        assert missing["details"]["errors"] == [{"field": "capsule_text", "message": "Field required"}]
        unknown = await calls.error("moss.fetch", "INVALID_REQUEST", nam="auth")
        assert unknown["details"]["unknown"] == ["nam"] and "name" in unknown["details"]["allowed"]
        nested = await calls.error("moss.fetch_many", "INVALID_REQUEST", items=[{"id": 7}])
        assert nested["details"]["errors"][0]["field"] == "items.0.id"
        bad_value = await calls.error("loop_scan", "INVALID_REQUEST", query="x", limit=0)
        assert "limit" in bad_value["message"]
        no_tool = await client.call_tool("moss.nope", {})
        assert no_tool.is_error and no_tool.structured_content["error"]["code"] == "NOT_FOUND"
        assert no_tool.structured_content["error"]["details"] == {"tool": "moss.nope"}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_crash_is_an_internal_error_without_its_cause(team: Path, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    registry = ToolRegistry(Context(team / "alice", actor=AGENT))

    @registry.tool("test.crash", "Fails like a bug would.", read_only=True)
    def crash(secret: Annotated[str, Field(description="Text the error must not echo.")]) -> dict[str, Any]:
        raise KeyError(f"internal detail {secret}")

    server = mcp_server.MossMCPServer("t", tools=registry.tools, schemas=registry.schemas, log_level="WARNING")
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("test.crash", {"secret": "s3cr3t"})
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "INTERNAL" and error["status"] == 500 and error["details"] == {}
    assert "s3cr3t" not in result.content[0].text and "KeyError" not in result.content[0].text
    assert any("s3cr3t" in (record.exc_text or "") for record in caplog.records)


def test_a_tool_cannot_claim_to_be_read_only_and_destructive(tmp_path: Path) -> None:
    registry = ToolRegistry(Context(tmp_path, actor=AGENT))
    with pytest.raises(ValueError):
        registry.tool("x.y", "z", read_only=True, destructive=True)


@pytest.mark.anyio
async def test_errors_carry_registered_codes_and_the_seed_status(team: Path) -> None:
    async with connect(team / "alice", "auto", ("moss", "cstack")) as client:
        calls = Calls(client)
        big = await calls.error("moss.store", "CAPSULE_TOO_LARGE", capsule_text=CAPSULE + "x" * 13000, name="big")
        assert big["status"] == 413 and big["details"]["max_chars"] == 12000
        await calls.ok("moss.store", capsule_text=CAPSULE, name="a")
        missing_section = await calls.error("moss.append", "INVALID_REQUEST", name="a", section="Risks", content="x")
        assert "Decisions" in missing_section["details"]["available"]
        assert (await calls.error("moss.fetch", "NOT_FOUND", name="nope"))["code"] in ERROR_CODES
        gone = await calls.error("cstack.start", "NOT_FOUND", task="no such task")
        assert gone["status"] == 404


@pytest.mark.anyio
async def test_a_refused_import_is_an_error_result(team: Path) -> None:
    """Issue 27 item 7: an import refused for collisions (mode error) or bad lines answers
    isError, with the per-line errors in details, as the CLI exits 5 or 4; nothing is written."""
    alice = team / "alice"
    exports = alice / ".moss" / "exports"
    exports.mkdir(parents=True, exist_ok=True)
    async with connect(alice, "auto", ("moss",)) as client:
        calls = Calls(client)
        await calls.ok("moss.store", capsule_text=CAPSULE, name="auth")
        await calls.ok("moss.export", path=str(exports / "all.jsonl"))
        before = sorted((p.relative_to(alice), p.read_bytes()) for p in (alice / ".moss" / "capsules").rglob("*.md"))
        clash = await calls.error("moss.import", "CONFLICT", path=str(exports / "all.jsonl"))
        assert clash["status"] == 409 and clash["details"]["imported"] == 0
        assert {error["code"] for error in clash["details"]["errors"]} <= {"ID_COLLISION", "NAME_COLLISION"}
        assert clash["details"]["errors"] and clash["details"]["errors"][0]["line"] == 2
        (exports / "bad.jsonl").write_text('{"_moss_export":true,"schema_version":"1.0","exported_at":1}\nnot json\n')
        bad = await calls.error("moss.import", "INVALID_DOCUMENT", path=str(exports / "bad.jsonl"))
        assert bad["status"] == 422 and [error["code"] for error in bad["details"]["errors"]] == ["PARSE_ERROR"]
        after = sorted((p.relative_to(alice), p.read_bytes()) for p in (alice / ".moss" / "capsules").rglob("*.md"))
        assert after == before
        renamed = await calls.ok("moss.import", path=str(exports / "all.jsonl"), mode="rename")
        assert renamed == {"imported": 1, "skipped": 0, "errors": []}


@pytest.mark.anyio
async def test_cstack_tools_without_a_cstack_folder_say_how_to_create_one(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    (bare / ".moss").mkdir(parents=True)
    async with connect(bare, "auto", ("cstack",)) as client:
        calls = Calls(client)
        error = await calls.error("cstack.plan", "NOT_FOUND")
        assert "cstack init" in error["hint"]
        assert (await calls.ok("cstack.stats"))["exists"] is False


# --------------------------------------------------------------------------- same use cases as the CLIs


def cli_json(tool: str, *args: str, cwd: Path) -> Any:
    done = run_cli(tool, *args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.anyio
async def test_results_are_what_the_cli_prints_with_json(team: Path) -> None:
    alice = team / "alice"
    async with connect(alice, "auto") as client:
        calls = Calls(client)
        await calls.ok("moss.store", capsule_text=CAPSULE, name="auth")
        await calls.ok("cstack.add", task="P2: Write docs #docs", id="docs")
        await calls.ok("needlecast.send", body="hello", to=["bob"])
        await calls.ok("loop_remember", content="The CLI and MCP share use cases.", tags=["arch"])
        pairs = [
            (await calls.ok("moss.fetch", name="auth"), cli_json("moss", "fetch", "auth", cwd=alice)),
            (await calls.ok("moss.list"), cli_json("moss", "list", cwd=alice)),
            (await calls.ok("cstack.plan"), cli_json("cstack", "plan", cwd=alice)),
            (await calls.ok("cstack.status"), cli_json("cstack", "status", cwd=alice)),
            (await calls.ok("cstack.ready"), cli_json("cstack", "ready", cwd=alice)),
            (await calls.ok("cstack.stats"), cli_json("cstack", "stats", cwd=alice)),
            (await calls.ok("needlecast.outbox"), cli_json("needlecast", "outbox", cwd=alice)),
            (await calls.ok("needlecast.inbox"), cli_json("needlecast", "inbox", cwd=alice)),
            (await calls.ok("loop_scan", query="use cases"), cli_json("moss", "search", "use", "cases", cwd=alice)),
        ]
    for from_mcp, from_cli in pairs:
        assert from_mcp == from_cli


# --------------------------------------------------------------------------- concurrency


@pytest.mark.anyio
async def test_two_sessions_and_a_cli_writing_the_same_capsule_and_plan_lose_nothing(team: Path) -> None:
    alice = team / "alice"
    server = build_server(Context(alice, actor=AGENT), ("moss", "cstack"))
    rounds = 12
    async with Client(server, mode="legacy") as first, Client(server, mode="auto") as second:
        await first.call_tool("moss.store", {"capsule_text": CAPSULE, "name": "shared"})

        async def session(client: Client, who: str) -> None:
            async with anyio.create_task_group() as group:
                for i in range(rounds):
                    group.start_soon(write_both, client, f"{who}-{i}")

        async def write_both(client: Client, tag: str) -> None:
            appended = await client.call_tool("moss.append", {"name": "shared", "section": "Decisions", "content": f"- {tag}"})
            added = await client.call_tool("cstack.add", {"task": f"Task {tag}"})
            assert not appended.is_error and not added.is_error, (appended.content, added.content)

        def cli_writer() -> None:
            for i in range(4):
                for command in (
                    [str(BIN / "moss"), "append", "shared", "--section", "Decisions", "--content", f"- cli-{i}"],
                    [str(BIN / "cstack"), "add", f"Task cli-{i}"],
                ):
                    subprocess.run(command, cwd=alice, check=True, capture_output=True, timeout=60)

        async with anyio.create_task_group() as group:
            group.start_soon(session, first, "one")
            group.start_soon(session, second, "two")
            group.start_soon(anyio.to_thread.run_sync, cli_writer)

        text = (await first.call_tool("moss.fetch", {"name": "shared"})).structured_content["capsule_text"]
        titles = {task["title"] for task in (await second.call_tool("cstack.plan", {})).structured_content["tasks"]}
    expected = [f"one-{i}" for i in range(rounds)] + [f"two-{i}" for i in range(rounds)] + [f"cli-{i}" for i in range(4)]
    assert [tag for tag in expected if f"- {tag}\n" not in text] == []
    assert {f"Task {tag}" for tag in expected} <= titles


# --------------------------------------------------------------------------- odds and ends


def test_the_server_sleeve_name_matches_needlecast(tmp_path: Path) -> None:
    from moss_files.cli import serve as mcp_cli
    from needlecast import cli as needlecast_cli

    assert mcp_cli.SLEEVE_ENV == needlecast_cli.SLEEVE_ENV


@pytest.mark.anyio
async def test_messages_are_sent_as_the_configured_sleeve(team: Path) -> None:
    moment = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    clock: Callable[[], datetime] = lambda: moment  # noqa: E731
    server = build_server(Context(team / "alice", clock=clock, sleeve="alice-2", actor=AGENT), ("needlecast",))
    async with Client(server) as client:
        sent = await client.call_tool("needlecast.send", {"body": "hi", "to": ["bob"]})
    assert sent.structured_content["message"]["from"] == "alice-2"
    assert sent.structured_content["message"]["time"] == "2026-03-01T12:00:00Z"

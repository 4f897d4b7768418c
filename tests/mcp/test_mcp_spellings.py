"""Other tools' spellings, through `moss serve` over stdio and the CLI: LoopFlow's and its spec's
argument names (camelCase, `filters`, `next_session_should`), plural scopes, and the ids items
had before `moss migrate` brought them over (`source_id`). The workspace is LoopFlow's export
fixture (tests/migrate/fixtures/loopflow/export), migrated with `moss migrate loopflow`."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from mcp import Client, StdioServerParameters
from mcp_support import anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)
from migrate_support import copy_fixture, make_workspace

from moss_files.foundation.errors import InvalidRequest
from moss_files.loopflow import store as loopflow_store
from moss_files.mcp import spellings
from moss_files.migrate import model as migrate_model


@pytest.fixture
def migrated(tmp_path: Path) -> dict[str, Any]:
    """A workspace holding LoopFlow's export fixture, migrated; and old id -> new id."""
    root = make_workspace(tmp_path / "project")
    copy_fixture("loopflow/export", root)
    done = run_cli("moss", "migrate", "loopflow", "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    new_ids = {item["old_id"]: item["new_id"] for item in json.loads(done.stdout)["items"] if item.get("new_id")}
    assert {"INS-061", "INS-071", "LF-108", "2026-01-21-S18b"} <= set(new_ids), new_ids
    return {"root": root, "ids": new_ids}


@asynccontextmanager
async def served(root: Path, *args: str) -> AsyncIterator[Client]:
    server = StdioServerParameters(command=str(BIN / "moss"), args=["serve", *args], cwd=str(root), env=dict(os.environ))
    async with Client(server, mode="legacy") as client:
        yield client


async def ok(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    data: dict[str, Any] = result.structured_content
    return data


async def refused(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.content[0].text
    error: dict[str, Any] = result.structured_content["error"]
    return error


def cli_json(root: Path, *args: str) -> dict[str, Any]:
    done = run_cli("moss", *args, "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


# --------------------------------------------------------------------------- plural scopes


@pytest.mark.anyio
async def test_a_timeline_scoped_in_the_plural_as_the_spec_writes_it(migrated: dict[str, Any]) -> None:
    """`scope: ["insights"]` (the spec's spelling) once matched no kind and answered empty."""
    root, ids = migrated["root"], migrated["ids"]
    async with served(root) as client:
        plural = await ok(client, "loop_timeline", anchor="2026-01-21", depth_before=0, depth_after=5, scope=["insights"])
        singular = await ok(client, "loop_timeline", anchor="2026-01-21", depth_before=0, depth_after=5, scope=["insight"])
    assert [item["id"] for item in plural["after"]] == [ids["INS-060"], ids["INS-061"], ids["INS-062"], ids["INS-071"]]
    assert plural == singular
    assert cli_json(root, "timeline", "2026-01-21", "--before", "0", "--kind", "insights") == plural


# --------------------------------------------------------------------------- ids kept from before a migration


@pytest.mark.anyio
async def test_expand_finds_an_item_by_the_id_it_had_before_the_migration(migrated: dict[str, Any]) -> None:
    """LoopFlow's ids live on as `source_id`; search found them, expand answered not_found."""
    root, ids = migrated["root"], migrated["ids"]
    async with served(root) as client:
        expanded = await ok(client, "loop_expand", ids=["INS-061", "LF-108", "2026-01-21-S18b", "INS-999"])
        around = await ok(client, "loop_timeline", anchor="INS-061", depth_before=1, depth_after=0)
    found = {item["source_id"]: (item["id"], item["kind"]) for item in expanded["items"]}
    assert found == {"INS-061": (ids["INS-061"], "insight"), "LF-108": (ids["LF-108"], "task"), "2026-01-21-S18b": (ids["2026-01-21-S18b"], "session")}
    assert expanded["not_found"] == ["INS-999"]
    assert around["anchor"]["id"] == ids["INS-061"]
    # The CLI answers the same, and the insight and session commands fetch by the old id too.
    assert cli_json(root, "expand", "INS-061")["items"][0]["id"] == ids["INS-061"]
    assert cli_json(root, "insight", "show", "INS-061")["id"] == ids["INS-061"]
    assert cli_json(root, "session", "show", "2026-01-21-S18b")["id"] == ids["2026-01-21-S18b"]
    missing = run_cli("moss", "insight", "show", "INS-999", cwd=root)
    assert missing.returncode == 3 and "NOT_FOUND" in missing.stderr
    # An item's own id still wins over another item's old one.
    assert cli_json(root, "expand", ids["INS-061"])["items"][0].get("source_id") is None
    assert loopflow_store.SOURCE_ID == migrate_model.SOURCE_ID


# --------------------------------------------------------------------------- LoopFlow's and the spec's argument names


@pytest.mark.anyio
async def test_the_loopflow_specs_argument_names_are_accepted(migrated: dict[str, Any]) -> None:
    """The spec's `filters`, `includeLinks`, `depthBefore`/`depthAfter` were INVALID_REQUEST."""
    root, ids = migrated["root"], migrated["ids"]
    async with served(root) as client:
        filters = {"types": ["edge_case"], "statuses": ["discussed"], "tags": ["fts5"], "dateRange": {"from": "2026-01-21", "to": "2026-01-21"}}
        scanned = await ok(client, "loop_scan", query="triggers", scope=["insights"], filters=filters)
        flat = await ok(
            client,
            "loop_scan",
            query="triggers",
            scope=["insight"],
            types=["edge_case"],
            statuses=["discussed"],
            tags=["fts5"],
            after="2026-01-21",
            through="2026-01-21",
        )
        later = await ok(client, "loop_scan", query="", scope=["insights"], filters={"dateRange": {"from": "2026-01-22"}})
        expanded = await ok(client, "loop_expand", ids=[ids["INS-061"]], includeLinks=True, includeTimeline=True, depth=1)
        timeline = await ok(client, "loop_timeline", anchor="2026-01-21", depthBefore=0, depthAfter=2, scope=["insights"])
        one_word = await ok(client, "loop_timeline", anchor="2026-01-21", depthBefore=0, depthAfter=2, scope="insights")
        every_kind = await ok(client, "loop_timeline", anchor="2026-01-21", depthBefore=0, depthAfter=2, scope="all")
        tasks = await ok(client, "loop_task_list", statuses=["TODO"], priorities=["high"])
    # `to` takes its whole day: INS-061 was written at 15:02 on 2026-01-21.
    assert [match["id"] for match in scanned["matches"]] == [ids["INS-061"]]
    assert flat == scanned
    assert [match["id"] for match in later["matches"]] == [ids["INS-071"]]
    item = expanded["items"][0]
    assert "links" in item and "timeline" in item
    assert [entry["id"] for entry in timeline["after"]] == [ids["INS-060"], ids["INS-061"]]
    assert one_word == timeline and len(every_kind["after"]) == 2
    assert "tasks" in tasks


@pytest.mark.anyio
async def test_loopflows_handoff_and_orient_arguments_are_accepted(migrated: dict[str, Any]) -> None:
    """LoopFlow's loop_handoff sends one text for in_progress, blocked_on and next_session_should,
    a list for hot_context, and export_files; its loop_orient sends repo_path."""
    root = migrated["root"]
    async with served(root) as client:
        elsewhere = await refused(client, "loop_orient", repo_path=str(root.parent / "other"))
        opened = await ok(client, "loop_orient", repo_path=str(root), task="Ship search")
        handed = await ok(
            client,
            "loop_handoff",
            mode="graceful",
            completed=["Indexed the insights"],
            in_progress="Timeline view",
            blocked_on="Review of the schema",
            next_session_should="Finish the timeline\n- Write the docs",
            hot_context=["The cache is per machine", "Never commit it"],
            export_files=True,
        )
    assert elsewhere["code"] == "INVALID_REQUEST" and elsewhere["details"]["field"] == "repo_path"
    assert handed["ignored_arguments"].keys() == {"export_files"}
    session = cli_json(root, "session", "show", opened["session"]["id"])
    assert session["next_actions"] == ["Finish the timeline", "Write the docs"]
    assert session["in_progress"] == ["Timeline view"] and session["blocked_on"] == ["Review of the schema"]
    assert session["hot_context"] == "The cache is per machine\nNever commit it"


@pytest.mark.anyio
async def test_two_spellings_of_one_argument_must_agree(migrated: dict[str, Any]) -> None:
    root, ids = migrated["root"], migrated["ids"]
    async with served(root, "--names", "underscore") as client:
        clash = await refused(client, "loop_expand", ids=[ids["INS-061"]], include_links=True, includeLinks=False)
        agreed = await ok(client, "loop_expand", ids=[ids["INS-061"]], include_links=True, includeLinks=True)
        nested = await refused(client, "loop_scan", query="x", types=["domain"], filters={"types": ["technical"]})
        stray = await refused(client, "loop_scan", query="x", filters={"kinds": ["insight"]})
        unknown = await refused(client, "loop_scan", query="x", includeEverything=True)
        not_ours = await refused(client, "moss_fetch", name="auth", includeText=False)
    assert clash["code"] == "INVALID_REQUEST" and clash["details"]["spellings"] == ["include_links", "includeLinks"]
    assert "links" in agreed["items"][0]
    assert nested["code"] == "INVALID_REQUEST" and nested["details"]["spellings"] == ["types", "filters.types"]
    assert stray["code"] == "INVALID_REQUEST" and stray["details"]["field"] == "filters.kinds"
    assert unknown["code"] == "INVALID_REQUEST" and unknown["details"]["unknown"] == ["includeEverything"]
    # Moss never spelled its arguments in camelCase: its tools take only their own names.
    assert not_ours["code"] == "INVALID_REQUEST" and not_ours["details"]["unknown"] == ["includeText"]


@pytest.mark.anyio
async def test_tools_list_advertises_only_our_own_names(migrated: dict[str, Any]) -> None:
    """The spellings are accepted, not listed: tools/list stays the size it was (docs/mcp.md
    lists them), and the server's instructions say they exist."""
    async with served(migrated["root"], "--tools", "all") as client:
        tools = (await client.list_tools()).tools
        instructions = client.instructions
    for tool in tools:
        if tool.name.startswith("loop_"):
            names = set(tool.input_schema.get("properties", {}))
            assert not {"filters", "next_session_should", "export_files", "force"} & names, tool.name
            assert all(name == spellings.snake_case(name) for name in names), tool.name
    assert instructions is not None and "next_session_should" in instructions


# --------------------------------------------------------------------------- the table itself (pure)


def test_a_camel_case_name_is_ours_in_snake_case() -> None:
    assert spellings.snake_case("includeLinks") == "include_links"
    assert spellings.snake_case("depthBefore") == "depth_before"
    assert spellings.snake_case("ids") == "ids"
    spelled = spellings.normalize("loop_handoff", {"nextSessionShould": "a", "inProgress": "b"}, {"next_actions", "in_progress"})
    assert spelled.arguments == {"next_actions": ["a"], "in_progress": ["b"]}


def test_a_value_of_another_shape_is_left_for_the_schema_to_refuse() -> None:
    spelled = spellings.normalize("loop_handoff", {"in_progress": 3, "hot_context": [1, 2]}, {"in_progress", "hot_context"})
    assert spelled.arguments == {"in_progress": 3, "hot_context": [1, 2]}
    with pytest.raises(InvalidRequest) as raised:
        spellings.normalize("loop_scan", {"filters": ["types"]}, {"types"})
    assert raised.value.details["field"] == "filters"

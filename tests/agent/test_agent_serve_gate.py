"""The gate in front of `moss serve`: with a [serve] policy a denied tool answers a coded isError
result, and the audit log has one line per call the server answers (client name and version
from `initialize`, tool, summarized arguments, result code, duration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN
from mcp import Client, StdioServerParameters
from mcp.types import Implementation
from mcp_support import CAPSULE, anyio_backend, anyio_workers_finish, make_workspace  # noqa: F401  (fixtures)


def server(root: Path) -> StdioServerParameters:
    return StdioServerParameters(command=str(BIN / "moss"), args=["serve"], cwd=root)


def audit_lines(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((root / ".moss" / "audit").glob("*.jsonl")) for line in path.read_text().splitlines()]


@pytest.mark.anyio
async def test_a_policy_denies_with_a_code_and_every_call_is_audited(repo: Path) -> None:
    root = make_workspace(repo)
    config = root / ".moss" / "config.toml"
    config.write_text(config.read_text() + '\n[serve]\ndeny_tools = ["moss.purge"]\npath_roots = ["."]\nallow_tools = ["moss.*", "cstack.status"]\n')
    me = Implementation(name="test-host", version="9.8.7")
    async with Client(server(root), mode="legacy", client_info=me) as client:
        stored = await client.call_tool("moss.store", {"capsule_text": CAPSULE, "name": "auth"})
        assert not stored.is_error
        purge = await client.call_tool("moss.purge", {})
        assert purge.is_error and purge.structured_content["error"]["code"] == "CAPABILITY_DENIED"
        assert purge.structured_content["error"]["status"] == 403
        assert purge.content[0].text.startswith("CAPABILITY_DENIED:")
        outside = await client.call_tool("moss.export", {"path": "/tmp/elsewhere.jsonl"})
        assert outside.is_error and outside.structured_content["error"]["details"]["decisions"][0]["rule"] == "serve.path_roots"
        other_set = await client.call_tool("needlecast.inbox", {})
        assert other_set.is_error and other_set.structured_content["error"]["code"] == "CAPABILITY_DENIED"
        unknown = await client.call_tool("moss.nothing", {})
        assert unknown.is_error and unknown.structured_content["error"]["code"] == "NOT_FOUND"
        fetched = await client.call_tool("moss.fetch", {"name": "auth", "include_text": False})
        assert not fetched.is_error
    lines = audit_lines(root)
    assert [line["data"]["tool"] for line in lines] == ["moss.store", "moss.purge", "moss.export", "needlecast.inbox", "moss.nothing", "moss.fetch"]
    assert [line["kind"] for line in lines] == [
        "tool.succeeded",
        "capability.denied",
        "capability.denied",
        "capability.denied",
        "tool.failed",
        "tool.succeeded",
    ]
    assert [line["data"]["code"] for line in lines] == ["OK", "CAPABILITY_DENIED", "CAPABILITY_DENIED", "CAPABILITY_DENIED", "NOT_FOUND", "OK"]
    assert all(line["data"]["client"] == {"name": "test-host", "version": "9.8.7"} for line in lines)
    assert all(isinstance(line["data"]["duration_ms"], int) and set(line) == {"id", "ts", "kind", "session", "run", "data"} for line in lines)
    assert lines[0]["data"]["arguments"]["capsule_text"].endswith(f"({len(CAPSULE)} chars)")  # summarized, not the whole text
    assert lines[0]["session"] is None  # not called by an agent session


@pytest.mark.anyio
async def test_read_only_and_no_policy(repo: Path) -> None:
    root = make_workspace(repo)
    config = root / ".moss" / "config.toml"
    original = config.read_text()
    config.write_text(original + "\n[serve]\nread_only = true\n")
    async with Client(server(root), mode="legacy") as client:
        refused = await client.call_tool("moss.store", {"capsule_text": CAPSULE, "name": "auth"})
        assert refused.is_error and refused.structured_content["error"]["details"]["decisions"][0]["rule"] == "serve.read_only"
        assert not (await client.call_tool("cstack.status", {})).is_error
    assert [line["data"]["code"] for line in audit_lines(root)] == ["CAPABILITY_DENIED", "OK"]
    # Without a policy everything is answered as before, and still audited; audit = false turns the log off.
    config.write_text(original + "\n[serve]\naudit = false\n")
    (root / ".moss" / "audit").rename(root / "old-audit")
    async with Client(server(root), mode="legacy") as client:
        assert not (await client.call_tool("moss.store", {"capsule_text": CAPSULE, "name": "auth"})).is_error
    assert not (root / ".moss" / "audit").exists()


def test_a_bad_serve_table_stops_the_server_with_exit_4(repo: Path) -> None:
    from conftest import run_cli

    root = make_workspace(repo)
    config = root / ".moss" / "config.toml"
    config.write_text(config.read_text() + '\n[serve]\nread_only = "yes"\n')
    refused = run_cli("moss", "serve", cwd=root, input="")
    assert refused.returncode == 4 and "SCHEMA_ERROR" in refused.stderr


@pytest.mark.anyio
async def test_a_denied_tool_stays_denied_under_its_other_names(repo: Path) -> None:
    """Issue 24: `deny_tools = ["moss.purge"]` did not hold for `capsule_purge` (the capsule
    set's name of the same tool), nor `path_roots` for `capsule_export`."""
    root = make_workspace(repo)
    config = root / ".moss" / "config.toml"
    config.write_text(config.read_text() + '\n[serve]\ndeny_tools = ["moss.purge"]\npath_roots = ["."]\n')
    params = StdioServerParameters(command=str(BIN / "moss"), args=["serve", "--tools", "capsule", "--names", "underscore"], cwd=root)
    async with Client(params, mode="legacy") as client:
        assert not (await client.call_tool("capsule_store", {"capsule_text": CAPSULE, "name": "auth"})).is_error
        assert not (await client.call_tool("capsule_delete", {"name": "auth"})).is_error
        purge = await client.call_tool("capsule_purge", {})
        assert purge.is_error and purge.structured_content["error"]["details"]["decisions"][0]["rule"] == "serve.deny_tools"
        outside = await client.call_tool("capsule_export", {"path": str(repo.parent / "elsewhere.jsonl")})
        assert outside.is_error and outside.structured_content["error"]["details"]["decisions"][0]["rule"] == "serve.path_roots"
    assert list((root / ".moss" / "capsules").rglob("*.md"))  # the soft-deleted capsule is still there
    assert not (repo.parent / "elsewhere.jsonl").exists()

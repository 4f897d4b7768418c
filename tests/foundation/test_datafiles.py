"""TOML and JSON files, read the one way (`foundation.datafiles`): a byte order mark is accepted
by every reader, as in markdown, and git's conflict markers are MERGE_CONFLICT at their line
(issue 24: a BOM was refused in TOML and JSON files, and markers in TOML files were reported
as REGISTRY_INVALID or INVALID_DOCUMENT). Every reader is driven as a user drives it: the
commands as processes, the installer's planner with the file's bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from moss_files import scaffold
from moss_files.foundation import datafiles
from moss_files.foundation.errors import InvalidDocument
from moss_files.scaffold import Entry, McpServer

BOM = b"\xef\xbb\xbf"
MARKED = b'storage = "x"\n<<<<<<< ours\nmodel = "a"\n=======\nmodel = "b"\n>>>>>>> theirs\n'


def error_of(done: object) -> dict:
    return json.loads(done.stderr)["error"]  # type: ignore[attr-defined]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    assert run_cli("moss", "init", str(root)).returncode == 0
    return root


def test_the_reader_drops_a_bom_and_reports_markers_and_syntax_with_their_line() -> None:
    assert datafiles.load_toml(BOM + b'a = "b"\n', "x.toml") == {"a": "b"}
    assert datafiles.load_toml('\ufeffa = "b"\n', "x.toml") == {"a": "b"}
    assert datafiles.load_json(BOM + b'{"a": 1}', "x.json") == {"a": 1}
    for load, text in ((datafiles.load_toml, MARKED), (datafiles.load_json, b'{\n<<<<<<< ours\n"a": 1\n=======\n"a": 2\n>>>>>>> b\n}\n')):
        with pytest.raises(InvalidDocument) as caught:
            load(BOM + text, "x")
        assert (caught.value.code, caught.value.line) == ("MERGE_CONFLICT", 2)
    with pytest.raises(InvalidDocument) as caught:
        datafiles.load_toml(b"a = 1\nb = \n", "x.toml", code="REGISTRY_INVALID")
    assert (caught.value.code, caught.value.line) == ("REGISTRY_INVALID", 2)
    with pytest.raises(InvalidDocument) as caught:
        datafiles.load_json(b'{"a": 1,\n}', "x.json", code="PARSE_ERROR")
    assert (caught.value.code, caught.value.line) == ("PARSE_ERROR", 2)


def test_the_config_and_agent_settings_accept_a_bom(workspace: Path) -> None:
    config, agent = workspace / ".moss" / "config.toml", workspace / ".moss" / "agent.toml"
    config.write_bytes(BOM + b"capsule_max_chars = 5000\n")
    assert run_cli("moss", "agent", "init", cwd=workspace).returncode == 0
    agent.write_bytes(BOM + agent.read_bytes())
    assert run_cli("moss", "list", "--json", cwd=workspace).returncode == 0
    assert run_cli("moss", "agent", "sessions", "--json", cwd=workspace).returncode == 0


def test_markers_in_the_config_and_agent_settings_are_merge_conflicts_at_their_line(workspace: Path) -> None:
    config, agent = workspace / ".moss" / "config.toml", workspace / ".moss" / "agent.toml"
    for path, command in ((config, ("list",)), (agent, ("agent", "sessions"))):
        path.write_bytes(MARKED)
        done = run_cli("moss", *command, "--json", cwd=workspace)
        error = error_of(done)
        assert done.returncode == 4 and (error["code"], error["line"]) == ("MERGE_CONFLICT", 2) and error["path"].endswith(path.name)
        path.unlink()


@pytest.fixture
def envoy(tmp_path: Path) -> Path:
    root = tmp_path / "envoy"
    for sleeve in ("alice", "bob"):
        (root / sleeve).mkdir(parents=True)
        assert run_cli("needlecast", "init", cwd=root / sleeve).returncode == 0
    (root / ".needlecast").mkdir()
    return root


def test_the_sleeve_registry_accepts_a_bom(envoy: Path) -> None:
    (envoy / ".needlecast" / "sleeves.toml").write_bytes(BOM + b'alice = "alice"\nbob = "bob"\n')
    listed = run_cli("needlecast", "sleeves", "--json", cwd=envoy)
    assert listed.returncode == 0, listed.stderr


def test_markers_in_the_sleeve_registry_are_a_merge_conflict_at_their_line(envoy: Path) -> None:
    registry = envoy / ".needlecast" / "sleeves.toml"
    registry.write_bytes(b'alice = "alice"\n<<<<<<< ours\nbob = "bob"\n=======\nbob = "robert"\n>>>>>>> theirs\n')
    done = run_cli("needlecast", "sleeves", "--json", cwd=envoy)
    error = error_of(done)
    assert done.returncode == 4 and (error["code"], error["line"]) == ("MERGE_CONFLICT", 2) and error["path"].endswith("sleeves.toml")


def test_an_mcp_json_with_a_bom_gets_its_server_added_and_keeps_the_bom() -> None:
    servers = (McpServer("moss", "moss", ("serve",)),)
    user = BOM + json.dumps({"mcpServers": {"other": {"command": "x"}}}).encode()
    updated = scaffold.plan_mcp("claude", Entry("file", user), servers)
    assert updated.kind == "update" and updated.content is not None and updated.content.startswith(BOM)
    assert json.loads(updated.content[len(BOM) :])["mcpServers"] == {"other": {"command": "x"}, "moss": {"command": "moss", "args": ["serve"]}}
    assert scaffold.plan_mcp("claude", Entry("file", updated.content), servers).kind == "exists"


def test_a_capsule_export_and_an_insight_bundle_saved_with_a_bom_import(workspace: Path) -> None:
    capsule = (
        "## Objective\nShip.\n\n## Current status\nStarted.\n\n## Decisions\n- a\n\n## Next actions\n- b\n\n## Key locations\n- c\n\n## Open questions\n- d\n"
    )
    assert run_cli("moss", "store", "--name", "auth", cwd=workspace, input=capsule).returncode == 0
    exported = workspace / ".moss" / "exports" / "all.jsonl"
    exported.parent.mkdir(exist_ok=True)
    assert run_cli("moss", "export", "--path", str(exported), cwd=workspace).returncode == 0
    exported.write_bytes(BOM + exported.read_bytes())
    imported = run_cli("moss", "import", "--path", str(exported), "--mode", "replace", "--json", cwd=workspace)
    assert imported.returncode == 0 and json.loads(imported.stdout)["imported"] == 1, imported.stdout + imported.stderr
    # The export is still known for ours: exporting again may replace it.
    assert run_cli("moss", "export", "--path", str(exported), cwd=workspace).returncode == 0

    assert run_cli("moss", "insight", "add", "Tabs break YAML.", cwd=workspace).returncode == 0
    bundle = workspace / ".moss" / "exports" / "insights.json"
    assert run_cli("moss", "insight", "export", "--path", str(bundle), cwd=workspace).returncode == 0, "export"
    bundle.write_bytes(BOM + bundle.read_bytes())
    previewed = run_cli("moss", "insight", "preview", str(bundle), "--json", cwd=workspace)
    assert previewed.returncode == 0, previewed.stderr

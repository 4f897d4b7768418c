"""`moss insight add|list|show|update|link` as real processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".moss").mkdir(parents=True)
    return root


def test_add_list_show_update_link(ws: Path) -> None:
    added = run_cli("moss", "insight", "add", "Watch the lock. It is per file.", "--type", "architecture", "--tag", "lock,db", "--task", "LF-1", cwd=ws)
    assert added.returncode == 0, added.stderr
    first = added.stdout.strip()
    piped = run_cli("moss", "insight", "add", "--json", cwd=ws, input="Second, from stdin.\n")
    second = json.loads(piped.stdout)["id"]
    assert first.startswith("INS-") and second.startswith("INS-") and first != second

    listed = json.loads(run_cli("moss", "insight", "list", "--json", "--tag", "db", cwd=ws).stdout)
    assert [i["id"] for i in listed["insights"]] == [first]
    shown = json.loads(run_cli("moss", "insight", "show", first, "--json", cwd=ws).stdout)
    assert shown["type"] == "architecture" and shown["tags"] == ["lock", "db"] and shown["source"] == {"task": "LF-1"}

    updated = run_cli("moss", "insight", "update", first, "--status", "discussed", "--add-tag", "fs", "--json", cwd=ws)
    assert json.loads(updated.stdout)["changed"] == ["status", "tags"]
    linked = json.loads(run_cli("moss", "insight", "link", first, second, "--both", "--json", cwd=ws).stdout)
    assert linked["links"] == [second] and linked["back_linked"] == [second]
    text = run_cli("moss", "insight", "show", second, cwd=ws).stdout
    assert f"links: {first}" in text and text.rstrip().endswith("Second, from stdin.")


def test_errors_have_codes_and_exit_codes(ws: Path) -> None:
    missing = run_cli("moss", "insight", "show", "INS-none", "--json", cwd=ws)
    assert missing.returncode == 3 and json.loads(missing.stderr)["error"]["code"] == "NOT_FOUND"
    bad_type = run_cli("moss", "insight", "add", "x", "--type", "gotcha", "--json", cwd=ws)
    assert bad_type.returncode == 2 and json.loads(bad_type.stderr)["error"]["code"] == "SCHEMA_ERROR"
    (ws / ".moss" / "insights").mkdir(exist_ok=True)
    (ws / ".moss" / "insights" / "INS-bad.md").write_text("---\nid: INS-bad\nstatus: [x]\n---\nx\n")
    broken = run_cli("moss", "insight", "update", "INS-bad", "--status", "discussed", "--json", cwd=ws)
    assert broken.returncode == 4
    error = json.loads(broken.stderr)["error"]
    assert (error["code"], error["line"]) == ("SCHEMA_ERROR", 3)
    listed = run_cli("moss", "insight", "list", cwd=ws)
    assert listed.returncode == 0 and "INS-bad.md:3" in listed.stderr

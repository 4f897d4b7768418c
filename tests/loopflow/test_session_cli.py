"""`moss session start|end|list|show` as real processes."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli


def test_a_session_from_start_to_handoff(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".moss").mkdir(parents=True)
    started = run_cli("moss", "session", "start", "--task", "LF-9 docs", "--json", cwd=ws)
    assert started.returncode == 0, started.stderr
    session = json.loads(started.stdout)["session"]["id"]
    resumed = run_cli("moss", "session", "start", cwd=ws)
    assert resumed.stdout.startswith(f"session {session} (resumed): LF-9 docs")

    ended = run_cli("moss", "session", "end", "--summary", "Docs drafted.", "--next", "review docs", "--in-progress", "examples", "--json", cwd=ws)
    result = json.loads(ended.stdout)
    assert result["outcome"] == "PARTIAL" and result["next_actions_saved"] is True
    again = json.loads(run_cli("moss", "session", "end", "--summary", "Docs drafted.", "--next", "review docs", "--json", cwd=ws).stdout)
    assert again["changed"] is False and again["session"]["id"] == session

    listed = json.loads(run_cli("moss", "session", "list", "--json", cwd=ws).stdout)
    assert [s["id"] for s in listed["sessions"]] == [session] and listed["sessions"][0]["status"] == "partial"
    shown = run_cli("moss", "session", "show", session, cwd=ws)
    assert "next_actions: review docs" in shown.stdout
    nxt = run_cli("moss", "session", "start", cwd=ws)
    assert "suggested next actions:\n  - review docs" in nxt.stdout


def test_errors(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".moss").mkdir(parents=True)
    bad = run_cli("moss", "session", "end", "--mode", "sideways", "--json", cwd=ws)
    assert bad.returncode == 2 and json.loads(bad.stderr)["error"]["code"] == "INVALID_REQUEST"
    assert run_cli("moss", "session", "show", "SES-none", cwd=ws).returncode == 3

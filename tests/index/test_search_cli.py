"""`moss search|expand|timeline|index` as real processes: JSON shapes, exit codes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, run_cli


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".moss" / "insights").mkdir(parents=True)
    (root / ".moss" / "insights" / "INS-1.md").write_text("---\nid: INS-1\ntype: technical\ncreated: 2026-01-02T10:00:00Z\n---\nToken refresh before expiry.\n")
    (root / ".moss" / "insights" / "INS-2.md").write_text("---\nid: INS-2\ntype: domain\ncreated: 2026-01-03T10:00:00Z\n---\nLegacy token format is gone.\n")
    (root / ".cstack").mkdir()
    (root / ".cstack" / "PLAN.md").write_text("# Plan\n\n## Tasks\n- [ ] Rotate keys (id: keys)\n")
    return root


def test_search_json_and_text(ws: Path) -> None:
    done = run_cli("moss", "search", "token", "-legacy", "--json", cwd=ws)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [m["id"] for m in result["matches"]] == ["INS-1"]
    assert set(result) == {"query", "matches", "truncated", "hint"}
    assert result["query"] == "token -legacy"
    text = run_cli("moss", "search", "token", "--limit", "1", cwd=ws)
    assert text.returncode == 0
    assert text.stdout.splitlines() == ["INS-1  insight  2026-01-02  Token refresh before expiry. [unprocessed]"]
    assert "more" in text.stderr


def test_the_count_of_matches_is_singular_for_one(ws: Path) -> None:
    one = run_cli("moss", "search", "legacy", cwd=ws)
    assert one.returncode == 0 and "1 match\n" in one.stderr and "1 matches" not in one.stderr
    two = run_cli("moss", "search", "token", cwd=ws)
    assert "2 matches" in two.stderr


def test_search_finds_the_other_forms_of_a_word(ws: Path) -> None:
    """The issue's case: `moss search tokens` did not find "Token refresh"."""
    done = run_cli("moss", "search", "tokens", "--json", cwd=ws)
    assert done.returncode == 0, done.stderr
    assert [m["id"] for m in json.loads(done.stdout)["matches"]] == ["INS-1", "INS-2"]


def test_bad_requests_exit_2_with_a_stable_code(ws: Path) -> None:
    done = run_cli("moss", "search", "after:someday", "--json", cwd=ws)
    assert done.returncode == 2
    assert json.loads(done.stderr)["error"]["code"] == "INVALID_REQUEST"
    assert run_cli("moss", "search", "x", "--limit", "0", cwd=ws).returncode == 2


def test_expand_lists_unknown_ids_and_exits_3_when_none_is_found(ws: Path) -> None:
    done = run_cli("moss", "expand", "INS-1", "nope", "--json", cwd=ws)
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert [i["id"] for i in result["items"]] == ["INS-1"] and result["not_found"] == ["nope"]
    assert result["items"][0]["record"]["content"] == "Token refresh before expiry.\n"
    missing = run_cli("moss", "expand", "nope", cwd=ws)
    assert missing.returncode == 3 and missing.stderr.startswith("error[NOT_FOUND] ") and "'nope'" in missing.stderr
    text = run_cli("moss", "expand", "keys", cwd=ws)
    assert text.returncode == 0 and text.stdout.startswith("== task keys  (.cstack/PLAN.md:4)")


def test_an_unknown_id_is_reported_in_the_error_format_beside_what_was_found(ws: Path) -> None:
    """`moss expand NOPE-123` once printed `not found: NOPE-123`, the one failure without its code."""
    done = run_cli("moss", "expand", "INS-1", "NOPE-123", cwd=ws)
    assert done.returncode == 0 and done.stdout.startswith("== insight INS-1")
    assert done.stderr.splitlines()[-1] == "error[NOT_FOUND] no item with id 'NOPE-123'"  # after "search index built"


def test_timeline(ws: Path) -> None:
    done = run_cli("moss", "timeline", "INS-1", "--after", "1", "--json", cwd=ws)
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert result["anchor"]["id"] == "INS-1" and [i["id"] for i in result["after"]] == ["INS-2"]
    assert run_cli("moss", "timeline", "no-such-anchor", cwd=ws).returncode == 3


def test_index_commands(ws: Path) -> None:
    rebuilt = run_cli("moss", "index", "rebuild", "--json", cwd=ws)
    assert rebuilt.returncode == 0 and json.loads(rebuilt.stdout)["rebuilt"] is True
    refreshed = json.loads(run_cli("moss", "index", "refresh", "--json", cwd=ws).stdout)
    assert refreshed["rebuilt"] is False and refreshed["files"] == 3
    (ws / ".moss" / "insights" / "INS-3.md").write_text("---\nid: INS-3\ntype: [x]\n---\nx\n")
    status = run_cli("moss", "index", "status", "--json", cwd=ws)
    assert status.returncode == 0
    body = json.loads(status.stdout)
    assert body["by_kind"] == {"insight": 2, "task": 1}
    assert [(p["path"], p["code"], p["line"]) for p in body["problems"]] == [(".moss/insights/INS-3.md", "SCHEMA_ERROR", 3)]
    checked = run_cli("moss", "index", "status", "--check", cwd=ws)
    assert checked.returncode == 4 and "INS-3.md:3 [SCHEMA_ERROR]" in checked.stdout


def test_a_corrupt_cache_is_rebuilt_with_a_message(ws: Path) -> None:
    run_cli("moss", "search", "token", cwd=ws)
    (ws / ".moss" / "cache" / "index.db").write_bytes(b"\x00garbage" * 512)
    done = run_cli("moss", "search", "token", "--json", cwd=ws)
    assert done.returncode == 0 and len(json.loads(done.stdout)["matches"]) == 2
    assert "rebuilt" in done.stderr


def test_outside_a_workspace(tmp_path: Path) -> None:
    done = run_cli("moss", "search", "x", "--json", cwd=tmp_path)
    assert done.returncode == 6
    assert json.loads(done.stderr)["error"]["code"] == "WORKSPACE_NOT_FOUND"


def test_concurrent_search_processes(ws: Path) -> None:
    for n in range(30):
        (ws / ".moss" / "insights" / f"INS-x{n}.md").write_text(f"---\nid: INS-x{n}\n---\nParallel token {n}.\n")
    procs = [
        subprocess.Popen(
            [str(BIN / "moss"), "search", "parallel", "--limit", "50", "--json"], cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0, 0], outputs
    assert all(len(json.loads(out)["matches"]) == 30 for out, _err in outputs)


def test_help_texts(ws: Path) -> None:
    for args in (["search", "--help"], ["expand", "--help"], ["timeline", "--help"], ["index", "--help"], ["insight", "--help"], ["session", "--help"]):
        done = run_cli("moss", *args, cwd=ws)
        assert done.returncode == 0 and "Usage" in done.stdout, args


CAPSULE = "## Objective\nKeep token refresh working.\n\n## Status\nHalf.\n\n## Decisions\n- JWT\n\n## Next steps\n(none)\n\n## Files\n- a.py\n\n## Risks\n- none yet\n"


def test_search_shows_the_name_a_capsule_is_addressed_by(ws: Path) -> None:
    assert run_cli("moss", "store", "--name", "Auth", "-w", "Team", input=CAPSULE, cwd=ws).returncode == 0
    unnamed = run_cli("moss", "store", "--json", input=CAPSULE.replace("token", "tokens"), cwd=ws)
    assert unnamed.returncode == 0, unnamed.stderr
    unnamed_id = json.loads(unnamed.stdout)["id"]
    done = run_cli("moss", "search", "token", "kind:capsule", "--json", cwd=ws)
    assert done.returncode == 0, done.stderr
    matches = {m["id"]: m for m in json.loads(done.stdout)["matches"]}
    named = next(m for m in matches.values() if m["id"] != unnamed_id)
    assert named["handle"] == "Team/Auth" and named["kind"] == "capsule" and named["status"] == "live"
    assert "handle" not in matches[unnamed_id]  # no name, no handle: its id is how it is addressed
    # Every other key keeps its value: the handle is only added.
    assert set(named) == {"id", "kind", "summary", "score", "date", "status", "handle"}
    text = run_cli("moss", "search", "token", "kind:capsule", cwd=ws)
    line = next(line for line in text.stdout.splitlines() if line.startswith(named["id"]))
    assert line == f"{named['id']}  capsule  {named['date'][:10]}  Team/Auth  {named['summary']} [live]"
    fetched = run_cli("moss", "fetch", *line.split("  ")[3].split("/")[1:], "-w", line.split("  ")[3].split("/")[0], "--json", cwd=ws)
    assert json.loads(fetched.stdout)["id"] == named["id"]  # what search shows is what fetch takes
    timeline = json.loads(run_cli("moss", "timeline", named["id"], "--json", cwd=ws).stdout)
    assert timeline["anchor"]["handle"] == "Team/Auth"
    assert "Team/Auth" in run_cli("moss", "timeline", named["id"], cwd=ws).stdout

"""Every reader on a file an unfinished git merge left with conflict markers: the error names
MERGE_CONFLICT, the file and the line of the first marker; no writer touches the file; the
listing commands and the sidecar name it as a problem and go on with everything else."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "needlecast"))
from helpers import wait_for
from test_needlecast_sidecar import start

CAPSULE = "## Objective\nShip login.\n\n## Current status\nStarted.\n\n## Decisions\n- JWT\n\n## Next actions\n- tests\n\n## Key locations\n- auth.py\n\n## Open questions\n- none\n"
MARKED = "<<<<<<< ours\n{ours}\n||||||| base\n{base}\n=======\n{theirs}\n>>>>>>> theirs\n"


@pytest.fixture
def ws(repo: Path) -> Path:
    assert run_cli("moss", "init", cwd=repo).returncode == 0
    return repo


def cli(ws: Path, tool: str, *args: str, input: str | None = None) -> tuple[int, dict]:
    done = run_cli(tool, *args, "--json", cwd=ws, input=input)
    text = done.stdout if done.stdout.strip() else done.stderr
    return done.returncode, json.loads(text) if text.strip() else {}


def plant(path: Path, before: str, after: str) -> tuple[bytes, int]:
    """Put a conflict where `before` stands in the file; return its bytes and the marker's line."""
    text = path.read_text()
    assert before in text, before
    marked = text.replace(before, MARKED.format(ours=after, base=before, theirs=after + " (theirs)"), 1)
    path.write_text(marked)
    return marked.encode(), marked[: marked.index("<<<<<<<")].count("\n") + 1


def assert_conflict(result: tuple[int, dict], path: Path, line: int) -> None:
    code, body = result
    error = body["error"]
    assert (code, error["code"], error["line"]) == (4, "MERGE_CONFLICT", line), body
    assert path.as_posix().endswith(error["path"].removeprefix("./")) and "moss merge setup" in error["hint"]


def test_cstack_reads_and_writes_refuse_a_conflicted_plan_and_status_lists_it(ws: Path) -> None:
    cli(ws, "cstack", "add", "First")
    plan = ws / ".cstack" / "PLAN.md"
    data, line = plant(plan, "- [ ] First", "- [>] First")
    for args in (("plan",), ("stats",), ("ready",), ("done", "First"), ("add", "Second"), ("start", "First")):
        assert_conflict(cli(ws, "cstack", *args), plan, line)
    assert plan.read_bytes() == data  # `cstack done` once rewrote PLAN.md with the markers in it
    code, status = cli(ws, "cstack", "status")
    assert code == 0 and [(p["code"], Path(p["path"]).name, p["line"]) for p in status["problems"]] == [("MERGE_CONFLICT", "PLAN.md", line)]
    human = run_cli("cstack", "status", cwd=ws)
    assert human.returncode == 0 and f"problem[MERGE_CONFLICT] {plan}:{line}" in human.stderr


def test_a_conflicted_current_md_is_a_problem_of_status_and_memory_refuses_writes(ws: Path) -> None:
    current = ws / ".cstack" / "CURRENT.md"
    _, line = plant(current, "_Nothing in progress yet._", "Writing.")
    code, status = cli(ws, "cstack", "status")
    assert code == 0 and status["task"] is None and status["problems"][0]["line"] == line
    memory = ws / ".cstack" / "MEMORY.md"
    text = memory.read_text()
    section = next(heading for heading in ("## Facts", "## facts") if heading in text)
    data, line = plant(memory, section, section)
    assert_conflict(cli(ws, "cstack", "remember", "Something.", "--category", "facts"), memory, line)
    assert memory.read_bytes() == data


def test_capsules_insights_sessions_and_board_items(ws: Path) -> None:
    cli(ws, "moss", "store", "--name", "auth", input=CAPSULE)
    capsule = ws / ".moss" / "capsules" / "default" / "auth.md"
    data, line = plant(capsule, "title:", "title: ours\ntitle:")
    assert_conflict(cli(ws, "moss", "fetch", "auth"), capsule, line)  # was FRONTMATTER_SYNTAX, which said nothing
    assert_conflict(cli(ws, "moss", "update", "auth", "--title", "x"), capsule, line)
    assert capsule.read_bytes() == data
    _, added = cli(ws, "moss", "insight", "add", "Caches go stale.")
    insight = next((ws / ".moss" / "insights").glob("*.md"))
    data, line = plant(insight, "Caches go stale.", "Caches go stale, sometimes.")
    assert_conflict(cli(ws, "moss", "insight", "show", added["id"]), insight, line)
    assert insight.read_bytes() == data
    cli(ws, "moss", "board", "init")
    _, epic = cli(ws, "moss", "epic", "new", "E")
    _, task = cli(ws, "moss", "task", "new", "T", "-e", epic["epic"]["id"])
    task_file = next((ws / ".moss" / "board" / "tasks").glob("*.md"))
    data, line = plant(task_file, "status: BACKLOG", "status: PLANNING")
    assert_conflict(cli(ws, "moss", "task", "show", task["task"]["id"]), task_file, line)
    assert task_file.read_bytes() == data
    # The index names the file it could not read, with the code, and searches the rest.
    code, status = cli(ws, "moss", "index", "status")
    assert code == 0
    found = json.dumps(status)
    assert "MERGE_CONFLICT" in found and "auth.md" in found


def test_needlecast_holds_a_conflicted_outbox_and_inbox_and_says_so(tmp_path: Path) -> None:
    team = tmp_path / "team"
    for name in ("alice", "bob", "carol"):
        assert run_cli("needlecast", "init", "--root", str(team / name)).returncode == 0
    for sender in ("alice", "carol"):
        assert run_cli("needlecast", "send", "--to", "bob", "--from", sender, f"hello from {sender}", "--root", str(team / sender)).returncode == 0
    outbox = team / "alice" / ".needlecast" / "outbox.md"
    data, line = plant(outbox, "hello from alice", "hello from alice, edited")
    code, listing = cli(team / "alice", "needlecast", "outbox")
    problem = listing["problems"][0]["problem"]
    assert code == 0 and (problem["code"], problem["line"]) == ("MERGE_CONFLICT", line)
    assert_conflict(cli(team / "alice", "needlecast", "send", "--to", "bob", "more"), outbox, line)
    code, report = cli(team, "needlecast", "route", "--once")
    assert code == 4 and report["delivered"] == 1  # carol's message: everything else keeps moving
    assert [p["code"] for p in report["problems"]] == ["MERGE_CONFLICT"] and report["dead_letters"] == 0
    assert outbox.read_bytes() == data  # neither routed, nor dead-lettered, nor rewritten
    inbox = team / "bob" / ".needlecast" / "inbox.md"
    data, line = plant(inbox, "hello from carol", "hello from carol, edited")
    assert run_cli("needlecast", "send", "--to", "bob", "--from", "carol", "second", "--root", str(team / "carol")).returncode == 0
    code, report = cli(team, "needlecast", "route", "--once")
    assert [held["code"] for held in report["held"]] == ["MERGE_CONFLICT"] and inbox.read_bytes() == data
    code, listing = cli(team / "bob", "needlecast", "inbox")
    assert code == 0 and "MERGE_CONFLICT" in json.dumps(listing)


def test_the_sidecar_lists_conflicted_files_in_its_status(tmp_path: Path) -> None:
    team = tmp_path / "team"
    for name in ("alice", "bob"):
        assert run_cli("needlecast", "init", "--root", str(team / name)).returncode == 0
    assert run_cli("cstack", "init", "--root", str(team)).returncode == 0
    _, line = plant(team / ".cstack" / "PLAN.md", "## Tasks", "## Tasks")
    running = start(team, "--sweep", "30")
    try:
        _, status = running.get("/status")
        assert status["conflicts"] == [{"code": "MERGE_CONFLICT", "path": ".cstack/PLAN.md", "line": line}]
        assert run_cli("needlecast", "send", "--to", "bob", "--from", "alice", "still routed", "--root", str(team / "alice")).returncode == 0
        wait_for(lambda: "still routed" in (team / "bob" / ".needlecast" / "inbox.md").read_text(), timeout=10, message="routing")
    finally:
        running.process.terminate()
        running.process.wait(timeout=10)

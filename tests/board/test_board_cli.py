"""`moss task|epic|worker|team|board`: a day of work with --json, the JSON equal to the use
case's, exit codes and error bodies, warnings for unreadable files. Long flows run the app
in-process (typer's CliRunner); stdio, exit statuses and discovery are checked on real processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from typer.testing import CliRunner

from moss_files.board import queries
from moss_files.cli.main import app
from moss_files.foundation.context import Context


@pytest.fixture
def ws(repo: Path) -> Path:
    (repo / ".moss").mkdir()
    return repo


def moss(ws: Path, *args: str, input: str | None = None, code: int = 0) -> Any:
    done = CliRunner().invoke(app, [*args, "--json", "--root", str(ws)], input=input)
    assert done.exit_code == code, (done.stderr, done.exception)
    return json.loads(done.stdout if code == 0 else done.stderr)


def test_a_day_on_the_board(ws: Path) -> None:
    assert moss(ws, "board", "init")["created"] is True
    assert moss(ws, "board", "init")["created"] is False
    epic = moss(ws, "epic", "new", "Auth", "-d", "Sign-in", "--rail", "use bcrypt")["epic"]["id"]
    task = moss(ws, "task", "new", "Login form", "-e", epic, "--dod", "renders", "--dod", "tested", "-p", "P1", "-s", "planning")["task"]
    assert (task["priority"], task["status"], task["definitionOfDone"]) == ("HIGH", "PLANNING", ["renders", "tested"])
    task_id = task["id"]

    claim = moss(ws, "task", "claim", "-w", "arch", "-s", "PLANNING")
    assert claim["task"]["id"] == task_id and claim["allRails"]["epic"] == ["use bcrypt"]
    steps = json.dumps([{"description": "Form", "affectedFiles": ["src/form.py"]}, {"description": "Tests"}])
    missing = moss(ws, "task", "plan", task_id, "--steps-json", "-", "-w", "arch", input=steps, code=2)
    assert missing["error"]["details"]["missingPaths"] == ["src/form.py"]  # affected files must exist...
    steps = json.dumps([{"description": "Form", "newFiles": ["src/form.py"]}, {"description": "Tests", "affectedFiles": ["src/form.py"]}])
    assert moss(ws, "task", "plan", task_id, "--steps-json", "-", "-w", "arch", input=steps)["status"] == "AWAITING_APPROVAL"
    assert moss(ws, "task", "approval", task_id)["approved"] is False
    assert moss(ws, "task", "approve", task_id)["status"] == "WORKING"
    assert moss(ws, "task", "claim", "-w", "dev")["task"]["id"] == task_id
    unread = moss(ws, "task", "step-start", task_id, "step-1", "-w", "dev", code=5)
    assert unread["error"]["code"] == "NOT_ALLOWED" and "moe.get_context" in unread["error"]["message"]
    moss(ws, "task", "context", task_id, "-w", "dev")
    moss(ws, "task", "step-start", task_id, "step-1", "-w", "dev")
    assert moss(ws, "task", "step-done", task_id, "step-1", "-f", "src/form.py", "-w", "dev")["nextStep"]["stepId"] == "step-2"
    moss(ws, "task", "step-done", task_id, "step-2", "-w", "dev")
    assert moss(ws, "task", "complete", task_id, "--pr", "https://example.invalid/1", "-w", "dev")["status"] == "REVIEW"
    assert moss(ws, "task", "claim", "-w", "qa", "-s", "REVIEW")["task"]["id"] == task_id
    moss(ws, "task", "context", task_id, "-w", "qa")
    rejected = moss(ws, "task", "qa-reject", task_id, "-r", "tested is not true", "--failed-dod", "2", "-w", "qa")
    assert (rejected["status"], rejected["reopenCount"]) == ("WORKING", 1)
    assert rejected["rejectionDetails"] == {"failedDodItems": ["tested"]}
    moss(ws, "task", "claim", "-w", "dev")
    moss(ws, "task", "complete", task_id, "-w", "dev")
    moss(ws, "task", "claim", "-w", "qa", "-s", "REVIEW")
    moss(ws, "task", "context", task_id, "-w", "qa")
    assert moss(ws, "task", "qa-approve", task_id, "--summary", "ok", "-w", "qa")["status"] == "DONE"

    # --json prints exactly what the use case (and so the MCP tool) returns.
    ctx = Context(ws)
    assert moss(ws, "task", "show", task_id) == queries.show_task(ctx, task_id=task_id)
    assert moss(ws, "task", "list", "-e", epic) == queries.list_tasks(ctx, epic_id=epic)
    assert moss(ws, "board", "log", "--task", task_id, "--type", "TASK_REOPENED")["count"] == 1
    text = CliRunner().invoke(app, ["task", "show", task_id, "--root", str(ws)]).stdout
    assert "[x] step-1: Form" in text and "reopened 1x" in text


def test_teams_workers_and_blocks(ws: Path) -> None:
    team = moss(ws, "team", "new", "Coders", "--role", "worker", "--max", "1")["team"]["id"]
    assert moss(ws, "team", "join", team, "w1")["team"]["memberIds"] == ["w1"]
    full = moss(ws, "team", "join", team, "w2", code=5)
    assert full["error"]["code"] == "TEAM_FULL"
    epic = moss(ws, "epic", "new", "E")["epic"]["id"]
    task_id = moss(ws, "task", "new", "t", "-e", epic, "-s", "WORKING")["task"]["id"]
    moss(ws, "task", "claim", "-w", "w1")
    assert moss(ws, "task", "block", task_id, "-r", "no db", "--needs-from", "ops", "-w", "w1")["status"] == "BLOCKED"
    assert moss(ws, "worker", "show", "w1")["status"] == "BLOCKED"
    assert moss(ws, "worker", "unblock", "w1", "--resolution", "db up", "--retry")["currentTaskId"] == task_id
    assert [w["id"] for w in moss(ws, "worker", "list")["workers"]] == ["w1"]
    assert moss(ws, "team", "list", "--role", "worker")["teams"][0]["members"][0]["status"] == "CODING"


@pytest.mark.parametrize(
    ("args", "code", "error"),
    [
        (("task", "show", "TASK-20260101-00000000"), 3, "NOT_FOUND"),
        (("epic", "show", "EPIC-none"), 3, "NOT_FOUND"),
        (("task", "claim", "-w", "w1", "-s", "DONE"), 2, "INVALID_REQUEST"),
        (("task", "new", "t", "-e", "EPIC-none"), 3, "NOT_FOUND"),
        (("team", "new", "x", "--role", "boss"), 2, "SCHEMA_ERROR"),
    ],
)
def test_errors_have_codes_and_exit_codes(ws: Path, args: tuple[str, ...], code: int, error: str) -> None:
    body = moss(ws, *args, code=code)
    assert body["ok"] is False and body["error"]["code"] == error


def test_state_machine_and_rail_errors_from_the_cli(ws: Path) -> None:
    moss(ws, "board", "init")
    project = ws / ".moss" / "board" / "project.md"
    project.write_text(project.read_text().replace("forbidden_patterns: []", "forbidden_patterns: [eval(]"))
    epic = moss(ws, "epic", "new", "E")["epic"]["id"]
    task_id = moss(ws, "task", "new", "t", "-e", epic)["task"]["id"]
    moved = moss(ws, "task", "status", task_id, "DONE", code=5)
    assert moved["error"]["code"] == "INVALID_TRANSITION" and moved["error"]["details"]["allowed"] == ["ARCHIVED", "PLANNING", "WORKING"]
    moss(ws, "task", "status", task_id, "PLANNING")
    rails = moss(ws, "task", "plan", task_id, "--step", "call eval(x)", code=4)
    assert rails["error"]["code"] == "RAIL_VIOLATION" and rails["error"]["details"]["violations"][0]["pattern"] == "eval("
    human = run_cli("moss", "task", "status", task_id, "DONE", cwd=ws)
    assert human.returncode == 5 and human.stderr.startswith("error[INVALID_TRANSITION]") and human.stdout == ""
    # Without --json, people still read the details: which rule, which step.
    human = run_cli("moss", "task", "plan", task_id, "--step", "call eval(x)", cwd=ws)
    assert human.returncode == 4 and "pattern=eval(" in human.stderr and "stepId=step-1" in human.stderr


def test_the_task_list_footer_counts_every_status_in_good_english(ws: Path) -> None:
    """The footer once left PLANNING and AWAITING_APPROVAL out, and said `1 tasks`."""
    epic = moss(ws, "epic", "new", "E")["epic"]["id"]
    planned = moss(ws, "task", "new", "only", "-e", epic, "-s", "planning")["task"]["id"]
    one = run_cli("moss", "task", "list", cwd=ws)
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines()[-1] == "1 task: 0 backlog, 1 planning, 0 awaiting approval, 0 working, 0 review, 0 done"
    moss(ws, "task", "new", "second", "-e", epic, "-s", "planning")
    assert moss(ws, "task", "claim", "-w", "arch", "-s", "PLANNING")["task"]["id"] == planned
    moss(ws, "task", "plan", planned, "--step", "do it", "-w", "arch")
    moss(ws, "task", "new", "shelved", "-e", epic)
    shelved = moss(ws, "task", "list")["tasks"][-1]["id"]
    moss(ws, "task", "archive", shelved)
    footer = run_cli("moss", "task", "list", "-s", "PLANNING", "-s", "AWAITING_APPROVAL", "-s", "ARCHIVED", cwd=ws).stdout.splitlines()[-1]
    assert footer == "3 tasks: 0 backlog, 1 planning, 1 awaiting approval, 0 working, 0 review, 0 done, 1 archived"


def test_the_rail_hint_names_the_command_a_person_runs(ws: Path) -> None:
    """At the command line the hint named moe.propose_rail, an MCP tool; agents still get it."""
    moss(ws, "board", "init")
    project = ws / ".moss" / "board" / "project.md"
    project.write_text(project.read_text().replace("forbidden_patterns: []", "forbidden_patterns: [eval(]"))
    epic = moss(ws, "epic", "new", "E")["epic"]["id"]
    task_id = moss(ws, "task", "new", "t", "-e", epic, "-s", "planning")["task"]["id"]
    refused = moss(ws, "task", "plan", task_id, "--step", "call eval(x)", code=4)
    assert refused["error"]["code"] == "RAIL_VIOLATION"
    assert "moss task propose-rail" in refused["error"]["hint"] and "moe." not in refused["error"]["hint"]

    from moss_files.board import plans
    from moss_files.foundation.context import AGENT
    from moss_files.foundation.errors import MossError

    with pytest.raises(MossError) as caught:
        plans.submit_plan(Context(ws, actor=AGENT), task_id=task_id, steps=[{"description": "call eval(x)"}])
    assert caught.value.code == "RAIL_VIOLATION" and "moe.propose_rail" in (caught.value.hint or "")


def test_priority_help_names_every_spelling_it_takes() -> None:
    """`-p urgent` means CRITICAL; --help once did not say so."""
    from moss_files.board.model import PRIORITY_ALIASES

    for command in (["task", "new"], ["task", "edit"]):
        shown = " ".join(CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"}).output.split())
        for alias, meaning in PRIORITY_ALIASES.items():
            assert f"{alias.lower()}={meaning}" in shown or f"{alias}={meaning}" in shown, (command, alias)


def test_no_workspace_and_unreadable_files(tmp_path: Path, ws: Path) -> None:
    lost = tmp_path / "nowhere"
    lost.mkdir()
    missing = run_cli("moss", "task", "list", "--json", cwd=lost)
    assert missing.returncode == 6 and json.loads(missing.stderr)["error"]["code"] == "WORKSPACE_NOT_FOUND"
    epic = moss(ws, "epic", "new", "E")["epic"]["id"]
    task_id = moss(ws, "task", "new", "t", "-e", epic)["task"]["id"]
    path = ws / ".moss" / "board" / "tasks" / f"{task_id}.md"
    path.write_text(path.read_text().replace("priority: MEDIUM", "priority: whenever"))
    listed = run_cli("moss", "task", "list", cwd=ws)
    assert listed.returncode == 0
    assert f"warning[SCHEMA_ERROR] .moss/board/tasks/{task_id}.md:6:" in listed.stderr
    shown = moss(ws, "task", "show", task_id, code=4)
    assert (shown["error"]["code"], shown["error"]["line"]) == ("SCHEMA_ERROR", 6)

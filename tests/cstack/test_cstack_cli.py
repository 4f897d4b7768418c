"""The `cstack` command line as a user runs it: real processes, --json output, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from importlib import resources
from pathlib import Path

import pytest
import typer.main
from conftest import BIN, run_cli

from cstack import cli

NOW = {"MOSS_NOW": "2026-01-21T10:00:00Z"}


def cstack(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("cstack", *args, cwd=cwd, env={**NOW, **(env or {})})


def ok(*args: str, cwd: Path, env: dict[str, str] | None = None) -> object:
    result = cstack(*args, "--json", cwd=cwd, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def fails(exit_code: int, code: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> dict:
    result = cstack(*args, "--json", cwd=cwd, env=env)
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    assert result.stdout == ""
    body = json.loads(result.stderr)
    assert body["ok"] is False and body["error"]["code"] == code
    return body["error"]


@pytest.fixture
def project(repo: Path) -> Path:
    result = cstack("init", cwd=repo)
    assert result.returncode == 0, result.stderr
    return repo


def template(name: str) -> bytes:
    return resources.files("moss_files.templates").joinpath("cstack", name).read_bytes()


# --------------------------------------------------------------------------- init


def test_init_creates_only_what_is_missing(repo: Path) -> None:
    (repo / ".cstack").mkdir()
    (repo / ".cstack" / "PLAN.md").write_text("# my own plan\n", encoding="utf-8")
    dry = ok("init", "--dry-run", cwd=repo)
    assert dry["dry_run"] is True and not (repo / ".cstack" / "CURRENT.md").exists()
    done = ok("init", cwd=repo)
    created = {a["path"] for a in done["actions"] if a["kind"] == "create"}
    assert {".cstack/CURRENT.md", ".cstack/MEMORY.md"} <= created and ".cstack/PLAN.md" not in created
    assert (repo / ".cstack" / "PLAN.md").read_text(encoding="utf-8") == "# my own plan\n"
    assert (repo / ".cstack" / "CURRENT.md").read_bytes() == template("CURRENT.md")
    assert (repo / ".cstack" / "MEMORY.md").read_bytes() == template("MEMORY.md")
    again = ok("init", cwd=repo)
    assert {a["kind"] for a in again["actions"]} == {"exists"}


# --------------------------------------------------------------------------- a day's work


def test_a_day_of_work_through_the_cli(project: Path) -> None:
    added = ok("add", "P1: Build the API #backend", "--id", "api", cwd=project)
    assert added["task"]["number"] == 1 and added["task"]["modified"] == "2026-01-21"
    ok("add", "P2: Write the docs #docs", "--depends", "api", cwd=project)
    ok("add", "Flaky upload test #bug", "--section", "backlog-bugs", cwd=project)

    listing = ok("plan", cwd=project)
    assert [(t["number"], t["title"], t["section"]) for t in listing["tasks"]] == [
        (1, "Build the API", "Tasks"),
        (2, "Write the docs", "Tasks"),
        (3, "Flaky upload test", "Backlog/Bugs"),
    ]
    assert [t["title"] for t in ok("plan", "--label", "docs", cwd=project)["tasks"]] == ["Write the docs"]
    assert [t["title"] for t in ok("plan", "--priority", "P1", cwd=project)["tasks"]] == ["Build the API"]
    assert [t["title"] for t in ok("ready", cwd=project)["tasks"]] == ["Build the API"]
    assert [b["task"]["title"] for b in ok("blocked", cwd=project)["tasks"]] == ["Write the docs"]

    started = ok("start", "1", cwd=project)
    assert started["task"]["status"] == "in_progress" and started["current_updated"] is True
    status = ok("status", cwd=project)
    assert (status["task"], status["status"], status["state"], status["started"]) == ("Build the API", "WIP", "working", "2026-01-21")
    assert status["last_modified"] and status["progress"] == {"total": 0, "completed": 0}

    graph = ok("graph", cwd=project)
    assert graph["roots"] == ["#2"] and graph["edges"] == [{"from": "#2", "to": "api"}]
    assert graph["text"] == "[ ] Write the docs (#2)\n└── [>] Build the API (api)"

    done = ok("done", "--reason", "merged", cwd=project)
    assert done["task"]["section"] == "Completed" and done["moved_from"] == "Tasks"
    assert ok("status", cwd=project)["task"] is None
    assert [t["title"] for t in ok("ready", cwd=project)["tasks"]] == ["Write the docs"]

    ok("block", "write the", "--reason", "waiting for review", cwd=project)
    why = ok("blocked", cwd=project)["tasks"]
    assert [(b["task"]["title"], b["reason"]) for b in why] == [("Write the docs", "waiting for review")]
    assert ok("ready", "write", cwd=project)["task"]["status"] == "pending"

    closed = ok("close", "flaky", "--reason", "could not reproduce", cwd=project)
    assert closed["task"]["section"] == "Closed" and closed["task"]["reason"] == "could not reproduce"
    assert ok("reopen", "flaky", cwd=project)["task"]["section"] == "Tasks"

    assert ok("stats", cwd=project) == {"exists": True, "open": 2, "ready": 2, "in_progress": 0, "blocked": 0, "closed": 1, "total": 3}

    stale = ok("stale", "--days", "3", cwd=project, env={"MOSS_NOW": "2026-01-30"})
    assert {t["title"]: t["age_days"] for t in stale["stale"]} == {"Write the docs": 9, "Flaky upload test": 9}
    assert ok("stale", cwd=project)["stale"] == []

    remembered = ok("remember", "Turns out the upload test needs a temp dir", cwd=project)
    assert remembered == {"category": "gotchas", "text": "Turns out the upload test needs a temp dir", "date": "2026-01-21", "line": remembered["line"]}
    ok("remember", "Releases go out on Tuesdays", "--category", "facts", cwd=project)
    listed = ok("memory", cwd=project)
    assert [e["text"] for e in listed["gotchas"]] == ["Turns out the upload test needs a temp dir"]
    assert [e["text"] for e in listed["facts"]] == ["Releases go out on Tuesdays"]


def test_text_output_is_the_numbered_listing(project: Path) -> None:
    cstack("add", "P1: First #a", cwd=project)
    cstack("add", "Second", cwd=project)
    result = cstack("plan", cwd=project)
    assert result.returncode == 0
    assert result.stdout == "## Tasks\n  1. - [ ] P1: First #a | modified: 2026-01-21\n  2. - [ ] Second | modified: 2026-01-21\n"


# --------------------------------------------------------------------------- errors


def test_addressing_errors(project: Path) -> None:
    ok("add", "Fix login", cwd=project)
    ok("add", "Fix logout", cwd=project)
    ambiguous = fails(2, "AMBIGUOUS_ADDRESSING", "start", "fix", cwd=project)
    assert [c["title"] for c in ambiguous["details"]["candidates"]] == ["Fix login", "Fix logout"]
    fails(3, "NOT_FOUND", "start", "deploy", cwd=project)
    fails(3, "NOT_FOUND", "start", "7", cwd=project)
    ok("start", "fix login", cwd=project)
    fails(5, "INVALID_TRANSITION", "start", "1", cwd=project)
    fails(3, "NOT_FOUND", "add", "Child", "--depends", "missing-id", cwd=project)


def test_starting_a_second_task_warns_that_done_will_need_a_name(project: Path) -> None:
    """Issue 27 item 12: a second `cstack start` while one task is in progress says so (a note
    on stderr, `also_in_progress` in the JSON), before a bare `cstack done` fails."""
    ok("add", "Fix login", "--id", "login", cwd=project)
    ok("add", "Fix logout", "--id", "logout", cwd=project)
    first = cstack("start", "login", "--json", cwd=project)
    assert first.returncode == 0 and json.loads(first.stdout)["also_in_progress"] == []
    assert "also in progress" not in first.stderr
    second = cstack("start", "logout", "--json", cwd=project)
    assert second.returncode == 0, second.stderr
    assert [(t["id"], t["title"]) for t in json.loads(second.stdout)["also_in_progress"]] == [("login", "Fix login")]
    assert "warning:" in second.stderr and "login" in second.stderr and "cstack done" in second.stderr
    fails(2, "AMBIGUOUS_ADDRESSING", "done", cwd=project)
    assert ok("done", "login", cwd=project)["task"]["id"] == "login"
    assert ok("done", cwd=project)["task"]["id"] == "logout"


def test_usage_errors(project: Path) -> None:
    ok("add", "Task", cwd=project)
    assert cstack("close", "Task", cwd=project).returncode == 2  # --reason is required
    fails(2, "INVALID_REQUEST", "block", "Task", "--reason", "", cwd=project)
    fails(2, "INVALID_REQUEST", "plan", "--status", "sleeping", cwd=project)
    fails(2, "INVALID_REQUEST", "add", "P9: Too much", cwd=project)
    fails(2, "INVALID_REQUEST", "add", "Other", cwd=project, env={"MOSS_NOW": "yesterday"})


def test_a_hand_written_priority_past_p3_is_a_warning_with_file_and_line(project: Path) -> None:
    """`cstack add "P9: …"` is refused; a P7 written by hand was read silently. Now it is
    reported, as the reader reports its other doubts, and the file is still read."""
    plan_file = project / ".cstack" / "PLAN.md"
    plan_file.write_text("## Tasks\n\n- [ ] P7: Hand-written\n- [ ] P2: Fine\n", encoding="utf-8")
    listed = cstack("plan", "--json", cwd=project)
    assert listed.returncode == 0, listed.stderr
    result = json.loads(listed.stdout)
    assert [task["title"] for task in result["tasks"]] == ["Hand-written", "Fine"]
    assert [w for w in result["warnings"] if "P7" in w] == ["line 3: priority P7 is not one of P0 to P3"]
    assert f"warning: {plan_file}: line 3: priority P7 is not one of P0 to P3" in listed.stderr.splitlines()
    assert not any("P2" in w for w in result["warnings"])


def test_a_dependency_cycle_is_exit_4_with_the_cycle(project: Path) -> None:
    plan_file = project / ".cstack" / "PLAN.md"
    plan_file.write_text("## Tasks\n\n- [ ] a (id: a, depends: b)\n- [ ] b (id: b, depends: a)\n", encoding="utf-8")
    error = fails(4, "DEPENDENCY_CYCLE", "graph", cwd=project)
    assert error["details"]["cycle"] in (["a", "b", "a"], ["b", "a", "b"])
    assert error["path"].endswith("PLAN.md") and error["line"] in (3, 4)


def test_malformed_current_md_is_reported_and_nothing_changes(project: Path) -> None:
    ok("add", "Task", cwd=project)
    current_file = project / ".cstack" / "CURRENT.md"
    current_file.write_bytes(b"---\nstatus: working\n\ttask: tabbed\n---\n# Current\n")
    before = {p.name: p.read_bytes() for p in (project / ".cstack").glob("*.md")}
    error = fails(4, "FRONTMATTER_SYNTAX", "status", cwd=project)
    assert error["path"].endswith("CURRENT.md") and error["line"] == 3
    fails(4, "FRONTMATTER_SYNTAX", "start", "Task", cwd=project)
    assert {p.name: p.read_bytes() for p in (project / ".cstack").glob("*.md")} == before


def test_no_workspace_and_no_stack(tmp_path: Path) -> None:
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    fails(6, "WORKSPACE_NOT_FOUND", "plan", cwd=lonely)
    (lonely / ".moss").mkdir()  # a workspace, but without .cstack/
    fails(3, "NOT_FOUND", "plan", cwd=lonely)
    assert ok("stats", cwd=lonely) == {"exists": False, "open": 0, "ready": 0, "in_progress": 0, "blocked": 0, "closed": 0, "total": 0}


def test_root_option_and_environment(project: Path, tmp_path: Path) -> None:
    ok("add", "Remote task", cwd=project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert ok("plan", "--root", str(project), cwd=elsewhere)["tasks"][0]["title"] == "Remote task"
    assert ok("plan", cwd=elsewhere, env={"MOSS_ROOT": str(project)})["tasks"][0]["title"] == "Remote task"
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    assert ok("stats", cwd=nested)["total"] == 1


def test_every_command_has_help_and_json() -> None:
    group = typer.main.get_command(cli.app)
    assert set(group.commands) >= {
        "init", "status", "plan", "add", "start", "done", "close", "block", "reopen", "ready", "blocked", "graph", "stale", "remember", "stats",
    }  # fmt: skip
    for name, command in group.commands.items():
        assert command.help and command.help.strip(), name
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert {"--json", "--root"} <= options, name
    result = run_cli("cstack", "--help")
    assert result.returncode == 0 and "remember" in result.stdout


# --------------------------------------------------------------------------- two processes


def test_two_cli_processes_on_one_plan_lose_nothing(project: Path) -> None:
    exe = BIN / "cstack"

    def script(prefix: str) -> str:
        steps = [f'"{exe}" add "{prefix} {n} #{prefix}" --id {prefix}-{n}' for n in range(10)]
        steps += [f'"{exe}" start {prefix}-{n}' for n in range(0, 10, 2)]
        steps += [f'"{exe}" done {prefix}-{n} --reason ok' for n in range(0, 10, 2)]
        return "set -e\n" + "\n".join(f"{step} > /dev/null 2>&1" for step in steps)

    env = {**os.environ, **NOW}
    runs = [subprocess.Popen(["bash", "-c", script(prefix)], cwd=project, env=env) for prefix in ("left", "right")]
    for run in runs:
        assert run.wait(timeout=120) == 0
    listing = ok("plan", cwd=project)["tasks"]
    assert len(listing) == 20
    by_id = {t["id"]: t for t in listing}
    for prefix in ("left", "right"):
        for n in range(10):
            task = by_id[f"{prefix}-{n}"]
            assert (task["status"], task["section"]) == (("done", "Completed") if n % 2 == 0 else ("pending", "Tasks"))

"""`moss agent init`, `sessions` and `logs` from the command line, and start-up: no other
command loads the Anthropic SDK (nor the MCP SDK), and reading sessions loads neither."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import FakeMessagesAPI, agent_env, anyio_workers_finish, make_workspace, text, write_settings  # noqa: F401
from conftest import run_cli

from moss_files.agent import service, settings
from moss_files.foundation.context import Context

HEAVY = {"anthropic", "mcp", "pydantic", "httpx2", "uvicorn", "starlette"}


def loaded_by(argv: list[str], cwd: Path) -> set[str]:
    """Top-level packages a `moss` command imports (run in a fresh interpreter)."""
    probe = (
        "import sys\n"
        f"sys.argv = {['moss', *argv]!r}\n"
        "from moss_files.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted({m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=120)
    line = next(line for line in done.stdout.splitlines() if line.startswith("LOADED"))
    return set(json.loads(line.split(" ", 1)[1].replace("'", '"')))


def test_other_commands_start_without_the_agent_sdks(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    for argv in (["version"], ["fetch", "nothing"], ["agent", "sessions"], ["agent", "--help"]):
        assert not loaded_by(argv, root) & HEAVY, argv


def test_init_writes_every_setting_once(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    made = run_cli("moss", "agent", "init", "--json", cwd=root)
    assert made.returncode == 0 and json.loads(made.stdout) == {"path": ".moss/agent.toml", "created": True}
    path = root / ".moss" / "agent.toml"
    assert path.read_text() == settings.AGENT_TOML_TEMPLATE
    path.write_text(path.read_text().replace('model = "claude-sonnet-5-5"', 'model = "claude-haiku-4-5"'))
    kept = run_cli("moss", "agent", "init", cwd=root)
    assert kept.returncode == 0 and "kept" in kept.stdout and "claude-haiku-4-5" in path.read_text()
    assert service.load_settings(Context(root)).llm.model == "claude-haiku-4-5"
    nowhere = run_cli("moss", "agent", "init", cwd=tmp_path, env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert nowhere.returncode == 6 and "WORKSPACE_NOT_FOUND" in nowhere.stderr


@pytest.mark.usefixtures("anyio_workers_finish")
def test_sessions_and_logs_from_the_command_line(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    write_settings(root, "", moss=False, demo=False)
    empty = run_cli("moss", "agent", "sessions", cwd=root)
    assert empty.returncode == 0 and "no sessions yet" in empty.stdout
    with FakeMessagesAPI([text("An answer."), text("Another.")]) as fake:
        first = service.run(Context(root), "A question", environ=agent_env(fake))
        service.run(Context(root), "Another question", session=first["session"]["id"], environ=agent_env(fake))
    sid, rid = first["session"]["id"], first["run"]["id"]
    listed = json.loads(run_cli("moss", "agent", "sessions", "--json", cwd=root).stdout)
    assert listed["count"] == 1 and listed["sessions"][0]["runs"] == 2 and set(listed) == {"sessions", "count", "total"}
    assert "A question" in run_cli("moss", "agent", "sessions", cwd=root).stdout
    shown = run_cli("moss", "agent", "logs", "--run", rid[:14], cwd=root)
    assert shown.returncode == 0 and "run.started" in shown.stdout and "An answer." in shown.stdout and "Another" not in shown.stdout
    as_json = json.loads(run_cli("moss", "agent", "logs", "--session", sid[:14], "--kind", "run", "--json", cwd=root).stdout)
    assert [e["kind"] for e in as_json["events"]] == ["run.started", "run.succeeded", "run.started", "run.succeeded"]
    assert set(as_json) == {"session", "run", "events", "count", "problems"}
    with (root / ".moss" / "agent" / "sessions" / f"{sid}.jsonl").open("a") as log:
        log.write('{"id": "torn')
    torn = run_cli("moss", "agent", "logs", "--session", sid, cwd=root)
    assert torn.returncode == 0 and "warning[EVENT_LINE_INVALID]" in torn.stderr
    both = run_cli("moss", "agent", "logs", "--session", sid, "--run", rid, cwd=root)
    assert both.returncode == 2
    missing = run_cli("moss", "agent", "logs", "--session", "ZZZ", "--json", cwd=root)
    assert missing.returncode == 3 and json.loads(missing.stderr)["error"]["code"] == "NOT_FOUND"


def test_a_command_refuses_the_spec_s_storage_path_and_makes_no_folder(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / ".moss").mkdir(parents=True)
    (root / ".moss/agent.toml").write_text('[storage]\npath = "./agent.db"\n')
    result = run_cli("moss", "agent", "sessions", "--json", cwd=root)
    assert result.returncode == 4, result.stdout
    assert json.loads(result.stderr)["error"]["code"] == "SCHEMA_ERROR"
    assert not (root / "agent.db").exists()

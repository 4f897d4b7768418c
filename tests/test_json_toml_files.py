"""JSON and TOML files that nest too deeply, or JSON that holds a key twice, through the commands
that read them: a code naming the file (and line), never INTERNAL with a RecursionError, and
never a value silently chosen among two."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from migrate_support import make_workspace

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "formats" / "v1"
DEEP_TOML = "deep = " + "[" * 3000 + "]" * 3000 + "\n"
DEEP_JSON = "[" * 5000 + "]" * 5000


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A git repository holding a file of every kind."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    return root


def failed(done: subprocess.CompletedProcess[str], exit_code: int) -> dict[str, Any]:
    assert done.returncode == exit_code, (done.returncode, done.stdout, done.stderr)
    error: dict[str, Any] = json.loads(done.stderr)["error"]
    return error


@pytest.mark.parametrize(
    ("relpath", "argv"),
    [(".moss/config.toml", ["moss", "list"]), (".moss/agent.toml", ["moss", "agent", "sessions"]), (".needlecast/sleeves.toml", ["needlecast", "sleeves"])],
    ids=["config", "agent-policy", "sleeves"],
)
def test_toml_nested_too_deeply_is_toml_too_deep(workspace: Path, relpath: str, argv: list[str]) -> None:
    with (workspace / relpath).open("a") as handle:
        handle.write(DEEP_TOML)
    error = failed(run_cli(*argv, "--json", cwd=workspace), 4)
    assert error["code"] == "TOML_TOO_DEEP" and error["path"].endswith(relpath)
    if relpath == ".moss/config.toml":
        report = json.loads(run_cli("moss", "upgrade", "--dry-run", "--json", cwd=workspace).stdout)
        assert {(p["path"], p["code"]) for p in report["problems"]} == {(relpath, "TOML_TOO_DEEP")}


@pytest.mark.parametrize(
    ("relpath", "argv"),
    [
        (".moss/board/activity.jsonl", ["moss", "board", "log"]),
        (".moss/board/chat/general.jsonl", ["moss", "board", "chat", "read", "general"]),
    ],
    ids=["activity", "chat"],
)
def test_a_log_line_nested_too_deeply_is_a_problem_with_its_line(workspace: Path, relpath: str, argv: list[str]) -> None:
    path = workspace / relpath
    lines = path.read_bytes().count(b"\n")
    with path.open("a") as handle:
        handle.write(DEEP_JSON + "\n")
    done = run_cli(*argv, "--json", cwd=workspace)
    assert done.returncode == 0, done.stderr
    problems = {(p["code"], p["path"], p["line"]) for p in json.loads(done.stdout)["problems"]}
    assert ("JSON_TOO_DEEP", relpath, lines + 1) in problems


def test_a_json_option_nested_too_deeply_is_a_bad_request(workspace: Path) -> None:
    done = run_cli("moss", "fetch-many", "--items", DEEP_JSON, "--json", cwd=workspace)
    assert failed(done, 2)["code"] == "INVALID_REQUEST"


def test_a_read_log_line_nested_too_deeply_does_not_break_the_inbox(workspace: Path) -> None:
    with (workspace / ".needlecast/read.log").open("a") as handle:
        handle.write(DEEP_JSON + "\n")  # read marks that are not understood are ignored, as documented
    assert run_cli("needlecast", "inbox", "--json", cwd=workspace).returncode == 0


# --------------------------------------------------------------------------- duplicate keys


BEADS = (
    '{"id":"bd-a1","title":"One","status":"open","priority":1,"issue_type":"task","created_at":"2026-04-01T09:00:00Z","updated_at":"2026-04-01T09:00:00Z"}\n'
    '{"id":"bd-a2","title":"Two","status":"open","priority":1,"title":"Three","issue_type":"task","created_at":"2026-04-01T09:00:00Z","updated_at":"2026-04-01T09:00:00Z"}\n'
)


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_a_key_twice_in_a_migration_source_stops_it_with_the_line(tmp_path: Path, dry_run: bool) -> None:
    root = make_workspace(tmp_path / "project")
    (root / ".beads").mkdir()
    (root / ".beads/issues.jsonl").write_text(BEADS)
    error = failed(run_cli("moss", "migrate", "beads", *(["--dry-run"] if dry_run else []), "--json", cwd=root), 4)
    assert (error["code"], error["path"], error["line"], error["details"]["key"]) == ("JSON_DUPLICATE_KEY", ".beads/issues.jsonl", 2, "title")
    assert not list((root / ".moss/board").glob("tasks/*.md"))  # nothing of the source was written


def test_a_key_twice_in_a_moe_json_file_stops_it_with_the_line(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    moe = root / ".moe"
    (moe / "epics").mkdir(parents=True)
    (moe / "project.json").write_text('{\n  "id": "proj-1",\n  "name": "Shop",\n  "name": "Store"\n}\n')
    error = failed(run_cli("moss", "migrate", "moe", "--dry-run", "--json", cwd=root), 4)
    assert (error["code"], error["path"], error["line"]) == ("JSON_DUPLICATE_KEY", ".moe/project.json", 4)


def test_a_key_twice_in_a_bundle_stops_the_import_with_the_line(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    assert run_cli("moss", "insight", "add", "Caches lie about mtimes", cwd=root).returncode == 0
    (root / ".moss/exports").mkdir()
    bundle = root / ".moss/exports/bundle.json"
    assert run_cli("moss", "insight", "export", "--path", str(bundle), cwd=root).returncode == 0
    lines = bundle.read_text().splitlines(keepends=True)
    at = next(number for number, line in enumerate(lines) if line.lstrip().startswith('"summary"'))
    lines.insert(at + 1, lines[at].replace("Caches lie", "Caches never lie"))
    bundle.write_text("".join(lines))
    before = sorted((root / ".moss/insights").iterdir())
    error = failed(run_cli("moss", "insight", "import", str(bundle), "--with-duplicates", "--json", cwd=root), 4)
    assert (error["code"], error["line"], error["details"]["key"]) == ("JSON_DUPLICATE_KEY", at + 2, "summary")
    assert sorted((root / ".moss/insights").iterdir()) == before  # nothing imported

"""`moss migrate` and `migrate.sh` as real processes: help, reports, JSON, exit statuses."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, run_cli
from migrate_support import FIXTURES, copy_fixture, make_workspace, snapshot

SCRIPT = Path(__file__).resolve().parents[2] / "migrate.sh"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "project")


def _script(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120)


def test_moss_migrate_lists_its_sources() -> None:
    result = run_cli("moss", "migrate", "--help")
    assert result.returncode == 0
    for source in ("moss", "moe", "loopflow", "backlog", "beads", "cortical", "needlecast"):
        assert source in result.stdout


def test_a_run_prints_its_report_and_json_is_the_use_cases_shape(root: Path) -> None:
    copy_fixture("beads", root)
    dry = run_cli("moss", "migrate", "beads", "--dry-run", "--json", cwd=root)
    assert dry.returncode == 0, dry.stderr
    data = json.loads(dry.stdout)
    assert (data["source"], data["dry_run"], data["created"], data["skipped"], data["report"]) == ("beads", True, 11, 1, None)
    assert data["ledger"]["items"] == {"in": 11, "out": 10, "skipped": 1, "added": 1, "lost": []}
    text = run_cli("moss", "migrate", "beads", cwd=root)
    assert text.returncode == 0
    assert "created      task      bd-e1.1  (.beads/issues.jsonl:3) -> .moss/board/tasks/" in text.stdout
    assert "ledger: 11 in = 10 out + 1 skipped (0 with a loss); 1 made here to hold the others" in text.stdout
    assert any(line.split()[:5] == ["priority", "8", "2", "0", "1"] for line in text.stdout.splitlines())
    assert text.stdout.rstrip().splitlines()[-1].startswith("report: .moss/migrations/")
    again = run_cli("moss", "migrate", "beads", cwd=root)
    assert "nothing to do" in again.stdout


def test_a_malformed_source_exits_4_with_the_error_body(root: Path) -> None:
    (root / ".beads").mkdir()
    (root / ".beads/issues.jsonl").write_text('{"id": "bd-1", "title": "ok"}\nnot json\n')
    before = snapshot(root)
    result = run_cli("moss", "migrate", "beads", "--json", cwd=root)
    assert result.returncode == 4
    error = json.loads(result.stderr)["error"]
    assert (error["code"], error["path"], error["line"]) == ("SOURCE_INVALID", ".beads/issues.jsonl", 2)
    assert snapshot(root) == before


def test_strict_exits_4_with_what_it_would_drop(root: Path) -> None:
    (root / ".beads").mkdir()
    (root / ".beads/issues.jsonl").write_text('{"id": "bd-1", "title": "ok", "priority": 2}\n{"title": "no id", "priority": 2}\n')
    before = snapshot(root)
    result = run_cli("moss", "migrate", "beads", "--strict", "--json", cwd=root)
    assert result.returncode == 4
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "MIGRATION_WOULD_DROP" and error["details"]["lost"][0]["from"] == ".beads/issues.jsonl:2"
    assert snapshot(root) == before
    text = run_cli("moss", "migrate", "beads", "--dry-run", cwd=root)
    assert text.returncode == 0 and "lost: task line 2 (.beads/issues.jsonl:2): the record has no id" in text.stdout


def test_a_missing_source_exits_3_and_a_bad_option_2(root: Path) -> None:
    assert run_cli("moss", "migrate", "moe", cwd=root).returncode == 3
    assert run_cli("moss", "migrate", "loopflow", "--tasks", "jira", cwd=root).returncode == 2


def test_migrate_sh_runs_the_installed_moss(root: Path, tmp_path: Path) -> None:
    copy_fixture("moe", root)
    env = {"PATH": f"{BIN}:{os.environ['PATH']}"}
    result = _script("moe", "--dry-run", cwd=root, env=env)
    assert result.returncode == 0, result.stderr
    assert "would create" in result.stdout
    elsewhere = _script("--project-dir", str(root), "moe", "--json", cwd=tmp_path, env=env)
    assert elsewhere.returncode == 0 and json.loads(elsewhere.stdout)["created"] == 14


def test_migrate_sh_upgrade_runs_moss_upgrade(root: Path) -> None:
    env = {"PATH": f"{BIN}:{os.environ['PATH']}"}
    plan = root / ".cstack" / "PLAN.md"
    plan.parent.mkdir(exist_ok=True)
    plan.write_text("# Plan\n\n## Tasks\n")  # shared with cortical-stack: never gains a marker
    insight = root / ".moss" / "insights" / "INS-20260101-aaaaaaaa.md"
    insight.parent.mkdir(parents=True)
    old = "---\nid: INS-20260101-aaaaaaaa\ntype: technical\nstatus: unprocessed\n---\nOld.\n"
    insight.write_text(old)  # as the release before format markers wrote it
    dry = _script("upgrade", "--dry-run", "--json", cwd=root, env=env)
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["kinds"]["insight"]["upgraded"] == {"1 -> 2": 1} and report["kinds"]["plan"]["upgraded"] == {} and insight.read_text() == old
    done = _script("upgrade", "--kind", "insight", "--kind", "plan", cwd=root, env=env)
    assert done.returncode == 0, done.stderr
    assert insight.read_text() == old.replace("unprocessed\n", "unprocessed\nmoss_format: 2\n") and plan.read_text() == "# Plan\n\n## Tasks\n"


def test_migrate_sh_all_runs_each_source_the_project_holds(root: Path) -> None:
    copy_fixture("beads", root)
    copy_fixture("cortical", root)
    result = _script("--all", "--dry-run", cwd=root, env={"PATH": f"{BIN}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    assert "migrating beads" in result.stderr and "migrating cortical" in result.stderr and "migrating moe" not in result.stderr


def test_migrate_sh_all_strict_fails_on_the_first_source_that_would_drop(root: Path) -> None:
    copy_fixture("moe", root)
    copy_fixture("beads", root)
    copy_fixture("cortical", root)
    env = {"PATH": f"{BIN}:{os.environ['PATH']}"}
    clean = _script("--all", "--strict", "--dry-run", cwd=root, env=env)
    assert clean.returncode == 0, clean.stderr
    assert "migrating moe" in clean.stderr and "migrating cortical" in clean.stderr
    (root / ".moe/tasks/task-99999999.json").write_text("{not json")
    refused = _script("--all", "--strict", "--dry-run", cwd=root, env=env)
    assert refused.returncode == 4 and "MIGRATION_WOULD_DROP" in refused.stderr and "migrating beads" not in refused.stderr
    assert _script("--all", "--dry-run", cwd=root, env=env).returncode == 0  # without --strict the rest comes over
    assert _script("--all", "--move", cwd=root, env=env).returncode == 2


def test_migrate_sh_help_usage_and_missing_moss(root: Path, tmp_path: Path) -> None:
    help_text = _script("--help", cwd=root, env={"PATH": f"{BIN}:{os.environ['PATH']}"})
    assert help_text.returncode == 0 and "Exit status" in help_text.stdout
    assert _script(cwd=root, env={"PATH": f"{BIN}:{os.environ['PATH']}"}).returncode == 2
    unknown = _script("jira", cwd=root, env={"PATH": f"{BIN}:{os.environ['PATH']}"})
    assert unknown.returncode == 2 and "unknown source" in unknown.stderr
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    missing = _script("moe", cwd=root, env={"PATH": f"{bare_path}:/usr/bin:/bin", "HOME": str(empty_home), "MOSS_HOME": str(empty_home / "none")})
    assert missing.returncode == 3 and "install.sh" in missing.stderr


def test_migrate_sh_is_executable() -> None:
    assert SCRIPT.stat().st_mode & stat.S_IXUSR
    assert FIXTURES.is_dir()

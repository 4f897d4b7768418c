"""`moss ui`: starts the project's daemon when none runs (and reuses a running one), hands the
page's URL to the default browser (BROWSER), keeps stdout for its answer, and stops the daemon
with --stop."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

from conftest import run_cli
from web_support import make_workspace, request

from moss_files.mcp import daemon


def test_ui_starts_reuses_opens_and_stops_the_daemon(repo: Path, tmp_path: Path) -> None:
    make_workspace(repo)
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "record-url"
    browser.write_text(f'#!/bin/sh\necho "browser says hello"\nprintf "%s" "$1" > "{opened}"\n')
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    try:
        first = run_cli("moss", "ui", "--no-browser", "--json", cwd=repo)
        assert first.returncode == 0, first.stderr
        started = json.loads(first.stdout)
        assert started["started"] is True and started["opened"] is False and started["url"].endswith("/") and started["mcp"].endswith("/mcp")
        assert "moss ui --stop" in first.stderr
        record = daemon.running_record(repo)
        assert record is not None and record["pid"] == started["pid"] and record["web"] == started["url"]
        assert request(started["url"], "/board").status == 200

        again = run_cli("moss", "ui", "--json", cwd=repo / ".moss", env={"BROWSER": str(browser)})
        assert again.returncode == 0, again.stderr
        reused = json.loads(again.stdout)  # stdout holds the answer only; what the browser said went to stderr
        assert reused["started"] is False and reused["pid"] == started["pid"] and reused["opened"] is True
        assert opened.read_text() == started["url"] and "browser says hello" in again.stderr

        plain = run_cli("moss", "ui", "--no-browser", cwd=repo)
        assert plain.returncode == 0 and plain.stdout.strip() == started["url"]

        stopped = run_cli("moss", "ui", "--stop", "--json", cwd=repo)
        assert stopped.returncode == 0 and json.loads(stopped.stdout) == {"stopped": True, "pid": started["pid"]}
        assert daemon.running_record(repo) is None and not daemon.record_path(repo).exists()
        none = run_cli("moss", "ui", "--stop", "--json", cwd=repo)
        assert none.returncode == 0 and json.loads(none.stdout) == {"stopped": False, "pid": None}
        log = (repo / ".moss" / "run" / "ui-serve.log").read_text()
        assert "pages on http://127.0.0.1:" in log and "stopped" in log and "Traceback" not in log
    finally:
        left = daemon.running_record(repo)
        if left is not None:
            os.kill(int(left["pid"]), signal.SIGTERM)


def test_ui_outside_a_workspace_and_on_a_taken_port(tmp_path: Path) -> None:
    nowhere = run_cli("moss", "ui", "--no-browser", "--json", cwd=tmp_path, env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert nowhere.returncode == 6 and json.loads(nowhere.stderr)["error"]["code"] == "WORKSPACE_NOT_FOUND"
    import socket

    root = make_workspace(tmp_path / "project")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = run_cli("moss", "ui", "--no-browser", "--port", str(taken.getsockname()[1]), cwd=root)
        as_json = run_cli("moss", "ui", "--no-browser", "--json", "--port", str(taken.getsockname()[1]), cwd=root)
    assert busy.returncode == 5 and "error[CONFLICT]" in busy.stderr and "in use" in busy.stderr
    error = json.loads(as_json.stderr)["error"]
    assert as_json.returncode == 5 and error["code"] == "CONFLICT" and "--port" in error["hint"]
    assert daemon.running_record(root) is None

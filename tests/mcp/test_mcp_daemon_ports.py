"""The daemons' default ports and LOG_LEVEL, as real processes: `moss serve --http HOST` takes
its default port or the next free one and records which; `moss ui` starts it so; a bad
LOG_LEVEL stops a daemon before it starts; warn hides info lines, debug adds a line per
request; a registered project is marked opened by `moss ui`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import BIN, run_cli
from helpers import wait_for

from moss_files.mcp import daemon

pytestmark = pytest.mark.slow


@contextmanager
def busy_port() -> Iterator[int]:
    """A port some other program listens on, for a daemon's default."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@contextmanager
def serving(root: Path, *args: str, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], dict[str, object]]]:
    process = subprocess.Popen(
        [str(BIN / "moss"), "serve", "--no-index-watch", *args, "--root", str(root)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def ready() -> dict[str, object] | None:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            record = daemon.running_record(root)
            return record if record is not None and record.get("pid") == process.pid else None

        yield process, wait_for(ready, timeout=60, message="the daemon's record")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)


def test_serve_takes_the_default_port_or_the_next_free_one_and_records_which(repo: Path) -> None:
    assert run_cli("moss", "init", str(repo)).returncode == 0
    with busy_port() as taken, serving(repo, "--http", "127.0.0.1", env={"MOSS_DEFAULT_PORT": str(taken), "LOG_LEVEL": "debug"}) as (process, record):
        assert record["requestedPort"] == taken and taken < int(record["port"]) < taken + 50  # type: ignore[call-overload]
        assert record["url"] == f"http://127.0.0.1:{record['port']}/mcp"
        with urllib.request.urlopen(f"http://127.0.0.1:{record['port']}/", timeout=10) as page:
            assert page.status == 200
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=60)
    assert f"port {taken} is in use; took {record['port']}" in err
    assert 'http: 127.0.0.1 "GET /" 200' in err  # debug: a line per request


def test_warn_hides_the_info_lines_and_an_explicit_port_is_not_scanned(repo: Path) -> None:
    assert run_cli("moss", "init", str(repo)).returncode == 0
    with serving(repo, "--http", "127.0.0.1:0", env={"LOG_LEVEL": "warn"}) as (process, record):
        assert record["requestedPort"] == 0
        with urllib.request.urlopen(f"http://127.0.0.1:{record['port']}/", timeout=10):
            pass
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=60)
    assert "MCP on" not in err and "http: 127.0.0.1" not in err and "stopped" not in err
    with busy_port() as taken:
        busy = run_cli("moss", "serve", "--http", f"127.0.0.1:{taken}", "--root", str(repo))
    assert busy.returncode == 5 and "error[CONFLICT]" in busy.stderr


def test_a_bad_log_level_or_default_port_stops_a_daemon_before_it_starts(repo: Path) -> None:
    assert run_cli("moss", "init", str(repo)).returncode == 0
    for env in ({"LOG_LEVEL": "loud"}, {"MOSS_DEFAULT_PORT": "eighty"}):
        result = run_cli("moss", "serve", "--http", "127.0.0.1", "--root", str(repo), env=env)
        assert result.returncode == 2 and "error[INVALID_REQUEST]" in result.stderr, (env, result.stderr)
    assert daemon.read_record(repo) is None
    assert run_cli("moss", "serve", "--http", "8765", "--root", str(repo)).returncode == 2  # a port alone is no host


def test_ui_starts_the_daemon_on_the_default_port_and_marks_the_project_opened(repo: Path) -> None:
    assert run_cli("moss", "init", str(repo)).returncode == 0
    assert run_cli("moss", "projects", "add", str(repo), "--name", "web").returncode == 0
    registry = Path(os.environ["HOME"]) / ".moss" / "projects.json"
    entry = json.loads(registry.read_text())[0]
    registry.write_text(json.dumps([{**entry, "lastOpenedAt": "2020-01-01T00:00:00Z", "pinned": True}], indent=2))
    with busy_port() as taken:
        opened = run_cli("moss", "ui", "--no-browser", "--json", "--project", "web", env={"MOSS_DEFAULT_PORT": str(taken)})
        try:
            assert opened.returncode == 0, opened.stderr
            url = json.loads(opened.stdout)["url"]
            port = int(url.rsplit(":", 1)[1].strip("/"))
            assert taken < port < taken + 50
            record = daemon.read_record(repo)
            assert record is not None and record["requestedPort"] == taken
        finally:
            assert run_cli("moss", "ui", "--stop", "--project", "web").returncode == 0
    (marked,) = json.loads(registry.read_text())
    assert marked["lastOpenedAt"] > "2020-01-01T00:00:00Z" and marked["pinned"] is True  # a key we do not know is kept

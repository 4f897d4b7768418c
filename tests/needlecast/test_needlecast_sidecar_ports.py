"""`needlecast sidecar` without --port: its default port, or the next free one, written in
sidecar.json; with --port (or NEEDLECAST_PORT), that port or a CONFLICT; LOG_LEVEL chooses its
lines."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, run_cli
from helpers import wait_for

from needlecast import mailbox
from needlecast.sidecar import read_runtime

pytestmark = pytest.mark.slow


def test_the_default_port_gives_way_to_the_next_free_one_and_the_record_says_which(tmp_path: Path) -> None:
    root, other = tmp_path / "sleeve", tmp_path / "other"
    mailbox.init_mailbox(root)
    mailbox.init_mailbox(other)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        process = subprocess.Popen(
            [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--no-index-watch"],
            env={**os.environ, "NEEDLECAST_DEFAULT_PORT": str(taken), "LOG_LEVEL": "error"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:

            def running() -> dict[str, object] | None:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                record = read_runtime(root)
                return record if record is not None and record.get("pid") == process.pid else None

            record = wait_for(running, timeout=60, message="sidecar.json")
            assert record["requested_port"] == taken and taken < int(record["port"]) < taken + 50  # type: ignore[call-overload]
            assert record["url"] == f"http://127.0.0.1:{record['port']}"
            explicit = run_cli("needlecast", "sidecar", "--root", str(other), "--json", env={"NEEDLECAST_PORT": str(taken)})
            assert explicit.returncode == 5, explicit.stderr  # a port asked for is that port: no scan
        finally:
            process.send_signal(signal.SIGTERM)
            _out, err = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "ready" not in err and "in use" not in err  # LOG_LEVEL=error: no info line


def test_a_bad_log_level_stops_the_sidecar_before_it_starts(tmp_path: Path) -> None:
    root = tmp_path / "sleeve"
    mailbox.init_mailbox(root)
    result = run_cli("needlecast", "sidecar", "--root", str(root), "--port", "0", env={"LOG_LEVEL": "chatty"})
    assert result.returncode == 2 and "LOG_LEVEL" in result.stderr
    assert read_runtime(root) is None

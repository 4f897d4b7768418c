"""The sidecar's /status against the seed's sleeve status: the agent CLI it runs (dhf) and the
credentials present (auth), from a real sidecar process with fake agent CLIs on its PATH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from conftest import BIN
from helpers import wait_for

from needlecast import mailbox
from needlecast.sidecar import read_runtime
from needlecast.status import DHF_CANDIDATES, parse_version_output


def fake_cli(folder: Path, name: str, output: str, status: int = 0) -> None:
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\nexit {status}\n")
    script.chmod(0o755)


def status_of(workspace: Path, env: dict[str, str]) -> dict[str, Any]:
    process = subprocess.Popen(
        [str(BIN / "needlecast"), "sidecar", "--root", str(workspace), "--port", "0"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        runtime = wait_for(lambda: (r := read_runtime(workspace)) and r.get("pid") == process.pid and r, timeout=30, message="sidecar")
        with urllib.request.urlopen(runtime["url"] + "/status", timeout=30) as response:
            body: dict[str, Any] = json.loads(response.read())
            return body
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_dhf_is_the_first_agent_cli_that_answers_and_auth_says_which_credentials_exist(tmp_path: Path) -> None:
    workspace = tmp_path / "sleeve"
    mailbox.init_mailbox(workspace)
    fakes = tmp_path / "bin"
    fake_cli(fakes, "claude", "broken", status=1)  # installed but failing: skipped, as the seed's sidecar does
    fake_cli(fakes, "codex", "codex-cli 0.42.0\nsecond line")
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "oauth_creds.json").write_text("{}")
    path = f"{fakes}{os.pathsep}/usr/bin{os.pathsep}/bin"
    body = status_of(workspace, {"PATH": path, "HOME": str(home)})
    assert body["dhf"] == {"name": "codex", "version": "codex-cli 0.42.0"}
    assert body["auth"] == {"claude": False, "gemini": True}
    assert body["workspace"]["path"] == str(workspace.resolve()) and body["process"]["pid"] > 0

    fake_cli(fakes, "claude", "2.1.20 (Claude Code)")
    key = "sk-ant-not-a-real-key-" + "x" * 20
    body = status_of(workspace, {"PATH": path, "HOME": str(home), "ANTHROPIC_API_KEY": key})
    assert body["dhf"] == {"name": "claude", "version": "2.1.20 (Claude Code)"}
    assert body["auth"] == {"claude": True, "gemini": True}
    assert key not in json.dumps(body)  # presence only, never the credential


def test_no_agent_cli_means_unknown(tmp_path: Path) -> None:
    workspace = tmp_path / "sleeve"
    mailbox.init_mailbox(workspace)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    body = status_of(workspace, {"PATH": str(empty), "HOME": str(tmp_path)})
    assert body["dhf"] == {"name": "unknown", "version": None}
    assert body["auth"] == {"claude": False, "gemini": False}


def test_version_output_and_the_seed_order() -> None:
    assert parse_version_output("\n  2.1.20 (Claude Code)  \nmore\n") == "2.1.20 (Claude Code)"
    assert parse_version_output("") == ""
    assert DHF_CANDIDATES == ("claude", "gemini", "codex", "aider", "opencode")

"""A second, independent client: the MCP Inspector CLI (TypeScript SDK, handshake protocol era),
pinned in package.json and installed by test.sh with `npm ci`, against the real `moss serve`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN
from mcp_support import CAPSULE, make_workspace

pytestmark = pytest.mark.slow  # the MCP Inspector, a Node.js process

ROOT = Path(__file__).resolve().parent.parent.parent
INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture(scope="module")
def inspector() -> Path:
    if not INSPECTOR.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed, so the pinned MCP Inspector cannot be installed")
        pytest.fail("node_modules/ lacks the MCP Inspector: run ./test.sh (it runs `npm ci`) or `npm ci` in the checkout")
    return INSPECTOR


def inspect(inspector: Path, cwd: Path, *args: str) -> tuple[int, Any, str]:
    """Run one Inspector CLI call against `moss serve` in `cwd`: (exit code, stdout JSON, stderr)."""
    done = subprocess.run(
        [str(inspector), "--cli", str(BIN / "moss"), "serve", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def tool_args(**values: Any) -> list[str]:
    # The Inspector reads each value as JSON, so strings are sent JSON-encoded.
    return [item for key, value in values.items() for item in ("--tool-arg", f"{key}={json.dumps(value)}")]


def test_inspector_lists_calls_and_sees_errors(inspector: Path, tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")

    code, listed, err = inspect(inspector, root, "--method", "tools/list", "--strict")
    assert code == 0, err
    assert len(listed["tools"]) == 17
    store = next(tool for tool in listed["tools"] if tool["name"] == "moss.store")
    assert store["annotations"]["destructiveHint"] is True and store["inputSchema"]["required"] == ["capsule_text"]

    code, stored, err = inspect(
        inspector, root, "--method", "tools/call", "--tool-name", "moss.store", *tool_args(capsule_text=CAPSULE, name="auth", tags=["auth"])
    )
    assert code == 0, err
    assert stored["isError"] is False and set(stored["structuredContent"]) == {"id", "task_link", "fetch_key"}

    code, fetched, err = inspect(inspector, root, "--method", "tools/call", "--tool-name", "moss.fetch", *tool_args(name="auth"))
    assert code == 0, err
    assert fetched["structuredContent"]["capsule_text"] == CAPSULE
    assert json.loads(fetched["content"][0]["text"]) == fetched["structuredContent"]

    code, scanned, err = inspect(inspector, root, "--method", "tools/call", "--tool-name", "loop_scan", *tool_args(query="login flow"))
    assert code == 0, err
    assert scanned["structuredContent"]["matches"][0]["id"] == stored["structuredContent"]["id"]

    code, missing, err = inspect(inspector, root, "--method", "tools/call", "--tool-name", "moss.fetch", *tool_args(name="nope"))
    assert code == 5 and "tool_is_error" in err
    assert missing["isError"] is True and missing["structuredContent"]["error"]["code"] == "NOT_FOUND"
    assert missing["content"][0]["text"].startswith("NOT_FOUND: ")

    code, bad, err = inspect(inspector, root, "--method", "tools/call", "--tool-name", "moss.fetch", *tool_args(id=7))
    assert code == 5 and bad["structuredContent"]["error"]["code"] == "INVALID_REQUEST"

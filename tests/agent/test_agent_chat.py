"""`moss agent chat` as a real process on a pipe: each line a run, Ctrl-C (SIGINT) cancels the
run in progress and not the session, `quit` ends it; `--handoff` writes the trail at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_support import FakeMessagesAPI, agent_env, hang, make_workspace, read_events, text, tool, write_settings
from conftest import BIN, run_cli
from helpers import wait_for


def count(root: Path, kind: str, code: str | None = None) -> int:
    return sum(1 for e in read_events(root) if e["kind"] == kind and (code is None or e["data"].get("code") == code))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "project")
    write_settings(root, "", moss=False, demo=False)
    return root


def test_ctrl_c_cancels_the_run_not_the_session(ws: Path) -> None:
    with FakeMessagesAPI([text("The first answer."), hang("Thinking about"), text("The third answer.")]) as fake:
        process = subprocess.Popen(
            [str(BIN / "moss"), "agent", "chat"],
            cwd=ws,
            env={**os.environ, **agent_env(fake)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdin is not None
        try:
            process.stdin.write("first question\n")
            process.stdin.flush()
            wait_for(lambda: count(ws, "run.succeeded") == 1, timeout=60, message="the first run")
            process.stdin.write("second question\n")
            process.stdin.flush()
            fake.wait_requests(2)
            process.send_signal(signal.SIGINT)
            wait_for(lambda: count(ws, "run.failed", "RUN_CANCELLED") == 1, timeout=60, message="the cancelled run")
            process.stdin.write("third question\n")
            process.stdin.flush()
            wait_for(lambda: count(ws, "run.succeeded") == 2, timeout=60, message="the third run")
            process.stdin.write("quit\n")
            process.stdin.flush()
            out, err = process.communicate(timeout=60)
        finally:
            fake.release.set()
            if process.poll() is None:
                process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "The first answer." in out and "The third answer." in out
    assert "run cancelled" in err
    events = read_events(ws)
    assert [e["kind"] for e in events if e["kind"] in ("run.succeeded", "run.failed", "session.ended")] == [
        "run.succeeded",
        "run.failed",
        "run.succeeded",
        "session.ended",
    ]
    third = [e for e in events if e["kind"] == "run.started"][2]["run"]
    sent = [b.get("text") for m in fake.requests[2]["body"]["messages"] for b in m["content"] if b["type"] == "text"]
    assert sent[0] == "first question" and sent[-1] == "third question"  # the cancelled run left no half-step behind
    assert third in {e["run"] for e in events}
    listed = json.loads(run_cli("moss", "agent", "sessions", "--json", cwd=ws).stdout)["sessions"][0]
    assert listed["status"] == "ended" and listed["runs"] == 3


def test_chat_from_a_pipe_with_a_handoff_at_the_end(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    write_settings(root, "", demo=False)
    capsule = "## Objective\nA.\n\n## Current status\nB.\n\n## Decisions\n- C\n\n## Next actions\n- D\n\n## Key locations\n- E\n\n## Open questions\n- F\n"
    script: list[Any] = [text("Hello."), tool("moss__moss_store", {"name": "handoff", "capsule_text": capsule}), text("Stored the handoff.")]
    with FakeMessagesAPI(script) as fake:
        done = run_cli("moss", "agent", "chat", "--json", "--handoff", cwd=root, env=agent_env(fake), input="hello\n\nexit\n")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [run["origin"] for run in result["runs"]] == ["user", "handoff"] and result["session"]["status"] == "ended"
    assert all(run["status"] == "succeeded" for run in result["runs"])
    fetched = json.loads(run_cli("moss", "fetch", "handoff", "--json", cwd=root).stdout)
    assert fetched["capsule_text"] == capsule
    empty = run_cli("moss", "agent", "chat", "--json", cwd=root, env=agent_env(None), input="")
    assert empty.returncode == 0 and json.loads(empty.stdout) == {"session": None, "runs": []}

"""Two processes running on one session: the runs are serial (the second waits for the first's
lock, with a deadline), their events never interleave, and a run that will not wait is refused
with SESSION_BUSY while another holds the session."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_support import FakeMessagesAPI, agent_env, anyio_workers_finish, make_workspace, read_events, text, tool, write_settings  # noqa: F401
from conftest import BIN, run_cli

from moss_files.agent import service
from moss_files.foundation.context import Context

pytestmark = [pytest.mark.usefixtures("anyio_workers_finish"), pytest.mark.slow]  # processes racing for one session


def test_two_processes_on_one_session_run_one_after_the_other(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "project")
    write_settings(root, '[policy]\nallow_tools = ["demo.echo"]\n', moss=False)
    go = threading.Event()

    def held(reply: Any) -> Any:
        def answer(_body: dict[str, Any]) -> Any:
            go.wait(60)  # the first run keeps the session until the test has seen the others wait
            return reply

        return answer

    with FakeMessagesAPI([text("ready")]) as fake:
        session = service.run(Context(root), "set up", environ=agent_env(fake))["session"]["id"]
        fake.add(held(tool("demo__echo", {"text": "first"})), text("first done"), tool("demo__echo", {"text": "second"}), text("second done"))
        env = {**os.environ, **agent_env(fake)}
        command = [str(BIN / "moss"), "agent", "run", "--session", session, "--wait", "60", "--json"]
        first = subprocess.Popen([*command, "one"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            fake.wait_requests(2)  # the first run holds the session and waits for its model
            second = subprocess.Popen([*command, "two"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                busy = run_cli("moss", "agent", "run", "--session", session, "three", "--json", cwd=root, env=agent_env(fake))
                assert busy.returncode == 5 and json.loads(busy.stderr.splitlines()[-1])["error"]["code"] == "SESSION_BUSY"
                assert len(fake.requests) == 2  # neither the waiting run nor the refused one reached the model
                go.set()
                out_first, err_first = first.communicate(timeout=120)
                out_second, err_second = second.communicate(timeout=120)
            finally:
                if second.poll() is None:
                    second.kill()
                second.communicate()
        finally:
            go.set()
            if first.poll() is None:
                first.kill()
            first.communicate()
    assert first.returncode == 0, err_first
    assert second.returncode == 0, err_second
    runs = [json.loads(out_first)["run"], json.loads(out_second)["run"]]
    assert [r["answer"] for r in runs] == ["first done", "second done"]
    order = [event["run"] for event in read_events(root) if event["run"] in {runs[0]["id"], runs[1]["id"]}]
    boundary = order.index(runs[1]["id"])
    assert set(order[:boundary]) == {runs[0]["id"]} and set(order[boundary:]) == {runs[1]["id"]}  # no interleaving
    kinds = [event["kind"] for event in read_events(root) if event["run"] == runs[1]["id"]]
    assert kinds[0] == "run.started" and kinds[-1] == "run.succeeded"
    listed = service.sessions(Context(root))["sessions"][0]
    assert listed["runs"] == 3 and listed["status"] == "idle"

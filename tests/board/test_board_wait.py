"""wait_for_task and chat_wait: answers at once when something is there, sleeps on file events
otherwise, and is woken by what another process writes (a new task, a release, a chat line,
a human's comment); the polling fallback; Moe's eligibility rules (mirrors the claim, never
claims); cancellation by a newer wait; through the CLI and a real MCP client."""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from board_support import Calls, board, moss
from conftest import BIN, run_cli
from helpers import wait_for
from mcp import Client
from mcp_support import anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)

from moss_files.board import claims, conversation, editing, teams, waiting
from moss_files.board.usecase import waits
from moss_files.board.watch import BoardWatcher
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import MossError
from moss_files.mcp.server import build_server


def agent(root: Path, **changes: Any) -> Context:
    return Context(root, actor=AGENT, **changes)


def epic_of(root: Path) -> str:
    return editing.create_epic(Context(root), title="Checkout")["epic"]["id"]


def start_waiter(root: Path, *args: str) -> subprocess.Popen[str]:
    """`moss task wait …` as a real process; returns once it says it is waiting."""
    proc = subprocess.Popen(
        [str(BIN / "moss"), *args, "--json", "--root", str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    line = ""
    while "waiting" not in line:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, remaining))
        if not ready:
            proc.kill()
            raise AssertionError(f"the waiter never said it was waiting: {proc.communicate()}")
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"the waiter ended before waiting: {proc.communicate()}")
    return proc


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out)


# --------------------------------------------------------------------------- answers without waiting


def test_a_claimable_task_answers_at_once_and_is_not_claimed(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    task = editing.create_task(Context(root), epic_id=epic_of(root), title="Card form", status="WORKING")["task"]["id"]
    answer = waiting.wait_for_task(agent(root), statuses=["WORKING"], worker_id="dev", timeout_ms=30_000)
    assert answer["hasNext"] is True and answer["task"]["id"] == task
    assert answer["nextAction"]["tool"] == "moe.claim_next_task" and answer["waitedMs"] < 30_000
    assert moss(root, "task", "show", task)["assignedWorkerId"] is None


def test_the_wait_mirrors_the_claim(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    human = Context(root)
    epic = epic_of(root)
    first = editing.create_task(human, epic_id=epic, title="First", status="WORKING")["task"]["id"]
    editing.create_task(human, epic_id=epic, title="Second", status="WORKING")
    claims.claim_next_task(agent(root), statuses=["WORKING"], worker_id="dev")
    # The solo-worker rule bars Second for dev2 (dev works this epic): the claim would refuse,
    # so the wait does not wake (no wake-claim-refuse spin), and times out.
    assert waiting.wait_for_task(agent(root), statuses=["WORKING"], worker_id="dev2", timeout_ms=0)["timedOut"] is True
    # A teammate of dev may share the column: for it the wait answers.
    team = teams.create_team(human, name="Pair", role="worker")["team"]["id"]
    teams.join_team(human, team_id=team, worker_id="dev")
    teams.join_team(human, team_id=team, worker_id="dev2")
    assert waiting.wait_for_task(agent(root), team_id=team, worker_id="dev2", timeout_ms=0)["hasNext"] is True
    # A worker holding a task in a wanted column gets its own task back.
    own = waiting.wait_for_task(agent(root), statuses=["WORKING"], worker_id="dev", timeout_ms=0)
    assert (own["task"]["id"], own["ownTask"]) == (first, True)


def test_statuses_and_the_worker_are_checked(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    for kwargs, code in (
        ({"statuses": ["WORKING"]}, "INVALID_REQUEST"),
        ({"statuses": ["BACKLOG"], "worker_id": "w"}, "INVALID_REQUEST"),
        ({"statuses": [], "worker_id": "w"}, "INVALID_REQUEST"),
        ({"statuses": ["WORKING"], "worker_id": "w", "epic_id": "EPIC-nope"}, "NOT_FOUND"),
        ({"worker_id": "w", "team_id": "TEAM-nope"}, "NOT_FOUND"),
        ({"statuses": ["WORKING"], "worker_id": "w", "timeout_ms": -1}, "INVALID_REQUEST"),
    ):
        with pytest.raises(MossError) as caught:
            waiting.wait_for_task(agent(root), **kwargs)
        assert caught.value.code == code, kwargs


# --------------------------------------------------------------------------- woken by other processes


def test_a_task_created_by_another_process_wakes_the_cli_waiter(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    epic = epic_of(root)
    proc = start_waiter(root, "task", "wait", "-w", "dev", "--timeout", "60")
    made = run_cli("moss", "task", "new", "Card form", "-e", epic, "-s", "working", cwd=root)
    assert made.returncode == 0, made.stderr
    answer = finish(proc)
    assert answer["hasNext"] is True and answer["task"]["id"] == made.stdout.strip()
    assert answer["watcher"] == "inotify" and answer["waitedMs"] < 60_000


def test_a_release_by_another_process_wakes_the_waiter(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    task = editing.create_task(Context(root), epic_id=epic_of(root), title="Card form", status="WORKING")["task"]["id"]
    claims.claim_next_task(agent(root), statuses=["WORKING"], worker_id="dev")
    proc = start_waiter(root, "task", "wait", "-w", "dev2", "--timeout", "60")
    released = run_cli("moss", "task", "release", task, "-w", "dev", "--remains", "the expiry check", cwd=root)
    assert released.returncode == 0, released.stderr
    answer = finish(proc)
    assert answer["task"]["id"] == task


def test_a_mention_and_a_human_comment_wake_the_waiter(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    task = editing.create_task(Context(root), epic_id=epic_of(root), title="Card form", status="WORKING")["task"]["id"]
    claims.claim_next_task(agent(root), statuses=["WORKING"], worker_id="dev")
    proc = start_waiter(root, "task", "wait", "-w", "dev", "-s", "REVIEW", "--timeout", "60")
    assert run_cli("moss", "board", "chat", "send", "workers", "@dev the tokens are published", cwd=root).returncode == 0
    woke = finish(proc)
    assert woke["hasChatMessage"] is True and woke["chatMessage"]["channel"] == "workers" and woke["nextAction"]["tool"] == "moe.chat_read"
    proc = start_waiter(root, "task", "wait", "-w", "dev", "-s", "REVIEW", "--timeout", "60")
    assert run_cli("moss", "task", "comment", task, "Please use the new tokens", cwd=root).returncode == 0
    woke = finish(proc)
    assert (woke["hasPendingQuestion"], woke["taskId"]) == (True, task)


def test_messages_for_others_do_not_wake_the_waiter(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    conversation.chat_send(agent(root), channel="general", content="@dev2 over to you", worker_id="dev")
    answer = waiting.wait_for_task(agent(root), statuses=["WORKING"], worker_id="dev3", timeout_ms=1000)
    assert answer["timedOut"] is True and answer["nextAction"]["tool"] == "moe.wait_for_task"


def test_polling_wakes_the_waiter_where_events_do_not_arrive(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    epic = epic_of(root)
    proc = start_waiter(root, "task", "wait", "-w", "dev", "--timeout", "60", "--poll")
    made = run_cli("moss", "task", "new", "Card form", "-e", epic, "-s", "working", cwd=root)
    answer = finish(proc)
    assert (answer["task"]["id"], answer["watcher"]) == (made.stdout.strip(), "polling")


def test_the_watcher_sees_writes_in_new_folders_and_ignores_temporary_files(tmp_path: Path) -> None:
    folder = tmp_path / "board"
    watcher = BoardWatcher(folder).start()
    try:
        assert watcher.mode == "inotify" and not list(folder.glob(".wait-probe*"))
        (folder / ".TASK-1.md.tmp-1-ab").write_text("half")  # a write not yet renamed into place
        assert not watcher.changed.wait(0.3)
        (folder / "tasks").mkdir()
        watcher.changed.clear()
        (folder / "tasks" / "TASK-1.md").write_text("---\ntitle: t\n---\n")
        assert watcher.changed.wait(10)
    finally:
        watcher.stop()


def test_a_lease_running_out_wakes_the_waiter_without_a_file_event(tmp_path: Path) -> None:
    root = board(tmp_path / "p", lease_ms=1500)
    task = editing.create_task(Context(root), epic_id=epic_of(root), title="Card form", status="WORKING")["task"]["id"]
    claims.claim_next_task(agent(root), statuses=["WORKING"], worker_id="dev")
    answer = waiting.wait_for_task(agent(root), statuses=["WORKING"], worker_id="dev2", timeout_ms=30_000)
    assert answer["task"]["id"] == task and 500 <= answer["waitedMs"] < 30_000
    shown = moss(root, "task", "show", task)
    assert shown["assignedWorkerId"] is None and shown["status"] == "WORKING"


# --------------------------------------------------------------------------- cancellation, chat_wait


def test_a_newer_wait_of_the_same_worker_cancels_the_older(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    ctx = agent(root)
    found: list[dict[str, Any]] = []
    first = threading.Thread(target=lambda: found.append(waiting.wait_for_task(ctx, statuses=["WORKING"], worker_id="dev", timeout_ms=60_000)))
    first.start()
    try:
        wait_for(lambda: "dev" in waits(ctx).waiting("task"), timeout=30, message="the first wait to register")
        second = waiting.wait_for_task(ctx, statuses=["WORKING"], worker_id="dev", timeout_ms=0)
    finally:
        first.join(timeout=30)
    assert found == [{"hasNext": False, "cancelled": True, "waitedMs": found[0]["waitedMs"], "watcher": found[0]["watcher"]}]
    assert second["timedOut"] is True


def test_chat_wait_drains_the_backlog_then_waits_for_more(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    teams.register_worker(Context(root), worker_id="dev", role="worker")
    conversation.chat_send(Context(root), channel="general", content="first")
    conversation.chat_send(Context(root), channel="workers", content="second")
    conversation.chat_send(agent(root), channel="general", content="mine", worker_id="dev")
    burst = waiting.chat_wait(agent(root), worker_id="dev", timeout_ms=1000)
    assert [m["content"] for m in burst["messages"]] == ["first", "second"] and burst["hasMore"] is False
    assert waiting.chat_wait(agent(root), worker_id="dev", timeout_ms=0)["timedOut"] is True  # read up to date
    proc = start_waiter(root, "board", "chat", "wait", "-w", "dev", "--timeout", "60")
    assert run_cli("moss", "board", "chat", "send", "general", "third", cwd=root).returncode == 0
    assert [m["content"] for m in finish(proc)["messages"]] == ["third"]


# --------------------------------------------------------------------------- through a real MCP client


@pytest.mark.anyio
async def test_wait_for_task_through_the_client_woken_by_another_process(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    epic = epic_of(root)
    waiting_now = threading.Event()
    server_ctx = Context(root, home=root.parent / "home", actor=AGENT, notify=lambda text: waiting_now.set())
    async with Client(build_server(server_ctx, ("moe",)), mode="auto", raise_exceptions=True) as client:
        calls = Calls(client)
        answers: list[dict[str, Any]] = []

        async def wait() -> None:
            answers.append(await calls.ok("moe.wait_for_task", statuses=["WORKING"], workerId="dev", timeoutMs=60_000))

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            assert await anyio.to_thread.run_sync(waiting_now.wait, 30)
            made = await anyio.to_thread.run_sync(lambda: run_cli("moss", "task", "new", "Card form", "-e", epic, "-s", "working", cwd=root))
        assert answers[0]["hasNext"] is True and answers[0]["task"]["id"] == made.stdout.strip()
        claimed = await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev")
        assert claimed["task"]["id"] == made.stdout.strip()
        timed_out = await calls.ok("moe.wait_for_task", statuses=["REVIEW"], workerId="qa", timeoutMs=0)
        assert timed_out["timedOut"] is True
        burst = await calls.ok("moe.chat_wait", workerId="dev", timeoutMs=0)
        assert burst["hasMessage"] is False


@pytest.mark.anyio
async def test_a_call_abandoned_by_its_client_stops_waiting(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    server_ctx = Context(root, home=root.parent / "home", actor=AGENT)
    async with Client(build_server(server_ctx, ("moe",)), mode="auto") as client:
        with anyio.move_on_after(1.0):
            await client.call_tool("moe.wait_for_task", {"statuses": ["WORKING"], "workerId": "dev", "timeoutMs": 600_000})
        left = time.monotonic()
    # Closing the client ended the server: its worker thread saw the cancellation within about
    # a second, rather than sleeping out the ten minutes it was given.
    assert time.monotonic() - left < 10
    assert waits(server_ctx).waiting("task") == {}

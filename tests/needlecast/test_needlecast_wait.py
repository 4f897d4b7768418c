"""Mail that wakes an agent: `needlecast wait` (and `needlecast.wait` over MCP) block until a
message reaches the inbox, in either layout, by inotify or by polling; and the inbox reports
its unread count."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from mcp import Client
from mcp_support import anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)

import needlecast
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import InvalidRequest, NotFound
from moss_files.mcp.server import build_server
from needlecast import mailbox
from needlecast.message import Message

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


def message(ident: str, body: str = "hello\n", sender: str = "bob") -> Message:
    return Message(id=ident, sender=sender, to=("alice",), thread=None, type="message", time="2026-11-21T09:00:00Z", body=body)


def deliver(root: Path, *messages: Message) -> None:
    """Put messages into a sleeve's inbox as the router does."""
    mailbox.deliver(mailbox.Mailbox(root), list(messages), NOW)


@pytest.fixture(params=["v1", "v2"])
def alice(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    root = tmp_path / "alice"
    root.mkdir()
    mailbox.init_mailbox(root, request.param)
    return root


class Waiter:
    """`wait_for_mail` on a thread; `watching` is set once the inbox is watched and read."""

    def __init__(self, root: Path, **kwargs: Any) -> None:
        self.watching = threading.Event()
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        ctx = Context(root, notify=lambda _text: self.watching.set())
        self.thread = threading.Thread(target=self._run, args=(ctx, kwargs))
        self.thread.start()

    def _run(self, ctx: Context, kwargs: dict[str, Any]) -> None:
        try:
            self.result = needlecast.wait_for_mail(ctx, **kwargs)
        except BaseException as exc:  # handed to the test thread
            self.error = exc
        finally:
            self.watching.set()

    def join(self) -> dict[str, Any]:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


@pytest.mark.parametrize("poll", [False, True], ids=["watch", "poll"])
def test_a_delivery_wakes_the_wait_with_that_message(alice: Path, poll: bool) -> None:
    deliver(alice, message("m-old"))
    waiter = Waiter(alice, timeout=20, poll=poll)
    assert waiter.watching.wait(10)
    deliver(alice, message("m-new", "Two lines.\n\nSecond.\n"))
    result = waiter.join()
    assert result["timed_out"] is False and result["waited_ms"] < 20_000
    assert [row["key"] for row in result["messages"]] == ["m-new"]  # the one already there is not new
    assert result["messages"][0]["message"]["body"] == "Two lines.\n\nSecond.\n" and result["messages"][0]["read"] is False
    assert result["watch"] == ("polling" if poll else "inotify")


def test_the_wait_ends_at_its_timeout_with_nothing(alice: Path) -> None:
    deliver(alice, message("m-old"))
    result = needlecast.wait_for_mail(Context(alice), timeout=0.3)
    assert result["timed_out"] is True and result["messages"] == [] and result["waited_ms"] >= 300
    assert needlecast.wait_for_mail(Context(alice), timeout=0)["timed_out"] is True  # 0 looks once


def test_files_that_are_no_message_do_not_end_the_wait(alice: Path) -> None:
    waiter = Waiter(alice, timeout=1.0)
    assert waiter.watching.wait(10)
    # A read mark, a lock and a half-written temporary file: none is a new message.
    mailbox.mark_read(mailbox.Mailbox(alice), "bob", "m-x", NOW)
    (alice / ".needlecast" / ".inbox.md.lock").write_text("")
    if (alice / ".needlecast" / "inbox").is_dir():
        (alice / ".needlecast" / "inbox" / ".m.md.tmp-1-abcd").write_text("partial")
    result = waiter.join()
    assert result["timed_out"] is True and result["messages"] == []


def test_unread_answers_at_once_with_what_is_waiting(alice: Path) -> None:
    deliver(alice, message("m-1"), message("m-2"))
    needlecast.read_message(Context(alice), key="m-1")
    result = needlecast.wait_for_mail(Context(alice), timeout=20, unread=True)
    assert result["timed_out"] is False and [row["key"] for row in result["messages"]] == ["m-2"]
    assert result["waited_ms"] < 10_000


def test_bad_timeouts_and_a_missing_mailbox_are_refused(tmp_path: Path, alice: Path) -> None:
    for timeout in (-1, 3601):
        with pytest.raises(InvalidRequest):
            needlecast.wait_for_mail(Context(alice), timeout=timeout)
    (tmp_path / "bare").mkdir()
    with pytest.raises(NotFound):
        needlecast.wait_for_mail(Context(tmp_path / "bare"), timeout=1)


def test_the_inbox_counts_its_unread_messages_whatever_the_filters(alice: Path) -> None:
    deliver(alice, message("m-1"), message("m-2", sender="carol"), message("m-3"))
    needlecast.read_message(Context(alice), key="m-3")
    listing = needlecast.list_inbox(Context(alice), sender="carol")
    assert [row["key"] for row in listing["messages"]] == ["m-2"] and listing["unread"] == 2


def test_the_command_prints_the_message_and_says_when_it_timed_out(tmp_path: Path) -> None:
    root = tmp_path / "alice"
    root.mkdir()
    assert run_cli("needlecast", "init", cwd=root).returncode == 0
    process = subprocess.Popen(
        [str(BIN / "needlecast"), "wait", "--timeout", "30"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # the waiter says so once it watches
        assert line.startswith("waiting (inotify)"), line
        deliver(root, message("m-cli", "Please review.\n"))
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 0, err
    assert out.splitlines() == ["id: m-cli", "from: bob", "to: alice", "type: message", "time: 2026-11-21T09:00:00Z", "", "Please review."]

    quiet = run_cli("needlecast", "wait", "--timeout", "0.2", "--json", cwd=root)
    assert quiet.returncode == 0 and json.loads(quiet.stdout)["timed_out"] is True
    text = run_cli("needlecast", "wait", "--timeout", "0.2", cwd=root)
    assert text.returncode == 0 and text.stdout == "" and "no new message" in text.stderr
    refused = run_cli("needlecast", "wait", "--timeout", "-1", "--json", cwd=root)
    assert refused.returncode == 2 and json.loads(refused.stderr.strip().splitlines()[-1])["error"]["code"] == "INVALID_REQUEST"
    inbox = json.loads(run_cli("needlecast", "inbox", "--json", cwd=root).stdout)
    assert inbox["unread"] == 1


@pytest.mark.anyio
async def test_needlecast_wait_over_mcp_is_a_bounded_long_poll(alice: Path) -> None:
    server = build_server(Context(alice, actor=AGENT), ("needlecast",))
    deliver(alice, message("m-old"))
    answered = threading.Event()

    def keep_delivering() -> None:
        # The tool waits on one of the SDK's worker threads, out of the test's sight: deliver
        # a new message now and then until it answers; the first one after its look wakes it.
        count = 0
        while not answered.wait(0.3):
            count += 1
            deliver(alice, message(f"m-mcp-{count}"))

    async with Client(server, mode="legacy") as client:
        quiet = await client.call_tool("needlecast.wait", {"timeout": 0.2})
        assert not quiet.is_error and quiet.structured_content["timed_out"] is True
        sender = threading.Thread(target=keep_delivering)
        sender.start()
        try:
            woken = await client.call_tool("needlecast.wait", {"timeout": 20})
        finally:
            answered.set()
            sender.join()
        keys = [row["key"] for row in woken.structured_content["messages"]]
        assert woken.structured_content["timed_out"] is False and keys and all(key.startswith("m-mcp-") for key in keys)
        too_long = await client.call_tool("needlecast.wait", {"timeout": 301})
        assert too_long.is_error and too_long.structured_content["error"]["code"] == "INVALID_REQUEST"
        inbox = await client.call_tool("needlecast.inbox", {})
        assert inbox.structured_content["unread"] == len(inbox.structured_content["messages"]) >= 2


def test_a_glance_at_the_inbox_counts_as_the_full_listing_does(alice: Path) -> None:
    deliver(alice, message("m-1"), message("m-2", sender="carol_x"), message("id with spaces/and:colons", sender="dave"))
    if (alice / ".needlecast" / "inbox").is_dir():  # a file a person dropped in, named otherwise
        (alice / ".needlecast" / "inbox" / "handmade.md").write_text("---\nid: m-hand\nfrom: erin\nto: alice\n---\nHi.\n")
    needlecast.read_message(Context(alice), key="m-1")
    needlecast.read_message(Context(alice), key="id with spaces/and:colons")
    glance = needlecast.inbox_glance(alice, newest=5)
    full = needlecast.list_inbox(Context(alice))
    assert glance["total"] == len(full["messages"]) and glance["unread"] == full["unread"]
    assert sorted(row["key"] for row in glance["newest_unread"]) == sorted(row["key"] for row in full["messages"] if not row["read"])
    assert len(set(glance["keys"])) == glance["total"]
    empty = needlecast.inbox_glance(alice.parent / "nobody")
    assert (empty["total"], empty["unread"], empty["newest_unread"]) == (0, 0, [])

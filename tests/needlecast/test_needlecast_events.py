"""The sidecar's inbox event stream (`GET /inbox/events`): a real sidecar process, real sockets,
real deliveries; one `message` event per new message, the unread ones first when asked, a
bounded number of streams, and streams that end when the client leaves or the sidecar stops."""

from __future__ import annotations

import json
import signal
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from http.client import HTTPConnection, HTTPResponse
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from test_needlecast_sidecar import Running, start

from needlecast import mailbox
from needlecast.httpapi import MAX_STREAMS
from needlecast.message import Message

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


def message(ident: str, body: str = "hello\n") -> Message:
    return Message(id=ident, sender="bob", to=("alice",), thread=None, type="message", time="2026-11-21T09:00:00Z", body=body)


@pytest.fixture
def alice(tmp_path: Path) -> Iterator[Running]:
    root = tmp_path / "alice"
    mailbox.init_mailbox(root)
    running = start(root, "--sweep", "30")
    yield running
    if running.process.poll() is None:
        assert running.stop() == 0


class Stream:
    """One client of the event stream, reading it line by line."""

    def __init__(self, url: str, query: str = "") -> None:
        parts = urllib.parse.urlsplit(url)
        self.connection = HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=15)
        self.connection.request("GET", "/inbox/events" + query)
        self.response: HTTPResponse = self.connection.getresponse()

    def frame(self) -> list[str]:
        """The lines of the next event or comment (up to its blank line)."""
        lines: list[str] = []
        while True:
            raw = self.response.readline()  # the chunked body, decoded
            if not raw:
                return lines
            line = raw.decode().rstrip("\n")
            if line == "":
                return lines
            lines.append(line)

    def event(self) -> tuple[str, str | None, Any]:
        """The next event's name, id and data, skipping comments."""
        while True:
            lines = self.frame()
            assert lines, "the stream ended"
            if not lines[0].startswith(":"):
                fields = dict(line.split(": ", 1) for line in lines)
                return fields["event"], fields.get("id"), json.loads(fields["data"])

    def close(self) -> None:
        self.response.close()
        self.connection.close()


def test_each_new_message_is_one_event(alice: Running) -> None:
    mailbox.deliver(mailbox.Mailbox(alice.root), [message("m-old")], NOW)
    stream = Stream(alice.url)
    try:
        assert stream.response.status == 200
        assert stream.response.getheader("Content-Type") == "text/event-stream; charset=utf-8"
        assert stream.frame()[0].startswith(": watching the inbox of alice (")
        status, body = alice.post("/inbox", {"id": "m-1", "from": "bob", "to": ["alice"], "body": "First.\n\nTwo paragraphs.\n"})
        assert status == 201, body
        name, ident, data = stream.event()
        assert (name, ident) == ("message", "m-1") and data["message"]["body"] == "First.\n\nTwo paragraphs.\n" and data["read"] is False
        mailbox.deliver(mailbox.Mailbox(alice.root), [message("m-2"), message("m-3")], NOW)
        assert [stream.event()[1], stream.event()[1]] == ["m-2", "m-3"]  # m-old never comes
    finally:
        stream.close()


def test_unread_messages_come_first_when_asked(alice: Running) -> None:
    box = mailbox.Mailbox(alice.root)
    mailbox.deliver(box, [message("m-1"), message("m-2")], NOW)
    mailbox.mark_read(box, "bob", "m-1", NOW)
    stream = Stream(alice.url, "?unread=1")
    try:
        assert stream.event()[1] == "m-2"
        mailbox.deliver(box, [message("m-3")], NOW)
        assert stream.event()[1] == "m-3"
    finally:
        stream.close()


def test_streams_are_bounded_and_a_leaving_client_frees_its_place(alice: Running) -> None:
    streams = [Stream(alice.url) for _ in range(MAX_STREAMS)]
    try:
        for stream in streams:
            assert stream.frame()[0].startswith(": watching")
        busy = Stream(alice.url)
        assert busy.response.status == 503 and json.loads(busy.response.read())["error"]["code"] == "SERVER_BUSY"
        busy.close()
        assert alice.get("/health") == (200, {"status": "ok"})  # the other workers still serve
        streams.pop().close()

        def admitted() -> bool:
            again = Stream(alice.url)
            if again.response.status == 200:
                streams.append(again)
                return True
            again.close()
            return False

        wait_for(admitted, timeout=10, interval=0.2, message="the closed stream's place to be free")
    finally:
        for stream in streams:
            stream.close()


def test_the_sidecar_stops_cleanly_with_streams_open(alice: Running) -> None:
    stream = Stream(alice.url)
    assert stream.frame()[0].startswith(": watching")
    assert alice.stop(signal.SIGTERM) == 0
    stream.response.fp.raw._sock.settimeout(5)  # type: ignore[attr-defined]
    try:
        assert stream.frame() == []  # the stream ended with the sidecar
    except TimeoutError:
        pytest.fail("the stream outlived the sidecar")
    finally:
        stream.close()

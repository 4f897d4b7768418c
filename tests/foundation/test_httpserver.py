"""The one HTTP server every surface runs: deadlines for each request, slow clients that hold
nothing, keep-alive, chunked bodies and answers, refusals it answers itself, the connection cap,
disconnects, lifespan and a graceful stop. Real sockets on loopback, small limits."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.client import HTTPConnection
from typing import Any

import pytest
from helpers import wait_for

from moss_files.foundation.errors import Conflict
from moss_files.foundation.httpserver import HttpServer, Limits, Refusal, body_framing, listen, parse_head

FAST = Limits(head_seconds=0.6, body_gap_seconds=0.3, idle_seconds=0.5, write_seconds=2.0, max_head=4096, max_body=1000, max_connections=1000)


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers JSON naming what it got; `/stream` answers in three chunks without a length,
    `/fail` raises, `/wait` streams until the client leaves."""
    if scope["type"] != "http":
        return
    message = await receive()
    path = scope["path"]
    if path == "/fail":
        raise RuntimeError("a bug in the app")
    if path in ("/stream", "/wait"):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for number in range(3):
            await send({"type": "http.response.body", "body": b"part %d\n" % number, "more_body": True})
        if path == "/wait":
            assert (await receive())["type"] == "http.disconnect"
            LEFT.set()
            return
        await send({"type": "http.response.body", "body": b""})
        return
    data = json.dumps({"method": scope["method"], "path": path, "query": scope["query_string"].decode(), "body": message["body"].decode()}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]})
    await send({"type": "http.response.body", "body": data})


LEFT = threading.Event()


@contextmanager
def serving(app: Callable[..., Any] = echo, limits: Limits = FAST, **options: Any) -> Iterator[HttpServer]:
    server = HttpServer(app, listen("127.0.0.1", 0, port_hint="--port"), limits=limits, **options)
    thread = threading.Thread(target=server.run, name="http-under-test")
    thread.start()
    try:
        assert server.ready.wait(10)
        yield server
    finally:
        server.stop()
        thread.join(timeout=20)
        assert not thread.is_alive()


def connect(server: HttpServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def status_and_body(data: bytes) -> tuple[int, Any]:
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body) if body else None


def get(server: HttpServer, path: str = "/") -> tuple[int, Any]:
    connection = HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_slow_and_silent_clients_hold_nothing_and_are_refused_at_the_deadline() -> None:
    with serving() as server:
        trickling = [connect(server) for _ in range(50)]
        silent = [connect(server) for _ in range(50)]
        for sock in trickling:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        # Meanwhile every other client is served at once.
        for _ in range(10):
            assert get(server, "/probe")[0] == 200
        for sock in trickling:
            status, body = status_and_body(read_until_closed(sock))
            assert (status, body["error"]["code"], body["error"]["status"]) == (408, "REQUEST_TIMEOUT", 408)
            sock.close()
        for sock in silent:
            assert read_until_closed(sock) == b""  # never spoke: closed without an answer
            sock.close()
        wait_for(lambda: server.connections == 0, timeout=5, message="every connection closed")


def test_a_body_that_stops_coming_gets_408_and_one_cut_short_gets_400() -> None:
    with serving() as server:
        with connect(server) as sock:
            sock.sendall(b'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a":')
            status, body = status_and_body(read_until_closed(sock))
        assert (status, body["error"]["code"]) == (408, "REQUEST_TIMEOUT")
        with connect(server) as sock:
            sock.sendall(b'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a":')
            sock.shutdown(socket.SHUT_WR)
            status, body = status_and_body(read_until_closed(sock))
        assert (status, body["error"]["code"]) == (400, "INVALID_REQUEST")
        # A body trickling faster than the gap, but past its deadline, is refused too.
        with connect(server) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n")
            for _ in range(10):
                sock.sendall(b"x")
                time.sleep(0.1)  # the pace of the slow client under test, not a wait for a result
            status, body = status_and_body(read_until_closed(sock))
        assert (status, body["error"]["code"]) == (408, "REQUEST_TIMEOUT")


def test_keep_alive_pipelining_head_and_a_chunked_request_and_answer() -> None:
    with serving() as server:
        connection = HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            for number in range(3):
                connection.request("POST", "/a%20b?x=1", body=b"y" * number)
                response = connection.getresponse()
                assert response.getheader("connection") is None
                assert json.loads(response.read()) == {"method": "POST", "path": "/a b", "query": "x=1", "body": "y" * number}
            connection.request("GET", "/stream")
            response = connection.getresponse()
            assert response.getheader("transfer-encoding") == "chunked" and response.read() == b"part 0\npart 1\npart 2\n"
        finally:
            connection.close()
        with connect(server) as sock:
            sock.sendall(
                b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n4;ext=1\r\n abc\r\n0\r\nX-Trailer: 1\r\n\r\n"
                b"HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n"
                b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            answers = read_until_closed(sock).split(b"HTTP/1.1 ")[1:]
        assert [answer.split(b" ", 1)[0] for answer in answers] == [b"200", b"200", b"200"]
        assert answers[0].endswith(b'"body": "hello abc"}')
        assert answers[1].endswith(b"\r\n\r\n") and b"transfer-encoding" not in answers[1]  # HEAD: no body
        assert b"connection: close" in answers[2] and answers[2].endswith(b'"body": ""}')


def test_oversized_bodies_get_413_before_they_are_read() -> None:
    with serving() as server:
        with connect(server) as sock:  # asks first: refused before sending
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
            status, body = status_and_body(read_until_closed(sock))
        assert (status, body["error"]["code"], body["error"]["details"]) == (413, "FILE_TOO_LARGE", {"max_bytes": 1000})
        with connect(server) as sock:  # sends it all: drained, so the answer arrives, no reset
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\n" + b"x" * 500000)
            assert status_and_body(read_until_closed(sock))[0] == 413
        with connect(server) as sock:  # within the limit, it asks and is told to go on
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
            assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(b"ok")
            assert status_and_body(read_until_closed(sock))[1]["body"] == "ok"
        with connect(server) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"3e8\r\n" + b"x" * 1000 + b"\r\n1\r\nx\r\n0\r\n\r\n")
            assert status_and_body(read_until_closed(sock))[0] == 413


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd", 400),
        (b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 5000 + b"\r\n\r\n", 431),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ],
)
def test_malformed_requests_are_refused_by_the_server(request_bytes: bytes, status: int) -> None:
    with serving() as server, connect(server) as sock:
        sock.sendall(request_bytes)
        answer_status, body = status_and_body(read_until_closed(sock))
    assert answer_status == status and body["ok"] is False and body["error"]["status"] == status


def test_pure_parts_of_the_head() -> None:
    head = parse_head(b"GET /x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\nX-Two: 1\r\nx-two: 2")
    assert (head.method, head.target, head.version) == ("GET", b"/x?y=1", "1.1")
    assert head.values(b"x-two") == [b"1", b"2"]
    assert body_framing(head).length == 7
    with pytest.raises(Refusal):
        parse_head(b"GET /x HTTP/1.1\r\nBad\x00: 1")
    with pytest.raises(Refusal):
        parse_head(b"GET /x HTTP/1.1\r\nX: a\x01b")


def test_past_the_connection_limit_a_client_gets_503_at_once() -> None:
    limits = Limits(head_seconds=5, max_connections=3)
    with serving(limits=limits) as server:
        held = [connect(server) for _ in range(3)]
        wait_for(lambda: server.connections == 3, timeout=5, message="three connections held")
        with connect(server) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            data = read_until_closed(sock)
        status, body = status_and_body(data)
        assert (status, body["error"]["code"]) == (503, "SERVER_BUSY") and b"retry-after: 1" in data
        for sock in held:
            sock.close()
        wait_for(lambda: server.connections == 0, timeout=5, message="the held connections closed")
        assert get(server)[0] == 200


def test_a_streaming_app_hears_the_client_leave_and_a_failing_app_gives_500() -> None:
    said: list[str] = []
    LEFT.clear()
    with serving(log=said.append) as server:
        sock = connect(server)
        sock.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"part 2" in wait_for(lambda: (data := sock.recv(65536)) and b"part 2" in data and data, timeout=5, message="the stream")
        sock.close()
        assert LEFT.wait(5)
        with connect(server) as failing:
            failing.sendall(b"GET /fail HTTP/1.1\r\nHost: x\r\n\r\n")
            status, body = status_and_body(read_until_closed(failing))
        assert (status, body["error"]["code"]) == (500, "INTERNAL")
    assert any("a bug in the app" in line for line in said)


def test_stop_lets_busy_requests_finish_within_the_grace_and_runs_the_lifespan() -> None:
    events: list[str] = []
    release = threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                events.append(message["type"])
                if message["type"] == "lifespan.startup":
                    scope["state"]["ready"] = True
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await receive()
        assert scope["state"] == {"ready": True}
        events.append("request")
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"done"})

    server = HttpServer(app, listen("127.0.0.1", 0, port_hint="--port"), limits=FAST, lifespan=True, grace_seconds=5)
    thread = threading.Thread(target=server.run)
    thread.start()
    assert server.ready.wait(10)
    idle = connect(server)
    busy = connect(server)
    busy.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_for(lambda: "request" in events, timeout=5, message="the request running")
    server.stop()
    assert read_until_closed(idle) == b""  # an idle connection is closed at once
    release.set()
    answer = read_until_closed(busy)  # the busy one finishes, told the connection closes
    assert answer.startswith(b"HTTP/1.1 200") and b"connection: close" in answer and answer.endswith(b"done")
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert events == ["lifespan.startup", "request", "lifespan.shutdown"]
    idle.close()
    busy.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()


def test_a_port_in_use_is_a_conflict_with_the_callers_hint() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(Conflict) as caught:
            listen("127.0.0.1", port, port_hint="use --port N")
    assert caught.value.code == "CONFLICT" and caught.value.hint == "use --port N" and caught.value.details == {"host": "127.0.0.1", "port": port}

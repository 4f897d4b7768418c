"""The sidecar as a real process on loopback: watching, routing, HTTP, auth, shutdown."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from helpers import wait_for

from moss_files.foundation.httpguard import is_loopback
from needlecast import mailbox, signing
from needlecast.mailbox import Mailbox
from needlecast.message import Message
from needlecast.router import Router
from needlecast.sidecar import Sidecar, read_runtime
from needlecast.status import PartCache, build_status, parse_vmrss

NOW = datetime(2026, 1, 21, 10, 0, tzinfo=UTC)


class Running:
    """A sidecar subprocess, its address and its stderr log."""

    def __init__(self, process: subprocess.Popen[bytes], root: Path, log: Path) -> None:
        self.process = process
        self.root = root
        self.log = log
        runtime = wait_for(lambda: _runtime_of(root, process, log), timeout=20, message="sidecar ready")
        self.url: str = runtime["url"]

    def get(self, path: str, token: str | None = None) -> tuple[int, Any]:
        return http(self.url + path, token=token)

    def post(self, path: str, payload: Any, token: str | None = None) -> tuple[int, Any]:
        return http(self.url + path, "POST", json.dumps(payload).encode(), token=token)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout=20)


def _runtime_of(root: Path, process: subprocess.Popen[bytes], log: Path) -> dict[str, Any] | None:
    if process.poll() is not None:
        raise AssertionError(f"sidecar exited early with {process.returncode}: {log.read_text()}")
    runtime = read_runtime(root)
    return runtime if runtime is not None and runtime.get("pid") == process.pid else None


def http(url: str, method: str = "GET", data: bytes | None = None, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def start(root: Path, *args: str, env: dict[str, str] | None = None) -> Running:
    log = root.parent / f"sidecar-{root.name}-{len(list(root.parent.glob('sidecar-*.log')))}.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--port", "0", *args],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, **(env or {})},
        )
    return Running(process, root, log)


@pytest.fixture
def team(tmp_path: Path) -> Path:
    root = tmp_path / "team"
    for name in ("alice", "bob"):
        mailbox.init_mailbox(root / name)
    mailbox.init_mailbox(root)
    return root


@pytest.fixture
def sidecar(team: Path) -> Iterator[Running]:
    running = start(team, "--sweep", "30")
    yield running
    if running.process.poll() is None:
        assert running.stop() == 0


def send(root: Path, sender: str, to: str, body: str, ident: str) -> None:
    mailbox.append_outbox(Mailbox(root / sender), Message(id=ident, sender=sender, to=(to,), type="task", body=body), NOW)


def inbox_ids(root: Path) -> list[str | None]:
    return [e.key for e in mailbox.read_inbox(Mailbox(root)) if e.message is not None]


def test_health_and_methods(sidecar: Running) -> None:
    assert sidecar.get("/health") == (200, {"status": "ok"})
    status, body = http(sidecar.url + "/health", "DELETE")
    assert status == 405 and body["ok"] is False and body["error"]["status"] == 405
    status, body = sidecar.get("/nope")
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"


def test_routes_on_change_with_a_real_observer(sidecar: Running, team: Path) -> None:
    send(team, "alice", "bob", "watched", "w1")
    wait_for(lambda: inbox_ids(team / "bob") == ["w1"], timeout=5, message="delivery by the sidecar")
    _, status = sidecar.get("/status")
    assert status["router"]["watcher"] == "inotify" and status["router"]["enabled"] is True


def test_bursts_are_coalesced(sidecar: Running, team: Path) -> None:
    _, before = sidecar.get("/status")
    for number in range(200):
        send(team, "alice", "bob", f"burst {number}", f"b{number}")
    wait_for(lambda: len(inbox_ids(team / "bob")) == 200, timeout=20, message="burst delivered")
    _, after = sidecar.get("/status")
    assert after["router"]["passes"] - before["router"]["passes"] < 100


def test_status_shape_and_counts(sidecar: Running, team: Path) -> None:
    send(team, ".", "alice", "from the envoy", "e1")
    wait_for(lambda: inbox_ids(team / "alice") == ["e1"], timeout=5, message="delivery")
    status, body = sidecar.post("/inbox", {"from": "remote", "to": "envoy", "type": "task", "body": "hello"})
    assert status == 201
    counts = {"layout": "v1", "inbox_total": 1, "inbox_unread": 1, "outbox_pending": 0, "dead_letters": 0}
    # The counts are cached for a second, so wait for a reading taken after the pass ended.
    wait_for(lambda: sidecar.get("/status")[1]["needlecast"] == counts, timeout=5, message="counts refreshed")
    _, body = sidecar.get("/status")
    # The seed's sleeve status first, in its order, then the toolkit's own parts.
    assert list(body) == ["sleeve_name", "dhf", "workspace", "process", "auth", "needlecast", "router", "conflicts", "git_sync", "terminal", "degraded"]
    assert body["conflicts"] == [] and body["git_sync"] == {"enabled": False} and body["terminal"] == {"enabled": False}
    assert set(body["auth"]) == {"claude", "gemini"} and set(body["dhf"]) == {"name", "version"}
    assert body["sleeve_name"] == "envoy" and body["workspace"] == {"path": str(team.resolve()), "cstack": None}
    assert body["process"]["pid"] == sidecar.process.pid
    assert isinstance(body["process"]["uptime_seconds"], int) and body["process"]["memory_mb"] > 0
    assert body["router"]["sleeves"] == 2 and body["degraded"] == []


def test_status_names_the_root_as_routing_does(sidecar: Running, team: Path, tmp_path: Path) -> None:
    """At an envoy root the root is `envoy` to the router (messages to `envoy` land in its
    inbox), so /status and /outbox call it so too, not by its folder's name; a lone sleeve's
    sidecar keeps the folder's name, under which its outbox is routed."""
    assert sidecar.get("/status")[1]["sleeve_name"] == "envoy"
    assert sidecar.get("/outbox")[1]["sleeve"] == "envoy" and sidecar.get("/inbox")[1]["sleeve"] == "envoy"
    solo = tmp_path / "solo"
    mailbox.init_mailbox(solo)
    lone = start(solo)
    try:
        assert lone.get("/status")[1]["sleeve_name"] == "solo" and lone.get("/outbox")[1]["sleeve"] == "solo"
    finally:
        assert lone.stop() == 0


def test_cstack_part_reports_stats_or_degrades(team: Path) -> None:
    stack = team / ".cstack"
    stack.mkdir()
    (stack / "PLAN.md").write_bytes(b"\x00 not a plan")
    running = start(team)
    try:
        _, body = running.get("/status")
        assert body["degraded"] == ["cstack"]
        assert body["workspace"]["cstack"]["degraded"] is True
        assert body["workspace"]["cstack"]["error"]["code"] == "BINARY_FILE"
        assert body["needlecast"]["layout"] == "v1"  # the rest is still served
    finally:
        assert running.stop() == 0
    (stack / "PLAN.md").write_text("# Plan\n\n## Tasks\n\n- [ ] P1: first task\n")
    running = start(team)
    try:
        _, body = running.get("/status")
        assert body["degraded"] == []
        assert set(body["workspace"]["cstack"]) == {"exists", "open", "ready", "in_progress", "blocked", "closed", "total"}
    finally:
        assert running.stop() == 0


def test_outbox_and_inbox_endpoints(sidecar: Running, team: Path) -> None:
    message = {"id": "r1", "from": "far", "to": ["team"], "type": "question", "body": "anyone?\n", "extra": {"priority": "high"}}
    assert sidecar.post("/inbox", message)[0] == 201
    status, body = sidecar.post("/inbox", {"messages": [message]})
    assert status == 200 and body["results"] == [{"id": "r1", "status": "present"}]
    status, body = sidecar.post("/inbox", {**message, "body": "different"})
    assert body["results"][0]["status"] == "conflict"
    _, listing = sidecar.get("/inbox?unread=1")
    (row,) = listing["messages"]
    assert row["message"]["extra"] == {"priority": "high"} and row["read"] is False
    for bad in ({"to": "x"}, {"messages": []}, [1, 2]):
        status, body = sidecar.post("/inbox", bad)
        assert status == 400 and body["error"]["code"] == "MESSAGE_INVALID"
    status, body = http(sidecar.url + "/inbox", "POST", b"{not json")
    assert status == 400 and body["error"]["code"] == "INVALID_REQUEST"
    status, body = sidecar.get("/outbox")
    assert status == 200 and body["messages"] == []


def test_token_is_required_and_checked(team: Path) -> None:
    result = run_cli("needlecast", "sidecar", "--root", str(team), "--host", "0.0.0.0", "--port", "0", "--json")
    assert result.returncode == 2
    assert json.loads(result.stderr.strip().splitlines()[-1])["error"]["code"] == "TOKEN_REQUIRED"
    running = start(team, env={"NEEDLECAST_TOKEN": "s3cret"})
    try:
        assert running.get("/health")[0] == 200
        status, body = running.get("/status")
        assert status == 401 and body["error"]["code"] == "UNAUTHORIZED"
        assert running.get("/status", token="wrong")[0] == 401
        assert running.get("/status", token="s3cret")[0] == 200
        assert running.post("/inbox", {"from": "x", "to": "y", "body": "z"})[0] == 401
    finally:
        assert running.stop() == 0


def raw(url: str, method: str, path: str, headers: dict[str, str], body: bytes = b"", timeout: float = 30) -> tuple[int, dict[str, str], Any]:
    """One request with exactly the headers given (http.client adds no Host of its own here)."""
    parts = urllib.parse.urlsplit(url)
    connection = HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        connection.close()


def test_a_foreign_host_origin_or_content_type_is_refused(sidecar: Running, team: Path) -> None:
    """DNS rebinding (a foreign Host) reads nothing; a web page's cross-site POST (a foreign
    Origin, or a `text/plain` body it may send without asking) delivers nothing."""
    port = urllib.parse.urlsplit(sidecar.url).port
    local = {"Host": f"127.0.0.1:{port}"}
    message = json.dumps({"id": "web-1", "from": "web", "to": ["team"], "body": "hi\n"}).encode()
    for path in ("/inbox", "/status", "/outbox", "/health"):
        status, _, body = raw(sidecar.url, "GET", path, {"Host": "evil.example"})
        assert (status, body["error"]["code"]) == (421, "HOST_NOT_ALLOWED"), path
        assert raw(sidecar.url, "GET", path, {"Host": f"evil.example:{port}"})[0] == 421
    assert raw(sidecar.url, "GET", "/inbox", {})[0] == 421  # no Host at all
    status, _, body = raw(sidecar.url, "POST", "/inbox", {**local, "Origin": "http://evil.example", "Content-Type": "text/plain"}, message)
    assert (status, body["error"]["code"]) == (403, "ORIGIN_NOT_ALLOWED")
    status, _, body = raw(sidecar.url, "POST", "/inbox", {**local, "Content-Type": "text/plain"}, message)
    assert (status, body["error"]["code"]) == (415, "UNSUPPORTED_MEDIA_TYPE")
    assert raw(sidecar.url, "POST", "/inbox", {**local, "Origin": "null", "Content-Type": "application/json"}, message)[0] == 403
    assert inbox_ids(team) == []
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        assert raw(sidecar.url, "GET", "/status", {"Host": host})[0] == 200
    same_origin = {**local, "Origin": f"http://127.0.0.1:{port}", "Content-Type": "application/json; charset=utf-8"}
    assert raw(sidecar.url, "POST", "/inbox", same_origin, message)[0] == 201
    assert inbox_ids(team) == ["web-1"]


def test_an_oversized_post_gets_413_that_the_client_can_read(sidecar: Running, team: Path) -> None:
    """A 10 MB body is answered 413 before it is read; the rest is drained, so the client,
    still uploading, reads the answer instead of a reset connection."""
    port = urllib.parse.urlsplit(sidecar.url).port
    body = b"x" * (10 * 1024 * 1024)
    status, _, answer = raw(sidecar.url, "POST", "/inbox", {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"}, body)
    assert status == 413 and answer["error"]["code"] == "FILE_TOO_LARGE" and answer["error"]["status"] == 413
    assert answer["error"]["details"]["max_bytes"] == 1024 * 1024
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:  # curl's way: ask first
        sock.sendall(
            f"POST /inbox HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")
    assert sidecar.get("/health")[0] == 200


def test_two_hundred_concurrent_requests_get_answers_not_resets(sidecar: Running, team: Path) -> None:
    """Every request gets an answer (2xx, or 503 with Retry-After when every worker is busy):
    no reset, no timeout; every message accepted is in the inbox once."""
    port = urllib.parse.urlsplit(sidecar.url).port
    local = {"Host": f"127.0.0.1:{port}"}
    start_together = threading.Barrier(200)
    outcomes: list[tuple[str, int, dict[str, str], str]] = []
    failures: list[BaseException] = []

    def one(number: int) -> None:
        kind = ("post", "inbox", "status")[number % 3]
        try:
            start_together.wait(timeout=30)
            if kind == "post":
                payload = json.dumps({"id": f"burst-{number}", "from": "load", "to": ["team"], "body": f"n{number}\n"}).encode()
                status, headers, _ = raw(sidecar.url, "POST", "/inbox", {**local, "Content-Type": "application/json"}, payload)
            else:
                status, headers, _ = raw(sidecar.url, "GET", f"/{kind}", local)
            outcomes.append((kind, status, headers, f"burst-{number}"))
        except BaseException as exc:  # a reset or a timeout is the failure this test looks for
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert len(outcomes) == 200
    for kind, status, headers, _ in outcomes:
        assert status in (200, 201) or (status == 503 and headers.get("Retry-After") == "1"), (kind, status)
    accepted = sorted(ident for kind, status, _, ident in outcomes if kind == "post" and status in (200, 201))
    assert accepted and sorted(inbox_ids(team)) == accepted


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], Any]:
    """The status, headers and JSON body of the one answer on `sock`, read until the server
    closes the connection (it closes after an error answer)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body)


def test_a_body_shorter_than_its_content_length_is_answered_not_left_to_fail(sidecar: Running, team: Path) -> None:
    """A client that promises 100 bytes and sends 11 gets 408 REQUEST_TIMEOUT once the rest
    stops coming (no 500 INTERNAL); one that closes its side early gets 400 at once."""
    port = urllib.parse.urlsplit(sidecar.url).port
    head = f"POST /inbox HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + b'{"id": "r1"')
        status, _, body = read_answer(sock)
    assert (status, body["error"]["code"], body["error"]["status"]) == (408, "REQUEST_TIMEOUT", 408)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + b'{"id": "r1"')
        sock.shutdown(socket.SHUT_WR)
        status, _, body = read_answer(sock)
    assert (status, body["error"]["code"]) == (400, "INVALID_REQUEST")
    assert inbox_ids(team) == [] and sidecar.get("/health")[0] == 200


@pytest.mark.slow
def test_two_hundred_slow_clients_leave_health_and_peer_deliveries_answering(team: Path, request: pytest.FixtureRequest) -> None:
    """Two hundred connections that trickle a request a byte at a time, or send nothing, hold
    no worker: /health and a peer's signed delivery are answered meanwhile. The assertion
    allows 5 s per answer (a loaded machine); the latencies measured are recorded (the issue's
    target is 100 ms; bench/sidecar_load.py --slow measures them on a quiet machine)."""
    peer_token = "peer-" + "7" * 40
    running = start(team, env={"NEEDLECAST_PEERS": "host-a", "NEEDLECAST_PEER_TOKEN_HOST_A": peer_token})
    port = urllib.parse.urlsplit(running.url).port
    assert port is not None
    slow: list[socket.socket] = []
    stop = threading.Event()

    def trickle() -> None:
        # One byte every 0.2 s on every other connection: a head that never ends.
        text = f"GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode() + b"a" * 10_000
        sent = 0
        while not stop.wait(0.2):
            for sock in slow[::2]:
                try:
                    sock.send(text[sent : sent + 1])
                except OSError:
                    pass
            sent += 1

    trickler = threading.Thread(target=trickle)
    try:
        for _ in range(200):
            slow.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        trickler.start()
        stop.wait(1.0)  # let the trickle start on every connection
        health: list[float] = []
        deliveries: list[float] = []
        for number in range(20):
            started = time.monotonic()
            status, _, body = raw(running.url, "GET", "/health", {"Host": f"127.0.0.1:{port}"}, timeout=5)
            health.append(time.monotonic() - started)
            assert (status, body) == (200, {"status": "ok"})
            if number % 2 == 0:
                path = "/sleeves/bob/inbox"
                payload = json.dumps({"id": f"slow-{number}", "from": "ann", "to": ["bob"], "type": "task", "body": "hi\n"}).encode()
                headers = signing.signed_headers("host-a", peer_token, "POST", path, payload, now=time.time(), nonce=secrets.token_hex(16))
                started = time.monotonic()
                status, _, body = raw(
                    running.url, "POST", path, {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json", **headers}, payload, timeout=5
                )
                deliveries.append(time.monotonic() - started)
                assert status == 201, body
        figures = {
            "health_ms_p50": round(statistics.median(health) * 1000, 1),
            "health_ms_p95": round(sorted(health)[18] * 1000, 1),
            "delivery_ms_p50": round(statistics.median(deliveries) * 1000, 1),
            "delivery_ms_max": round(max(deliveries) * 1000, 1),
        }
        request.node.user_properties.extend(figures.items())  # in --junitxml's report
        print(f"latency under 200 slow connections: {figures}")  # shown with -rP
        assert sorted(inbox_ids(team / "bob")) == sorted(f"slow-{n}" for n in range(0, 20, 2))
    finally:
        stop.set()
        if trickler.is_alive():
            trickler.join(timeout=10)
        for sock in slow:
            sock.close()
        assert running.stop() == 0


def test_a_lower_case_bearer_scheme_is_accepted(team: Path) -> None:
    """RFC 9110: the auth scheme is case-insensitive (`bearer`, `BEARER`)."""
    running = start(team, env={"NEEDLECAST_TOKEN": "s3cret"})
    try:
        port = urllib.parse.urlsplit(running.url).port
        for scheme in ("bearer", "BEARER", "Bearer"):
            status, _, _ = raw(running.url, "GET", "/status", {"Host": f"127.0.0.1:{port}", "Authorization": f"{scheme} s3cret"})
            assert status == 200, scheme
        assert raw(running.url, "GET", "/status", {"Host": f"127.0.0.1:{port}", "Authorization": "bearer wrong"})[0] == 401
        assert raw(running.url, "GET", "/status", {"Host": f"127.0.0.1:{port}", "Authorization": "Basic s3cret"})[0] == 401
    finally:
        assert running.stop() == 0


def test_a_busy_port_is_a_conflict_with_a_hint(team: Path, tmp_path: Path) -> None:
    """A second sidecar (another workspace) on a port already taken: CONFLICT, exit 5, and a
    hint naming --port; not INTERNAL with an OSError."""
    other = tmp_path / "other"
    mailbox.init_mailbox(other)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_cli("needlecast", "sidecar", "--root", str(other), "--port", str(port), "--json")
        plain = run_cli("needlecast", "sidecar", "--root", str(other), "--port", str(port))
    assert result.returncode == 5, result.stderr
    error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "CONFLICT" and "--port" in error["hint"] and error["details"]["port"] == port
    assert plain.returncode == 5 and "error[CONFLICT]" in plain.stderr and "Traceback" not in plain.stderr
    assert read_runtime(other) is None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_it_cleanly_and_release_the_lock(team: Path, signum: int) -> None:
    first = start(team)
    second = subprocess.run([str(BIN / "needlecast"), "sidecar", "--root", str(team), "--port", "0", "--json"], capture_output=True, text=True, timeout=60)
    assert second.returncode == 5
    assert json.loads(second.stderr.strip().splitlines()[-1])["error"]["code"] == "ALREADY_RUNNING"
    assert first.stop(signum) == 0
    assert "stopping" in first.log.read_text()
    assert read_runtime(team) is None
    again = start(team)
    assert again.get("/health")[0] == 200
    assert again.stop() == 0


def test_polling_mode_routes(team: Path) -> None:
    running = start(team, "--poll", "--poll-interval", "0.1")
    try:
        send(team, "alice", "bob", "polled", "p1")
        wait_for(lambda: inbox_ids(team / "bob") == ["p1"], timeout=5, message="delivery by polling")
        assert running.get("/status")[1]["router"]["watcher"] == "polling"
    finally:
        assert running.stop() == 0


def test_falls_back_to_polling_when_events_do_not_arrive(team: Path, tmp_path: Path) -> None:
    """Writes through a hard link in an unwatched folder raise no event on the watched folder,
    as on mounts inotify cannot see; the sweeps notice the unannounced work and switch."""
    running = start(team, "--sweep", "0.3", "--poll-interval", "0.1")
    try:
        alias = tmp_path / "elsewhere" / "outbox-alias.md"
        alias.parent.mkdir()
        for number in range(4):
            # The router replaces outbox.md by a new file when it routes, so link it afresh.
            # Linking changes the file's link count, which inotify does report; let the
            # sidecar's pass for that event go by before writing through the alias.
            passes = running.get("/status")[1]["router"]["passes"]
            alias.unlink(missing_ok=True)
            os.link(Mailbox(team / "alice").outbox_file, alias)
            wait_for(lambda p=passes: running.get("/status")[1]["router"]["passes"] > p, timeout=5, message="a pass after linking")
            with open(alias, "a") as handle:
                handle.write(f"\n---\nid: h{number}\nto: bob\n---\nthrough the alias\n")
            wait_for(lambda n=number: f"h{n}" in inbox_ids(team / "bob"), timeout=10, message="delivery")
            wait_for(lambda: not mailbox.read_outbox(Mailbox(team / "alice"), "alice").entries, timeout=10, message="outbox emptied")
            if running.get("/status")[1]["router"]["watcher"] == "polling":
                break
        assert running.get("/status")[1]["router"]["watcher"] == "polling"
        assert "switching to polling" in running.log.read_text()
    finally:
        assert running.stop() == 0


def test_remote_sleeve_through_its_sidecar(team: Path, tmp_path: Path) -> None:
    far = tmp_path / "far-host" / "far"
    mailbox.init_mailbox(far)
    remote = start(far, "--name", "far", env={"NEEDLECAST_TOKEN": "far-token"})
    try:
        _, body = remote.get("/status", token="far-token")
        assert body["router"]["enabled"] is False  # a lone sleeve only serves its own workspace
        (team / ".needlecast" / "sleeves.toml").write_text(f'[far]\nurl = "{remote.url}"\ntoken_env = "FAR_TOKEN"\n')
        send(team, "alice", "far", "across hosts", "x1")
        router = Router(team, environ={"FAR_TOKEN": "far-token"})
        report = router.route_all()
        assert report.delivered == 1 and report.problems == [] and report.held == []
        assert inbox_ids(far) == ["x1"]
        send(team, "alice", "far", "again", "x2")
        report = Router(team, environ={}).route_all()  # no token: held, not lost
        assert report.pending == 1 and report.held[0]["code"] == "UNAUTHORIZED"
        assert Router(team, environ={"FAR_TOKEN": "far-token"}).route_all().delivered == 1
        assert inbox_ids(far) == ["x1", "x2"]
    finally:
        assert remote.stop() == 0
    send(team, "alice", "far", "while it is down", "x3")
    report = Router(team, environ={"FAR_TOKEN": "far-token"}).route_all()
    assert report.pending == 1 and report.held[0]["code"] == "SLEEVE_UNAVAILABLE"


def test_in_process_sidecar_leaves_no_threads(team: Path) -> None:
    runner = Sidecar(team, port=0, sweep_seconds=0.2)
    thread = threading.Thread(target=runner.run, name="sidecar-under-test")
    thread.start()
    try:
        wait_for(lambda: runner.url is not None and read_runtime(team) is not None, timeout=10, message="in-process sidecar ready")
        assert http(runner.url + "/health") == (200, {"status": "ok"})  # type: ignore[operator]
        send(team, "alice", "bob", "in process", "i1")
        wait_for(lambda: inbox_ids(team / "bob") == ["i1"], timeout=5, message="delivery")
    finally:
        runner.request_stop()
        thread.join(timeout=20)
    assert not thread.is_alive()
    assert read_runtime(team) is None


def test_the_sidecar_log_counts_one_delivery_in_the_singular(team: Path) -> None:
    """It once logged `routed 1 deliveries`."""
    lines: list[str] = []
    runner = Sidecar(team, port=0, sweep_seconds=0.2, log=lines.append)
    thread = threading.Thread(target=runner.run, name="sidecar-under-test")
    thread.start()
    try:
        wait_for(lambda: runner.url is not None, timeout=10, message="in-process sidecar ready")
        send(team, "alice", "bob", "just one", "one1")
        wait_for(lambda: any(line.startswith("needlecast: routed") for line in lines), timeout=10, message="the routing log line")
    finally:
        runner.request_stop()
        thread.join(timeout=20)
    routed = next(line for line in lines if line.startswith("needlecast: routed"))
    assert routed.startswith("needlecast: routed 1 delivery, "), routed


# --------------------------------------------------------------------------- pure parts


def test_part_cache_serves_within_ttl_and_degrades_on_failure() -> None:
    now = [100.0]
    calls = []
    cache = PartCache(lambda: now[0], {"cstack": 5.0, "process": 0.0})

    def produce() -> dict[str, int]:
        calls.append(now[0])
        if len(calls) == 2:
            raise RuntimeError("cs crashed")
        return {"open": len(calls)}

    assert cache.get("cstack", produce).value == {"open": 1}
    now[0] += 4.9
    assert cache.get("cstack", produce).value == {"open": 1} and len(calls) == 1
    now[0] += 0.2
    degraded = cache.get("cstack", produce)
    assert degraded.degraded and degraded.value["error"]["code"] == "INTERNAL"
    body = build_status("s", "/w", {"cstack": degraded, "process": cache.get("process", lambda: {"pid": 1})})
    assert body["degraded"] == ["cstack"] and body["process"] == {"pid": 1}


def test_small_pure_helpers() -> None:
    assert parse_vmrss("Name:\tpython\nVmRSS:\t  20480 kB\n") == 20.0
    assert parse_vmrss("Name: x\n") is None
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_the_sidecar_checks_addresses_with_the_one_is_loopback() -> None:
    import needlecast.sidecar

    assert needlecast.sidecar.is_loopback is is_loopback
    folder = Path(needlecast.sidecar.__file__).parent
    assert [path.name for path in folder.glob("*.py") if "def is_loopback" in path.read_text()] == []


def test_a_broken_registry_is_reported_and_routing_resumes_when_fixed(team: Path) -> None:
    running = start(team, "--sweep", "0.2")
    try:
        registry = team / ".needlecast" / "sleeves.toml"
        registry.write_text("broken = \n")

        def problem_codes() -> list[str]:
            return [p.get("code") for p in running.get("/status")[1]["router"]["problems"]]

        wait_for(lambda: "REGISTRY_INVALID" in problem_codes(), timeout=10, message="registry problem reported")
        assert running.get("/health")[0] == 200
        registry.write_text('carol = "bob"\n')  # an alias for bob's workspace
        send(team, "alice", "carol", "after the fix", "f1")
        wait_for(lambda: inbox_ids(team / "bob") == ["f1"], timeout=10, message="routing resumed")
    finally:
        assert running.stop() == 0


def test_the_sidecar_keeps_a_workspace_search_index_warm(team: Path) -> None:
    from moss_files.index import sources, watch

    fingerprint = sources.default_registry().fingerprint
    # Without .moss/ there is no search index to keep: nothing runs, nothing is made.
    bare = start(team)
    try:
        assert bare.get("/health")[0] == 200
        assert watch.synced(team, fingerprint) is None and not (team / ".moss").exists()
    finally:
        assert bare.stop() == 0
    (team / ".moss").mkdir()
    running = start(team)
    try:
        wait_for(lambda: watch.synced(team, fingerprint) is not None, timeout=60, message="the sidecar's index watcher")
        assert "keeping the search index warm" in running.log.read_text()
        send(team, "alice", "bob", "a walrus in the inbox", "m-walrus")
        wait_for(lambda: "m-walrus" in inbox_ids(team / "bob"), timeout=20, message="the delivery")
        mailbox.deliver(Mailbox(team), [Message(id="m-own", sender="alice", to=("team",), type="task", body="an emu for the envoy")], NOW)
        found = json.loads(run_cli("moss", "search", "emu", "--json", cwd=team).stdout)
        assert [match["id"] for match in found["matches"]] == ["m-own"]
        assert json.loads(run_cli("moss", "index", "refresh", "--json", cwd=team).stdout)["watched"] is True
    finally:
        assert running.stop() == 0
    assert watch.synced(team, fingerprint) is None and not watch.socket_path(team).exists()

"""Hosts talking to hosts: per-pair tokens, signed requests, replay refusal, name@peer addresses
and two-way routing between two envoys, as real sidecar processes on loopback ports."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from helpers import wait_for

from moss_files.foundation.errors import InvalidRequest
from needlecast import mailbox, signing
from needlecast.mailbox import Mailbox
from needlecast.peers import load_peers, read_token_file
from needlecast.sidecar import read_runtime
from needlecast.signing import Peer, ReplayGuard, parse_peer_spec, signed_headers, token_variable, verify

TOKEN_AB = "ab-" + "1" * 40  # shared by host-a and host-b only
TOKEN_CB = "cb-" + "2" * 40  # shared by host-c and host-b only
ADMIN_B = "admin-b-" + "3" * 30


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Host:
    """An envoy root with its sidecar as a real process on a fixed loopback port (so peers find
    it again after a restart), logging to a file."""

    def __init__(self, root: Path, name: str, port: int, env: dict[str, str], args: list[str]) -> None:
        self.root, self.name, self.port, self.env, self.args = root, name, port, env, args
        self.url = f"http://127.0.0.1:{port}"
        self.logs: list[Path] = []
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wait: bool = True) -> None:
        log = self.root.parent / f"{self.name}-{len(self.logs)}.log"
        self.logs.append(log)
        with open(log, "wb") as stderr:
            self.process = subprocess.Popen(
                [str(BIN / "needlecast"), "sidecar", "--root", str(self.root), "--port", str(self.port), "--sweep", "0.5", *self.args],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        process = self.process
        assert process is not None

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"{self.name} exited with {process.returncode}: {self.logs[-1].read_text()}")
            return (read_runtime(self.root) or {}).get("pid") == process.pid

        wait_for(ready, timeout=30, message=f"{self.name} ready")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)

    def log_text(self) -> str:
        return "".join(log.read_text(errors="replace") for log in self.logs)


def request(url: str, method: str = "GET", payload: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = None if payload is None else (payload if isinstance(payload, bytes) else json.dumps(payload).encode())
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def signed(peer: str, token: str, method: str, path: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    return signed_headers(peer, token, method, path, body, now=time.time() if now is None else now, nonce=secrets.token_hex(16))


@pytest.fixture
def host_b(tmp_path: Path) -> Iterator[Host]:
    root = tmp_path / "b"
    mailbox.init_mailbox(root / "ben")
    mailbox.init_mailbox(root)
    env = {
        "NEEDLECAST_TOKEN": ADMIN_B,
        "NEEDLECAST_PEERS": "host-a=http://127.0.0.1:9,host-c",
        token_variable("host-a"): TOKEN_AB,
        token_variable("host-c"): TOKEN_CB,
        "NEEDLECAST_PEER_NAME": "host-b",
    }
    host = Host(root, "host-b", free_port(), env, [])
    host.start()
    yield host
    if host.process is not None and host.process.poll() is None:
        assert host.stop() == 0


# --------------------------------------------------------------------------- pure parts


def test_a_signature_binds_the_peer_the_request_and_the_time() -> None:
    peers = {"host-a": Peer("host-a", None, TOKEN_AB), "host-c": Peer("host-c", None, TOKEN_CB)}
    body = b'{"messages": []}'
    headers = signed("host-a", TOKEN_AB, "POST", "/sleeves/ben/inbox", body, now=1000.0)
    guard = ReplayGuard()
    assert verify(headers, "POST", "/sleeves/ben/inbox", body, peers, 1000.0, guard) == "host-a"

    def code_of(headers: dict[str, str], path: str = "/sleeves/ben/inbox", data: bytes = body, now: float = 1000.0) -> str:
        with pytest.raises(InvalidRequest) as caught:
            verify(headers, "POST", path, data, peers, now, ReplayGuard())
        assert caught.value.status == 401
        return caught.value.code

    assert code_of(headers, path="/sleeves/eve/inbox") == "UNAUTHORIZED"  # sent elsewhere
    assert code_of(headers, data=b'{"messages": [1]}') == "UNAUTHORIZED"  # altered
    assert code_of(signed("host-a", "not-the-token", "POST", "/sleeves/ben/inbox", body, now=1000.0)) == "UNAUTHORIZED"
    assert code_of(signed("host-a", TOKEN_CB, "POST", "/sleeves/ben/inbox", body, now=1000.0)) == "PEER_MISMATCH"
    assert code_of(signed("host-z", TOKEN_AB, "POST", "/sleeves/ben/inbox", body, now=1000.0)) == "UNAUTHORIZED"
    assert code_of(headers, now=1000.0 + signing.WINDOW_SECONDS + 1) == "REQUEST_EXPIRED"
    assert code_of({**headers, signing.NONCE_HEADER: "short"}) == "UNAUTHORIZED"
    with pytest.raises(InvalidRequest) as caught:
        verify(headers, "POST", "/sleeves/ben/inbox", body, peers, 1001.0, guard)
    assert caught.value.code == "REPLAYED_REQUEST"
    assert TOKEN_AB not in repr(peers["host-a"])


def test_the_signature_scheme_is_read_in_any_case() -> None:
    """RFC 9110: auth schemes are case-insensitive, so a proxy or client that lowers the
    scheme's case does not make a peer's signed request fail."""
    peers = {"host-a": Peer("host-a", None, TOKEN_AB)}
    body = b'{"messages": []}'
    for spelled in (signing.SCHEME.lower(), signing.SCHEME.upper()):
        headers = signed("host-a", TOKEN_AB, "POST", "/sleeves/ben/inbox", body, now=1000.0)
        headers["Authorization"] = headers["Authorization"].replace(signing.SCHEME, spelled)
        assert verify(headers, "POST", "/sleeves/ben/inbox", body, peers, 1000.0, ReplayGuard()) == "host-a"
    headers = signed("host-a", TOKEN_AB, "POST", "/sleeves/ben/inbox", body, now=1000.0)
    headers["Authorization"] = headers["Authorization"].replace(signing.SCHEME, "Bearer")
    with pytest.raises(InvalidRequest) as caught:
        verify(headers, "POST", "/sleeves/ben/inbox", body, peers, 1000.0, ReplayGuard())
    assert caught.value.code == "UNAUTHORIZED"


def test_peer_specs_and_tokens_from_the_environment_or_files(tmp_path: Path) -> None:
    assert parse_peer_spec("host-b=http://10.0.0.8:7471/") == ("host-b", "http://10.0.0.8:7471")
    assert parse_peer_spec("host-c") == ("host-c", None)
    for bad in ("bad name=http://x", "host=ftp://x", "=http://x"):
        with pytest.raises(InvalidRequest):
            parse_peer_spec(bad)
    assert token_variable("host-b.lan") == "NEEDLECAST_PEER_TOKEN_HOST_B_LAN"
    folder = tmp_path / "tokens"
    folder.mkdir()
    (folder / "host-c").write_text(TOKEN_CB + "\n")
    peers = load_peers(["host-b=http://127.0.0.1:1, host-c"], {token_variable("host-b"): TOKEN_AB}, folder)
    assert (peers["host-b"].token, peers["host-c"].token, peers["host-c"].url) == (TOKEN_AB, TOKEN_CB, None)
    for specs, environ in ((["host-d"], {}), (["host-b", "host-b"], {token_variable("host-b"): "x"})):
        with pytest.raises(InvalidRequest):
            load_peers(specs, environ, folder)
    (folder / "empty").write_text("\n")
    with pytest.raises(InvalidRequest) as caught:
        read_token_file(folder / "empty")
    assert caught.value.code == "PEER_TOKEN_MISSING"


# --------------------------------------------------------------------------- refusals over HTTP


def test_peers_are_refused_with_codes_and_the_log_never_holds_a_token(host_b: Host) -> None:
    path = "/sleeves/ben/inbox"
    body = json.dumps({"messages": [{"id": "p1", "from": "ann", "to": ["ben"], "type": "task", "body": "hello\n"}]}).encode()
    good = signed("host-a", TOKEN_AB, "POST", path, body)
    status, answer = request(host_b.url + path, "POST", body, good)
    assert status == 201 and answer["results"] == [{"id": "p1", "status": "delivered"}]
    (entry,) = mailbox.read_inbox(Mailbox(host_b.root / "ben"))
    assert entry.message is not None and entry.message.sender == "ann@host-a"  # bound to the peer that signed

    cases = {
        "UNAUTHORIZED": signed("host-a", "wrong-" + TOKEN_AB, "POST", path, body),
        "PEER_MISMATCH": signed("host-a", TOKEN_CB, "POST", path, body),
        "REPLAYED_REQUEST": good,
        "REQUEST_EXPIRED": signed("host-a", TOKEN_AB, "POST", path, body, now=time.time() - 600),
    }
    for code, headers in cases.items():
        status, answer = request(host_b.url + path, "POST", body, headers)
        assert (status, answer["error"]["code"]) == (401, code), code
    status, answer = request(host_b.url + "/status", headers=signed("host-a", TOKEN_AB, "GET", "/status", b""))
    assert (status, answer["error"]["code"]) == (403, "PEER_NOT_ALLOWED")
    status, answer = request(host_b.url + path, "POST", body)  # neither signed nor the admin token
    assert (status, answer["error"]["code"]) == (401, "UNAUTHORIZED")
    nobody = "/sleeves/nobody/inbox"
    status, answer = request(host_b.url + nobody, "POST", body, signed("host-a", TOKEN_AB, "POST", nobody, body))
    assert (status, answer["error"]["code"]) == (404, "UNKNOWN_RECIPIENT")
    relayed = json.dumps({"id": "p2", "from": "eve@host-c", "to": ["ben"], "body": "x\n"}).encode()
    status, answer = request(host_b.url + path, "POST", relayed, signed("host-a", TOKEN_AB, "POST", path, relayed))
    assert (status, answer["error"]["code"]) == (400, "MESSAGE_INVALID")
    assert request(host_b.url + "/status", headers={"Authorization": f"Bearer {ADMIN_B}"})[0] == 200

    # A request captured before a restart is still refused after it: accepted nonces are kept.
    assert host_b.stop() == 0
    host_b.start()
    status, answer = request(host_b.url + path, "POST", body, good)
    assert (status, answer["error"]["code"]) == (401, "REPLAYED_REQUEST")
    assert [e.key for e in mailbox.read_inbox(Mailbox(host_b.root / "ben"))] == ["p1"]

    text = host_b.log_text()
    assert "POST /sleeves/ben/inbox" in text  # requests are logged ...
    for secret in (TOKEN_AB, TOKEN_CB, ADMIN_B, "wrong-" + TOKEN_AB):
        assert secret not in text  # ... tokens never


def test_tokens_never_come_from_the_command_line(tmp_path: Path) -> None:
    mailbox.init_mailbox(tmp_path / "w")
    result = run_cli("needlecast", "sidecar", "--root", str(tmp_path / "w"), "--port", "0", "--token", "s3cret-on-argv", "--json")
    assert result.returncode == 2
    error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
    assert error["code"] == "TOKEN_ON_COMMAND_LINE" and "s3cret-on-argv" not in result.stderr
    result = run_cli("needlecast", "sidecar", "--root", str(tmp_path / "w"), "--port", "0", "--peer", "host-x=http://127.0.0.1:9", "--json")
    assert result.returncode == 2 and json.loads(result.stderr.strip().splitlines()[-1])["error"]["code"] == "PEER_TOKEN_MISSING"


def test_every_setting_from_the_environment(tmp_path: Path) -> None:
    """No flag at all: root, name, host, port, token (from a file), polling, peers."""
    workspace = tmp_path / "w"
    mailbox.init_mailbox(workspace)
    token_file = tmp_path / "admin.token"
    token_file.write_text("from-a-file-" + "9" * 20 + "\n")
    port = free_port()
    env = {
        "MOSS_ROOT": str(workspace),
        "NEEDLECAST_SLEEVE": "wendy",
        "NEEDLECAST_HOST": "127.0.0.1",
        "NEEDLECAST_PORT": str(port),
        "NEEDLECAST_TOKEN_FILE": str(token_file),
        "NEEDLECAST_POLL": "1",
        "NEEDLECAST_POLL_INTERVAL": "0.1",
        "NEEDLECAST_PEERS": "host-q",
        token_variable("host-q"): TOKEN_CB,
        "NEEDLECAST_ROUTE": "false",
    }
    log = tmp_path / "env.log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen([str(BIN / "needlecast"), "sidecar"], env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_for(lambda: (read_runtime(workspace) or {}).get("port") == port, timeout=30, message="sidecar from the environment")
        url = f"http://127.0.0.1:{port}"
        assert request(url + "/status")[0] == 401
        status, body = request(url + "/status", headers={"Authorization": "Bearer from-a-file-" + "9" * 20})
        assert status == 200 and body["sleeve_name"] == "wendy"
        assert body["router"]["watcher"] == "polling" and body["router"]["enabled"] is False and body["router"]["peers"] == ["host-q"]
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    assert "from-a-file" not in log.read_text()


# --------------------------------------------------------------------------- two hosts


def two_hosts(tmp_path: Path, extra: tuple[str, ...] = ()) -> tuple[Host, Host]:
    port_a, port_b = free_port(), free_port()
    hosts = []
    for name, sleeves, port, other, other_port in (("host-a", ("ann",), port_a, "host-b", port_b), ("host-b", ("ben",), port_b, "host-a", port_a)):
        root = tmp_path / name
        for sleeve in sleeves:
            mailbox.init_mailbox(root / sleeve)
        mailbox.init_mailbox(root)
        env = {
            "NEEDLECAST_TOKEN": f"admin-{name}-" + "7" * 20,
            "NEEDLECAST_PEERS": f"{other}=http://127.0.0.1:{other_port}",
            token_variable(other): TOKEN_AB,
            "NEEDLECAST_PEER_NAME": name,
        }
        hosts.append(Host(root, name, port, env, list(extra)))
    return hosts[0], hosts[1]


def inbox(root: Path) -> list[tuple[str | None, str, str]]:
    return [(e.message.sender, e.key, e.message.body.strip()) for e in mailbox.read_inbox(Mailbox(root)) if e.message is not None]


def test_two_hosts_send_and_reply(tmp_path: Path) -> None:
    a, b = two_hosts(tmp_path)
    a.start()
    b.start()
    try:
        done = run_cli("needlecast", "send", "--root", str(a.root / "ann"), "--to", "ben@host-b", "--json", "question from ann")
        assert done.returncode == 0, done.stderr
        wait_for(lambda: inbox(b.root / "ben"), timeout=10, message="delivery across hosts")
        ((sender, key, body),) = inbox(b.root / "ben")
        assert (sender, body) == ("ann@host-a", "question from ann")
        reply = run_cli("needlecast", "send", "--root", str(b.root / "ben"), "--reply-to", key, "--json", "answer from ben")
        assert reply.returncode == 0, reply.stderr
        assert json.loads(reply.stdout)["message"]["to"] == ["ann@host-a"]
        wait_for(lambda: inbox(a.root / "ann"), timeout=10, message="the reply across hosts")
        assert [(s, t) for s, _k, t in inbox(a.root / "ann")] == [("ben@host-b", "answer from ben")]
        status, body = request(a.url + "/status", headers={"Authorization": "Bearer admin-host-a-" + "7" * 20})
        assert status == 200 and body["router"]["peers"] == ["host-b"] and body["router"]["problems"] == []
    finally:
        assert a.stop() == 0 and b.stop() == 0
    for host in (a, b):
        assert TOKEN_AB not in host.log_text()


def test_messages_wait_while_the_peer_is_down_and_arrive_once_it_is_back(tmp_path: Path) -> None:
    a, b = two_hosts(tmp_path)
    a.start()
    try:
        for number in range(3):
            assert run_cli("needlecast", "send", "--root", str(a.root / "ann"), "--to", "ben@host-b", f"while down {number}").returncode == 0

        def held() -> bool:
            status, body = request(a.url + "/status", headers={"Authorization": "Bearer admin-host-a-" + "7" * 20})
            return (
                any(item.get("code") == "SLEEVE_UNAVAILABLE" for item in body["router"]["last_report"]["held"] or [])
                if body["router"]["last_report"]
                else False
            )

        wait_for(held, timeout=10, message="held while the peer is down")
        b.start()
        wait_for(lambda: len(inbox(b.root / "ben")) == 3, timeout=15, message="delivered once the peer is back")
        wait_for(lambda: not mailbox.read_outbox(Mailbox(a.root / "ann"), "ann").entries, timeout=10, message="outbox drained")
    finally:
        a.stop()
        if b.process is not None:
            b.stop()
    assert sorted(t for _s, _k, t in inbox(b.root / "ben")) == [f"while down {n}" for n in range(3)]


# --------------------------------------------------------------------------- crash storm across hosts

STORM_MESSAGES = int(60 * float(os.environ.get("NEEDLECAST_STORM_SCALE", "1") or 1))
STORM_KILLS = int(16 * float(os.environ.get("NEEDLECAST_STORM_SCALE", "1") or 1))
SENDER = """
import os, sys, time, random
box, name, layout, count, remote, local, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7])
rng = random.Random(seed)
for number in range(count):
    to = remote if number % 2 == 0 else local
    block = f"---\\nid: {name}-{number}\\nfrom: {name}\\nto: {to}\\ntype: task\\n---\\ntoken: {name}-{number}\\n\\n"
    if layout == "v1":
        fd = os.open(os.path.join(box, "outbox.md"), os.O_WRONLY | os.O_APPEND)
        os.write(fd, block.encode())
        os.close(fd)
    else:
        temp = os.path.join(box, "outbox", f".{number}.tmp-{os.getpid()}-0")
        with open(temp, "w") as handle:
            handle.write(block)
        os.rename(temp, os.path.join(box, "outbox", f"{number:06d}_{name}.md"))
    time.sleep(rng.uniform(0, 0.12))
"""


@pytest.mark.slow
def test_two_hosts_crash_storm_every_message_exactly_once(tmp_path: Path) -> None:
    """A sleeve on each host sends to the other host (and to a neighbour at home) while both
    sidecars are killed with SIGKILL at random instants and restarted: afterwards every message
    sits in its recipient's inbox exactly once."""
    import random
    import sys
    from collections import Counter

    a, b = two_hosts(tmp_path)
    for root, name, layout in ((a.root, "amy", "v1"), (b.root, "bea", "v2")):
        mailbox.init_mailbox(root / name, layout)
    layouts = {"ann": "v1", "ben": "v2"}
    mailbox.init_mailbox(b.root / "ben", "v2")  # ben's outbox: one file per message
    senders = [
        subprocess.Popen(
            [sys.executable, "-c", SENDER, str(a.root / "ann" / ".needlecast"), "ann", layouts["ann"], str(STORM_MESSAGES), "ben@host-b", "amy", "1"]
        ),
        subprocess.Popen(
            [sys.executable, "-c", SENDER, str(b.root / "ben" / ".needlecast"), "ben", layouts["ben"], str(STORM_MESSAGES), "ann@host-a", "bea", "2"]
        ),
    ]
    rng = random.Random(16)
    kills = {"host-a": 0, "host-b": 0}
    try:
        a.start(wait=False)
        b.start(wait=False)
        while sum(kills.values()) < STORM_KILLS or any(p.poll() is None for p in senders):
            time.sleep(rng.uniform(0.05, 0.6))
            victims = rng.choice(([a], [b], [a, b]))
            for host in victims:
                host.kill()
                kills[host.name] += 1
            for host in victims:
                host.start(wait=False)
    finally:
        for process in senders:
            process.wait(timeout=120)
        a.kill()
        b.kill()
    assert all(p.returncode == 0 for p in senders)
    assert kills["host-a"] and kills["host-b"]

    a.start()
    b.start()
    try:
        outboxes = [(a.root / "ann", "ann"), (b.root / "ben", "ben")]
        wait_for(lambda: all(not mailbox.read_outbox(Mailbox(root), name).entries for root, name in outboxes), timeout=60, message="outboxes drained")
    finally:
        assert a.stop() == 0 and b.stop() == 0

    expected = {
        (b.root / "ben", "ann@host-a"): {f"ann-{n}" for n in range(0, STORM_MESSAGES, 2)},
        (a.root / "amy", "ann"): {f"ann-{n}" for n in range(1, STORM_MESSAGES, 2)},
        (a.root / "ann", "ben@host-b"): {f"ben-{n}" for n in range(0, STORM_MESSAGES, 2)},
        (b.root / "bea", "ben"): {f"ben-{n}" for n in range(1, STORM_MESSAGES, 2)},
    }
    lost = duplicated = 0
    for (root, sender), tokens in expected.items():
        got = Counter(body.removeprefix("token: ") for who, _key, body in inbox(root) if who == sender)
        lost += len(tokens - set(got))
        duplicated += sum(count - 1 for count in got.values() if count > 1)
        assert set(got) == tokens, f"{root.name}: missing {sorted(tokens - set(got))[:5]} extra {sorted(set(got) - tokens)[:5]}"
    assert (lost, duplicated) == (0, 0)
    for host in (a, b):
        assert TOKEN_AB not in host.log_text()
    print(f"two-host storm: {2 * STORM_MESSAGES} messages, kills {kills}, lost {lost}, duplicated {duplicated}")

"""The sidecar under a burst: N concurrent requests, errors and latency per endpoint; or under
slow clients: probes answered while N connections trickle their requests.

    .venv/bin/python bench/sidecar_load.py [--concurrency 200] [--rounds 3]
    .venv/bin/python bench/sidecar_load.py --slow 200 [--probes 100]

Starts `needlecast sidecar` as a real process on loopback over a workspace with a scaffolded
`.cstack/` (so `/status` has its parts to build), then fires CONCURRENCY requests at once,
released together by a barrier: a third `POST /inbox` (each a new message), a third `GET
/inbox`, a third `GET /status`. Each request has its own connection and a 60 s timeout.
Prints, per endpoint: answers by status, errors (resets, timeouts), and latency p50/p95.
A reset or a timeout is a defect; a 503 with Retry-After is the server saying it is full.

With `--slow N` it opens N connections first: every other one sends the start of a request one
byte every 0.2 s (a head that never ends), the rest send nothing. Meanwhile it sends PROBES
`GET /health` and PROBES/2 peer deliveries (`POST /sleeves/bench-peer/inbox`, signed as a peer
host) one after another, each on a new connection with a 10 s timeout, and prints their latency
p50/p95 and errors. The probes end within the sidecar's 10 s head deadline, so every slow
connection is still held while they run.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from http.client import HTTPConnection
from pathlib import Path

from moss_files import scaffold
from needlecast import signing
from needlecast.sidecar import read_runtime

BIN = Path(sys.executable).parent
PEER = "bench-peer"  # a peer host whose deliveries the slow-client run probes
PEER_TOKEN = "bench-peer-" + "5" * 40


def request(port: int, method: str, path: str, body: bytes = b"") -> int:
    connection = HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"} if method == "POST" else {}
        connection.request(method, path, body=body or None, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def burst(port: int, concurrency: int, round_number: int) -> dict[str, list[tuple[str, float]]]:
    barrier = threading.Barrier(concurrency)
    results: dict[str, list[tuple[str, float]]] = defaultdict(list)
    lock = threading.Lock()

    def one(number: int) -> None:
        kind = ("POST /inbox", "GET /inbox", "GET /status")[number % 3]
        method, path = kind.split()
        body = (
            json.dumps({"id": f"r{round_number}-{number}", "from": "bench", "to": ["bench"], "body": f"message {number}\n"}).encode()
            if method == "POST"
            else b""
        )
        barrier.wait(timeout=60)
        started = time.perf_counter()
        try:
            outcome = str(request(port, method, path, body))
        except Exception as exc:  # what the bench counts as an error
            outcome = type(exc).__name__
        with lock:
            results[kind].append((outcome, time.perf_counter() - started))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def signed_post(port: int, path: str, body: bytes) -> int:
    headers = signing.signed_headers(PEER, PEER_TOKEN, "POST", path, body, now=time.time(), nonce=secrets.token_hex(16))
    connection = HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def under_slow_clients(port: int, slow: int, probes: int) -> dict[str, list[tuple[str, float]]]:
    """Probe latencies while `slow` connections trickle requests that never end (or say nothing)."""
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(slow)]
    stop = threading.Event()
    text = f"GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode() + b"a" * 10_000

    def trickle() -> None:
        sent = 0
        while not stop.wait(0.2):
            for sock in sockets[::2]:
                try:
                    sock.send(text[sent : sent + 1])
                except OSError:
                    pass
            sent += 1

    trickler = threading.Thread(target=trickle)
    trickler.start()
    results: dict[str, list[tuple[str, float]]] = defaultdict(list)
    try:
        stop.wait(1.0)
        for number in range(probes):
            kinds = ["GET /health"] + (["POST peer delivery"] if number % 2 == 0 else [])
            for kind in kinds:
                started = time.perf_counter()
                try:
                    if kind == "GET /health":
                        outcome = str(request(port, "GET", "/health"))
                    else:
                        path = "/sleeves/bench/inbox"
                        body = json.dumps({"id": f"slow-{number}", "from": "peer-sender", "to": ["bench"], "body": "probe\n"}).encode()
                        outcome = str(signed_post(port, path, body))
                except Exception as exc:  # what the bench counts as an error
                    outcome = type(exc).__name__
                results[kind].append((outcome, time.perf_counter() - started))
    finally:
        stop.set()
        trickler.join()
        for sock in sockets:
            sock.close()
    return results


def report(rows_by_kind: dict[str, list[tuple[str, float]]], kinds: list[str]) -> None:
    print(f"{'endpoint':<20} {'answers':<28} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for kind in kinds:
        rows = rows_by_kind[kind]
        answers = Counter(outcome for outcome, _ in rows if outcome.isdigit())
        errors = sum(1 for outcome, _ in rows if not outcome.isdigit())
        times = sorted(seconds * 1000 for _, seconds in rows)
        p95 = times[max(0, int(len(times) * 0.95) - 1)]
        shown = ", ".join(f"{status}: {count}" for status, count in sorted(answers.items()))
        print(f"{kind:<20} {shown:<28} {errors:>6} {statistics.median(times):>8.1f} {p95:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow", type=int, default=0, help="hold this many slow connections and probe meanwhile (instead of the burst)")
    parser.add_argument("--probes", type=int, default=100, help="with --slow: /health probes (and half as many peer deliveries)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="moss-sidecar-load-") as folder:
        root = Path(folder) / "bench"
        root.mkdir()
        scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
        env = {**os.environ, "NEEDLECAST_PEERS": PEER, signing.token_variable(PEER): PEER_TOKEN}
        process = subprocess.Popen(
            [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        try:
            deadline = time.monotonic() + 30
            while (runtime := read_runtime(root)) is None or runtime.get("pid") != process.pid:
                if time.monotonic() > deadline or process.poll() is not None:
                    sys.exit("the sidecar did not start")
                time.sleep(0.05)
            port = int(runtime["port"])
            merged: dict[str, list[tuple[str, float]]] = defaultdict(list)
            if args.slow:
                merged = under_slow_clients(port, args.slow, args.probes)
            else:
                for round_number in range(args.rounds):
                    for kind, rows in burst(port, args.concurrency, round_number).items():
                        merged[kind].extend(rows)
        finally:
            process.terminate()
            process.wait(timeout=30)
    if args.slow:
        print(f"probes one at a time while {args.slow} slow connections are held, against one sidecar (loopback, {os.cpu_count()} cores)")
        report(merged, ["GET /health", "POST peer delivery"])
    else:
        print(f"{args.concurrency} concurrent requests x {args.rounds} rounds against one sidecar (loopback, {os.cpu_count()} cores)")
        report(merged, ["POST /inbox", "GET /inbox", "GET /status"])


if __name__ == "__main__":
    main()

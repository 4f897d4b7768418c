"""The sidecar under a burst: N concurrent requests, errors and latency per endpoint.

    .venv/bin/python bench/sidecar_load.py [--concurrency 200] [--rounds 3]

Starts `needlecast sidecar` as a real process on loopback over a workspace with a scaffolded
`.cstack/` (so `/status` has its parts to build), then fires CONCURRENCY requests at once,
released together by a barrier: a third `POST /inbox` (each a new message), a third `GET
/inbox`, a third `GET /status`. Each request has its own connection and a 60 s timeout.
Prints, per endpoint: answers by status, errors (resets, timeouts), and latency p50/p95.
A reset or a timeout is a defect; a 503 with Retry-After is the server saying it is full.
"""

from __future__ import annotations

import argparse
import json
import os
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
from needlecast.sidecar import read_runtime

BIN = Path(sys.executable).parent


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="moss-sidecar-load-") as folder:
        root = Path(folder) / "bench"
        root.mkdir()
        scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
        process = subprocess.Popen(
            [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ
        )
        try:
            deadline = time.monotonic() + 30
            while (runtime := read_runtime(root)) is None or runtime.get("pid") != process.pid:
                if time.monotonic() > deadline or process.poll() is not None:
                    sys.exit("the sidecar did not start")
                time.sleep(0.05)
            port = int(runtime["port"])
            merged: dict[str, list[tuple[str, float]]] = defaultdict(list)
            for round_number in range(args.rounds):
                for kind, rows in burst(port, args.concurrency, round_number).items():
                    merged[kind].extend(rows)
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"{args.concurrency} concurrent requests x {args.rounds} rounds against one sidecar (loopback, {os.cpu_count()} cores)")
    print(f"{'endpoint':<12} {'answers':<28} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for kind in ("POST /inbox", "GET /inbox", "GET /status"):
        rows = merged[kind]
        answers = Counter(outcome for outcome, _ in rows if outcome.isdigit())
        errors = sum(1 for outcome, _ in rows if not outcome.isdigit())
        times = sorted(seconds * 1000 for _, seconds in rows)
        p95 = times[max(0, int(len(times) * 0.95) - 1)]
        shown = ", ".join(f"{status}: {count}" for status, count in sorted(answers.items()))
        print(f"{kind:<12} {shown:<28} {errors:>6} {statistics.median(times):>8.1f} {p95:>8.1f}")


if __name__ == "__main__":
    main()

"""Remote routing bench: the round trip from a message written on host A to its arrival in an
inbox on host B, over loopback HTTP, against a local delivery on host A in the same run.

    .venv/bin/python bench/remote.py [--messages 200] [--layout v1|v2]

Two envoy roots stand for two hosts, each with its sidecar as a real process on its own
loopback port, peers of each other with a token only they share (signed requests, nonces
recorded). Host A holds the sleeves ann and amy, host B holds ben. One message at a time, ann
writes to her outbox (the way `needlecast send` writes it) and the time until it appears in
the recipient's inbox is taken: to `ben@host-b` (remote: A's sidecar signs a POST to B's, which
writes ben's inbox and acknowledges; then A archives), and, interleaved, to `amy` (local: the
baseline). Figures are printed with the setup they were measured on.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from route import percentile, wait_arrival

from needlecast import mailbox
from needlecast.mailbox import Mailbox
from needlecast.message import Message
from needlecast.sidecar import read_runtime
from needlecast.signing import token_variable

BIN = Path(sys.executable).parent
GAP_SECONDS = 0.02  # pause between samples, so each one starts from idle sidecars
PAIR_TOKEN = "bench-pair-" + "4" * 32


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_host(root: Path, name: str, port: int, other: str, other_port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "NEEDLECAST_PEERS": f"{other}=http://127.0.0.1:{other_port}",
        "NEEDLECAST_PEER_NAME": name,
        token_variable(other): PAIR_TOKEN,
    }
    process = subprocess.Popen(
        [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--port", str(port), "--sweep", "60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 30
    while (read_runtime(root) or {}).get("pid") != process.pid:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"{name}'s sidecar did not start (status {process.poll()})")
        time.sleep(0.01)
    return process


def sample(root_a: Path, root_b: Path, to: str, recipient: Path, ident: str) -> float:
    message = Message(id=ident, sender="ann", to=(to,), type="task", body=f"sample {ident}\n")
    start = time.perf_counter()
    mailbox.append_outbox(Mailbox(root_a / "ann"), message, datetime.now(UTC))
    return (wait_arrival(Mailbox(recipient), ident) - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200, help="samples of each kind (remote and local)")
    parser.add_argument("--layout", choices=("v1", "v2"), default="v2")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="needlecast-remote-") as folder:
        root_a, root_b = Path(folder) / "host-a", Path(folder) / "host-b"
        for root, sleeves in ((root_a, ("ann", "amy")), (root_b, ("ben",))):
            for sleeve in sleeves:
                mailbox.init_mailbox(root / sleeve, args.layout)
            mailbox.init_mailbox(root)
        port_a, port_b = free_port(), free_port()
        hosts = [start_host(root_a, "host-a", port_a, "host-b", port_b), start_host(root_b, "host-b", port_b, "host-a", port_a)]
        remote: list[float] = []
        local: list[float] = []
        try:
            for number in range(args.warmup):
                sample(root_a, root_b, "ben@host-b", root_b / "ben", f"warm-{number}")
            order = ["remote", "local"] * args.messages
            random.Random(16).shuffle(order)
            for number, kind in enumerate(order):
                if kind == "remote":
                    remote.append(sample(root_a, root_b, "ben@host-b", root_b / "ben", f"remote-{number}"))
                else:
                    local.append(sample(root_a, root_b, "amy", root_a / "amy", f"local-{number}"))
                time.sleep(GAP_SECONDS)
        finally:
            for process in hosts:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, layout {args.layout}")
    print(f"{args.messages} samples of each kind, one message at a time, {GAP_SECONDS * 1000:.0f} ms apart, after {args.warmup} warm-up messages")
    print(f"{'delivery':<32}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for label, values in (("local (baseline): ann -> amy", local), ("remote: ann@host-a -> ben@host-b", remote)):
        print(f"{label:<32}{statistics.median(values):>9.1f}{percentile(values, 0.95):>9.1f}{max(values):>9.1f}")


if __name__ == "__main__":
    main()

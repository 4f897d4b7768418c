"""Sidecar routing bench: write-to-inbox latency and burst throughput.

    .venv/bin/python bench/route.py [--layout v1|v2|both] [--messages 100] [--burst 1000]

For each directory size (2, 10 and 50 sleeves) it builds an envoy root in a temporary folder,
starts `needlecast sidecar` as a real process, and measures the time from a message written
to a sender's outbox (the way `needlecast send` writes it) to its appearance in the
recipient's inbox, one message at a time. Then it writes a burst of messages from every
sleeve at once and measures how long the sidecar takes to deliver them all. Figures are
printed with the setup they were measured on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from needlecast import mailbox
from needlecast.mailbox import Mailbox
from needlecast.message import Message

BIN = Path(sys.executable).parent
SIZES = (2, 10, 50)
GAP_SECONDS = 0.02  # pause between latency samples, so each one starts from an idle sidecar


def start_sidecar(root: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--port", "0", "--sweep", "60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runtime = root / ".needlecast" / ".state" / "sidecar.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"sidecar exited with {process.returncode}")
        try:
            if json.loads(runtime.read_text()).get("pid") == process.pid:
                return process
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.01)
    process.kill()
    raise SystemExit("sidecar did not start within 30 s")


def stop_sidecar(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


def inbox_path(box: Mailbox) -> Path:
    return box.inbox_dir if box.inbox_dir.is_dir() else box.inbox_file


def arrived(box: Mailbox, ident: str) -> bool:
    if box.inbox_dir.is_dir():
        return any(name.endswith(f"_{ident}.md") for name in os.listdir(box.inbox_dir))
    try:
        return f"\nid: {ident}\n".encode() in box.inbox_file.read_bytes()
    except FileNotFoundError:
        return False


def wait_arrival(box: Mailbox, ident: str, timeout: float = 10.0) -> float:
    """Poll cheaply (a stat) and read only when the inbox changed; return the arrival time."""
    target = inbox_path(box)
    deadline = time.perf_counter() + timeout
    last = None
    checked = 0.0
    while True:
        now = time.perf_counter()
        try:
            stat = target.stat()
            signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        except FileNotFoundError:
            signature = None
        # A folder's mtime can stay put across a create and a rename in the same clock tick,
        # so look at the content at least every 2 ms as well.
        if signature != last or now - checked > 0.002:
            last, checked = signature, now
            if arrived(box, ident):
                return now
        if now > deadline:
            raise SystemExit(f"message {ident} not delivered within {timeout} s")
        time.sleep(0.0002)


def build(root: Path, count: int, layout: str) -> list[str]:
    names = [f"s{number:02d}" for number in range(count)]
    for name in names:
        mailbox.init_mailbox(root / name, layout)
    return names


def latency(root: Path, names: list[str], samples: int, rng: random.Random, prefix: str = "lat") -> list[float]:
    results = []
    for number in range(samples):
        sender, recipient = rng.sample(names, 2)
        ident = f"{prefix}-{number}"
        message = Message(id=ident, sender=sender, to=(recipient,), type="task", body=f"latency sample {number}\n")
        start = time.perf_counter()
        mailbox.append_outbox(Mailbox(root / sender), message, datetime.now(UTC))
        results.append((wait_arrival(Mailbox(root / recipient), ident) - start) * 1000)
        time.sleep(GAP_SECONDS)
    return results


def write_burst(root: Path, names: list[str], count: int, rng: random.Random) -> dict[str, int]:
    """Write `count` messages as fast as possible from all sleeves; return {recipient: count}."""
    expected: dict[str, int] = {}
    for number in range(count):
        sender, recipient = rng.sample(names, 2)
        message = Message(id=f"burst-{number}", sender=sender, to=(recipient,), type="task", body=f"burst {number}\n")
        mailbox.append_outbox(Mailbox(root / sender), message, datetime.now(UTC))
        expected[recipient] = expected.get(recipient, 0) + 1
    return expected


def wait_burst(root: Path, expected: dict[str, int], start: float) -> float:
    """Wait until every recipient holds its burst messages; return seconds since `start`."""
    deadline = time.perf_counter() + 120
    pending = dict(expected)
    while pending:
        for recipient in list(pending):
            box = Mailbox(root / recipient)
            if box.inbox_dir.is_dir():
                got = sum(1 for name in os.listdir(box.inbox_dir) if "_burst-" in name)
            else:
                got = box.inbox_file.read_bytes().count(b"\nid: burst-")
            if got >= expected[recipient]:
                del pending[recipient]
        if time.perf_counter() > deadline:
            raise SystemExit(f"burst not delivered within 120 s; waiting on {sorted(pending)}")
        time.sleep(0.002)
    return time.perf_counter() - start


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layout", choices=("v1", "v2", "both"), default="both")
    parser.add_argument("--messages", type=int, default=100, help="latency samples per directory size")
    parser.add_argument("--burst", type=int, default=1000, help="messages in the burst")
    parser.add_argument("--burst-sleeves", type=int, default=10, help="directory size for the burst")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    layouts = ("v1", "v2") if args.layout == "both" else (args.layout,)
    print(
        f"needlecast routing bench: Python {platform.python_version()}, {platform.system()} {platform.release()}, "
        f"{os.cpu_count()} CPUs, temp folder {tempfile.gettempdir()}"
    )
    print(f"latency: {args.messages} messages one at a time ({GAP_SECONDS * 1000:.0f} ms apart), random sender and recipient, sidecar with inotify")
    print(f"{'layout':<7}{'sleeves':>8}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for layout in layouts:
        for size in SIZES:
            with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
                root = Path(folder)
                names = build(root, size, layout)
                sidecar = start_sidecar(root)
                try:
                    latency(root, names, 5, random.Random(args.seed), prefix="warm")  # not counted
                    values = latency(root, names, args.messages, random.Random(args.seed + size))
                finally:
                    stop_sidecar(sidecar)
            print(f"{layout:<7}{size:>8}{statistics.median(values):>9.1f}{percentile(values, 0.95):>9.1f}{max(values):>9.1f}")
    print(f"burst: {args.burst} messages from {args.burst_sleeves} sleeves, one recipient each")
    for layout in layouts:
        with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
            root = Path(folder)
            names = build(root, args.burst_sleeves, layout)
            sidecar = start_sidecar(root)
            try:
                start = time.perf_counter()
                expected = write_burst(root, names, args.burst, random.Random(args.seed))
                written = time.perf_counter() - start
                total = wait_burst(root, expected, start)
            finally:
                stop_sidecar(sidecar)
        print(f"{layout:<7} written while the sidecar runs: written in {written:.2f} s, all delivered after {total:.2f} s: {args.burst / total:.0f} messages/s")
        with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
            root = Path(folder)
            names = build(root, args.burst_sleeves, layout)
            expected = write_burst(root, names, args.burst, random.Random(args.seed))
            start = time.perf_counter()
            sidecar = start_sidecar(root)
            ready = time.perf_counter()
            try:
                total = wait_burst(root, expected, ready)
            finally:
                stop_sidecar(sidecar)
        print(f"{layout:<7} backlog routed by a starting sidecar: {total:.2f} s after it was ready: {args.burst / total:.0f} messages/s")


if __name__ == "__main__":
    main()

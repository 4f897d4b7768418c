"""Sidecar routing bench: write-to-inbox latency and burst throughput.

    .venv/bin/python bench/route.py [--layout v1|v2|both] [--messages 100] [--burst 1000]
                                    [--baseline DIR] [--skip-latency]

For each directory size (2, 10 and 50 sleeves) it builds an envoy root in a temporary folder,
starts `needlecast sidecar` as a real process, and measures the time from a message written
to a sender's outbox (the way `needlecast send` writes it) to its appearance in the
recipient's inbox, one message at a time. Then it writes a burst of messages from every
sleeve at once and measures how long the sidecar takes to deliver them all (into every
inbox) and to drain them (archived and gone from every outbox). Figures are printed with the
setup they were measured on.

`--baseline DIR` runs the burst a second time, in the same run, with the sidecar of another
checkout (for example `git worktree add /tmp/needlecast-base <commit>`), so a change is
measured against what it replaces on the same machine at the same moment.
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


def start_sidecar(root: Path, code: Path | None = None) -> subprocess.Popen[bytes]:
    """`needlecast sidecar` for `root`, from this checkout or (`code`) another one."""
    command = [str(BIN / "needlecast")]
    env = dict(os.environ)
    if code is not None:
        # -P: not the current folder first on sys.path (a checkout of this code, usually), but
        # the baseline's, through PYTHONPATH, ahead of the editable install.
        command = [sys.executable, "-P", "-c", "from needlecast.cli import main; main()"]
        env["PYTHONPATH"] = str(code)
    process = subprocess.Popen(
        [*command, "sidecar", "--root", str(root), "--port", "0", "--sweep", "60"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
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


def delivered_count(box: Mailbox) -> int:
    if box.inbox_dir.is_dir():
        return sum(1 for name in os.listdir(box.inbox_dir) if "_burst-" in name)
    return box.inbox_file.read_bytes().count(b"\nid: burst-")


def pending_in_outbox(box: Mailbox) -> bool:
    if box.outbox_dir.is_dir():
        return any(name.endswith(".md") and not name.startswith(".") for name in os.listdir(box.outbox_dir))
    try:
        return b"\nid: burst-" in box.outbox_file.read_bytes()
    except FileNotFoundError:
        return False


def wait_burst(root: Path, expected: dict[str, int], start: float, senders: list[str] | None = None) -> tuple[float, float]:
    """Wait until every recipient holds its burst messages, then (with `senders`) until every
    sender's outbox is empty; return (seconds to delivered, seconds to drained) since `start`."""
    deadline = time.perf_counter() + 120
    pending = dict(expected)
    while pending:
        for recipient in list(pending):
            if delivered_count(Mailbox(root / recipient)) >= expected[recipient]:
                del pending[recipient]
        if time.perf_counter() > deadline:
            raise SystemExit(f"burst not delivered within 120 s; waiting on {sorted(pending)}")
        time.sleep(0.002)
    delivered = time.perf_counter() - start
    waiting = list(senders or [])
    while waiting:
        waiting = [name for name in waiting if pending_in_outbox(Mailbox(root / name))]
        if time.perf_counter() > deadline:
            raise SystemExit(f"outboxes not drained within 120 s: {waiting}")
        time.sleep(0.002)
    return delivered, time.perf_counter() - start


def burst(layout: str, args: argparse.Namespace, code: Path | None) -> tuple[float, float, float, float]:
    """(written while running: write seconds, delivered seconds; backlog: delivered seconds,
    drained seconds) for one layout, with this checkout's sidecar or `code`'s."""
    with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
        root = Path(folder)
        names = build(root, args.burst_sleeves, layout)
        sidecar = start_sidecar(root, code)
        try:
            start = time.perf_counter()
            expected = write_burst(root, names, args.burst, random.Random(args.seed))
            written = time.perf_counter() - start
            running, _ = wait_burst(root, expected, start)
        finally:
            stop_sidecar(sidecar)
    with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
        root = Path(folder)
        names = build(root, args.burst_sleeves, layout)
        expected = write_burst(root, names, args.burst, random.Random(args.seed))
        sidecar = start_sidecar(root, code)
        ready = time.perf_counter()
        try:
            delivered, drained = wait_burst(root, expected, ready, names)
        finally:
            stop_sidecar(sidecar)
    return written, running, delivered, drained


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
    parser.add_argument("--baseline", type=Path, help="another checkout whose sidecar runs the burst too, for comparison")
    parser.add_argument("--skip-latency", action="store_true", help="measure the burst only")
    args = parser.parse_args()
    layouts = ("v1", "v2") if args.layout == "both" else (args.layout,)
    print(
        f"needlecast routing bench: Python {platform.python_version()}, {platform.system()} {platform.release()}, "
        f"{os.cpu_count()} CPUs, temp folder {tempfile.gettempdir()}"
    )
    if args.skip_latency:
        args.messages = 0
    print(f"latency: {args.messages} messages one at a time ({GAP_SECONDS * 1000:.0f} ms apart), random sender and recipient, sidecar with inotify")
    print(f"{'layout':<7}{'sleeves':>8}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for layout in layouts if args.messages else ():
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
    print(f"burst: {args.burst} messages from {args.burst_sleeves} sleeves, one recipient each, in messages/s")
    print("  written while the sidecar runs: delivered end to end (the writer, one durable file or append per message, shares the CPUs)")
    print("  backlog routed by a starting sidecar: delivered into every inbox / drained (archived, gone from every outbox)")
    print(f"{'code':<10}{'layout':<8}{'writer':>9}{'end to end':>12}{'backlog delivered':>19}{'drained':>9}")
    codes: list[tuple[str, Path | None]] = [("baseline", args.baseline)] if args.baseline else []
    codes.append(("this", None))
    for layout in layouts:
        for label, code in codes:
            written, running, delivered, drained = burst(layout, args, code)
            n = args.burst
            print(f"{label:<10}{layout:<8}{n / written:>9.0f}{n / running:>12.0f}{n / delivered:>19.0f}{n / drained:>9.0f}")


if __name__ == "__main__":
    main()

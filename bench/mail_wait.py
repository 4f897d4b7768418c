"""Mail that wakes an agent: how soon `needlecast wait` answers after a message is delivered.

Run: .venv/bin/python bench/mail_wait.py [--rounds 60]

Each round this process starts a wait (`needlecast.wait_for_mail`, a fresh context per round as
each `needlecast wait` has); once it watches the inbox it tells a second process, which
delivers one message into the inbox as the router does (`mailbox.deliver`: under the inbox's
lock, durable) and reports the time before and after the call. The wake-up latency is from the
end of that delivery (the message is on disk) to the waiter's answer; the delivery's own
duration is printed beside. Both layouts (v1: inbox.md, v2: a file per message), with the
inotify watch and with the polling fallback as the baseline of the same run. Last, the whole
command: `needlecast wait` as a process, from the delivery to the first line of its output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import needlecast
from moss_files.foundation.context import Context
from needlecast import mailbox

DELIVERER = r"""
import json, sys, time
from datetime import datetime, timezone
from pathlib import Path
from needlecast import mailbox
from needlecast.message import Message
box = mailbox.Mailbox(Path(sys.argv[1]))
for line in sys.stdin:
    ident = line.strip()
    message = Message(id=ident, sender="bob", to=("alice",), thread=None, type="message", time="2026-11-21T09:00:00Z", body="ping\n")
    before = time.time()
    mailbox.deliver(box, [message], datetime.now(timezone.utc))
    print(json.dumps({"before": before, "after": time.time()}), flush=True)
"""


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def in_process(root: Path, rounds: int, poll: bool) -> tuple[list[float], list[float]]:
    deliverer = subprocess.Popen([sys.executable, "-c", DELIVERER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert deliverer.stdin is not None and deliverer.stdout is not None
    wakes: list[float] = []
    deliveries: list[float] = []
    try:
        for number in range(rounds):
            watching = threading.Event()
            answered: dict[str, float] = {}

            def wait(watching: threading.Event = watching, answered: dict[str, float] = answered) -> None:
                result = needlecast.wait_for_mail(Context(root, notify=lambda _t: watching.set()), timeout=30, poll=poll)
                answered["at"] = time.time()
                answered["count"] = len(result["messages"])

            thread = threading.Thread(target=wait)
            thread.start()
            watching.wait(30)
            deliverer.stdin.write(f"m-{number}\n")
            deliverer.stdin.flush()
            times = json.loads(deliverer.stdout.readline())
            thread.join(60)
            if answered.get("count") != 1:
                raise SystemExit(f"round {number}: the wait did not answer with the message")
            wakes.append((answered["at"] - times["after"]) * 1000)
            deliveries.append((times["after"] - times["before"]) * 1000)
    finally:
        deliverer.stdin.close()
        deliverer.wait(30)
    return wakes, deliveries


def as_process(root: Path, rounds: int) -> list[float]:
    command = [str(Path(sys.executable).with_name("needlecast")), "wait", "--timeout", "30"]
    deliverer = subprocess.Popen([sys.executable, "-c", DELIVERER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert deliverer.stdin is not None and deliverer.stdout is not None
    samples: list[float] = []
    try:
        for number in range(rounds):
            waiter = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert waiter.stderr is not None and waiter.stdout is not None
            waiter.stderr.readline()  # "waiting (inotify) ...": it watches
            deliverer.stdin.write(f"p-{number}\n")
            deliverer.stdin.flush()
            times = json.loads(deliverer.stdout.readline())
            waiter.stdout.readline()  # "id: p-N": the message is printed
            done = time.time()
            waiter.stdout.read()
            waiter.wait(30)
            samples.append((done - times["after"]) * 1000)
    finally:
        deliverer.stdin.close()
        deliverer.wait(30)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="Deliveries per figure.")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    folder = Path(tempfile.mkdtemp(prefix="moss-bench-mail-"))
    try:
        print(f"{'layout':<7} {'watch':<9} {'wake p50 ms':>12} {'p95':>7} {'max':>7} {'delivery p50 ms':>16}")
        for layout in ("v1", "v2"):
            for poll in (False, True):
                root = folder / f"{layout}-{'poll' if poll else 'watch'}"
                root.mkdir()
                mailbox.init_mailbox(root, layout)
                wakes, deliveries = in_process(root, args.rounds, poll)
                label = "polling" if poll else "inotify"
                print(
                    f"{layout:<7} {label:<9} {statistics.median(wakes):>12.2f} {percentile(wakes, 0.95):>7.2f} {max(wakes):>7.2f}"
                    f" {statistics.median(deliveries):>16.2f}"
                )
        root = folder / "process"
        root.mkdir()
        mailbox.init_mailbox(root, "v1")
        samples = as_process(root, max(10, args.rounds // 3))
        print(
            f"`needlecast wait` as a process (v1, inotify), delivery to its first line: p50 {statistics.median(samples):.2f} ms, p95 {percentile(samples, 0.95):.2f} ms"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

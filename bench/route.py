"""Sidecar routing bench: write-to-inbox latency and burst throughput.

    .venv/bin/python bench/route.py [--layout v1|v2|both] [--messages 100] [--burst 1000]
                                    [--baseline DIR] [--skip-latency] [--repeat 1]
                                    [--writers 1] [--sends 30] [--archived 100000]
                                    [--history-only] [--json]

For each directory size (2, 10 and 50 sleeves) it builds an envoy root in a temporary folder,
starts `needlecast sidecar` as a real process, and measures the time from a message written
to a sender's outbox (the way `needlecast send` writes it) to its appearance in the
recipient's inbox, one message at a time. Then it writes a burst of messages from every
sleeve at once and measures how long the sidecar takes to deliver them all (into every
inbox) and to drain them (archived and gone from every outbox). Figures are printed with the
setup they were measured on.

The burst's writer is a separate process running the same checkout as the sidecar: it writes
every message the way `needlecast send` does (one durable file, or one durable append, per
message), one after the other. Each row gives its rate and CPU, the sidecar's CPU (user+sys of
the whole process, all threads) per message, and, as the floor of the end-to-end figure, the
same writer with no sidecar running. Then `needlecast send` itself is timed, one process per
message, as a person's or an agent's loop of sends would run it.

History (`--archived N`, 100,000 by default; 0 skips it): the same latency and a burst on a
directory of two sleeves whose archives already hold N routed messages each (cached by layout
and size in `$TMPDIR/needlecast-bench-corpus/`, copied for each run), beside the same
directory with empty archives measured in the same run: the p95 ratio is the growth with
history. Its burst is written as a batch (`mailbox.append_outbox_many`, what `needlecast send
--batch` does: one durable step for a sender's messages), end to end from the writer's start
to the last delivery, beside the batched writer alone as its floor, and until the last
message is archived and gone from the outboxes ("drain/s"; the sidecar's CPU counts until
then). Each measurement's folder is deleted only when the run ends (`scratch`). `--json` prints the
history rows as one JSON document after the tables. `rows(size)` gives bench/all.py the same
figures with `size` archived messages, and `--rows-only [--sizes N...] [--json PATH] [--quick] [--baseline MOSS]`
writes them for bench/all.py (ROWS_ARGS).

`--baseline DIR` runs the burst a second time, in the same run, with the sidecar and writer of
another checkout (for example `git worktree add /tmp/needlecast-base <commit>`), so a change is
measured against what it replaces on the same machine at the same moment. The two take turns
going first, and the disk is left to settle before each measurement; on a shared machine the
figures still vary from run to run, so `--repeat N` prints each figure's median of N runs.
"""

from __future__ import annotations

import argparse
import atexit
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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/rows.py

from needlecast import mailbox
from needlecast.mailbox import Mailbox
from needlecast.message import Message

BIN = Path(sys.executable).parent
SIZES = (2, 10, 50)
GAP_SECONDS = 0.02  # pause between latency samples, so each one starts from an idle sidecar
SETTLE_SECONDS = 1.0  # quiet time before each burst measurement


# A burst's writer: argv root, count, seed, sleeve names, its number and the number of writers
# (it writes the messages whose number it is modulo that); prints its start, end and CPU. Each
# message carries its time, as `needlecast send` writes it.
WRITER = """
import json, random, sys, time
from datetime import UTC, datetime
from dataclasses import dataclass
from pathlib import Path
from needlecast import mailbox
from needlecast.mailbox import Mailbox
from needlecast.message import Message
root, count, rng, names = Path(sys.argv[1]), int(sys.argv[2]), random.Random(int(sys.argv[3])), sys.argv[4].split(",")
mine, writers = int(sys.argv[5]), int(sys.argv[6])
plan = [(number, rng.sample(names, 2)) for number in range(count)]
start, cpu = time.monotonic(), time.process_time()
for number, (sender, recipient) in plan[mine::writers]:
    message = Message(id=f"burst-{number}", sender=sender, to=(recipient,), type="task", time=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), body=f"burst {number}\\n")
    mailbox.append_outbox(Mailbox(root / sender), message, datetime.now(UTC))
print(json.dumps({"start": start, "end": time.monotonic(), "cpu": time.process_time() - cpu}))
"""


# A batched burst's writer: argv root, count, seed, sleeve names; each sender's messages go to
# its outbox in one call (`append_outbox_many`, what `needlecast send --batch` runs), or one by
# one where the checkout has no such call, each with the batch's time as `send --batch` gives
# it; prints its start, end, CPU and whether it batched.
BATCH_WRITER = """
import json, random, sys, time
from datetime import UTC, datetime
from pathlib import Path
from needlecast import mailbox
from needlecast.mailbox import Mailbox
from needlecast.message import Message
root, count, rng, names, prefix = Path(sys.argv[1]), int(sys.argv[2]), random.Random(int(sys.argv[3])), sys.argv[4].split(","), sys.argv[5]
stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # `send --batch` gives every message the batch's time
by_sender = {}
for number in range(count):
    sender, recipient = rng.sample(names, 2)
    by_sender.setdefault(sender, []).append(Message(id=f"{prefix}-{number}", sender=sender, to=(recipient,), type="task", time=stamp, body=f"burst {number}\\n"))
batched = hasattr(mailbox, "append_outbox_many")
start, cpu = time.monotonic(), time.process_time()
for sender, messages in by_sender.items():
    if batched:
        mailbox.append_outbox_many(Mailbox(root / sender), messages, datetime.now(UTC))
    else:
        for message in messages:
            mailbox.append_outbox(Mailbox(root / sender), message, datetime.now(UTC))
print(json.dumps({"start": start, "end": time.monotonic(), "cpu": time.process_time() - cpu, "batched": batched}))
"""


def python_of(code: Path | None) -> tuple[list[str], dict[str, str]]:
    """The command that runs Python code against this checkout or (`code`) another one."""
    env = dict(os.environ)
    if code is None:
        return [sys.executable], env
    # -P: not the current folder first on sys.path (a checkout of this code, usually), but the
    # other checkout's, through PYTHONPATH, ahead of the editable install.
    env["PYTHONPATH"] = str(code)
    return [sys.executable, "-P"], env


def process_cpu(pid: int) -> float | None:
    """User+sys seconds of a running process, all its threads (Linux); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_sidecar(root: Path, code: Path | None = None) -> subprocess.Popen[bytes]:
    """`needlecast sidecar` for `root`, from this checkout or (`code`) another one."""
    command = [str(BIN / "needlecast")]
    env = dict(os.environ)
    if code is not None:
        python, env = python_of(code)
        command = [*python, "-c", "from needlecast.cli import main; main()"]
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


def write_burst(root: Path, names: list[str], count: int, seed: int, code: Path | None, writers: int = 1) -> tuple[dict[str, int], float, float, float]:
    """Write `count` messages as fast as possible from all sleeves, in `writers` processes of
    this checkout or `code`'s at once; return ({recipient: count}, the first start and the last
    end on the monotonic clock, the writers' CPU seconds)."""
    python, env = python_of(code)
    processes = [
        subprocess.Popen([*python, "-c", WRITER, str(root), str(count), str(seed), ",".join(names), str(mine), str(writers)], env=env, stdout=subprocess.PIPE)
        for mine in range(writers)
    ]
    reports = []
    for process in processes:
        out, _err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"a writer failed with {process.returncode}")
        reports.append(json.loads(out))
    times = {"start": min(r["start"] for r in reports), "end": max(r["end"] for r in reports), "cpu": sum(r["cpu"] for r in reports)}
    rng = random.Random(seed)
    expected: dict[str, int] = {}
    for _number in range(count):
        _sender, recipient = rng.sample(names, 2)
        expected[recipient] = expected.get(recipient, 0) + 1
    return expected, times["start"], times["end"], times["cpu"]


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
    deadline = time.monotonic() + 120
    pending = dict(expected)
    while pending:
        for recipient in list(pending):
            if delivered_count(Mailbox(root / recipient)) >= expected[recipient]:
                del pending[recipient]
        if time.monotonic() > deadline:
            raise SystemExit(f"burst not delivered within 120 s; waiting on {sorted(pending)}")
        time.sleep(0.002)
    delivered = time.monotonic() - start
    waiting = list(senders or [])
    while waiting:
        waiting = [name for name in waiting if pending_in_outbox(Mailbox(root / name))]
        if time.monotonic() > deadline:
            raise SystemExit(f"outboxes not drained within 120 s: {waiting}")
        time.sleep(0.002)
    return delivered, time.monotonic() - start


@dataclass
class Burst:
    """One layout's burst figures for one checkout (seconds; CPU in seconds, None off Linux)."""

    alone: float  # the writer with no sidecar running: the floor of `running`
    alone_cpu: float
    written: float  # the writer while the sidecar runs
    written_cpu: float
    running: float  # from the writer's start to the last delivery
    running_sidecar_cpu: float | None
    delivered: float  # backlog, from the sidecar's start
    drained: float
    backlog_sidecar_cpu: float | None


def settle() -> None:
    """Let the disk catch up with the previous measurement before the next one starts: the
    thousands of files a burst leaves are written back and, once its folder is deleted, freed
    (and discarded, on a mount with `discard`) in the background, which would otherwise slow
    whatever runs next."""
    os.sync()
    time.sleep(SETTLE_SECONDS)


def burst(layout: str, args: argparse.Namespace, code: Path | None) -> Burst:
    """The burst of one layout with this checkout's sidecar and writer, or `code`'s."""
    settle()
    with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
        root = Path(folder)
        names = build(root, args.burst_sleeves, layout)
        _expected, start, end, alone_cpu = write_burst(root, names, args.burst, args.seed, code, args.writers)
        alone = end - start
    settle()
    with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
        root = Path(folder)
        names = build(root, args.burst_sleeves, layout)
        sidecar = start_sidecar(root, code)
        try:
            before = process_cpu(sidecar.pid)
            expected, start, end, written_cpu = write_burst(root, names, args.burst, args.seed, code, args.writers)
            running, _ = wait_burst(root, expected, start)
            after = process_cpu(sidecar.pid)
        finally:
            stop_sidecar(sidecar)
    running_cpu = after - before if after is not None and before is not None else None
    with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
        root = Path(folder)
        names = build(root, args.burst_sleeves, layout)
        expected, _start, _end, _cpu = write_burst(root, names, args.burst, args.seed, code, args.writers)
        settle()
        sidecar = start_sidecar(root, code)
        ready = time.monotonic()
        try:
            before = process_cpu(sidecar.pid)
            delivered, drained = wait_burst(root, expected, ready, names)
            after = process_cpu(sidecar.pid)
        finally:
            stop_sidecar(sidecar)
    backlog_cpu = after - before if after is not None and before is not None else None
    return Burst(alone, alone_cpu, end - start, written_cpu, running, running_cpu, delivered, drained, backlog_cpu)


def send_processes(layout: str, count: int, code: Path | None) -> tuple[float, float]:
    """`needlecast send` run `count` times, one process each, into one sleeve's outbox (no
    sidecar); return (seconds per send, CPU seconds per send process)."""
    python, env = python_of(code)
    command = [*python, "-c", "from needlecast.cli import main; main()"] if code is not None else [str(BIN / "needlecast")]
    with tempfile.TemporaryDirectory(prefix="needlecast-bench-") as folder:
        root = Path(folder)
        build(root, 2, layout)
        start = time.monotonic()
        cpu = 0.0
        for number in range(count):
            process = subprocess.Popen(
                [*command, "send", "--root", str(root / "s00"), "--to", "s01", f"send {number}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            _pid, status, usage = os.wait4(process.pid, 0)
            if status != 0:
                raise SystemExit(f"needlecast send failed: {process.stderr.read().decode() if process.stderr else status}")
            cpu += usage.ru_utime + usage.ru_stime
        return (time.monotonic() - start) / count, cpu / count


def median_burst(runs: list[Burst]) -> Burst:
    """Each figure's median over several runs (the figures of one row may come from different runs)."""

    def middle(values: list[float | None]) -> float | None:
        known = [value for value in values if value is not None]
        return statistics.median(known) if known else None

    fields = Burst.__dataclass_fields__
    return Burst(**{name: middle([getattr(run, name) for run in runs]) for name in fields})  # type: ignore[arg-type]


def per_message_ms(seconds: float | None, count: int) -> str:
    return "-" if seconds is None else f"{seconds * 1000 / count:.2f}"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


HISTORY_SLEEVES = ("s00", "s01")


def archive_corpus(layout: str, archived: int) -> Path:
    """A directory of two sleeves whose archives hold `archived` routed messages each, written
    once per layout and size under `$TMPDIR/needlecast-bench-corpus/` (the same bytes each
    time) and reused by later runs."""
    from needlecast import message as msg

    # "-months": v2 copies in a folder per month; a cache an older bench wrote with every copy at
    # the top is not reused (its first routing pass rotated all of them, 8 s at 100,000).
    cache = Path(tempfile.gettempdir()) / "needlecast-bench-corpus" / (f"{layout}-{archived}-months" if layout == "v2" else f"{layout}-{archived}")
    if (cache / "complete").exists():
        return cache
    if cache.exists():
        subprocess.run(["rm", "-rf", str(cache)], check=True)
    cache.mkdir(parents=True)
    first = datetime(2025, 1, 1, tzinfo=UTC)
    for sender in HISTORY_SLEEVES:
        box = mailbox.init_mailbox(cache / sender, layout)
        other = next(name for name in HISTORY_SLEEVES if name != sender)
        copies = []
        for number in range(archived):
            when = (first + timedelta(seconds=300 * number)).strftime("%Y-%m-%dT%H:%M:%SZ")
            copies.append(
                Message(
                    id=f"old-{sender}-{number}",
                    sender=sender,
                    to=(other,),
                    type="task",
                    time=when,
                    body=f"archived message {number}\n",
                    extra={"routed": when, "delivered_to": [other]},
                )
            )
        if layout == "v2":
            # As rotation leaves an archive (docs/formats.md, "Rotation"): a folder per month.
            for copy in copies:
                name = mailbox.message_file_name(copy, first)
                month = box.archive_dir / name[:7]
                month.mkdir(parents=True, exist_ok=True)
                (month / name).write_bytes(msg.render_message_document(copy).encode())
        else:
            box.archive_file.write_text("# Archive\n\n" + "".join(msg.render_block(copy) for copy in copies))
    (cache / "complete").write_text("")
    return cache


def history_copy(layout: str, archived: int, into: Path) -> Path:
    """A fresh copy of the archive corpus in `into` (v2's message files hard-linked: nothing
    rewrites an archive file in place; v1's archive.md copied, as routing appends to it)."""
    root = into / "root"
    if archived == 0:
        build(root, len(HISTORY_SLEEVES), layout)
        return root
    corpus = archive_corpus(layout, archived)
    subprocess.run(["cp", "-a" if layout == "v1" else "-al", str(corpus), str(root)], check=True)
    return root


def batch_burst(root: Path, count: int, seed: int, code: Path | None, prefix: str) -> tuple[dict[str, int], dict[str, Any]]:
    """Write a burst of `count` messages as one batch per sender (BATCH_WRITER); return
    ({recipient: count}, the writer's report)."""
    python, env = python_of(code)
    process = subprocess.run([*python, "-c", BATCH_WRITER, str(root), str(count), str(seed), ",".join(HISTORY_SLEEVES), prefix], env=env, capture_output=True)
    if process.returncode != 0:
        raise SystemExit(f"the batch writer failed: {process.stderr.decode()[-2000:]}")
    rng = random.Random(seed)
    expected: dict[str, int] = {}
    for _number in range(count):
        _sender, recipient = rng.sample(list(HISTORY_SLEEVES), 2)
        expected[recipient] = expected.get(recipient, 0) + 1
    return expected, json.loads(process.stdout)


_SCRATCH: list[tempfile.TemporaryDirectory[str]] = []


def scratch() -> Path:
    """A fresh folder for one measurement of the history rows, deleted when the run ends
    (`atexit`), not right after it. Deleting its thousands of files at once would slow the
    next measurement's file creations: this VM's ext4 runs without a journal, and then a new
    inode skips every inode of its block group freed in the last minute (docs/needlecast.md,
    "Performance"), which made the end-to-end figure swing by half between turns with the
    turn before it, not with the code measured."""
    if not _SCRATCH:
        atexit.register(lambda: [folder.cleanup() for folder in _SCRATCH])
    _SCRATCH.append(tempfile.TemporaryDirectory(prefix="needlecast-bench-"))
    return Path(_SCRATCH[-1].name)


def history_row(layout: str, archived: int, args: argparse.Namespace, code: Path | None) -> dict[str, Any]:
    """Latency and a batched burst on the two-sleeve directory with `archived` messages in each
    archive: p50/p95 ms, the writer alone and end to end in messages/s, the sidecar's CPU."""
    names = list(HISTORY_SLEEVES)
    row: dict[str, Any] = {"layout": layout, "archived": archived, "code": "baseline" if code else "this"}
    root = history_copy(layout, archived, scratch())
    settle()
    sidecar = start_sidecar(root, code)
    try:
        latency(root, names, 5, random.Random(args.seed), prefix="warm")
        values = latency(root, names, args.messages, random.Random(args.seed + 1))
        settle()
        before = process_cpu(sidecar.pid)
        expected, report = batch_burst(root, args.burst, args.seed, code, "hburst")
        start = report["start"]
        running, _ = wait_history_burst(root, expected, start, "hburst")
        # The sidecar's CPU counts until every message is archived and gone from the outboxes
        # (a busy pass may leave its archive copies until the burst is over).
        drained = wait_drained(root, start)
        after = process_cpu(sidecar.pid)
    finally:
        stop_sidecar(sidecar)
    root = history_copy(layout, archived, scratch())
    settle()
    _expected, alone = batch_burst(root, args.burst, args.seed, code, "hburst")
    row.update(
        p50_ms=statistics.median(values) if values else None,
        p95_ms=percentile(values, 0.95) if values else None,
        max_ms=max(values) if values else None,
        batched=report["batched"],
        writer_alone_per_s=args.burst / (alone["end"] - alone["start"]),
        end_to_end_per_s=args.burst / running,
        drained_per_s=args.burst / drained,
        sidecar_cpu_ms_per_message=None if after is None or before is None else (after - before) * 1000 / args.burst,
    )
    return row


def wait_drained(root: Path, start: float) -> float:
    """Wait until no sender's outbox holds a message, set aside or not; return the seconds
    since `start`."""
    deadline = time.monotonic() + 300
    while True:
        waiting = []
        for sender in HISTORY_SLEEVES:
            box = Mailbox(root / sender)
            if box.outbox_dir.is_dir():
                waiting += [name for name in os.listdir(box.outbox_dir) if name.endswith(".md") or ".md.tmp-aside-" in name]
            elif pending_in_outbox(box):
                waiting.append(sender)
        if not waiting:
            return time.monotonic() - start
        if time.monotonic() > deadline:
            raise SystemExit(f"outboxes not drained within 300 s: {waiting[:5]}")
        time.sleep(0.002)


def wait_history_burst(root: Path, expected: dict[str, int], start: float, prefix: str) -> tuple[float, float]:
    """`wait_burst` for a burst whose ids start with `prefix`."""
    deadline = time.monotonic() + 300
    pending = dict(expected)
    while pending:
        for recipient in list(pending):
            box = Mailbox(root / recipient)
            if box.inbox_dir.is_dir():
                count = sum(1 for name in os.listdir(box.inbox_dir) if f"_{prefix}-" in name)
            else:
                count = box.inbox_file.read_bytes().count(f"\nid: {prefix}-".encode())
            if count >= expected[recipient]:
                del pending[recipient]
        if time.monotonic() > deadline:
            raise SystemExit(f"history burst not delivered within 300 s; waiting on {sorted(pending)}")
        time.sleep(0.002)
    return time.monotonic() - start, 0.0


def print_history(rows: list[dict[str, Any]]) -> None:
    """The history table: each row beside the same code and layout with empty archives."""
    print(
        f"{'code':<10}{'layout':<8}{'archived':>9}{'p50 ms':>8}{'p95 ms':>8}{'p95 ratio':>10}{'alone/s':>9}{'e2e/s':>8}{'e2e ratio':>10}{'drain/s':>9}{'cpu ms':>8}{'batched':>8}"
    )
    floors = {(row["code"], row["layout"]): row for row in rows if row["archived"] == 0}
    for row in rows:
        floor = floors.get((row["code"], row["layout"]))
        row["p95_ratio"] = row["p95_ms"] / floor["p95_ms"] if floor and floor["p95_ms"] else None
        row["end_to_end_ratio_to_alone"] = row["end_to_end_per_s"] / row["writer_alone_per_s"]
        cpu = row["sidecar_cpu_ms_per_message"]
        print(
            f"{row['code']:<10}{row['layout']:<8}{row['archived']:>9}{row['p50_ms']:>8.1f}{row['p95_ms']:>8.1f}"
            f"{(row['p95_ratio'] or 0):>10.2f}{row['writer_alone_per_s']:>9.0f}{row['end_to_end_per_s']:>8.0f}"
            f"{row['end_to_end_ratio_to_alone']:>10.2f}{row['drained_per_s']:>9.0f}{'-' if cpu is None else f'{cpu:.2f}':>8}{'yes' if row['batched'] else 'no':>8}"
        )


# bench/all.py runs `route.py --rows-only --sizes N... --json PATH` (bench/rows.py).
ROWS_ARGS = ["--rows-only"]


def table_rows(size: int, turns: int = 3, baseline: Path | None = None) -> list[Any]:
    """Issue 29's rows with `size` messages already in each archive, as `bench/rows.Row`s: per
    layout, the route latency p95 beside the same with empty archives (the floor; target
    ≤ 1.2× it: a lower ratio is the shared machine's noise, history cannot make routing
    faster), and a batched burst of 1,000 end to end (target ≥ 1,000 messages/s) beside the
    batched writer alone. Empty and full take turns `turns` times (one run's p95 swings by half
    on a shared machine); the medians are compared. With `baseline` (another checkout) its
    rows too, as "baseline", each turn measured right after this checkout's."""
    import rows as shared

    args = argparse.Namespace(messages=80, burst=1000, seed=7)
    result: list[Any] = []
    keys = ("p95_ms", "end_to_end_per_s", "writer_alone_per_s", "drained_per_s", "sidecar_cpu_ms_per_message")
    builds: list[tuple[str, Path | None]] = [("this", None)] + ([("baseline", baseline)] if baseline is not None else [])
    for layout in ("v1", "v2"):
        empties: dict[str, list[dict[str, Any]]] = {label: [] for label, _code in builds}
        fulls: dict[str, list[dict[str, Any]]] = {label: [] for label, _code in builds}
        for _turn in range(turns):
            for label, code in builds:
                empties[label].append(history_row(layout, 0, args, code))
                fulls[label].append(history_row(layout, size, args, code))
        for label, _code in builds:
            empty = {key: statistics.median((row[key] or 0.0) for row in empties[label]) for key in keys}
            full = {key: statistics.median((row[key] or 0.0) for row in fulls[label]) for key in keys}
            result.append(
                shared.Row(
                    f"route p95, {layout}, archived vs empty",
                    size,
                    full["p95_ms"],
                    "ms",
                    shared.RATIO,
                    1.2,
                    floor=empty["p95_ms"],
                    floor_name="p95 with empty archives",
                    build=label,
                    note=f"medians of {turns} turns",
                )
            )
            result.append(
                shared.Row(
                    f"burst via send --batch, {layout}",
                    size,
                    full["end_to_end_per_s"],
                    "msg/s",
                    shared.AT_LEAST,
                    1000,
                    floor=full["writer_alone_per_s"],
                    floor_name="the batched writer alone",
                    build=label,
                    note=f"1,000 messages; medians of {turns} turns; archived and drained at {full['drained_per_s']:,.0f} msg/s, sidecar CPU {full['sidecar_cpu_ms_per_message']:.2f} ms/msg",
                )
            )
    return result


def rows_main() -> None:
    """`--rows-only`: measure issue 29's rows at each size and write them (bench/all.py)."""
    import rows as shared

    parser = argparse.ArgumentParser(description="issue 29's routing rows")
    shared.add_common_arguments(parser)
    parser.add_argument("--rows-only", action="store_true")
    args = parser.parse_args()
    moss = shared.baseline_moss(args.baseline)
    baseline = Path(moss).resolve().parent.parent.parent if moss else None  # <checkout>/.venv/bin/moss
    found = [
        row
        for size in shared.sizes(args.sizes, shared.QUICK_SIZES if args.quick else shared.DEFAULT_SIZES)
        for row in table_rows(size, 1 if args.quick else 3, baseline)
    ]
    shared.print_rows(found)
    shared.write_rows(args.json, found)


def main() -> None:
    if "--rows-only" in sys.argv:
        rows_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layout", choices=("v1", "v2", "both"), default="both")
    parser.add_argument("--messages", type=int, default=100, help="latency samples per directory size")
    parser.add_argument("--burst", type=int, default=1000, help="messages in the burst")
    parser.add_argument("--burst-sleeves", type=int, default=10, help="directory size for the burst")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another checkout whose sidecar runs the burst too, for comparison")
    parser.add_argument("--skip-latency", action="store_true", help="measure the burst only")
    parser.add_argument("--repeat", type=int, default=1, help="burst runs per checkout and layout; the medians are printed")
    parser.add_argument("--writers", type=int, default=1, help="writer processes sharing the burst, writing at once")
    parser.add_argument("--sends", type=int, default=30, help="`needlecast send` processes timed (0: none)")
    parser.add_argument("--archived", type=int, default=100_000, help="messages already in each archive for the history rows (0: no history rows)")
    parser.add_argument("--history-only", action="store_true", help="measure the history rows only")
    parser.add_argument("--json", action="store_true", help="print the history rows as JSON after the tables")
    args = parser.parse_args()
    layouts = ("v1", "v2") if args.layout == "both" else (args.layout,)
    print(
        f"needlecast routing bench: Python {platform.python_version()}, {platform.system()} {platform.release()}, "
        f"{os.cpu_count()} CPUs, temp folder {tempfile.gettempdir()}"
    )
    if args.history_only:
        history(args, layouts)
        return
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
    print(f"burst: {args.burst} messages from {args.burst_sleeves} sleeves, one recipient each, in messages/s; CPU in ms per message")
    print(
        f"  writer: {args.writers} process(es) writing every message (one durable file or append each), alone (the floor of end to end) and while the sidecar runs"
    )
    print(
        "  end to end: from the writer's start to the last delivery; backlog: routed by a starting sidecar, delivered / drained (archived, gone from every outbox)"
    )
    print(f"{'code':<10}{'layout':<8}{'alone':>7}{'writer':>8}{'w cpu':>7}{'end to end':>12}{'sidecar cpu':>13}{'backlog':>9}{'drained':>9}{'sidecar cpu':>13}")
    codes: list[tuple[str, Path | None]] = [("baseline", args.baseline)] if args.baseline else []
    codes.append(("this", None))
    n = args.burst
    if args.repeat > 1:
        print(f"  each figure the median of {args.repeat} runs; the checkouts take turns going first")
    for layout in layouts:
        runs: dict[str, list[Burst]] = {label: [] for label, _code in codes}
        for number in range(args.repeat):
            # Whichever goes second pays for the files the first one left: take turns.
            for label, code in codes if number % 2 == 0 else reversed(codes):
                runs[label].append(burst(layout, args, code))
        for label, _code in codes:
            b = median_burst(runs[label])
            print(
                f"{label:<10}{layout:<8}{n / b.alone:>7.0f}{n / b.written:>8.0f}{per_message_ms(b.written_cpu, n):>7}{n / b.running:>12.0f}"
                f"{per_message_ms(b.running_sidecar_cpu, n):>13}{n / b.delivered:>9.0f}{n / b.drained:>9.0f}{per_message_ms(b.backlog_sidecar_cpu, n):>13}"
            )
    if args.sends:
        print(f"`needlecast send`, {args.sends} processes one after another (no sidecar): ms per send, wall / CPU")
        for layout in layouts:
            for label, code in codes:
                wall, cpu = send_processes(layout, args.sends, code)
                print(f"{label:<10}{layout:<8}{wall * 1000:>9.0f}{cpu * 1000:>7.0f}")
    if args.archived:
        history(args, layouts)


def history(args: argparse.Namespace, layouts: tuple[str, ...]) -> None:
    """The history rows: each layout with empty archives (the floor) and with `--archived`."""
    print(
        f"history: 2 sleeves, {args.archived} messages already in each sender's archive beside empty archives; latency of {args.messages} messages; "
        f"a burst of {args.burst} written as one batch per sender, end to end (writer start to last delivery) beside the batched writer alone"
    )
    codes: list[tuple[str, Path | None]] = [("this", None)] + ([("baseline", args.baseline)] if args.baseline else [])
    rows = [history_row(layout, archived, args, code) for layout in layouts for _label, code in codes for archived in (0, args.archived)]
    print_history(rows)
    if args.json:
        print(json.dumps({"bench": "route-history", "cpus": os.cpu_count(), "load": os.getloadavg(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

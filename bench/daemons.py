"""Long-running daemons under a compressed day of traffic: RSS and open file descriptors of the
needlecast sidecar and of `moss serve --http`, round by round, flat after warm-up or not.

    .venv/bin/python bench/daemons.py [--size 20000] [--rounds 24] [--warmup 12] [--json]

A day is compressed into `--rounds` rounds (one per simulated hour), run back to back:

- the sidecar (`needlecast sidecar --no-index-watch`, a real process) on an envoy root of 4
  sleeves (layout v2 and v1, two each): each round every sleeve sends its share of `--size`
  messages as one batch (`mailbox.append_outbox_many`, what `needlecast send --batch` does) to
  random others, and /health, /status, /outbox and /sleeves are asked for; the round ends when
  every message is delivered. Over the run the archives rotate and the journals compact, as
  they would over a day (docs/formats.md, "Rotation").
- `moss serve --http 127.0.0.1:0` on a workspace with a board of 1,000 tasks: each round
  serves its share of `--size` / 5 requests (the board page, a filtered column, a static file,
  one task in ten edited in between as a CLI edit would, so the daemon's caches see changes).

After each round the daemon's VmRSS (/proc/<pid>/status) and its open descriptors (the
entries of /proc/<pid>/fd) are read, the least of five readings 10 ms apart (a pass that is
still closing its folders is no leak). Warm-up is half the day by default. A router's journal
(docs/formats.md, "Rotation") is rewritten down to its 1,024 newest records whenever it doubles,
so its working set (about 2,000 records a sender, ~230 bytes each in memory) is first reached
after about 2,500 messages a sender: after the warm-up at --quick (1,250 a sender by then).
RSS: the figure is the value at the end of the day, the floor the value at the end of the
warm-up (target: ≤ 1.10×). Descriptors: the most after warm-up beside the most during it
(target: ≤ 1.00×). The RSS slope after warm-up (least squares, per round) is printed too: a
steady leak shows as a slope that does not shrink with more rounds.

`rows(size)` returns the rows as dicts; `--rows-only [--sizes N...] [--json PATH]` writes them
for bench/all.py (ROWS_ARGS). Nothing outside temporary folders is written.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from board import build_board

from moss_files import scaffold
from needlecast import mailbox
from needlecast.mailbox import Mailbox
from needlecast.message import Message

BIN = Path(sys.executable).parent
SLEEVES = {"s0": "v2", "s1": "v2", "s2": "v1", "s3": "v1"}
BOARD_TASKS = 1000
RSS_TARGET = 1.10


def process_figures(pid: int, samples: int = 5) -> tuple[float, int]:
    """(VmRSS in MiB, open file descriptors) of process `pid`: the least of `samples` readings
    10 ms apart, so that a pass still closing its folders does not count as a leak."""
    readings = []
    for number in range(samples):
        if number:
            time.sleep(0.01)
        status = Path(f"/proc/{pid}/status").read_text()
        rss_kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        readings.append((rss_kib / 1024, len(os.listdir(f"/proc/{pid}/fd"))))
    return min(rss for rss, _fds in readings), min(fds for _rss, fds in readings)


def get(port: int, path: str) -> int:
    """GET `path` on a fresh loopback connection; return the body's length."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status} {body[:300]!r}")
        return len(body)
    finally:
        connection.close()


def wait_for_record(path: Path, process: subprocess.Popen[bytes], what: str) -> dict[str, Any]:
    """The daemon's runtime record once it names `process`."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            record = json.loads(path.read_text())
            if record.get("pid") == process.pid:
                return dict(record)
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.01)
    process.kill()
    raise SystemExit(f"{what} did not start within 60 s")


@contextmanager
def running(command: list[str], cwd: Path, record: Path, what: str) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield process, wait_for_record(record, process, what)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def sidecar_day(size: int, rounds: int, seed: int) -> list[tuple[float, int]]:
    """The sidecar's (RSS MiB, descriptors) after each round of a compressed day."""
    rng = random.Random(seed)
    per_round = max(len(SLEEVES), size // rounds)
    series: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory(prefix="moss-bench-daemons-") as folder:
        root = Path(folder) / "envoy"
        for name, layout in SLEEVES.items():
            mailbox.init_mailbox(root / name, layout)
        command = [str(BIN / "needlecast"), "sidecar", "--root", str(root), "--port", "0", "--no-index-watch"]
        with running(command, root, root / ".needlecast" / ".state" / "sidecar.json", "the sidecar") as (process, record):
            port = int(record["port"])
            delivered = {name: 0 for name in SLEEVES}
            for number in range(rounds):
                for index, sender in enumerate(SLEEVES):
                    share = per_round // len(SLEEVES) + (1 if index < per_round % len(SLEEVES) else 0)
                    messages = []
                    for serial in range(share):
                        recipient = rng.choice([name for name in SLEEVES if name != sender])
                        delivered[recipient] += 1
                        messages.append(
                            Message(id=f"r{number}-{sender}-{serial}", sender=sender, to=(recipient,), type="task", body=f"round {number}, message {serial}\n")
                        )
                    mailbox.append_outbox_many(Mailbox(root / sender), messages, datetime.now(UTC))
                for path in ("/health", "/status", "/outbox", "/sleeves"):
                    get(port, path)
                wait_delivered(root, delivered)
                series.append(process_figures(process.pid))
    return series


def inbox_count(box: Mailbox) -> int:
    if box.inbox_dir.is_dir():
        return len(mailbox.message_names(box.inbox_dir))
    return box.inbox_file.read_bytes().count(b"\nid: r")


def wait_delivered(root: Path, expected: dict[str, int]) -> None:
    """Poll until every inbox holds what was sent to it (5 minutes at most)."""
    deadline = time.monotonic() + 300
    while any(inbox_count(Mailbox(root / name)) < count for name, count in expected.items()):
        if time.monotonic() > deadline:
            raise SystemExit("the round's messages were not delivered within 5 minutes")
        time.sleep(0.01)


def write_workspace(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    build_board(root, BOARD_TASKS, claimable=100)


def serve_day(size: int, rounds: int, seed: int) -> list[tuple[float, int]]:
    """`moss serve --http`'s (RSS MiB, descriptors) after each round of a compressed day."""
    from moss_files.board import editing, queries
    from moss_files.foundation.context import Context

    rng = random.Random(seed)
    per_round = max(4, size // 5 // rounds)
    series: list[tuple[float, int]] = []
    with tempfile.TemporaryDirectory(prefix="moss-bench-daemons-") as folder:
        root = Path(folder) / "project"
        root.mkdir()
        write_workspace(root)
        ctx = Context(root)
        tasks = [task["id"] for task in queries.list_tasks(ctx)["tasks"]]
        command = [str(BIN / "moss"), "serve", "--http", "127.0.0.1:0"]
        with running(command, root, root / ".moss" / "run" / "mcp.json", "moss serve") as (process, record):
            port = int(record["port"])
            requests: list[Callable[[], object]] = [
                lambda: get(port, "/board"),
                lambda: get(port, "/board?status=BACKLOG&limit=100"),
                lambda: get(port, "/static/style.css"),
            ]
            for number in range(rounds):
                for serial in range(per_round):
                    if serial % 10 == 9:
                        editing.update_task(ctx, task_id=rng.choice(tasks), title=f"edited in round {number}, {serial}")
                    else:
                        requests[serial % len(requests)]()
                series.append(process_figures(process.pid))
    return series


def slope(values: list[float]) -> float:
    """Least-squares slope of `values` against their index."""
    count = len(values)
    if count < 2:
        return 0.0
    mean_x, mean_y = (count - 1) / 2, sum(values) / count
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values)) / sum((x - mean_x) ** 2 for x in range(count))


# bench/all.py runs `daemons.py --rows-only --sizes N... --json PATH` (bench/rows.py).
ROWS_ARGS = ["--rows-only"]


def day_rows(daemon: str, size: int, series: list[tuple[float, int]], warmup: int) -> list[Any]:
    """The RSS and descriptor rows (`bench/rows.Row`) of one daemon's series: RSS at the end
    of the day beside the end of the warm-up (target ≤ RSS_TARGET×); descriptors, the most
    after warm-up beside the most during it (a leak raises the most; a descriptor a pass holds
    at the instant of a reading does not; target ≤ 1×)."""
    import rows as shared

    warm, last = series[min(warmup, len(series)) - 1], series[-1]
    fd_floor = max(fds for _rss, fds in series[:warmup])
    fd_figure = max(fds for _rss, fds in series[warmup:]) if len(series) > warmup else last[1]
    rss_series = " ".join(f"{rss:.1f}" for rss, _fds in series)
    fd_series = " ".join(str(fds) for _rss, fds in series)
    return [
        shared.Row(
            f"{daemon} RSS, compressed day",
            size,
            last[0],
            "MiB",
            shared.RATIO,
            RSS_TARGET,
            floor=warm[0],
            floor_name=f"RSS after {warmup} rounds of warm-up",
            note=f"per round: {rss_series}; slope after warm-up {slope([rss for rss, _fds in series[warmup:]]):.3f} MiB/round",
        ),
        shared.Row(
            f"{daemon} fds after warm-up",
            size,
            fd_figure,
            "fds",
            shared.RATIO,
            1.0,
            floor=fd_floor,
            floor_name="the most during warm-up",
            note=f"per round: {fd_series}",
        ),
    ]


def table_rows(size: int, rounds: int = 24, warmup: int = 12, seed: int = 29) -> list[Any]:
    """Issue 29's daemon rows (`bench/rows.Row`): `size` messages through the sidecar and
    `size` / 5 requests to `moss serve --http`, each over `rounds` rounds; the floors are the
    values after `warmup` rounds."""
    return [
        *day_rows("needlecast sidecar", size, sidecar_day(size, rounds, seed), warmup),
        *day_rows("moss serve --http", size, serve_day(size, rounds, seed), warmup),
    ]


def rows_main() -> None:
    """`--rows-only`: measure issue 29's rows at each size and write them (bench/all.py)."""
    import rows as shared

    parser = argparse.ArgumentParser(description="issue 29's daemon rows")
    shared.add_common_arguments(parser)
    parser.add_argument("--rows-only", action="store_true")
    args = parser.parse_args()
    found = [row for size in shared.sizes(args.sizes, shared.QUICK_SIZES if args.quick else shared.DEFAULT_SIZES) for row in table_rows(size)]
    shared.print_rows(found)
    shared.write_rows(args.json, found)


def main() -> None:
    if "--rows-only" in sys.argv:
        rows_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20_000, help="messages routed over the day (requests served: a fifth of it)")
    parser.add_argument("--rounds", type=int, default=24, help="rounds in the day (one per simulated hour)")
    parser.add_argument("--warmup", type=int, default=12, help="rounds of warm-up (the floor is the value after them)")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    if args.warmup >= args.rounds:
        parser.error("--warmup must be below --rounds")
    print(
        f"daemons over a compressed day: {args.size:,} messages and {args.size // 5:,} requests in {args.rounds} rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    start = time.monotonic()
    result = table_rows(args.size, args.rounds, args.warmup, args.seed)
    for row in result:
        print(f"{row.measure}: {row.value:g} {row.unit} ({row.floor_name} {row.floor:g}, ratio {row.ratio}) {'met' if row.met else 'NOT met'}")
        print(f"  {row.note}")
    print(f"({time.monotonic() - start:.0f} s)")
    if args.json:
        print(json.dumps([asdict(row) for row in result], indent=1))


if __name__ == "__main__":
    main()

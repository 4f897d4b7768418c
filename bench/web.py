"""Web view figures: time to first byte and size of the board page with 10 and 5,000 tasks, and
the live-update latency from a file change to the change in an open page's DOM.

Run: .venv/bin/python bench/web.py [--sizes 10,5000] [--repeat 20] [--samples 30]

How it measures. Each board is written in a temporary folder as bench/board.py writes one
(epics of 100 tasks, a mix of statuses, three-step plans), then the installed `moss serve --http
127.0.0.1:0` is started on it, as a person's `moss ui` would. Time to first byte: a fresh
loopback connection per request, the clock from just before the request is sent to the
response's status line and headers (http.client's getresponse), sequential; the first request
after start-up is shown apart (the board files parsed for the first time), then the median and
p95 of `--repeat` warm ones. The baselines, measured in the same run on the same daemon: a
vendored static file (the server's floor: routing, guard, no use case) and the board's use
cases alone, in this process (`board_status`, `list_epics` and one `search_tasks` per column,
what the page calls). Size: the bytes of the default page (100 cards per column) and of one
column at its maximum (500 cards).

Live latency: a headless Chromium (system package, through Playwright) keeps the board open; a
MutationObserver in the page stamps the moment a card's title shows a new text. The clock runs
from just before this process rewrites that task's title (`update_task`, the same write a CLI
edit makes) to that stamp (both wall clocks of this machine, in milliseconds). Apart from it,
the server-side part alone: file change to the `change` event on a raw event-stream client.
p50 and p95 over `--samples` changes, one at a time. Without Chromium or Playwright the browser
part is skipped, and says so. Nothing outside the temporary folders is written.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from board import build_board

from moss_files import scaffold
from moss_files.board import editing, queries
from moss_files.foundation.context import Context
from moss_files.web import board as board_page

BIN = Path(sys.executable).parent
CHROMIUM = os.environ.get("MOSS_TEST_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers often give /dev/shm 64 MB, too little for Chromium
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def fetch(port: int, path: str) -> tuple[float, float, int]:
    """(time to first byte, total time, body bytes) of one GET, in milliseconds."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.connect()
        start = time.perf_counter()
        connection.request("GET", path)
        response = connection.getresponse()
        first = time.perf_counter()
        body = response.read()
        done = time.perf_counter()
        assert response.status == 200, (path, response.status, body[:300])
        return (first - start) * 1000, (done - start) * 1000, len(body)
    finally:
        connection.close()


def timed(action: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def start_daemon(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    process = subprocess.Popen(
        [str(BIN / "moss"), "serve", "--http", "127.0.0.1:0"], cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:  # the daemon's record (read here: bench/mcp.py would shadow the MCP SDK's name)
            record = json.loads((root / ".moss" / "run" / "mcp.json").read_text())
        except (FileNotFoundError, ValueError):
            record = None
        if record and record.get("pid") == process.pid:
            return process, int(record["port"])
        if process.poll() is not None:
            raise SystemExit(f"moss serve exited with {process.returncode}")
        time.sleep(0.02)
    raise SystemExit("moss serve did not start within 60 s")


def stop_daemon(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


def page_figures(root: Path, port: int, repeat: int) -> dict[str, Any]:
    cold_ttfb, cold_total, size = fetch(port, "/board")
    warm = [fetch(port, "/board") for _ in range(repeat)]
    ttfb = [sample[0] for sample in warm]
    static = [fetch(port, "/static/style.css")[0] for _ in range(repeat)]
    column = fetch(port, "/board?status=BACKLOG&limit=500")
    ctx = Context(root)

    def use_cases() -> None:
        overview = queries.board_status(ctx)
        queries.list_epics(ctx)
        for status in board_page.COLUMNS:
            if overview["counts"]["byStatus"][status]:
                queries.search_tasks(ctx, status=status, limit=board_page.DEFAULT_CARDS)

    use_cases()  # warm this process's board cache, as the daemon's is
    return {
        "cold_ttfb": cold_ttfb,
        "ttfb_p50": statistics.median(ttfb),
        "ttfb_p95": percentile(ttfb, 0.95),
        "total_p50": statistics.median(sample[1] for sample in warm),
        "bytes": size,
        "column_bytes": column[2],
        "static_ttfb": statistics.median(static),
        "use_cases": timed(use_cases, repeat),
    }


class Stream:
    """A raw `GET /events` reader."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.connection.request("GET", "/events")
        self.response = self.connection.getresponse()

    def next_change(self) -> dict[str, Any]:
        data = ""
        while True:
            line = self.response.readline().decode().rstrip("\n")
            if line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                event = json.loads(data)
                data = ""
                if "kinds" in event:
                    return event


def stream_latency(root: Path, port: int, task_id: str, samples: int) -> list[float]:
    ctx = Context(root)
    stream = Stream(port)
    try:
        values = []
        for index in range(samples):
            start = time.perf_counter()
            editing.update_task(ctx, task_id=task_id, title=f"stream {index}")
            while "board" not in stream.next_change()["kinds"]:
                pass
            values.append((time.perf_counter() - start) * 1000)
            time.sleep(0.2)  # let the burst settle, so each sample is one change
        return values
    finally:
        stream.connection.close()


def browser_latency(root: Path, port: int, samples: int) -> list[float] | str:
    if not Path(CHROMIUM).is_file():
        return f"skipped: no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "skipped: the Python package playwright is not installed"
    ctx = Context(root)
    # Chromium's socket lives in TMPDIR and its path must stay short: a folder of its own in /tmp.
    with tempfile.TemporaryDirectory(prefix="mc-", dir="/tmp" if os.path.isdir("/tmp") else None) as profile, sync_playwright() as driver:
        env = {**os.environ, "TMPDIR": profile}
        browser = driver.chromium.launch_persistent_context(f"{profile}/p", executable_path=CHROMIUM, headless=True, args=FLAGS, env=env)
        try:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/board")
            page.wait_for_selector("body[data-stream=open]", timeout=30_000)
            task_id = page.evaluate("document.querySelector('.card').dataset.task")
            page.evaluate(
                """(id) => {
                    window.__seen = {};
                    new MutationObserver(() => {
                        const title = document.querySelector(`[data-task="${id}"] .title`);
                        if (title && !(title.textContent in window.__seen)) window.__seen[title.textContent] = Date.now();
                    }).observe(document.body, { childList: true, subtree: true, characterData: true });
                }""",
                task_id,
            )
            values = []
            for index in range(samples):
                text = f"live {index}"
                start = time.time() * 1000
                editing.update_task(ctx, task_id=task_id, title=text)
                page.wait_for_function("(text) => text in window.__seen", arg=text, timeout=30_000)
                values.append(page.evaluate("(text) => window.__seen[text]", text) - start)
                time.sleep(0.2)
            return values
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,5000", help="board sizes (tasks), comma-separated")
    parser.add_argument("--repeat", type=int, default=20, help="warm requests per page figure")
    parser.add_argument("--samples", type=int, default=30, help="file changes per latency figure")
    args = parser.parse_args()
    for size in (int(part) for part in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="moss-bench-web-") as folder:
            root = Path(folder) / "project"
            root.mkdir()
            subprocess.run(["git", "init", "-q", str(root)], check=True)
            scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
            build_board(root, size, claimable=min(size, 100))
            process, port = start_daemon(root)
            try:
                figures = page_figures(root, port, args.repeat)
                print(f"board page, {size:,} tasks (cards per column: {board_page.DEFAULT_CARDS})")
                print(f"  time to first byte: first {figures['cold_ttfb']:.1f} ms, then p50 {figures['ttfb_p50']:.1f} ms, p95 {figures['ttfb_p95']:.1f} ms")
                print(f"  whole page: p50 {figures['total_p50']:.1f} ms; {figures['bytes']:,} bytes ({figures['bytes'] / 1024:.0f} KiB)")
                print(f"  one column at 500 cards: {figures['column_bytes']:,} bytes ({figures['column_bytes'] / 1024:.0f} KiB)")
                print(
                    f"  baselines: a static file {figures['static_ttfb']:.1f} ms to first byte; the page's use cases alone, in process, {figures['use_cases']:.1f} ms"
                )
                first_task = next(iter(sorted((root / ".moss" / "board" / "tasks").glob("*.md")))).stem
                stream = stream_latency(root, port, first_task, args.samples)
                print(
                    f"  file change to event on the stream: p50 {statistics.median(stream):.0f} ms, p95 {percentile(stream, 0.95):.0f} ms ({len(stream)} changes)"
                )
                live = browser_latency(root, port, args.samples)
                if isinstance(live, str):
                    print(f"  file change to DOM change: {live}")
                else:
                    print(
                        f"  file change to DOM change (headless Chromium): p50 {statistics.median(live):.0f} ms, p95 {percentile(live, 0.95):.0f} ms ({len(live)} changes)"
                    )
            finally:
                stop_daemon(process)


if __name__ == "__main__":
    main()

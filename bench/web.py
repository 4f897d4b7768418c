"""Web view figures: time to first byte and full load of the board page with 10, 5,000 and
20,000 tasks, cold (the first request after the daemon starts) and warm, over HTTP and in a
browser; the
bytes an open board is sent per live change; and the latency from a file change to the change
in an open page's DOM.

Run: .venv/bin/python bench/web.py [--sizes 10,5000,20000] [--repeat 20] [--samples 30]

`rows(size)` gives the issue-29 rows (first byte cold and warm at `size` tasks) as dicts;
`--rows-only [--sizes N...] [--json PATH] [--quick] [--baseline MOSS]` writes them for
bench/all.py (ROWS_ARGS), at a fifth of each corpus size in tasks; with `--baseline`, another
installation's daemon is measured on the same board after this one's (build `baseline`).

How it measures. Each board is written in a temporary folder as bench/board.py writes one
(epics of 100 tasks, a mix of statuses, three-step plans; the DONE ones given completion times
of their own), then the installed `moss serve --http 127.0.0.1:0` is started on it, as a
person's `moss ui` would.

- HTTP: a fresh loopback connection per request, the clock from just before the request is
  sent to the response's status line and headers (first byte) and to its last byte (full),
  sequential. Cold: the very first request, sent the moment the daemon's record appears (the
  daemon reads the board ahead on a thread as it starts; this request may wait for it); then
  the median and p95 of `--repeat` warm ones. Baselines in the same run: a vendored static
  file (routing and guard, no use case) and the page's use case alone in this process.
- Browser: a headless Chromium (system package, through Playwright) opens the board of a
  daemon started for it: Navigation Timing's responseStart (first byte) and loadEventEnd
  (the page loaded, its style and script included), cold (the first page the daemon serves)
  and warm (the median of 5 reloads).
- Live changes: with the board open in Chromium, `--samples` task titles are changed one at
  a time (`update_task`, the write a CLI edit makes), then 20 at once; every answer to the
  page's `X-Moss-Live` requests is counted (bytes of its body), with how many were the whole
  page rather than the changed parts. The DOM latency is the time from just before the write
  to the moment a MutationObserver in the page sees the card's new title (both wall clocks of
  this machine).

Without Chromium or Playwright the browser parts are skipped, and say so. Nothing outside
the temporary folders is written.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
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


def write_board(root: Path, size: int) -> None:
    """A board of `size` tasks as bench/board.py writes one, its DONE tasks completed at
    different times (the Done column orders by them)."""
    from moss_files.board import files
    from moss_files.foundation import document

    subprocess.run(["git", "init", "-q", str(root)], check=True)
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    build_board(root, size, claimable=min(size, 100))
    rng = random.Random(11)
    for path in (root / ".moss" / "board" / "tasks").glob("*.md"):
        text = path.read_text()
        if "\nstatus: DONE\n" in text:
            task = files.parse_task(document.parse(text), path, fallback_id=path.stem)
            stamp = datetime.fromtimestamp(1767225600 + rng.randrange(90 * 86400), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            path.write_text(files.render_task(replace(task, completed=stamp)))


@contextmanager
def daemon(root: Path, moss: str | None = None) -> Iterator[tuple[int, Path]]:
    """`moss serve --http 127.0.0.1:0` on `root` (this installation's moss, or `moss`): its
    port, as soon as its record appears, and its log."""
    (root / ".moss" / "run" / "mcp.json").unlink(missing_ok=True)
    log = root.parent / f"serve-{time.monotonic_ns()}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [moss or str(BIN / "moss"), "serve", "--http", "127.0.0.1:0"], cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:  # the daemon's record (read here: bench/mcp.py would shadow the MCP SDK's name)
                record = json.loads((root / ".moss" / "run" / "mcp.json").read_text())
            except (FileNotFoundError, ValueError):
                record = None
            if record and record.get("pid") == process.pid:
                break
            if process.poll() is not None:
                raise SystemExit(f"moss serve exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise SystemExit("moss serve did not start within 60 s")
            time.sleep(0.005)
        yield int(record["port"]), log
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def read_ahead(log: Path) -> float:
    """Once the daemon has read the board ahead: how long that took, in seconds (its log says)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = re.search(r"board read ahead in ([0-9.]+) s", log.read_text())
        if found:
            return float(found.group(1))
        time.sleep(0.05)
    raise SystemExit("the daemon never said it read the board ahead")


def page_figures(root: Path, port: int, repeat: int) -> dict[str, Any]:
    cold_ttfb, cold_total, size = fetch(port, "/board")
    warm = [fetch(port, "/board") for _ in range(repeat)]
    ttfb = [sample[0] for sample in warm]
    static = [fetch(port, "/static/style.css")[0] for _ in range(repeat)]
    column = fetch(port, "/board?status=BACKLOG&limit=500")
    ctx = Context(root)

    def use_case() -> None:
        queries.board_view(ctx)

    use_case()  # warm this process's board cache, as the daemon's is
    return {
        "cold_ttfb": cold_ttfb,
        "cold_total": cold_total,
        "ttfb_p50": statistics.median(ttfb),
        "ttfb_p95": percentile(ttfb, 0.95),
        "total_p50": statistics.median(sample[1] for sample in warm),
        "bytes": size,
        "column_bytes": column[2],
        "static_ttfb": statistics.median(static),
        "use_case": timed(use_case, repeat),
    }


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    # Chromium's socket lives in TMPDIR and its path must stay short: a folder of its own in /tmp.
    with tempfile.TemporaryDirectory(prefix="mc-", dir="/tmp" if os.path.isdir("/tmp") else None) as profile, sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            f"{profile}/p", executable_path=CHROMIUM, headless=True, args=FLAGS, env={**os.environ, "TMPDIR": profile}
        )
        try:
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.set_viewport_size({"width": 1366, "height": 900})
            yield page
        finally:
            context.close()


def browser_missing() -> str | None:
    if not Path(CHROMIUM).is_file():
        return f"skipped: no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "skipped: the Python package playwright is not installed"
    return None


NAVIGATION = (
    "(() => { const n = performance.getEntriesByType('navigation')[0]; return [n.responseStart - n.requestStart, n.loadEventEnd - n.requestStart]; })()"
)


def browser_load(root: Path) -> dict[str, Any]:
    """First byte and full load of the board in Chromium: the first page a new daemon serves
    once it has read the board ahead, then warm reloads."""
    with daemon(root) as (port, log), browser() as page:
        read_ahead(log)
        page.goto(f"http://127.0.0.1:{port}/board", wait_until="load")
        cold = page.evaluate(NAVIGATION)
        warm = []
        for _ in range(5):
            page.reload(wait_until="load")
            warm.append(page.evaluate(NAVIGATION))
    return {"cold": cold, "warm": [statistics.median(w[0] for w in warm), statistics.median(w[1] for w in warm)]}


def live_changes(root: Path, samples: int) -> dict[str, Any]:
    """Bytes per live change and the DOM latency, with the board open in Chromium."""
    ctx = Context(root)
    with daemon(root) as (port, _log), browser() as page:
        answers: list[Any] = []
        page.on("response", lambda answer: answers.append(answer) if answer.request.headers.get("x-moss-live") else None)

        def sizes(found: list[Any]) -> list[tuple[int, bool]]:
            bodies = [answer.body() for answer in found]
            return [(len(body), b'"main"' in body[:400]) for body in bodies]

        page.goto(f"http://127.0.0.1:{port}/board", wait_until="load")
        page.wait_for_selector("body[data-stream=open]", timeout=60_000)
        full = len(page.content().encode())
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
        latency = []
        for index in range(samples):
            text = f"live {index}"
            start = time.time() * 1000
            editing.update_task(ctx, task_id=task_id, title=text)
            page.wait_for_function("(text) => text in window.__seen", arg=text, timeout=60_000)
            latency.append(page.evaluate("(text) => window.__seen[text]", text) - start)
            time.sleep(0.2)
        one_at_a_time = sizes(answers)
        answers.clear()
        backlog = [row["id"] for column in queries.board_view(ctx)["columns"] for row in column["tasks"]][:20]
        for number, other in enumerate(backlog):
            editing.update_task(ctx, task_id=other, title=f"busy {number}")
        page.wait_for_function(
            '([id, text]) => document.querySelector(`[data-task="${id}"] .title`)?.textContent === text',
            arg=[backlog[-1], f"busy {len(backlog) - 1}"],
            timeout=60_000,
        )
        page.wait_for_timeout(1000)
        busy = sizes(answers)
    return {"full": full, "one": one_at_a_time, "busy": busy, "edits": len(backlog), "latency": latency}


# bench/all.py runs `web.py --rows-only --sizes N... --json PATH` (bench/rows.py): at a corpus
# of N artifacts the board holds N / 5 tasks (20,000 at 100,000, the size issue 29 names).
ROWS_ARGS = ["--rows-only"]
KEEPS_ITS_FILES = True  # what it writes stays in rows.scratch() folders until bench/all.py ends


def table_rows(tasks: int, repeat: int = 20, *, size: int | None = None, baseline: str | None = None) -> list[Any]:
    """Issue 29's web rows (`bench/rows.Row`) at `tasks` tasks: the board page's first byte
    cold (the first request to a daemon that has read the board ahead, as it does when it
    starts; target ≤ 300 ms) and warm (the median of `repeat`; target ≤ 50 ms), each beside a
    static file's first byte from the same daemon (routing and guard, no use case). `size`
    is the corpus size the rows are filed under (default: `tasks`). With `baseline` (another
    installation's moss), its daemon is measured too, on the same board, after this one's."""
    import rows as shared

    filed = tasks if size is None else size
    found = []
    with shared.scratch("moss-bench-web-") as folder:
        root = folder / "project"
        root.mkdir()
        write_board(root, tasks)
        for build, moss in [("this", None)] + ([("baseline", baseline)] if baseline else []):
            with daemon(root, moss) as (port, log):
                ahead = read_ahead(log)
                cold = fetch(port, "/board")[0]
                warm = [fetch(port, "/board")[0] for _ in range(repeat)]
                static = statistics.median(fetch(port, "/static/style.css")[0] for _ in range(repeat))
            found += [
                shared.Row(
                    "web board first byte, cold (read ahead)",
                    filed,
                    cold,
                    "ms",
                    shared.AT_MOST,
                    300,
                    floor=static,
                    floor_name="a static file's first byte",
                    build=build,
                    note=f"{tasks:,} tasks; the daemon read the board ahead in {ahead:.1f} s",
                ),
                shared.Row(
                    "web board first byte, warm p50",
                    filed,
                    statistics.median(warm),
                    "ms",
                    shared.AT_MOST,
                    50,
                    floor=static,
                    floor_name="a static file's first byte",
                    build=build,
                    note=f"{tasks:,} tasks; p95 {percentile(warm, 0.95):.1f} ms of {repeat}",
                ),
            ]
    return found


def rows_main() -> None:
    """`--rows-only`: measure issue 29's rows at each corpus size (a fifth of it in tasks) and
    write them (bench/all.py)."""
    import rows as shared

    parser = argparse.ArgumentParser(description="issue 29's web board rows")
    shared.add_common_arguments(parser)
    parser.add_argument("--rows-only", action="store_true")
    args = parser.parse_args()
    found = [
        row
        for size in shared.sizes(args.sizes, shared.QUICK_SIZES if args.quick else shared.DEFAULT_SIZES)
        for row in table_rows(max(1, size // 5), 10 if args.quick else 20, size=size, baseline=shared.baseline_moss(args.baseline))
    ]
    shared.print_rows(found)
    shared.write_rows(args.json, found)


def main() -> None:
    if "--rows-only" in sys.argv:
        rows_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,5000,20000", help="board sizes (tasks), comma-separated")
    parser.add_argument("--repeat", type=int, default=20, help="warm requests per page figure")
    parser.add_argument("--samples", type=int, default=30, help="file changes per latency figure")
    args = parser.parse_args()
    missing = browser_missing()
    for size in (int(part) for part in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="moss-bench-web-") as folder:
            root = Path(folder) / "project"
            root.mkdir()
            write_board(root, size)
            with daemon(root) as (port, _log):
                figures = page_figures(root, port, args.repeat)
            with daemon(root) as (port, log):
                ahead = read_ahead(log)
                after = fetch(port, "/board")
            print(f"board page, {size:,} tasks (cards per column: {board_page.DEFAULT_CARDS})")
            print(
                f"  HTTP, cold (the first request, as a new daemon starts on a fresh clone): first byte {figures['cold_ttfb']:.0f} ms, whole page {figures['cold_total']:.0f} ms"
            )
            print(
                f"  HTTP, warm: first byte p50 {figures['ttfb_p50']:.1f} ms, p95 {figures['ttfb_p95']:.1f} ms; whole page p50 {figures['total_p50']:.1f} ms; "
                f"{figures['bytes']:,} bytes ({figures['bytes'] / 1024:.0f} KiB)"
            )
            print(
                f"  HTTP, a new daemon once it has read the board ahead ({ahead:.1f} s after start): first byte {after[0]:.0f} ms, whole page {after[1]:.0f} ms"
            )
            print(f"  one column at 500 cards: {figures['column_bytes']:,} bytes ({figures['column_bytes'] / 1024:.0f} KiB)")
            print(
                f"  baselines: a static file {figures['static_ttfb']:.1f} ms to first byte; the page's use case alone, in process, {figures['use_case']:.1f} ms"
            )
            if missing:
                print(f"  browser: {missing}")
                continue
            load = browser_load(root)
            print(
                f"  Chromium, cold: first byte {load['cold'][0]:.0f} ms, loaded {load['cold'][1]:.0f} ms; "
                f"warm (median of 5): first byte {load['warm'][0]:.0f} ms, loaded {load['warm'][1]:.0f} ms"
            )
            live = live_changes(root, args.samples)
            one = [size for size, _ in live["one"]]
            print(
                f"  live, one change at a time: {len(one)} answers for {args.samples} changes, bytes per answer median {statistics.median(one):,.0f}, "
                f"max {max(one):,}, {sum(1 for _, whole in live['one'] if whole)} whole pages (the page itself is {live['full']:,} bytes)"
            )
            busy = [size for size, _ in live["busy"]]
            print(
                f"  live, {live['edits']} changes at once: {len(busy)} answers, {sum(busy):,} bytes in all, "
                f"{sum(1 for _, whole in live['busy'] if whole)} whole pages"
            )
            print(
                f"  file change to DOM change: p50 {statistics.median(live['latency']):.0f} ms, p95 {percentile(live['latency'], 0.95):.0f} ms ({len(live['latency'])} changes)"
            )


if __name__ == "__main__":
    main()

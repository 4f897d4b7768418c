"""MCP server figures: cold start of `moss serve` to its first answers, `moss.fetch` and
`loop_scan` latency over stdio and in memory with a 10,000-artifact workspace, and the size of
`tools/list` per tool set.

Run: .venv/bin/python bench/mcp.py [--count 10000] [--starts 15] [--calls 200]
     .venv/bin/python bench/mcp.py --rows-only [--sizes 10000 100000] [--quick] [--json ROWS]  (issue 29's row)

How it measures. Cold start: the installed `moss serve` is spawned with one JSON-RPC line at a
time on its stdin (no client library in the way); the clock runs from just before the spawn to
the `initialize` answer, and to the answer of a first `tools/call` (`moss.fetch`) sent right
after. Whole-process runs use a bytecode cache in a temporary folder (PYTHONPYCACHEPREFIX,
filled by one unmeasured run), as an installed package has one; this environment otherwise sets
PYTHONDONTWRITEBYTECODE, which makes every start compile from source. A minimal MCPServer with
one tool, started the same way, is the floor: what the SDK alone costs on this machine now.
Latency: p50/p95 of sequential calls after a warm-up (the search index is built before), over a
stdio subprocess and the SDK's in-memory client (both protocol modes). Nothing outside the
temporary folders is written.
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
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

# This file is named like the SDK: with its folder first on sys.path, `import mcp` would import
# this script. The folder goes last, where `corpus` is still found.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE] + [str(_HERE)]

import anyio  # noqa: E402
import rows as shared  # noqa: E402
from corpus import generate_workspace  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from moss_files.capsules import service as capsules  # noqa: E402
from moss_files.foundation.context import AGENT, Context  # noqa: E402
from moss_files.index import service as search  # noqa: E402
from moss_files.mcp.server import TOOL_SETS, build_server, parse_sets  # noqa: E402

# bench/all.py runs this script with these arguments for its row of issue 29's table.
ROWS_ARGS = ["--rows-only"]
KEEPS_ITS_FILES = True  # what it writes stays in rows.scratch() folders until bench/all.py ends

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}
QUERIES = ("auth token", "session cache", "deploy retry", "router inbox", "schema migration", "lock timeout", "merge branch", "review plan")
FLOOR_SERVER = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("floor", log_level="WARNING")

@server.tool(name="echo", description="Echo.")
def echo(text: str) -> str:
    return text

server.run()
"""


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def env_with_cache(cache: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def cold_start(command: list[str], cwd: Path, env: dict[str, str], call: dict[str, Any] | None) -> tuple[float, float | None]:
    """Seconds from spawn to the initialize answer, and to the first tools/call answer."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        process.stdin.flush()
        json.loads(process.stdout.readline())
        initialized = time.perf_counter() - start
        called = None
        if call is not None:
            process.stdin.write((json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n").encode())
            process.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}) + "\n").encode())
            process.stdin.flush()
            answer = json.loads(process.stdout.readline())
            if answer.get("result", {}).get("isError"):
                raise SystemExit(f"the first call failed: {answer}")
            called = time.perf_counter() - start
        process.stdin.close()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    return initialized, called


def start_figures(workspace: Path, cache: Path, starts: int, fetch_args: dict[str, Any]) -> None:
    env = env_with_cache(cache)
    bin_dir = Path(sys.executable).parent
    floor_script = cache / "floor_server.py"
    floor_script.write_text(FLOOR_SERVER)
    runs = {
        "moss serve": ([str(bin_dir / "moss"), "serve"], {"name": "moss.fetch", "arguments": fetch_args}),
        "SDK floor (1 tool)": ([sys.executable, str(floor_script)], {"name": "echo", "arguments": {"text": "x"}}),
    }
    print(f"\ncold start, spawn -> answer (s), {starts} runs each, bytecode cached:")
    print(f"  {'server':<20} {'init p50':>9} {'init p95':>9} {'1st call p50':>13} {'1st call p95':>13}")
    for label, (command, call) in runs.items():
        cold_start(command, workspace, env, call)  # fills the bytecode cache
        inits: list[float] = []
        calls: list[float] = []
        for _ in range(starts):
            initialized, called = cold_start(command, workspace, env, call)
            inits.append(initialized)
            calls.append(called or 0.0)
        print(
            f"  {label:<20} {statistics.median(inits):>9.3f} {percentile(inits, 0.95):>9.3f} {statistics.median(calls):>13.3f} {percentile(calls, 0.95):>13.3f}"
        )


async def timed(call: Callable[[int], Awaitable[Any]], count: int) -> list[float]:
    for index in range(5):  # warm-up: caches, the index's first refresh, worker threads
        await call(index)
    samples = []
    for index in range(count):
        start = time.perf_counter()
        result = await call(index)
        samples.append((time.perf_counter() - start) * 1000)
        if result.is_error:
            raise SystemExit(f"call failed: {result.content[0].text}")
    return samples


async def latency_figures(workspace: Path, cache: Path, calls: int, refs: list[dict[str, str]]) -> None:
    print(f"\nlatency per call (ms), {calls} sequential calls after 5 warm-up calls:")
    print(f"  {'transport':<22} {'moss.fetch p50':>15} {'p95':>7} {'loop_scan p50':>14} {'p95':>7}")
    server = build_server(Context(workspace, actor=AGENT))
    stdio = StdioServerParameters(command=str(Path(sys.executable).parent / "moss"), args=["serve"], cwd=str(workspace), env=env_with_cache(cache))
    transports: list[tuple[str, Any, str]] = [
        ("in memory (direct)", server, "auto"),
        ("in memory (JSON-RPC)", server, "legacy"),
        ("stdio subprocess", stdio, "legacy"),
    ]
    for label, target, mode in transports:
        async with Client(target, mode=mode) as client:
            fetches = await timed(lambda i: client.call_tool("moss.fetch", refs[i % len(refs)]), calls)
            scans = await timed(lambda i: client.call_tool("loop_scan", {"query": QUERIES[i % len(QUERIES)]}), calls)
        print(
            f"  {label:<22} {statistics.median(fetches):>15.2f} {percentile(fetches, 0.95):>7.2f}"
            f" {statistics.median(scans):>14.2f} {percentile(scans, 0.95):>7.2f}"
        )


async def list_sizes(workspace: Path) -> None:
    print("\ntools/list per tool set (bytes of the result's JSON, as sent):")
    print(f"  {'set':<12} {'tools':>5} {'dotted':>8} {'underscore':>11}")
    rows = [(name, (name,)) for name in TOOL_SETS] + [("default", parse_sets(None)), ("all", tuple(TOOL_SETS))]
    for label, sets in rows:
        sizes = []
        for names in ("dotted", "underscore"):
            async with Client(build_server(Context(workspace, actor=AGENT), sets, names=names), mode="legacy") as client:
                listed = await client.list_tools()
            sizes.append(len(json.dumps(listed.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))))
            count = len(listed.tools)
        print(f"  {label:<12} {count:>5} {sizes[0]:>8} {sizes[1]:>11}")


async def first_list(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    """Seconds from spawning a stdio MCP server under the SDK's own client to the answer of its
    first `tools/list` (the client sends `initialize` and `notifications/initialized` first),
    and the number of tools listed."""
    server = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd), env=env)
    started = time.perf_counter()
    async with Client(server, mode="legacy") as client:
        listed = await client.list_tools()
        elapsed = time.perf_counter() - started
    return elapsed, len(listed.tools)


def first_list_rows(sizes: list[int], repeat: int) -> list[shared.Row]:
    """Issue 29's row: `moss serve` over stdio, cold (a new process, its bytecode cached),
    from spawn to the first `tools/list` answer, in a workspace of `size` artifacts (the
    cached corpus of bench/index.py, its index built), beside the floor of the same run: a
    minimal SDK server with one tool, reached the same way. Best of `repeat` runs taken in
    turns (the machine may be shared), the median in the note."""
    found: list[shared.Row] = []
    moss = str(Path(sys.executable).with_name("moss"))
    for size in sizes:
        corpus = shared.cached("workspace", size, 42, lambda folder, size=size: generate_workspace(folder, size, 42))
        with shared.scratch("moss-bench-mcp-rows-") as tmp:
            env = shared.process_env(tmp / "pycache")
            root = shared.copy_of(corpus, tmp / "ws")
            time.sleep(2.1)  # files copied within the index's racy window are re-read until older
            shared.run_process([moss, "index", "rebuild", "--root", str(root)], env=env)
            floor_script = tmp / "floor_server.py"
            floor_script.write_text(FLOOR_SERVER)
            commands = {"moss serve": [moss, "serve"], "floor": [sys.executable, str(floor_script)]}
            for command in commands.values():  # fills the bytecode cache
                anyio.run(first_list, command, root, env)
            times: dict[str, list[float]] = {name: [] for name in commands}
            tools = 0
            for _ in range(repeat):
                for name, command in commands.items():
                    elapsed, listed = anyio.run(first_list, command, root, env)
                    times[name].append(elapsed)
                    tools = listed if name == "moss serve" else tools
            mine, floor = times["moss serve"], times["floor"]
            print(
                f"corpus: {size} artifacts; {shared.load()}; spawn -> first tools/list answer, s (best / median of {repeat}):"
                f" moss serve ({tools} tools) {min(mine):.3f} / {statistics.median(mine):.3f}, SDK floor {min(floor):.3f} / {statistics.median(floor):.3f}",
                flush=True,
            )
            found.append(
                shared.Row(
                    "MCP initialize -> first tools/list, cold",
                    size=size,
                    value=min(mine),
                    unit="s",
                    compare=shared.AT_MOST,
                    limit=0.8,
                    floor=min(floor),
                    floor_name="SDK server with 1 tool",
                    note=f"median {statistics.median(mine):.3f} s of {repeat}; {tools} tools",
                )
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10000, help="Artifacts in the workspace.")
    parser.add_argument("--starts", type=int, default=15, help="Cold starts per server.")
    parser.add_argument("--calls", type=int, default=200, help="Calls per latency figure.")
    shared.add_common_arguments(parser, default_sizes=(10_000, 100_000))
    parser.add_argument("--rows-only", action="store_true", help="only issue 29's row, initialize -> first tools/list, at each of --sizes")
    args = parser.parse_args()
    if args.rows_only:
        found = first_list_rows(shared.sizes(args.sizes), 3 if args.quick else 7)
        shared.print_rows(found)
        shared.write_rows(args.json, found)
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    folder = Path(tempfile.mkdtemp(prefix="moss-bench-mcp-"))
    cache = Path(tempfile.mkdtemp(prefix="moss-bench-pycache-"))
    try:
        workspace = folder / "project"
        started = time.perf_counter()
        generate_workspace(workspace, args.count)
        index = search.index_rebuild(search.Context(workspace))
        print(f"workspace: {args.count} artifacts ({index['files']} files indexed) built in {time.perf_counter() - started:.1f}s")
        found = capsules.inventory(capsules.Context(workspace), limit=50)["items"]
        refs = [{"workspace": item["workspace"], "name": item["name"]} for item in found if item.get("name")]
        if not refs:
            raise SystemExit("the corpus has no named capsules to fetch")
        anyio.run(list_sizes, workspace)
        start_figures(workspace, cache, args.starts, refs[0])
        anyio.run(latency_figures, workspace, cache, args.calls, refs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()

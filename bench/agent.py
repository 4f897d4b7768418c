"""Agent runtime figures: the runtime's own overhead per model<->tool step (the model and the
tool excluded), the cold start of `moss agent run` to its first request on the wire, and the
size of the event log of a 20-step session; each beside a baseline measured in the same run.

Run: .venv/bin/python bench/agent.py [--steps 20] [--starts 5]

How it measures.
- Overhead per step: one run of `--steps` tool steps (and a final answer) in this process, with
  a model that answers at once from a script (so no model time) and a real `moss serve` over
  stdio as the tool server, each call timed around the MCP client (tool time). Overhead =
  (run wall time - model time - tool time) / model calls: context assembly, the gate, the
  schema check, event writes (each fsynced), the session file's edits. Baseline: the durable
  appends alone, as many and as large as the run's events (fs.append_line, each fsynced).
- Cold start: `moss agent run "hi"` spawned as a process (bytecode cache in a temporary folder,
  filled by one unmeasured run, as an installed tool has one) against the loopback Messages API
  of the test suite (tests/agent_support.py); the clock runs from just before the spawn to the
  moment the first request reaches the server. Two setups: no MCP server, and the default
  (this toolkit's `moss serve`, with the session's orientation, three tool calls, before the
  first request). Baselines: `moss version` to exit, `python -c "import anthropic"` to exit.
- Log size: the bytes of the 20-step session's event log and session file, against the payload
  they must hold at least (prompt, model texts, tool inputs and outputs).
Nothing outside temporary folders is written.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE] + [str(_HERE.parent / "tests")]

import anyio  # noqa: E402
from agent_support import FakeMessagesAPI, make_workspace, text  # noqa: E402

from moss_files.agent import model, service  # noqa: E402
from moss_files.agent.model import Usage  # noqa: E402
from moss_files.agent.runtime import Runtime, Silent, ToolHost  # noqa: E402
from moss_files.agent.store import open_server_log  # noqa: E402
from moss_files.agent.stream import Reply  # noqa: E402
from moss_files.foundation import fs  # noqa: E402
from moss_files.foundation.context import Context  # noqa: E402

BIN = Path(sys.executable).parent
ANSWER = "Checked the status; the plan has no open task, so I look at the memory next. " * 3


class ScriptedModel:
    """A model that answers at once: `steps` tool calls, then a text."""

    def __init__(self, steps: int, tool: str) -> None:
        self.steps, self.tool, self.calls, self.seconds = steps, tool, 0, 0.0

    async def complete(self, request: Any, *, on_text: Any, on_retry: Any) -> tuple[Reply, int]:
        started = time.perf_counter()
        self.calls += 1
        if self.calls <= self.steps:
            content = ({"type": "text", "text": ANSWER}, {"type": "tool_use", "id": f"toolu_{self.calls:04d}", "name": self.tool, "input": {}})
            reply = Reply(content, "tool_use", Usage(2000 + 150 * self.calls, 60))
        else:
            reply = Reply(({"type": "text", "text": "Done: " + ANSWER},), "end_turn", Usage(5000, 80))
        on_text(ANSWER, 1)
        self.seconds += time.perf_counter() - started
        return reply, 1


class TimedHost(ToolHost):
    """The tool host, with the time spent inside tool calls summed."""

    seconds = 0.0

    async def call(self, route: Any, arguments: Any, *, meta: Any = None) -> Any:
        started = time.perf_counter()
        try:
            return await super().call(route, arguments, meta=meta)
        finally:
            self.seconds += time.perf_counter() - started


def settings_text(servers: bool, steps: int) -> str:
    if not servers:
        return f"mcp_servers = []\n\n[llm]\nmax_steps = {steps}\nretry_base_seconds = 0.01\norient = false\n"
    moss = f'[[mcp_servers]]\nname = "moss"\ncommand = "{BIN / "moss"}"\nargs = ["serve"]\ntool_map = "moss"\n'
    return f"[llm]\nmax_steps = {steps}\nretry_base_seconds = 0.01\norient = true\n\n{moss}"


def overhead(steps: int) -> dict[str, Any]:
    root = make_workspace(Path(tempfile.mkdtemp(prefix="bench-agent-")) / "project")
    (root / ".moss" / "agent.toml").write_text(settings_text(True, steps).replace("orient = true", "orient = false"))
    ctx = Context(root)
    settings = service.load_settings(ctx)
    gate = service.load_policy(ctx, settings)
    store = service.open_store(ctx, settings, ["bench-key-0123456789"])
    scripted = ScriptedModel(steps, "moss__cstack_status")

    async def work() -> tuple[float, model.RunSummary, str, float]:
        host = TimedHost(settings, gate, root=root, environ={}, sleeve=None, errlog=lambda name: open_server_log(root, name))
        async with host:
            runtime = Runtime(ctx, settings, gate, store, host, scripted)
            session_id = service.create_session(ctx, runtime, "bench")
            started = time.perf_counter()
            summary = await runtime.run(session_id, "Look at the status, step by step.", wait=0, output=Silent())
            wall = time.perf_counter() - started
            return wall, summary, session_id, host.seconds

    wall, summary, session_id, tool_seconds = anyio.run(work)
    calls = scripted.calls
    log = store.events_path(session_id)
    events = model.parse_events(log.read_bytes()).events
    # The floor: the same number of durable appends of the same sizes.
    floor_path = root / ".moss" / "floor" / "floor.jsonl"
    lines = [model.event_to_line(event) for event in events]
    started = time.perf_counter()
    for line in lines:
        fs.append_line(floor_path, line)
    floor = time.perf_counter() - started
    payload = (
        len("Look at the status, step by step.")
        + sum(
            len(json.dumps(block.get("input", {}))) + len(str(block.get("text", "")))
            for event in events
            if event.kind == "assistant.message"
            for block in event.data["content"]
        )
        + sum(len(str(event.data.get("output", ""))) for event in events if event.kind in ("tool.succeeded", "tool.failed"))
    )
    return {
        "steps": steps,
        "model_calls": calls,
        "tool_calls": len(summary.tools),
        "events": len(events),
        "status": summary.status,
        "wall_s": wall,
        "model_s": scripted.seconds,
        "tool_s": tool_seconds,
        "overhead_ms_per_call": (wall - scripted.seconds - tool_seconds) / calls * 1000,
        "floor_ms_per_call": floor / calls * 1000,
        "floor_appends": len(lines),
        "log_bytes": log.stat().st_size,
        "session_file_bytes": store.session_path(session_id).stat().st_size,
        "payload_bytes": payload,
    }


def env_with_cache(cache: Path, fake: FakeMessagesAPI | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update({"PYTHONPYCACHEPREFIX": str(cache), "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "ANTHROPIC_API_KEY": "sk-ant-bench-0123456789"})
    if fake is not None:
        env["ANTHROPIC_BASE_URL"] = fake.url
    return env


def cold_start(servers: bool, starts: int, cache: Path) -> list[float]:
    root = make_workspace(Path(tempfile.mkdtemp(prefix="bench-agent-")) / "project")
    (root / ".moss" / "agent.toml").write_text(settings_text(servers, 8))
    seconds = []
    for attempt in range(starts + 1):  # the first fills the bytecode cache
        stamp: list[float] = []

        def first_request(_body: dict[str, Any]) -> Any:
            stamp.append(time.perf_counter())
            return text("hi")

        with FakeMessagesAPI([first_request]) as fake:
            spawned = time.perf_counter()
            done = subprocess.run(
                [str(BIN / "moss"), "agent", "run", "hi", "--json"], cwd=root, env=env_with_cache(cache, fake), capture_output=True, text=True, timeout=300
            )
            if done.returncode != 0:
                raise SystemExit(f"moss agent run failed: {done.stderr}")
            if attempt:
                seconds.append(stamp[0] - spawned)
    return seconds


def whole_process(command: list[str], starts: int, cache: Path) -> list[float]:
    seconds = []
    for attempt in range(starts + 1):
        spawned = time.perf_counter()
        subprocess.run(command, env=env_with_cache(cache, None), capture_output=True, check=True, timeout=120)
        if attempt:
            seconds.append(time.perf_counter() - spawned)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    figures = overhead(args.steps)
    print(
        f"\n1. Runtime overhead per model call ({figures['steps']} tool steps + 1 answer = {figures['model_calls']} model calls, "
        f"{figures['tool_calls']} calls of moss.cstack.status over stdio, {figures['events']} events; model answers at once)"
    )
    print(
        f"   run {figures['wall_s'] * 1000:.0f} ms = model {figures['model_s'] * 1000:.1f} ms + tools {figures['tool_s'] * 1000:.0f} ms"
        f" + runtime {(figures['wall_s'] - figures['model_s'] - figures['tool_s']) * 1000:.0f} ms"
    )
    print(
        f"   runtime overhead: {figures['overhead_ms_per_call']:.2f} ms per model call"
        f"  (baseline, the {figures['floor_appends']} durable event appends alone: {figures['floor_ms_per_call']:.2f} ms per call)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as cache_dir:
        cache = Path(cache_dir)
        bare = cold_start(False, args.starts, cache)
        full = cold_start(True, args.starts, cache)
        version = whole_process([str(BIN / "moss"), "version"], args.starts, cache)
        sdk = whole_process([sys.executable, "-c", "import anthropic"], args.starts, cache)
        mcp = whole_process([sys.executable, "-c", "import mcp"], args.starts, cache)
    median = statistics.median
    print(f"\n2. Cold start of `moss agent run` to the first request on the wire (median of {args.starts}, bytecode cached)")
    print(f"   no MCP server:                                   {median(bare) * 1000:.0f} ms  (min {min(bare) * 1000:.0f}, max {max(bare) * 1000:.0f})")
    print(f"   default: moss serve + orientation (3 tool calls): {median(full) * 1000:.0f} ms  (min {min(full) * 1000:.0f}, max {max(full) * 1000:.0f})")
    print(
        f"   baselines, whole processes: moss version {median(version) * 1000:.0f} ms, python -c 'import anthropic' "
        f"{median(sdk) * 1000:.0f} ms, python -c 'import mcp' {median(mcp) * 1000:.0f} ms"
    )
    print(f"\n3. Event log of a {figures['steps']}-step session ({figures['events']} events)")
    print(
        f"   events: {figures['log_bytes']:,} bytes ({figures['log_bytes'] / figures['steps']:,.0f} per step); "
        f"session file: {figures['session_file_bytes']:,} bytes"
    )
    print(
        f"   baseline, the payload it must hold (prompt, model texts, tool inputs and outputs): {figures['payload_bytes']:,} bytes "
        f"(log / payload = {figures['log_bytes'] / max(figures['payload_bytes'], 1):.2f})"
    )


if __name__ == "__main__":
    main()

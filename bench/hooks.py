"""The agent hooks' time: each `moss hook` as Claude Code runs it, on a 10,000-artifact workspace.

Run: .venv/bin/python bench/hooks.py [--count 10000] [--runs 15]

The workspace is the seeded corpus (`corpus.generate_workspace`: insights, sessions, capsules,
1,000 inbox messages, PLAN.md, MEMORY.md, CURRENT.md) with a board of 2,000 tasks, one held by
worker `dev`, committed to git; `moss init --agent claude` writes the settings. Each hook runs
as its settings entry says (`sh -c '<command>'`, the event's JSON on stdin, CLAUDE_PROJECT_DIR
and MOE_WORKER_ID set), a whole process, with the bytecode cached as for an installed tool
(this environment sets PYTHONDONTWRITEBYTECODE). Printed: p50 and p95 wall time per hook and
its CPU time (less sensitive than the wall time to a machine shared with other work); the
floor of a Python process that imports nothing; the orientation's text and its size in tokens.
The orientation is measured with its deadline off (every part read) and as configured.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))
from board import build_board
from corpus import generate_workspace

from moss_files import scaffold
from moss_files.board import claims
from moss_files.foundation.context import AGENT, Context

BIN = Path(sys.executable).parent


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def environment(root: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(cache), "PATH": f"{BIN}{os.pathsep}{env['PATH']}", "CLAUDE_PROJECT_DIR": str(root), "MOE_WORKER_ID": "dev"}


def command_of(root: Path, host_event: str) -> str:
    settings = json.loads((root / ".claude" / "settings.json").read_text())
    return str(settings["hooks"][host_event][0]["hooks"][0]["command"])


CPU: list[float] = []  # CPU milliseconds of each run (the children's user + system time)


def run(root: Path, host_event: str, event: dict, env: dict[str, str]) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(["sh", "-c", command_of(root, host_event)], input=json.dumps(event), cwd=root, env=env, capture_output=True, text=True, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000)
    if done.returncode != 0:
        raise SystemExit(f"{host_event} failed: {done.stderr}")
    return elapsed, done.stdout


def build(root: Path, count: int) -> None:
    generate_workspace(root, count)
    shutil.rmtree(root / ".moss" / "board")  # the corpus's stand-ins; a real board instead
    build_board(root, 2000, claimable=40)
    claims.claim_next_task(Context(root, actor=AGENT), statuses=["WORKING"], worker_id="dev")
    scaffold.run(root, parts=scaffold.PARTS, agents=("claude",), dry_run=False)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=b@example.invalid", "commit", "-qm", "corpus"], check=True)
    lines = []
    for number in range(4000):  # a long session's transcript, about 2.5 MB
        lines.append(json.dumps({"type": "user", "message": {"role": "user", "content": f"Please continue with part {number} of the invoice work."}}))
        lines.append(
            json.dumps(
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Working on it. " * 20},
                            {"type": "tool_use", "name": "Edit", "input": {"file_path": str(root / "src" / f"part_{number % 40}.py")}},
                        ],
                    },
                }
            )
        )
    (root.parent / "transcript.jsonl").write_text("\n".join(lines) + "\n")


def figure(label: str, samples: list[float]) -> None:
    cpu = CPU[-len(samples) :] if len(CPU) >= len(samples) else samples
    print(f"  {label:<44} wall p50 {statistics.median(samples):7.1f} ms  p95 {percentile(samples, 0.95):7.1f} ms   CPU p50 {statistics.median(cpu):6.1f} ms")
    CPU.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10000, help="Artifacts in the workspace.")
    parser.add_argument("--runs", type=int, default=15, help="Runs per hook.")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    folder = Path(tempfile.mkdtemp(prefix="moss-bench-hooks-"))
    cache = Path(tempfile.mkdtemp(prefix="moss-bench-pycache-"))
    try:
        root = folder / "project"
        started = time.perf_counter()
        build(root, args.count)
        print(f"workspace: {args.count} artifacts + a 2,000-task board, committed, in {time.perf_counter() - started:.1f}s")
        env = environment(root, cache)
        transcript = str(root.parent / "transcript.jsonl")
        base = {"session_id": "bench", "transcript_path": transcript, "cwd": str(root)}
        subprocess.run(
            [str(BIN / "moss"), "task", "list", "--json"], cwd=root, env=env, capture_output=True, check=True
        )  # the board's cache, as any board command leaves it
        for host_event in ("SessionStart", "UserPromptSubmit", "Stop"):  # warm the bytecode cache and the disk
            run(root, host_event, {**base, "source": "startup", "stop_hook_active": False}, env)
        floor = []
        CPU.clear()
        for _ in range(args.runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            begun = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            floor.append((time.perf_counter() - begun) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            CPU.append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000)
        print("per hook, a whole process as the host runs it:")
        figure("floor: `python -c pass`", floor)
        config = root / ".moss" / "config.toml"
        original = config.read_text()
        config.write_text(original + "\n[hooks]\ndeadline_ms = 600000\n")
        full = [run(root, "SessionStart", {**base, "source": "startup"}, env) for _ in range(args.runs)]
        figure("SessionStart (every part read)", [t for t, _ in full])
        config.write_text(original)
        figure("SessionStart (as configured: deadline 1 s)", [run(root, "SessionStart", {**base, "source": "startup"}, env)[0] for _ in range(args.runs)])
        figure("UserPromptSubmit (no new mail)", [run(root, "UserPromptSubmit", {**base, "prompt": "go on"}, env)[0] for _ in range(args.runs)])
        (root / "src").mkdir(exist_ok=True)
        (root / "src" / "part_1.py").write_text("x = 1\n")
        figure("Stop (code changed, CURRENT.md not)", [run(root, "Stop", {**base, "stop_hook_active": False}, env)[0] for _ in range(args.runs)])
        figure(
            "PreCompact (2.5 MB transcript)",
            [run(root, "PreCompact", {**base, "trigger": "auto", "custom_instructions": ""}, env)[0] for _ in range(args.runs)],
        )
        shutil.rmtree(root / ".moss" / "cache", ignore_errors=True)  # as right after a clone
        figure("SessionStart, no board cache yet", [run(root, "SessionStart", {**base, "source": "startup"}, env)[0] for _ in range(3)])
        text = json.loads(full[-1][1])["hookSpecificOutput"]["additionalContext"]
        print(f"\nthe orientation ({len(text)} characters, about {(len(text) + 3) // 4} tokens at four characters a token):\n")
        print(text)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Git as the transport: the two-clone scenario with and without the merge driver, and the
driver's own time on large files.

    .venv/bin/python bench/merge.py [--tasks 2000] [--messages 5000] [--repeat 5]

1. The scenario of the merge issue, scripted: two clones of one project each add a cstack task
   (one also starts it), add a memory entry, edit a capsule (one the title, one the tags), add
   a board task, an insight, a session and an outbox message; then one pulls the other. It is
   run twice in the same temporary folder: once with the clones' merge driver removed (plain
   git, the baseline), once with it. Printed: conflicted paths, and the items the merged
   clone lacks (tasks, memory entries, messages, board tasks, insights, sessions, capsule
   fields), counted from the files, not from the tools.
2. `moss merge driver` as git runs it, as a whole process, on a PLAN.md of N tasks and a v1
   outbox of M messages, both sides changed; the median of --repeat runs, beside `moss
   version` (the process floor) measured in the same run.
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

BIN = Path(sys.executable).parent
CAPSULE = "## Objective\nShip login.\n\n## Current status\nStarted.\n\n## Decisions\n- JWT\n\n## Next actions\n- tests\n\n## Key locations\n- auth.py\n\n## Open questions\n- none\n"


def run(cwd: Path, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    tool = args[0]
    command = [str(BIN / tool), *args[1:]] if tool in ("moss", "cstack", "needlecast") else list(args)
    done = subprocess.run(command, cwd=cwd, input=input, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed in {cwd}: {done.stderr}")
    return done


def scenario(top: Path, *, driver: bool) -> dict[str, object]:
    a = top / "a"
    run(top, "git", "init", "-q", "-b", "main", str(a))
    run(a, "moss", "init")
    run(a, "cstack", "add", "Base task")
    run(a, "moss", "store", "--name", "auth", input=CAPSULE)
    run(a, "moss", "board", "init")
    epic = json.loads(run(a, "moss", "epic", "new", "Login", "--json").stdout)["epic"]["id"]
    run(a, "git", "add", "-A")
    run(a, "git", "commit", "-qm", "start")
    b = top / "b"
    run(top, "git", "clone", "-q", str(a), str(b))
    run(b, "moss", "merge", "setup")
    for clone in (a, b):
        if not driver:
            run(clone, "git", "config", "--remove-section", "merge.moss")  # as a clone that never ran `moss merge setup`
    for clone, side in ((a, "a"), (b, "b")):
        run(clone, "cstack", "add", f"Task from {side}")
        if side == "a":
            run(clone, "cstack", "start", f"Task from {side}")
        run(clone, "cstack", "remember", f"Fact found by {side}.", "--category", "facts")
        run(clone, "moss", "update", "auth", *(("--title", "Login, from a") if side == "a" else ("--tags", "auth,b")))
        run(clone, "moss", "task", "new", f"Board task from {side}", "-e", epic)
        run(clone, "moss", "insight", "add", f"Insight from {side}")
        run(clone, "moss", "session", "start", "--agent", side, "--new")
        run(clone, "needlecast", "send", "--to", "bob", "--from", side, f"hello from {side}")
        run(clone, "git", "add", "-A")
        run(clone, "git", "commit", "-qm", f"work in {side}")
    run(a, "git", "pull", "--no-rebase", "--no-edit", str(b), "main", check=False)
    conflicted = run(a, "git", "diff", "--name-only", "--diff-filter=U").stdout.split()
    plan = (a / ".cstack" / "PLAN.md").read_text()
    memory = (a / ".cstack" / "MEMORY.md").read_text()
    outbox = (a / ".needlecast" / "outbox.md").read_text()
    capsule = (a / ".moss" / "capsules" / "default" / "auth.md").read_text()
    board = " ".join(path.read_text() for path in (a / ".moss" / "board" / "tasks").glob("*.md"))
    expected = {
        "tasks": [f"Task from {side}" for side in "ab"] + ["Base task"],
        "memory": [f"Fact found by {side}." for side in "ab"],
        "messages": [f"hello from {side}" for side in "ab"],
        "board": [f"Board task from {side}" for side in "ab"],
    }
    found = {"tasks": plan, "memory": memory, "messages": outbox, "board": board}
    lost = {kind: [item for item in items if found[kind].count(item) != 1] for kind, items in expected.items()}
    lost["capsule fields"] = [field for field in ("Login, from a", "- b") if field not in capsule and field.strip("- ") not in capsule]
    lost["insights"] = ["missing"] * (2 - len(list((a / ".moss" / "insights").glob("*.md"))))
    lost["sessions"] = ["missing"] * (2 - len(list((a / ".moss" / "sessions").glob("*.md"))))
    return {"conflicted": conflicted, "lost": {kind: len(items) for kind, items in lost.items()}}


def timed(cwd: Path, args: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([str(BIN / "moss"), *args], cwd=cwd, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def driver_times(top: Path, tasks: int, messages: int, repeat: int) -> dict[str, float]:
    lines = "".join(f"- [ ] Task {n} (id: t{n}) | modified: 2026-01-01\n" for n in range(tasks))
    plan = f"# Plan\n\n## Tasks\n\n{lines}\n## Completed\n\n"
    plan_ours = plan.replace("- [ ] Task 10 (id: t10)", "- [>] Task 10 (id: t10)") + "- [x] Added here | closed: 2026-01-02\n"
    plan_theirs = plan.replace(f"- [ ] Task {tasks - 1} ", f"- [x] Task {tasks - 1} ").replace("## Tasks\n\n", "## Tasks\n\n- [ ] Added there\n")

    def block(n: int, side: str) -> str:
        return f"---\nid: m{side}{n}\nfrom: alice\nto: bob\ntime: 2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z\n---\nmessage {n}\n\n"

    outbox = "# Outbox\n\n" + "".join(block(n, "") for n in range(messages))
    outbox_ours = outbox + "".join(block(n, "a") for n in range(50))
    outbox_theirs = "# Outbox\n\n" + "".join(block(n, "") for n in range(100, messages)) + "".join(block(n, "b") for n in range(50))
    figures = {}
    for name, path, (base, ours, theirs) in (
        ("plan", ".cstack/PLAN.md", (plan, plan_ours, plan_theirs)),
        ("outbox", ".needlecast/outbox.md", (outbox, outbox_ours, outbox_theirs)),
    ):
        samples = []
        for _ in range(repeat):
            for label, text in (("O", base), ("A", ours), ("B", theirs)):
                (top / label).write_text(text)
            started = time.perf_counter()
            done = subprocess.run([str(BIN / "moss"), "merge", "driver", "O", "A", "B", path], cwd=top, capture_output=True, text=True, check=False)
            samples.append(time.perf_counter() - started)
            if done.returncode != 0:
                raise SystemExit(f"the driver left conflicts in {path}: {done.stderr}")
        figures[name] = statistics.median(samples) * 1000
    figures["moss version"] = timed(top, ["version"], repeat)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        top = Path(folder)
        home = top / "home"
        home.mkdir()
        (home / "gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.invalid\n")
        os.environ.update(HOME=str(home), GIT_CONFIG_GLOBAL=str(home / "gitconfig"), GIT_CONFIG_NOSYSTEM="1", PYTHONPYCACHEPREFIX=str(top / "pycache"))
        print("The two-clone scenario (every kind edited on both sides; a pulls b):")
        for label, driver in (("plain git (no driver)", False), ("with the moss merge driver", True)):
            (top / label).mkdir()
            result = scenario(top / label, driver=driver)
            lost = ", ".join(f"{kind} {count}" for kind, count in result["lost"].items())  # type: ignore[union-attr]
            print(f"  {label:<28} conflicted paths: {len(result['conflicted'])} {result['conflicted']}; items lost: {lost}")
        (top / "driver").mkdir()
        timed(top / "driver", ["version"], 1)  # warm the bytecode cache
        figures = driver_times(top / "driver", args.tasks, args.messages, args.repeat)
        print(f"`moss merge driver` as a process, median of {args.repeat}:")
        print(f"  PLAN.md of {args.tasks} tasks, both sides changed:        {figures['plan']:7.1f} ms")
        print(f"  v1 outbox of {args.messages} messages, both sides changed: {figures['outbox']:7.1f} ms")
        print(f"  floor: `moss version` in the same run:                {figures['moss version']:7.1f} ms")


if __name__ == "__main__":
    main()

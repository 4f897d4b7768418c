"""Hand edits racing tool writes on one file: how many lines an editor saves are lost.

    .venv/bin/python bench/editor_race.py [--writers 8] [--saves 1200] [--pace 5,60] [--no-mcp]

Sets up a workspace in a temporary folder, then runs at once:
- WRITERS processes adding tasks to `.cstack/PLAN.md` through cstack's use case, in a loop;
- one MCP client calling `cstack.add` on a real `moss serve` over stdio (unless --no-mcp);
- an editor in this process that saves PLAN.md the way editors do (read it, add one line,
  write a temporary, rename it over the file; no lock), SAVES times, pausing a random time
  between the two --pace bounds (milliseconds) after each save.
Then it counts the editor's lines missing from the final file after one more tool write
(which folds back what the copies of displaced saves in `.PLAN.md.tmp-displaced/` hold that
the file lacks; lines only in such a copy are counted apart), the copies left, and prints the
tool writes that landed and those refused because a hand edit came in between. A lost line
is a defect.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from moss_files import scaffold
from moss_files.foundation import fs

BIN = Path(sys.executable).parent

WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from pathlib import Path
    import cstack
    from moss_files.foundation.context import Context
    from moss_files.foundation.errors import Conflict
    from moss_files.foundation.ids import fixed_clock
    root, stop, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    ctx = Context(root, clock=fixed_clock(datetime(2026, 11, 24, tzinfo=UTC)))
    written = refused = 0
    while not stop.exists():
        try:
            cstack.add_task(ctx, task=f"P2: writer {tag} task {written + refused}")
            written += 1
        except Conflict:
            refused += 1
    print(written, refused)
    """
)

MCP_CALLER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import anyio
    from mcp import Client, StdioServerParameters
    root, stop, moss = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    async def main():
        written = refused = 0
        params = StdioServerParameters(command=moss, args=["serve", "--tools", "cstack"], cwd=str(root))
        async with Client(params) as client:
            while not stop.exists():
                result = await client.call_tool("cstack.add", {"task": f"P3: mcp task {written + refused}"})
                if result.is_error:
                    refused += 1
                else:
                    written += 1
        print(written, refused)

    anyio.run(main)
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--saves", type=int, default=1200)
    parser.add_argument("--pace", default="5,60", help="pause after each save, min,max in ms")
    parser.add_argument("--no-mcp", action="store_true")
    args = parser.parse_args()
    low, high = (float(part) / 1000 for part in args.pace.split(","))
    with tempfile.TemporaryDirectory(prefix="moss-editor-race-") as folder:
        root = Path(folder) / "project"
        root.mkdir()
        scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
        plan = root / ".cstack" / "PLAN.md"
        stop = Path(folder) / "stop"
        tools = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(stop), str(n)], stdout=subprocess.PIPE, text=True) for n in range(args.writers)]
        if not args.no_mcp:
            tools.append(subprocess.Popen([sys.executable, "-c", MCP_CALLER, str(root), str(stop), str(BIN / "moss")], stdout=subprocess.PIPE, text=True))
        pause = random.Random(7)
        saved: list[str] = []
        started = time.perf_counter()
        try:
            for number in range(1, args.saves + 1):
                line = f"- hand line {number} written in an editor"
                temp = plan.with_name("PLAN.md.editor-swap")
                temp.write_bytes(plan.read_bytes() + line.encode() + b"\n")
                os.replace(temp, plan)
                saved.append(line)
                time.sleep(pause.uniform(low, high))
        finally:
            stop.touch()
            outcomes = [tool.communicate(timeout=120)[0].split() for tool in tools]
        elapsed = time.perf_counter() - started
        made = len(list(fs.displaced_folder(plan).glob(".kept.tmp-*")))
        fs.modify(plan, lambda snapshot: None)  # the next tool write settles the kept copies
        final = plan.read_text()
        copies = [*fs.displaced_folder(plan).glob(".kept.tmp-*"), *plan.parent.glob(".PLAN.md.tmp-displaced-*")]
        kept = "".join(p.read_text() for p in copies)
        lost = [line for line in saved if f"{line}\n" not in final and f"{line}\n" not in kept]
        in_kept = [line for line in saved if f"{line}\n" not in final and f"{line}\n" in kept]
        written = sum(int(out[0]) for out in outcomes if out)
        refused = sum(int(out[1]) for out in outcomes if out)
    print(
        f"editor saves: {len(saved)} over {elapsed:.1f} s (pause {args.pace} ms); tool processes: "
        f"{args.writers} cstack writers{'' if args.no_mcp else ' + 1 MCP client'}"
    )
    print(f"tool writes: {written} landed, {refused} refused (a hand edit came in between)")
    print(f"hand lines lost: {len(lost)} of {len(saved)}; only in a displaced copy: {len(in_kept)}")
    print(f"copies of displaced saves kept during the run: {made}; left after the next write: {len(copies)} (removed once {fs.KEEP_DISPLACED_SECONDS:g} s old)")
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()

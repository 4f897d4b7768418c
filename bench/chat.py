"""Chat bench: the board's chat and worker commands, and those on one task (its context, a
release), on a board with a year of tasks, against the same commands on a board of a few tasks.

    .venv/bin/python bench/chat.py [--sizes 10000 100000] [--repeat 7] [--baseline MOSS] [--json PATH]

At corpus size N the board is bench/board.py's: 2N tasks, three quarters DONE, a twentieth
WORKING and free, in epics of 100 (generated once into the bench cache), with five workers and
a `general` channel of CHANNEL_MESSAGES messages between them. The floor is the same workers
and channel on a board of BOARD_FLOOR_TASKS tasks: what the commands cost with no history.
None of these answers rests on the tasks nobody holds, so each row's target is the issue's
wording for history: within 20% of the floor. Each figure is the median of `--repeat` whole
processes:

* `moss board chat send general TEXT -w dev-1 --json`, an agent's message;
* `moss board chat read general -w dev-2 --json`, the next messages after dev-2's position;
* `moss worker list --json`, every worker with its status and task;
* `moss task context TASK --json`, what an agent reads before it works on a task (Moe's
  get_context: the task, its epic, the rails, its comments);
* `moss task release TASK -w dev-3 --json` of the task a claim (untimed) just gave dev-3: a
  write on one task, as a step, a plan, a completion, a status move or a QA verdict is.

`--baseline MOSS` measures another installation the same way (its `python` beside it).
`--rows-only [--sizes ...] [--json PATH] [--quick] [--baseline MOSS]` writes the rows for
bench/all.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import board as boards
import rows as shared

ROWS_ARGS = ["--rows-only"]
CHANNEL_MESSAGES = 1000
BOARD_FLOOR_TASKS = 20
WORKERS = ("dev-1", "dev-2", "dev-3", "qa-1", "arch-1")
CLI = "import sys; from moss_files.cli.main import main; sys.argv[0] = 'moss'; main()"


def make_board(source: Path, target: Path) -> None:
    """A copy of the generated board `source` with the workers and a channel of chat."""
    boards.copy_board(source, target)
    boards.register_team(target, list(WORKERS))
    chat = target / ".moss" / "board" / "chat"
    chat.mkdir(parents=True, exist_ok=True)
    lines = []
    for number in range(CHANNEL_MESSAGES):
        sender, mention = WORKERS[number % len(WORKERS)], WORKERS[(number + 1) % len(WORKERS)]
        stamp = f"2026-01-{1 + number * 20 // CHANNEL_MESSAGES:02d}T{number % 24:02d}:{number % 60:02d}:00.000Z"
        record = {
            "id": f"MSG-{number:026d}",
            "channel": "general",
            "sender": sender,
            "content": f"@{mention} the invoice totals are rounded once now ({number})",
            "replyTo": None,
            "mentions": [mention],
            "timestamp": stamp,
        }
        lines.append(json.dumps(record, separators=(",", ":")))
    (chat / "general.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    boards.settle_disk()


def measure(python: str, root: Path, repeat: int, env: dict[str, str]) -> dict[str, dict[str, float]]:
    """One installation's five figures on one board (medians, ms)."""
    task = min(path.stem for path in (root / ".moss" / "board" / "tasks").glob("*.md"))
    commands = {
        "send": ["board", "chat", "send", "general", "@dev-2 the fix is merged", "-w", "dev-1", "--json"],
        "read": ["board", "chat", "read", "general", "-w", "dev-2", "--json"],
        "workers": ["worker", "list", "--json"],
        "context": ["task", "context", task, "--json"],
    }
    figures: dict[str, dict[str, float]] = {}
    for key, args in commands.items():
        first = shared.run_process([python, "-c", CLI, *args], cwd=root, env=env, capture=True)
        try:
            json.loads(first.stdout)
        except ValueError:
            raise SystemExit(f"{python}: moss {' '.join(args)} in {root}: not JSON: {first.stdout[:300]!r}") from None
        runs = [shared.run_process([python, "-c", CLI, *args], cwd=root, env=env) for _ in range(repeat)]
        figures[key] = shared.medians(runs)
    figures["release"] = shared.medians([released(python, root, env) for _ in range(repeat)])
    return figures


def released(python: str, root: Path, env: dict[str, str]) -> shared.Run:
    """A release of the task a claim just gave dev-3 (the claim untimed): the release is timed."""
    claim = shared.run_process([python, "-c", CLI, "task", "claim", "-w", "dev-3", "--json"], cwd=root, env=env, capture=True)
    task = json.loads(claim.stdout)["task"]["id"]
    return shared.run_process([python, "-c", CLI, "task", "release", task, "-w", "dev-3", "--json"], cwd=root, env=env)


MEASURES = {
    "send": "moss board chat send, a year of tasks",
    "read": "moss board chat read (a worker's next), a year of tasks",
    "workers": "moss worker list, a year of tasks",
    "context": "moss task context (get_context), a year of tasks",
    "release": "moss task release (a held task), a year of tasks",
}


def issue_rows(size: int, *, repeat: int, baseline: str | None = None) -> list[shared.Row]:
    """The chat rows at corpus size `size` for this checkout and, if given, `baseline`."""
    installs = {"this": sys.executable, **({"baseline": str(Path(baseline).with_name("python"))} if baseline else {})}
    tasks = 2 * size
    year = boards.cached_board(tasks, claimable=max(8, tasks // 20), done=tasks * 3 // 4)
    few = boards.cached_board(BOARD_FLOOR_TASKS, claimable=2, done=BOARD_FLOOR_TASKS * 3 // 4)
    out: list[shared.Row] = []
    with shared.scratch("moss-bench-chat-") as temp:
        env = shared.process_env(temp / "pycache")
        for label, python in installs.items():
            with_history, without = {}, {}
            for source, figures, name in ((year, with_history, "year"), (few, without, "floor")):
                root = temp / f"{label}-{name}"
                make_board(source, root)
                figures.update(measure(python, root, repeat, env))
                shutil.rmtree(root, ignore_errors=True)
            out += shared.history_rows(
                MEASURES,
                with_history,
                without,
                size=size,
                build=label,
                floor_name=f"the same on a board of {BOARD_FLOOR_TASKS} tasks",
                note=lambda _figure: f"{tasks:,} tasks ({tasks * 3 // 4:,} DONE), {len(WORKERS)} workers, {CHANNEL_MESSAGES:,} messages in the channel",
            )
    return out


def main() -> None:
    shared.history_main(__doc__ or "", "chat rows", issue_rows, repeat=7)


if __name__ == "__main__":
    main()

"""Inbox bench: a look for unread mail in an inbox with a year of read history, against the same
look in an inbox holding only what is unread and recent.

    .venv/bin/python bench/inbox.py [--sizes 10000 100000] [--repeat 7] [--baseline MOSS] [--json PATH]

At corpus size N the inbox (layout v2, a file per message) has received N messages, one every
365/N days up to now, from five senders; all but the newest UNREAD are marked read in
read.log. This checkout's corpus is that inbox after one rotation (`mailbox.rotate_inbox`: the
read messages over a week old in month folders, their marks gone from read.log), as the first
`needlecast read` leaves it; the time that rotation took is printed. The floor is the same
inbox without its month folders: what the same look costs with no history. Each figure is the
median of `--repeat` whole processes:

* `needlecast inbox --unread --json`, what an agent asks for;
* `needlecast read ID --json` of an unread message (a different one each run), which marks it;
* the glance the agent hooks take at every prompt that mail arrived for
  (`needlecast.inbox_glance`), in a process of its own.

`--baseline MOSS` measures another installation the same way on the inbox as earlier versions
kept it: every message at the top, every mark in read.log. Each row's target is the issue's
wording for history: the figure with a year of history within 20% of the figure with none.
`--rows-only [--sizes ...] [--json PATH] [--quick] [--baseline MOSS]` writes the rows for
bench/all.py.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import rows as shared

ROWS_ARGS = ["--rows-only"]
UNREAD = 200  # at most: a tiny corpus (bench/all.py's test) leaves half its messages unread
SENDERS = ("amy", "ben", "cal", "dee", "eve")
CLI = "import sys; from needlecast.cli import main; sys.argv[0] = 'needlecast'; main()"
GLANCE = "import sys; from pathlib import Path; import needlecast; needlecast.inbox_glance(Path(sys.argv[1]))"


def make_inbox(folder: Path, size: int, *, rotated: bool, history: bool = True) -> None:
    """The corpus at `folder` (see the module docstring); `rotated`: after one rotation;
    without `history`, the rotated inbox without its month folders (the floor)."""
    from needlecast import mailbox
    from needlecast.message import Message

    box = mailbox.init_mailbox(folder, "v2")
    now = datetime.now(UTC).replace(microsecond=0)
    step = timedelta(days=365) / size
    messages = [
        Message(
            id=f"m{number:07d}",
            sender=SENDERS[number % len(SENDERS)],
            to=("me",),
            time=(now - (size - number) * step).strftime("%Y-%m-%dT%H:%M:%SZ"),
            body=f"Note {number}: the deploy of the router waits on the inbox index.\n",
        )
        for number in range(size)
    ]
    for first in range(0, size, 5000):
        mailbox.deliver(box, messages[first : first + 5000], now)
    with box.read_log.open("ab") as log:
        for item in messages[: size - unread_count(size)]:
            log.write(json.dumps({"at": item.time, "from": item.sender, "id": item.id}, sort_keys=True).encode() + b"\n")
    if rotated:
        started = time.perf_counter()
        moved = mailbox.rotate_inbox(box, now)
        (folder / ".bench-rotation.json").write_text(json.dumps({"moved": moved, "seconds": time.perf_counter() - started}))
    if not history:
        for path in mailbox.rotated_inbox_files(box):
            path.unlink()
        for month in [p for p in box.inbox_dir.iterdir() if p.is_dir()]:
            month.rmdir()


def unread_count(size: int) -> int:
    return min(UNREAD, size // 2)


def unread_ids(size: int, count: int) -> list[str]:
    first = size - unread_count(size)
    return [f"m{number:07d}" for number in range(first, first + count)]


def measure(python: str, root: Path, size: int, repeat: int, env: dict[str, str]) -> dict[str, dict[str, float]]:
    """One installation's three figures on one inbox (medians, ms)."""
    figures: dict[str, dict[str, float]] = {}
    listing = [python, "-c", CLI, "inbox", "--unread", "--json"]
    first = shared.run_process(listing, cwd=root, env=env, capture=True)
    try:
        count = len(json.loads(first.stdout)["messages"])
    except ValueError:
        raise SystemExit(f"{python}: needlecast inbox in {root}: not JSON: {first.stdout[:300]!r}") from None
    runs = [shared.run_process(listing, cwd=root, env=env) for _ in range(repeat)]
    figures["unread"] = shared.medians(runs, count=count)
    runs = [shared.run_process([python, "-c", CLI, "read", key, "--json"], cwd=root, env=env) for key in unread_ids(size, repeat)]
    figures["read"] = shared.medians(runs, count=1)
    runs = [shared.run_process([python, "-c", GLANCE, str(root)], cwd=root, env=env) for _ in range(repeat)]
    figures["glance"] = shared.medians(runs, count=count - repeat)
    return figures


MEASURES = {
    "unread": "needlecast inbox --unread, a year of read mail",
    "read": "needlecast read (marks), a year of read mail",
    "glance": "inbox glance (hooks), a year of read mail",
}


def issue_rows(size: int, *, repeat: int, baseline: str | None = None) -> list[shared.Row]:
    """The inbox rows at corpus size `size` for this checkout and, if given, `baseline`."""
    installs = {"this": (sys.executable, True), **({"baseline": (str(Path(baseline).with_name("python")), False)} if baseline else {})}
    out: list[shared.Row] = []
    with shared.scratch("moss-bench-inbox-") as temp:
        env = shared.process_env(temp / "pycache")
        floor_corpus = shared.cached("inbox-floor", size, 0, lambda folder: make_inbox(folder, size, rotated=True, history=False), sources=[Path(__file__)])
        for label, (python, rotated) in installs.items():
            corpus = shared.cached(
                f"inbox-{'rotated' if rotated else 'flat'}", size, 0, lambda folder, r=rotated: make_inbox(folder, size, rotated=r), sources=[Path(__file__)]
            )
            if rotated:
                done = json.loads((corpus / ".bench-rotation.json").read_text())
                print(f"  the first rotation at {size:,}: {done['moved']:,} messages moved in {done['seconds']:.1f} s (once)", flush=True)
            year = shared.copy_of(corpus, temp / f"{label}-year")
            bare = shared.copy_of(floor_corpus, temp / f"{label}-floor")
            with_history, without = measure(python, year, size, repeat, env), measure(python, bare, size, repeat, env)
            state = "rotated" if rotated else "all at the top"
            out += shared.history_rows(
                MEASURES,
                with_history,
                without,
                size=size,
                build=label,
                floor_name="the same, the unread and recent mail only",
                note=lambda _figure, state=state: f"{size:,} messages received over 365 days, {unread_count(size)} unread ({state})",
            )
            shutil.rmtree(year, ignore_errors=True)
            shutil.rmtree(bare, ignore_errors=True)
    return out


def main() -> None:
    shared.history_main(__doc__ or "", "inbox rows", issue_rows, repeat=7)


if __name__ == "__main__":
    main()

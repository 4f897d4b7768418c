"""`moss upgrade [--dry-run] [--kind K]... [--json]`: every toolkit file at its current format version.

Entry layer: parse options, call `upgrade.service`, render. Without --json, stdout carries one
line per kind (how many files go from which version to which), the problems (files left as
they are: conflicted, linked, unreadable, newer, or a move whose place is taken), then the
totals; progress of long runs goes to stderr. Exit statuses: 0 done (problems are reported,
not fatal), 2 bad arguments (an unknown kind, or one never rewritten), 5 a file changed or a
lock was held meanwhile (STALE_WRITE, LOCK_TIMEOUT, ALREADY_EXISTS; nothing is left written),
6 no workspace or a file that cannot be written (NOT_WRITABLE).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.cli.support import JsonOpt, RootOpt, emit, note, reporting
from moss_files.foundation import workspace
from moss_files.foundation.context import Context

PROGRESS_EVERY_SECONDS = 0.5


def _progress_printer() -> Any:
    """A `progress(done, total)` that reports on stderr at most twice a second, for long runs."""
    last = [time.monotonic()]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < PROGRESS_EVERY_SECONDS:
            return
        if total >= 200:
            last[0] = now
            note(f"upgrade: {done}/{total} files")

    return show


def _text(result: dict[str, Any]) -> str:
    lines = []
    verb = "would upgrade" if result["dry_run"] else "upgraded"
    for name, entry in result["kinds"].items():
        steps = ", ".join(f"{count} from format {step.replace(' -> ', ' to ')}" for step, count in entry["upgraded"].items())
        parts = [f"{verb} {steps}" if steps else "", f"{entry['at_current']} at format {entry['current']} already" if entry["at_current"] else ""]
        if entry["problems"]:
            parts.append(f"{entry['problems']} left as they are")
        lines.append(f"{name:<14} {'; '.join(part for part in parts if part)}")
    for problem in result["problems"]:
        where = f"{problem['path']}:{problem['line']}" if problem.get("line") else problem["path"]
        lines.append(f"problem        {where}  {problem['code']}: {problem['message']}")
    lines.append(result["message"])
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add `moss upgrade` to the `moss` app."""

    @app.command("upgrade")
    def upgrade_command(
        dry_run: Annotated[bool, typer.Option("--dry-run", "-n", help="Print what would be upgraded; write nothing (no lock file, no cache).")] = False,
        kinds: Annotated[
            list[str] | None,
            typer.Option(
                "--kind", "-k", help="Only files of this kind (repeat for several): capsule, task, insight, plan, mailbox, config, ...", show_default=False
            ),
        ] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Bring every toolkit file of the workspace to its kind's current format version.

        Files a newer moss-files wrote, conflicted, linked or unreadable files are reported and
        left as they are; the others are written all or nothing. Logs are never rewritten.
        """
        from moss_files.upgrade import service

        with reporting(as_json):
            top: Path = workspace.find_workspace(explicit=root)
            # With --json, stderr carries only a JSON error: no notes, no progress.
            ctx = Context(top, notify=None if as_json else note, progress=None if as_json else _progress_printer())
            result = service.upgrade(ctx, dry_run=dry_run, kinds=kinds or ())
        emit(result, as_json, text=_text(result))

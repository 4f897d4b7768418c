"""`moss hook EVENT [--json] [--root DIR]`: what Claude Code and Codex run at a session's
start, before a compaction, at a stop and on each prompt. Entry layer, without typer: a hook is
a process on the agent's path, so it loads only what its event needs (`cli.main` hands it the
arguments before typer is imported; `cli.hooks` registers the same command for `--help`).

A hook never fails the session: any error is written to `.moss/run/hooks.log` (to the user's
state folder outside a workspace or in one without `.moss/`) and the hook prints nothing and exits 0. Outside a workspace
it prints nothing. The workspace is `--root` (or MOSS_ROOT), else the one around `CLAUDE_PROJECT_DIR`, else
around the event's `cwd`, else around the current folder. With `--json` it prints what the
host reads (the event's JSON output); without, the text for a person.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO

EVENTS = ("session-start", "pre-compact", "stop", "user-prompt-submit")
HOST_NAMES = {"session-start": "SessionStart", "pre-compact": "PreCompact", "stop": "Stop", "user-prompt-submit": "UserPromptSubmit"}
PROJECT_ENV = "CLAUDE_PROJECT_DIR"
ROOT_ENV = "MOSS_ROOT"  # == foundation.workspace.ROOT_ENV
WORKER_ENV = "MOE_WORKER_ID"
SLEEVE_ENV = "NEEDLECAST_SLEEVE"
USAGE = f"usage: moss hook {{{','.join(EVENTS)}}} [--json] [--root DIR|--project NAME]"


class Usage(Exception):
    """The command line is not one this command takes."""


def parse_args(argv: Sequence[str]) -> tuple[str, bool, str | None]:
    """(event, as_json, root) from `moss hook`'s arguments. Raises Usage."""
    event: str | None = None
    as_json = False
    root: str | None = None
    items = list(argv)
    while items:
        item = items.pop(0)
        if item == "--json":
            as_json = True
        elif item in ("--root", "--project") and items:
            root = items.pop(0)
        elif item.startswith(("--root=", "--project=")):
            root = item.split("=", 1)[1]
        elif item in EVENTS and event is None:
            event = item
        else:
            raise Usage(f"unexpected argument {item!r}")
    if event is None:
        raise Usage("which event?")
    return event, as_json, root


def locate(explicit: str | None, environ: Mapping[str, str], event: Mapping[str, Any]) -> Path | None:
    """The workspace the hook is about, None when there is none."""
    from moss_files.foundation import workspace
    from moss_files.foundation.errors import RepoError

    explicit = explicit or environ.get(ROOT_ENV) or None
    if explicit:
        return workspace.find_workspace(explicit=explicit)
    for candidate in (environ.get(PROJECT_ENV), event.get("cwd"), os.getcwd()):
        if isinstance(candidate, str) and candidate and os.path.isdir(candidate):
            try:
                return workspace.find_workspace(start=Path(candidate))
            except RepoError:
                continue
    return None


def main(
    argv: Sequence[str],
    *,
    stdin: BinaryIO | None = None,
    stdout: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
    started: float | None = None,
) -> int:
    """Run one hook; returns the exit status (0, or 2 for a command line it does not take)."""
    started = time.monotonic() if started is None else started
    out = stdout or sys.stdout
    environ = os.environ if environ is None else environ
    try:
        name, as_json, explicit = parse_args(argv)
    except Usage as exc:
        print(f"{USAGE}\nerror: {exc}", file=sys.stderr)
        return 2
    root: Path | None = None
    try:
        from moss_files.hooks import gather

        event = gather.read_event(stdin if stdin is not None else sys.stdin.buffer)
        root = locate(explicit, environ, event)
        if root is None:
            return 0
        answer = _answer(name, root, event, environ, started)
    except Exception as exc:
        from moss_files.hooks import gather

        if root is None:  # the event could not be read: the log goes to the workspace around here
            try:
                root = locate(explicit, environ, {})
            except Exception:
                root = None
        gather.log_failure(root, name, exc)
        return 0
    if as_json and answer.output is not None:
        out.write(json.dumps(answer.output, ensure_ascii=False) + "\n")
    elif not as_json and answer.text:
        out.write(answer.text + "\n")
    out.flush()
    return 0


def _answer(name: str, root: Path, event: Mapping[str, Any], environ: Mapping[str, str], started: float) -> Any:
    from moss_files.foundation import config
    from moss_files.foundation.context import AGENT, Context
    from moss_files.hooks import events, gather, orientation

    settings_data = config.load_config(root)
    settings, problems = orientation.parse_settings(settings_data.data.get("hooks"))
    for problem in problems:
        gather.log_failure(root, name, ValueError(problem))
    worker = settings.worker or environ.get(WORKER_ENV) or None
    ctx = Context(root, config=settings_data, actor=AGENT, worker_id=worker, sleeve=environ.get(SLEEVE_ENV) or None)
    return events.HANDLERS[name](ctx, event, settings, started=started)

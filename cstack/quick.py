"""`cstack --version`, `status`, `add`, `start`, `done`, `close`, `block`, `reopen` and
`remember` run without typer, in their common forms.

Entry layer. These are the commands an agent runs many times a session, each a few
milliseconds of work on the files; loading typer and building the app cost such a process
more than the work (about 60 ms of a 160 ms `cstack add` on 2 cores). `cstack.main` hands its
arguments here first. An invocation this module parses with certainty (only the options the
command has, values click would take as they are) runs here and prints what the typer command
prints, byte for byte, with the same exit status. Anything else (`--help`, an unknown option,
an option without its value, a value that starts with `-`, a missing or extra argument, an
output stream click would re-encode) returns None and goes to typer, which runs or reports it.
tests/cstack/test_cstack_quick.py compares the parser with click's on generated command lines,
and the two paths as whole processes.

The rendering of these commands lives here, and `cstack.cli` (their typer twins) uses it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import moss_files.cli.cmdline as cmdline
import moss_files.cli.streams as streams
from moss_files.foundation import collector

if TYPE_CHECKING:
    from datetime import datetime

    from moss_files.foundation.context import Context

NOW_ENV = "MOSS_NOW"
ROOT_ENV, MOE_ROOT_ENV = streams.ROOT_ENV, streams.MOE_ROOT_ENV  # --root's variables (a test checks them)

# Each command as cstack.cli declares it (a test compares with click's parsing of the typer
# commands): its positional argument (name, required) or None, its value options (option ->
# parameter; `depends` repeats), and its parameters' defaults. Every command has --root (alias
# --project) and --json.
_COMMON_VALUES = {"--root": "root", "--project": "root"}
_COMMON_DEFAULTS: dict[str, Any] = {"root": None, "as_json": False}
COMMANDS: dict[str, tuple[tuple[str, bool] | None, dict[str, str], dict[str, Any]]] = {
    "status": (None, {}, {}),
    "add": (
        ("spec", True),
        {"--id": "ident", "--depends": "depends", "--parent": "parent", "--section": "section"},
        {"ident": None, "depends": None, "parent": None, "section": "tasks"},
    ),
    "start": (("task", True), {}, {}),
    "done": (("task", False), {"--reason": "reason"}, {"task": None, "reason": None}),
    "close": (("task", True), {"--reason": "reason"}, {"reason": None}),
    "block": (("task", True), {"--reason": "reason"}, {"reason": None}),
    "reopen": (("task", True), {}, {}),
    "remember": (("text", True), {"--category": "category"}, {"category": None}),
}
_REQUIRED_OPTIONS = {"close": "reason", "block": "reason"}  # click refuses the command without them
_REPEATED = ("depends",)


# --------------------------------------------------------------------------- parsing


def parse(command: str, args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters typer would give `cstack <command>` for `args` (the words after the
    command), in click's types (a list for a repeated option, None for one not given, the root
    as a string); None when this parser is not certain, or click would refuse them."""
    positional, values, defaults = COMMANDS[command]
    scanned = cmdline.scan(args, {**values, **_COMMON_VALUES}, {"--json": "as_json"})
    if scanned is None:
        return None  # --help, an unknown option, `--json=1`: click answers
    words, given = scanned
    params: dict[str, Any] = {**defaults, **_COMMON_DEFAULTS}
    if not cmdline.assign(params, given, repeated=_REPEATED):
        return None  # an empty value or one that looks like an option: left to click
    if positional is None:
        if words:
            return None  # click: "Got unexpected extra argument"
    else:
        name, required = positional
        if len(words) > 1 or (required and not words):
            return None  # an extra argument, or a missing one
        if words:
            params[name] = words[0]
    required_option = _REQUIRED_OPTIONS.get(command)
    if required_option is not None and params[required_option] is None:
        return None  # click: "Missing option '--reason'."
    if params["root"] is None:
        params["root"] = streams.env_root()
    return params


# --------------------------------------------------------------------------- rendering


def now() -> datetime:
    """The time from MOSS_NOW when it is set (a date means its midnight UTC), else the system
    clock's. Read on each call, so only commands that date something refuse a bad value
    (InvalidRequest)."""
    from datetime import UTC, datetime  # here: `--version` and the parsing never need it

    raw = os.environ.get(NOW_ENV, "").strip()
    if not raw:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        from moss_files.foundation.errors import InvalidRequest

        raise InvalidRequest(f"{NOW_ENV}={raw!r} is not an RFC 3339 time or a YYYY-MM-DD date") from None
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def context(root: Any, note: Callable[[str], None] = streams.note) -> Context:
    """The Context of a cstack command: the workspace at (or around) `root`, the clock `now`,
    notes to stderr."""
    from pathlib import Path

    from moss_files.foundation import workspace
    from moss_files.foundation.context import Context

    explicit = Path(root) if isinstance(root, str) else root
    return Context(workspace.find_workspace(explicit=explicit), clock=now, notify=note)


def task_line(task: dict[str, Any]) -> str:
    """A task as `cstack plan` and the writing commands print it: its number, then its line."""
    return f"{task['number']:>3}. {task['text'].strip()}"


def depends_ids(values: Sequence[str] | None) -> list[str]:
    """The ids `--depends` names: repeatable, each also a comma-separated list."""
    return [part for item in values or () for part in item.split(",")]


def remember_line(data: dict[str, Any]) -> str:
    """The human line of `cstack remember`: the category, then the entry."""
    return f"{data['category']}: {data['text']}"


def section(path: str) -> str:
    """A section path as people read it (`Backlog / Bugs`); the JSON joins headings with `/`."""
    return path.replace("/", " / ")


def status_text(data: dict[str, Any]) -> str:
    """The human text of `cstack status`."""
    progress = data["progress"]
    lines = [
        f"status:        {data['status'] or '-'} ({data['state']})",
        f"task:          {data['task'] or '-'}",
    ]
    if data["started"]:
        lines.append(f"started:       {data['started']}")
    focus = (data["focus"] or "-").splitlines()
    lines.append(f"focus:         {focus[0]}")
    lines.extend(f"               {line}" for line in focus[1:])
    lines.append(f"progress:      {progress['completed']}/{progress['total']}")
    lines.append(f"blockers:      {'; '.join(data['blockers']) or '-'}")
    lines.append("next steps:" + ("" if data["next_steps"] else "    -"))
    lines.extend(f"  {number}. {step}" for number, step in enumerate(data["next_steps"], start=1))
    lines.append(f"last modified: {data['last_modified'] or '-'}")
    return "\n".join(lines)


def status_notes(data: dict[str, Any]) -> list[str]:
    """The stderr lines of `cstack status`: a problem CURRENT.md has."""
    return [f"problem[{problem['code']}] {problem['path']}:{problem['line']}: {problem['message']}" for problem in data["problems"]]


def transition_notes(data: dict[str, Any]) -> list[str]:
    """The stderr lines of a transition in text mode: where the task moved, what CURRENT.md got."""
    notes = []
    if data["moved_from"] is not None:
        notes.append(f"moved from {section(data['moved_from']) or '(no section)'} to {section(data['task']['section'])}")
    if data["current_updated"]:
        notes.append(f"updated CURRENT.md ({', '.join(data['current']['places'])})")
    return notes


# --------------------------------------------------------------------------- running


def run(argv: Sequence[str]) -> int | None:
    """Run `argv` (the words after `cstack`) here when it is `--version` or a common form of a
    command in COMMANDS: the exit status. None when typer must run it."""
    if list(argv) == ["--version"]:
        from moss_files import __version__

        streams.echo(f"moss-files {__version__}")
        return 0
    if not argv or argv[0] not in COMMANDS:
        return None
    params = parse(argv[0], argv[1:])
    if params is None:
        return None
    found = params
    # The work is a parse of the stack's files (a year of them: 5,000 closed tasks, 10,000
    # memories) and one write, and the process ends with it: the collections that would run
    # meanwhile walk what the parse made and keeps (3 to 4 ms of a `cstack done`).
    with collector.paused():
        return streams.run_quick(list(argv), lambda: _run_command(argv[0], found))


def _run_command(command: str, params: dict[str, Any]) -> int:
    import cstack

    as_json = params.pop("as_json")
    root = params.pop("root")
    if command == "status":
        status, data = streams.reported(as_json, lambda: cstack.show_status(context(root)))
        if not status:
            for line in status_notes(data):
                streams.note(line)
            streams.emit(data, as_json, text=status_text(data))
        return status
    if command == "add":
        ids = depends_ids(params["depends"])
        status, data = streams.reported(
            as_json,
            lambda: cstack.add_task(context(root), task=params["spec"], ident=params["ident"], depends=ids, parent=params["parent"], section=params["section"]),
        )
        if not status:
            streams.emit(data, as_json, text=task_line(data["task"]))
        return status
    if command == "remember":
        status, data = streams.reported(as_json, lambda: cstack.remember(context(root), text=params["text"], category=params["category"]))
        if not status:
            streams.emit(data, as_json, text=remember_line(data))
        return status
    status, data = streams.reported(as_json, lambda: cstack.transition(context(root), action=command, task=params["task"], reason=params.get("reason")))
    if not status:
        if not as_json:
            for line in transition_notes(data):
                streams.note(line)
        streams.emit(data, as_json, text=task_line(data["task"]))
    return status

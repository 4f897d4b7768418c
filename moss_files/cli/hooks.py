"""`moss hook session-start|pre-compact|stop|user-prompt-submit`: the hooks Claude Code and
Codex run. Entry layer. `cli.main` runs these without typer (`hooks.run`); this registration
gives them their `--help` and their place in `moss --help`, and runs the same function.
"""

from __future__ import annotations

from typing import Annotated

import typer

from moss_files.cli.support import new_app

HookJson = Annotated[bool, typer.Option("--json", help="Print the JSON object the agent's host reads (default: the text for a person).")]
HookRoot = Annotated[
    str | None,
    typer.Option(
        "--root",
        "--project",
        metavar="PATH|NAME",
        help="The workspace, or a project's registered name (default: around $CLAUDE_PROJECT_DIR, the event's cwd, or here).",
        show_default=False,
    ),
]

DESCRIPTIONS = {
    "session-start": "Print the orientation a session starts with: the active task and next steps, ready tasks, unread mail, "
    "the board tasks this worker holds, recent decisions (about 1,500 tokens at most).",
    "pre-compact": "Write a checkpoint note (.moss/checkpoints/) of what is in flight before the host compacts the conversation.",
    "stop": "At a stop: remind (or ask the agent to continue) when code changed in this session but .cstack/CURRENT.md did not.",
    "user-prompt-submit": "Add one line to the prompt's context when new mail arrived since the last prompt.",
}


def register(app: typer.Typer) -> None:
    """Add `hook` to the `moss` app."""
    hook_app = new_app(
        "The hooks Claude Code and Codex run (installed by `moss init --agent claude|codex`). Each reads the host's event "
        "(JSON) on stdin; it never fails the session: on any error it prints nothing, exits 0 and notes the error in "
        ".moss/run/hooks.log. Exit codes: 0, or 2 for a command line it does not take."
    )
    app.add_typer(hook_app, name="hook")
    for event, description in DESCRIPTIONS.items():
        hook_app.command(event, help=description)(_command(event))


def _command(event: str):  # type: ignore[no-untyped-def]
    def command(as_json: HookJson = False, root: HookRoot = None) -> None:
        from moss_files.hooks import run

        argv = [event, *(["--json"] if as_json else []), *(["--root", root] if root else [])]
        raise typer.Exit(run.main(argv))

    command.__name__ = f"hook_{event.replace('-', '_')}"
    return command

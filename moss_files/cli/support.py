"""What every CLI (moss, cstack, needlecast) shares: options, output and error reporting.

Entry layer. stdout carries data only (one JSON document with --json); messages, progress and
errors go to stderr. A MossError becomes its exit code and, on stderr, a human line or (with
--json) the shared JSON error body. Anything else is a bug: it exits 1 with a one-line message
(the traceback only when MOSS_DEBUG is set).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

from moss_files.cli.streams import warn_if_clone_lacks_merge_driver
from moss_files.foundation import structured
from moss_files.foundation.errors import InvalidRequest, MossError, describe, error_body
from moss_files.foundation.workspace import MOE_ROOT_ENV, ROOT_ENV

__all__ = [
    "HELP_OPTIONS",
    "HelpGroup",
    "JsonOpt",
    "RootOnlyOpt",
    "RootOpt",
    "VersionOpt",
    "confirm",
    "default_port",
    "emit",
    "new_app",
    "note",
    "read_stdin_if",
    "report",
    "reporting",
    "warn_if_clone_lacks_merge_driver",
]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
_ROOT_HELP = (
    f"Workspace root: a folder, or a project's name from `moss projects` (default: walk up from the current directory; env {ROOT_ENV}, or {MOE_ROOT_ENV})."
)
RootOpt = Annotated[
    Path | None,
    typer.Option("--root", "--project", envvar=[ROOT_ENV, MOE_ROOT_ENV], metavar="PATH|NAME", help=_ROOT_HELP, show_default=False),
]
# For the commands where --project already meant something else (`moss migrate`: the source's name).
RootOnlyOpt = Annotated[
    Path | None,
    typer.Option("--root", envvar=[ROOT_ENV, MOE_ROOT_ENV], metavar="PATH|NAME", help=_ROOT_HELP, show_default=False),
]


# `-h` is `--help` for every command, as for install.sh and migrate.sh; subcommands inherit it.
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


class HelpGroup(typer.core.TyperGroup):
    """A command group whose `--help` lists each command with the first sentence of its help,
    whole and wrapped, where click cuts it to the width left beside the names (`...`)."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=sys.maxsize)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def new_app(help_text: str, *, cls: type | None = None) -> typer.Typer:
    """A Typer app with our conventions: help on no args and on `-h`, command lists that show
    whole sentences (a `cls` of its own must derive from HelpGroup), no rich tracebacks."""
    return typer.Typer(
        cls=cls or HelpGroup,
        help=help_text,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        rich_markup_mode=None,
        context_settings=HELP_OPTIONS,
    )


def _print_version(value: bool) -> None:
    if value:
        from moss_files import __version__

        typer.echo(f"moss-files {__version__}")
        raise typer.Exit()


# The `--version` of the three tools' groups: the toolkit's version, as `moss version` prints it.
VersionOpt = Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True, expose_value=True, help="Print the toolkit's version and exit.")]


@contextmanager
def reporting(as_json: bool) -> Iterator[None]:
    """Turn errors raised inside the block into the right output and exit code."""
    try:
        yield
    except typer.Exit:
        raise
    except MossError as err:
        report(err, as_json)
        raise typer.Exit(err.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:  # a bug: report it without hiding that it is one
        if os.environ.get("MOSS_DEBUG"):
            traceback.print_exc()
        bug = MossError(f"internal error: {type(exc).__name__}: {exc}", hint="set MOSS_DEBUG=1 for the traceback")
        report(bug, as_json)
        raise typer.Exit(1) from None


def report(err: MossError, as_json: bool = False) -> None:
    """Say `err` on stderr: `error[CODE] …` for people, the JSON error body with --json. For a
    failure that is part of an answer (an unknown id among found ones), where nothing is raised."""
    text = json.dumps(error_body(err), ensure_ascii=False) if as_json else describe(err)
    typer.echo(text, err=True)


def emit(data: Any, as_json: bool, text: str | None = None) -> None:
    """Print `data` as JSON, or `text` (default: str(data)) for humans."""
    if as_json:
        for block in structured.json_blocks(data, default=str):  # a large answer (a migration's items) without a copy per piece
            typer.echo(block, nl=False)
        typer.echo("")
    elif text is not None:
        if text:
            typer.echo(text)
    else:
        typer.echo(str(data))


def note(message: str) -> None:
    """A human message on stderr (progress, what was done)."""
    typer.echo(message, err=True)


def confirm(question: str, *, yes: bool, shown: Sequence[str] = ()) -> bool:
    """Whether a destructive command may go ahead: True with `--yes`; at a terminal, the answer
    to `question [y/N]`, asked on stderr after the lines `shown` (what would be destroyed);
    anything but y or yes is no. A script, with no terminal on stdin, must say `--yes`:
    nothing is destroyed by default.

    Raises InvalidRequest CONFIRMATION_REQUIRED without a terminal and without `yes`.
    """
    if yes:
        return True
    if sys.stdin is None or not sys.stdin.isatty():
        raise InvalidRequest(
            "this deletes for good, and there is no terminal to confirm it at",
            code="CONFIRMATION_REQUIRED",
            hint="pass --yes to go ahead (--dry-run lists what it would delete)",
        )
    for line in shown:
        typer.echo(line, err=True)
    typer.echo(f"{question} [y/N] ", err=True, nl=False)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def read_stdin_if(value: str | None) -> str:
    """Return `value`, or all of stdin when it is None or '-' (without the BOM of the file piped in)."""
    if value is None or value == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InvalidRequest("no text given: pass it as an argument or pipe it on stdin")
        from moss_files.foundation import document  # here: the commands that never read stdin do not load it

        return document.strip_bom(sys.stdin.read())[0]
    return value


def default_port(text: str | None, builtin: int, *, variable: str = "") -> int:
    """A daemon's default port: `text` (a variable's value) when it is set, else `builtin`.
    Raises InvalidRequest for a value that is no port number."""
    if text is None or not text.strip():
        return builtin
    if not text.strip().isdigit() or not 0 < int(text) <= 65535:
        raise InvalidRequest(f"{variable or 'the default port'}={text!r} is not a port number (1-65535)", details={"variable": variable, "value": text})
    return int(text)

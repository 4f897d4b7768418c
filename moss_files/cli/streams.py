"""Output the CLIs share that needs no typer: a line to stdout or stderr written as typer's
`echo` writes it, a JSON document or text, an error's report, the merge-driver warning.

Entry layer, stdlib only, so a command that runs without typer (`cli.quick`) prints the same
bytes as its typer twin: text plus a newline, flushed, with ANSI escape sequences removed when
the stream is not a terminal (click's rule and pattern). A stream whose encoding is ASCII, which
click would wrap in UTF-8, is `misconfigured`; callers leave such runs to typer.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, TextIO

from moss_files.foundation.errors import MossError, describe, error_body

_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")  # click's _compat._ansi_re


def echo(text: str, *, err: bool = False) -> None:
    """Write `text` and a newline as typer.echo does (to stderr with `err`)."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    out = text + "\n"
    if not _isatty(stream):
        out = _ANSI.sub("", out)
    stream.write(out)
    stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except Exception:
        return False


def misconfigured(stream: TextIO | None) -> bool:
    """Whether click would replace `stream` (an ASCII encoding, a stream without one)."""
    if stream is None:
        return False
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return True
    import codecs

    try:
        return codecs.lookup(encoding).name == "ascii"
    except LookupError:
        return True


def note(message: str) -> None:
    """A human message on stderr (progress, what was done)."""
    echo(message, err=True)


def emit(data: Any, as_json: bool, text: str | None = None) -> None:
    """Print `data` as JSON, or `text` (default: str(data)) for humans; as cli.support.emit."""
    if as_json:
        from moss_files.foundation import structured  # here: text output, the common case, never needs json

        echo("".join(structured.json_blocks(data, default=str)))
    elif text is not None:
        if text:
            echo(text)
    else:
        echo(str(data))


def report(err: MossError, as_json: bool) -> None:
    """An error on stderr: the JSON error body with --json, else a human line."""
    import json

    echo(json.dumps(error_body(err), ensure_ascii=False) if as_json else describe(err), err=True)


def warn_if_clone_lacks_merge_driver(argv: list[str], *, setup_commands: tuple[str, ...] = ("init",)) -> None:
    """Say once, on stderr, when the workspace around the current directory (or $MOSS_ROOT, or
    $MOE_PROJECT_PATH)
    has a `.gitattributes` naming the moss merge driver that this clone does not define. Every
    CLI calls this with its arguments before the command runs. Silent for help, for the
    commands that set the driver up, and with --json (stderr then carries only JSON; `moss
    merge check --json` reports the same as `driver_configured`)."""
    from moss_files.foundation import gitsettings, workspace

    first = next((arg for arg in argv if not arg.startswith("-")), None)
    if first is None or first in setup_commands or "--json" in argv or "--help" in argv:
        return
    try:
        root = workspace.find_workspace(explicit=workspace.root_from_env(os.environ))
    except MossError:
        return
    if gitsettings.missing_merge_driver(root):
        note(gitsettings.WARNING)

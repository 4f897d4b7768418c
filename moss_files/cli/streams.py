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
from collections.abc import Callable
from typing import Any, TextIO

from moss_files.foundation.errors import MossError, describe, error_body

_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")  # click's _compat._ansi_re
ROOT_ENV = "MOSS_ROOT"  # == foundation.workspace.ROOT_ENV (a test checks), read as --root's default
MOE_ROOT_ENV = "MOE_PROJECT_PATH"  # == foundation.workspace.MOE_ROOT_ENV: read when MOSS_ROOT is not set


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


def env_root() -> str | None:
    """The root the environment names, as click reads --root's variables: the first set."""
    return os.environ.get(ROOT_ENV) or os.environ.get(MOE_ROOT_ENV) or None


def reported(as_json: bool, work: Callable[[], Any]) -> tuple[int, Any]:
    """(0, work()), or an error's exit status after reporting it as cli.support.reporting does:
    a MossError as itself, an interrupt as 130, anything else as an internal error (exit 1)."""
    try:
        return 0, work()
    except MossError as err:
        report(err, as_json)
        return err.exit_code, None
    except KeyboardInterrupt:
        echo("interrupted", err=True)
        return 130, None
    except Exception as exc:  # a bug: report it without hiding that it is one
        if os.environ.get("MOSS_DEBUG"):
            import traceback

            traceback.print_exc()
        bug = MossError(f"internal error: {type(exc).__name__}: {exc}", hint="set MOSS_DEBUG=1 for the traceback")
        report(bug, as_json)
        return 1, None


def run_quick(argv: list[str], command: Callable[[], int], *, setup_commands: tuple[str, ...] = ("init",)) -> int | None:
    """Run a command the quick path parsed (`argv`: the words after the program's name) as its
    typer twin would run: the merge-driver warning first, a reader gone away (broken pipe) as
    exit 1 without a trace, Ctrl-C as click's `Aborted!`. None, and nothing run, when stdout or
    stderr is a stream click would replace (`misconfigured`): typer runs it then."""
    if misconfigured(sys.stdout) or misconfigured(sys.stderr):
        return None
    try:
        warn_if_clone_lacks_merge_driver(argv, setup_commands=setup_commands)
        return command()
    except BrokenPipeError:
        # As click: the reader went away (`moss search x | head -1`); exit 1 without a trace,
        # and keep the interpreter's final flush from failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        echo("Aborted!", err=True)  # as click, outside the command's own reporting
        return 1


def skip_final_collection() -> None:
    """Spare the interpreter's exit its garbage collection over every object still alive
    (every module, typing's and sqlite3's objects, the registry): 4 to 6 ms of CPU of a
    command run without typer, more than a tenth of a refresh of 10,000 files beyond its walk.
    The objects are moved to the collector's permanent generation (`gc.freeze`), which the
    collections at exit skip; the exit is otherwise the usual one: stdout and stderr are
    flushed, atexit handlers run, and every object freed by reference count is finalized.
    Only garbage in reference cycles is then left unfinalized, and such a command closes
    what it opens (its connection, descriptors and locks) before it returns."""
    import gc

    gc.freeze()


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

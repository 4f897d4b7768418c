"""The `moss` command's entry point. Entry layer.

`main` runs the common forms of `moss search`, `moss index refresh|rebuild` and `moss
list|inventory|latest|fetch|history` without typer (`cli.quick`: they are a few milliseconds of work, and
typer's machinery cost a search process more than its query), `moss hook EVENT` (`hooks.run`: an agent's hook, on its path), and
`moss --help` / `moss -h` at a terminal of 80 columns or more (`cli.top_help`: the page typer
prints, kept as text, where typer would load every feature module to write it); every
other invocation goes to the typer app in `cli.app`, which builds only the command it runs. This module imports neither, so a quick run never loads typer.
`app` and the app's helpers are still reachable as this module's attributes, loaded on first
use.
"""

from __future__ import annotations

import sys
from typing import Any

_APP_NAMES = frozenset({"app", "builtins", "doc_app", "LazyGroup", "LAZY_COMMANDS", "feature_command", "feature_commands"})


def main() -> None:
    """Console-script entry point."""
    from moss_files.cli.startup import defer_inspect

    defer_inspect()
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and len(argv) > 1 and not {"--help", "-h"} & set(argv):
        # An agent's hook: a process on the agent's path, which needs neither typer nor the
        # quick search (`moss hook --help` goes to typer, which registers the same command).
        from moss_files.hooks import run

        raise SystemExit(run.main(argv[1:]))
    if argv in (["--help"], ["-h"]):
        from moss_files.cli import top_help

        if top_help.show(top_help.TEXT):
            raise SystemExit(0)
    from moss_files.cli import quick, streams

    status = quick.run(argv)
    if status is not None:
        streams.skip_final_collection()
        raise SystemExit(status)
    from moss_files.cli.app import app
    from moss_files.cli.streams import warn_if_clone_lacks_merge_driver

    warn_if_clone_lacks_merge_driver(argv, setup_commands=quick.SETUP_COMMANDS)
    app()


def __getattr__(name: str) -> Any:
    """The typer app (`app`) and its helpers, from `cli.app`, loaded on first use."""
    if name in _APP_NAMES:
        from moss_files.cli import app as module

        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

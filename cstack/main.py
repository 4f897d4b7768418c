"""The `cstack` command's entry point. Entry layer.

`cstack --help` / `cstack -h` at a terminal of 80 columns or more prints the page typer would
print, kept as text (`cstack.top_help`), without loading typer (two thirds of that process);
every other invocation goes to the typer app in `cstack.cli`. This module imports neither.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] in (["--help"], ["-h"]):
        from cstack.top_help import TEXT
        from moss_files.cli.top_help import show

        if show(TEXT):
            raise SystemExit(0)
    from cstack import cli

    cli.main()

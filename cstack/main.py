"""The `cstack` command's entry point. Entry layer.

`cstack --help` / `cstack -h` at a terminal of 80 columns or more prints the page typer would
print, kept as text (`cstack.top_help`), without loading typer (two thirds of that process);
`--version` and the common forms of the commands an agent runs most (`status`, `add`, the
transitions, `remember`) run without typer too (`cstack.quick`); every other invocation goes
to the typer app in `cstack.cli`. This module imports neither.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point."""
    from moss_files.cli.startup import defer_inspect

    defer_inspect()
    argv = sys.argv[1:]
    if argv in (["--help"], ["-h"]):
        from cstack.top_help import TEXT
        from moss_files.cli.top_help import show

        if show(TEXT):
            raise SystemExit(0)
    import moss_files.cli.streams as streams
    from cstack import quick

    status = quick.run(argv)
    if status is not None:
        streams.skip_final_collection()
        raise SystemExit(status)
    from cstack import cli

    cli.main()

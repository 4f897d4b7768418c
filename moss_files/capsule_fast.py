"""A fast path for the hottest command, `moss fetch <name>`, that skips the CLI framework.

Entry layer. typer (with pydantic behind it) costs about 100 ms before any command runs, which
alone breaks the 150 ms budget for `moss fetch`. `main()` answers the plain forms of fetch
(a name or --id, -w/--workspace, --root, --json, --no-text, --include-deleted) with the same
output, errors and exit codes as the typer command, and hands every other command line to
`moss_files.cli.main` unchanged. Imports neither typer nor git.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_VALUE_OPTIONS = {"--id": "id", "--workspace": "workspace", "-w": "workspace", "--root": "root"}
_FLAGS = {"--json": "json", "--no-text": "no_text", "--include-deleted": "include_deleted"}


def parse_fetch(argv: Sequence[str]) -> dict[str, Any] | None:
    """The options of a plain `fetch` command line, or None when it needs the full CLI."""
    if not argv or argv[0] != "fetch":
        return None
    options: dict[str, Any] = {"id": None, "workspace": "default", "root": None, "name": None, "json": False, "no_text": False, "include_deleted": False}
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg in _FLAGS:
            options[_FLAGS[arg]] = True
        elif arg in _VALUE_OPTIONS:
            if index + 1 >= len(argv):
                return None
            options[_VALUE_OPTIONS[arg]] = argv[index + 1]
            index += 1
        elif arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in _VALUE_OPTIONS:
            key, value = arg.split("=", 1)
            options[_VALUE_OPTIONS[key]] = value
        elif arg.startswith("-") or options["name"] is not None:
            return None  # --help, --at, a typo or a second name: the full CLI reports it
        else:
            options["name"] = arg
        index += 1
    return options


def summary_line(item: dict[str, Any]) -> str:
    """One human line for a capsule summary (shared with the typer commands)."""
    from moss_files.capsule import ms_to_rfc3339

    handle = f"{item['workspace']}/{item['name']}" if item.get("name") else f"{item['workspace']}/@{item['id']}"
    flag = " (deleted)" if item.get("deleted_at") else ""
    title = f"  {item['title']}" if item.get("title") and item.get("title") != item.get("name") else ""
    return f"{ms_to_rfc3339(item['updated_at'] * 1000)}  {item['id']}  {handle}  {item['capsule_chars']} chars{title}{flag}"


def try_fetch(argv: Sequence[str]) -> int | None:
    """Run a plain fetch and return its exit code; None when the full CLI must handle it."""
    options = parse_fetch(argv)
    if options is None:
        return None
    from moss_files import capsules, config, workspace
    from moss_files.errors import MossError, describe, error_body

    root = options["root"] if options["root"] is not None else os.environ.get(workspace.ROOT_ENV)
    try:
        top = workspace.find_workspace(explicit=root or None)
        ctx = capsules.Context(top, config.load_config(top))
        result = capsules.fetch(ctx, options["id"], options["workspace"], options["name"], not options["no_text"], options["include_deleted"])
    except MossError as err:
        text = json.dumps(error_body(err), ensure_ascii=False) if options["json"] else describe(err)
        sys.stderr.write(text + "\n")
        return err.exit_code
    except Exception:  # not ours to explain: the full CLI reports it the usual way
        return None
    if options["json"]:
        sys.stdout.write(json.dumps(result, ensure_ascii=False, indent=2, default=str) + "\n")
    elif options["no_text"]:
        sys.stdout.write(summary_line(result) + "\n")
    else:
        sys.stdout.write(result["capsule_text"])
    sys.stdout.flush()
    return 0


def main() -> None:
    """Console-script entry point: the fast path when it applies, else the whole `moss` CLI."""
    code = try_fetch(sys.argv[1:])
    if code is None:
        from moss_files.cli import main as full_main

        full_main()
        return
    sys.exit(code)


if __name__ == "__main__":
    main()

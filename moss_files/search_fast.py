"""A fast path for `moss search`, skipping the CLI framework (typer loads in about 100 ms,
two thirds of the 150 ms a whole `moss search` may take).

Entry layer. `try_search(argv)` answers `search` command lines with the same output, errors and
exit codes as the typer command in `search_cli` (which renders with the functions here), and
returns None for anything else (`--help`, bad numbers), which the full CLI then handles.
Imports neither typer nor the YAML modules; a search that re-reads no file loads only the
index, sqlite3 and the query core.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

_VALUES = {"--kind": "kind", "--limit": "limit", "--offset": "offset", "--root": "root"}
_FLAGS = {"--json": "json", "--all": "all", "--raw": "raw"}
PROGRESS_MIN_FILES = 2000


def parse_search(argv: Sequence[str]) -> dict[str, Any] | None:
    """The options of a `search` command line, or None when the full CLI must handle it.

    Like the typer command (which ignores unknown options), a word that is not one of the
    command's options is part of the query, so `-legacy` excludes and `--` is optional.
    """
    if not argv or argv[0] != "search":
        return None
    options: dict[str, Any] = {"query": [], "kind": [], "limit": 20, "offset": 0, "root": None, "json": False, "all": False, "raw": False}
    index = 1
    literal = False
    while index < len(argv):
        arg = argv[index]
        name, has_value, inline = arg.partition("=")
        if literal:
            options["query"].append(arg)
        elif arg == "--":
            literal = True
        elif arg in ("--help", "-h"):
            return None
        elif arg in _FLAGS:
            options[_FLAGS[arg]] = True
        elif name in _VALUES:
            if has_value:
                value = inline
            elif index + 1 < len(argv):
                index += 1
                value = argv[index]
            else:
                return None
            key = _VALUES[name]
            if key in ("limit", "offset"):
                try:
                    options[key] = int(value)
                except ValueError:
                    return None
            elif key == "kind":
                options["kind"].append(value)
            else:
                options["root"] = value
        else:
            options["query"].append(arg)
        index += 1
    if not options["query"]:
        return None
    return options


def split_values(values: Sequence[str] | None) -> list[str]:
    """Repeatable, comma-separated option values as one list."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def scan_line(item: dict[str, Any]) -> str:
    """One human line for a scan result: id, kind, day, summary, [status]."""
    date = (item.get("date") or "")[:10] or "-" * 10
    status = f" [{item['status']}]" if item.get("status") else ""
    return f"{item['id']}  {item['kind']:<8} {date}  {item['summary']}{status}"


def scan_notes(result: dict[str, Any]) -> list[str]:
    """The stderr lines under a human scan listing."""
    if result["matches"]:
        notes = [f"{len(result['matches'])} matches" + (" (more: raise --limit, page with --offset, or narrow the query)" if result["truncated"] else "")]
    else:
        notes = [result["hint"]]
    if result.get("unindexed"):
        notes.append(f"{result['unindexed']} files could not be indexed: see `moss index status`")
    return notes


def progress_printer(write: Any) -> Any:
    """A `progress(done, total)` that reports big builds on stderr, at most twice a second."""
    import time

    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if total < PROGRESS_MIN_FILES or (done < total and now - last[0] < 0.5):
            return
        last[0] = now
        write(f"indexing: {done}/{total} files")

    return show


def try_search(argv: Sequence[str]) -> int | None:
    """Run a `search` command line and return its exit code; None when the full CLI must."""
    options = parse_search(argv)
    if options is None:
        return None
    from moss_files import search, workspace
    from moss_files.errors import MossError, describe, error_body

    def note(message: str) -> None:
        sys.stderr.write(message + "\n")

    root = options["root"] if options["root"] is not None else os.environ.get(workspace.ROOT_ENV)
    try:
        top = workspace.find_workspace(explicit=root or None)
        ctx = search.Context(top, notify=note, progress=progress_printer(note))
        result = search.scan(
            ctx,
            " ".join(options["query"]),
            kinds=split_values(options["kind"]),
            limit=options["limit"],
            offset=options["offset"],
            match="all" if options["all"] else "any",
            raw=options["raw"],
        )
    except MossError as err:
        note(json.dumps(error_body(err), ensure_ascii=False) if options["json"] else describe(err))
        return err.exit_code
    if options["json"]:
        sys.stdout.write(json.dumps(result, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        for line in scan_notes(result):
            note(line)
        if result["matches"]:
            sys.stdout.write("\n".join(scan_line(item) for item in result["matches"]) + "\n")
    sys.stdout.flush()
    return 0


def main() -> None:
    """Console-script entry point: the fast path for `search`, else the whole `moss` CLI."""
    code = try_search(sys.argv[1:])
    if code is None:
        from moss_files.cli import main as full_main

        full_main()
        return
    sys.exit(code)


if __name__ == "__main__":
    main()

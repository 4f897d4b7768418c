"""`moss search`, `moss index refresh|rebuild` and `moss
list|inventory|latest|fetch|history` run without typer, in their common forms.

Entry layer. A search is a few milliseconds of work; building typer's machinery and the
command costs a process more than that, so `cli.main` hands its arguments here first. An
invocation this module parses with certainty (only the options the command has, values that
convert as click converts them) runs here and prints what the typer command prints, byte for
byte, with the same exit status. Anything else (`--help`, an option that needs a value and has
none, a flag given a value, no query words, a command or option of another shape, an output
stream click would re-encode) returns None and goes to typer, which runs or reports it.
tests/index/test_quick_cli.py and tests/capsules/test_quick_listing_cli.py compare the two on
generated command lines and on real runs.

The rendering of these commands lives here, and `cli.search` and `cli.capsules` (their typer
twins) use it.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from moss_files.cli import cmdline, streams

if TYPE_CHECKING:
    from pathlib import Path

    from moss_files.foundation.context import Context

ROOT_ENV, MOE_ROOT_ENV = streams.ROOT_ENV, streams.MOE_ROOT_ENV  # --root's variables (a test checks them)
PROGRESS_MIN_FILES = 2000  # smaller trees index in well under a second: no progress lines
SEARCH_DEFAULTS: dict[str, Any] = {"query": (), "kind": (), "limit": 20, "offset": 0, "match_all": False, "raw": False, "root": None, "as_json": False}
_SEARCH_VALUES = {"--kind": "kind", "--limit": "limit", "--offset": "offset", "--root": "root", "--project": "root"}
_SEARCH_FLAGS = {"--all": "match_all", "--raw": "raw", "--json": "as_json"}
_INTEGERS = ("limit", "offset")
_INDEX_COMMANDS = ("refresh", "rebuild")
# `moss list|inventory|latest`: (their parameters' defaults, value options, flags), as
# cli.capsules declares them (a test compares with click's parsing of the typer commands).
_FILTER_OPTIONS = {"--run-id": "run_id", "--phase": "phase", "--role": "role", "--root": "root", "--project": "root"}
_PAGE_OPTIONS = {"--limit": "limit", "-l": "limit", "--offset": "offset", "-o": "offset"}
_WORKSPACE_OPTIONS = {"--workspace": "workspace", "-w": "workspace"}
_FILTERS = {"run_id": None, "phase": None, "role": None, "include_deleted": False, "root": None, "as_json": False}
LISTING_COMMANDS: dict[str, tuple[dict[str, Any], dict[str, str], dict[str, str]]] = {
    "list": (
        {"workspace": "default", "limit": 20, "offset": 0, **_FILTERS},
        {**_WORKSPACE_OPTIONS, **_PAGE_OPTIONS, **_FILTER_OPTIONS},
        {"--include-deleted": "include_deleted", "--json": "as_json"},
    ),
    "inventory": (
        {"workspace": None, "tag": None, "name_prefix": None, "limit": 100, "offset": 0, **_FILTERS},
        {**_WORKSPACE_OPTIONS, "--tag": "tag", "--name-prefix": "name_prefix", **_PAGE_OPTIONS, **_FILTER_OPTIONS},
        {"--include-deleted": "include_deleted", "--json": "as_json"},
    ),
    "latest": (
        {"workspace": "default", "include_text": False, **_FILTERS},
        {**_WORKSPACE_OPTIONS, **_FILTER_OPTIONS},
        {"--include-text": "include_text", "--include-deleted": "include_deleted", "--json": "as_json"},
    ),
    "fetch": (
        {
            "name": None,
            "capsule_id": None,
            "name_option": None,
            "workspace": "default",
            "include_deleted": False,
            "no_text": False,
            "at": None,
            "root": None,
            "as_json": False,
        },
        {"--id": "capsule_id", "--name": "name_option", "-n": "name_option", **_WORKSPACE_OPTIONS, "--at": "at", "--root": "root", "--project": "root"},
        {"--include-deleted": "include_deleted", "--no-text": "no_text", "--json": "as_json"},
    ),
    "history": (
        {"name": None, "capsule_id": None, "name_option": None, "workspace": "default", "limit": None, "root": None, "as_json": False},
        {
            "--id": "capsule_id",
            "--name": "name_option",
            "-n": "name_option",
            **_WORKSPACE_OPTIONS,
            "--limit": "limit",
            "-l": "limit",
            "--root": "root",
            "--project": "root",
        },
        {"--json": "as_json"},
    ),
}
LISTING_ARGUMENTS = {"fetch": "name", "history": "name"}  # the one optional argument a command of LISTING_COMMANDS takes
SETUP_COMMANDS = ("init", "merge", "version", "codes")  # moss commands run without the merge-driver warning


# --------------------------------------------------------------------------- parsing


def parse_search(args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters typer would give `moss search` for `args` (the words after `search`), as
    `{query, kind, limit, offset, match_all, raw, root, as_json}` in click's types (tuples, ints,
    the root as a string); None when this parser is not certain, or click would refuse them.

    Unknown options are query words (`-legacy`, `--x=y`), as the command's
    `ignore_unknown_options` makes them; `--` makes every later word a query word."""
    scanned = cmdline.scan(args, _SEARCH_VALUES, _SEARCH_FLAGS, unknown_is_word=True)
    if scanned is None:
        return None
    words, given = scanned
    params = dict(SEARCH_DEFAULTS)
    kinds: list[str] = []
    for key, value in given:
        if key == "kind":
            kinds.append(str(value))
        elif key in _INTEGERS:
            try:
                params[key] = int(value)  # click's INT converts with int() too
            except ValueError:
                return None
        elif key == "root" and not value:
            return None  # an empty path: left to click
        else:
            params[key] = value
    if not words:
        return None  # click: "Missing argument 'QUERY...'."
    params["query"] = tuple(words)
    params["kind"] = tuple(kinds)
    if params["root"] is None:
        params["root"] = streams.env_root()
    return params


def parse_listing(args: Sequence[str], command: str) -> dict[str, Any] | None:
    """The parameters typer would give `moss list|inventory|latest|history` (`command`) for
    `args` (the words after it), in click's types (ints, the root as a string); None when this
    parser is not certain, or click would refuse them: help, a word that is no option of the
    command (but `history`'s one NAME), an option that needs a value and has none, a value that
    starts with `-` or is empty, a flag given a value, a short option with its value attached
    (`-l5`)."""
    defaults, values, flags = LISTING_COMMANDS[command]
    scanned = cmdline.scan(args, values, flags)
    if scanned is None:
        return None
    words, given = scanned
    params = dict(defaults)
    positional = LISTING_ARGUMENTS.get(command)
    if len(words) > (positional is not None):
        return None  # a word that is no option, or more than the one argument
    if words:
        if not words[0] or words[0].startswith("-"):
            return None  # an empty argument, `-`, or a word after `--`: left to click
        params[str(positional)] = words[0]
    if not cmdline.assign(params, given, integers=_INTEGERS):
        return None  # an empty value, one that looks like an option, a bad integer: left to click
    if params["root"] is None:
        params["root"] = streams.env_root()
    return params


def parse_index(args: Sequence[str], command: str = "refresh") -> dict[str, Any] | None:
    """The parameters of `moss index refresh|rebuild` (`command`) for `args` (the words after
    the subcommand): `{root, as_json}`, and `summaries` (its default: `--summaries` goes to
    typer) for rebuild; None when not certain (help, anything else)."""
    scanned = cmdline.scan(args, {"--root": "root", "--project": "root"}, {"--json": "as_json"})
    if scanned is None or scanned[0]:
        return None  # help, an argument, an unknown option
    if any(key == "root" and not value for key, value in scanned[1]):
        return None  # an empty path: left to click
    found = dict(scanned[1])
    root, as_json = found.get("root"), bool(found.get("as_json"))
    params: dict[str, Any] = {"root": root if root is not None else streams.env_root(), "as_json": as_json}
    if command == "rebuild":
        params = {"summaries": "heuristic", **params}
    return params


# --------------------------------------------------------------------------- rendering


def split_values(values: Sequence[str] | None) -> list[str]:
    """Repeatable, comma-separated option values as one list."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def scan_line(item: dict[str, Any]) -> str:
    """One human line for a scan result: id, kind, day, handle (a capsule's workspace/name),
    summary, [status]."""
    date = (item.get("date") or "")[:10] or "-" * 10
    handle = f"{item['handle']}  " if item.get("handle") else ""
    status = f" [{item['status']}]" if item.get("status") else ""
    return f"{item['id']}  {item['kind']:<8} {date}  {handle}{item['summary']}{status}"


def scan_notes(result: dict[str, Any]) -> list[str]:
    """The stderr lines under a human scan listing."""
    if result["matches"]:
        found = len(result["matches"])
        more = " (more: raise --limit, page with --offset, or narrow the query)" if result["truncated"] else ""
        notes = [f"{found} {'match' if found == 1 else 'matches'}{more}"]
    else:
        notes = [result["hint"]]
    if result.get("unindexed"):
        notes.append(f"{result['unindexed']} files could not be indexed: see `moss index status`")
    return notes


def report_line(result: dict[str, Any]) -> str:
    """The human line of `moss index refresh|rebuild`."""
    verb = "rebuilt" if result["rebuilt"] else "refreshed"
    parts = [f"{verb}: {result['files']} files"]
    if not result["rebuilt"]:
        parts.append(f"{result['added']} added, {result['changed']} changed, {result['removed']} removed")
    if result["problems"]:
        parts.append(f"{result['problems']} with problems (see `moss index status`)")
    parts.append(f"{result['seconds']:.3f}s")
    return ", ".join(parts)


def progress_printer(write: Callable[[str], None]) -> Callable[[int, int], None]:
    """A `progress(done, total)` that reports big builds on stderr, at most twice a second."""
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if total < PROGRESS_MIN_FILES or (done < total and now - last[0] < 0.5):
            return
        last[0] = now
        write(f"indexing: {done}/{total} files")

    return show


def workspace_context(root: Path | str | None, note: Callable[[str], None] = streams.note) -> Context:
    """The Context of the workspace at (or around) `root`: index notes and the progress of
    big builds go to stderr through `note`."""
    from moss_files.foundation import workspace
    from moss_files.foundation.context import Context

    top = workspace.find_workspace(explicit=root)
    return Context(top, notify=note, progress=progress_printer(note))


def capsule_row(item: dict[str, Any]) -> str:
    """One human line for a capsule summary."""
    from moss_files.capsules.model import ms_to_rfc3339

    handle = f"{item['workspace']}/{item['name']}" if item.get("name") else f"{item['workspace']}/@{item['id']}"
    flag = " (deleted)" if item.get("deleted_at") else ""
    title = f"  {item['title']}" if item.get("title") and item.get("title") != item.get("name") else ""
    return f"{ms_to_rfc3339(item['updated_at'] * 1000)}  {item['id']}  {handle}  {item['capsule_chars']} chars{title}{flag}"


def capsule_listing(result: dict[str, Any]) -> str:
    """The human text of `moss list|inventory`: a line per capsule, then the page's place."""
    page = result["pagination"]
    lines = [capsule_row(item) for item in result["items"]]
    shown = f"{page['offset'] + 1}-{page['offset'] + len(result['items'])}" if result["items"] else "none"
    lines.append(f"({shown} of {page['total']}{', more with --offset' if page['has_more'] else ''})")
    return "\n".join(lines)


def problem_lines(result: dict[str, Any]) -> list[str]:
    """The stderr warnings for the files a capsule use case could not read."""
    lines = []
    for problem in result.get("problems", []):
        where = problem.get("path", "")
        if problem.get("line"):
            where += f":{problem['line']}"
        lines.append(f"warning[{problem['code']}] {where}: {problem['message']}")
    return lines


def no_latest_error(workspace: str, run_id: str | None, phase: str | None, role: str | None) -> Any:
    """The NotFound `moss latest` reports when no capsule qualifies."""
    from moss_files.foundation.errors import NotFound

    filtered = ", ".join(f"{key} {value!r}" for key, value in (("run", run_id), ("phase", phase), ("role", role)) if value)
    return NotFound(f"no capsule in workspace {workspace!r}" + (f" with {filtered}" if filtered else ""))


def capsule_context(root: Path | str | None) -> Context:
    """The Context of the capsule commands: the workspace at (or around) `root`, with its settings."""
    from moss_files.foundation import config, workspace
    from moss_files.foundation.context import Context

    top = workspace.find_workspace(explicit=root)
    return Context(top, config=config.load_config(top))


def addressed(call: Callable[..., dict[str, Any]], argument: str | None, option: str | None, capsule_id: str | None, workspace: str) -> dict[str, Any]:
    """`call(id=, workspace=, name=)` for the capsule the command line names: by the name
    argument or Moss's `--name` (given both, they must agree), or by `--id`. Moss's CLI takes an
    id as its argument (`moss fetch 01J…`), so an argument of an id's form that names no capsule
    is tried as an id.

    Raises InvalidRequest when the argument and `--name` disagree; what `call` raises.
    """
    from moss_files.capsules.model import is_capsule_id
    from moss_files.foundation.errors import InvalidRequest, NotFound

    if argument is not None and option is not None and argument != option:
        raise InvalidRequest(
            f"the name argument {argument!r} and --name {option!r} disagree; give one",
            details={"field": "name", "spellings": ["name", "--name"], "name": argument, "--name": option},
        )
    name = option if option is not None else argument
    try:
        return call(id=capsule_id, workspace=workspace, name=name)
    except NotFound as err:
        if capsule_id is not None or option is not None or argument is None or not is_capsule_id(argument):
            raise
        try:
            return call(id=argument, workspace=workspace, name=None)
        except NotFound:
            raise err from None


def history_text(result: dict[str, Any]) -> str:
    """The human text of `moss history`: a line per committed version, newest first."""
    lines = [
        f"{v['commit'][:12]}  {v['date']}  {v['author']}  {v['summary']}{'  (moved away from this path)' if v['removed'] else ''}" for v in result["versions"]
    ]
    if result["dirty"]:
        lines.insert(0, "(uncommitted changes)")
    if not result["versions"]:
        lines.append(f"no committed versions of {result['path']}")
    return "\n".join(lines)


def show_fetched(result: dict[str, Any], as_json: bool, no_text: bool) -> None:
    """Print what `moss fetch` gives: the record as JSON, a line of metadata (`--no-text`), or
    the capsule's text as it is (a capsule's bytes must not gain a newline)."""
    if as_json:
        streams.emit(result, True)
    elif no_text:
        streams.emit(result, False, text=capsule_row(result))
    else:
        sys.stdout.write(result["capsule_text"])
        sys.stdout.flush()


# --------------------------------------------------------------------------- running


def run(argv: Sequence[str]) -> int | None:
    """Run `argv` (the words after `moss`) here when it is a common search or index refresh
    or rebuild: the exit status. None when typer must run it."""
    if argv[:1] == ["search"]:
        params = parse_search(argv[1:])
        command: Callable[..., int] = _search
    elif len(argv) >= 2 and argv[0] == "index" and argv[1] in _INDEX_COMMANDS:
        params = parse_index(argv[2:], argv[1])
        command = _index_refresh if argv[1] == "refresh" else _index_rebuild
    elif argv[:1] and argv[0] in LISTING_COMMANDS:
        params = parse_listing(argv[1:], argv[0])
        runners: dict[str, Callable[..., int]] = {"list": _list, "inventory": _inventory, "latest": _latest, "fetch": _fetch, "history": _history}
        command = runners[argv[0]]
    else:
        return None
    if params is None:
        return None
    found = params
    return streams.run_quick(list(argv), lambda: command(**found), setup_commands=SETUP_COMMANDS)


def _search(query: tuple[str, ...], kind: tuple[str, ...], limit: int, offset: int, match_all: bool, raw: bool, root: str | None, as_json: bool) -> int:
    from moss_files.index import service

    def work() -> dict[str, Any]:
        ctx = workspace_context(root)
        return service.scan(ctx, " ".join(query), kinds=split_values(kind), limit=limit, offset=offset, match="all" if match_all else "any", raw=raw)

    status, result = streams.reported(as_json, work)
    if status:
        return status
    if not as_json:
        for line in scan_notes(result):
            streams.note(line)
    streams.emit(result, as_json, text="\n".join(scan_line(item) for item in result["matches"]))
    return 0


def _index_refresh(root: str | None, as_json: bool) -> int:
    from moss_files.foundation import workspace
    from moss_files.index import service

    def work() -> dict[str, Any]:
        # As `index_refresh(workspace_context(root))`, without building the Context.
        top = workspace.find_workspace(explicit=root)
        return service.refresh_at(top, notify=streams.note, progress=progress_printer(streams.note))

    status, result = streams.reported(as_json, work)
    if not status:
        streams.emit(result, as_json, text=report_line(result))
    return status


def _index_rebuild(root: str | None, as_json: bool, summaries: str) -> int:
    from moss_files.foundation import workspace
    from moss_files.index import service

    def work() -> dict[str, Any]:
        if summaries != "heuristic":
            return service.index_rebuild(workspace_context(root), summaries=summaries)
        # As `index_rebuild(workspace_context(root))`, without building the Context.
        top = workspace.find_workspace(explicit=root)
        return service.rebuild_at(top, notify=streams.note, progress=progress_printer(streams.note))

    status, result = streams.reported(as_json, work)
    if not status:
        streams.emit(result, as_json, text=report_line(result))
    return status


def _listed(as_json: bool, work: Callable[[], dict[str, Any]]) -> int:
    """Run a listing use case and print its page, as `moss list|inventory` print it."""
    status, result = streams.reported(as_json, work)
    if status:
        return status
    for line in problem_lines(result):
        streams.note(line)
    streams.emit(result, as_json, text=capsule_listing(result))
    return 0


def _path(root: str | None) -> Path | None:
    """The root as click hands it to the typer command (a Path)."""
    from pathlib import Path

    return Path(root) if root is not None else None


def _list(
    workspace: str, limit: int, offset: int, include_deleted: bool, run_id: str | None, phase: str | None, role: str | None, root: str | None, as_json: bool
) -> int:
    from moss_files.capsules import service as capsules

    return _listed(
        as_json,
        lambda: capsules.list_capsules(
            capsule_context(_path(root)),
            workspace=workspace,
            limit=limit,
            offset=offset,
            include_deleted=include_deleted,
            run_id=run_id,
            phase=phase,
            role=role,
        ),
    )


def _inventory(
    workspace: str | None,
    tag: str | None,
    name_prefix: str | None,
    limit: int,
    offset: int,
    include_deleted: bool,
    run_id: str | None,
    phase: str | None,
    role: str | None,
    root: str | None,
    as_json: bool,
) -> int:
    from moss_files.capsules import service as capsules

    return _listed(
        as_json,
        lambda: capsules.inventory(
            capsule_context(_path(root)),
            workspace=workspace,
            tag=tag,
            name_prefix=name_prefix,
            run_id=run_id,
            phase=phase,
            role=role,
            include_deleted=include_deleted,
            limit=limit,
            offset=offset,
        ),
    )


def _latest(
    workspace: str, include_text: bool, include_deleted: bool, run_id: str | None, phase: str | None, role: str | None, root: str | None, as_json: bool
) -> int:
    from moss_files.capsules import service as capsules

    status, result = streams.reported(
        as_json,
        lambda: capsules.latest(
            capsule_context(_path(root)), workspace=workspace, include_text=include_text, include_deleted=include_deleted, run_id=run_id, phase=phase, role=role
        ),
    )
    if status:
        return status
    for line in problem_lines(result):
        streams.note(line)
    item = result["item"]
    if as_json:
        streams.emit(result, True)
    elif item is None:
        streams.report(no_latest_error(workspace, run_id, phase, role), False)
    elif include_text:
        sys.stdout.write(item["capsule_text"])  # as is: a capsule's bytes must not gain a newline
        sys.stdout.flush()
    else:
        streams.emit(item, False, text=capsule_row(item))
    return 3 if item is None else 0


def _history(name: str | None, capsule_id: str | None, name_option: str | None, workspace: str, limit: int | None, root: str | None, as_json: bool) -> int:
    # Loaded here only: history reads git (GitPython), which no other quick command needs.
    from moss_files.capsules import history

    def work() -> dict[str, Any]:
        return addressed(functools.partial(history.history, capsule_context(_path(root)), limit=limit), name, name_option, capsule_id, workspace)

    status, result = streams.reported(as_json, work)
    if not status:
        streams.emit(result, as_json, text=history_text(result))
    return status


def _fetch(
    name: str | None,
    capsule_id: str | None,
    name_option: str | None,
    workspace: str,
    include_deleted: bool,
    no_text: bool,
    at: str | None,
    root: str | None,
    as_json: bool,
) -> int:
    def work() -> dict[str, Any]:
        ctx = capsule_context(_path(root))
        if at is not None:
            # Loaded here only: it reads git, which plain fetches never pay for.
            from moss_files.capsules import revision

            call = functools.partial(revision.fetch_at, ctx, rev=at, include_text=not no_text, include_deleted=include_deleted)
        else:
            from moss_files.capsules import service as capsules

            call = functools.partial(capsules.fetch, ctx, include_text=not no_text, include_deleted=include_deleted)
        return addressed(call, name, name_option, capsule_id, workspace)

    status, result = streams.reported(as_json, work)
    if not status:
        show_fetched(result, as_json, no_text)
    return status

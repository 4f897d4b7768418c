"""`moss search|expand|timeline`, `moss index rebuild|refresh|status|watch`.

Entry layer: parse options, call the index's use cases (`index.service`), render. `--json`
prints the use case's dict as is (the shape the MCP tools return); errors go to stderr with
their class's exit code (2 bad request, 3 not found, 4 unreadable file, 5 conflict, 7 cache).
This module loads only for its own commands (the lazy table in `cli.main`), and SQLite only
when a use case opens the index; the common forms of `search` and `index refresh|rebuild` run
without typer, in `cli.quick`, which renders for both. The insight and session commands are
in `cli.loopflow`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.cli import quick
from moss_files.cli.quick import scan_line, split_values
from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, report, reporting
from moss_files.foundation.context import Context
from moss_files.foundation.errors import NotFound
from moss_files.index import service as search

KindOpt = Annotated[
    list[str] | None,
    typer.Option("--kind", help="Only these kinds (repeatable): insight, session, capsule, task, message, memory, current…", show_default=False),
]


def workspace_context(root: Path | None) -> Context:
    """The Context of the workspace at (or around) `root`: index notes and the progress of
    big builds go to stderr."""
    return quick.workspace_context(root, note)


# --------------------------------------------------------------------------- rendering records


def _render_value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) if value else "-"
    return "-" if value is None else str(value)


_LONG_FIELDS = ("content", "body", "capsule_text", "text")


def render_record(record: dict[str, Any]) -> str:
    """A full record for people: one `key: value` line each, then its long text."""
    lines = []
    long_text = None
    for key, value in record.items():
        if key in _LONG_FIELDS and isinstance(value, str):
            long_text = value
            continue
        lines.append(f"{key}: {_render_value(value)}")
    if long_text is not None:
        lines.append("")
        lines.append(long_text.rstrip("\n"))
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add the search and index commands to the `moss` app."""
    index_app = new_app("The search index: a derived SQLite cache under .moss/cache/, safe to delete.")
    app.add_typer(index_app, name="index")

    # Unknown options are query words, so `moss search auth -legacy` excludes; for the same
    # reason the command has no one-letter options (`-kind:x` must not read as `-k ind:x`).
    @app.command("search", context_settings={"ignore_unknown_options": True})
    def search_cmd(
        query: Annotated[
            list[str],
            typer.Argument(
                help='Terms, "phrases", -exclusions, field:value filters (kind: status: tag: type: from: to: after: before: date:).', show_default=False
            ),
        ],
        kind: KindOpt = None,
        limit: Annotated[int, typer.Option("--limit", help="At most this many matches (1-200).")] = 20,
        offset: Annotated[int, typer.Option("--offset", help="Skip this many matches (paging).")] = 0,
        match_all: Annotated[bool, typer.Option("--all", help="Every term must match (default: any term).")] = False,
        raw: Annotated[bool, typer.Option("--raw", help="Pass the query to SQLite FTS5 unescaped.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Search every artifact: ids with one-line summaries, best first (then `moss expand ID`)."""
        with reporting(as_json):
            result = search.scan(
                workspace_context(root), " ".join(query), kinds=split_values(kind), limit=limit, offset=offset, match="all" if match_all else "any", raw=raw
            )
        if not as_json:
            for line in quick.scan_notes(result):
                note(line)
        emit(result, as_json, text="\n".join(scan_line(item) for item in result["matches"]))

    @app.command("expand")
    def expand_cmd(
        ids: Annotated[list[str], typer.Argument(help="Ids from `moss search` (any kind).", show_default=False)],
        links: Annotated[bool, typer.Option("--links", help="Also list the items each one links to.")] = False,
        timeline: Annotated[bool, typer.Option("--timeline", help="Also list items dated around each one.")] = False,
        depth: Annotated[int, typer.Option("--depth", help="Items on each side for --timeline.")] = 3,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Full records of items by id, read from their files; unknown ids are listed (exit 3 if none is found)."""
        with reporting(as_json):
            result = search.expand(workspace_context(root), ids, include_links=links, include_timeline=timeline, depth=depth)
        blocks = []
        for item in result["items"]:
            where = f"{item['path']}:{item['line']}" if item.get("line") else item["path"]
            block = [f"== {item['kind']} {item['id']}  ({where})", render_record(item["record"])]
            if "links" in item:
                block.append("links: " + (", ".join(f"{i['id']} ({i['kind']})" for i in item["links"]["items"]) or "-"))
                if item["links"]["missing"]:
                    block.append("missing links: " + ", ".join(item["links"]["missing"]))
            if "timeline" in item:
                block.extend(
                    [
                        "timeline:",
                        *("  " + scan_line(i) for i in item["timeline"]["before"]),
                        "  -> this",
                        *("  " + scan_line(i) for i in item["timeline"]["after"]),
                    ]
                )
            blocks.append("\n".join(block))
        if not as_json:
            for missing in result["not_found"]:
                report(NotFound(f"no item with id {missing!r}"))
            for error in result.get("errors", []):
                note(f"error[{error['code']}] {error['path']}:{error.get('line') or ''} {error['message']}")
        emit(result, as_json, text="\n\n".join(blocks))
        if not result["items"]:
            raise typer.Exit(3 if not result.get("errors") else 4)

    @app.command("timeline")
    def timeline_cmd(
        anchor: Annotated[str, typer.Argument(help="An id, or a time: 2026-01-21, 2026-01-21T10:00:00Z, today, 3d, now.", show_default=False)],
        before: Annotated[int, typer.Option("--before", "-b", help="Items before the anchor.")] = 5,
        after: Annotated[int, typer.Option("--after", "-a", help="Items after the anchor.")] = 5,
        kind: KindOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """What happened around an item or a moment, oldest first."""
        with reporting(as_json):
            result = search.timeline(workspace_context(root), anchor, before=before, after=after, kinds=split_values(kind))
        center = result["anchor"]
        handle = f"{center['handle']}  " if center.get("handle") else ""
        middle = f"-> {center['id']} {center['kind']} {center['date'][:10]}  {handle}{center['summary']}" if "id" in center else f"-> {center['date']}"
        lines = [scan_line(i) for i in result["before"]] + [middle] + [scan_line(i) for i in result["after"]]
        emit(result, as_json, text="\n".join(lines))

    # ----------------------------------------------------------------- index

    @index_app.command("refresh")
    def index_refresh_cmd(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Bring the index in step with the files (every search does this first)."""
        with reporting(as_json):
            result = search.index_refresh(workspace_context(root))
        emit(result, as_json, text=quick.report_line(result))

    @index_app.command("rebuild")
    def index_rebuild_cmd(
        summaries: Annotated[
            str,
            typer.Option(
                "--summaries",
                help="heuristic, or ai: also ask the Ollama server of [summaries] for the summaries of insights and sessions (kept in the index only).",
            ),
        ] = "heuristic",
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Build the index anew from every file (searches keep using the old one meanwhile)."""
        with reporting(as_json):
            ctx = workspace_context(root)
            if summaries == "ai":
                from moss_files.foundation import config

                ctx = ctx.replace(config=config.load_config(ctx.root))
            result = search.index_rebuild(ctx, summaries=summaries)
        lines = [quick.report_line(result)]
        if "summaries" in result:
            done = result["summaries"]
            why = ", ".join(f"{reason} {count}" for reason, count in done["reasons"].items())
            lines.append(
                f"summaries: {done['ai']} from {done['model']}, {done['heuristic']} heuristic"
                + (f" ({why})" if why else "")
                + f", {done['kept']} kept as written"
            )
        emit(result, as_json, text="\n".join(lines))

    @index_app.command("status")
    def index_status_cmd(
        check: Annotated[bool, typer.Option("--check", help="Exit 4 when some file could not be indexed.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Where the index is, what it holds, and every file it could not (fully) read."""
        with reporting(as_json):
            result = search.index_status(workspace_context(root))
        lines = [
            f"index: {result['path']} (schema {result['schema']}, {result['size_bytes']} bytes)",
            f"files: {result['files']}  items: {result['items']}  " + "  ".join(f"{k}: {v}" for k, v in result["by_kind"].items()),
        ]
        errors = [p for p in result["problems"] if p["severity"] == "error"]
        lines.append(f"problems: {len(result['problems'])}" + (f" ({len(errors)} errors)" if errors else ""))
        lines.extend(f"  {p['severity']:<7} {p['path']}:{p.get('line') or ''} [{p['code']}] {p['message']}" for p in result["problems"])
        emit(result, as_json, text="\n".join(lines))
        if check and errors:
            raise typer.Exit(4)

    @index_app.command("watch")
    def index_watch_cmd(
        with_parent: Annotated[
            bool,
            typer.Option(
                "--with-parent",
                help="Run as the helper of the process that started this one (moss serve, the sidecar): stop when it ends, and log only problems.",
            ),
        ] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Keep the index warm until stopped (Ctrl-C, SIGTERM): queries skip the walk meanwhile."""
        import os
        import signal

        stopping: list[int] = []
        signal.signal(signal.SIGTERM, lambda number, frame: stopping.append(number))
        parent = os.getppid()

        def stop() -> bool:
            # A helper whose parent died is adopted by another process: its parent id changes.
            return bool(stopping) or (with_parent and os.getppid() != parent)

        def ready(info: dict[str, Any]) -> None:
            if not with_parent:
                note(f"watching {info['folders']} folders of {info['root']}; searches skip the walk while this runs (Ctrl-C stops)")

        with reporting(as_json):
            from moss_files.foundation.loglevels import LevelLog, level_from_env

            log = LevelLog(note, level_from_env(os.environ))  # a daemon: LOG_LEVEL chooses the lines
            try:
                result = search.index_watch(quick.workspace_context(root, log), stop=stop, ready=ready, quiet=with_parent)
            except KeyboardInterrupt:
                raise typer.Exit(0) from None
        emit(result, as_json, text=f"stopped: {result['syncs']} syncs answered, {result['refreshes']} refreshes")

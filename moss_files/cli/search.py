"""`moss search|expand|timeline`, `moss index rebuild|refresh|status`, `moss insight …`, `moss session …`.

Entry layer: parse options, call `search` (scan, expand, timeline, index) or `loopflow`
(insights, sessions), render. `--json` prints the use case's dict as
is (the shape the MCP tools return); errors go to stderr with their class's exit code (2 bad
request, 3 not found, 4 unreadable file, 5 conflict, 7 cache). The use cases load inside each
command, so `moss --help` and other commands never import sqlite3 or the index.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, read_stdin_if, reporting

if TYPE_CHECKING:
    from moss_files.index.service import Context

KindOpt = Annotated[list[str] | None, typer.Option("--kind", help="Only these kinds (repeatable): insight, session, capsule, task, message, memory, current…", show_default=False)]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", "--tags", help="Tag (repeatable, or comma-separated).", show_default=False)]
LinkOpt = Annotated[list[str] | None, typer.Option("--link", "--links", help="Id of a related item (repeatable, or comma-separated).", show_default=False)]
ItemsOpt = Annotated[list[str] | None, typer.Option(help="One item (repeatable).", show_default=False)]


PROGRESS_MIN_FILES = 2000  # smaller trees index in well under a second: no progress lines


def _split(values: Sequence[str] | None) -> list[str]:
    """Repeatable, comma-separated option values as one list."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _line(item: dict[str, Any]) -> str:
    """One human line for a scan result: id, kind, day, summary, [status]."""
    date = (item.get("date") or "")[:10] or "-" * 10
    status = f" [{item['status']}]" if item.get("status") else ""
    return f"{item['id']}  {item['kind']:<8} {date}  {item['summary']}{status}"


def _scan_notes(result: dict[str, Any]) -> list[str]:
    """The stderr lines under a human scan listing."""
    if result["matches"]:
        notes = [f"{len(result['matches'])} matches" + (" (more: raise --limit, page with --offset, or narrow the query)" if result["truncated"] else "")]
    else:
        notes = [result["hint"]]
    if result.get("unindexed"):
        notes.append(f"{result['unindexed']} files could not be indexed: see `moss index status`")
    return notes


def _progress_printer(write: Any) -> Any:
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

def _context(root: Path | None) -> Context:
    from moss_files.index import service as search
    from moss_files.foundation import workspace

    top = workspace.find_workspace(explicit=root)
    return search.Context(top, notify=note, progress=_progress_printer(note))




# --------------------------------------------------------------------------- rendering records


def _render_value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) if value else "-"
    return "-" if value is None else str(value)


_LONG_FIELDS = ("content", "body", "capsule_text", "text")


def _render_record(record: dict[str, Any]) -> str:
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
    """Add the search, index, insight and session commands to the `moss` app."""
    index_app = new_app("The search index: a derived SQLite cache under .moss/cache/, safe to delete.")
    insight_app = new_app("Insights: what was learned, one markdown file each under .moss/insights/.")
    session_app = new_app("Work sessions: orient at the start, hand off at the end (.moss/sessions/).")
    app.add_typer(index_app, name="index")
    app.add_typer(insight_app, name="insight")
    app.add_typer(session_app, name="session")

    # Unknown options are query words, so `moss search auth -legacy` excludes; for the same
    # reason the command has no one-letter options (`-kind:x` must not read as `-k ind:x`).
    @app.command("search", context_settings={"ignore_unknown_options": True})
    def search_cmd(
        query: Annotated[list[str], typer.Argument(help='Terms, "phrases", -exclusions, field:value filters (kind: status: tag: type: from: to: after: before: date:).', show_default=False)],
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
            from moss_files.index import service as search

            result = search.scan(_context(root), " ".join(query), kinds=_split(kind), limit=limit, offset=offset, match="all" if match_all else "any", raw=raw)
        if not as_json:
            for line in _scan_notes(result):
                note(line)
        emit(result, as_json, text="\n".join(_line(item) for item in result["matches"]))

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
            from moss_files.index import service as search

            result = search.expand(_context(root), ids, include_links=links, include_timeline=timeline, depth=depth)
        blocks = []
        for item in result["items"]:
            where = f"{item['path']}:{item['line']}" if item.get("line") else item["path"]
            block = [f"== {item['kind']} {item['id']}  ({where})", _render_record(item["record"])]
            if "links" in item:
                block.append("links: " + (", ".join(f"{i['id']} ({i['kind']})" for i in item["links"]["items"]) or "-"))
                if item["links"]["missing"]:
                    block.append("missing links: " + ", ".join(item["links"]["missing"]))
            if "timeline" in item:
                block.extend(["timeline:", *("  " + _line(i) for i in item["timeline"]["before"]), "  -> this", *("  " + _line(i) for i in item["timeline"]["after"])])
            blocks.append("\n".join(block))
        if not as_json:
            for missing in result["not_found"]:
                note(f"not found: {missing}")
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
            from moss_files.index import service as search

            result = search.timeline(_context(root), anchor, before=before, after=after, kinds=_split(kind))
        center = result["anchor"]
        middle = f"-> {center['id']} {center['kind']} {center['date'][:10]}  {center['summary']}" if "id" in center else f"-> {center['date']}"
        lines = [_line(i) for i in result["before"]] + [middle] + [_line(i) for i in result["after"]]
        emit(result, as_json, text="\n".join(lines))

    # ----------------------------------------------------------------- index

    @index_app.command("refresh")
    def index_refresh_cmd(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Bring the index in step with the files (every search does this first)."""
        with reporting(as_json):
            from moss_files.index import service as search

            result = search.index_refresh(_context(root))
        emit(result, as_json, text=_report_line(result))

    @index_app.command("rebuild")
    def index_rebuild_cmd(root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """Build the index anew from every file (searches keep using the old one meanwhile)."""
        with reporting(as_json):
            from moss_files.index import service as search

            result = search.index_rebuild(_context(root))
        emit(result, as_json, text=_report_line(result))

    @index_app.command("status")
    def index_status_cmd(
        check: Annotated[bool, typer.Option("--check", help="Exit 4 when some file could not be indexed.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Where the index is, what it holds, and every file it could not (fully) read."""
        with reporting(as_json):
            from moss_files.index import service as search

            result = search.index_status(_context(root))
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

    # ----------------------------------------------------------------- insights

    @insight_app.command("add")
    def insight_add_cmd(
        text: Annotated[str | None, typer.Argument(help="The insight (default or '-': read stdin).", show_default=False)] = None,
        kind: Annotated[str | None, typer.Option("--type", "-t", help="process | domain | architecture | edge_case | technical (default).", show_default=False)] = None,
        tag: TagOpt = None,
        link: LinkOpt = None,
        task: Annotated[str | None, typer.Option("--task", help="Task it was learned on.", show_default=False)] = None,
        session: Annotated[str | None, typer.Option("--session", help="Session it was learned in (default: the active one).", show_default=False)] = None,
        summary: Annotated[str | None, typer.Option("--summary", help="One line (default: generated from the text).", show_default=False)] = None,
        context: Annotated[str | None, typer.Option("--context", help="Two or three sentences (default: generated).", show_default=False)] = None,
        notes: Annotated[str | None, typer.Option("--notes", help="Free notes.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Record an insight (LoopFlow's remember); prints its id."""
        with reporting(as_json):
            from moss_files.loopflow import service as loopflow

            body = read_stdin_if(text)
            result = loopflow.remember(
                _context(root), body, type=kind, tags=_split(tag), links=_split(link), task=task, session=session, summary=summary, context=context, notes=notes
            )
        emit(result, as_json, text=result["id"])

    @insight_app.command("list")
    def insight_list_cmd(
        kind: Annotated[list[str] | None, typer.Option("--type", "-t", help="Only these types (repeatable).", show_default=False)] = None,
        status: Annotated[list[str] | None, typer.Option("--status", "-s", help="unprocessed | discussed (repeatable).", show_default=False)] = None,
        tag: TagOpt = None,
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 50,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Insights, newest first, as one-line summaries."""
        with reporting(as_json):
            from moss_files.loopflow import service as loopflow

            result = loopflow.list_insights(_context(root), types=_split(kind), statuses=_split(status), tags=_split(tag), limit=limit)
        lines = [f"{i['id']}  {i['type']:<12} {i['status']:<11} {i['summary']}" for i in result["insights"]]
        if not as_json:
            for problem in result["problems"]:
                note(f"error[{problem['code']}] {problem['path']}:{problem.get('line') or ''} {problem['message']}")
            if result["truncated"]:
                note(f"{len(result['insights'])} of {result['total']}: raise --limit to see more")
        emit(result, as_json, text="\n".join(lines))

    @insight_app.command("show")
    def insight_show_cmd(insight_id: Annotated[str, typer.Argument(metavar="ID", show_default=False)], root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """One insight in full."""
        with reporting(as_json):
            from moss_files.loopflow import service as loopflow

            result = loopflow.show_insight(_context(root), insight_id)
        emit(result, as_json, text=_render_record(result))

    @insight_app.command("update")
    def insight_update_cmd(
        insight_id: Annotated[str, typer.Argument(metavar="ID", show_default=False)],
        status: Annotated[str | None, typer.Option("--status", "-s", help="unprocessed | discussed.", show_default=False)] = None,
        kind: Annotated[str | None, typer.Option("--type", "-t", help="New type.", show_default=False)] = None,
        tags: Annotated[str | None, typer.Option("--set-tags", help="Replace the tags (comma-separated; '' clears).", show_default=False)] = None,
        add_tag: Annotated[list[str] | None, typer.Option("--add-tag", help="Add a tag (repeatable).", show_default=False)] = None,
        remove_tag: Annotated[list[str] | None, typer.Option("--remove-tag", help="Remove a tag (repeatable).", show_default=False)] = None,
        links: Annotated[str | None, typer.Option("--set-links", help="Replace the links (comma-separated; '' clears).", show_default=False)] = None,
        add_link: Annotated[list[str] | None, typer.Option("--add-link", help="Add a link (repeatable).", show_default=False)] = None,
        remove_link: Annotated[list[str] | None, typer.Option("--remove-link", help="Remove a link (repeatable).", show_default=False)] = None,
        notes: Annotated[str | None, typer.Option("--notes", help="Replace the notes ('' clears).", show_default=False)] = None,
        summary: Annotated[str | None, typer.Option("--summary", help="Replace the summary ('' returns to the generated one).", show_default=False)] = None,
        context: Annotated[str | None, typer.Option("--context", help="Replace the context ('' returns to the generated one).", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Change an insight; only the changed keys' lines change in its file."""
        with reporting(as_json):
            from moss_files.loopflow import insights as insight, service as loopflow

            update = insight.Update(
                status=status,
                type=kind,
                tags=tuple(_split([tags])) if tags is not None else None,
                add_tags=tuple(_split(add_tag)),
                remove_tags=tuple(_split(remove_tag)),
                links=tuple(_split([links])) if links is not None else None,
                add_links=tuple(_split(add_link)),
                remove_links=tuple(_split(remove_link)),
                notes=notes,
                summary=summary,
                context=context,
            )
            result = loopflow.update_insight(_context(root), insight_id, update)
        emit(result, as_json, text="")
        if not as_json:
            note(f"{result['id']}: " + (f"changed {', '.join(result['changed'])}" if result["changed"] else "nothing to change"))

    @insight_app.command("link")
    def insight_link_cmd(
        insight_id: Annotated[str, typer.Argument(metavar="ID", show_default=False)],
        targets: Annotated[list[str], typer.Argument(metavar="TARGET...", help="Ids to link to (any kind).", show_default=False)],
        remove: Annotated[bool, typer.Option("--remove", help="Remove these links instead.")] = False,
        both: Annotated[bool, typer.Option("--both", help="Also link each target insight back.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Link an insight to other items (LoopFlow's knowledge graph)."""
        with reporting(as_json):
            from moss_files.loopflow import service as loopflow

            result = loopflow.link_insight(_context(root), insight_id, targets, remove=remove, both=both)
        emit(result, as_json, text=f"{result['id']} -> {', '.join(result['links']) or '-'}")

    # ----------------------------------------------------------------- sessions

    @session_app.command("start")
    def session_start_cmd(
        task: Annotated[str | None, typer.Option("--task", help="What the session works on.", show_default=False)] = None,
        agent: Annotated[str | None, typer.Option("--agent", help="Who works in it (sessions are resumed per agent).", show_default=False)] = None,
        new: Annotated[bool, typer.Option("--new", help="Start a new session even if one is active.")] = False,
        limit: Annotated[int, typer.Option("--insights", help="At most this many insight summaries.")] = 20,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Open or resume a session and show where things stand (LoopFlow's orient)."""
        with reporting(as_json):
            from moss_files.loopflow import service as loopflow

            result = loopflow.orient(_context(root), task=task, agent=agent, new=new, insight_limit=limit)
        emit(result, as_json, text=_render_orient(result))

    @session_app.command("end")
    def session_end_cmd(
        summary: Annotated[str | None, typer.Option("--summary", help="What happened.", show_default=False)] = None,
        next_actions: Annotated[list[str] | None, typer.Option("--next", help="What the next session should do (repeatable); saved first.", show_default=False)] = None,
        completed: Annotated[list[str] | None, typer.Option("--completed", help="Done in this session (repeatable).", show_default=False)] = None,
        in_progress: Annotated[list[str] | None, typer.Option("--in-progress", help="Started, not finished (repeatable).", show_default=False)] = None,
        blocked_on: Annotated[list[str] | None, typer.Option("--blocked-on", help="What blocks the work (repeatable).", show_default=False)] = None,
        learnings: Annotated[str | None, typer.Option("--learnings", help="What was learned (markdown).", show_default=False)] = None,
        hot_context: Annotated[str | None, typer.Option("--hot-context", help="What the next agent must know at once.", show_default=False)] = None,
        mode: Annotated[str, typer.Option("--mode", help="graceful | emergency.")] = "graceful",
        outcome: Annotated[str | None, typer.Option("--outcome", help="COMPLETE | PARTIAL | BLOCKED | INTERRUPTED (default: from the lists).", show_default=False)] = None,
        task: Annotated[str | None, typer.Option("--task", help="Set the session's task.", show_default=False)] = None,
        session: Annotated[str | None, typer.Option("--session", help="The session (default: the active one, else today's last).", show_default=False)] = None,
        agent: Annotated[str | None, typer.Option("--agent", help="Whose active session to end.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Hand off: record the outcome, next actions and learnings (LoopFlow's handoff; repeating it changes nothing)."""
        with reporting(as_json):
            from moss_files.loopflow import service as loopflow
            from moss_files.loopflow.sessions import Handoff

            request = Handoff(
                mode=mode,
                completed=tuple(completed or ()),
                in_progress=tuple(in_progress or ()),
                blocked_on=tuple(blocked_on or ()),
                next_actions=tuple(next_actions or ()),
                hot_context=hot_context,
                summary=summary,
                learnings=learnings,
                outcome=outcome,
                task=task,
            )
            result = loopflow.handoff(_context(root), request, session_id=session, agent=agent)
        emit(result, as_json, text=f"{result['session']['id']} {result['outcome']}")

    @session_app.command("list")
    def session_list_cmd(
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 20,
        active: Annotated[bool | None, typer.Option("--active/--ended", help="Only active, or only ended, sessions.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Sessions, most recent first."""
        with reporting(as_json):
            from moss_files.loopflow import service as loopflow

            result = loopflow.list_sessions(_context(root), limit=limit, active=active)
        lines = [f"{s['id']}  {s['date'] or '-':<10} {s['status']:<11} {s['task'] or '-'}" for s in result["sessions"]]
        if not as_json:
            for problem in result["problems"]:
                note(f"error[{problem['code']}] {problem['path']}:{problem.get('line') or ''} {problem['message']}")
        emit(result, as_json, text="\n".join(lines))

    @session_app.command("show")
    def session_show_cmd(session_id: Annotated[str, typer.Argument(metavar="ID", show_default=False)], root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """One session in full."""
        with reporting(as_json):
            from moss_files.loopflow import service as loopflow

            result = loopflow.show_session(_context(root), session_id)
        emit(result, as_json, text=_render_record(result))


def _report_line(result: dict[str, Any]) -> str:
    verb = "rebuilt" if result["rebuilt"] else "refreshed"
    parts = [f"{verb}: {result['files']} files"]
    if not result["rebuilt"]:
        parts.append(f"{result['added']} added, {result['changed']} changed, {result['removed']} removed")
    if result["problems"]:
        parts.append(f"{result['problems']} with problems (see `moss index status`)")
    parts.append(f"{result['seconds']:.3f}s")
    return ", ".join(parts)


def _render_orient(result: dict[str, Any]) -> str:
    session = result["session"]
    lines = [f"session {session['id']} ({'resumed' if result['resumed'] else 'new'}){': ' + session['task'] if session['task'] else ''}"]
    if result["suggested_actions"]:
        lines.append("suggested next actions:")
        lines.extend(f"  - {action}" for action in result["suggested_actions"])
    if result["recent_sessions"]:
        lines.append("recent sessions:")
        lines.extend(f"  {s['id']} {s['date'] or '-'} {s['status']}: {s['summary'] or s['task'] or '-'}" for s in result["recent_sessions"])
    insights = result["insights"]
    lines.append(f"insights: {insights['total_count']} ({insights['unprocessed_count']} unprocessed)")
    lines.extend(f"  {i['id']} [{i['status']}] {i['summary']}" for i in insights["items"])
    memory = result.get("memory")
    if memory and "plan" in memory:
        plan = memory["plan"]
        lines.append(f"plan: {plan['open']} open, {plan['ready']} ready, {plan['in_progress']} in progress, {plan['blocked']} blocked")
        if memory.get("task"):
            lines.append(f"current task: {memory['task']}")
    if result.get("inbox") and result["inbox"]["messages"]:
        lines.append(f"inbox: {result['inbox']['messages']} messages")
    lines.extend(f"hint: {hint}" for hint in result["hints"])
    return "\n".join(lines)

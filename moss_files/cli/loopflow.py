"""`moss insight add|list|show|update|link`, `moss session start|end|list|show`: LoopFlow's
insights and work sessions.

Entry layer: parse options, call the LoopFlow use cases (`loopflow.service`), render. `--json`
prints the use case's dict as is (the shape the `loop_*` MCP tools return); errors go to stderr
with their class's exit code (2 bad request, 3 not found, 4 unreadable file, 5 conflict).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from moss_files.cli.search import render_record, split_values, workspace_context
from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, read_stdin_if, reporting
from moss_files.loopflow import service as loopflow
from moss_files.loopflow.insights import Update
from moss_files.loopflow.sessions import Handoff

TagOpt = Annotated[list[str] | None, typer.Option("--tag", "--tags", help="Tag (repeatable, or comma-separated).", show_default=False)]
LinkOpt = Annotated[list[str] | None, typer.Option("--link", "--links", help="Id of a related item (repeatable, or comma-separated).", show_default=False)]


def register(app: typer.Typer) -> None:
    """Add the insight and session commands to the `moss` app."""
    insight_app = new_app("Insights: what was learned, one markdown file each under .moss/insights/.")
    session_app = new_app("Work sessions: orient at the start, hand off at the end (.moss/sessions/).")
    app.add_typer(insight_app, name="insight")
    app.add_typer(session_app, name="session")

    # ----------------------------------------------------------------- insights

    @insight_app.command("add")
    def insight_add_cmd(
        text: Annotated[str | None, typer.Argument(help="The insight (default or '-': read stdin).", show_default=False)] = None,
        kind: Annotated[
            str | None, typer.Option("--type", "-t", help="process | domain | architecture | edge_case | technical (default).", show_default=False)
        ] = None,
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
            body = read_stdin_if(text)
            result = loopflow.remember(
                workspace_context(root),
                body,
                type=kind,
                tags=split_values(tag),
                links=split_values(link),
                task=task,
                session=session,
                summary=summary,
                context=context,
                notes=notes,
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
            result = loopflow.list_insights(
                workspace_context(root), types=split_values(kind), statuses=split_values(status), tags=split_values(tag), limit=limit
            )
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
            result = loopflow.show_insight(workspace_context(root), insight_id)
        emit(result, as_json, text=render_record(result))

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
            update = Update(
                status=status,
                type=kind,
                tags=tuple(split_values([tags])) if tags is not None else None,
                add_tags=tuple(split_values(add_tag)),
                remove_tags=tuple(split_values(remove_tag)),
                links=tuple(split_values([links])) if links is not None else None,
                add_links=tuple(split_values(add_link)),
                remove_links=tuple(split_values(remove_link)),
                notes=notes,
                summary=summary,
                context=context,
            )
            result = loopflow.update_insight(workspace_context(root), insight_id, update)
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
            result = loopflow.link_insight(workspace_context(root), insight_id, targets, remove=remove, both=both)
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
            result = loopflow.orient(workspace_context(root), task=task, agent=agent, new=new, insight_limit=limit)
        emit(result, as_json, text=_render_orient(result))

    @session_app.command("end")
    def session_end_cmd(
        summary: Annotated[str | None, typer.Option("--summary", help="What happened.", show_default=False)] = None,
        next_actions: Annotated[
            list[str] | None, typer.Option("--next", help="What the next session should do (repeatable); saved first.", show_default=False)
        ] = None,
        completed: Annotated[list[str] | None, typer.Option("--completed", help="Done in this session (repeatable).", show_default=False)] = None,
        in_progress: Annotated[list[str] | None, typer.Option("--in-progress", help="Started, not finished (repeatable).", show_default=False)] = None,
        blocked_on: Annotated[list[str] | None, typer.Option("--blocked-on", help="What blocks the work (repeatable).", show_default=False)] = None,
        learnings: Annotated[str | None, typer.Option("--learnings", help="What was learned (markdown).", show_default=False)] = None,
        hot_context: Annotated[str | None, typer.Option("--hot-context", help="What the next agent must know at once.", show_default=False)] = None,
        mode: Annotated[str, typer.Option("--mode", help="graceful | emergency.")] = "graceful",
        outcome: Annotated[
            str | None, typer.Option("--outcome", help="COMPLETE | PARTIAL | BLOCKED | INTERRUPTED (default: from the lists).", show_default=False)
        ] = None,
        task: Annotated[str | None, typer.Option("--task", help="Set the session's task.", show_default=False)] = None,
        session: Annotated[str | None, typer.Option("--session", help="The session (default: the active one, else today's last).", show_default=False)] = None,
        agent: Annotated[str | None, typer.Option("--agent", help="Whose active session to end.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Hand off: record the outcome, next actions and learnings (LoopFlow's handoff; repeating it changes nothing)."""
        with reporting(as_json):
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
            result = loopflow.handoff(workspace_context(root), request, session_id=session, agent=agent)
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
            result = loopflow.list_sessions(workspace_context(root), limit=limit, active=active)
        lines = [f"{s['id']}  {s['date'] or '-':<10} {s['status']:<11} {s['task'] or '-'}" for s in result["sessions"]]
        if not as_json:
            for problem in result["problems"]:
                note(f"error[{problem['code']}] {problem['path']}:{problem.get('line') or ''} {problem['message']}")
        emit(result, as_json, text="\n".join(lines))

    @session_app.command("show")
    def session_show_cmd(session_id: Annotated[str, typer.Argument(metavar="ID", show_default=False)], root: RootOpt = None, as_json: JsonOpt = False) -> None:
        """One session in full."""
        with reporting(as_json):
            result = loopflow.show_session(workspace_context(root), session_id)
        emit(result, as_json, text=render_record(result))


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

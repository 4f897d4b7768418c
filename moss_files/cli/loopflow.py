"""`moss insight add|list|show|update|delete|link|connect|export|preview|import`, `moss session
start|end|list|show|summary|probe`, `moss backlog add|update|list`, `moss feedback add|list`,
`moss observe`: LoopFlow's insights, work sessions, tasks (in PLAN.md), sharing bundles,
feedback and observations.

Entry layer: parse options, call the LoopFlow use cases (`loopflow.service`), render. `--json`
prints the use case's dict as is (the shape the `loop_*` MCP tools return); errors go to stderr
with their class's exit code (2 bad request, 3 not found, 4 unreadable file, 5 conflict).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.cli.search import render_record, split_values, workspace_context
from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, read_stdin_if, reporting
from moss_files.foundation import config
from moss_files.foundation.context import Context
from moss_files.loopflow import service as loopflow
from moss_files.loopflow.insights import Update
from moss_files.loopflow.sessions import Handoff

TagOpt = Annotated[list[str] | None, typer.Option("--tag", "--tags", help="Tag (repeatable, or comma-separated).", show_default=False)]
LinkOpt = Annotated[list[str] | None, typer.Option("--link", "--links", help="Id of a related item (repeatable, or comma-separated).", show_default=False)]


def _configured(root: Path | None) -> Context:
    """The workspace's Context with its settings (where bundles may be written and read, the
    AI summariser's `[summaries]`)."""
    ctx = workspace_context(root)
    return ctx.replace(config=config.load_config(ctx.root))


def register(app: typer.Typer) -> None:
    """Add the insight, session, backlog, feedback and observe commands to the `moss` app."""
    insight_app = new_app("Insights: what was learned, one markdown file each under .moss/insights/.")
    session_app = new_app("Work sessions: orient at the start, hand off at the end (.moss/sessions/).")
    backlog_app = new_app("LoopFlow's tasks, kept as PLAN.md tasks (.cstack/PLAN.md) with their ids.")
    feedback_app = new_app("Pain points, feature ideas and bugs about the tools (.moss/feedback/).")
    app.add_typer(insight_app, name="insight")
    app.add_typer(session_app, name="session")
    app.add_typer(backlog_app, name="backlog")
    app.add_typer(feedback_app, name="feedback")

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
                _configured(root),
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
        if not as_json and result["summary_fallback"]:
            note(f"summary: heuristic ({result['summary_fallback']})")

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
        content: Annotated[str | None, typer.Option("--content", help="Replace the insight's text (the file's body).", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Change an insight; only the changed keys' lines (and, for --content, the body) change in its file."""
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
                content=content,
            )
            result = loopflow.update_insight(_configured(root), insight_id, update)
        emit(result, as_json, text="")
        if not as_json:
            note(f"{result['id']}: " + (f"changed {', '.join(result['changed'])}" if result["changed"] else "nothing to change"))

    @insight_app.command("delete")
    def insight_delete_cmd(
        insight_id: Annotated[str, typer.Argument(metavar="ID", show_default=False)], root: RootOpt = None, as_json: JsonOpt = False
    ) -> None:
        """Soft-delete an insight: it moves to .moss/insights/deleted/ and leaves listings and search."""
        with reporting(as_json):
            result = loopflow.delete_insight(workspace_context(root), insight_id)
        emit(result, as_json, text=f"deleted {result['id']} ({result['path']})")

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

    @insight_app.command("connect")
    def insight_connect_cmd(
        query: Annotated[str, typer.Argument(help="Concept or topic.", show_default=False)],
        no_tasks: Annotated[bool, typer.Option("--no-tasks", help="Leave tasks out.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """What relates to a topic: matching insights, what they link to, matching tasks (LoopFlow's connect)."""
        with reporting(as_json):
            result = loopflow.connect(workspace_context(root), query=query, include_tasks=not no_tasks)
        lines = [f"{i['id']}  {i['summary']}" + (f"  -> {', '.join(i['links'])}" if i["links"] else "") for i in result["insights"]]
        lines.extend(f"  via link: {i['id']} ({i['kind']})  {i['summary']}" for i in result["linked"])
        lines.extend(f"task {t['id']} [{t['status'] or '-'}]  {t['summary']}" for t in result["tasks"])
        emit(result, as_json, text="\n".join(lines) or result["suggestion"])

    @insight_app.command("export")
    def insight_export_cmd(
        path: Annotated[
            str | None, typer.Option("--path", "-p", help="Bundle file (.json) in .moss/exports/ or an allowed folder.", show_default=False)
        ] = None,
        ids: Annotated[list[str] | None, typer.Option("--id", help="Exactly this insight (repeatable).", show_default=False)] = None,
        tag: TagOpt = None,
        kind: Annotated[list[str] | None, typer.Option("--type", "-t", help="Insights of this type (repeatable).", show_default=False)] = None,
        query: Annotated[str | None, typer.Option("--query", "-q", help="Insights matching this search.", show_default=False)] = None,
        no_links: Annotated[bool, typer.Option("--no-links", help="Leave out the insights they link to.")] = False,
        reason: Annotated[str | None, typer.Option("--reason", help="A note for the receiver.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Write insights to a bundle for another repository; secrets and machine paths are removed."""
        from moss_files.loopflow import sharing

        with reporting(as_json):
            result = sharing.export_bundle(
                _configured(root),
                path=path,
                ids=split_values(ids),
                tags=split_values(tag),
                types=split_values(kind),
                query=query,
                include_links=not no_links,
                reason=reason,
            )
        emit(result, as_json, text=result["bundle_path"])
        if not as_json:
            note(result["message"])

    @insight_app.command("preview")
    def insight_preview_cmd(
        path: Annotated[str, typer.Argument(help="The bundle (or a LoopFlow insights.json).", show_default=False)],
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """What importing a bundle would do, entry by entry (new, duplicate, conflict); writes nothing."""
        from moss_files.loopflow import sharing

        with reporting(as_json):
            result = sharing.preview_bundle(_configured(root), path=path)
        lines = [
            f"{i['status']:<9} {i['original_id']}  {i['summary']}" + (f"  (here: {i['existing_id']})" if i.get("existing_id") else "")
            for i in result["insights"]
        ]
        lines.append(result["recommendation"])
        emit(result, as_json, text="\n".join(lines))

    @insight_app.command("import")
    def insight_import_cmd(
        path: Annotated[str, typer.Argument(help="The bundle (or a LoopFlow insights.json).", show_default=False)],
        only: Annotated[list[str] | None, typer.Option("--only", help="Only this original id (repeatable).", show_default=False)] = None,
        with_duplicates: Annotated[bool, typer.Option("--with-duplicates", help="Import duplicates as new insights too.")] = False,
        update_conflicts: Annotated[bool, typer.Option("--update-conflicts", help="Update the local insight of each conflict.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Import a bundle's insights, all or nothing; duplicates and conflicts are skipped by default."""
        from moss_files.loopflow import sharing

        with reporting(as_json):
            result = sharing.import_bundle(
                _configured(root),
                path=path,
                selected_ids=split_values(only) or None,
                skip_duplicates=not with_duplicates,
                skip_conflicts=not update_conflicts,
            )
        emit(result, as_json, text=result["message"])

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
            result = loopflow.handoff(_configured(root), request, session_id=session, agent=agent)
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

    @session_app.command("summary")
    def session_summary_cmd(
        summary: Annotated[str | None, typer.Option("--summary", help="What the repository is and where it stands.", show_default=False)] = None,
        folders: Annotated[str | None, typer.Option("--folders", help="Annotated tree of the key folders.", show_default=False)] = None,
        suggest: Annotated[str | None, typer.Option("--suggest", help="What the next session should do.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Set the repository summary (.moss/summary.md) the next session's orient shows; with no option, print it."""
        with reporting(as_json):
            ctx = workspace_context(root)
            if summary is None and folders is None and suggest is None:
                from moss_files.loopflow.summary import PATH, summary_to_dict

                result = summary_to_dict(loopflow.read_summary(ctx), path=PATH.as_posix())
            else:
                result = loopflow.update_summary(ctx, repo_summary=summary, folder_structure=folders, suggested_actions=suggest)
        emit(result, as_json, text=render_record(result.get("repo_summary", result)))

    @session_app.command("probe")
    def session_probe_cmd(
        question: Annotated[str, typer.Argument(help="The question.", show_default=False)],
        why: Annotated[str, typer.Option("--why", help="Why the answer is needed.", show_default=False)],
        option: Annotated[list[str] | None, typer.Option("--option", help="A suggested answer (repeatable).", show_default=False)] = None,
        default: Annotated[str | None, typer.Option("--default", help="The safe choice.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Format a structured question for a person (LoopFlow's probe); writes nothing."""
        with reporting(as_json):
            result = loopflow.probe(workspace_context(root), question=question, why=why, options=option, default_option=default)
        asked = result["formatted_question"]
        lines = [asked["ask"], f"  why: {asked['context']}"]
        lines.extend(f"  - {o['label']}{' (default)' if o['is_default'] else ''}" for o in asked["options"] or [])
        emit(result, as_json, text="\n".join(lines))

    # ----------------------------------------------------------------- observations

    @app.command("observe")
    def observe_cmd(
        text: Annotated[str | None, typer.Argument(help="What happened (default or '-': read stdin).", show_default=False)] = None,
        kind: Annotated[
            str | None,
            typer.Option("--kind", "-k", help="note (default) | tool_call | file_edit | shell_command | user_prompt.", show_default=False),
        ] = None,
        session: Annotated[str | None, typer.Option("--session", help="Its session (default: the active one).", show_default=False)] = None,
        time: Annotated[str | None, typer.Option("--time", help="When it happened, RFC 3339 (default: now).", show_default=False)] = None,
        summary: Annotated[str | None, typer.Option("--summary", help="One line (default: generated from the text).", show_default=False)] = None,
        context: Annotated[
            str | None, typer.Option("--context", help='Details as a JSON object, e.g. \'{"tool": "Edit", "file": "app.py"}\'.', show_default=False)
        ] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Record an observation (LoopFlow's observe): a file under .moss/observations/, searchable and on the timeline."""
        with reporting(as_json):
            body = read_stdin_if(text)
            details = _json_object(context, "--context") if context is not None else None
            result = loopflow.observe(workspace_context(root), body, kind=kind, session=session, time=time, summary=summary, context=details)
        emit(result, as_json, text=result["id"])

    # ----------------------------------------------------------------- backlog (PLAN.md)

    @backlog_app.command("add")
    def backlog_add_cmd(
        task_id: Annotated[str, typer.Argument(metavar="ID", help="The task's id, e.g. LF-104.", show_default=False)],
        title: Annotated[str, typer.Argument(help="One line, e.g. '[IMPL] Add search'.", show_default=False)],
        description: Annotated[str | None, typer.Option("--description", "-d", help="What to do.", show_default=False)] = None,
        priority: Annotated[str, typer.Option("--priority", "-p", help="high | medium | low.")] = "medium",
        status: Annotated[str, typer.Option("--status", "-s", help="TODO | IN_PROGRESS | DONE | BLOCKED | CANCELLED.")] = "TODO",
        depends: Annotated[list[str] | None, typer.Option("--depends", help="Id of a task it waits for (repeatable).", show_default=False)] = None,
        accept: Annotated[list[str] | None, typer.Option("--accept", help="An acceptance criterion (repeatable).", show_default=False)] = None,
        notes: Annotated[str | None, typer.Option("--notes", help="Notes.", show_default=False)] = None,
        test_file: Annotated[str | None, typer.Option("--test-file", help="The test that proves it done.", show_default=False)] = None,
        reason: Annotated[str | None, typer.Option("--reason", help="Why, for BLOCKED or CANCELLED.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Add a task to PLAN.md with its id (LoopFlow's loop_task_create)."""
        from moss_files.loopflow import backlog

        with reporting(as_json):
            result = backlog.create_task(
                workspace_context(root),
                id=task_id,
                title=title,
                description=description,
                priority=priority,
                status=status,
                depends_on=split_values(depends),
                acceptance_criteria=accept,
                notes=notes,
                test_file=test_file,
                reason=reason,
            )
        emit(result, as_json, text=_task_line(result["task"]))

    @backlog_app.command("update")
    def backlog_update_cmd(
        task_id: Annotated[str, typer.Argument(metavar="ID", show_default=False)],
        status: Annotated[str | None, typer.Option("--status", "-s", help="TODO | IN_PROGRESS | DONE | BLOCKED | CANCELLED.", show_default=False)] = None,
        priority: Annotated[str | None, typer.Option("--priority", "-p", help="high | medium | low.", show_default=False)] = None,
        title: Annotated[str | None, typer.Option("--title", help="New title.", show_default=False)] = None,
        description: Annotated[str | None, typer.Option("--description", "-d", help="New description ('' clears).", show_default=False)] = None,
        notes: Annotated[str | None, typer.Option("--notes", help="New notes ('' clears).", show_default=False)] = None,
        depends: Annotated[str | None, typer.Option("--depends", help="Replace the dependencies (comma-separated; '' clears).", show_default=False)] = None,
        accept: Annotated[list[str] | None, typer.Option("--accept", help="Replace the criteria (repeatable).", show_default=False)] = None,
        test_file: Annotated[str | None, typer.Option("--test-file", help="New test file ('' clears).", show_default=False)] = None,
        reason: Annotated[str | None, typer.Option("--reason", help="Why, for BLOCKED, CANCELLED or DONE.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Change a PLAN.md task by id; a status change moves it as cstack would."""
        from moss_files.loopflow import backlog

        with reporting(as_json):
            result = backlog.update_task(
                workspace_context(root),
                id=task_id,
                status=status,
                priority=priority,
                title=title,
                description=description,
                notes=notes,
                depends_on=split_values([depends]) if depends is not None else None,
                acceptance_criteria=accept,
                test_file=test_file,
                reason=reason,
            )
        emit(result, as_json, text=_task_line(result["task"]))

    @backlog_app.command("list")
    def backlog_list_cmd(
        status: Annotated[list[str] | None, typer.Option("--status", "-s", help="Only these statuses (repeatable).", show_default=False)] = None,
        priority: Annotated[list[str] | None, typer.Option("--priority", "-p", help="Only these priorities (repeatable).", show_default=False)] = None,
        ids: Annotated[list[str] | None, typer.Option("--id", help="Show this task in full (repeatable).", show_default=False)] = None,
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 20,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """PLAN.md's tasks with ids, in file order."""
        from moss_files.loopflow import backlog

        with reporting(as_json):
            result = backlog.list_tasks(
                workspace_context(root), statuses=split_values(status), priorities=split_values(priority), ids=split_values(ids), limit=limit
            )
        if ids:
            text = "\n\n".join(render_record(task) for task in result["tasks"])
        else:
            text = "\n".join(_task_line(task) for task in result["tasks"])
        emit(result, as_json, text=text)

    # ----------------------------------------------------------------- feedback

    @feedback_app.command("add")
    def feedback_add_cmd(
        title: Annotated[str, typer.Argument(help="One line.", show_default=False)],
        description: Annotated[str | None, typer.Option("--description", "-d", help="What happened (default: read stdin).", show_default=False)] = None,
        kind: Annotated[str, typer.Option("--type", "-t", help="pain_point | feature_idea | bug.")] = "pain_point",
        severity: Annotated[str | None, typer.Option("--severity", help="low | medium | high | critical.", show_default=False)] = None,
        context: Annotated[str | None, typer.Option("--context", help="What you were doing (sanitized before it is stored).", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Capture a pain point, idea or bug, queued for a person to review (LoopFlow's painpoint)."""
        with reporting(as_json):
            body = read_stdin_if(description)
            result = loopflow.painpoint(workspace_context(root), type=kind, title=title, description=body, context=context, severity=severity)
        emit(result, as_json, text=result["id"])
        if not as_json:
            for warning in result["sanitization_warnings"]:
                note(f"warning: {warning}")

    @feedback_app.command("list")
    def feedback_list_cmd(
        status: Annotated[list[str] | None, typer.Option("--status", "-s", help="queued | shared | dismissed (default queued).", show_default=False)] = None,
        limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many.")] = 20,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Captured feedback, newest first."""
        with reporting(as_json):
            result = loopflow.list_feedback(workspace_context(root), statuses=split_values(status), limit=limit)
        lines = [f"{f['id']}  {f['type']:<12} {f['severity']:<8} {f['status']:<9} {f['title']}" for f in result["feedback_specs"]]
        emit(result, as_json, text="\n".join(lines))


def _json_object(text: str, option: str) -> dict[str, Any]:
    """The JSON object an option holds. Raises InvalidRequest naming the option for anything else."""
    from moss_files.foundation import structured
    from moss_files.foundation.errors import InvalidRequest, MossError

    try:
        value = structured.loads_json(text, unique_keys=True)
    except (ValueError, MossError) as exc:  # MossError: JSON_TOO_DEEP, JSON_DUPLICATE_KEY
        raise InvalidRequest(f"{option} is not JSON: {exc}", details={"field": option}) from None
    if not isinstance(value, dict):
        raise InvalidRequest(f"{option} must be a JSON object", details={"field": option})
    return value


def _task_line(task: dict[str, Any]) -> str:
    depends = f"  (after {', '.join(task['depends_on'])})" if task["depends_on"] else ""
    return f"{task['id']}  {task['status']:<11} {task['priority']:<6} {task['title']}{depends}"


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

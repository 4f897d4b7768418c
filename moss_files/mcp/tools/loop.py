"""The `loop` tool set: LoopFlow's progressive disclosure (`loop_scan` → `loop_expand`,
`loop_timeline`) over every artifact, its session tools (`loop_orient`, `loop_remember`,
`loop_observe`, `loop_handoff`, `loop_update_summary`, `loop_probe`), insights (`loop_insight_update`,
`loop_connect`) and tasks in PLAN.md (`loop_task_create|update|list`); `register_sharing`
declares the opt-in `share` set: sharing bundles (`loop_export`, `loop_import_preview`,
`loop_import`) and feedback (`loop_painpoint`, `loop_feedback_list`). Entry layer: each tool is one call of the use case `moss search|expand|timeline`
(`index.service`), `moss session|insight|backlog|feedback` (`loopflow.service`, `backlog`,
`sharing`) calls, so both return the same shapes and errors. The use cases load on a tool's first call, not when the tool set is
declared, which keeps them out of every `moss serve` start.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from moss_files.foundation import config
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest
from moss_files.mcp.server import ToolRegistry

Scope = Annotated[
    list[str] | None,
    Field(description="Only these kinds: insight, session, observation, capsule, task, message, memory, current (plurals work)."),
]


def register(tools: ToolRegistry) -> None:
    """Declare the loop tools."""
    # Index notes (a rebuild, an unreadable file) go to the server's log, never into a result.
    ctx = tools.context.replace(notify=logging.getLogger("moss_files.mcp").info)

    @tools.tool(
        "loop_scan",
        "Search every artifact; returns ids with one-line summaries, best first ({query, matches: [{id, kind, summary, "
        "score, date, status?, handle?}], truncated, hint}; handle: a capsule's workspace/name); then loop_expand the "
        'ids you need. Query: terms, "phrases", -exclusions, field:value filters (kind: status: tag: type: after: '
        "before: through: date:).",
        read_only=True,
    )
    def scan(
        query: Annotated[str, Field(description="What to find.")],
        scope: Annotated[
            list[str] | str | None,
            Field(description='Only these kinds: insight, session, observation, capsule, task, message, memory, current (plurals work); "all" for every kind.'),
        ] = None,
        types: Annotated[
            list[str] | None, Field(description="Only items of these types (insights: domain, architecture, edge_case, technical, process).")
        ] = None,
        statuses: Annotated[list[str] | None, Field(description="Only items with these statuses (unprocessed, discussed, open, done, ...).")] = None,
        tags: Annotated[list[str] | None, Field(description="Only items with one of these tags.")] = None,
        after: Annotated[str | None, Field(description="Dated from this on (2026-01-21, 2026-01, 7d).")] = None,
        through: Annotated[str | None, Field(description="Dated up to this, its whole day or month included.")] = None,
        limit: Annotated[int, Field(description="At most this many matches (1-200).")] = 20,
        offset: Annotated[int, Field(description="Skip this many (paging).")] = 0,
        match: Annotated[str, Field(description='"any" term (default) or "all" terms.')] = "any",
        raw: Annotated[bool, Field(description="Pass the query to SQLite FTS5 unescaped.")] = False,
    ) -> dict[str, Any]:
        # LoopFlow sends scope as one word ("all", "insights"); the seeds' spec as a list.
        kinds = [scope] if isinstance(scope, str) else list(scope or ())
        filters = {"type": types or (), "status": statuses or (), "tag": tags or (), "after": after or (), "through": through or ()}
        from moss_files.index import service as search

        return search.scan(ctx, query, kinds=[k for k in kinds if k != "all"], limit=limit, offset=offset, match=match, raw=raw, filters=filters)

    @tools.tool(
        "loop_expand",
        "Full records of items by id, read from their files: {items: [{id, kind, path, line, record, links?, timeline?}], not_found}.",
        read_only=True,
    )
    def expand(
        ids: Annotated[list[str], Field(description="Ids from loop_scan (any kind, up to 100).")],
        include_links: Annotated[bool, Field(description="Also summarize the items each one links to.")] = False,
        include_timeline: Annotated[bool, Field(description="Also list items dated around each one.")] = False,
        depth: Annotated[int, Field(description="Items on each side for include_timeline.")] = 3,
    ) -> dict[str, Any]:
        from moss_files.index import service as search

        return search.expand(ctx, ids, include_links=include_links, include_timeline=include_timeline, depth=depth)

    @tools.tool(
        "loop_timeline",
        "What happened around an item or a moment, oldest first: {anchor, before: [...], after: [...]}.",
        read_only=True,
    )
    def timeline(
        anchor: Annotated[str, Field(description="An id, or a time: 2026-01-21, an RFC 3339 time, today, 3d, now.")],
        depth_before: Annotated[int, Field(description="Items before the anchor.")] = 5,
        depth_after: Annotated[int, Field(description="Items after the anchor.")] = 5,
        scope: Scope = None,
    ) -> dict[str, Any]:
        from moss_files.index import service as search

        return search.timeline(ctx, anchor, before=depth_before, after=depth_after, kinds=[kind for kind in scope or () if kind != "all"])

    @tools.tool(
        "loop_orient",
        "Start of work: open (or resume) this agent's session and say where things stand, by summaries: suggested "
        "actions, recent sessions, insights, memory, inbox, hints.",
    )
    def orient(
        task: Annotated[str | None, Field(description="What this session works on.")] = None,
        agent: Annotated[str | None, Field(description="Who works in it (sessions are resumed per agent).")] = None,
        new: Annotated[bool, Field(description="Start a new session even if one is active.")] = False,
        insight_limit: Annotated[int, Field(description="At most this many insight summaries.")] = 20,
        repo_path: Annotated[str | None, Field(description="LoopFlow's: must be this workspace or in it.")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

        if repo_path is not None:
            _check_repo_path(ctx.root, repo_path)
        return loopflow.orient(ctx, task=task, agent=agent, new=new, insight_limit=insight_limit)

    @tools.tool(
        "loop_remember",
        "Record an insight (what was learned) as a new file, status unprocessed. Returns {id, path, summary, insight}.",
    )
    def remember(
        content: Annotated[str, Field(description="The insight.")],
        type: Annotated[str | None, Field(description="domain, architecture, edge_case, technical (default) or process.")] = None,
        tags: Annotated[list[str] | None, Field(description="Tags.")] = None,
        links: Annotated[list[str] | None, Field(description="Ids of related items.")] = None,
        task: Annotated[str | None, Field(description="Task it was learned on.")] = None,
        session: Annotated[str | None, Field(description="Session it was learned in (default: the active one).")] = None,
        summary: Annotated[str | None, Field(description="One line (default: generated).")] = None,
        context: Annotated[str | None, Field(description="Two or three sentences (default: generated).")] = None,
        notes: Annotated[str | None, Field(description="Free notes.")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

        return loopflow.remember(
            ctx, content, type=type, tags=tags or (), links=links or (), task=task, session=session, summary=summary, context=context, notes=notes
        )

    @tools.tool(
        "loop_observe", "Record what happened (a tool call, edit, command, prompt, note) as an observation in the session. Returns {id, path, summary}."
    )
    def observe(
        text: Annotated[str, Field(description="What happened.")],
        kind: Annotated[str | None, Field(description="note (default), tool_call, file_edit, shell_command or user_prompt.")] = None,
        session: Annotated[str | None, Field(description="Session id (default: the active one).")] = None,
        time: Annotated[str | None, Field(description="When, RFC 3339 (default: now).")] = None,
        context: Annotated[dict[str, Any] | None, Field(description='Details, e.g. {"tool": "Edit", "file": "app.py"}.')] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

        found = loopflow.observe(ctx, text, kind=kind, session=session, time=time, context=context)
        return {"id": found["id"], "path": found["path"], "summary": found["summary"]}

    @tools.tool(
        "loop_handoff",
        "End of work: record the session's outcome, lists, next actions (saved first) and prose; repeating it changes "
        "nothing. Returns {session, outcome, created, next_actions_saved, changed}.",
        destructive=True,
        idempotent=True,
    )
    def handoff(
        mode: Annotated[str, Field(description="graceful or emergency.")] = "graceful",
        completed: Annotated[list[str] | None, Field(description="Done in this session.")] = None,
        in_progress: Annotated[list[str] | None, Field(description="Started, not finished.")] = None,
        blocked_on: Annotated[list[str] | None, Field(description="What blocks the work.")] = None,
        next_actions: Annotated[list[str] | None, Field(description="What the next session should do.")] = None,
        hot_context: Annotated[str | None, Field(description="What the next agent must know at once.")] = None,
        summary: Annotated[str | None, Field(description="What happened.")] = None,
        learnings: Annotated[str | None, Field(description="What was learned (markdown).")] = None,
        outcome: Annotated[str | None, Field(description="COMPLETE, PARTIAL, BLOCKED or INTERRUPTED (default: from the lists).")] = None,
        task: Annotated[str | None, Field(description="Set the session's task.")] = None,
        session: Annotated[str | None, Field(description="Session id (default: the active one, else today's last).")] = None,
        agent: Annotated[str | None, Field(description="Whose active session to end.")] = None,
    ) -> dict[str, Any]:
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
        return loopflow.handoff(ctx, request, session_id=session, agent=agent)

    # ----------------------------------------------------------------- insights

    @tools.tool(
        "loop_insight_update",
        "Change an insight: status, type, tags/links (replace, add_, remove_), notes, summary, context, content. Only the "
        "changed lines of its file change. Returns {id, updated, changed, insight, message}.",
        destructive=True,
        idempotent=True,
    )
    def insight_update(
        id: Annotated[str, Field(description="Insight id.")],
        status: Annotated[str | None, Field(description="unprocessed or discussed.")] = None,
        type: Annotated[str | None, Field(description="domain, architecture, edge_case, technical or process.")] = None,
        tags: Annotated[list[str] | None, Field(description="Replace the tags.")] = None,
        add_tags: Annotated[list[str] | None, Field(description="Add tags.")] = None,
        remove_tags: Annotated[list[str] | None, Field(description="Remove tags.")] = None,
        links: Annotated[list[str] | None, Field(description="Replace the linked ids.")] = None,
        add_links: Annotated[list[str] | None, Field(description="Add linked ids.")] = None,
        remove_links: Annotated[list[str] | None, Field(description="Remove linked ids.")] = None,
        notes: Annotated[str | None, Field(description='Replace the notes ("" clears).')] = None,
        summary: Annotated[str | None, Field(description='One-line summary ("" returns to the generated one).')] = None,
        context: Annotated[str | None, Field(description='Two or three sentences ("" returns to the generated one).')] = None,
        content: Annotated[str | None, Field(description="Replace the insight's text.")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow
        from moss_files.loopflow.insights import Update

        update = Update(
            status=status,
            type=type,
            tags=tuple(tags) if tags is not None else None,
            add_tags=tuple(add_tags or ()),
            remove_tags=tuple(remove_tags or ()),
            links=tuple(links) if links is not None else None,
            add_links=tuple(add_links or ()),
            remove_links=tuple(remove_links or ()),
            notes=notes,
            summary=summary,
            context=context,
            content=content,
        )
        return loopflow.update_insight(ctx, id, update)

    @tools.tool(
        "loop_connect",
        "What relates to this? With query: matching insights (summaries, links), the items they link to, matching tasks. "
        "With id and to: link that insight to those items (both: link insights back; remove: unlink); loop_expand "
        "include_links shows links.",
        destructive=True,
        idempotent=True,
    )
    def connect(
        query: Annotated[str | None, Field(description="Concept or topic to find connections for.")] = None,
        include_tasks: Annotated[bool, Field(description="With query: also search tasks.")] = True,
        id: Annotated[str | None, Field(description="Insight to link from (instead of query).")] = None,
        to: Annotated[list[str] | None, Field(description="With id: ids of the items to link to (any kind).")] = None,
        both: Annotated[bool, Field(description="With id: also link each target insight back.")] = False,
        remove: Annotated[bool, Field(description="With id: remove these links instead.")] = False,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

        return loopflow.connect(ctx, query=query, include_tasks=include_tasks, id=id, to=to, both=both, remove=remove)

    # ----------------------------------------------------------------- tasks (PLAN.md)

    @tools.tool(
        "loop_task_create",
        "Add a task to .cstack/PLAN.md with your id (LF-104): title ([IMPL] ...), priority high|medium|low, status "
        "TODO|IN_PROGRESS|DONE|BLOCKED|CANCELLED, depends_on, acceptance_criteria, description, notes. Returns {created, task, message}.",
    )
    def task_create(
        id: Annotated[str, Field(description="Task id, e.g. LF-104.")],
        title: Annotated[str, Field(description="One line, with its type prefix, e.g. [IMPL] Add search.")],
        description: Annotated[str | None, Field(description="What to do (paragraphs).")] = None,
        priority: Annotated[str, Field(description="high, medium or low.")] = "medium",
        status: Annotated[str, Field(description="TODO (default), IN_PROGRESS, DONE, BLOCKED or CANCELLED.")] = "TODO",
        depends_on: Annotated[list[str] | None, Field(description="Ids of tasks this one waits for.")] = None,
        acceptance_criteria: Annotated[list[str] | None, Field(description="One line each.")] = None,
        notes: Annotated[str | None, Field(description="Notes.")] = None,
        test_file: Annotated[str | None, Field(description="The test that proves it done.")] = None,
        reason: Annotated[str | None, Field(description="Why, for BLOCKED or CANCELLED.")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import backlog

        return backlog.create_task(
            ctx,
            id=id,
            title=title,
            description=description,
            priority=priority,
            status=status,
            depends_on=depends_on,
            acceptance_criteria=acceptance_criteria,
            notes=notes,
            test_file=test_file,
            reason=reason,
        )

    @tools.tool(
        "loop_task_update",
        "Change a PLAN.md task by id: status (any to any; the line moves between sections as cstack moves it), priority, "
        'title, description, notes, depends_on, acceptance_criteria, test_file ("" clears). Returns {updated, task, changes, message}.',
        destructive=True,
        idempotent=True,
    )
    def task_update(
        id: Annotated[str, Field(description="Task id.")],
        status: Annotated[str | None, Field(description="TODO, IN_PROGRESS, DONE, BLOCKED or CANCELLED.")] = None,
        priority: Annotated[str | None, Field(description="high, medium or low.")] = None,
        title: Annotated[str | None, Field(description="New title.")] = None,
        description: Annotated[str | None, Field(description="New description.")] = None,
        notes: Annotated[str | None, Field(description="New notes.")] = None,
        depends_on: Annotated[list[str] | None, Field(description="Replace the dependencies.")] = None,
        acceptance_criteria: Annotated[list[str] | None, Field(description="Replace the criteria.")] = None,
        test_file: Annotated[str | None, Field(description="New test file.")] = None,
        reason: Annotated[str | None, Field(description="Why, for BLOCKED, CANCELLED or DONE.")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import backlog

        return backlog.update_task(
            ctx,
            id=id,
            status=status,
            priority=priority,
            title=title,
            description=description,
            notes=notes,
            depends_on=depends_on,
            acceptance_criteria=acceptance_criteria,
            test_file=test_file,
            reason=reason,
        )

    @tools.tool(
        "loop_task_list",
        "PLAN.md's tasks with ids, in file order: {tasks: [{id, title, status, priority, depends_on}], count, total, "
        "truncated}; with ids, their full records (description, acceptance_criteria, notes, ...).",
        read_only=True,
    )
    def task_list(
        status: Annotated[list[str] | None, Field(description="Only these statuses, e.g. [TODO, IN_PROGRESS].")] = None,
        priority: Annotated[list[str] | None, Field(description="Only these priorities, e.g. [high].")] = None,
        ids: Annotated[list[str] | None, Field(description="Full records of these tasks instead.")] = None,
        limit: Annotated[int, Field(description="At most this many.")] = 20,
    ) -> dict[str, Any]:
        from moss_files.loopflow import backlog

        return backlog.list_tasks(ctx, statuses=status, priorities=priority, ids=ids, limit=limit)

    # ----------------------------------------------------------------- summary, probe

    @tools.tool(
        "loop_update_summary",
        "Leave notes for the next session in .moss/summary.md (loop_orient shows them): repo_summary, folder_structure, "
        "suggested_actions; each replaces its section. Returns {success, updated, message, repo_summary}.",
        destructive=True,
    )
    def update_summary(
        repo_summary: Annotated[str | None, Field(description="What the repository is and where it stands.")] = None,
        folder_structure: Annotated[str | None, Field(description="Annotated tree of the key folders.")] = None,
        suggested_actions: Annotated[str | None, Field(description="What the next session should do (one per line).")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

        return loopflow.update_summary(ctx, repo_summary=repo_summary, folder_structure=folder_structure, suggested_actions=suggested_actions)

    @tools.tool(
        "loop_probe",
        "Ask the user a structured question: what, why, options, a safe default. Returns it formatted for you to present; wait for the answer.",
        read_only=True,
    )
    def probe(
        question: Annotated[str, Field(description="The question.")],
        why: Annotated[str, Field(description="Why you need the answer.")],
        options: Annotated[list[str] | None, Field(description="Suggested answers.")] = None,
        default_option: Annotated[str | None, Field(description="The safe choice if the user is unsure.")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

        return loopflow.probe(ctx, question=question, why=why, options=options, default_option=default_option)


def _check_repo_path(root: Path, repo_path: str) -> None:
    """LoopFlow's `loop_orient` names the repository it means; this server serves one workspace,
    so a path outside it is refused rather than answered for another repository.

    Raises InvalidRequest.
    """
    wanted = Path(repo_path).expanduser()
    resolved = (wanted if wanted.is_absolute() else root / wanted).resolve()
    served = root.resolve()
    if resolved != served and served not in resolved.parents:
        raise InvalidRequest(
            f"this server serves the workspace {served}, not {repo_path}",
            details={"field": "repo_path", "repo_path": repo_path, "workspace": str(served)},
            hint="start `moss serve` in that repository (or leave repo_path out)",
        )


def register_sharing(tools: ToolRegistry) -> None:
    """Declare the `share` set: sharing bundles and feedback (opt-in: an agent needs them now
    and then, and their schemas would ride along in every default tools/list otherwise)."""
    base = tools.context.replace(notify=logging.getLogger("moss_files.mcp").info)

    def settings() -> Context:
        # Read per call, as the capsule tools do: where bundles may go is set in .moss/config.toml.
        return base.replace(config=config.load_config(base.root, home=base.home))

    # ----------------------------------------------------------------- sharing bundles

    @tools.tool(
        "loop_export",
        "Export insights to a bundle file for another repository: by ids, else by tags, types and query (all when none), "
        "plus the insights they link to; secrets and machine paths are removed. Returns {bundle_path, insights_exported, ...}.",
        destructive=True,
    )
    def export(
        output_path: Annotated[
            str | None, Field(description="A .json path in .moss/exports/ or an allowed folder (default: .moss/exports/insights-<time>.json).")
        ] = None,
        insight_ids: Annotated[list[str] | None, Field(description="Exactly these insights.")] = None,
        tags: Annotated[list[str] | None, Field(description="Insights with any of these tags.")] = None,
        types: Annotated[list[str] | None, Field(description="Insights of these types.")] = None,
        query: Annotated[str | None, Field(description="Insights matching this search.")] = None,
        include_links: Annotated[bool, Field(description="Add the insights they link to.")] = True,
        reason: Annotated[str | None, Field(description="A note for the receiver.")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import sharing

        return sharing.export_bundle(
            settings(), path=output_path, ids=insight_ids, tags=tags, types=types, query=query, include_links=include_links, reason=reason
        )

    @tools.tool(
        "loop_import_preview",
        "What importing a bundle (or a LoopFlow insights.json) would do, per entry: new, duplicate (same content here) or "
        "conflict (same id, other content). Writes nothing.",
        read_only=True,
    )
    def import_preview(bundle_path: Annotated[str, Field(description="The bundle's .json path.")]) -> dict[str, Any]:
        from moss_files.loopflow import sharing

        return sharing.preview_bundle(settings(), path=bundle_path)

    @tools.tool(
        "loop_import",
        "Import a bundle's insights (all or selected_ids), all or nothing: new ones get ids here and their links follow; "
        "duplicates are skipped; conflicts are skipped unless skip_conflicts is false (the local insight is updated).",
        destructive=True,
        idempotent=True,
    )
    def import_(
        bundle_path: Annotated[str, Field(description="The bundle's .json path.")],
        selected_ids: Annotated[list[str] | None, Field(description="Only these original ids (from the preview).")] = None,
        skip_duplicates: Annotated[bool, Field(description="Leave out entries whose content is here already.")] = True,
        skip_conflicts: Annotated[bool, Field(description="Leave out entries whose id is here with other content.")] = True,
    ) -> dict[str, Any]:
        from moss_files.loopflow import sharing

        return sharing.import_bundle(settings(), path=bundle_path, selected_ids=selected_ids, skip_duplicates=skip_duplicates, skip_conflicts=skip_conflicts)

    @tools.tool(
        "loop_painpoint",
        "Record a pain point, feature idea or bug about the tools, queued in .moss/feedback/ (nothing is sent). The context "
        "is sanitized first. Returns {captured, id, path, ..., sanitization_warnings}.",
    )
    def painpoint(
        type: Annotated[str, Field(description="pain_point, feature_idea or bug.")],
        title: Annotated[str, Field(description="One line.")],
        description: Annotated[str, Field(description="What happened, or the idea.")],
        context: Annotated[str | None, Field(description="What you were doing (sanitized before it is stored).")] = None,
        severity: Annotated[str | None, Field(description="low, medium (default), high or critical.")] = None,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

        return loopflow.painpoint(base, type=type, title=title, description=description, context=context, severity=severity)

    @tools.tool(
        "loop_feedback_list",
        "Captured feedback, newest first (default: queued): {feedback_specs: [{id, type, title, severity, status, created_at}], count, total, truncated}.",
        read_only=True,
    )
    def feedback_list(
        status: Annotated[list[str] | None, Field(description="queued, shared or dismissed (default: queued).")] = None,
        limit: Annotated[int, Field(description="At most this many.")] = 20,
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

        return loopflow.list_feedback(base, statuses=status, limit=limit)

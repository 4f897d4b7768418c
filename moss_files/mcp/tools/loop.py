"""The `loop` tool set: LoopFlow's progressive disclosure (`loop_scan` → `loop_expand`,
`loop_timeline`) over every artifact, and its session tools (`loop_orient`, `loop_remember`,
`loop_handoff`). Entry layer: each tool is one call of the use case `moss search|expand|timeline`
(`index.service`) or `moss session|insight` (`loopflow.service`) calls, so both return the same
shapes and errors. The use cases load on a tool's first call, not when the tool set is
declared, which keeps them out of every `moss serve` start.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Annotated, Any

from pydantic import Field

from moss_files.mcp.server import ToolRegistry

Scope = Annotated[
    list[str] | None,
    Field(description="Only these kinds: insight, session, capsule, task, message, memory, current (plurals work)."),
]


def register(tools: ToolRegistry) -> None:
    """Declare the loop tools."""
    # Index notes (a rebuild, an unreadable file) go to the server's log, never into a result.
    ctx = replace(tools.context, notify=logging.getLogger("moss_files.mcp").info)

    @tools.tool(
        "loop_scan",
        "Search every artifact; returns ids with one-line summaries, best first ({query, matches: [{id, kind, summary, "
        "score, date, status?, handle?}], truncated, hint}; handle: a capsule's workspace/name); then loop_expand the "
        'ids you need. Query: terms, "phrases", -exclusions, field:value filters (kind: status: tag: type: after: '
        "before: date:).",
        read_only=True,
    )
    def scan(
        query: Annotated[str, Field(description="What to find.")],
        scope: Annotated[
            list[str] | str | None,
            Field(description='Only these kinds: insight, session, capsule, task, message, memory, current (plurals work); "all" for every kind.'),
        ] = None,
        types: Annotated[
            list[str] | None, Field(description="Only items of these types (insights: domain, architecture, edge_case, technical, process).")
        ] = None,
        statuses: Annotated[list[str] | None, Field(description="Only items with these statuses (unprocessed, discussed, open, done, ...).")] = None,
        limit: Annotated[int, Field(description="At most this many matches (1-200).")] = 20,
        offset: Annotated[int, Field(description="Skip this many (paging).")] = 0,
        match: Annotated[str, Field(description='"any" term (default) or "all" terms.')] = "any",
        raw: Annotated[bool, Field(description="Pass the query to SQLite FTS5 unescaped.")] = False,
    ) -> dict[str, Any]:
        # LoopFlow sends scope as one word ("all", "insights"); the seeds' spec as a list.
        kinds = [scope] if isinstance(scope, str) else list(scope or ())
        filters = {"type": types or (), "status": statuses or ()}
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

        return search.timeline(ctx, anchor, before=depth_before, after=depth_after, kinds=scope or ())

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
    ) -> dict[str, Any]:
        from moss_files.loopflow import service as loopflow

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

"""LoopFlow's use cases over a workspace: insights (remember, list, show, update, link) and
sessions (orient, handoff, list, show).

Shell layer: reads and writes through the store (`store`), decides with the pure models
(`insights`, `sessions`). Every function takes the foundation `Context` (clock and ids come from
it; nothing here reads the environment) and returns plain dicts in the shapes the CLI prints
with --json and the MCP tools (`loop_orient`, `loop_remember`, `loop_handoff`, …) return. The
search use cases (`loop_scan`, `loop_expand`, `loop_timeline`) are the index's: `index.service`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from moss_files.foundation import document
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError, NotFound
from moss_files.index.service import open_index
from moss_files.loopflow import insights as insight_core
from moss_files.loopflow import sessions as session_core
from moss_files.loopflow.sessions import Handoff, Session
from moss_files.loopflow.store import ItemStore, insight_store, session_store

__all__ = [
    "Context",
    "handoff",
    "link_insight",
    "list_insights",
    "list_sessions",
    "orient",
    "remember",
    "show_insight",
    "show_session",
    "start_session",
    "update_insight",
]

ORIENT_INSIGHTS = 20
ORIENT_SESSIONS = 5
DRAFT_INSIGHT_ID = "INS-00000000-draft000"  # stands in until the store draws the real id
DRAFT_SESSION_ID = "SES-00000000-draft000"


def _new_id(ctx: Context, prefix: str) -> Callable[[], str]:
    return lambda: ctx.new_id(prefix)


# --------------------------------------------------------------------------- insights


def remember(
    ctx: Context,
    content: str,
    *,
    type: str | None = None,
    tags: Iterable[str] = (),
    links: Iterable[str] = (),
    task: str | None = None,
    session: str | None = None,
    summary: str | None = None,
    context: str | None = None,
    notes: str | None = None,
) -> dict[str, Any]:
    """Capture an insight (`loop_remember`, `moss insight add`): a new file, status
    unprocessed, its source the given task and session (default: the active session).

    Returns `{id, path, summary, insight}`. Raises InvalidRequest for empty content or a bad value.
    """
    now = ctx.stamp()
    if session is None:
        active = _latest_active(ctx)
        session = active.id if active is not None else None
    draft = insight_core.new_insight(
        DRAFT_INSIGHT_ID,
        content,
        now=now,
        type=type,
        tags=tags,
        links=links,
        source={"task": task, "session": session},
        summary=summary,
        context=context,
        notes=notes,
    )

    files = insight_store(ctx.root)
    new_id, path = files.create(_new_id(ctx, insight_core.ID_PREFIX), lambda item_id: insight_core.render_insight(replace(draft, id=item_id)))
    created = replace(draft, id=new_id)
    return {
        "id": new_id,
        "path": files.relpath(path),
        "summary": created.effective_summary,
        "insight": insight_core.insight_to_dict(created, path=files.relpath(path)),
    }


def list_insights(
    ctx: Context,
    *,
    types: Sequence[str] = (),
    statuses: Sequence[str] = (),
    tags: Sequence[str] = (),
    limit: int = 50,
) -> dict[str, Any]:
    """Insights, newest first, without their content: `{insights, total, truncated, problems}`.

    Files that cannot be read are listed under `problems`, never left out silently.
    """
    wanted_types = {insight_core.check_type(t) for t in types}
    wanted_status = {insight_core.check_status(s) for s in statuses}
    wanted_tags = {t.casefold() for t in tags}
    items, problems = insight_store(ctx.root).read_all()
    chosen = [
        item
        for _path, item in items
        if (not wanted_types or item.type in wanted_types)
        and (not wanted_status or item.status in wanted_status)
        and (not wanted_tags or wanted_tags & {t.casefold() for t in item.tags})
    ]
    chosen.sort(key=lambda item: (item.created or "", item.id), reverse=True)
    _check_limit(limit)
    return {
        "insights": [insight_core.insight_brief(item) for item in chosen[:limit]],
        "total": len(chosen),
        "truncated": len(chosen) > limit,
        "problems": problems,
    }


def show_insight(ctx: Context, insight_id: str) -> dict[str, Any]:
    """One insight's full record. Raises NotFound, or InvalidDocument for an unreadable file."""
    files = insight_store(ctx.root)
    path, found = files.find(insight_id)
    return insight_core.insight_to_dict(found, path=files.relpath(path))


def update_insight(ctx: Context, insight_id: str, update: insight_core.Update) -> dict[str, Any]:
    """Change an insight's status, type, tags, links, notes, summary or context
    (`loop_insight_update`); only the changed keys' lines change in the file.

    Returns `{id, changed: [keys], insight}`. Raises NotFound, InvalidRequest, Conflict.
    """
    files = insight_store(ctx.root)
    path, _found = files.find(insight_id)
    now = ctx.stamp()
    changed: list[str] = []

    def transform(doc: document.Document) -> str | None:
        changes = insight_core.plan_update(files.parse(path, doc), update, now)
        changed[:] = [key for key in changes if key != "updated"]
        return document.edit_frontmatter(doc.text, changes, path) if changes else None

    result = files.parse(path, files.edit(path, transform))
    return {"id": result.id, "changed": changed, "insight": insight_core.insight_to_dict(result, path=files.relpath(path))}


def link_insight(ctx: Context, insight_id: str, targets: Sequence[str], *, remove: bool = False, both: bool = False) -> dict[str, Any]:
    """Add (or remove) links from an insight to other items; with `both`, also from each
    target that is an insight back to this one.

    Returns `{id, links, changed, back_linked, not_insights}`. Raises NotFound for the insight.
    """
    if not targets:
        raise InvalidRequest("name at least one id to link to")
    if insight_id in targets:
        raise InvalidRequest("an insight cannot link to itself")

    def change(ids: Sequence[str]) -> insight_core.Update:
        return insight_core.Update(remove_links=tuple(ids)) if remove else insight_core.Update(add_links=tuple(ids))

    result = update_insight(ctx, insight_id, change(targets))
    back: list[str] = []
    others: list[str] = []
    if both:
        for target in targets:
            try:
                done = update_insight(ctx, target, change([result["id"]]))
            except NotFound:
                others.append(target)
                continue
            back.append(done["id"])
    return {
        "id": result["id"],
        "links": result["insight"]["links"],
        "changed": bool(result["changed"]),
        "back_linked": back,
        "not_insights": others,
    }


# --------------------------------------------------------------------------- sessions


def _sessions(ctx: Context) -> tuple[list[tuple[Path, Session]], list[dict[str, Any]]]:
    items, problems = session_store(ctx.root).read_all()
    items.sort(key=lambda pair: (pair[1].started or pair[1].date or "", pair[1].id), reverse=True)
    return items, problems


def _latest_active(ctx: Context, agent: str | None = None) -> Session | None:
    found = _latest_active_path(ctx, agent)
    return found[1] if found else None


def _latest_active_path(ctx: Context, agent: str | None = None) -> tuple[Path, Session] | None:
    for path, item in _sessions(ctx)[0]:
        if item.active and (agent is None or item.agent == agent):
            return path, item
    return None


def list_sessions(ctx: Context, *, limit: int = 20, active: bool | None = None) -> dict[str, Any]:
    """Sessions, most recent first: `{sessions, total, truncated, problems}`."""
    _check_limit(limit)
    items, problems = _sessions(ctx)
    chosen = [item for _path, item in items if active is None or item.active == active]
    return {
        "sessions": [session_core.session_brief(item) for item in chosen[:limit]],
        "total": len(chosen),
        "truncated": len(chosen) > limit,
        "problems": problems,
    }


def show_session(ctx: Context, session_id: str) -> dict[str, Any]:
    """One session's full record. Raises NotFound."""
    files = session_store(ctx.root)
    path, found = files.find(session_id)
    return session_core.session_to_dict(found, path=files.relpath(path))


def start_session(ctx: Context, *, task: str | None = None, agent: str | None = None, new: bool = False) -> tuple[Path, Session, bool]:
    """The session to work in: the agent's active one (resumed), or a new one.
    Returns `(path, session, resumed)`."""
    files = session_store(ctx.root)
    if not new:
        found = _latest_active_path(ctx, agent)
        if found is not None:
            path, current = found
            if task and not current.task:
                current = files.parse(path, files.edit(path, lambda doc: document.edit_frontmatter(doc.text, {"task": task}, path)))
            return path, current, True
    draft = session_core.new_session(DRAFT_SESSION_ID, now=ctx.stamp(), task=task, agent=agent)
    new_id, path = files.create(_new_id(ctx, session_core.ID_PREFIX), lambda item_id: session_core.render_session(replace(draft, id=item_id)))
    return path, replace(draft, id=new_id), False


def orient(ctx: Context, *, task: str | None = None, agent: str | None = None, new: bool = False, insight_limit: int = ORIENT_INSIGHTS) -> dict[str, Any]:
    """Open (or resume) a session and say where things stand (`loop_orient`,
    `moss session start`), by summaries only: never an insight's full text.

    Returns `{session, resumed, repo, suggested_actions, recent_sessions, insights, memory,
    inbox, quick_stats, hints}`.
    """
    path, current, resumed = start_session(ctx, task=task, agent=agent, new=new)
    sessions, session_problems = _sessions(ctx)
    previous = [item for _p, item in sessions if item.id != current.id]
    suggested: list[str] = []
    for item in previous:
        if item.next_actions:
            suggested = list(item.next_actions)
            break
    insights, insight_problems = insight_store(ctx.root).read_all()
    ordered = sorted((item for _p, item in insights), key=lambda i: (i.status != "unprocessed", _neg(i.created or ""), i.id))
    unprocessed = sum(1 for _p, item in insights if item.status == "unprocessed")
    shown = ordered[:insight_limit]
    memory = _memory(ctx)
    inbox = _inbox(ctx)
    hints = _hints(resumed, current, unprocessed, suggested, insights, shown, memory, inbox)
    return {
        "session": session_core.session_to_dict(current, path=session_store(ctx.root).relpath(path)),
        "resumed": resumed,
        "repo": {"name": Path(ctx.root).name, "path": str(ctx.root)},
        "suggested_actions": suggested,
        "recent_sessions": [session_core.session_brief(item) for item in previous[:ORIENT_SESSIONS]],
        "insights": {
            "items": [insight_core.insight_brief(item) for item in shown],
            "total_count": len(insights),
            "unprocessed_count": unprocessed,
            "is_complete": len(shown) == len(insights),
            "message": f"{len(shown)} of {len(insights)} insights (unprocessed first); expand ids for full text",
        },
        "memory": memory,
        "inbox": inbox,
        "quick_stats": {"insights": len(insights), "unprocessed_insights": unprocessed, "sessions": len(sessions)},
        "problems": [*session_problems, *insight_problems],
        "hints": hints,
    }


def _neg(text: str) -> tuple[int, ...]:
    # Sort newest first inside an ascending sort key.
    return tuple(-ord(char) for char in text)


def _memory(ctx: Context) -> dict[str, Any] | None:
    import cstack

    try:
        counts = cstack.stats(ctx.root)
        if not counts.get("exists"):
            return None
        status = cstack.read_status(ctx.root)
    except MossError as err:
        return {"error": {"code": err.code, "message": err.message, "path": err.path, "line": err.line}}
    return {
        "task": status.current.task,
        "focus": status.current.focus,
        "state": status.current.state,
        "next_steps": list(status.current.next_steps)[:5],
        "plan": {key: value for key, value in counts.items() if key != "exists"},
    }


def _inbox(ctx: Context) -> dict[str, Any] | None:
    try:
        found = open_index(ctx).run(lambda view: view.counts(kind="message", status="inbox"))
    except MossError:
        return None
    return {"messages": found["items"]}


def _hints(
    resumed: bool, current: Session, unprocessed: int, suggested: list[str], insights: list[Any], shown: list[Any], memory: Any, inbox: Any
) -> list[str]:
    hints = [f"{'resumed' if resumed else 'started'} session {current.id}; end it with `moss session end` (loop_handoff)"]
    if suggested:
        hints.append("the last session left next actions: see suggested_actions")
    if unprocessed:
        hints.append(f"{unprocessed} unprocessed insights: review them, then `moss insight update ID --status discussed`")
    if len(shown) < len(insights):
        hints.append("more insights exist: `moss search QUERY` (loop_scan) finds them by summary")
    if inbox and inbox.get("messages"):
        hints.append(f"{inbox['messages']} messages in the inbox: `moss search kind:message status:inbox`")
    if memory and memory.get("plan", {}).get("ready"):
        hints.append(f"{memory['plan']['ready']} plan tasks are ready: `cstack ready`")
    return hints


def handoff(ctx: Context, request: Handoff, *, session_id: str | None = None, agent: str | None = None) -> dict[str, Any]:
    """End the session with a handoff (`loop_handoff`, `moss session end`).

    Next actions are saved first (their own write), then the outcome, lists and prose.
    The session is the one named, else the agent's active one, else today's last one (so a
    repeated handoff changes nothing), else a new one. Outcome: explicit, else INTERRUPTED
    (emergency), BLOCKED (blockers), PARTIAL (work in progress) or COMPLETE.

    Returns `{session, outcome, created, next_actions_saved, changed}`.
    Raises InvalidRequest for bad values, NotFound for an unknown session id.
    """
    request = session_core.check_handoff(request)
    now = ctx.stamp()
    files = session_store(ctx.root)
    target = _handoff_target(ctx, session_id, agent)
    if target is None:
        base = session_core.new_session(DRAFT_SESSION_ID, now=now, task=request.task, agent=agent)

        def make(new_id: str) -> str:
            draft = replace(base, id=new_id)
            plan = session_core.plan_handoff(draft, request, now)
            meta = {**session_core.session_meta(draft), **plan.next_actions, **plan.rest}
            ordered = {key: meta[key] for key in session_core.FIELDS if key in meta}
            body = session_core.set_sections("", plan.sections)
            return document.render(ordered, body)

        new_id, path = files.create(_new_id(ctx, session_core.ID_PREFIX), make)
        return _handoff_result(files, path, files.read(path), created=True, saved=bool(request.next_actions), changed=True)

    path = target

    def save_next(doc: document.Document) -> str | None:
        plan = session_core.plan_handoff(files.parse(path, doc), request, now)
        return document.edit_frontmatter(doc.text, plan.next_actions, path) if plan.next_actions else None

    before = files.digest(path)
    files.edit(path, save_next)
    saved = bool(request.next_actions)

    def record(doc: document.Document) -> str | None:
        plan = session_core.plan_handoff(files.parse(path, doc), request, now)
        text = document.edit_frontmatter(doc.text, plan.rest, path) if plan.rest else doc.text
        text = session_core.body_with_sections(text, plan.sections, path)
        return None if text == doc.text else text

    written = files.edit(path, record)
    changed = files.digest(path) != before
    return _handoff_result(files, path, files.parse(path, written), created=False, saved=saved, changed=changed)


def _handoff_target(ctx: Context, session_id: str | None, agent: str | None) -> Path | None:
    if session_id is not None:
        return session_store(ctx.root).find(session_id)[0]
    sessions = _sessions(ctx)[0]
    for path, item in sessions:
        if item.active and (agent is None or item.agent == agent):
            return path
    today = ctx.today()
    for path, item in sessions:
        if item.date == today and (agent is None or item.agent == agent):
            return path
    return None


def _handoff_result(files: ItemStore[Session], path: Path, final: Session, *, created: bool, saved: bool, changed: bool) -> dict[str, Any]:
    return {
        "session": session_core.session_to_dict(final, path=files.relpath(path)),
        "outcome": final.outcome,
        "created": created,
        "next_actions_saved": saved,
        "changed": changed,
    }


def _check_limit(limit: int, maximum: int = 10_000) -> None:
    if limit < 1 or limit > maximum:
        raise InvalidRequest(f"limit must be between 1 and {maximum}", details={"limit": limit})

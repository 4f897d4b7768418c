"""LoopFlow's use cases over a workspace: insights (remember, list, show, update, delete, link,
connect), sessions (orient, handoff, list, show), observations (observe), the repository summary
(update_summary), pain points (painpoint, list_feedback) and structured questions (probe). Tasks
are `backlog`'s, sharing bundles `sharing`'s, the LoopFlow export `export`'s.

Summaries: an insight written without a summary, and a session handed off without a headline,
get one from the AI summariser when `[summaries] ai` is on and the server answers (`ai`,
`ollama`), stored with `summary_source: ai` (`headline_source: ai`); otherwise nothing is stored
and the heuristic summary is made from the text whenever it is read. A summary a person wrote is
never replaced.

Shell layer: reads and writes through the store (`store`), decides with the pure models
(`insights`, `sessions`). Every function takes the foundation `Context` (clock and ids come from
it; nothing here reads the environment) and returns plain dicts in the shapes the CLI prints
with --json and the MCP tools (`loop_orient`, `loop_remember`, `loop_handoff`, …) return. The
search use cases (`loop_scan`, `loop_expand`, `loop_timeline`) are the index's: `index.service`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from moss_files.foundation import document, formats, fs
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, NotFound
from moss_files.index.service import open_index
from moss_files.loopflow import feedback as feedback_core
from moss_files.loopflow import insights as insight_core
from moss_files.loopflow import observations as observation_core
from moss_files.loopflow import sessions as session_core
from moss_files.loopflow import summarizer
from moss_files.loopflow import summary as summary_core
from moss_files.loopflow.sanitize import personal_warnings, sanitize
from moss_files.loopflow.sessions import Handoff, Session
from moss_files.loopflow.store import ItemStore, feedback_store, insight_store, observation_store, session_store

__all__ = [
    "Context",
    "connect",
    "delete_insight",
    "handoff",
    "link_insight",
    "list_feedback",
    "list_insights",
    "list_sessions",
    "observe",
    "orient",
    "painpoint",
    "probe",
    "read_summary",
    "remember",
    "show_insight",
    "show_session",
    "start_session",
    "update_insight",
    "update_summary",
]

ORIENT_INSIGHTS = 20
ORIENT_SESSIONS = 5
DRAFT_INSIGHT_ID = "INS-00000000-draft000"  # stands in until the store draws the real id
DRAFT_SESSION_ID = "SES-00000000-draft000"
DRAFT_OBSERVATION_ID = "OBS-00000000-draft000"


def _new_id(ctx: Context, prefix: str) -> Callable[[], str]:
    return lambda: ctx.new_id(prefix)


def _fallback(reason: str | None) -> str | None:
    """The reason a result reports for a heuristic summary (none when AI is simply off)."""
    return None if reason in (None, "disabled") else reason


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
    summary_source = None
    reason = None
    if summary is None or not summary.strip():
        insight_core.new_insight(DRAFT_INSIGHT_ID, content, now=now, type=type, tags=tags, links=links)  # checks first: no request for bad input
        summary, reason = summarizer.ai_summary(ctx, content, "insight")
        summary_source = "ai" if summary else None
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
        summary_source=summary_source,
    )

    files = insight_store(ctx.root)
    new_id, path = files.create(_new_id(ctx, insight_core.ID_PREFIX), lambda item_id: insight_core.render_insight(replace(draft, id=item_id)))
    created = replace(draft, id=new_id)
    return {
        "id": new_id,
        "path": files.relpath(path),
        "summary": created.effective_summary,
        "summary_source": created.effective_summary_source,
        "summary_fallback": _fallback(reason) if created.effective_summary_source == "heuristic" else None,
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
    """Change an insight's status, type, tags, links, notes, summary, context or content
    (`loop_insight_update`); only the changed keys' lines (and, for content, the body) change
    in the file.

    Returns `{id, updated, changed: [keys], insight, message}`. Raises NotFound, InvalidRequest
    (also for an update that names no change), Conflict.
    """
    if update == insight_core.Update():
        raise InvalidRequest("no changes specified: give a status, type, tags, links, notes, summary, context or content", details={"id": insight_id})
    files = insight_store(ctx.root)
    path, found = files.find(insight_id)
    now = ctx.stamp()
    changed: list[str] = []
    generated: tuple[str, str] | None = None
    reason = None
    if update.summary is None and insight_core.new_content(found, update) is not None and found.summary_is_generated:
        line, reason = summarizer.ai_summary(ctx, update.content or "", "insight")
        generated = (line, "ai") if line else None

    def transform(doc: document.Document) -> str | None:
        current = files.parse(path, doc)
        changes = insight_core.plan_update(current, update, now, generated=generated)
        body = insight_core.new_content(current, update)
        changed[:] = [key for key in changes if key != "updated"] + (["content"] if body is not None else [])
        if not changes:
            return None
        text = document.edit_frontmatter(doc.text, changes, path)
        return text if body is None else text[: len(text) - len(doc.body)] + body

    result = files.parse(path, files.edit(path, transform))
    return {
        "id": result.id,
        "updated": bool(changed),
        "changed": changed,
        "summary_fallback": _fallback(reason) if result.effective_summary_source == "heuristic" else None,
        "insight": insight_core.insight_to_dict(result, path=files.relpath(path)),
        "message": f"Insight {result.id} " + (f"updated: {', '.join(changed)}" if changed else "already as asked; nothing changed"),
    }


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


def delete_insight(ctx: Context, insight_id: str) -> dict[str, Any]:
    """Soft-delete an insight (`moss insight delete`), as capsules are deleted: stamp
    `deleted_at` and move its file to `.moss/insights/deleted/`. It leaves listings, orientation,
    search and timelines (`moss search status:deleted` still finds it); git keeps its history.

    Returns `{deleted: true, id, path}`. Raises NotFound (also for an insight deleted already),
    Conflict when a file of that name is in the deleted folder already.
    """
    files = insight_store(ctx.root)
    path, found = files.find(insight_id, include_deleted=True)  # one stamped by a delete that stopped too
    if path.parent == files.folder / insight_core.DELETED_FOLDER:
        raise NotFound(f"no insight {insight_id!r}: it was deleted", details={"id": insight_id})
    now = ctx.stamp()
    target = files.folder / insight_core.DELETED_FOLDER / path.name
    if os.path.lexists(target):
        raise _deleted_twice(files.relpath(target))

    def stamp(doc: document.Document) -> str | None:
        current = files.parse(path, doc)
        if current.deleted is not None:
            return None  # stamped by a delete that stopped before its move: only the move is left
        return document.edit_frontmatter(doc.text, {"deleted_at": now, "updated": now}, path)

    files.edit(path, stamp)
    if not fs.move_exclusive(path, target):  # one appeared meanwhile: the insight is marked, and left in place
        raise _deleted_twice(files.relpath(target))
    return {"deleted": True, "id": found.id, "path": files.relpath(target)}


def _deleted_twice(shown: str) -> Conflict:
    return Conflict(
        f"{shown} exists already: an insight of this id was deleted before",
        code="ALREADY_EXISTS",
        path=shown,
        hint="compare the two files and remove the one you do not need",
    )


# --------------------------------------------------------------------------- observations


def observe(
    ctx: Context,
    text: str,
    *,
    kind: str | None = None,
    session: str | None = None,
    time: str | None = None,
    summary: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Record an observation (`loop_observe`, `moss observe`): what happened, when (default:
    now), in which session (default: the active one), of which kind (note, tool_call, file_edit,
    shell_command, user_prompt), as a new file under `.moss/observations/`; search and timelines
    show it.

    Returns `{id, path, summary, observation}`. Raises InvalidRequest for empty text or a bad value.
    """
    if session is None:
        active = _latest_active(ctx)
        session = active.id if active is not None else None
    draft = observation_core.new_observation(DRAFT_OBSERVATION_ID, text, time=time or ctx.stamp(), kind=kind, session=session, summary=summary, context=context)
    files = observation_store(ctx.root)
    new_id, path = files.create(_new_id(ctx, observation_core.ID_PREFIX), lambda item_id: observation_core.render_observation(replace(draft, id=item_id)))
    created = replace(draft, id=new_id)
    return {
        "id": new_id,
        "path": files.relpath(path),
        "summary": created.effective_summary,
        "observation": observation_core.observation_to_dict(created, path=files.relpath(path)),
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
    handed_at = ""
    for item in previous:
        if item.next_actions:
            suggested = list(item.next_actions)
            handed_at = item.ended or item.started or ""
            break
    repo, summary_problem = _summary_or_problem(ctx)
    if repo.suggested_actions and (repo.updated or "") >= handed_at:
        # loop_update_summary's suggested actions are newer than the last handoff's: they win.
        suggested = [line.strip().removeprefix("- ").removeprefix("* ").strip() for line in repo.suggested_actions.splitlines() if line.strip()]
    insights, insight_problems = insight_store(ctx.root).read_all()
    ordered = sorted((item for _p, item in insights), key=lambda i: (i.status != "unprocessed", _neg(i.created or ""), i.id))
    unprocessed = sum(1 for _p, item in insights if item.status == "unprocessed")
    shown = ordered[:insight_limit]
    memory = _memory(ctx)
    inbox = _inbox(ctx)
    hints = _hints(resumed, current, unprocessed, suggested, insights, shown, memory, inbox)
    if repo.empty:
        hints.append("no repository summary yet: loop_update_summary (`moss session summary`) leaves one for the next session")
    return {
        "session": session_core.session_to_dict(current, path=session_store(ctx.root).relpath(path)),
        "resumed": resumed,
        "repo": {"name": Path(ctx.root).name, "path": str(ctx.root)},
        "repo_summary": summary_core.summary_to_dict(repo, path=summary_core.PATH.as_posix()),
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
        "problems": [*session_problems, *insight_problems, *summary_problem],
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

    The session's headline (its one line in search) comes from the AI summariser when the
    handoff's summary is long enough and AI is on, unless a person wrote one.

    Returns `{session, outcome, created, next_actions_saved, changed, headline_fallback}`.
    Raises InvalidRequest for bad values, NotFound for an unknown session id.
    """
    request = session_core.check_handoff(request)
    now = ctx.stamp()
    files = session_store(ctx.root)
    target = _handoff_target(ctx, session_id, agent)
    current = files.read(target) if target is not None else session_core.new_session(DRAFT_SESSION_ID, now=now, task=request.task, agent=agent)
    generated: tuple[str, str] | None = None
    reason = None
    wanted = session_core.handoff_text(current, request)
    if current.headline_is_generated and wanted and (not current.headline or wanted != session_core.headline_text(current.summary, current.learnings)):
        line, reason = summarizer.ai_summary(ctx, wanted, "work session")
        generated = (line, "ai") if line else None
    if target is None:
        base = current

        def make(new_id: str) -> str:
            draft = replace(base, id=new_id)
            plan = session_core.plan_handoff(draft, request, now, generated=generated)
            meta = {**session_core.session_meta(draft), **plan.next_actions, **plan.rest}
            ordered = {key: meta[key] for key in session_core.FIELDS if key in meta}
            body = session_core.set_sections("", plan.sections)
            return document.render(formats.stamp("session", ordered), body)

        new_id, path = files.create(_new_id(ctx, session_core.ID_PREFIX), make)
        return _handoff_result(files, path, files.read(path), created=True, saved=bool(request.next_actions), changed=True, reason=reason)

    path = target

    def save_next(doc: document.Document) -> str | None:
        plan = session_core.plan_handoff(files.parse(path, doc), request, now)
        return document.edit_frontmatter(doc.text, plan.next_actions, path) if plan.next_actions else None

    before = files.digest(path)
    files.edit(path, save_next)
    saved = bool(request.next_actions)

    def record(doc: document.Document) -> str | None:
        plan = session_core.plan_handoff(files.parse(path, doc), request, now, generated=generated)
        text = document.edit_frontmatter(doc.text, plan.rest, path) if plan.rest else doc.text
        text = session_core.body_with_sections(text, plan.sections, path)
        return None if text == doc.text else text

    written = files.edit(path, record)
    changed = files.digest(path) != before
    return _handoff_result(files, path, files.parse(path, written), created=False, saved=saved, changed=changed, reason=reason)


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


def _handoff_result(
    files: ItemStore[Session], path: Path, final: Session, *, created: bool, saved: bool, changed: bool, reason: str | None = None
) -> dict[str, Any]:
    return {
        "session": session_core.session_to_dict(final, path=files.relpath(path)),
        "outcome": final.outcome,
        "created": created,
        "next_actions_saved": saved,
        "changed": changed,
        "headline_fallback": _fallback(reason) if not final.headline else None,
    }


def _check_limit(limit: int, maximum: int = 10_000) -> None:
    if limit < 1 or limit > maximum:
        raise InvalidRequest(f"limit must be between 1 and {maximum}", details={"limit": limit})


# --------------------------------------------------------------------------- repository summary


def read_summary(ctx: Context) -> summary_core.RepoSummary:
    """The repository summary (empty when there is none). Raises InvalidDocument."""
    path = Path(ctx.root) / summary_core.PATH
    snapshot = fs.read_snapshot(path)
    if snapshot.data is None:
        return summary_core.RepoSummary()
    return summary_core.parse_summary(document.parse_bytes(snapshot.data, summary_core.PATH.as_posix()), summary_core.PATH.as_posix())


def _summary_or_problem(ctx: Context) -> tuple[summary_core.RepoSummary, list[dict[str, Any]]]:
    try:
        return read_summary(ctx), []
    except MossError as err:  # orientation goes on; the problem is reported with the others
        return summary_core.RepoSummary(), [{"path": summary_core.PATH.as_posix(), "code": err.code, "message": err.message, "line": err.line}]


def update_summary(
    ctx: Context,
    *,
    repo_summary: str | None = None,
    folder_structure: str | None = None,
    suggested_actions: str | None = None,
    session: str | None = None,
) -> dict[str, Any]:
    """Set sections of the repository summary `.moss/summary.md` (`loop_update_summary`),
    stamped with the time and the session (default: the active one); other text of the file
    is kept. Returns `{success, updated: [fields], message, repo_summary}`."""
    values = summary_core.check_values({"repo_summary": repo_summary, "folder_structure": folder_structure, "suggested_actions": suggested_actions})
    if session is None:
        active = _latest_active(ctx)
        session = active.id if active is not None else None
    now = ctx.stamp()
    path = Path(ctx.root) / summary_core.PATH
    shown = summary_core.PATH.as_posix()

    def step(snapshot: fs.Snapshot) -> bytes | None:
        if snapshot.data is None:
            return summary_core.new_text(values, now=now, session=session).encode("utf-8")
        doc = document.parse_bytes(snapshot.data, shown)
        return document.encode(summary_core.edited_text(doc.text, values, now=now, session=session, path=shown), doc.bom)

    fs.modify(path, step, kind="summary", relpath=shown)
    return {
        "success": True,
        "updated": list(values),
        "message": "Repository summary updated; loop_orient shows it to the next session.",
        "repo_summary": summary_core.summary_to_dict(read_summary(ctx), path=shown),
    }


# --------------------------------------------------------------------------- probe


def probe(ctx: Context, *, question: str, why: str, options: Sequence[str] | None = None, default_option: str | None = None) -> dict[str, Any]:
    """A structured question for the person (`loop_probe`): what to ask, why, the options and
    the safe default, for the agent to present before it goes on. Writes nothing.

    Raises InvalidRequest for an empty question or reason, or a default that is not an option.
    """
    ask = " ".join((question or "").split())
    reason = (why or "").strip()
    if not ask or not reason:
        raise InvalidRequest("a probe needs a question and why it is asked", details={"fields": ["question", "why"]})
    choices = [" ".join(option.split()) for option in options or () if option.strip()]
    default = " ".join(default_option.split()) if default_option and default_option.strip() else None
    if default is not None and choices and default not in choices:
        raise InvalidRequest(f"default_option {default!r} is not one of the options", details={"options": choices})
    return {
        "formatted_question": {
            "ask": ask,
            "context": reason,
            "options": [{"label": option, "is_default": option == default} for option in choices] or None,
            "note": f"If unsure, {default!r} is a safe choice." if default else None,
        },
        "instruction": "Present this question to the user. Wait for their answer before proceeding.",
    }


# --------------------------------------------------------------------------- feedback


def painpoint(
    ctx: Context,
    *,
    type: str,
    title: str,
    description: str,
    context: str | None = None,
    severity: str | None = None,
) -> dict[str, Any]:
    """Capture a pain point, feature idea or bug as a queued feedback file (`loop_painpoint`).
    The context is sanitized first (secrets, machine paths, e-mail and IP addresses, UUIDs
    removed; at most 500 characters); what may still be personal is listed as warnings.

    Returns `{captured, id, path, type, title, severity, context_sanitized, removed,
    sanitization_warnings, message}`. Raises InvalidRequest for a bad type, severity or text.
    """
    cleaned: str | None = None
    removed: dict[str, int] = {}
    warnings: list[str] = []
    if context and context.strip():
        result = sanitize(context, root=str(ctx.root), home=str(ctx.home_folder()), personal=True)
        flat = " ".join(result.text.split())
        cleaned = flat if len(flat) <= feedback_core.CONTEXT_CHARS else flat[: feedback_core.CONTEXT_CHARS].rstrip() + "..."
        removed = dict(result.found)
        warnings = personal_warnings(cleaned)
    draft = feedback_core.new_feedback(
        "FB-00000000-draft000", type=type, title=title, description=description, now=ctx.stamp(), severity=severity, context=cleaned, warnings=warnings
    )
    files = feedback_store(ctx.root)
    new_id, path = files.create(_new_id(ctx, feedback_core.ID_PREFIX), lambda item_id: feedback_core.render_feedback(replace(draft, id=item_id)))
    return {
        "captured": True,
        "id": new_id,
        "path": files.relpath(path),
        "type": draft.type,
        "title": draft.title,
        "severity": draft.severity,
        "context_sanitized": cleaned is not None,
        "removed": removed,
        "sanitization_warnings": warnings,
        "message": f"Feedback {new_id} captured and queued in {files.relpath(path)}; nothing is shared until a person does so.",
    }


def list_feedback(ctx: Context, *, statuses: Sequence[str] | None = None, limit: int = 20) -> dict[str, Any]:
    """Captured feedback, newest first (`loop_feedback_list`; default: the queued items).
    Returns `{feedback_specs: [{id, type, title, severity, status, created_at}], count, total,
    truncated, problems}`."""
    _check_limit(limit)
    wanted = feedback_core.check_statuses(statuses) if statuses else {"queued"}
    items, problems = feedback_store(ctx.root).read_all()
    chosen = sorted((item for _path, item in items if item.status in wanted), key=lambda item: (item.created or "", item.id), reverse=True)
    page = chosen[:limit]
    return {
        "feedback_specs": [feedback_core.feedback_brief(item) for item in page],
        "count": len(page),
        "total": len(chosen),
        "truncated": len(chosen) > len(page),
        "problems": problems,
    }


# --------------------------------------------------------------------------- connect


def connect(
    ctx: Context,
    *,
    query: str | None = None,
    include_tasks: bool = True,
    id: str | None = None,
    to: Sequence[str] | None = None,
    remove: bool = False,
    both: bool = False,
) -> dict[str, Any]:
    """LoopFlow's associative memory (`loop_connect`), in one of two forms.

    With `query`: the insights matching it (summaries and their links), the items those link
    to (`via: "link"`), and matching tasks: `{query, insights, linked, tasks, suggestion}`.
    With `id` and `to`: links the insight to those items (any kind; `both` links target
    insights back, `remove` unlinks), as `link_insight` does; `loop_expand` with
    include_links shows them. Raises InvalidRequest unless exactly one form is given.
    """
    if bool(query and query.strip()) == bool(id):
        raise InvalidRequest("give either a query (find connections) or an id with `to` (make them)", details={"fields": ["query", "id", "to"]})
    if id:
        return link_insight(ctx, id, list(to or ()), remove=remove, both=both)
    from moss_files.index import query as search_query

    parsed = search_query.parse_query(query or "")
    now = ctx.now()

    def work(view: Any) -> dict[str, Any]:
        found = view.search(parsed, now=now, kinds=("insight",), limit=10)
        insights: list[dict[str, Any]] = []
        linked_ids: list[str] = []
        for hit in found.hits:
            links = view.links_of(hit)
            record = view.record(hit) or {}
            insights.append({"id": hit.id, "summary": hit.summary, "type": record.get("type"), "links": record.get("links", links)})
            linked_ids.extend(link for link in record.get("links", links) if link not in linked_ids)
        matched = {item["id"].casefold() for item in insights}
        targets = [link for link in linked_ids if link.casefold() not in matched]
        hits = view.lookup(targets) if targets else {}
        linked = [{"id": other.id, "kind": other.kind, "summary": other.summary, "via": "link"} for target in targets for other in hits.get(target, [])[:1]]
        tasks = []
        if include_tasks:
            tasks = [{"id": hit.id, "summary": hit.summary, "status": hit.status} for hit in view.search(parsed, now=now, kinds=("task",), limit=5).hits]
        return {"insights": insights, "linked": linked, "tasks": tasks}

    result = open_index(ctx).run(work) if parsed.has_text or parsed.filters else {"insights": [], "linked": [], "tasks": []}
    anything = result["insights"] or result["tasks"]
    return {
        "query": query,
        **result,
        "suggestion": "loop_expand the ids you need for full records" if anything else "no direct matches: try broader terms, or loop_scan",
    }

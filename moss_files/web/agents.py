"""The agent runtime's pages: its sessions, and one session's events.

Shell layer: gathered through the runtime's use cases (`agent.service.sessions` and `logs`, as
`moss agent sessions|logs --json` call them) and rendered with `moss_files.web.html`. A session
whose run died shows `interrupted`, as the command says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from moss_files.agent import service
from moss_files.foundation.context import Context
from moss_files.web.html import Html, Page, badge, clock, empty, esc, join, json_block, link, parse_time, problem_list, section, table, url, when

SESSIONS_SHOWN = 200
LIVE = ("agents",)


def agents_page(ctx: Context) -> Page:
    """The sessions, newest first."""
    found = service.sessions(ctx, limit=SESSIONS_SHOWN)
    body = [Html('<div class="page-head"><h1>Agent sessions</h1></div>')]
    if not found["sessions"]:
        body.append(empty('No agent sessions yet: `moss agent run "..."` starts one.'))
    else:
        body.append(render_sessions(found["sessions"]))
        if found["total"] > found["count"]:
            body.append(Html(f'<p class="more">{found["count"]:,} newest of {found["total"]:,}.</p>'))
    return Page("Agents", join(body), live=LIVE)


def render_sessions(rows: Sequence[Mapping[str, Any]]) -> Html:
    table_rows = []
    for row in rows:
        cost = row.get("cost_usd")
        table_rows.append(
            (
                link(url(f"/agents/{row['id']}"), row.get("title") or row["id"]),
                badge(row.get("status") or "", "status"),
                esc(row.get("model") or ""),
                f"{row.get('runs', 0):,}",
                f"{row.get('input_tokens', 0):,} in / {row.get('output_tokens', 0):,} out",
                f"${cost:.4f}" if isinstance(cost, int | float) else "unknown",
                when(row.get("updated")),
            )
        )
    return table(("session", "status", "model", "runs", "tokens", "cost", "updated"), table_rows, cls="sessions")


def session_page(ctx: Context, session_id: str) -> Page:
    """One session as a timeline: one line per event (its time, step, kind and what happened),
    the event's whole record on request; a torn line is listed as a problem."""
    found = service.logs(ctx, session=session_id)
    events = found["events"]
    title = next((str((e.get("data") or {}).get("title") or "") for e in events if e.get("kind") == "session.created"), "") or f"Session {found['session']}"
    body = [
        Html(f'<p class="crumbs">{link("/agents", "Agents")} › {esc(found["session"])}</p>'),
        Html(f"<h1>{esc(title)}</h1>"),
        render_totals(events),
        problem_list(found.get("problems") or []),
        section("Timeline", render_events(events), anchor="timeline", count=found["count"]),
    ]
    return Page(title, join(body), live=LIVE)


def render_totals(events: Sequence[Mapping[str, Any]]) -> Html:
    """The session's runs at a glance: how each ended, its steps, tokens and cost."""
    ends = [e for e in events if str(e.get("kind") or "").startswith("run.") and e.get("kind") != "run.started"]
    if not ends:
        return Html("")
    rows = []
    for event in ends:
        data = event.get("data") or {}
        cost = data.get("cost_usd")
        rows.append(
            (
                badge(str(event.get("kind"))[4:], "status"),
                when(event.get("ts")),
                f"{data.get('steps', '?')} steps, {data.get('tool_calls', 0)} tool calls"
                if "steps" in data
                else esc(data.get("error") or data.get("message") or ""),
                f"{data.get('input_tokens', 0):,} in / {data.get('output_tokens', 0):,} out" if "input_tokens" in data else "",
                f"${cost:.4f}" if isinstance(cost, int | float) else "",
            )
        )
    return table(("run", "ended", "work", "tokens", "cost"), rows, cls="runs")


def _short(value: Any, size: int = 140) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"


def event_line(event: Mapping[str, Any]) -> str:
    """What one event says, in a line (the timeline's text; the whole record is one click away)."""
    kind = str(event.get("kind") or "")
    data = event.get("data") or {}
    if not isinstance(data, Mapping):
        return _short(data)
    if kind == "session.created":
        return f"session started: {data.get('title') or ''} ({data.get('model') or 'model unknown'})"
    if kind == "run.started":
        return f"run started: {_short(data.get('prompt') or '')}"
    if kind == "prompt.built":
        return f"prompt of about {data.get('estimated_tokens', '?')} tokens ({data.get('messages', '?')} messages, {data.get('tools', 0)} tools)"
    if kind == "assistant.message":
        said = " ".join(str(block.get("text") or "") for block in data.get("content") or [] if isinstance(block, Mapping) and block.get("type") == "text")
        calls = [str(block.get("name")) for block in data.get("content") or [] if isinstance(block, Mapping) and block.get("type") == "tool_use"]
        return _short((said.strip() or "(no text)") + (f" → calls {', '.join(calls)}" if calls else ""))
    if kind == "tool.requested":
        return f"{data.get('tool') or data.get('name')} {_short(data.get('arguments') or {}, 100)}"
    if kind == "tool.invoked":
        return f"{data.get('tool')} running"
    if kind == "tool.succeeded":
        return f"{data.get('tool')} → {_short(data.get('output') or '', 100)} ({data.get('duration_ms', '?')} ms)"
    if kind.startswith("capability."):
        verdict = "granted" if data.get("granted") else "denied"
        return f"{data.get('scope') or data.get('tool') or data.get('capability')}: {verdict} ({data.get('rule') or data.get('reason') or ''})"
    if kind.startswith("run."):
        if "steps" in data:
            return f"run {kind[4:]}: {data.get('steps')} steps, {data.get('input_tokens', 0):,} in / {data.get('output_tokens', 0):,} out tokens"
        return f"run {kind[4:]}: {_short(data.get('error') or data.get('message') or data)}"
    scalars = [f"{key}: {value}" for key, value in data.items() if isinstance(value, str | int | float | bool) and key not in ("step", "call_id")]
    return _short(", ".join(scalars) or data)


def render_events(events: Sequence[Mapping[str, Any]]) -> Html:
    """The timeline: one line per event; opening it shows the event's record."""
    if not events:
        return empty("No events.")
    start = parse_time(events[0].get("ts"))
    items = []
    for event in events:
        data = event.get("data") or {}
        step = data.get("step") if isinstance(data, Mapping) else None
        at = parse_time(event.get("ts"))
        offset = f"+{(at - start).total_seconds():.1f} s" if at and start else ""
        kind = str(event.get("kind") or "")
        family = kind.split(".")[0]
        failed = " failed" if kind.endswith(("failed", "denied", "interrupted", "cancelled")) else ""
        items.append(
            f'<li class="event {esc(family)}{failed}" data-kind="{esc(kind)}"><details><summary>'
            f'<span class="at">{clock(event.get("ts"))} <span class="muted">{esc(offset)}</span></span>'
            f'<span class="step">{esc(f"step {step}" if step else "")}</span>'
            f"{badge(kind, 'event')}"
            f'<span class="what">{esc(event_line(event))}</span></summary>'
            f"{json_block({'id': event.get('id'), 'run': event.get('run'), **(data if isinstance(data, Mapping) else {'data': data})})}</details></li>"
        )
    return Html(f'<ol class="timeline">{"".join(items)}</ol>')

"""The agent runtime's pages: its sessions, and one session's events.

Shell layer: gathered through the runtime's use cases (`agent.service.sessions` and `logs`, as
`moss agent sessions|logs --json` call them) and rendered with `moss_files.web.html`. A session
whose run died shows `interrupted`, as the command says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from moss_files.agent import service
from moss_files.foundation.context import Context
from moss_files.web.html import Html, Page, badge, empty, esc, join, json_block, link, problem_list, section, table, url, when

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
    """One session's events in order (a torn line is listed as a problem)."""
    found = service.logs(ctx, session=session_id)
    body = [
        Html(f'<p class="crumbs">{link("/agents", "Agents")} › {esc(found["session"])}</p>'),
        Html(f"<h1>Session {esc(found['session'])}</h1>"),
        problem_list(found.get("problems") or []),
        section("Events", render_events(found["events"]), count=found["count"]),
    ]
    return Page(f"Session {found['session']}", join(body), live=LIVE)


def render_events(events: Sequence[Mapping[str, Any]]) -> Html:
    if not events:
        return empty("No events.")
    rows = [
        (
            when(event.get("ts")),
            badge(event.get("kind") or "", "event"),
            Html(f"<code>{esc((event.get('run') or '')[-8:])}</code>"),
            json_block(event.get("data") or {}),
        )
        for event in events
    ]
    return table(("when", "event", "run", "data"), rows, cls="events")

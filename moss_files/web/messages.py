"""The messages page: each sleeve's inbox and outbox, and the dead letters with their reasons.

Shell layer: gathered through needlecast's public names (`list_sleeves`, `list_inbox`,
`list_outbox`, `list_dead_letters`, `holds_sleeves`), as `needlecast sleeves|inbox|outbox|
dead-letters --json` call them, and rendered with `moss_files.web.html`. A workspace that holds
sleeves (an envoy root) shows each local sleeve; any other shows its own mailbox. Reading a
page never marks a message read: only `needlecast read` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import needlecast
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError, NotFound, error_body
from moss_files.web.html import Html, Page, badge, definition_list, empty, error_notice, esc, join, section, table, url, when
from moss_files.web.markdown import render_markdown

LIVE = ("messages",)


def sleeves(ctx: Context) -> list[dict[str, Any]]:
    """The sleeves the page can show: `{name, path, url, ok, problem?}`; the workspace alone
    (named as it sends) unless it is an envoy root."""
    if needlecast.holds_sleeves(ctx.root):
        return list(needlecast.list_sleeves(ctx)["sleeves"])
    return [{"name": ctx.sleeve or ctx.root.name, "origin": "workspace", "path": str(ctx.root), "url": None, "ok": True}]


def sleeve_folders(ctx: Context) -> list[Path]:
    """The workspaces of the local sleeves (for the file watcher)."""
    if not needlecast.holds_sleeves(ctx.root):
        return []
    return [Path(row["path"]) for row in needlecast.list_sleeves(ctx)["sleeves"] if row.get("path")]


def messages_page(ctx: Context, *, sleeve: str | None = None) -> Page:
    """The chosen sleeve's inbox, outbox and dead letters (the first sleeve's when none is
    chosen), with every sleeve named at the top."""
    try:
        known = sleeves(ctx)
    except MossError as err:  # a broken sleeve registry: say so, show what can be shown
        return Page("Messages", join([Html("<h1>Messages</h1>"), error_notice(error_body(err)["error"])]), live=LIVE, status=err.status)
    chosen = next((row for row in known if row["name"] == sleeve), None) if sleeve else (known[0] if known else None)
    if sleeve and chosen is None:
        raise NotFound(f"no sleeve named {sleeve!r} here", details={"sleeve": sleeve, "sleeves": [row["name"] for row in known]})
    tabs = join(
        [
            Html(
                f'<a href="{esc(url("/messages", {"sleeve": row["name"]}))}"{" aria-current=page" if chosen and row["name"] == chosen["name"] else ""}>{esc(row["name"])}</a>'
            )
            for row in known
        ],
        " ",
    )
    body = [
        Html('<div class="page-head"><h1>Messages</h1></div>'),
        Html(f'<nav class="tabs" aria-label="sleeves">{tabs}</nav>') if len(known) > 1 else Html(""),
    ]
    if chosen is None:
        body.append(empty("No sleeves."))
    elif not chosen.get("path"):
        where = chosen.get("url") or ""
        body.append(empty(f"{chosen['name']} lives on another host ({where}); its sidecar serves its mailbox."))
    else:
        body.append(render_sleeve(Context(Path(chosen["path"]), clock=ctx.clock, config=ctx.config, actor=ctx.actor, sleeve=chosen["name"]), chosen))
    return Page("Messages", join(body), live=LIVE)


def render_sleeve(ctx: Context, sleeve: Mapping[str, Any]) -> Html:
    """One sleeve's mailbox: inbox, outbox, dead letters, and the blocks that cannot be read."""
    parts = [Html(f'<h2 class="sleeve" data-sleeve="{esc(sleeve["name"])}">{esc(sleeve["name"])} <span class="muted">{esc(sleeve.get("path"))}</span></h2>')]
    if sleeve.get("problem"):
        parts.append(error_notice(sleeve["problem"]))
    try:
        inbox = needlecast.list_inbox(ctx)
        outbox = needlecast.list_outbox(ctx)
        dead = needlecast.list_dead_letters(ctx)
    except MossError as err:
        parts.append(error_notice(error_body(err)["error"]))
        return join(parts)
    unread = sum(1 for row in inbox["messages"] if not row.get("read"))
    parts.append(section("Inbox", render_messages(inbox["messages"], box="inbox"), anchor="inbox", count=len(inbox["messages"])))
    if unread:
        parts.append(Html(f'<p class="muted">{unread:,} unread (reading here does not mark them read).</p>'))
    outbox_body = render_messages(outbox["messages"], box="outbox")
    if outbox.get("unsettled"):
        outbox_body = join([outbox_body, Html('<p class="muted">The outbox\'s end is still being written.</p>')])
    parts.append(section("Outbox", outbox_body, anchor="outbox", count=len(outbox["messages"])))
    parts.append(section("Dead letters", render_dead_letters(dead["dead_letters"]), anchor="dead-letters", count=len(dead["dead_letters"])))
    problems = [*inbox.get("problems", []), *outbox.get("problems", [])]
    if problems:
        parts.append(section("Blocks that cannot be read", render_block_problems(problems), count=len(problems)))
    return join(parts)


def render_messages(rows: Sequence[Mapping[str, Any]], *, box: str) -> Html:
    """Messages, newest last as the mailbox holds them, each with its header and body."""
    if not rows:
        return empty(f"The {box} is empty.")
    items = []
    for row in rows:
        message = row.get("message") or {}
        header = definition_list(
            [
                ("from", message.get("from")),
                ("to", ", ".join(message.get("to") or [])),
                ("thread", message.get("thread")),
                ("type", badge(message["type"], "type") if message.get("type") else None),
                ("time", when(message.get("time"))),
                ("where", f"{row.get('source')}:{row.get('line')}" if row.get("line") else row.get("source")),
            ]
        )
        state = " unread" if box == "inbox" and not row.get("read") else ""
        items.append(
            f'<li class="message{state}" data-message="{esc(row.get("key"))}"><div class="message-id"><code>{esc(row.get("key"))}</code></div>'
            f"{header}{render_markdown(message.get('body'))}</li>"
        )
    return Html(f'<ol class="messages">{"".join(items)}</ol>')


def render_dead_letters(rows: Sequence[Mapping[str, Any]]) -> Html:
    """Dead letters with the code and reason each was refused for."""
    if not rows:
        return empty("No dead letters.")
    table_rows = [
        (
            Html(f"<code>{esc(row.get('id') or '')}</code>"),
            badge(row.get("code") or "UNKNOWN", "code"),
            esc(row.get("reason") or ""),
            esc(", ".join(row.get("recipients") or [])),
            when(row.get("dead_at")),
            Html(f"<code>{esc(row.get('path'))}</code>"),
        )
        for row in rows
    ]
    return table(("message", "code", "reason", "recipients", "when", "file"), table_rows, cls="dead-letters")


def render_block_problems(rows: Sequence[Mapping[str, Any]]) -> Html:
    table_rows = []
    for row in rows:
        problem = row.get("problem") or {}
        table_rows.append((f"{row.get('source')}:{row.get('line')}", badge(problem.get("code", "PROBLEM"), "code"), esc(problem.get("message", ""))))
    return table(("where", "code", "problem"), table_rows)

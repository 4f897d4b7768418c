"""The messages page: each sleeve's inbox and outbox, its threads, and the dead letters with
their reasons.

Shell layer: gathered through needlecast's public names (`list_sleeves`, `list_inbox`,
`list_outbox`, `list_dead_letters`, `holds_sleeves`, and `iter_messages` for what a sleeve
sent), as `needlecast sleeves|inbox|outbox|dead-letters --json` call them, and rendered with
`moss_files.web.html`. A workspace that holds sleeves (an envoy root) shows each local sleeve,
opening on the one with the most unread mail; any other shows its own mailbox. Reading a page
never marks a message read: only `needlecast read` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import needlecast
from moss_files.foundation.context import Context
from moss_files.foundation.errors import MossError, NotFound, error_body
from moss_files.web.html import Html, Page, badge, empty, error_notice, esc, join, section, table, url, when
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


def _sleeve_context(ctx: Context, row: Mapping[str, Any]) -> Context:
    return Context(Path(row["path"]), clock=ctx.clock, config=ctx.config, actor=ctx.actor, sleeve=row["name"])


def mail_counts(ctx: Context, known: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """Each local sleeve's (messages in its inbox and outbox, unread in its inbox); a mailbox
    that cannot be read counts nothing here (its page says why)."""
    counts: dict[str, tuple[int, int]] = {}
    for row in known:
        if not row.get("path"):
            continue
        try:
            sleeve = _sleeve_context(ctx, row)
            inbox = needlecast.list_inbox(sleeve)["messages"]
            outbox = needlecast.list_outbox(sleeve)["messages"]
        except MossError:
            continue
        counts[row["name"]] = (len(inbox) + len(outbox), sum(1 for entry in inbox if not entry.get("read")))
    return counts


def messages_page(ctx: Context, *, sleeve: str | None = None, thread: str | None = None) -> Page:
    """The chosen sleeve's inbox, outbox and dead letters, with every sleeve named at the top
    with its unread count. Without a choice, the sleeve with the most unread mail (else the
    first that has any mail, else the first). With `thread`, that thread's messages only, in
    time order."""
    try:
        known = sleeves(ctx)
    except MossError as err:  # a broken sleeve registry: say so, show what can be shown
        return Page("Messages", join([Html("<h1>Messages</h1>"), error_notice(error_body(err)["error"])]), live=LIVE, status=err.status)
    counts = mail_counts(ctx, known)
    if sleeve:
        chosen = next((row for row in known if row["name"] == sleeve), None)
        if chosen is None:
            raise NotFound(f"no sleeve named {sleeve!r} here", details={"sleeve": sleeve, "sleeves": [row["name"] for row in known]})
    else:
        ranked = sorted(known, key=lambda row: (-counts.get(row["name"], (0, 0))[1], counts.get(row["name"], (0, 0))[0] == 0))
        chosen = ranked[0] if ranked else None
    tabs = []
    for row in known:
        total, unread = counts.get(row["name"], (0, 0))
        badge_text = f' <span class="unread" aria-label="{unread} unread">{unread:,}</span>' if unread else ""
        current = " aria-current=page" if chosen and row["name"] == chosen["name"] else ""
        empty_mark = ' class="quiet"' if not total else ""
        tabs.append(Html(f'<a href="{esc(url("/messages", {"sleeve": row["name"]}))}"{current}{empty_mark}>{esc(row["name"])}{badge_text}</a>'))
    body = [
        Html('<div class="page-head"><h1>Messages</h1></div>'),
        Html(f'<nav class="tabs" aria-label="sleeves">{join(tabs, " ")}</nav>') if len(known) > 1 else Html(""),
    ]
    if chosen is None:
        body.append(empty("No sleeves."))
    elif not chosen.get("path"):
        where = chosen.get("url") or ""
        body.append(empty(f"{chosen['name']} lives on another host ({where}); its sidecar serves its mailbox."))
    else:
        body.append(render_sleeve(_sleeve_context(ctx, chosen), chosen, thread=thread))
    return Page("Messages", join(body), live=LIVE)


def render_sleeve(ctx: Context, sleeve: Mapping[str, Any], *, thread: str | None = None) -> Html:
    """One sleeve's mailbox: inbox, outbox, dead letters, and the blocks that cannot be read
    (with `thread`, that thread's messages, received and sent, in time order)."""
    parts = [
        Html(f'<h2 class="sleeve" data-sleeve="{esc(sleeve["name"])}">{esc(sleeve["name"])} <span class="muted where">{esc(sleeve.get("path"))}</span></h2>')
    ]
    if sleeve.get("problem"):
        parts.append(error_notice(sleeve["problem"]))
    try:
        inbox = needlecast.list_inbox(ctx)
        outbox = needlecast.list_outbox(ctx)
        dead = needlecast.list_dead_letters(ctx)
    except MossError as err:
        parts.append(error_notice(error_body(err)["error"]))
        return join(parts)
    # What the sleeve sent and the router delivered is in its archive: a thread reads whole.
    sent = [needlecast.entry_to_dict(entry) for box, entry in needlecast.iter_messages(ctx.root) if box == "archive"]
    threads = thread_titles([*inbox["messages"], *outbox["messages"], *sent])
    if thread:
        rows = [(row, "inbox") for row in inbox["messages"]] + [(row, "outbox") for row in outbox["messages"]] + [(row, "sent") for row in sent]
        chosen = sorted(
            ((row, box) for row, box in rows if (row.get("message") or {}).get("thread") == thread),
            key=lambda pair: str((pair[0].get("message") or {}).get("time") or ""),
        )
        back = f'<a href="{esc(url("/messages", {"sleeve": sleeve["name"]}))}">all of {esc(sleeve["name"])}\'s mail</a>'
        title = threads.get(thread, thread)
        items = "".join(render_message(row, box=box, sleeve=sleeve["name"], threads=threads) for row, box in chosen)
        listing = Html(f'<ol class="messages">{items}</ol>') if items else empty("No message of this thread here.")
        parts.append(section(f"Thread: {title}", join([listing, Html(f'<p class="more">{back}</p>')]), anchor="thread", count=len(chosen)))
        return join(parts)
    unread = sum(1 for row in inbox["messages"] if not row.get("read"))
    note = Html(f'<p class="muted">{unread:,} unread (reading here does not mark them read).</p>') if unread else Html("")
    parts.append(
        section(
            "Inbox",
            join([note, render_messages(inbox["messages"], box="inbox", sleeve=sleeve["name"], threads=threads)]),
            anchor="inbox",
            count=len(inbox["messages"]),
        )
    )
    outbox_body = render_messages(outbox["messages"], box="outbox", sleeve=sleeve["name"], threads=threads)
    if outbox.get("unsettled"):
        outbox_body = join([outbox_body, Html('<p class="muted">The outbox\'s end is still being written.</p>')])
    parts.append(section("Outbox", outbox_body, anchor="outbox", count=len(outbox["messages"])))
    parts.append(section("Dead letters", render_dead_letters(dead["dead_letters"]), anchor="dead-letters", count=len(dead["dead_letters"])))
    problems = [*inbox.get("problems", []), *outbox.get("problems", [])]
    if problems:
        parts.append(section("Blocks that cannot be read", render_block_problems(problems), count=len(problems)))
    return join(parts)


def thread_titles(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each thread's name as a person reads it: the first line of its earliest message here,
    shortened (the thread's id when that message has no text)."""
    first: dict[str, tuple[str, str]] = {}
    for row in rows:
        message = row.get("message") or {}
        ident = message.get("thread")
        if not ident:
            continue
        stamp = str(message.get("time") or "")
        if ident not in first or stamp < first[ident][0]:
            first[ident] = (stamp, str(message.get("body") or ""))
    titles = {}
    for ident, (_stamp, text) in first.items():
        line = next((part.strip(" #*>-") for part in text.splitlines() if part.strip(" #*>-")), "")
        titles[ident] = (line[:60].rstrip() + "…" if len(line) > 60 else line) or ident
    return titles


def render_message(row: Mapping[str, Any], *, box: str, sleeve: str, threads: Mapping[str, str]) -> str:
    """One message: a line saying who wrote to whom, when, of what type and in which thread;
    its body; where it is kept, on request."""
    message = row.get("message") or {}
    to = ", ".join(message.get("to") or [])
    ident = message.get("thread")
    thread = (
        f' · <a class="thread" href="{esc(url("/messages", {"sleeve": sleeve, "thread": ident}))}" title="thread {esc(ident)}">{esc(threads.get(ident, ident))}</a>'
        if ident
        else ""
    )
    kind = f" {badge(message['type'], 'type')}" if message.get("type") and message["type"] not in ("note", "message") else ""
    state = " unread" if box == "inbox" and not row.get("read") else ""
    where = f"{row.get('source')}:{row.get('line')}" if row.get("line") else row.get("source")
    head = (
        f'<div class="message-head"><b>{esc(message.get("from"))}</b> <span class="muted">→</span> {esc(to)}'
        f'<span class="muted"> · {when(message.get("time"))}</span>{kind}{thread}</div>'
    )
    more = f'<details class="message-more"><summary>details</summary><code>{esc(row.get("key"))}</code> <span class="muted">{esc(where)}</span></details>'
    return f'<li class="message{state}" data-message="{esc(row.get("key"))}">{head}{render_markdown(message.get("body"))}{more}</li>'


def render_messages(rows: Sequence[Mapping[str, Any]], *, box: str, sleeve: str = "", threads: Mapping[str, str] | None = None) -> Html:
    """Messages, newest last as the mailbox holds them."""
    if not rows:
        return empty(f"The {box} is empty.")
    items = "".join(render_message(row, box=box, sleeve=sleeve, threads=threads or {}) for row in rows)
    return Html(f'<ol class="messages">{items}</ol>')


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

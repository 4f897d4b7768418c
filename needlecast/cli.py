"""The `needlecast` command line. Entry layer: parse input, call the library, render output.

Sleeve commands (`send`, `inbox`, `read`, `outbox`, `dead-letters`, `init`) act on the
workspace found from the current directory (or --root) and touch only it. Envoy commands
(`route`, `sidecar`, `sleeves`) act on the envoy root: --root, else the current directory
when it holds sleeves, else the enclosing workspace.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.cli_support import JsonOpt, RootOpt, emit, new_app, note, read_stdin_if, reporting
from moss_files.errors import InvalidRequest, NotFound
from moss_files.ids import IdSource, format_time, system_clock
from moss_files.workspace import find_workspace

from needlecast import mailbox
from needlecast import message as msg
from needlecast.mailbox import Mailbox
from needlecast.router import Router, report_to_dict
from needlecast.routing import entry_to_dict
from needlecast.sidecar import DEFAULT_PORT, Sidecar
from needlecast.sleeves import load_directory, registry_path, sleeve_to_dict

app = new_app("needlecast: messages between sleeves, routed exactly once, as markdown files in git.")

SLEEVE_ENV = "NEEDLECAST_SLEEVE"
TOKEN_ENV = "NEEDLECAST_TOKEN"
_STATUS_EXIT = {400: 2, 404: 3, 422: 4, 409: 5}


def _workspace(root: Path | None) -> Path:
    return find_workspace(explicit=root)


def _envoy_root(root: Path | None) -> Path:
    if root is not None and str(root):
        return find_workspace(explicit=root)
    here = Path.cwd()
    if registry_path(here).is_file() or next(mailbox.iter_mailboxes(here), None) is not None:
        return here.resolve()
    return find_workspace()


def _own_name(root: Path, given: str | None) -> str:
    return given or os.environ.get(SLEEVE_ENV) or root.name


def _entry_line(entry: Any, read: bool | None = None) -> str:
    if entry.message is None:
        code = entry.problem.code if entry.problem is not None else "MESSAGE_INVALID"
        return f"!  {entry.key}  {entry.source.name}:{entry.line} [{code}] {entry.problem.message if entry.problem else ''}"
    m = entry.message
    flag = "" if read is None else ("   " if read else "*  ")
    first = m.body.strip().split("\n", 1)[0][:70]
    return f"{flag}{entry.key}  {m.time or '-'}  {m.sender or '?'} -> {', '.join(m.to) or '?'}  [{m.type or '-'}]{'  #' + m.thread if m.thread else ''}  {first}"


@app.command("init")
def init(
    layout: Annotated[str, typer.Option("--layout", help="v1: inbox.md/outbox.md; v2: one file per message.")] = "v1",
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create this workspace's .needlecast/ folder (never overwrites a file)."""
    with reporting(as_json):
        base = root.resolve() if root is not None else Path.cwd().resolve()
        box = mailbox.init_mailbox(base, layout)
    emit({"ok": True, "path": str(box.dir), "layout": box.layout()}, as_json, text=f"{box.dir} ({box.layout()})")


@app.command("send")
def send(
    body: Annotated[str | None, typer.Argument(help="Message text; '-' or nothing reads stdin.", show_default=False)] = None,
    to: Annotated[list[str] | None, typer.Option("--to", help="Recipient: a sleeve name, 'all' or 'envoy'; repeat or use commas.", show_default=False)] = None,
    type_: Annotated[str | None, typer.Option("--type", help="task, question, response, milestone, directive, blocked, done, ...", show_default=False)] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Thread name.", show_default=False)] = None,
    reply_to: Annotated[str | None, typer.Option("--reply-to", help="Id of an inbox message this answers (sets thread, and --to if omitted).", show_default=False)] = None,
    sender: Annotated[str | None, typer.Option("--from", help=f"This sleeve's name (default: env {SLEEVE_ENV}, else the folder name).", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a message to this sleeve's outbox; the router delivers it."""
    with reporting(as_json):
        base = _workspace(root)
        box = Mailbox(base)
        recipients = [name.strip() for item in (to or []) for name in item.split(",") if name.strip()]
        extra: dict[str, Any] = {}
        if reply_to:
            original = _find_inbox_entry(box, reply_to)
            extra["reply_to"] = original.key
            assert original.message is not None
            thread = thread or original.message.thread or original.key
            if not recipients and original.message.sender:
                recipients = [original.message.sender]
            type_ = type_ or "response"
        if not recipients:
            raise InvalidRequest("say who the message is for with --to")
        text = read_stdin_if(body)
        now = system_clock()
        message = msg.Message(
            id=f"msg-{IdSource().ulid()}",
            sender=_own_name(base, sender),
            to=tuple(recipients),
            thread=thread,
            type=type_ or "message",
            time=format_time(now),
            body=text,
            extra=extra,
        )
        path = mailbox.append_outbox(box, message, now)
    emit({"ok": True, "message": msg.message_to_dict(message), "path": str(path)}, as_json, text=message.id)


def _find_inbox_entry(box: Mailbox, key: str) -> Any:
    matches = [entry for entry in mailbox.read_inbox(box) if entry.message is not None and entry.key == key]
    if not matches:
        raise NotFound(f"no message {key!r} in the inbox", path=box.dir)
    if len(matches) > 1:
        senders = sorted({m.message.sender or "?" for m in matches})
        raise InvalidRequest(f"id {key!r} is used by several senders: {', '.join(senders)}", code="AMBIGUOUS_ADDRESSING")
    return matches[0]


@app.command("inbox")
def inbox(
    unread: Annotated[bool, typer.Option("--unread", help="Only messages not yet marked read.")] = False,
    sender: Annotated[str | None, typer.Option("--from", help="Only messages from this sleeve.", show_default=False)] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Only messages in this thread.", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List this sleeve's inbox (unread ones marked with *)."""
    with reporting(as_json):
        box = Mailbox(_workspace(root))
        marks = mailbox.read_marks(box)
        rows, problems, lines = [], [], []
        for entry in mailbox.read_inbox(box):
            if entry.message is None:
                problems.append(entry_to_dict(entry))
                lines.append(_entry_line(entry))
                continue
            read = (entry.message.sender or "", entry.key) in marks
            if (unread and read) or (sender and entry.message.sender != sender) or (thread and entry.message.thread != thread):
                continue
            rows.append({**entry_to_dict(entry), "read": read})
            lines.append(_entry_line(entry, read))
    emit({"workspace": str(box.root), "layout": box.layout(), "messages": rows, "problems": problems}, as_json, text="\n".join(lines))


@app.command("read")
def read(
    key: Annotated[str, typer.Argument(help="Message id (as listed by `needlecast inbox`).", show_default=False)],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one inbox message and mark it read (in read.log, append-only)."""
    with reporting(as_json):
        box = Mailbox(_workspace(root))
        entry = _find_inbox_entry(box, key)
        marks = mailbox.read_marks(box)
        ident = (entry.message.sender or "", entry.key)
        if ident not in marks:
            mailbox.mark_read(box, ident[0], ident[1], system_clock())
    m = entry.message
    text = "\n".join(
        [f"id: {m.id or entry.key}", f"from: {m.sender}", f"to: {', '.join(m.to)}"]
        + [f"{k}: {v}" for k, v in (("thread", m.thread), ("type", m.type), ("time", m.time)) if v]
        + ["", m.body.rstrip("\n")]
    )
    emit({**entry_to_dict(entry), "read": True}, as_json, text=text)


@app.command("outbox")
def outbox(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List messages waiting in this sleeve's outbox."""
    with reporting(as_json):
        base = _workspace(root)
        box = Mailbox(base)
        scan = mailbox.read_outbox(box, _own_name(base, None))
    rows = [entry_to_dict(e) for e in scan.entries if e.message is not None]
    problems = [entry_to_dict(e) for e in scan.entries if e.message is None]
    emit(
        {"workspace": str(box.root), "layout": box.layout(), "messages": rows, "problems": problems, "unsettled": scan.unsettled},
        as_json,
        text="\n".join(_entry_line(e) for e in scan.entries),
    )


@app.command("dead-letters")
def dead_letters(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List messages the router could not deliver (kept byte for byte) and why."""
    with reporting(as_json):
        box = Mailbox(_workspace(root))
        letters = mailbox.read_dead_letters(box)
    rows = [{"path": str(d.path), **{k: v for k, v in d.meta.items()}, "bytes": len(d.raw)} for d in letters]
    emit({"workspace": str(box.root), "dead_letters": rows}, as_json, text="\n".join(f"{r.get('dead_at', '-')}  [{r.get('code', '?')}]  {r.get('id', '?')}  {r.get('reason', '')}" for r in rows))


@app.command("sleeves")
def sleeves(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List the sleeves the envoy routes between (exit 3 if one is unreachable)."""
    with reporting(as_json):
        directory = load_directory(_envoy_root(root))
    rows = [sleeve_to_dict(s) for s in directory.sleeves.values()]
    lines = [f"{'ok ' if r['ok'] else 'ERR'}  {r['name']:<20} {r['url'] or r['path']}" + (f"  [{r['problem']['code']}] {r['problem']['message']}" if not r["ok"] else "") for r in rows]
    emit({"root": str(directory.root), "sleeves": rows}, as_json, text="\n".join(lines))
    broken = [r for r in rows if not r["ok"]]
    if broken:
        if not as_json:
            note(f"{len(broken)} sleeve(s) cannot be reached")
        raise typer.Exit(3)


@app.command("route")
def route(
    once: Annotated[bool, typer.Option("--once", help="Route every outbox once and exit.")] = False,
    poll: Annotated[bool, typer.Option("--poll", help="Watch by polling instead of inotify.")] = False,
    sweep: Annotated[float, typer.Option("--sweep", help="Seconds between full sweeps.")] = 30.0,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Deliver outbox messages to inboxes (once, or continuously while watching)."""
    with reporting(as_json):
        base = _envoy_root(root)
        if not once:
            runner = Sidecar(base, serve_http=False, route=True, poll=poll, sweep_seconds=sweep, environ=os.environ, log=note)
            raise typer.Exit(runner.run())
        report = Router(base, environ=os.environ, log=note).route_all()
    data = report_to_dict(report)
    text = f"delivered {report.delivered}, archived {report.archived}, dead letters {report.dead_letters}, waiting {report.pending}"
    emit(data, as_json, text=text)
    troubles = report.problems + report.held
    for trouble in troubles if not as_json else []:
        note(f"error[{trouble.get('code')}] {trouble.get('sleeve', '')}: {trouble.get('message')}")
    if troubles:
        raise typer.Exit(max(_STATUS_EXIT.get(int(t.get("status", 500)), 1) for t in troubles))


@app.command("sidecar")
def sidecar(
    host: Annotated[str, typer.Option("--host", help="Address to bind; anything but loopback needs --token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port (0 picks a free one).")] = DEFAULT_PORT,
    token: Annotated[str | None, typer.Option("--token", envvar=TOKEN_ENV, help=f"Bearer token clients must send (env {TOKEN_ENV}).", show_default=False)] = None,
    poll: Annotated[bool, typer.Option("--poll", help="Watch by polling instead of inotify.")] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", help="Seconds between polls.")] = 0.5,
    sweep: Annotated[float, typer.Option("--sweep", help="Seconds between full safety sweeps.")] = 30.0,
    name: Annotated[str | None, typer.Option("--name", help=f"Sleeve name reported by /status (default: env {SLEEVE_ENV}, else the folder name).", show_default=False)] = None,
    route_mode: Annotated[bool | None, typer.Option("--route/--no-route", help="Route outboxes (default: when the root holds sleeves).", show_default=False)] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the sidecar: watch and route outboxes, serve /health, /status, /outbox and /inbox."""
    with reporting(as_json):
        base = _envoy_root(root)
        runner = Sidecar(
            base,
            name=_own_name(base, name),
            host=host,
            port=port,
            token=token,
            route=route_mode,
            poll=poll,
            poll_interval=poll_interval,
            sweep_seconds=sweep,
            environ=os.environ,
            log=note,
        )
        code = runner.run()
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except BrokenPipeError:  # `needlecast inbox | head`
        sys.stderr.close()


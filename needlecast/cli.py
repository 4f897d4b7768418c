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

from moss_files.cli.support import JsonOpt, RootOpt, emit, new_app, note, read_stdin_if, reporting
from moss_files.foundation.workspace import find_workspace

from needlecast import mailbox, service
from needlecast import message as msg
from needlecast.mailbox import Mailbox
from needlecast.router import report_to_dict
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
        text = read_stdin_if(body) if to or reply_to else ""
        message, path = service.send(base, text, to or [], sender=_own_name(base, sender), type_=type_, thread=thread, reply_to=reply_to)
    emit({"ok": True, "message": msg.message_to_dict(message), "path": str(path)}, as_json, text=message.id)


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
        base = _workspace(root)
        listing = service.list_inbox(base, unread=unread, sender=sender, thread=thread)
    rows = [{**entry_to_dict(entry), "read": read} for entry, read in listing.messages]
    lines = [_entry_line(entry) for entry in listing.problems] + [_entry_line(entry, read) for entry, read in listing.messages]
    data = {"workspace": str(base), "layout": listing.layout, "messages": rows, "problems": [entry_to_dict(e) for e in listing.problems]}
    emit(data, as_json, text="\n".join(lines))


@app.command("read")
def read(
    key: Annotated[str, typer.Argument(help="Message id (as listed by `needlecast inbox`).", show_default=False)],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one inbox message and mark it read (in read.log, append-only)."""
    with reporting(as_json):
        entry = service.read_message(_workspace(root), key)
    assert entry.message is not None
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
        scan = service.list_outbox(base, _own_name(base, None))
    rows = [entry_to_dict(e) for e in scan.entries if e.message is not None]
    problems = [entry_to_dict(e) for e in scan.entries if e.message is None]
    emit(
        {"workspace": str(base), "layout": Mailbox(base).layout(), "messages": rows, "problems": problems, "unsettled": scan.unsettled},
        as_json,
        text="\n".join(_entry_line(e) for e in scan.entries),
    )


@app.command("dead-letters")
def dead_letters(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List messages the router could not deliver (kept byte for byte) and why."""
    with reporting(as_json):
        base = _workspace(root)
        letters = service.list_dead_letters(base)
    rows = [{"path": str(d.path), **d.meta, "bytes": len(d.raw)} for d in letters]
    emit({"workspace": str(base), "dead_letters": rows}, as_json, text="\n".join(f"{r.get('dead_at', '-')}  [{r.get('code', '?')}]  {r.get('id', '?')}  {r.get('reason', '')}" for r in rows))


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
        report = service.route_once(base, environ=os.environ, log=note)
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


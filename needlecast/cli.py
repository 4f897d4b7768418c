"""The `needlecast` command line. Entry layer: parse input, call a `needlecast` use case,
render the dict it returns (with --json, the same the MCP tool returns).

Sleeve commands (`send`, `inbox`, `read`, `wait`, `outbox`, `dead-letters`, `init`) act on the
workspace found from the current directory (or --root) and touch only it. Envoy commands
(`route`, `sidecar`, `sleeves`) act on the envoy root: --root, else the current directory
when it holds sleeves, else the enclosing workspace; `route` and `sleeves` refuse a sleeve of
an envoy root above (NOT_ENVOY_ROOT), whose messages wait for that envoy's router. The use cases resolve through the
package's lazy names, so a sleeve's commands never load the router or the HTTP server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

import needlecast
from moss_files.cli.support import JsonOpt, RootOpt, VersionOpt, default_port, emit, new_app, note, read_stdin_if, reporting, warn_if_clone_lacks_merge_driver
from moss_files.foundation import structured
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError, NotFound
from moss_files.foundation.workspace import current_folder, find_workspace

app = new_app("needlecast: messages between sleeves, routed exactly once, as markdown files in git.")


@app.callback()
def _needlecast(version: VersionOpt = False) -> None:
    """The group's own options (`--version`); its help is the app's."""


SLEEVE_ENV = "NEEDLECAST_SLEEVE"
TOKEN_ENV = "NEEDLECAST_TOKEN"
DEFAULT_PORT_ENV = "NEEDLECAST_DEFAULT_PORT"  # moves the port `needlecast sidecar` starts its scan from
TOKEN_FILE_ENV = "NEEDLECAST_TOKEN_FILE"
_STATUS_EXIT = {400: 2, 404: 3, 422: 4, 409: 5}


def _context(root: Path, sleeve: str | None = None) -> Context:
    """The context of the workspace (or envoy root) `root`, sending as `sleeve`, else as the
    sleeve NEEDLECAST_SLEEVE names, else as the folder's name."""
    return Context(root, sleeve=sleeve or os.environ.get(SLEEVE_ENV) or None, notify=note)


def _workspace(root: Path | None, sleeve: str | None = None) -> Context:
    return _context(find_workspace(explicit=root), sleeve)


def _envoy(root: Path | None, sleeve: str | None = None) -> Context:
    if root is not None and str(root):
        return _context(find_workspace(explicit=root), sleeve)
    here = current_folder()
    return _context(here.resolve() if needlecast.holds_sleeves(here) else find_workspace(), sleeve)


def _entry_line(entry: dict[str, Any], read: bool | None = None) -> str:
    """One listed entry: a message, or (with `!`) a block that is not one."""
    m = entry.get("message")
    if m is None:
        problem = entry.get("problem")
        code = problem["code"] if problem is not None else "MESSAGE_INVALID"
        return f"!  {entry['key']}  {entry['source']}:{entry['line']} [{code}] {problem['message'] if problem else ''}"
    flag = "" if read is None else ("   " if read else "*  ")
    first = m["body"].strip().split("\n", 1)[0][:70]
    thread = "  #" + m["thread"] if m["thread"] else ""
    return f"{flag}{entry['key']}  {m['time'] or '-'}  {m['from'] or '?'} -> {', '.join(m['to']) or '?'}  [{m['type'] or '-'}]{thread}  {first}"


def _in_file_order(data: dict[str, Any]) -> list[dict[str, Any]]:
    """An outbox's messages and problems merged back into the order the outbox holds them:
    `outbox.md`'s blocks by line, then the files of `outbox/` by name."""
    return sorted([*data["messages"], *data["problems"]], key=lambda e: (0, e["line"], "") if e["source"] == "outbox.md" else (1, 0, e["source"]))


@app.command("init")
def init(
    layout: Annotated[str, typer.Option("--layout", help="v1: inbox.md/outbox.md; v2: one file per message.")] = "v1",
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create this workspace's .needlecast/ folder (never overwrites a file)."""
    with reporting(as_json):
        data = needlecast.init_workspace(_context(root.resolve() if root is not None else current_folder().resolve()), layout=layout)
    emit(data, as_json, text=f"{data['path']} ({data['layout']})")


@app.command("send")
def send(
    body: Annotated[str | None, typer.Argument(help="Message text; '-' or nothing reads stdin.", show_default=False)] = None,
    to: Annotated[list[str] | None, typer.Option("--to", help="Recipient: a sleeve name, 'all' or 'envoy'; repeat or use commas.", show_default=False)] = None,
    type_: Annotated[str | None, typer.Option("--type", help="task, question, response, milestone, directive, blocked, done, ...", show_default=False)] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Thread name.", show_default=False)] = None,
    reply_to: Annotated[
        str | None, typer.Option("--reply-to", help="Id of an inbox message this answers (sets thread, and --to if omitted).", show_default=False)
    ] = None,
    sender: Annotated[
        str | None, typer.Option("--from", help=f"This sleeve's name (default: env {SLEEVE_ENV}, else the folder name).", show_default=False)
    ] = None,
    batch: Annotated[
        str | None,
        typer.Option(
            "--batch",
            help="Send many messages at once: a file (or '-', stdin) of JSON lines, each {to, body, type?, thread?, reply_to?}; one durable write.",
            show_default=False,
        ),
    ] = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a message to this sleeve's outbox; the router delivers it."""
    with reporting(as_json):
        ctx = _workspace(root, sender)
        if batch is not None:
            if body is not None or to or type_ or thread or reply_to:
                raise InvalidRequest("--batch takes each message's text and options from its lines; give no text, --to, --type, --thread or --reply-to")
            data = needlecast.send_many(ctx, _batch_items(batch), source="stdin" if batch == "-" else batch)
        else:
            text = read_stdin_if(body) if to or reply_to else ""
            data = needlecast.send(ctx, body=text, to=to or (), type_=type_, thread=thread, reply_to=reply_to)
    if batch is not None:
        emit(data, as_json, text="\n".join(message["id"] for message in data["messages"]))
    else:
        emit(data, as_json, text=data["message"]["id"])


def _batch_items(source: str) -> list[Any]:
    """The JSON values of a `--batch` file's (or stdin's) non-blank lines. Raises
    InvalidRequest naming the line that is not JSON, NotFound for a missing file."""
    if source == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise NotFound(f"no batch file {source}", path=Path(source)) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidRequest(f"cannot read the batch file {source}: {exc}") from None
    items: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(structured.loads_json(line))
        except (ValueError, MossError) as exc:
            raise InvalidRequest(f"{'stdin' if source == '-' else source} line {number} is not JSON: {exc}", details={"line": number}) from None
    return items


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
        data = needlecast.list_inbox(_workspace(root), unread=unread, sender=sender, thread=thread)
    lines = [_entry_line(entry) for entry in data["problems"]] + [_entry_line(entry, entry["read"]) for entry in data["messages"]]
    emit(data, as_json, text="\n".join(lines))


@app.command("read")
def read(
    key: Annotated[str, typer.Argument(help="Message id (as listed by `needlecast inbox`).", show_default=False)],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one inbox message and mark it read (in read.log). Once the inbox holds over 256
    messages, read ones over a week old move into month folders (docs/formats.md, "Rotation")."""
    with reporting(as_json):
        data = needlecast.read_message(_workspace(root), key=key)
    emit(data, as_json, text=_message_text(data["key"], data["message"]))
    for problem in data.get("problems", ()) if not as_json else ():
        note(f"warning: old mail was not moved out of the inbox: {problem['message']} ({problem['code']})")


@app.command("wait")
def wait(
    timeout: Annotated[float, typer.Option("--timeout", help="Longest wait in seconds (0 looks once; at most 3600).")] = 300.0,
    unread: Annotated[bool, typer.Option("--unread", help="Answer at once with unread messages already in the inbox.")] = False,
    poll: Annotated[bool, typer.Option("--poll", envvar="NEEDLECAST_POLL", help="Watch by polling instead of inotify.")] = False,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Block until a message arrives in this sleeve's inbox (or the timeout), then print it.
    Exits 0 either way; with --json, `timed_out` says which."""
    with reporting(as_json):
        data = needlecast.wait_for_mail(_workspace(root), timeout=timeout, unread=unread, poll=poll)
    blocks = [_message_text(entry["key"], entry["message"]) for entry in data["messages"]]
    emit(data, as_json, text="\n\n".join(blocks))
    if data["timed_out"] and not as_json:
        note(f"no new message in {timeout:g}s")


def _message_text(key: str, m: dict[str, Any]) -> str:
    """A message as `needlecast read` shows it: its header lines, a blank line, the body."""
    return "\n".join(
        [f"id: {m['id'] or key}", f"from: {m['from']}", f"to: {', '.join(m['to'])}"]
        + [f"{k}: {m[k]}" for k in ("thread", "type", "time") if m[k]]
        + ["", m["body"].rstrip("\n")]
    )


@app.command("outbox")
def outbox(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List messages waiting in this sleeve's outbox."""
    with reporting(as_json):
        data = needlecast.list_outbox(_workspace(root))
    emit(data, as_json, text="\n".join(_entry_line(e) for e in _in_file_order(data)))


dead_letters_app = new_app("List messages the router could not deliver (kept byte for byte) and why; `retry ID` sends one again.")
dead_letters_app.info.invoke_without_command = True  # the listing itself, as before `retry` joined it
dead_letters_app.info.no_args_is_help = False
app.add_typer(dead_letters_app, name="dead-letters")


@dead_letters_app.callback()
def dead_letters(ctx: typer.Context, root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List messages the router could not deliver (kept byte for byte) and why; `retry ID` sends one again."""
    if ctx.invoked_subcommand is not None:
        return
    with reporting(as_json):
        data = needlecast.list_dead_letters(_workspace(root))
    rows = data["dead_letters"]
    emit(
        data,
        as_json,
        text="\n".join(
            f"{r.get('dead_at', '-')}  [{r.get('code', '?')}]  {r.get('id', '?')}  {r.get('reason', '')}"
            + (f"  (sent again as {r['retried_as']})" if r.get("retried_as") else "")
            for r in rows
        ),
    )


@dead_letters_app.command("retry")
def dead_letters_retry(
    key: Annotated[
        str, typer.Argument(metavar="ID", help="The dead letter's message id (or file name), as `needlecast dead-letters` lists it.", show_default=False)
    ],
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send a dead letter again to the recipients it missed; prints the new id.

    Only a message dead-lettered because no sleeve answered to a recipient (a router that ran
    in the wrong place) can be sent again."""
    with reporting(as_json):
        data = needlecast.retry_dead_letter(_workspace(root), key=key)
    emit(data, as_json, text=data["message"]["id"])


@app.command("sleeves")
def sleeves(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List the sleeves the envoy routes between (exit 3 if one is unreachable)."""
    with reporting(as_json):
        data = needlecast.list_sleeves(_envoy(root))
    rows = data["sleeves"]
    lines = [
        f"{'ok ' if r['ok'] else 'ERR'}  {r['name']:<20} {r['url'] or r['path']}"
        + (f"  [{r['problem']['code']}] {r['problem']['message']}" if not r["ok"] else "")
        for r in rows
    ]
    emit(data, as_json, text="\n".join(lines))
    broken = [r for r in rows if not r["ok"]]
    if broken:
        if not as_json:
            note(f"{len(broken)} sleeve(s) cannot be reached")
        raise typer.Exit(3)


PeerOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--peer",
        envvar="NEEDLECAST_PEERS",
        help="A peer host: NAME=URL (we deliver to it and hear from it) or NAME (we only hear from it); repeat, or list them in env "
        "NEEDLECAST_PEERS. Its token comes from env NEEDLECAST_PEER_TOKEN_<NAME> or the file <peer token folder>/<NAME>.",
        show_default=False,
    ),
]
PeerNameOpt = Annotated[
    str | None,
    typer.Option("--peer-name", envvar="NEEDLECAST_PEER_NAME", help="This host's name in its peers' tables (default: the sleeve name).", show_default=False),
]
PeerTokenDirOpt = Annotated[
    Path | None,
    typer.Option("--peer-token-dir", envvar="NEEDLECAST_PEER_TOKEN_DIR", help="Folder holding one token file per peer, named after it.", show_default=False),
]


def _peers(specs: list[str] | None, token_dir: Path | None) -> dict[str, Any]:
    from needlecast.peers import load_peers

    return load_peers(specs or [], os.environ, token_dir)


def _token(token_file: Path | None, given_on_command_line: str | None) -> str | None:
    """The sidecar's bearer token: env NEEDLECAST_TOKEN, else the file --token-file names."""
    from moss_files.foundation.errors import InvalidRequest
    from needlecast.peers import read_token_file

    if given_on_command_line is not None:
        raise InvalidRequest(
            "a token on the command line is readable by every user of this machine (ps, /proc)",
            code="TOKEN_ON_COMMAND_LINE",
            hint=f"set {TOKEN_ENV}, or put it in a file and pass --token-file (env {TOKEN_FILE_ENV})",
        )
    token = os.environ.get(TOKEN_ENV) or None
    if token is None and token_file is not None:
        token = read_token_file(token_file)
    return token


@app.command("route")
def route(
    once: Annotated[bool, typer.Option("--once", help="Route every outbox once and exit.")] = False,
    poll: Annotated[bool, typer.Option("--poll", envvar="NEEDLECAST_POLL", help="Watch by polling instead of inotify.")] = False,
    sweep: Annotated[float, typer.Option("--sweep", envvar="NEEDLECAST_SWEEP", help="Seconds between full sweeps.")] = 30.0,
    peer: PeerOpt = None,
    peer_name: PeerNameOpt = None,
    peer_token_dir: PeerTokenDirOpt = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Deliver outbox messages to inboxes (once, or continuously while watching)."""
    with reporting(as_json):
        ctx = _envoy(root)
        peers = _peers(peer, peer_token_dir)
        if not once:
            raise typer.Exit(needlecast.watch(ctx, poll=poll, sweep_seconds=sweep, environ=os.environ, peers=peers, host_name=peer_name))
        data = needlecast.route_once(ctx, environ=os.environ, peers=peers, host_name=peer_name)
    text = f"delivered {data['delivered']}, archived {data['archived']}, dead letters {data['dead_letters']}, waiting {data['pending']}"
    emit(data, as_json, text=text)
    troubles = data["problems"] + data["held"]
    for trouble in troubles if not as_json else []:
        note(f"error[{trouble.get('code')}] {trouble.get('sleeve', '')}: {trouble.get('message')}")
    if troubles:
        raise typer.Exit(max(_STATUS_EXIT.get(int(t.get("status", 500)), 1) for t in troubles))


@app.command("sidecar")
def sidecar(
    host: Annotated[str, typer.Option("--host", envvar="NEEDLECAST_HOST", help="Address to bind; anything but loopback needs a token.")] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            envvar="NEEDLECAST_PORT",
            help=f"TCP port (0 picks a free one; default: {needlecast.DEFAULT_PORT}, or NEEDLECAST_DEFAULT_PORT, or the next free one).",
            show_default=False,
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            envvar=TOKEN_FILE_ENV,
            help=f"File holding the bearer token clients must send (or env {TOKEN_ENV}; never on the command line).",
            show_default=False,
        ),
    ] = None,
    token: Annotated[str | None, typer.Option("--token", hidden=True, help="Refused: tokens never go on the command line.")] = None,
    poll: Annotated[bool, typer.Option("--poll", envvar="NEEDLECAST_POLL", help="Watch by polling instead of inotify.")] = False,
    poll_interval: Annotated[float, typer.Option("--poll-interval", envvar="NEEDLECAST_POLL_INTERVAL", help="Seconds between polls.")] = 0.5,
    sweep: Annotated[float, typer.Option("--sweep", envvar="NEEDLECAST_SWEEP", help="Seconds between full safety sweeps.")] = 30.0,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            envvar=SLEEVE_ENV,
            help=f"This sleeve's name, reported by /status (default: env {SLEEVE_ENV}, else the folder name; an envoy root is reported as envoy, as routing names it).",
            show_default=False,
        ),
    ] = None,
    route_mode: Annotated[
        bool | None,
        typer.Option(
            "--route/--no-route", envvar="NEEDLECAST_ROUTE", help="Route outboxes (default: when the root holds sleeves or has peers).", show_default=False
        ),
    ] = None,
    peer: PeerOpt = None,
    peer_name: PeerNameOpt = None,
    peer_token_dir: PeerTokenDirOpt = None,
    git_sync: Annotated[
        bool, typer.Option("--git-sync", envvar="NEEDLECAST_GIT_SYNC", help="Commit, pull (through the merge driver) and push the toolkit's files.")
    ] = False,
    git_sync_interval: Annotated[
        float, typer.Option("--git-sync-interval", envvar="NEEDLECAST_GIT_SYNC_INTERVAL", help="Seconds between git sync rounds (a change brings one forward).")
    ] = 60.0,
    git_sync_remote: Annotated[
        str, typer.Option("--git-sync-remote", envvar="NEEDLECAST_GIT_SYNC_REMOTE", help="The git remote to pull from and push to.")
    ] = "origin",
    git_sync_branch: Annotated[
        str | None,
        typer.Option("--git-sync-branch", envvar="NEEDLECAST_GIT_SYNC_BRANCH", help="The branch to sync (default: the one checked out).", show_default=False),
    ] = None,
    index_watch: Annotated[
        bool,
        typer.Option(
            "--index-watch/--no-index-watch",
            envvar="NEEDLECAST_INDEX_WATCH",
            help="Keep the workspace's search index warm with `moss index watch` while the sidecar runs (Linux; a workspace with .moss/).",
        ),
    ] = True,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the sidecar: watch and route outboxes, serve /health, /status, /outbox, /inbox, /sleeves.
    Every option can come from the environment (the variable each names)."""
    from moss_files.foundation.httpserver import PORT_SCAN
    from moss_files.foundation.loglevels import LevelLog, level_from_env
    from needlecast.gitsync import GitSyncSettings

    with reporting(as_json):
        level = level_from_env(os.environ)
        scan = 1
        if port is None:  # the default port, or the next free one (sidecar.json says which)
            port, scan = default_port(os.environ.get(DEFAULT_PORT_ENV), needlecast.DEFAULT_PORT, variable=DEFAULT_PORT_ENV), PORT_SCAN
        secret = _token(token_file, token)
        peers = _peers(peer, peer_token_dir)
        settings = GitSyncSettings(remote=git_sync_remote, branch=git_sync_branch, interval=git_sync_interval) if git_sync else None
        context = _envoy(root, name)
        code = needlecast.run_sidecar(
            context.replace(notify=LevelLog(note, level)),
            host=host,
            port=port,
            scan=scan,
            token=secret,
            route=route_mode,
            poll=poll,
            poll_interval=poll_interval,
            sweep_seconds=sweep,
            environ=os.environ,
            peers=peers,
            host_name=peer_name,
            git_sync=settings,
            index_watch=index_watch,
        )
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    warn_if_clone_lacks_merge_driver(sys.argv[1:])
    try:
        app()
    except BrokenPipeError:  # `needlecast inbox | head`
        sys.stderr.close()

"""Use cases of one sleeve's mailbox: set it up, send, list and read the inbox, list the outbox
and the dead letters, and send a dead letter again. The envoy's use cases (routing, the sidecar)
are in `envoy`.

Shell layer. Each use case takes the Context (the workspace root, the sleeve's name, the clock
and ids) and typed keyword arguments, touches only that workspace's `.needlecast/` through
`mailbox`, and returns the JSON-ready dict that both `needlecast <command> --json` and the
`needlecast.*` MCP tool print. `find_inbox_message`, `iter_messages` and `message_text` are
readers for other packages (the search index).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moss_files.foundation.errors import InvalidRequest, MossError, NotFound, error_body
from moss_files.foundation.ids import format_time
from needlecast import mailbox, routing
from needlecast.mailbox import Mailbox
from needlecast.message import Message, message_to_dict, normalize_body, with_changes
from needlecast.routing import Entry, entry_to_dict

if TYPE_CHECKING:
    from moss_files.foundation.context import Context


def _sleeve(ctx: Context) -> str:
    """The name this workspace sends under: the context's sleeve, else the folder's name."""
    return ctx.sleeve or ctx.root.name


def init_workspace(ctx: Context, *, layout: str = "v1") -> dict[str, Any]:
    """`needlecast init`: create `.needlecast/` (v1: inbox.md/outbox.md; v2: a folder per box)
    where missing, never touching a file, and the git settings it needs (.gitignore and
    .gitattributes lines, the merge driver); returns `{ok, path, layout, actions}`.

    Raises InvalidRequest for an unknown layout.
    """
    # Imported here: only `needlecast init` needs the scaffold, and the message commands an agent
    # runs all day should not load it.
    from moss_files import scaffold

    box = mailbox.init_mailbox(ctx.root, layout)
    # The git settings every part needs: ignore the router's per-machine state, merge the
    # mailboxes with the merge driver (and define it in this clone). The mailbox files
    # themselves were made above, for the layout asked.
    settings_only = scaffold.Templates(parts={"needlecast": {}}, agent_blocks={})
    actions = scaffold.run_templates(ctx.root, parts=("needlecast",), templates=settings_only)
    for action in actions:
        ctx.say(scaffold.render_action(action))
    return {"ok": True, "path": str(box.dir), "layout": box.layout(), "actions": [scaffold.action_to_dict(a) for a in actions]}


def send(
    ctx: Context,
    *,
    body: str,
    to: Sequence[str] = (),
    type_: str | None = None,
    thread: str | None = None,
    reply_to: str | None = None,
) -> dict[str, Any]:
    """`needlecast send`: write a message from the context's sleeve to its outbox; returns
    `{ok, message, path}` (the file written).

    Each item of `to` may name several recipients, comma-separated. `reply_to` names an inbox
    message: its thread becomes the default thread, its sender the default recipient and
    `response` the default type. Raises InvalidRequest without recipients or with an empty
    body (blanks only), NotFound for an unknown `reply_to`.
    """
    message = _compose(ctx, body=body, to=to, type_=type_, thread=thread, reply_to=reply_to, now=ctx.now())
    path = mailbox.append_outbox(Mailbox(ctx.root), message, ctx.now())
    return {"ok": True, "message": message_to_dict(message), "path": str(path)}


def _compose(ctx: Context, *, body: str, to: Sequence[str], type_: str | None, thread: str | None, reply_to: str | None, now: Any) -> Message:
    """The message `send` writes (see there); raises as `send`."""
    recipients = [name.strip() for item in to for name in item.split(",") if name.strip()]
    extra: dict[str, str] = {}
    if reply_to:
        original = find_inbox_message(ctx.root, reply_to)
        assert original.message is not None
        extra["reply_to"] = original.key
        thread = thread or original.message.thread or original.key
        if not recipients and original.message.sender:
            recipients = [original.message.sender]
        type_ = type_ or "response"
    if not recipients:
        raise InvalidRequest("say who the message is for (--to)")
    if not body.strip():
        raise InvalidRequest("nothing to send: the message is empty", hint="pass the text as an argument or pipe it on stdin")
    return Message(
        id=f"msg-{ctx.new_ulid()}",
        sender=_sleeve(ctx),
        to=tuple(recipients),
        thread=thread,
        type=type_ or "message",
        time=format_time(now),
        body=body,
        extra=extra,
    )


BATCH_KEYS = frozenset({"to", "body", "type", "thread", "reply_to"})


def send_many(ctx: Context, items: Sequence[Any], *, source: str = "batch") -> dict[str, Any]:
    """`needlecast send --batch`: write many messages from the context's sleeve to its outbox in
    one durable step (`mailbox.append_outbox_many`); returns `{ok, count, messages, paths}`.

    Each item is a mapping with `to` (a name, comma-separated names or a list), `body`, and
    optionally `type`, `thread` and `reply_to`, as `send` takes them. Every item is checked
    before anything is written: raises InvalidRequest naming the item (`source`, message N)
    for one that is not such a mapping, or as `send` for one `send` would refuse.
    """
    now = ctx.now()
    messages: list[Message] = []
    for number, item in enumerate(items, start=1):
        where = f"{source}, message {number}"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where}: each message is a JSON object with `to` and `body`", details={"line": number})
        unknown = sorted(set(item) - BATCH_KEYS)
        to = item.get("to")
        recipients = [to] if isinstance(to, str) else to
        texts = [item.get(key) for key in ("body", "type", "thread", "reply_to")]
        if (
            unknown
            or not isinstance(recipients, list)
            or not all(isinstance(name, str) for name in recipients)
            or not all(value is None or isinstance(value, str) for value in texts)
        ):
            reason = f"unknown keys {', '.join(unknown)}" if unknown else "`to` is a name or a list of names, the other keys text"
            raise InvalidRequest(f"{where}: {reason}", details={"line": number})
        try:
            messages.append(
                _compose(
                    ctx, body=item.get("body") or "", to=recipients, type_=item.get("type"), thread=item.get("thread"), reply_to=item.get("reply_to"), now=now
                )
            )
        except InvalidRequest as err:
            raise InvalidRequest(f"{where}: {err}", code=err.code, hint=err.hint, details={"line": number}) from None
    paths = mailbox.append_outbox_many(Mailbox(ctx.root), messages, now)
    return {"ok": True, "count": len(messages), "messages": [message_to_dict(m) for m in messages], "paths": sorted({str(path) for path in paths})}


def list_inbox(ctx: Context, *, unread: bool = False, sender: str | None = None, thread: str | None = None) -> dict[str, Any]:
    """`needlecast inbox`: `{workspace, layout, messages: [{key, source, line, message, read}],
    problems, unread}`, the messages filtered; unreadable blocks are always listed as problems;
    `unread` counts the inbox's unread messages, whatever the filters."""
    box = Mailbox(ctx.root)
    marks = mailbox.read_marks(box)
    rows: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    unread_count = 0
    # Unread mail is all at the inbox's top: the month folders (read history) only for a listing of all.
    for entry in mailbox.read_inbox(box, top_only=unread):
        if entry.message is None:
            problems.append(entry_to_dict(entry))
            continue
        read = mailbox.is_read(entry, marks)
        unread_count += not read
        if (unread and read) or (sender and entry.message.sender != sender) or (thread and entry.message.thread != thread):
            continue
        rows.append({**entry_to_dict(entry), "read": read})
    return {"workspace": str(ctx.root), "layout": box.layout(), "messages": rows, "problems": problems, "unread": unread_count}


MAX_WAIT_SECONDS = 3600.0


def wait_for_mail(ctx: Context, *, timeout: float, unread: bool = False, poll: bool = False) -> dict[str, Any]:
    """`needlecast wait`: block until a message arrives in this sleeve's inbox, or `timeout`
    seconds pass; returns `{workspace, messages: [{key, source, line, message, read}],
    timed_out, waited_ms, watch}`.

    A message counts when it was not in the inbox as the wait began; with `unread`, unread
    messages already there answer at once. `timeout` 0 looks once. The inbox is watched
    before it is first read, so nothing delivered in between is missed (`watch` says how:
    inotify or polling). Raises InvalidRequest for a negative or too long timeout, NotFound
    when the workspace has no `.needlecast/`.
    """
    from needlecast.watch import InboxWatch

    if not 0 <= timeout <= MAX_WAIT_SECONDS:
        raise InvalidRequest(f"timeout must be 0 to {MAX_WAIT_SECONDS:g} seconds, not {timeout:g}", details={"field": "timeout"})
    box = Mailbox(ctx.root)
    if not box.dir.is_dir():
        raise NotFound(f"no mailbox at {box.dir}", path=box.dir, hint="run `needlecast init` first")
    started = time.monotonic()
    with InboxWatch(box, poll=poll) as watch:
        # Unread mail and new arrivals are at the inbox's top (`mailbox.rotate_inbox`).
        entries = [e for e in mailbox.read_inbox(box, top_only=True) if e.message is not None]
        seen = {_identity(entry) for entry in entries}
        found: list[Entry] = []
        if unread:
            marks = mailbox.read_marks(box)
            found = [entry for entry in entries if _identity(entry) not in marks]
        deadline = started + timeout
        if not found and timeout > 0:
            # From here on every delivery wakes this wait: say so (tests and scripts wait for it).
            ctx.say(f"waiting ({watch.mode}) up to {timeout:g}s for new mail")
        while not found:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not watch.wait(remaining):
                break
            found = [e for e in mailbox.read_inbox(box, top_only=True) if e.message is not None and _identity(e) not in seen]
        marks = mailbox.read_marks(box) if found else set()
        return {
            "workspace": str(ctx.root),
            "messages": [{**entry_to_dict(entry), "read": _identity(entry) in marks} for entry in found],
            "timed_out": not found,
            "waited_ms": round((time.monotonic() - started) * 1000),
            "watch": watch.mode,
        }


def _identity(entry: Entry) -> tuple[str, str]:
    """A message's identity in an inbox, as read.log records it: (sender, id)."""
    sender = entry.message.sender if entry.message is not None else None
    return (sender or "", entry.key)


def read_message(ctx: Context, *, key: str) -> dict[str, Any]:
    """`needlecast read`: the inbox message `key`, marked read (once) in read.log; returns
    `{key, source, line, message, read}`, and `problems` when the rotation below could not
    run (the read is done all the same). Raises as `find_inbox_message`.

    A mark may let the inbox's top rotate (`mailbox.rotate_inbox`): read messages over a week
    old move into month folders once the top holds more than 256, so what a look for unread
    mail reads stays bounded."""
    box = Mailbox(ctx.root)
    entry = find_inbox_message(ctx.root, key)
    assert entry.message is not None
    ident = (entry.message.sender or "", entry.key)
    answer: dict[str, Any] = {**entry_to_dict(entry), "read": True}
    if not mailbox.is_read(entry, mailbox.read_marks(box)):
        mailbox.mark_read(box, ident[0], ident[1], ctx.now())
        try:
            mailbox.rotate_inbox(box, ctx.now(), say=ctx.say)
        except MossError as err:
            # The message is read and marked; moving old mail waits for a later read (a
            # read.log with conflict markers, a router holding the inbox's lock too long).
            answer["problems"] = [error_body(err)["error"]]
    return answer


def list_outbox(ctx: Context) -> dict[str, Any]:
    """`needlecast outbox`: `{workspace, layout, messages, problems, unsettled}`, what waits in
    the outbox (`unsettled`: its end is still being written)."""
    box = Mailbox(ctx.root)
    scan = mailbox.read_outbox(box, _sleeve(ctx))
    return {
        "workspace": str(ctx.root),
        "layout": box.layout(),
        "messages": [entry_to_dict(entry) for entry in scan.entries if entry.message is not None],
        "problems": [entry_to_dict(entry) for entry in scan.entries if entry.message is None],
        "unsettled": scan.unsettled,
    }


def list_dead_letters(ctx: Context) -> dict[str, Any]:
    """`needlecast dead-letters`: `{workspace, dead_letters: [{path, id, code, reason, ...,
    bytes}]}`, oldest first."""
    letters = mailbox.read_dead_letters(Mailbox(ctx.root))
    return {
        "workspace": str(ctx.root),
        "dead_letters": [
            {"path": str(d.path), **d.meta, "bytes": len(d.raw), **({"problem": error_body(d.problem)["error"]} if d.problem else {})} for d in letters
        ],
    }


def retry_dead_letter(ctx: Context, *, key: str) -> dict[str, Any]:
    """`needlecast dead-letters retry ID`: send a dead-lettered message again, to the recipients
    no sleeve answered to when it was routed (a router that ran in the wrong place, a sleeve set
    up since); returns `{ok, message, path, dead_letter}`. The new message says `retry_of: ID`;
    the dead letter stays, marked `retried_as`.

    `key` is the dead letter's message id or its file name. Raises NotFound, InvalidRequest for a
    dead letter of another code (its message needs fixing first), Conflict ALREADY_EXISTS for one
    retried already.
    """
    box = Mailbox(ctx.root)
    letters = [d for d in mailbox.read_dead_letters(box) if d.problem is None and key in (str(d.meta.get("id")), d.path.name)]
    if not letters:
        raise NotFound(f"no dead letter {key!r}", path=box.dead_dir, hint="list them with `needlecast dead-letters`")
    retryable = [d for d in letters if d.meta.get("code") == "UNKNOWN_RECIPIENT"]
    if not retryable:
        codes = ", ".join(sorted({str(d.meta.get("code")) for d in letters}))
        raise InvalidRequest(
            f"dead letter {key!r} is {codes}: only a message for an unknown recipient is sent again as it was",
            path=letters[0].path,
            hint="fix the message and send it with `needlecast send`",
        )
    letter = retryable[0]
    sender = _sleeve(ctx)
    entry = mailbox.scan_message_file(letter.raw, letter.path, sender)
    if entry.message is None:
        assert entry.problem is not None
        raise entry.problem
    recipients = letter.meta.get("recipients") or list(entry.message.to)
    now = ctx.now()
    message = routing.retry_copy(
        entry.message,
        key=str(letter.meta.get("id") or entry.key),
        sender=sender,
        to=[str(name) for name in recipients],
        dead_letter=letter.path.name,
        now=format_time(now),
    )
    message = with_changes(message, body=normalize_body(message.body))
    path = mailbox.requeue_dead_letter(box, letter.path, message, now)
    return {"ok": True, "message": message_to_dict(message), "path": str(path), "dead_letter": str(letter.path)}


# --------------------------------------------------------------------------- readers


# A delivered file's name: `<time>_<from>_<id>.md` (mailbox.message_file_name).
_DELIVERED_NAME = re.compile(r"^\d{4}-?\d{2}-?\d{2}T\d{2}-?\d{2}-?\d{2}Z_(?P<rest>.+)\.md$")
GLANCE_MAX_FILE_BYTES = 1024 * 1024  # a larger inbox.md is counted by blocks, not read for its newest


def inbox_glance(root: Path, *, newest: int = 3) -> dict[str, Any]:
    """A quick look at a workspace's inbox for a status line, without reading every message:
    `{layout, total, unread, keys, newest_unread: [entry + read]}`.

    A delivered file (layout v2) is known by its name, `<time>_<from>_<id>.md`, which read marks
    are matched against (`safe_part` keeps distinct names distinct); a file named otherwise, and
    `inbox.md` (layout v1, up to GLANCE_MAX_FILE_BYTES), are read. `keys` identifies every
    message (to tell new arrivals), `newest_unread` holds the last `newest` unread ones, read
    in full. Unreadable blocks are not counted. Never raises for a missing mailbox (all zero).
    Only the inbox's top is looked at: `total` and `keys` leave out the read messages rotated
    into its month folders (`mailbox.rotate_inbox`), so a glance stays bounded.
    """
    box = Mailbox(root)
    marks = mailbox.read_marks(box)
    marked = mailbox.marked_names(marks)
    keys: list[str] = []
    unread: list[tuple[str, Any]] = []  # (key, a path to read, or an entry read already)
    data = mailbox.read_if_any(box.inbox_file) if box.inbox_file.is_file() else None
    if data is not None and len(data) <= GLANCE_MAX_FILE_BYTES:
        entries, _preamble = mailbox.scan_mailfile(data, box.inbox_file, "")
        for entry in entries:
            if entry.message is not None:
                keys.append(f"v1:{entry.message.sender or ''}:{entry.key}")
                if _identity(entry) not in marks:
                    unread.append((entry.key, entry))
    for name in mailbox.message_names(box.inbox_dir):
        found = _DELIVERED_NAME.match(name)
        path = box.inbox_dir / name
        if found is not None:
            keys.append(name)
            if found.group("rest") + ".md" not in marked:
                unread.append((name, path))
            continue
        file_data = mailbox.read_if_any(path)
        read_entry = mailbox.scan_message_file(file_data, path, "") if file_data is not None else None
        if read_entry is not None and read_entry.message is not None:
            keys.append(name)
            if _identity(read_entry) not in marks:
                unread.append((read_entry.key, read_entry))
    shown: list[dict[str, Any]] = []
    for _key, item in unread[-newest:] if newest > 0 else []:
        if isinstance(item, Path):
            file_data = mailbox.read_if_any(item)
            if file_data is None:
                continue
            item = mailbox.scan_message_file(file_data, item, "")
            if item.message is None:
                continue
        shown.append({**entry_to_dict(item), "read": False})
    return {"layout": box.layout(), "total": len(keys), "unread": len(unread), "keys": keys, "newest_unread": shown}


def find_inbox_message(root: Path, key: str) -> Entry:
    """The inbox message with id `key`: at the inbox's top, else in its month folders (read
    messages rotated out of the top). Raises NotFound, or InvalidRequest AMBIGUOUS_ADDRESSING
    when several senders used that id (in the place it was found)."""
    box = Mailbox(root)
    matches = [entry for entry in mailbox.read_inbox(box, top_only=True) if entry.message is not None and entry.key == key]
    if not matches:
        matches = mailbox.rotated_inbox_messages(box, key)
    if not matches:
        raise NotFound(f"no message {key!r} in the inbox", path=box.dir)
    if len(matches) > 1:
        senders = sorted({entry.message.sender or "?" for entry in matches if entry.message is not None})
        raise InvalidRequest(f"id {key!r} is used by several senders: {', '.join(senders)}", code="AMBIGUOUS_ADDRESSING")
    return matches[0]


def iter_messages(root: Path) -> Iterator[tuple[str, Entry]]:
    """Every readable message of a workspace with where it is (`inbox`, `outbox`, `archive`),
    for indexing and search."""
    box = Mailbox(root)
    for entry in mailbox.read_inbox(box):
        if entry.message is not None:
            yield "inbox", entry
    for entry in mailbox.read_outbox(box, root.name).entries:
        if entry.message is not None:
            yield "outbox", entry
    for entry in mailbox.read_archive(box, root.name):
        if entry.message is not None:
            yield "archive", entry


def message_text(entry: Entry) -> str:
    """A message's searchable text: its header values and body."""
    assert entry.message is not None
    m = entry.message
    return "\n".join(str(v) for v in (m.sender, " ".join(m.to), m.thread, m.type, m.body) if v)

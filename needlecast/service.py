"""Needlecast use cases for one workspace: send, list, read, and route once.

Shell layer: what the CLI, the MCP server and the search index call. Takes paths, the clock and
id source as arguments; reads no environment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from moss_files.foundation.errors import InvalidRequest, NotFound
from moss_files.foundation.ids import IdSource, format_time, system_clock

from needlecast import mailbox
from needlecast.mailbox import DeadLetter, Mailbox, OutboxScan
from needlecast.message import Message
from needlecast.router import RouteReport, Router
from needlecast.routing import Entry


@dataclass(frozen=True, slots=True)
class InboxListing:
    """An inbox as listed: readable messages with their read flag, and unreadable blocks."""

    messages: tuple[tuple[Entry, bool], ...]
    problems: tuple[Entry, ...]
    layout: str


def send(
    root: Path,
    body: str,
    to: list[str],
    *,
    sender: str | None = None,
    type_: str | None = None,
    thread: str | None = None,
    reply_to: str | None = None,
    clock: Callable[[], datetime] = system_clock,
    ids: IdSource | None = None,
) -> tuple[Message, Path]:
    """Write a message to the workspace's outbox; return it and the file written.

    `reply_to` names an inbox message: its thread becomes the default thread, its sender the
    default recipient and `response` the default type. Raises InvalidRequest without
    recipients, NotFound for an unknown `reply_to`.
    """
    box = Mailbox(root)
    recipients = [name.strip() for item in to for name in item.split(",") if name.strip()]
    extra: dict[str, str] = {}
    if reply_to:
        original = find_inbox_message(root, reply_to)
        assert original.message is not None
        extra["reply_to"] = original.key
        thread = thread or original.message.thread or original.key
        if not recipients and original.message.sender:
            recipients = [original.message.sender]
        type_ = type_ or "response"
    if not recipients:
        raise InvalidRequest("say who the message is for (--to)")
    now = clock()
    message = Message(
        id=f"msg-{(ids or IdSource(clock=clock)).ulid()}",
        sender=sender or root.name,
        to=tuple(recipients),
        thread=thread,
        type=type_ or "message",
        time=format_time(now),
        body=body,
        extra=extra,
    )
    return message, mailbox.append_outbox(box, message, now)


def list_inbox(root: Path, *, unread: bool = False, sender: str | None = None, thread: str | None = None) -> InboxListing:
    """The workspace's inbox, filtered; unreadable blocks are always listed as problems."""
    box = Mailbox(root)
    marks = mailbox.read_marks(box)
    rows: list[tuple[Entry, bool]] = []
    problems: list[Entry] = []
    for entry in mailbox.read_inbox(box):
        if entry.message is None:
            problems.append(entry)
            continue
        read = (entry.message.sender or "", entry.key) in marks
        if (unread and read) or (sender and entry.message.sender != sender) or (thread and entry.message.thread != thread):
            continue
        rows.append((entry, read))
    return InboxListing(tuple(rows), tuple(problems), box.layout())


def find_inbox_message(root: Path, key: str) -> Entry:
    """The inbox message with id `key`. Raises NotFound, or InvalidRequest AMBIGUOUS_ADDRESSING
    when several senders used that id."""
    box = Mailbox(root)
    matches = [entry for entry in mailbox.read_inbox(box) if entry.message is not None and entry.key == key]
    if not matches:
        raise NotFound(f"no message {key!r} in the inbox", path=box.dir)
    if len(matches) > 1:
        senders = sorted({entry.message.sender or "?" for entry in matches if entry.message is not None})
        raise InvalidRequest(f"id {key!r} is used by several senders: {', '.join(senders)}", code="AMBIGUOUS_ADDRESSING")
    return matches[0]


def read_message(root: Path, key: str, *, clock: Callable[[], datetime] = system_clock) -> Entry:
    """The inbox message `key`, marked read (once) in read.log. Raises as `find_inbox_message`."""
    box = Mailbox(root)
    entry = find_inbox_message(root, key)
    assert entry.message is not None
    ident = (entry.message.sender or "", entry.key)
    if ident not in mailbox.read_marks(box):
        mailbox.mark_read(box, ident[0], ident[1], clock())
    return entry


def list_outbox(root: Path, sleeve_name: str | None = None) -> OutboxScan:
    """What waits in the workspace's outbox."""
    return mailbox.read_outbox(Mailbox(root), sleeve_name or root.name)


def list_dead_letters(root: Path) -> list[DeadLetter]:
    """The workspace's dead letters, oldest first."""
    return mailbox.read_dead_letters(Mailbox(root))


def route_once(root: Path, *, environ: Mapping[str, str] | None = None, log: Callable[[str], None] | None = None) -> RouteReport:
    """One routing pass over every sleeve of the envoy at `root`. Raises REGISTRY_INVALID."""
    return Router(root, environ=environ, log=log).route_all()


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


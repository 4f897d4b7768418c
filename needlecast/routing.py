"""Routing decisions: who a message goes to, and what is left to do for each outbox entry.

Core layer: pure functions and data; no I/O, the clock's reading is passed in. The router
(`router.py`) gathers entries, journal records and the sleeve directory, asks `plan_entry`
what to do, and applies the plan with the mailbox edge.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from moss_files.foundation.errors import MossError, error_body
from needlecast.message import ALL, ENVOY, Message, message_to_dict, with_changes

ROUTER_NAME = "needlecast"  # the sender of bounces; no sleeve may take this name
RESERVED = frozenset({ALL, ENVOY, ROUTER_NAME})


@dataclass(frozen=True, slots=True)
class Entry:
    """A message, or an unreadable block, found in a mailbox."""

    key: str  # the message id, or the id derived for a block without one
    message: Message | None
    problem: MossError | None
    raw: bytes  # exact bytes of the block, or of the whole file (v2)
    source: Path
    line: int
    digest: str  # what the content says, to tell a reused id from a retry


@dataclass(slots=True)
class Record:
    """What a sender's delivery journal knows about one entry. The name sets are frozen: a
    journal holds a thousand or more records in a router's memory, and shares one set among
    every record with the same recipients (`Journal`) instead of a set of its own for each."""

    digest: str
    delivered: frozenset[str] = frozenset()
    dead: frozenset[str] = frozenset()  # error codes already dead-lettered
    archived: bool = False
    at: str = ""

    def settled(self) -> bool:
        """True once the entry needs nothing more than removal from the outbox."""
        return self.archived or bool(self.dead and not self.delivered)


@dataclass(frozen=True, slots=True)
class Sleeve:
    """A named workspace the router can deliver to: a local folder or a remote sidecar."""

    name: str
    path: Path | None = None
    url: str | None = None
    token_env: str | None = None
    token_file: str | None = None
    peer: str | None = None  # the peer host it lives on: requests to it are signed with that peer's token
    origin: str = "child"  # child | registry | envoy | self (this sidecar's own name) | peer
    problem: MossError | None = None  # set when the sleeve cannot be reached now

    @property
    def remote(self) -> bool:
        return self.url is not None or self.peer is not None


def sleeve_at_peer(name: str, remote_name: str, peer: str, peer_url: str | None, origin: str) -> Sleeve:
    """The sleeve `remote_name` of the peer host `peer` (reached at `<peer_url>/sleeves/<remote_name>`),
    known here as `name`; with a problem when that peer has no address (it only sends to us)."""
    if peer_url is None:
        problem = MossError(f"peer {peer!r} has no address to deliver to", code="SLEEVE_UNAVAILABLE", hint=f"give it one: --peer {peer}=http://HOST:PORT")
        return Sleeve(name, peer=peer, origin=origin, problem=problem)
    return Sleeve(name, url=f"{peer_url}/sleeves/{remote_name}", peer=peer, origin=origin)


@dataclass(frozen=True, slots=True)
class Directory:
    """Every sleeve the envoy knows, by name (the envoy itself under `envoy`), and the peer
    hosts (name -> address, None for one that only sends to us) that `name@peer` reaches."""

    root: Path
    sleeves: Mapping[str, Sleeve]
    peers: Mapping[str, str | None] = field(default_factory=dict)
    host_name: str | None = None  # this host's name among its peers: `name@<it>` is local

    def get(self, name: str) -> Sleeve | None:
        """The sleeve `name` names: a sleeve of this directory, or `sleeve@peer` on a peer host."""
        found = self.sleeves.get(name)
        if found is not None or "@" not in name:
            return found
        remote_name, _, peer = name.partition("@")
        if not remote_name or "@" in peer:
            return None
        if peer == self.host_name:
            local = self.sleeves.get(remote_name)
            return local if local is not None and not local.remote else None
        if peer not in self.peers:
            return None
        return sleeve_at_peer(name, remote_name, peer, self.peers[peer], "peer")

    def others(self, sender: str) -> tuple[str, ...]:
        """Recipients of `all`: every sleeve but the sender, the envoy, this sidecar's own name
        and the peer hosts themselves (a broadcast stays among the sleeves this directory lists)."""
        return tuple(name for name, sleeve in self.sleeves.items() if name not in (sender, ENVOY) and sleeve.origin not in ("self", "peer"))


@dataclass(frozen=True, slots=True)
class DeadNote:
    """Why (part of) an entry cannot be delivered."""

    code: str
    reason: str
    recipients: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EntryPlan:
    """What is left to do for one outbox entry."""

    key: str
    copy: Message | None  # the message as recipients receive it
    deliver_to: tuple[str, ...] = ()  # recipients not yet delivered
    delivered: tuple[str, ...] = ()  # recipients the journal says have it
    dead: tuple[DeadNote, ...] = ()  # dead letters not yet written
    resolved: tuple[str, ...] = ()  # every known recipient
    undeliverable: tuple[str, ...] = ()
    remove_only: bool = False  # routed before (a resurrected or retried copy)
    held: str | None = None  # the code of why the entry waits untouched (MERGE_CONFLICT)


def resolve_recipients(to: Iterable[str], sender: str, directory: Directory) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return (known recipients, unknown names) for a message's `to`, in order, no repeats."""
    known: list[str] = []
    unknown: list[str] = []
    for name in to:
        expanded = directory.others(sender) if name == ALL else (name,)
        for target in expanded:
            if directory.get(target) is not None:
                if target not in known:
                    known.append(target)
            elif target not in unknown:
                unknown.append(target)
    return tuple(known), tuple(unknown)


def delivered_copy(message: Message, key: str, sender: str, now: str) -> Message:
    """The message as every recipient gets it: the router stamps the id, the true sender and,
    when the writer gave none, the time."""
    return with_changes(message, id=key, sender=sender, time=message.time or now)


def plan_entry(entry: Entry, sender: str, directory: Directory, record: Record | None, now: str) -> EntryPlan:
    """Decide what remains to be done for `entry`, given what the journal remembers."""
    if record is not None and record.digest != entry.digest and (record.delivered or record.archived):
        if "DUPLICATE_MESSAGE_ID" in record.dead:
            return EntryPlan(entry.key, None, remove_only=True)
        reason = f"id {entry.key!r} was already used by this sender for a different message"
        return EntryPlan(entry.key, None, dead=(DeadNote("DUPLICATE_MESSAGE_ID", reason),))
    if record is not None and record.digest == entry.digest and record.settled():
        return EntryPlan(entry.key, None, remove_only=True)
    done_dead = record.dead if record is not None and record.digest == entry.digest else frozenset()
    if entry.problem is not None and entry.problem.code in ("MERGE_CONFLICT", "FORMAT_TOO_NEW"):
        # Half of a git merge, or a file a newer moss-files wrote: neither delivered nor
        # dead-lettered nor removed until a person resolves it (or upgrades moss-files).
        return EntryPlan(entry.key, None, held=entry.problem.code)
    if entry.message is None:
        problem = entry.problem
        code = problem.code if problem is not None else "MESSAGE_INVALID"
        if code in done_dead:
            return EntryPlan(entry.key, None, remove_only=True)
        reason = problem.message if problem is not None else "not a message"
        return EntryPlan(entry.key, None, dead=(DeadNote(code, reason),))
    message = entry.message
    if not message.to:
        if "MESSAGE_INVALID" in done_dead:
            return EntryPlan(entry.key, None, remove_only=True)
        return EntryPlan(entry.key, None, dead=(DeadNote("MESSAGE_INVALID", "the message has no `to` recipients"),))
    known, unknown = resolve_recipients(message.to, sender, directory)
    already = tuple(sorted(record.delivered)) if record is not None and record.digest == entry.digest else ()
    dead: tuple[DeadNote, ...] = ()
    if unknown and "UNKNOWN_RECIPIENT" not in done_dead:
        names = ", ".join(unknown)
        dead = (DeadNote("UNKNOWN_RECIPIENT", f"no sleeve is named {names}", unknown),)
    return EntryPlan(
        key=entry.key,
        copy=delivered_copy(message, entry.key, sender, now),
        deliver_to=tuple(name for name in known if name not in already),
        delivered=tuple(name for name in known if name in already),
        dead=dead,
        resolved=known,
        undeliverable=unknown,
    )


def archived_copy(copy: Message, delivered_to: Iterable[str], undeliverable: Iterable[str], now: str) -> Message:
    """The sender's record of a routed message: when, to whom, and who could not be reached."""
    extra: dict[str, object] = {"routed": now, "delivered_to": list(delivered_to)}
    missing = list(undeliverable)
    if missing:
        extra["undeliverable"] = missing
    return with_changes(copy, extra=extra)


def retry_copy(message: Message, *, key: str, sender: str, to: Iterable[str], dead_letter: str, now: str) -> Message:
    """A dead-lettered message made to be sent again to `to` (the recipients it missed): the same
    type, thread, body and other keys, from `sender`, dated `now`, with `retry_of: <key>`. Its id
    is `<key>-retry-<hex>`, derived from the dead letter's file name, so a retry repeated after a
    crash queues the same message, which the router delivers once."""
    seed = hashlib.blake2b(f"{sender}\x00{dead_letter}".encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return with_changes(message, id=f"{key}-retry-{seed}", sender=sender, to=tuple(to), time=now, extra={"retry_of": key})


def bounce(entry: Entry, sender: str, note: DeadNote, dead_letter: str, now: str) -> Message:
    """The notice a sender finds in its own inbox when (part of) a message went undelivered."""
    what = f"message {entry.key}"
    if entry.message is not None and entry.message.type:
        what += f" ({entry.message.type})"
    where = f"{entry.source.name} line {entry.line}" if entry.line > 1 else entry.source.name
    if note.code == "UNKNOWN_RECIPIENT":
        first = f"Your {what} from {where} was not delivered to {', '.join(note.recipients)}: no sleeve has that name."
    else:
        first = f"Your {what} from {where} could not be routed: {note.reason} [{note.code}]."
    body = f"{first}\n\nIts exact text is kept in {dead_letter}.\n"
    thread = entry.message.thread if entry.message is not None else None
    return Message(
        id=f"{entry.key}-bounce-{note.code.lower()}",
        sender=ROUTER_NAME,
        to=(sender,),
        thread=thread,
        type="bounce",
        time=now,
        body=body,
        extra={"reply_to": entry.key, "code": note.code},
    )


# A rotated archive's or inbox's month folder (`archive/2026-01/`, docs/formats.md "Rotation").
MONTH_FOLDER = re.compile(r"[0-9]{4}-[0-9]{2}")


def entry_to_dict(entry: Entry) -> dict[str, object]:
    """JSON shape of an outbox or inbox entry: the message (or the problem) and where it is
    (`source`: the file's name in its box, with its month folder for a rotated one)."""
    folder = entry.source.parent.name
    source = f"{folder}/{entry.source.name}" if MONTH_FOLDER.fullmatch(folder) else entry.source.name
    data: dict[str, object] = {"key": entry.key, "source": source, "line": entry.line}
    if entry.message is not None:
        data["message"] = message_to_dict(entry.message)
    if entry.problem is not None:
        data["problem"] = error_body(entry.problem)["error"]
    return data

"""Cortical-stack's older files: `.cstack/INBOX.md` and `OUTBOX.md` (removed from cortical-stack
in 1.5.0, when messages moved to needlecast) planned as needlecast messages, and the checks of
CURRENT.md, PLAN.md and MEMORY.md, which stay where they are. Core layer (pure).

INBOX/OUTBOX blocks are needlecast's own block form with capitalised keys (`From:`, `Type:`,
`Time:`; `ID`, `To` and `Thread` only when set), so needlecast's reader splits them; a block
without an id gets the id the router derives for it (the same on every run, so a second
migration recognises it). A `Read:` or `Status: read` header, where a tool or a person wrote
one, becomes a read mark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cstack
import needlecast
from moss_files.foundation.errors import MossError
from moss_files.migrate.model import CHANGE, CREATE, SKIP, Item, Where, source_error

INBOX, OUTBOX = "INBOX.md", "OUTBOX.md"
UNKNOWN_SENDER = "unknown"
_READ_WORDS = {"read", "yes", "true", "done", "seen"}


@dataclass(frozen=True, slots=True)
class Planned:
    """The messages of INBOX.md and OUTBOX.md to put into the sleeve's mailbox."""

    items: list[Item]
    inbox: list[Any]  # needlecast.Message
    outbox: list[Any]
    read: list[tuple[str, str]]
    notes: list[str]


def is_read(extra: Mapping[str, Any]) -> bool:
    """Whether a block's extra header keys record that it was read."""
    for key, value in extra.items():
        name = str(key).lower()
        if name in ("read", "seen") and (value is True or str(value).strip().lower() in _READ_WORDS):
            return True
        if name == "status" and str(value).strip().lower() in ("read", "seen"):
            return True
    return False


def plan(
    entries: Mapping[str, Sequence[Any]],  # file name -> needlecast entries
    files: Mapping[str, str],  # file name -> as shown
    known: Mapping[str, set[Any]],
    *,
    inbox_target: str,
    outbox_target: str,
) -> Planned:
    """Items and messages for the entries of INBOX.md (delivered to the sleeve's inbox) and
    OUTBOX.md (queued in its outbox for the router: in cortical-stack an outbox held what was
    not sent yet). Raises SOURCE_INVALID naming the file and line of a block that is not a
    message (all or nothing)."""
    items: list[Item] = []
    inbox: list[Any] = []
    outbox: list[Any] = []
    read: list[tuple[str, str]] = []
    notes: list[str] = []
    for name in (INBOX, OUTBOX):
        for entry in entries.get(name, ()):
            where = Where(files[name], entry.line)
            if entry.message is None:
                problem = entry.problem
                raise source_error(f"a block is not a message: {problem.message if problem else 'unreadable'}", where, cause=problem.code if problem else None)
            message = needlecast.with_key(entry)
            if name == INBOX:
                if not message.sender:
                    message = needlecast.Message(**{**_fields(message), "sender": UNKNOWN_SENDER})
                    notes.append(f"{where}: the message names no sender; it is delivered as from {UNKNOWN_SENDER!r}")
                key = (message.sender or "", message.id or "")
                marked = is_read(message.extra)
                if key in known["inbox"]:
                    items.append(Item("message", message.id or "", where, SKIP, inbox_target, reason="already in the inbox"))
                else:
                    inbox.append(message)
                    known["inbox"].add(key)
                    items.append(Item("message", message.id or "", where, CHANGE if inbox_target.endswith(".md") else CREATE, inbox_target, message.id))
                if marked and key not in known["read"]:
                    read.append(key)
            else:
                if message.id in known["outbox"] or message.id in known["archive"] or message.id in known["dead"]:
                    items.append(Item("message", message.id or "", where, SKIP, outbox_target, reason="already in the outbox or routed"))
                    continue
                if not message.to:
                    notes.append(f"{where}: the message names no recipient; the router will dead-letter it and bounce it to the sender")
                outbox.append(message)
                known["outbox"].add(message.id)
                items.append(Item("message", message.id or "", where, CHANGE if outbox_target.endswith(".md") else CREATE, outbox_target, message.id))
    return Planned(items, inbox, outbox, read, notes)


def _fields(message: Any) -> dict[str, Any]:
    return {name: getattr(message, name) for name in ("id", "sender", "to", "thread", "type", "time", "body", "extra", "capitalised")}


def check(name: str, text: str, shown: str) -> dict[str, Any]:
    """Whether cstack reads one of its files (CURRENT.md, PLAN.md, MEMORY.md): `{path, ok}`,
    with the code, line and message of the first problem, and PLAN.md's warnings."""
    parse = {"CURRENT.md": cstack.parse_current, "PLAN.md": cstack.parse_plan, "MEMORY.md": cstack.parse_memory}[name]
    try:
        parsed = parse(text, shown)
    except MossError as err:
        return {"path": shown, "ok": False, "code": err.code, "line": err.line, "message": err.message}
    warnings = list(getattr(parsed, "warnings", ()) or ())
    result: dict[str, Any] = {"path": shown, "ok": True}
    if warnings:
        result["warnings"] = warnings
    return result

"""The router's delivery journal: `.needlecast/.state/journal.jsonl` of each sender.

Edge layer: owns that one file (per-machine state, git-ignored). It holds one JSON object per
line, each a fact about an outbox entry known by its key `k` and content digest `d`:

    {"k": ..., "d": ..., "op": "delivered", "to": [names], "at": time}
    {"k": ..., "d": ..., "op": "dead", "code": CODE, "at": time}
    {"k": ..., "d": ..., "op": "archived", "at": time}

The facts are also checked where they matter (an inbox never takes a (from, id) twice, an
archive never records an id twice), so the journal is a cache: losing it costs speed, never
correctness. Appends are one write each (`fs.append_line`); a torn last line is skipped.
"""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from moss_files.foundation import fs
from moss_files.foundation.ids import format_time
from needlecast.routing import Record

COMPACT_BYTES = 256 * 1024  # past this size, `compact` drops old records of routed entries
KEEP = timedelta(days=7)  # how long records of entries gone from the outbox are kept
# The most records of entries gone from the outbox that a compaction keeps (the newest): the
# journal's working set, on disk and in a router's memory, is bounded by a count as well as by
# KEEP, however many messages a week brings (docs/formats.md, "Rotation").
KEEP_RECORDS = 1024
# Distinct recipient (and dead-letter code) sets a journal shares among its records: a router's
# memory then holds each set once rather than once a record. Past this many, a set is not shared.
MAX_SHARED_SETS = 256

Event = dict[str, Any]


def delivered_event(key: str, digest: str, to: list[str], at: str) -> Event:
    """The fact that entry `key` (with `digest`) is in the inboxes of `to`."""
    return {"k": key, "d": digest, "op": "delivered", "to": to, "at": at}


def dead_event(key: str, digest: str, code: str, at: str) -> Event:
    """The fact that entry `key` has its dead letter (and bounce) for `code`."""
    return {"k": key, "d": digest, "op": "dead", "code": code, "at": at}


def archived_event(key: str, digest: str, at: str) -> Event:
    """The fact that entry `key` is in its sender's archive."""
    return {"k": key, "d": digest, "op": "archived", "at": at}


def merge_deliveries(events: list[Event]) -> list[Event]:
    """One `delivered` event per entry, listing all its new recipients, in first-seen order."""
    merged: dict[str, Event] = {}
    for event in events:
        if event["k"] in merged:
            merged[event["k"]]["to"] = merged[event["k"]]["to"] + event["to"]
        else:
            merged[event["k"]] = dict(event)
    return list(merged.values())


def _encode(events: list[Event]) -> bytes:
    return b"".join(json.dumps(e, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n" for e in events)


class Journal:
    """One sender's journal: the records it holds, re-read when another process appended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, Record] = {}
        self._size = -1
        self._torn = False  # the file ends in a torn line (a power cut mid-append)
        self._compacted = 0  # the file's size after this process last compacted it
        self._shared: dict[frozenset[str], frozenset[str]] = {}  # one copy of each name set
        self._last_at = ""  # the events of one pass share their time: one copy of it

    def load(self) -> Journal:
        """Re-read the journal if it changed on disk (another router process appended).

        Raises InvalidDocument SYMLINK_REFUSED when the journal is a link.
        """
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size == self._size:
            return self
        self.records = {}
        try:
            data = fs.read_bytes(self.path)
        except FileNotFoundError:
            data = b""
        for line in io.BytesIO(data):  # a line at a time: no list of every line beside the data
            try:
                self._apply(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a torn last line after a power cut: the facts are rechecked anyway
        self._size = size
        self._torn = not data.endswith(b"\n") and bool(data)
        return self

    def _apply(self, event: Event) -> None:
        key = event["k"]
        record = self.records.get(key)
        if record is None or record.digest != event["d"]:
            record = self.records[key] = Record(event["d"])
        at = event.get("at", record.at)
        record.at = at if at != self._last_at else self._last_at
        self._last_at = record.at
        op = event["op"]
        if op == "delivered":
            record.delivered = self._share(record.delivered.union(event["to"]))
        elif op == "dead":
            record.dead = self._share(record.dead.union((event["code"],)))
        elif op == "archived":
            record.archived = True

    def _share(self, names: frozenset[str]) -> frozenset[str]:
        """`names` as the one copy that every record with the same names holds."""
        found = self._shared.get(names)
        if found is not None:
            return found
        if len(self._shared) < MAX_SHARED_SETS:
            self._shared[names] = names
        return names

    def get(self, key: str) -> Record | None:
        """What the journal knows about entry `key`."""
        return self.records.get(key)

    def write(self, events: list[Event], *, durable: bool = True) -> None:
        """Append events as one write, then apply them. With `durable` False the append is not
        fsynced: the caller makes the journal durable later, with the rest of its pass."""
        if not events:
            return
        payload = _encode(events)
        self.load()  # catch up first, so our own append is not mistaken for someone else's
        if self._torn:
            payload = b"\n" + payload  # end the torn line, or it would swallow our first record
            self._torn = False
        fs.append_line(self.path, payload, durable=durable)
        for event in events:
            self._apply(event)
        self._size += len(payload)

    def oversized(self) -> bool:
        """True when the file has grown past COMPACT_BYTES and to twice its size after the last
        compaction: when the records it must keep (a week's) fill more than COMPACT_BYTES, a
        compaction after every pass would rewrite them all each time."""
        try:
            return self.path.stat().st_size >= max(COMPACT_BYTES, 2 * self._compacted)
        except FileNotFoundError:
            return False

    def compact(self, keep: set[str], now: datetime) -> None:
        """Rewrite the journal without the records of entries not in `keep` (those still
        pending) that are older than KEEP or beyond the KEEP_RECORDS newest. Recent records
        stay: they let the router recognise a routed block that an editor's stale save puts
        back into the outbox (without one, the inboxes are asked again: a cost in time only)."""
        older_than = format_time(now - KEEP)
        gone = [(record.at, key) for key, record in self.records.items() if key not in keep and record.at >= older_than]
        recent = {key for _at, key in sorted(gone)[-KEEP_RECORDS:]} if KEEP_RECORDS else set()
        events: list[Event] = []
        for key, record in self.records.items():
            if key not in keep and key not in recent:
                continue
            if record.delivered:
                events.append(delivered_event(key, record.digest, sorted(record.delivered), record.at))
            events.extend(dead_event(key, record.digest, code, record.at) for code in sorted(record.dead))
            if record.archived:
                events.append(archived_event(key, record.digest, record.at))
        data = _encode(events)
        fs.write_atomic(self.path, data)
        self._compacted = len(data)
        self._size = -1
        self.load()

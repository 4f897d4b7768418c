"""Board files under `.moss/board/`: read them all (with a stat-keyed cache), create, edit,
delete, append to the activity log, and the board-wide writer lock.

Edge layer: owns the board folder; every byte goes through `fs` (atomic durable writes,
exclusive creates, O_APPEND log lines). Layout, relative to the workspace root:

    .moss/board/project.md              settings and global rails (optional: defaults apply)
    .moss/board/epics/<EPIC-id>.md      one file per epic; the body is its description
    .moss/board/tasks/<TASK-id>.md      one file per task; the body is its description
    .moss/board/workers/<worker>.md     one file per worker (its name is the agent's id)
    .moss/board/teams/<TEAM-id>.md      one file per team
    .moss/board/proposals/<PROP-id>.md  one file per rail proposal; the body is the reason
    .moss/board/activity/<day>.jsonl    the append-only activity log, a file per UTC day
                                        (union-merged by git; see `activity`)
    .moss/board/chat/<channel>.jsonl    one chat channel's lines (union-merged by git)
    .moss/board/comments/<TASK-id>.jsonl  a task's comments and questions (union-merged by git)
    .moss/run/.board.lock               the writers' lock (per machine, git-ignored)
    .moss/run/board/cursors/<worker>.json  a worker's chat read positions (per machine)
    .moss/cache/board.json              parsed items keyed by file stat (derived, git-ignored)
    .moss/cache/activity.json           what each activity file holds (derived, see `activity`)

A file's stem is its id. Readers take no lock: every file is replaced by rename, so a reader
sees the old or the new bytes, never a mix. Writers hold the board lock for the whole of one
operation (read the board, decide, write), which serializes them across threads and processes.

Reading thousands of frontmatters costs seconds, so what each file parsed to is kept by the
file's stat key (inode, size, mtime, ctime): in memory for the store's life (a server's), and
in `.moss/cache/board.json` for the next process (a CLI command). A load checks every file:
it lists each folder and takes the stat of every file in it, because a hand edit in place
changes nothing but the file itself; a file whose key differs is read again, and one changed
too recently for its key to reveal the next change (the racy window) has its bytes compared
with those it was parsed from. A long-lived store instead watches its folders and files
(`_Watch`, Linux inotify on local file systems): the kernel names every file changed since the
last load, and only those are checked. Either way a load's answer is the files' answer.
One exception, for claims only (`outline(..., bounded=True)`, see `_Checked`): a store without
watches may take the cache file's newest full check, under CHECK_TRUSTED_NS old, while every
folder's stat is the one recorded since, looking again only at the files moss wrote since and
those the check left open; an edit in place by another program may then go unseen that long,
so the claim checks the files its decision rests on under the lock.

The cache file holds each folder's names and stat keys as columns, each file's record (decoded
on first need), and for tasks an *outline* (every field but OUTLINE_OMITS) grouped by status,
so that `outline()`, which claims and listings use, builds only the tasks it weighs, and per
status each task's RANK_FIELDS values, so that a claim ranks a thousand candidates from a
small document and builds the few it weighs from their records. Files
read since it was written are appended to it as delta lines (it is written anew only when they
grow many, and never under the board lock), so a claim does not rewrite it. It is always
safe to delete, and one that cannot be read or written is not used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import MISSING, dataclass, field, fields, replace
from operator import attrgetter, itemgetter
from pathlib import Path, PurePosixPath
from typing import Any

from moss_files.board import activity, files, threads
from moss_files.board.model import (
    ACTIVE,
    RANK_FIELDS,
    Board,
    Epic,
    Event,
    Project,
    Proposal,
    Step,
    Task,
    Team,
    Worker,
    default_project,
    is_valid_name,
)
from moss_files.foundation import collector, document, fs, inotify, structured
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound
from moss_files.foundation.inotify import Unavailable

BOARD_DIR = PurePosixPath(".moss/board")
LOCK_TARGET = PurePosixPath(".moss/run/board")
CACHE_FILE = PurePosixPath(".moss/cache/board.json")
# Bump when parsing changes what an item holds, or the file's layout changes, so caches
# written by older code are dropped.
CACHE_VERSION = 3
# A store that has read at least this many files without a cache file writes one (fewer cost
# less to read again next time than the writing would); with one, the files read since are
# appended to it, and it is written anew once the appended ones pass this many (every process
# decodes them all).
CACHE_REWRITE_AFTER = 64
# A store loaded this many times lives long (a server's): it watches its folders' file events
# (`_Watch`) rather than take the stat of every file at every load.
WATCH_AFTER = 2
# A watching store whose board has at least this many files takes the objects alive out of the
# cyclic collector's full collections after its first watching load (`collector.retire_alive`).
KEEP_OUT_OF_COLLECTIONS_AT = 1000
# A folder of at least this many files read from scratch is read with the cyclic collector paused.
PAUSE_COLLECTOR_AT = 1000
# How long a full check of the board (the stat of every file) stays the basis of a claim in a
# process without file watches (`outline(..., bounded=True)`): within it, only the files moss
# wrote since (named in the cache file) and those the check could not settle are looked at
# again, and the folders' own stat must be the one recorded; so an edit in place by another
# program (an editor, `sed -i` keeps a rename and is seen at once) is seen at most this late.
CHECK_TRUSTED_NS = 1_000_000_000
PROJECT_FILE = "project.md"
THREAD_FOLDERS = {"chat": "chat", "comments": "comments"}
CURSOR_DIR = PurePosixPath(".moss/run/board/cursors")
FOLDERS = {"epic": "epics", "task": "tasks", "worker": "workers", "team": "teams", "proposal": "proposals"}
MAX_FILE_BYTES = 1024 * 1024
MAX_LOG_LINE_BYTES = activity.MAX_LINE_BYTES
LOCK_TIMEOUT = 30.0
# A store waiting for the board lock looks at the file events (`_catch_up`) at most once in
# this long: each look costs a waiter a few hundred microseconds of CPU whatever it settles,
# and with 8 claimers on 2 cores the 7 waiters looking after every claim took ~2.8 ms of CPU a
# claim from the machine the lock's holder runs on (bench/board.py's claims/s rows). One look
# in this long settles several claims' files at once; the load under the lock checks the rest
# (measured at ~90 claims/s: ~3.4 looks a claim instead of ~9.4, the waiters' CPU 1.8 ms a
# claim instead of 2.7, the holder's 0.4 ms more).
CATCH_UP_SECONDS = 0.02
# A file changed this recently may change again within the same timestamp tick without its
# stat changing (an edit in place of the same size, or a replace that reuses the freed inode),
# so its stat alone is not trusted: its bytes are compared. File systems that keep whole
# seconds (FAT keeps two) need the long window; a timestamp with a fraction of a second shows
# finer ones, whose tick is the kernel's coarse clock (at most 10 ms), so a short window
# suffices and a burst of writes does not make every load re-read every file written in the
# last two seconds.
COARSE_RACY_NS = 2_000_000_000
FINE_RACY_NS = 50_000_000
# The task fields an outline leaves out: the long texts and the lists of records (the
# description, the plan and its steps, rails, evidence, notes). An outline carries every other
# field, so a field added to Task is in outlines unless named here: a rule that weighs tasks
# (claims, leases, approvals, listings) must read none of these from an outline; the task it
# picks is read in full from its file.
OUTLINE_OMITS = (
    "description",
    "definition_of_done",
    "task_rails",
    "plan",
    "reopen_reason",
    "pr_link",
    "test_file",
    "work_summary",
    "review_summary",
    "verification",
    "handoffs",
    "prior_attempt",
    "critique",
    "source",
)
OUTLINE_FIELDS = tuple(f.name for f in fields(Task) if f.name not in OUTLINE_OMITS)

_PARSERS: dict[str, Callable[..., Any]] = {
    "epic": files.parse_epic,
    "task": files.parse_task,
    "worker": files.parse_worker,
    "team": files.parse_team,
    "proposal": files.parse_proposal,
}
_RENDERERS: dict[str, Callable[[Any], str]] = {
    "epic": files.render_epic,
    "task": files.render_task,
    "worker": files.render_worker,
    "team": files.render_team,
    "proposal": files.render_proposal,
}
_LABEL = {"epic": "Epic", "task": "Task", "worker": "Worker", "team": "Team", "proposal": "Proposal"}
_BOARD_KINDS = ("epic", "task", "worker", "team")

StatKey = tuple[int, int, int, int]


class _CacheDamaged(Exception):
    """The cache file held something it should not: it is dropped and the files read."""


@dataclass(slots=True)
class _Read:
    """One file as this store last read it: its stat key, what it parsed to (the entity, or
    the MossError its file raised), the digest of its bytes, and whether it was changed too
    recently for its key to be trusted alone."""

    key: StatKey
    value: Any
    digest: bytes
    racy: bool
    outline: Task | None = None
    record: bytes | None = None  # the value as the cache file holds it, once written there
    # The parsed document of a worker file this store wrote (`_wrote_file`): its next edit (a
    # heartbeat, the next claim) starts from it while the file's bytes are still those
    # (`digest`), instead of parsing them. Workers alone: few, and written again and again.
    parsed: document.Document | None = None

    def saved_form(self) -> bytes:
        if self.record is None:
            self.record = json.dumps(_to_record(self.value), separators=(",", ":")).encode("utf-8")
        return self.record


@dataclass(slots=True)
class _Checked:
    """The newest full check of the board the cache file records (a `{"checked": …}` line):
    when it started (wall clock, ns), each folder's stat key (inode, mtime, ctime) taken
    before it was listed, and per folder the names it could not settle for good (files in
    their racy window, files that do not read); then, from the delta lines after it, the
    names moss wrote or read since (checked again by a bounded load) and each folder's stat
    key after the newest of those writes."""

    at_ns: int
    folders: dict[str, tuple[int, int, int] | None]  # None: no such folder
    check: dict[str, set[str]]


@dataclass(frozen=True, slots=True)
class Head:
    """What a claim's first look needs of its candidates (`outline(..., head=...)`): of the
    tasks in `statuses` that nobody holds in flight, only the first `count` in the order
    `order(board)` keys them (`board` holds the epics, workers and teams, no tasks; the key
    takes a task's RANK_FIELDS values, read from its rank row without building it). A claim weighs its candidates in that order and most
    take the first, so the thousand others need no outline; every other task `outline`
    gives is there as without a head, so a decision that falls on one of those first tasks is
    the one the whole board gives (see `claims.claim_next_task`)."""

    statuses: frozenset[str]
    count: int
    order: Callable[[Board], Callable[[tuple[Any, ...]], Any]]  # the key over a task's RANK_FIELDS values


class _CacheBody:
    """The cache file's bytes, read as they are asked for (by absolute position): each
    folder's columns in one read each at the start (`prefetch`), a record alone, and the whole
    file at once after many records (a listing of every task). A claim needs the columns and a
    few records of a file that holds every task's record. Its own descriptor keeps the file
    it read, even after another process writes the cache file anew."""

    MISSES_BEFORE_WHOLE = 32

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self.blocks: list[tuple[int, bytes]] = []
        self.whole: bytes | None = None
        self.misses = 0
        self._closer = weakref.finalize(self, os.close, fd)

    def read(self, start: int, end: int) -> bytes:
        if not 0 <= start <= end <= self.size:
            raise _CacheDamaged
        try:
            data = os.pread(self.fd, end - start, start)
        except OSError:
            raise _CacheDamaged from None
        if len(data) != end - start:
            raise _CacheDamaged  # cut short: not a file this code wrote (it only appends)
        return data

    def prefetch(self, start: int, end: int) -> None:
        if end > start:
            self.blocks.append((start, self.read(start, end)))

    def __getitem__(self, part: slice) -> bytes:
        start, end = part.start, part.stop
        if not 0 <= start <= end <= self.size:
            raise _CacheDamaged
        if self.whole is not None:
            return self.whole[start:end]
        for at, block in self.blocks:
            if at <= start and end <= at + len(block):
                return block[start - at : end - at]
        self.misses += 1
        if self.misses > self.MISSES_BEFORE_WHOLE:
            self.whole = self.read(0, self.size)
            self.blocks.clear()
            return self.whole[start:end]
        return self.read(start, end)


class _Saved:
    """One board folder as the cache file holds it: the names of its files and their stat
    keys, and their records, decoded on first need; for tasks also each one's status, the
    places of those held in flight, and per status a group of outline rows and one of rank
    rows (each task's RANK_FIELDS values), each decoded on first need. Names, keys, spans and
    statuses are plain columns (text lines, machine integers, one byte per task): a fresh
    process reads thousands of them before every claim."""

    __slots__ = (
        "kind",
        "names",
        "index",
        "key_column",
        "_keys",
        "spans",
        "data",
        "offset",
        "values",
        "status",
        "statuses",
        "groups",
        "ranks",
        "rows",
        "rows_of",
        "ranked",
        "outlines",
        "by_status",
        "held",
        "_held_set",
    )

    def __init__(self, kind: str, section: dict[str, Any], data: _CacheBody, offset: int) -> None:
        self.kind = kind
        self.data = data
        self.offset = offset  # where the spans count from
        count = section["count"]
        names = self._part(section["names"])
        if count and not _cached_names_valid(names):
            raise _CacheDamaged  # not a cache this code wrote
        self.names: list[str] = names.decode("ascii").split("\n") if count else []
        self.key_column = self._numbers(section["keys"])
        self._keys: list[int] | None = None
        self.spans = self._numbers(section["spans"])
        if not isinstance(count, int) or len(self.names) != count or len(self.key_column) != 4 * count or len(self.spans) != 2 * count:
            raise _CacheDamaged
        self.index = dict(zip(self.names, range(count), strict=True))
        if kind != "task" and count:
            # Every epic, worker and team is built at each load: their records (together, just
            # before these columns) in one read, not one each (and then the whole file).
            data.prefetch(offset + self.spans[0], offset + self.spans[-1])
        self.values: dict[int, Any] = {}
        # Each task's status as one byte: its place in `statuses` (no string to make per task).
        self.status = b""
        self.statuses: list[str] = []
        self.groups: dict[str, list[int]] = {}
        self.ranks: dict[str, list[int]] = {}
        self.held: list[int] = []
        if kind == "task":
            self.status = self._part(section["status"])
            self.statuses = section["statuses"]
            self.groups = section["groups"]
            self.ranks = section["ranks"]
            self.held = section["held"]
            if len(self.status) != count or not isinstance(self.groups, dict) or not isinstance(self.ranks, dict):
                raise _CacheDamaged
            if not isinstance(self.statuses, list) or len(self.statuses) > 256:
                raise _CacheDamaged
            if self.status.translate(None, _CODES[: len(self.statuses)]) or any(not isinstance(each, str) for each in self.statuses):
                raise _CacheDamaged  # a byte that names no status
            if not isinstance(self.held, list) or any(not isinstance(at, int) or not 0 <= at < count for at in self.held):
                raise _CacheDamaged
        self._held_set: set[int] | None = None
        self.rows: dict[int, list[Any]] = {}
        self.rows_of: set[str] = set()  # the statuses whose outline rows are decoded
        self.ranked: dict[int, tuple[Any, ...]] = {}
        self.outlines: dict[int, Task] = {}
        self.by_status: dict[str, list[int]] | None = None

    def _part(self, span: list[int]) -> bytes:
        start, end = span
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            raise _CacheDamaged
        return self.data[self.offset + start : self.offset + end]

    def _numbers(self, span: list[int]) -> array[int]:
        numbers = array("q")
        numbers.frombytes(self._part(span))  # ValueError for a length that is no multiple of 8
        return numbers

    def status_of(self, position: int) -> str:
        """The status of the task at `position`."""
        return self.statuses[self.status[position]]

    def places(self, status: str) -> list[int]:
        """The places of the tasks the cache file holds in `status` (from its outline rows when
        decoded, else its rank rows, decoded)."""
        if self.by_status is None:
            self.by_status = {}
        found = self.by_status.get(status)
        if found is None:
            found = self.by_status[status] = self._decode_ranks(status) if status in self.groups else []
        return found

    def rank(self, position: int) -> tuple[Any, ...]:
        """The RANK_FIELDS values of the task at `position` (its status's rank rows decoded on
        first need)."""
        found = self.ranked.get(position)
        if found is None:
            status = self.status_of(position)
            if status in self.rows_of:  # its outline rows hold the values too
                try:
                    return _ROW_RANK_FIELDS(self.outline_row(position))
                except IndexError:
                    raise _CacheDamaged from None  # an outline row cut short
            self.places(status)
            found = self.ranked.get(position)
            if found is None:
                raise _CacheDamaged
        return found

    def decode_rows(self, statuses: Collection[str]) -> None:
        """Decode the outline rows of these statuses' groups at once (outlines of many tasks
        follow: one JSON document each group, not one record each task)."""
        for status in statuses:
            if status in self.groups and status not in self.rows_of:
                self._decode_rows(status)

    def held_places(self) -> list[int]:
        """The places of the tasks the cache file holds as held in flight."""
        return self.held

    def held_set(self) -> set[int]:
        """`held_places` as a set (made on first need)."""
        if self._held_set is None:
            self._held_set = set(self.held)
        return self._held_set

    @property
    def keys(self) -> list[int]:
        """Every file's stat key, four integers each, as a list (made on first need: a list's
        items are ready objects, quicker to compare one by one in a walk over every file)."""
        if self._keys is None:
            self._keys = self.key_column.tolist()
        return self._keys

    def key(self, position: int) -> StatKey:
        at = 4 * position
        column = self.key_column
        return (column[at], column[at + 1], column[at + 2], column[at + 3])

    def raw(self, position: int) -> bytes:
        """The record of the file at `position`, as the cache file's JSON bytes."""
        return self.data[self.offset + self.spans[2 * position] : self.offset + self.spans[2 * position + 1]]

    def value(self, position: int) -> Any:
        """The entity of the file at `position`. Raises _CacheDamaged for a record that does not
        decode into one."""
        found = self.values.get(position)
        if found is None:
            try:
                found = _from_record(_CLASSES[self.kind], json.loads(self.raw(position)))
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                raise _CacheDamaged from None
            self.values[position] = found
        return found

    def outline(self, position: int) -> Task:
        """The outline of the task at `position`: from its outline row when its group is
        decoded, else from its record (a claim outlines a few dozen of a thousand candidates)."""
        found = self.outlines.get(position)
        if found is None:
            row = self.rows.get(position)
            if row is None:
                row = self.outline_row(position) if self.status_of(position) in self.rows_of else _outline_row(self.value(position))
            try:
                found = _outline_task(row)
            except (TypeError, IndexError, ValueError):
                raise _CacheDamaged from None
            self.outlines[position] = found
        return found

    def outline_row(self, position: int) -> list[Any]:
        """The outline row of the task at `position`, as saved (its group decoded on first need)."""
        row = self.rows.get(position)
        if row is None:
            status = self.status_of(position)
            if status not in self.rows_of:
                self._decode_rows(status)
            row = self.rows.get(position)
            if row is None:
                raise _CacheDamaged
        return row

    def _decoded(self, status: str, groups: dict[str, list[int]]) -> list[tuple[int, list[Any]]]:
        """The rows of one status's group in `groups` (outline or rank rows), each with its
        place, checked: a place of a task in that status."""
        span = groups.get(status)
        if not isinstance(span, list) or status not in self.statuses:
            raise _CacheDamaged
        code = self.statuses.index(status)
        try:
            rows = [(at, values) for at, *values in json.loads(self._part(span))]
        except (ValueError, TypeError, IndexError):
            raise _CacheDamaged from None
        if any(not isinstance(at, int) or not 0 <= at < len(self.names) or self.status[at] != code for at, _values in rows):
            raise _CacheDamaged
        return rows

    def _decode_ranks(self, status: str) -> list[int]:
        """Decode the rank rows of one status's group; their places."""
        rows = self._decoded(status, self.ranks)
        if any(len(values) != len(RANK_FIELDS) for _at, values in rows):
            raise _CacheDamaged
        self.ranked.update((at, tuple(values)) for at, values in rows)
        return [at for at, _values in rows]

    def _decode_rows(self, status: str) -> None:
        """Decode the outline rows of one status's group."""
        rows = self._decoded(status, self.groups)
        self.rows.update(rows)
        self.rows_of.add(status)
        if self.by_status is None:
            self.by_status = {}
        self.by_status.setdefault(status, [at for at, _values in rows])  # no rank rows needed for them


@dataclass(slots=True)
class _Selection:
    """A watched folder's outlines of the tasks in some statuses and those held in flight
    (`chosen`, by file name), kept from load to load with the names changed since; and the
    last answer `BoardStore._outlines` gave from it (those with their dependencies, by id in
    name order), with the names of the dependencies not chosen (`needed`)."""

    chosen: dict[str, Task]
    changed: set[str] = field(default_factory=set)
    answer: dict[str, Task] | None = None
    needed: set[str] = field(default_factory=set)


def _patched(
    answer: dict[str, Task], name: str, before: Task | None, after: Task | None, needed: set[str], entries: dict[str, Any], saved: _Saved | None
) -> dict[str, Task] | None:
    """`answer` with the change of the file `name` (its outline in the selection `before` and
    `after`, None when not chosen) put in place; None when the change adds or removes an entry,
    or changes a chosen task's dependencies: the answer is then made anew."""
    if before is not None or after is not None:
        if before is None or after is None or before.depends_on != after.depends_on:
            return None
        answer[name[:-3]] = after
    elif name in needed:  # a dependency of a chosen task, not chosen itself
        source = entries.get(name)
        if source is None or name[:-3] not in answer:
            return None
        answer[name[:-3]] = _outline_of(saved, source)
    return answer


class _Folder:
    """One board folder as a load found it: each item file by name, in name order, with its
    source (its place in the cache file, or how the store read it), and each file that cannot
    be read with its problem. For tasks, the ones read (not from the cache file) are indexed
    by status and holder as they come and go; with the cache file's own grouping of its
    places, `select` costs what it selects. A watched folder's is kept from load to load and
    changed where events name files."""

    __slots__ = ("saved", "tasks", "entries", "problems", "read_status", "read_held", "ordered", "selections", "kept_entities")

    def __init__(self, saved: _Saved | None, *, tasks: bool) -> None:
        self.saved = saved  # what the places in `entries` refer to
        self.tasks = tasks
        self.entries: dict[str, int | _Read] = {}
        self.problems: dict[str, MossError] = {}
        self.read_status: dict[str, set[str]] = {}
        self.read_held: set[str] = set()
        self.ordered = True
        # A watched folder's outlines by the statuses asked (`BoardStore._outlines`), kept from
        # load to load with the names changed since, which alone are looked at again.
        self.selections: dict[frozenset[str], _Selection] = {}
        # Likewise its entities by id (`BoardStore._entities`), with the names changed since.
        self.kept_entities: tuple[dict[str, Any], set[str]] | None = None

    def touch(self, name: str) -> None:
        for selection in self.selections.values():
            selection.changed.add(name)
        if self.kept_entities is not None:
            self.kept_entities[1].add(name)

    def put(self, name: str, source: int | _Read) -> None:
        if self.selections or self.kept_entities is not None:
            self.touch(name)
        old = self.entries.get(name)
        self.problems.pop(name, None)
        if old is None:
            self.ordered = False
        elif isinstance(old, _Read) and self.tasks:
            self._unindex(name, old)
        self.entries[name] = source
        if isinstance(source, _Read) and self.tasks:
            task = source.value
            self.read_status.setdefault(task.status, set()).add(name)
            if task.assigned_worker is not None and task.status in ACTIVE:
                self.read_held.add(name)

    def fail(self, name: str, problem: MossError) -> None:
        self.drop(name)
        self.problems[name] = problem

    def take(self, name: str, read: _Read | None) -> None:
        """Record what reading `name` gave: gone (None), a problem, or its value."""
        if read is None:
            self.drop(name)
        elif isinstance(read.value, MossError):
            self.fail(name, read.value)
        else:
            self.put(name, read)

    def drop(self, name: str) -> None:
        if self.selections or self.kept_entities is not None:
            self.touch(name)
        old = self.entries.pop(name, None)
        self.problems.pop(name, None)
        if isinstance(old, _Read) and self.tasks:
            self._unindex(name, old)

    def _unindex(self, name: str, read: _Read) -> None:
        self.read_status.get(read.value.status, set()).discard(name)
        self.read_held.discard(name)

    def items(self) -> Iterator[tuple[str, int | _Read]]:
        """(name, source) of every readable item file, in name order."""
        if not self.ordered:
            self.entries = dict(sorted(self.entries.items()))
            self.ordered = True
        return iter(self.entries.items())

    def problem_list(self) -> list[MossError]:
        return [self.problems[name] for name in sorted(self.problems)]

    def selected(self, name: str, statuses: Collection[str]) -> bool:
        """Whether `select(statuses)` gives `name` (one name's answer, for a kept selection)."""
        source = self.entries.get(name)
        if source is None:
            return False
        if isinstance(source, _Read):
            task = source.value
            return task.status in statuses or (task.assigned_worker is not None and task.status in ACTIVE)
        saved = self.saved
        assert saved is not None
        return saved.status_of(source) in statuses or source in saved.held_set()

    def select(self, statuses: Collection[str]) -> set[str]:
        """The names of the tasks in `statuses`, and of those held in flight."""
        chosen = set(self.read_held)
        for status in statuses:
            chosen.update(self.read_status.get(status, ()))
        saved = self.saved
        if saved is not None:
            names, entries = saved.names, self.entries
            for group in (saved.held_places(), *(saved.places(status) for status in statuses)):
                for position in group:
                    name = names[position]
                    if entries.get(name) == position:  # still the file the cache file holds
                        chosen.add(name)
        return chosen


class _Watch:
    """The file events of a long-lived store's board folders (Linux inotify, local file
    systems only): a watch on each folder (its names) and on each board file (its bytes, also
    when written through another hard link), so that a load checks again only the files named
    since the last one. The kernel queues an event inside the call that made the change, so
    what `drain` returns covers every change finished before it; a folder whose identity
    changed, or a queue that overflowed, is read whole again."""

    FOLDER_MASK = inotify.ENTRIES | inotify.CONTENT | inotify.SELF | inotify.IN_ONLYDIR | inotify.IN_EXCL_UNLINK
    FILE_MASK = inotify.CONTENT | inotify.IN_DONT_FOLLOW

    def __init__(self) -> None:
        self.inotify = inotify.Inotify()
        self.folders: dict[int, str] = {}  # a folder's watch -> its kind
        self.identity: dict[str, tuple[int, int]] = {}  # kind -> (st_dev, st_ino) of the folder watched
        self.files: dict[int, set[tuple[str, str]]] = {}  # a file's watch -> its (kind, name)s
        self.listing: dict[str, _Folder] = {}  # kind -> its files as the last load left them
        self.dirty: dict[str, set[str]] = {}  # kind -> names changed since the last load
        # Open descriptors of the watched folders and of the cache file, for the looks between
        # loads (`_catch_up`); a load opens each folder from the workspace down, and checks it.
        self.fds: dict[str, int] = {}
        self.cache_fd: int | None = None

    def close(self) -> None:
        self.inotify.close()
        for fd in [*self.fds.values(), *([self.cache_fd] if self.cache_fd is not None else [])]:
            os.close(fd)
        self.fds.clear()
        self.cache_fd = None

    def drain(self) -> bool:
        """Take in every queued event: the names they touched are dirty; a folder that went
        away, or an overflowed queue, is read whole at its next load. Whether any came."""
        events = self.inotify.events()
        for wd, mask, name in events:
            if mask & inotify.IN_Q_OVERFLOW:
                self.listing.clear()
                continue
            kind = self.folders.get(wd)
            if kind is not None:
                if mask & (inotify.SELF | inotify.IN_IGNORED | inotify.IN_UNMOUNT):
                    self.forget(kind)
                elif name:
                    self.dirty.setdefault(kind, set()).add(name)
                continue
            owners = self.files.get(wd)
            if owners:
                for kind, name in owners:
                    self.dirty.setdefault(kind, set()).add(name)
                if mask & inotify.IN_IGNORED:
                    del self.files[wd]
        return bool(events)

    def current(self, kind: str, dir_fd: int) -> bool:
        """Whether the folder open as `dir_fd` is the one watched, with its files' events."""
        if kind not in self.listing:
            return False
        info = os.fstat(dir_fd)
        return self.identity.get(kind) == (info.st_dev, info.st_ino)

    def begin(self, kind: str, dir_fd: int) -> None:
        """Watch the folder open as `dir_fd` (its files are watched as they are read)."""
        self.forget(kind)
        wd = self.inotify.add(f"/proc/self/fd/{dir_fd}", self.FOLDER_MASK)  # the descriptor's folder, reached without links
        if wd is None:
            raise inotify.Unavailable("the folder went away")
        info = os.fstat(dir_fd)
        self.folders[wd] = kind
        self.identity[kind] = (info.st_dev, info.st_ino)
        self.fds[kind] = os.dup(dir_fd)
        self.dirty.pop(kind, None)

    def forget(self, kind: str) -> None:
        """Stop trusting a folder's events: its next load reads it whole."""
        self.listing.pop(kind, None)
        self.identity.pop(kind, None)
        for wd in [wd for wd, each in self.folders.items() if each == kind]:
            del self.folders[wd]
        fd = self.fds.pop(kind, None)
        if fd is not None:
            os.close(fd)

    def add_file(self, kind: str, dir_fd: int, name: str) -> None:
        """Watch one file of a watched folder, under this name (a link, not its target)."""
        wd = self.inotify.add(f"/proc/self/fd/{dir_fd}/{name}", self.FILE_MASK)
        if wd is not None:
            self.files.setdefault(wd, set()).add((kind, name))


class BoardStore:
    """The board files of one workspace root (the folder holding `.moss/`)."""

    def __init__(self, root: Path, *, persist: bool = True) -> None:
        self.root = root
        self.base = root / BOARD_DIR
        self.persist = persist
        # A server's threads share one store; loads take turns (each is a few milliseconds).
        self._mutex = threading.RLock()
        self._reads: dict[str, dict[str, _Read]] = {kind: {} for kind in FOLDERS}  # by kind, then file name
        self._project: _Read | None = None
        self._saved: dict[str, _Saved] = {}  # what the cache file held when this store read it
        self._cache_read = False
        self._appended = 0  # records appended to it since its body was written
        self._pending: list[tuple[str, str]] = []  # (kind, name) read since, not yet in it
        self._parsed = 0  # files parsed by this store (not taken from the cache file)
        self._wrote = False  # whether this store wrote the cache file
        self._cache_at: tuple[int, int] | None = None  # (inode, bytes taken in) of the cache file
        self._writers = 0  # this store's operations under the board lock now
        # Per thread inside `writing()`: what its writes left to make durable once the lock is
        # let go (("folder", path) to fsync after a rename, ("file", path) after an append).
        self._owed: dict[int, set[tuple[str, Path]]] = {}
        self._cache_path = str(root / CACHE_FILE)
        self.activity = activity.ActivityLog(root, self.base, persist=persist)
        self._caught_up: tuple[int, int] | None = None  # the cache file's mark at the last look while waiting
        self._caught_up_at = -CATCH_UP_SECONDS  # when that look was (time.monotonic)
        self._loads = 0
        self._watch: _Watch | None = None
        self._watching = True  # until a watch cannot be had here
        self._retired = False  # whether the board it keeps has left the collector's walks
        self._unsaved: dict[str, _Folder] | None = None  # a load's, to save once they end
        self._checked: _Checked | None = None  # the newest full check the cache file records
        # Per thread (a server's threads share the store, and a listing in one must not
        # answer for a claim's outline in another): `front`, the ids of the tasks the last
        # outline's head gave (see `Head`), when it left others of its statuses out; and
        # `trusted`, the folders the last bounded load took from the cache file's check without
        # looking at every file (`confirm` looks at the files a claim chose by), with the
        # cache generation they came from; None when it checked every file.
        self._thread = threading.local()
        self._generation = 0  # counts the cache files this store dropped (`_drop_cache`)

    # ----------------------------------------------------------------- locations

    def path(self, kind: str, item_id: str) -> Path:
        return self.base / FOLDERS[kind] / f"{item_id}.md"

    @property
    def project_path(self) -> Path:
        return self.base / PROJECT_FILE

    def display(self, path: Path) -> str:
        """A path relative to the workspace root, for messages."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    @contextmanager
    def writing(self, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
        """Hold the board-wide writer lock (a flock, released by the kernel if we die).

        Inside it, the task files are written durably (their bytes, then their folder), so a
        claim is on disk before the next writer reads the board. The other writes (a worker's
        heartbeat, an activity line) are durable in their bytes too, but their last fsync (the
        worker folder's after the rename, the activity log's after the append) waits until the
        lock is let go, and is done before this returns or raises: no caller hears of a write
        that is not on disk, and a power cut in between leaves the old worker file or the new
        one, whole, and the log without the line, as a cut just before the write would.

        Raises Conflict LOCK_TIMEOUT when another writer holds it for over `timeout` seconds.
        """
        me = threading.get_ident()
        outer = me not in self._owed
        # A claim walks to the same few board folders a dozen times: each is opened once.
        with fs.folders_held():
            try:
                with fs.locked(self.root / LOCK_TARGET, timeout=timeout, while_waiting=self._paced_catch_up):
                    with self._mutex:
                        self._writers += 1
                        self._owed.setdefault(me, set())
                    try:
                        yield
                    finally:
                        with self._mutex:
                            self._writers -= 1
            finally:
                if outer:
                    self._make_durable(self._owed.pop(me, set()))
            # The cache file is derived: it is brought up to date after the lock is let go, so
            # that no claimer waits on it.
            with self._mutex:
                unsaved, self._unsaved = self._unsaved, None
                if unsaved is not None and not self._writers:
                    self._save(unsaved)

    def _owes(self) -> set[tuple[str, Path]] | None:
        """The calling thread's syncs owed until its `writing()` lets go of the lock; None
        outside one (a write is then made durable at once)."""
        return self._owed.get(threading.get_ident())

    @staticmethod
    def _make_durable(owed: set[tuple[str, Path]]) -> None:
        """The fsyncs a `writing()` left until after the lock (see there)."""
        for what, path in sorted(owed):
            try:
                if what == "folder":
                    fs.fsync_dir(path)
                else:
                    fs.fsync_file(path)
            except FileNotFoundError:
                continue  # gone since: nothing of it is left to make durable

    # ----------------------------------------------------------------- reading

    def load(self) -> Board:
        """Every board file, parsed; files that cannot be read are in `problems`, never dropped."""
        return self._board(None, outline=False)

    def people(self) -> Board:
        """The board without its tasks (`tasks` is empty): the project, and the epics, workers
        and teams in full, every file of those kinds checked now; those that cannot be read are
        in `problems`. For answers about who is on the board and where they talk (chat, a
        worker's sign of life), which rest on no task: a `load` takes every task file (20,000
        of them cost 0.6 s of a fresh `moss board chat send`, issue 29), these few files ~15 ms."""
        problems: list[MossError] = []
        found: dict[str, dict[str, Any]] = {}
        with self._mutex:  # one look, as `load`'s: this store's other threads wait (the lock is reentrant)
            project = self._load_project(problems, time.time_ns())
            for kind in ("epic", "worker", "team"):
                found[kind], trouble = self.load_kind(kind)
                problems.extend(trouble)
        return Board(project=project, epics=found["epic"], tasks={}, workers=found["worker"], teams=found["team"], problems=tuple(problems))

    def outline(self, statuses: Collection[str] | None = None, *, bounded: bool = False, head: Head | None = None) -> Board:
        """The board as claims and listings need it, without building every task: epics,
        workers and teams in full, and in outline (OUTLINE_FIELDS; the other fields hold their
        defaults) the tasks whose status is in `statuses` (every task when None), every task
        somebody holds while it is in flight, and the tasks those depend on. Every file that
        cannot be read is in `problems`, as `load` gives them; every file was checked now.

        With `bounded` (a claim's first look), a store that does not watch the files may answer
        from the cache file's newest full check when it is under CHECK_TRUSTED_NS old and every
        folder's stat is the one recorded since: the files moss wrote since are checked, the
        others are taken as that check found them, so an edit in place by another program may
        be missed for that long. `trusting` then says so, and `confirm` checks the files a
        decision rests on.

        With `head` (a claim's first look, in a store that does not watch the files), of the
        tasks in `head.statuses` that nobody holds only the first `head.count` in its order are
        given; `front` then names them (None when none was left out)."""
        return self._board(statuses, outline=True, bounded=bounded, head=head)

    @property
    def front(self) -> frozenset[str] | None:
        """The ids of the tasks the last outline's head (in this thread) gave, when it left others of its
        statuses out (a decision resting on another task of those statuses is not the whole
        board's); None when that outline holds every task it was asked for."""
        front: frozenset[str] | None = getattr(self._thread, "front", None)
        return front

    @property
    def trusting(self) -> bool:
        """Whether the last load (in this thread) took files from a full check without looking
        at each one."""
        return self._trusted_now() is not None

    def _trusted_now(self) -> tuple[int, dict[str, _Folder]] | None:
        trusted: tuple[int, dict[str, _Folder]] | None = getattr(self._thread, "trusted", None)
        return trusted

    def confirm(self, kind: str, item_ids: Collection[str]) -> bool:
        """Whether the files of these items are still the ones the last load used (or still
        absent): their stat keys, and their bytes within the racy window. True at once when
        that load (in this thread) checked every file; False when the cache file it trusted
        was dropped since."""
        with self._mutex:
            taken = self._trusted_now()
            if taken is None:
                return True
            generation, trusted = taken
            if generation != self._generation:
                return False  # what it took from is gone: nothing left to compare with
            found = trusted.get(kind)
            if found is None or not item_ids:
                return True  # a folder that load read in full, or nothing to look at
            directory = self.base / FOLDERS[kind]
            try:
                dir_fd = fs.open_folder(directory)
            except FileNotFoundError:
                return not any(f"{item_id}.md" in found.entries or f"{item_id}.md" in found.problems for item_id in item_ids)
            except (OSError, MossError):
                return False
            try:
                now_ns = time.time_ns()
                for item_id in item_ids:
                    name = f"{item_id}.md"
                    source = found.entries.get(name) if is_valid_name(item_id) else None
                    try:
                        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except (FileNotFoundError, ValueError):
                        if source is not None or name in found.problems:
                            return False
                        continue
                    if source is None:
                        return False  # there now, not then
                    if isinstance(source, _Read):
                        if not self._still_valid(source, info, dir_fd, name, now_ns):
                            return False
                    elif found.saved is None or found.saved.key(source) != (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns):
                        return False
                return True
            finally:
                os.close(dir_fd)

    def load_kind(self, kind: str) -> tuple[dict[str, Any], list[MossError]]:
        """Every item of one kind by id, and the files of that kind that cannot be read."""
        problems: list[MossError] = []
        with self._mutex:
            for attempt in (1, 2):
                try:
                    self._open_cache()
                    self._look()
                    found = self._sync(kind, problems, time.time_ns())
                    problems.extend(found.problem_list())
                    return self._entities(found), problems
                except _CacheDamaged:
                    if attempt == 2:
                        raise
                    self._drop_cache()
                    problems.clear()
            raise AssertionError("unreachable")

    def _board(self, statuses: Collection[str] | None, *, outline: bool, bounded: bool = False, head: Head | None = None) -> Board:
        with self._mutex:
            try:
                return self._assemble(statuses, outline, bounded, head)
            except _CacheDamaged:
                self._drop_cache()
                return self._assemble(statuses, outline, False, head)

    def close(self) -> None:
        """Stop watching the board's files (a server that shuts down; also done when the store
        is garbage collected)."""
        with self._mutex:
            self._stop_watching()
        self.activity.close()

    def _paced_catch_up(self) -> float | None:
        """`_catch_up` while waiting for the board lock, at most once per CATCH_UP_SECONDS
        (counting the looks that found a new record: the first one after a quiet spell is at
        once). Returns when to be called again: once the pace has run (the waiter sleeps
        until then, instead of waking every few milliseconds to learn it is too early), or
        None after a look that found nothing new (soon: the holder's record is on its way)."""
        now = time.monotonic()
        waited = now - self._caught_up_at
        if waited < CATCH_UP_SECONDS:
            return CATCH_UP_SECONDS - waited
        if not self._catch_up():
            return None
        self._caught_up_at = now
        return CATCH_UP_SECONDS

    def _catch_up(self) -> bool:
        """While waiting for the board lock: take in the file events so far and check the
        files they name, so that the load under the lock has only the holder's changes left to
        check (a watching store; the others must take every stat under the lock anyway).
        Whether it looked (the cache file changed since the last look)."""
        if self._watch is None or not self._mutex.acquire(blocking=False):
            return False
        try:
            if self._watch is None:
                return False
            # A look settles only the names whose writer's record is in the cache file, which
            # every moss writer appends just after its write: until the file changes, the
            # events wait in the kernel's queue (taken by the next look, or the load), and a
            # waiter woken every few milliseconds while a claim holds the lock looks once or
            # twice per claim instead of at every burst of the holder's file events.
            mark = self._cache_mark()
            if mark is not None and mark == self._caught_up:
                return False
            self._caught_up = mark
            if not self._watch.drain():
                return True
            self._take_tail()
            now_ns = time.time_ns()
            for kind in _BOARD_KINDS:
                if self._watch is not None and self._watch.dirty.get(kind) and self._watch.listing.get(kind) is not None:
                    self._catch_up_folder(kind, now_ns)
        except _CacheDamaged:
            self._drop_cache()
        finally:
            self._mutex.release()
        return True

    def _cache_mark(self) -> tuple[int, int] | None:
        """The cache file's (inode, size) now; None without one (or when this store keeps none)."""
        if not self.persist:
            return None
        try:
            info = os.stat(self._cache_path)
        except OSError:
            return None
        return (info.st_ino, info.st_size)

    def _catch_up_folder(self, kind: str, now_ns: int) -> None:
        """`_sync_changed` without parsing: the names whose writer's record (or the source the
        folder has) holds for them are settled now; the rest stay for the load under the lock,
        by which time the writer has recorded what it wrote."""
        watch = self._watch
        assert watch is not None
        dir_fd = watch.fds.get(kind)
        if dir_fd is not None:
            # The folder as watched: had it been replaced since, the load under the lock finds
            # out and reads the new one whole, whatever this settled.
            self._sync_changed(kind, dir_fd, watch, now_ns, parse=False)

    def _look(self) -> None:
        """Take in the file events since the last load; from its WATCH_AFTER-th load on (a
        long-lived store: a server's), a store watches its folders where it can."""
        self._loads += 1
        if self._watch is None and self._watching and self._loads >= WATCH_AFTER:
            self._start_watching()
        watch = self._watch
        # Also when no event came since, but names wait: the look while waiting for the lock
        # (`_catch_up`) took their events before their writer appended its record of them.
        if watch is not None and (watch.drain() or any(watch.dirty.values())):
            self._take_tail()

    def _start_watching(self) -> None:
        watch, self._watching = inotify.start_watch(self.base, _Watch)
        if watch is not None:
            self._watch = watch
            self._unwatch = weakref.finalize(self, watch.close)

    def _stop_watching(self) -> None:
        if self._watch is not None:
            self._unwatch()
            self._watch = None
        self._watching = False

    def _assemble(self, statuses: Collection[str] | None, outline: bool, bounded: bool = False, head: Head | None = None) -> Board:
        self._open_cache()
        self._look()
        problems: list[MossError] = []
        now_ns = time.time_ns()
        project = self._load_project(problems, now_ns)
        synced: dict[str, _Folder] = {}
        self._thread.trusted = None
        self._thread.front = None
        trusted = self._from_check(now_ns) if bounded and self._watch is None else None
        walk: dict[str, Any] | None = None
        if trusted is not None:
            synced = trusted
            self._thread.trusted = (self._generation, trusted)
            # Not a load a long-lived store is told by: a command's claim that looks again at
            # every file after it must not start watching 20,000 files for one more look.
            self._loads -= 1
            for kind in _BOARD_KINDS:
                problems.extend(synced[kind].problem_list())
        else:
            # Every file is checked now: the cache file may record this check, for the
            # bounded loads that follow (each folder's stat key is taken before it is listed).
            walk = {"at": now_ns, "folders": {}} if self._watch is None else None
            for kind in _BOARD_KINDS:
                synced[kind] = self._sync(kind, problems, now_ns, walk)
                problems.extend(synced[kind].problem_list())
        # A watched folder is kept from load to load: so are the answers drawn from it.
        watch = self._watch if trusted is None else None
        watched = {kind: watch is not None and watch.listing.get(kind) is synced[kind] for kind in _BOARD_KINDS}
        board = Board(
            project=project,
            epics=self._entities(synced["epic"], keep=watched["epic"]),
            tasks={},
            workers=self._entities(synced["worker"], keep=watched["worker"]),
            teams=self._entities(synced["team"], keep=watched["team"]),
            problems=tuple(problems),
        )
        if not outline:
            tasks = self._entities(synced["task"])
        elif head is not None and statuses is not None and self._watch is None:
            # A watching store keeps its selections from load to load: a head is for the others.
            tasks, self._thread.front = self._head_outlines(synced["task"], statuses, head, board)
        else:
            tasks = self._outlines(synced["task"], statuses, keep=watched["task"])
        board = replace(board, tasks=tasks)
        if self.persist:
            if walk is not None and (self._saved or self._wrote):
                # Now, before any write that follows this load (a claim's): the line comes
                # before their delta lines, whose folder keys then supersede the check's.
                self._record_check(synced, walk)
            self._save(synced)
        if watch is not None and not self._retired and sum(len(synced[kind].entries) for kind in _BOARD_KINDS) >= KEEP_OUT_OF_COLLECTIONS_AT:
            # The board a watching store keeps from load to load is a few objects per file,
            # none in a reference cycle, and every full collection of the cyclic collector
            # would walk all of them again: 70 ms a collection at 20,000 tasks on a slow
            # machine, inside whichever claim it fell on. Once, after the first load that
            # keeps them, they leave those walks; reference counting still frees each one
            # this store drops.
            self._retired = True
            collector.retire_alive()
        return board

    def _from_check(self, now_ns: int) -> dict[str, _Folder] | None:
        """The board folders as the cache file's newest full check found them, with the files
        moss wrote (or read) since checked again; None when that check is too old or a
        folder's stat is not the one recorded (a name came or went behind moss's back)."""
        checked = self._checked
        if checked is None or not 0 <= now_ns - checked.at_ns <= CHECK_TRUSTED_NS:
            return None
        found: dict[str, _Folder] = {}
        for kind in _BOARD_KINDS:
            if kind not in checked.folders:
                return None
            recorded = checked.folders[kind]
            saved = self._saved.get(kind)
            try:
                dir_fd = fs.open_folder(self.base / FOLDERS[kind])
            except FileNotFoundError:
                if recorded is not None:
                    return None
                found[kind] = _Folder(None, tasks=kind == "task")  # none then, none now
                continue
            except (OSError, MossError):
                return None
            if recorded is None or saved is None:
                os.close(dir_fd)
                return None
            try:
                info = os.fstat(dir_fd)
                if (info.st_ino, info.st_mtime_ns, info.st_ctime_ns) != recorded:
                    return None
                found[kind] = self._sync_checked(kind, dir_fd, saved, checked.check.get(kind, set()), now_ns)
            except PermissionError:
                return None
            finally:
                os.close(dir_fd)
        return found

    def _sync_checked(self, kind: str, dir_fd: int, saved: _Saved, check: set[str], now_ns: int) -> _Folder:
        """One folder as the full check found it: each file in the cache file's body at its
        place, each one a delta line records as that record, and the names in `check` (those
        the check left open and those written since) looked at again now."""
        found = _Folder(saved, tasks=kind == "task")
        found.entries = dict(saved.index)  # the body's names, in name order
        reads = self._reads[kind]
        for name, read in reads.items():
            if name not in check:
                found.take(name, read)
        prefix = f"{BOARD_DIR}/{FOLDERS[kind]}/"
        for name in sorted(check):
            if not is_valid_name(name[:-3]):
                found.fail(name, _bad_name(prefix, name))
                continue
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                found.drop(name)
                reads.pop(name, None)
                continue
            source = reads.get(name)
            position = saved.index.get(name)
            if source is not None and self._still_valid(source, info, dir_fd, name, now_ns):
                fresh: _Read | None = source
            elif source is None and position is not None and saved.key(position) == (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns):
                continue
            else:
                fresh = self._read(kind, dir_fd, name, prefix + name, info, now_ns)
            found.take(name, fresh)
        return found

    def _load_project(self, problems: list[MossError], now_ns: int) -> Project:
        try:
            return self._project_now(now_ns)
        except MossError as err:
            problems.append(err)
            return default_project(self.root.name)

    def read_project(self) -> Project:
        """The project settings (defaults when `project.md` does not exist).

        Raises InvalidDocument when the file exists but cannot be read.
        """
        with self._mutex:
            return self._project_now(time.time_ns())

    def _project_now(self, now_ns: int) -> Project:
        try:
            dir_fd = fs.open_folder(self.base)
        except (FileNotFoundError, InvalidRequest):
            return default_project(self.root.name)  # no board folder yet (or a file in its place: the folders say so)
        try:
            read = self._project
            try:
                info = os.stat(PROJECT_FILE, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                self._project = None
                return default_project(self.root.name)
            if read is None or not self._still_valid(read, info, dir_fd, PROJECT_FILE, now_ns):
                read = self._read("project", dir_fd, PROJECT_FILE, self.display(self.project_path), info, now_ns)
                self._project = read
        finally:
            os.close(dir_fd)
        if read is None:
            return default_project(self.root.name)
        if isinstance(read.value, MossError):
            raise read.value
        project: Project = read.value
        return project

    def _sync(self, kind: str, problems: list[MossError], now_ns: int, walk: dict[str, Any] | None = None) -> _Folder:
        """The item files of one kind as they are now (see `_Folder`): each file's place in the
        cache file when its stat key still matches there, else how this store read it (now,
        when it changed). A folder that cannot be read goes to `problems`.

        Every file is checked: by its stat (and, within the racy window, its bytes), or, while
        this store watches the folder, by the events of the files that changed since the
        last load (the others cannot have)."""
        folder = FOLDERS[kind]
        directory = self.base / folder
        watch = self._watch
        try:
            dir_fd = fs.open_folder(directory)
        except FileNotFoundError:
            if watch is not None:
                watch.forget(kind)
            if walk is not None:
                walk["folders"][kind] = None  # no such folder: a bounded load expects none
            return _Folder(None, tasks=kind == "task")
        except InvalidRequest:
            problems.append(InvalidDocument(f"{folder} must be a folder", code="INVALID_DOCUMENT", path=self.display(directory)))
            return _Folder(None, tasks=kind == "task")
        except MossError as err:  # a link on the way
            problems.append(err)
            return _Folder(None, tasks=kind == "task")
        try:
            if watch is not None:
                try:
                    if watch.current(kind, dir_fd):
                        return self._sync_changed(kind, dir_fd, watch, now_ns)
                    watch.begin(kind, dir_fd)
                    found = self._sync_all(kind, dir_fd, watch, now_ns)
                    watch.listing[kind] = found
                    return found
                except Unavailable:  # no watch to be had here, or the watch limit reached
                    self._stop_watching()
            if walk is not None:
                info = os.fstat(dir_fd)
                walk["folders"][kind] = [info.st_ino, info.st_mtime_ns, info.st_ctime_ns]
            return self._sync_all(kind, dir_fd, None, now_ns)
        except PermissionError as exc:
            # A folder that may be listed but not looked into: no file in it can be read.
            if watch is not None:
                watch.forget(kind)
            problems.append(fs.not_readable(self.display(directory), exc, folder=True))
            return _Folder(None, tasks=kind == "task")
        finally:
            os.close(dir_fd)

    def _sync_all(self, kind: str, dir_fd: int, watch: _Watch | None, now_ns: int) -> _Folder:
        """`_sync` by listing the folder and taking the stat of every file in it (watching each
        first, when `watch` is given)."""
        saved = self._saved.get(kind)
        found = _Folder(saved, tasks=kind == "task")
        entries, failed = found.entries, found.problems
        names = os.listdir(dir_fd)
        names.sort()
        reads = self._reads[kind]
        index = saved.index if saved is not None else {}
        keys = saved.keys if saved is not None else []
        prefix = f"{BOARD_DIR}/{FOLDERS[kind]}/"
        # One stat per file and as little else as can be: on a board of thousands of files,
        # anything more per file (pathlib, tuples, calls) costs more than the stat itself.
        stat_at = os.stat
        nothing: dict[str, _Read] = {}
        read_of = reads.get if reads else nothing.get
        place_of = index.get
        # A folder of thousands of files this store reads for the first time, without a cache
        # file (after a clone), makes a few objects per file and keeps them: see
        # `collector.paused`. Only then: a store that cannot watch lists its folders at every
        # load, and a pause at each would age all the process's new objects unwalked.
        first_read = saved is None and not reads and len(names) >= PAUSE_COLLECTOR_AT
        with collector.paused() if first_read else nullcontext():
            for name in names:
                read = read_of(name)
                if watch is not None and name[:1] != "." and name.endswith(".md"):
                    watch.add_file(kind, dir_fd, name)  # before the look: a change after it is an event
                if read is None:
                    position = place_of(name)
                    if position is not None:
                        try:
                            info = stat_at(name, dir_fd=dir_fd, follow_symlinks=False)
                        except FileNotFoundError:
                            continue  # removed since the listing
                        at = 4 * position
                        if keys[at] == info.st_ino and keys[at + 1] == info.st_size and keys[at + 2] == info.st_mtime_ns and keys[at + 3] == info.st_ctime_ns:
                            entries[name] = position
                            continue
                        read = self._read(kind, dir_fd, name, prefix + name, info, now_ns)
                    elif name[:1] == "." or not name.endswith(".md"):
                        continue  # temp and lock files, notes in other formats
                    elif not is_valid_name(name[:-3]):
                        failed[name] = _bad_name(prefix, name)
                        continue
                    else:
                        try:
                            info = stat_at(name, dir_fd=dir_fd, follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        read = self._read(kind, dir_fd, name, prefix + name, info, now_ns)
                else:
                    try:
                        info = stat_at(name, dir_fd=dir_fd, follow_symlinks=False)
                    except FileNotFoundError:
                        reads.pop(name, None)
                        continue
                    if not self._still_valid(read, info, dir_fd, name, now_ns):
                        read = self._read(kind, dir_fd, name, prefix + name, info, now_ns)
                if read is None:
                    continue
                if isinstance(read.value, MossError):
                    failed[name] = read.value
                else:
                    found.put(name, read)
        found.ordered = True  # every name came in name order
        return found

    def _sync_changed(self, kind: str, dir_fd: int, watch: _Watch, now_ns: int, *, parse: bool = True) -> _Folder:
        """`_sync` of a watched folder: the names its events named are checked again (watched
        first), every other file is as the last load left it. Without `parse`, a name that
        would need parsing stays named for the next load."""
        found = watch.listing[kind]
        prefix = f"{BOARD_DIR}/{FOLDERS[kind]}/"
        reads = self._reads[kind]
        saved = found.saved
        later: set[str] = set()
        for name in sorted(watch.dirty.pop(kind, ())):
            if name[:1] == "." or not name.endswith(".md"):
                continue
            valid = is_valid_name(name[:-3])
            if valid:
                watch.add_file(kind, dir_fd, name)  # before the look: a change after it is an event
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                found.drop(name)
                reads.pop(name, None)
                continue
            if not valid:
                found.fail(name, _bad_name(prefix, name))
                continue
            source = found.entries.get(name)
            if isinstance(source, _Read) and self._still_valid(source, info, dir_fd, name, now_ns):
                continue
            if type(source) is int and saved is not None and saved.key(source) == (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns):
                continue
            offered = reads.get(name)  # what its writer recorded, or a read since
            if offered is not None and offered is not source and self._still_valid(offered, info, dir_fd, name, now_ns):
                found.put(name, offered)
                continue
            if not parse:
                later.add(name)
                continue
            found.take(name, self._read(kind, dir_fd, name, prefix + name, info, now_ns))
        if later:
            watch.dirty.setdefault(kind, set()).update(later)
        return found

    def _still_valid(self, read: _Read, info: os.stat_result, dir_fd: int, name: str, now_ns: int) -> bool:
        """Whether `read` still tells what the file holds: its stat key is the file's and, when
        it was read within the racy window, its bytes are the same too."""
        if read.key != (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns):
            return False
        if not read.racy:
            return True
        if not read.digest:
            return False  # an error reading it: read it again
        try:
            data, _info = fs.read_in(dir_fd, name, max_bytes=MAX_FILE_BYTES)
        except (OSError, MossError):
            return False
        if _digest(data) != read.digest:
            return False
        if now_ns - info.st_ctime_ns >= racy_window(info.st_mtime_ns, info.st_ctime_ns):
            read.racy = False  # past the window now: no later change can keep this key
        return True

    def _read(self, kind: str, dir_fd: int, name: str, shown: str, info: os.stat_result, now_ns: int) -> _Read | None:
        """Read and parse one file (None when it is gone); keep what it parsed to by its key."""
        reads = self._reads[kind] if kind != "project" else None
        try:
            data, info = fs.read_in(dir_fd, shown, max_bytes=MAX_FILE_BYTES)
        except FileNotFoundError:
            if reads is not None:
                reads.pop(name, None)
            return None
        except (MossError, OSError) as exc:
            err = exc if isinstance(exc, MossError) else MossError(f"cannot read file: {exc.strerror}", path=shown)
            value: Any = err
            digest = b""
        else:
            digest = _digest(data)
            try:
                value = self._parse(kind, name[:-3], data, shown)
            except MossError as err:
                value = err
        key: StatKey = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        racy = now_ns - info.st_ctime_ns < racy_window(info.st_mtime_ns, info.st_ctime_ns)
        read = _Read(key, value, digest, racy)
        self._parsed += 1
        if reads is not None:
            reads[name] = read
            if kind in _CLASS_OF_KIND and type(value) is _CLASS_OF_KIND[kind]:
                self._pending.append((kind, name))
        return read

    @staticmethod
    def _entities(found: _Folder, *, keep: bool = False) -> dict[str, Any]:
        """Every item of a folder by id, in name order. With `keep` (a watched folder, kept from
        load to load), the answer is kept and the next call looks again only at the names
        changed since (a name that came or went: every name, to keep the order)."""
        saved = found.saved
        kept = found.kept_entities if keep else None
        if kept is not None:
            values, changed = kept
            for name in changed:
                source = found.entries.get(name)
                if source is None or name[:-3] not in values:
                    break
                values[name[:-3]] = source.value if isinstance(source, _Read) else saved.value(source)  # type: ignore[union-attr]
            else:
                changed.clear()
                return dict(values)
        values = {name[:-3]: source.value if isinstance(source, _Read) else saved.value(source) for name, source in found.items()}  # type: ignore[union-attr]
        if keep:
            found.kept_entities = (values, set())
            return dict(values)
        return values

    @staticmethod
    def _outlines(found: _Folder, statuses: Collection[str] | None, *, keep: bool = False) -> dict[str, Task]:
        """The outlines `outline` gives: the tasks in `statuses` (all when None), those held in
        flight, and their dependencies; in name order, as `load` orders its tasks. With `keep`
        (a watched folder, kept from load to load), the selection is kept for the next call."""
        saved = found.saved
        entries = found.entries
        if saved is not None and found.tasks:
            saved.decode_rows(saved.groups if statuses is None else statuses)
        if statuses is None:
            return {name[:-3]: _outline_of(saved, source) for name, source in found.items()}
        asked = frozenset(statuses)
        kept = found.selections.get(asked) if found.tasks else None
        if kept is not None:
            # A watched folder's selection from its last load: only the names changed since
            # (every put and drop names them) are looked at again, and its last answer is
            # patched where they keep their places in it (a claim's changes: held, still there).
            chosen, answer = kept.chosen, kept.answer
            for name in kept.changed:
                before = chosen.get(name)
                after = _outline_of(saved, entries[name]) if found.selected(name, asked) else None
                if after is None:
                    chosen.pop(name, None)
                else:
                    chosen[name] = after
                if answer is not None:
                    answer = _patched(answer, name, before, after, kept.needed, entries, saved)
            kept.changed.clear()
            if answer is not None:
                return dict(answer)
        else:
            chosen = {name: _outline_of(saved, entries[name]) for name in found.select(statuses)}
            if keep:
                if len(found.selections) >= 4:
                    found.selections.clear()
                kept = found.selections[asked] = _Selection(chosen)
        given = dict(chosen)
        needed = {f"{dep}.md" for task in chosen.values() for dep in task.depends_on} - chosen.keys()
        for name in needed:
            source = entries.get(name)
            if source is not None:
                given[name] = _outline_of(saved, source)
        answer = {name[:-3]: given[name] for name in sorted(given)}
        if kept is None:
            return answer
        kept.answer, kept.needed = answer, needed
        return dict(answer)

    @staticmethod
    def _head_outlines(found: _Folder, statuses: Collection[str], head: Head, board: Board) -> tuple[dict[str, Task], frozenset[str] | None]:
        """`_outlines(found, statuses)` with, of the tasks in `head.statuses` nobody holds in
        flight, only the first `head.count` in `head.order(board)`'s order (each ranked by its
        rank row, without building its task); and the ids of those first tasks, or None when
        none was left out. A ranking that raises (values no sort compares) gives every task."""
        saved = found.saved
        entries = found.entries
        held = saved.held_set() if saved is not None else set()
        if saved is not None:
            saved.decode_rows(set(statuses) - head.statuses)  # outlined whole: from their groups
        wanted = head.statuses
        key = head.order(board)
        ranked: list[tuple[Any, str]] = []
        chosen: dict[str, Task] = {}
        try:
            for name in found.select(statuses):
                source = entries[name]
                if isinstance(source, _Read):
                    task = _outline_of(saved, source)
                    if task.status in wanted and not (task.assigned_worker is not None and task.status in ACTIVE):
                        ranked.append((key(_TASK_RANK_FIELDS(task)), name))
                    else:
                        chosen[name] = task
                elif saved is not None and saved.status_of(source) in wanted and source not in held:
                    ranked.append((key(saved.rank(source)), name))
                else:
                    chosen[name] = _outline_of(saved, source)
            ranked.sort()
        except (TypeError, ValueError):
            return BoardStore._outlines(found, statuses), None
        first = ranked[: head.count]
        for _key, name in first:
            chosen[name] = _outline_of(saved, entries[name])
        needed = {f"{dep}.md" for task in chosen.values() for dep in task.depends_on} - chosen.keys()
        for name in needed:
            dependency = entries.get(name)
            if dependency is not None:
                chosen[name] = _outline_of(saved, dependency)
        front = frozenset(chosen[name].id for _key, name in first) if len(ranked) > head.count else None
        return {name[:-3]: chosen[name] for name in sorted(chosen)}, front

    def _parse(self, kind: str, item_id: str, data: bytes, relpath: str, *, known: document.FrontmatterRead | None = None) -> Any:
        doc = document.parse_bytes(data, relpath, max_bytes=MAX_FILE_BYTES, known=known)
        if kind == "project":
            return files.parse_project(doc, relpath, default_name=self.root.name)
        return _PARSERS[kind](doc, relpath, fallback_id=item_id)

    # ----------------------------------------------------------------- the cache file

    def _open_cache(self) -> None:
        if not self.persist or self._cache_read:
            return
        self._cache_read = True
        try:
            with fs.folder_fd((self.root / CACHE_FILE).parent) as dir_fd:
                fd = fs.open_regular(CACHE_FILE.name, dir_fd=dir_fd)  # a FIFO there: no cache
        except (OSError, MossError):
            return  # no cache: read the files
        try:
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            return
        body = _CacheBody(fd, info.st_size)  # closes the descriptor once unused
        try:
            self._take_cache(body, info.st_ino)
        except (_CacheDamaged, ValueError, TypeError, KeyError, AttributeError, IndexError):
            self._drop_cache()

    def _take_cache(self, data: _CacheBody, inode: int) -> None:
        head = b""
        end = -1
        while end < 0 and len(head) < data.size:
            head = data.read(0, min(data.size, max(1 << 16, 2 * len(head))))
            end = head.find(b"\n")
        if end < 0:
            raise _CacheDamaged
        header = json.loads(head[:end])
        if header.get("version") != CACHE_VERSION or header.get("layout") != _LAYOUT or header.get("byteorder") != sys.byteorder:
            raise _CacheDamaged
        offset = end + 1
        sections = {kind: section for kind, section in header["folders"].items() if kind in FOLDERS}
        for section in sections.values():
            # Each folder's columns lie together after its records: one read for them all. The
            # tasks' outline groups follow (DONE's is most of them): each is read when used.
            spans = [section[name] for name in ("names", "keys", "spans", "status") if name in section]
            groups = [*section.get("groups", {}).values(), *section.get("ranks", {}).values()]
            if any(not isinstance(span, list) or len(span) != 2 or not all(isinstance(at, int) for at in span) for span in spans + groups):
                raise _CacheDamaged
            if spans:
                data.prefetch(offset + min(span[0] for span in spans), offset + max(span[1] for span in spans))
        saved = {kind: _Saved(kind, section, data, offset) for kind, section in sections.items()}
        self._appended = self._take_deltas(data.read(offset + header["body"], data.size))
        self._saved = saved
        self._cache_at = (inode, data.size)

    def _take_deltas(self, data: bytes) -> int:
        """Take in delta lines: the records of files read (or written, with a digest of the
        bytes written) since the cache file was; each is trusted only while the file keeps that
        stat key, and one with a digest only while its bytes match too. Returns how many."""
        taken = 0
        for line in data.split(b"\n"):
            if not line:
                continue
            try:
                entry = json.loads(line)
                if "checked" in entry:
                    self._take_checked(entry["checked"])
                    taken += 1
                    continue
                for kind, name, ino, size, mtime_ns, ctime_ns, record, *written_with in entry["delta"]:
                    if not (name.endswith(".md") and is_valid_name(name[:-3])):
                        raise _CacheDamaged
                    key = (ino, size, mtime_ns, ctime_ns)
                    written = bytes.fromhex(written_with[0]) if written_with else b""
                    known = self._reads[kind].get(name)
                    # What this store holds of the file stays when the line is of that very
                    # write (its own line, read back) or of an older state (a file's ctime
                    # only grows): the record is not decoded again, and a write's parsed
                    # document (`_Read.parsed`) stays for the next edit. Either way a load
                    # checks what it holds against the file before using it.
                    if known is None or not ((known.key == key and written and known.digest == written) or known.key[3] > ctime_ns):
                        self._reads[kind][name] = _Read(key, _from_record(_CLASSES[kind], record), written, bool(written))
                    taken += 1
                    checked = self._checked
                    if checked is not None:
                        # Changed since the check: a bounded load looks at it again; a writer
                        # also records its folder's stat after its write.
                        checked.check.setdefault(kind, set()).add(name)
                        if len(written_with) > 1 and kind in checked.folders:
                            ino_, mtime_, ctime_ = written_with[1]
                            checked.folders[kind] = (int(ino_), int(mtime_), int(ctime_))
            except (ValueError, TypeError, KeyError, AttributeError, IndexError):
                continue  # a line cut short by a crash (the cache is not fsynced)
        return taken

    def _take_checked(self, record: dict[str, Any]) -> None:
        """Take in a full check's line (see `_Checked`); one that does not read is ignored."""
        try:
            folders: dict[str, tuple[int, int, int] | None] = {
                str(kind): None if key is None else (int(key[0]), int(key[1]), int(key[2])) for kind, key in record["folders"].items()
            }
            check = {str(kind): {str(name) for name in names} for kind, names in record["check"].items()}
            at_ns = int(record["at"])
        except (ValueError, TypeError, KeyError, AttributeError):
            self._checked = None
            return
        if any(not (name.endswith(".md") and is_valid_name(name[:-3])) for names in check.values() for name in names):
            self._checked = None  # not a line this code wrote
            return
        self._checked = _Checked(at_ns, folders, check)

    def _take_tail(self) -> None:
        """A watching store: take in the delta lines other processes appended since it read the
        cache file (the records of what they wrote), so the files its events name need not be
        parsed again when their stat keys and bytes are the ones written."""
        if not self.persist or self._cache_at is None:
            return
        inode, offset = self._cache_at
        watch = self._watch
        path = self.root / CACHE_FILE
        try:
            fd = watch.cache_fd if watch is not None else None
            if fd is None or os.stat(self._cache_path).st_ino != os.fstat(fd).st_ino:
                with fs.folder_fd(path.parent) as dir_fd:
                    opened = fs.open_regular(CACHE_FILE.name, dir_fd=dir_fd)
                if fd is not None:
                    os.close(fd)
                fd = opened
                if watch is not None:
                    watch.cache_fd = fd
            try:
                info = os.fstat(fd)
                if info.st_ino != inode:  # written anew: its deltas start after its body
                    head = os.pread(fd, 1 << 20, 0)
                    end = head.find(b"\n")
                    header = json.loads(head[:end]) if end > 0 else {}
                    inode, offset = info.st_ino, end + 1 + int(header.get("body", info.st_size))
                if info.st_size > offset:
                    tail = os.pread(fd, info.st_size - offset, offset)
                    cut = tail.rfind(b"\n") + 1  # a line still being appended waits
                    self._take_deltas(tail[:cut])
                    offset += cut
            finally:
                if watch is None:
                    os.close(fd)
        except (OSError, MossError, ValueError, TypeError):
            return
        self._cache_at = (inode, offset)

    def _drop_cache(self) -> None:
        """Forget the cache file: from now on this store reads the files (and writes a new one)."""
        self._saved = {}
        if self._watch is not None:
            self._watch.listing.clear()  # it names places in the cache file: read the folders whole
        for reads in self._reads.values():
            reads.clear()
        self._project = None
        self._appended = 0
        self._pending.clear()
        self._checked = None
        self._generation += 1

    def _save(self, synced: dict[str, _Folder]) -> None:
        """Bring the cache file up to date with what this store read: append the new reads, or
        write it anew when there is none yet (and enough to keep) or the appended ones grew
        many. Under the board lock this waits until the lock is let go."""
        if self._writers:
            self._unsaved = synced
            return
        pending = list(dict.fromkeys((kind, name) for kind, name in self._pending if (read := self._reads[kind].get(name)) is not None and not read.racy))
        if not pending:
            if self._appended > CACHE_REWRITE_AFTER and (self._saved or self._wrote) and self._watch is None:
                self._rewrite(synced)  # full checks' lines alone grew many: every process reads them
            return
        if not self._saved and not self._wrote:  # no cache file this store can use
            if self._parsed >= CACHE_REWRITE_AFTER:
                self._rewrite(synced)
        elif self._watch is not None:
            # A server's store: the files it reads again are mostly what other servers wrote,
            # which they read again too; the commands that start after them bring the cache
            # file up to date, once.
            self._pending.clear()
        elif self._appended + len(pending) <= CACHE_REWRITE_AFTER:
            self._append(pending)
        else:
            self._rewrite(synced)

    def _record_check(self, synced: dict[str, _Folder], walk: dict[str, Any]) -> None:
        """Append the line of a full check: when it began, each folder's stat key before it
        was listed, and the names the cache file does not settle: files in their racy window
        (which it leaves out), files that do not read, and files read now whose records are
        not in it yet (appended after this line, or not at all)."""
        if set(walk["folders"]) != set(_BOARD_KINDS):
            return  # a folder missing or unreadable: bounded loads check every file
        unsaved: dict[str, set[str]] = {}
        for kind, name in self._pending:
            unsaved.setdefault(kind, set()).add(name)
        check: dict[str, list[str]] = {}
        for kind in _BOARD_KINDS:
            found = synced[kind]
            waiting = unsaved.get(kind, set())
            # Only files read (not taken from the body) can be either: look at those alone.
            entries = found.entries
            names = [name for name, read in self._reads[kind].items() if entries.get(name) is read and (read.racy or name in waiting)]
            names += list(found.problems)
            if names:
                check[kind] = sorted(names)
        line = json.dumps({"checked": {"at": walk["at"], "folders": walk["folders"], "check": check}}, separators=(",", ":")).encode("utf-8")
        try:
            fs.append_line(self.root / CACHE_FILE, line, durable=False)
        except (OSError, MossError):
            return
        self._appended += 1

    def _append(self, pending: list[tuple[str, str]]) -> None:
        rows = []
        for kind, name in pending:
            read = self._reads[kind][name]
            rows.append(b"[%s,%s,%d,%d,%d,%d,%s]" % (json.dumps(kind).encode(), json.dumps(name).encode(), *read.key, read.saved_form()))
        line = b'{"delta":[' + b",".join(rows) + b"]}"
        try:
            fs.append_line(self.root / CACHE_FILE, line, durable=False)
        except (OSError, MossError):
            return  # a read-only checkout still reads its board, only more slowly
        self._pending.clear()
        self._appended += len(rows)

    def _rewrite(self, synced: dict[str, _Folder]) -> None:
        body: list[bytes] = []
        size = 0

        def put(chunk: bytes) -> list[int]:
            nonlocal size
            start = size
            body.append(chunk)
            body.append(b"\n")
            size += len(chunk) + 1
            return [start, start + len(chunk)]

        folders: dict[str, Any] = {}
        for kind in FOLDERS:
            saved = self._saved.get(kind)
            if kind in synced:
                found = synced[kind]
                saved = found.saved
                sources: list[tuple[str, int | _Read]] = [(name[:-3], source) for name, source in found.items()]
            elif saved is not None or self._reads[kind]:
                # Not read by this load: what the cache file held, and what was read since.
                reads = self._reads[kind]
                kept: list[tuple[str, int | _Read]] = [(name[:-3], reads.get(name) or at) for at, name in enumerate(saved.names if saved else ())]
                kept += [(name[:-3], read) for name, read in reads.items() if saved is None or name not in saved.index]
                sources = sorted(kept, key=lambda pair: pair[0])
            else:
                continue
            names: list[str] = []
            keys = array("q")
            spans = array("q")
            status = bytearray()
            codes: dict[str, int] = {}  # a status -> its byte in the status column
            held: list[int] = []
            groups: dict[str, list[list[Any]]] = {}
            ranks: dict[str, list[list[Any]]] = {}
            for item_id, source in sources:
                if isinstance(source, _Read):
                    if source.racy or type(source.value) is not _CLASS_OF_KIND[kind]:
                        continue  # too recent to trust its key next time: read it again then
                    key = source.key
                    raw = source.saved_form()
                else:
                    assert saved is not None
                    key = saved.key(source)
                    raw = saved.raw(source)
                position = len(names)
                names.append(item_id + ".md")
                keys.extend(key)
                spans.extend(put(raw))
                if kind == "task":
                    row = _outline_row(source.value) if isinstance(source, _Read) else saved.outline_row(source)  # type: ignore[union-attr]
                    status.append(codes.setdefault(row[_OUTLINE_STATUS], len(codes)))
                    if row[_OUTLINE_HOLDER] is not None and row[_OUTLINE_STATUS] in ACTIVE:
                        held.append(position)
                    groups.setdefault(row[_OUTLINE_STATUS], []).append([position, *row])
                    ranks.setdefault(row[_OUTLINE_STATUS], []).append([position, *_ROW_RANK_FIELDS(row)])
            section: dict[str, Any] = {
                "count": len(names),
                "names": put("\n".join(names).encode("utf-8")),
                "keys": put(keys.tobytes()),
                "spans": put(spans.tobytes()),
            }
            if kind == "task":
                section["status"] = put(bytes(status))
                section["statuses"] = list(codes)
                section["held"] = held
                section["groups"] = {name: put(json.dumps(rows, separators=(",", ":")).encode("utf-8")) for name, rows in groups.items()}
                section["ranks"] = {name: put(json.dumps(rows, separators=(",", ":")).encode("utf-8")) for name, rows in ranks.items()}
            folders[kind] = section
        header = {"version": CACHE_VERSION, "layout": _LAYOUT, "byteorder": sys.byteorder, "folders": folders, "body": size}
        data = json.dumps(header, separators=(",", ":")).encode("utf-8")
        try:
            fs.write_atomic(self.root / CACHE_FILE, b"".join([data, b"\n", *body]))
            self._cache_at = (os.stat(self.root / CACHE_FILE).st_ino, len(data) + 1 + size)
        except (OSError, MossError):
            return  # a read-only checkout still reads its board, only more slowly
        self._pending.clear()
        self._appended = 0
        self._wrote = True

    def get(self, kind: str, item_id: str) -> Any:
        """One item, read from its file now.

        Raises NotFound (`Task not found: <id>`) or InvalidDocument with file and line.
        """
        if not is_valid_name(item_id):
            raise NotFound(f"{_LABEL[kind]} not found: {item_id}", details={"id": item_id})
        path = self.path(kind, item_id)
        snapshot = fs.read_snapshot(path, max_bytes=MAX_FILE_BYTES)
        if snapshot.data is None:
            raise NotFound(f"{_LABEL[kind]} not found: {item_id}", details={"id": item_id})
        return self._parse(kind, item_id, snapshot.data, self.display(path))

    # ----------------------------------------------------------------- writing

    def create(self, kind: str, entity: Any, *, then: Callable[[Any], Any] | None = None) -> Any:
        """Write a new item's file, never replacing one; return the item as written. `then`:
        a change made in the same write, with the very bytes `update` would give it just after
        (a worker registered with its first heartbeat: one file written, one fsync'd pair).

        Raises Conflict ALREADY_EXISTS when a file with that id exists.
        """
        path = self.path(kind, entity.id)
        data = _RENDERERS[kind](entity).encode("utf-8")
        known = None
        if then is not None:
            relpath = self.display(path)
            doc = document.parse_bytes(data, relpath, max_bytes=MAX_FILE_BYTES)
            entity, edited = _changed(kind, doc, entity.id, relpath, then)
            if edited is not None:
                data, known = edited
        if not fs.create_exclusive(path, data):
            raise Conflict(f"{_LABEL[kind]} {entity.id} exists already", code="ALREADY_EXISTS", path=self.display(path))
        self._wrote_file(kind, entity.id, data, known=known)
        return entity

    def update(self, kind: str, item_id: str, change: Callable[[Any], Any]) -> Any:
        """Apply `change(entity) -> entity` to an item's file and return the new entity.

        Only the keys whose values changed are edited (and the body, when the description
        did), so hand edits elsewhere in the file survive. When the file changes between the
        read and the write (a hand edit takes no lock), `change` runs again on the new content;
        `change` may raise to refuse the edit.

        Raises NotFound, InvalidDocument (file and line) or Conflict STALE_WRITE.
        """
        path = self.path(kind, item_id)
        relpath = self.display(path)
        result: list[Any] = []
        produced: list[bytes] = []
        reads: list[document.FrontmatterRead | None] = []

        def step(snapshot: fs.Snapshot) -> bytes | None:
            result.clear()
            produced.clear()
            reads.clear()
            if snapshot.data is None:
                raise NotFound(f"{_LABEL[kind]} not found: {item_id}", details={"id": item_id})
            doc = self._written_document(kind, item_id, snapshot.data)
            if doc is None:
                doc = document.parse_bytes(snapshot.data, relpath, max_bytes=MAX_FILE_BYTES)
            work = snapshot.data
            if not _at_current_version(kind, doc, relpath):
                # An edit of an older file writes it at the current format version (what
                # `fs.modify` with `kind` does, which parses every file once more to tell).
                work = fs.upgraded(snapshot, kind, relpath, MAX_FILE_BYTES).data or snapshot.data
                if work != snapshot.data:
                    doc = document.parse_bytes(work, relpath, max_bytes=MAX_FILE_BYTES)
            new, edited = _changed(kind, doc, item_id, relpath, change)
            result.append(new)
            if edited is None:
                return None
            data, read = edited
            if data == work:
                return None  # nothing changed: the upgrade alone is never written
            produced.append(data)
            reads.append(read)
            return data

        # A task file is durable before the board lock is let go (claims rest on it); another
        # kind's folder is fsynced just after (`writing`).
        owed = self._owes() if kind != "task" else None
        if owed is not None:
            owed.add(("folder", path.parent))
        # Under the board lock (every board writer holds it), the file's own lock is not
        # taken: a task's first write made its lock file, a file create under the board lock.
        # A tool outside the board lock (`moss set`) still takes the file's lock, and is caught
        # like a hand edit: whichever writes second reads the file again.
        holding = threading.get_ident() in self._owed
        written = fs.modify(path, step, max_bytes=MAX_FILE_BYTES, sync_folder=owed is None, lock=not holding)
        if produced and written.data is produced[0]:
            # The edit's check read the new frontmatter back already: it is not read again.
            self._wrote_file(kind, item_id, produced[0], known=reads[0])
        return result[0]

    def _written_document(self, kind: str, item_id: str, data: bytes) -> document.Document | None:
        """The parsed document of the file this store wrote last for this item, when `data`
        (the file's bytes now) are still the bytes written; None otherwise (parse them)."""
        read = self._reads[kind].get(f"{item_id}.md")
        if read is None or read.parsed is None or not read.digest or _digest(data) != read.digest:
            return None
        return read.parsed

    def _wrote_file(self, kind: str, item_id: str, data: bytes, *, known: document.FrontmatterRead | None = None) -> None:
        """What this store just wrote, parsed (`known`: what its frontmatter reads as, when the
        writer read it back already): kept as if read (its own file events then need no
        parse), and, where a cache file is kept, offered to other processes' stores as a delta
        line with the new file's stat key and the digest of the bytes written; a store takes it
        only while the file has that key and those bytes."""
        name = f"{item_id}.md"
        path = self.path(kind, item_id)
        try:
            info = os.lstat(path)
            doc = document.parse_bytes(data, self.display(path), max_bytes=MAX_FILE_BYTES, known=known)
            value = _PARSERS[kind](doc, self.display(path), fallback_id=item_id)
        except (OSError, MossError):
            return
        read = _Read((info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns), value, _digest(data), True, parsed=doc if kind == "worker" else None)
        with self._mutex:
            self._reads[kind][name] = read
            if not self.persist or not (self._saved or self._wrote):
                return
            try:
                # The folder's stat after this write: a bounded load trusts a full check only
                # while each folder's stat is the newest one recorded (see `_Checked`).
                folder = os.stat(path.parent)
            except OSError:
                return
            row = b"[%s,%s,%d,%d,%d,%d,%s,%s,[%d,%d,%d]]" % (
                json.dumps(kind).encode(),
                json.dumps(name).encode(),
                *read.key,
                read.saved_form(),
                json.dumps(read.digest.hex()).encode(),
                folder.st_ino,
                folder.st_mtime_ns,
                folder.st_ctime_ns,
            )
            try:
                fs.append_line(self.root / CACHE_FILE, b'{"delta":[' + row + b"]}", durable=False)
            except (OSError, MossError):
                return
            self._appended += 1

    def delete(self, kind: str, item_id: str) -> None:
        """Remove an item's file. Raises NotFound."""
        path = self.path(kind, item_id)
        if not fs.remove(path):
            raise NotFound(f"{_LABEL[kind]} not found: {item_id}", details={"id": item_id})
        with self._mutex:
            self._reads[kind].pop(f"{item_id}.md", None)

    def set_global_rails(self, list_name: str, values: tuple[str, ...]) -> Project:
        """Set one list of `project.md`'s global rails (the file must exist); only that key's
        lines change. Raises NotFound, InvalidDocument."""
        path = self.project_path
        relpath = self.display(path)

        def step(snapshot: fs.Snapshot) -> bytes | None:
            if snapshot.data is None:
                raise NotFound("project.md does not exist", path=relpath)
            doc = document.parse_bytes(snapshot.data, relpath, max_bytes=MAX_FILE_BYTES)
            return document.encode(files.edit_project_rails(doc, list_name, values, relpath), doc.bom)

        fs.modify(path, step, max_bytes=MAX_FILE_BYTES, kind="project", relpath=relpath)
        return self.read_project()

    def create_project(self, project: Project) -> bool:
        """Write `project.md` unless it exists; True when this call wrote it."""
        return fs.create_exclusive(self.project_path, files.render_project(project).encode("utf-8"))

    # ----------------------------------------------------------------- activity log

    def append(self, event: Event) -> None:
        """Append one event to the activity log (its day's file; a single O_APPEND write)."""
        self.activity.append(event, self._owes())

    # ----------------------------------------------------------------- threads (chat, comments)

    def thread_path(self, kind: str, name: str) -> Path:
        """The JSONL file of one chat channel (`chat`) or one task's comments (`comments`)."""
        return self.base / THREAD_FOLDERS[kind] / f"{name}.jsonl"

    @contextmanager
    def thread_lock(self, kind: str, name: str) -> Iterator[None]:
        """Hold one thread's lock: for appends that depend on what the thread holds (a pin that
        must not be doubled, a join written once). Plain appends take no lock."""
        with fs.locked(self.thread_path(kind, name)):
            yield

    def append_record(self, kind: str, name: str, record: dict[str, Any]) -> None:
        """Append one record to a thread as one JSONL line (a single O_APPEND write)."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        fs.append_line(self.thread_path(kind, name), line.encode("utf-8"))

    def _records(self, path: Path) -> tuple[list[tuple[int, Any]], list[MossError]]:
        try:
            data = fs.read_bytes(path)
        except FileNotFoundError:
            return [], []
        return files.json_lines(data, self.display(path), max_line_bytes=MAX_LOG_LINE_BYTES)

    def read_channel(self, channel: str) -> tuple[list[threads.Post], list[MossError]]:
        """Every line of a channel in file order, and every line that is not a valid one."""
        path = self.thread_path("chat", channel)
        records, problems = self._records(path)
        posts: list[threads.Post] = []
        for number, record in records:
            try:
                posts.append(threads.parse_post(record, channel, self.display(path), number))
            except MossError as err:
                problems.append(err)
        return posts, problems

    def read_comments(self, task_id: str) -> tuple[list[threads.Comment], list[MossError]]:
        """Every comment on a task in file order, and every line that is not a valid one."""
        path = self.thread_path("comments", task_id)
        records, problems = self._records(path)
        found: list[threads.Comment] = []
        for number, record in records:
            try:
                found.append(threads.parse_comment(record, task_id, self.display(path), number))
            except MossError as err:
                problems.append(err)
        return found, problems

    def thread_names(self, kind: str) -> list[str]:
        """The names of the threads of one kind that have a file, sorted."""
        try:
            names = fs.list_names(self.base / THREAD_FOLDERS[kind])
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(name[:-6] for name in names if name.endswith(".jsonl") and not name.startswith(".") and is_valid_name(name[:-6]))

    def thread_signatures(self, kind: str) -> dict[str, tuple[int, int, int]]:
        """(inode, size, mtime) of each thread file of one kind: what changed since a look."""
        found: dict[str, tuple[int, int, int]] = {}
        for name in self.thread_names(kind):
            try:
                info = os.stat(self.thread_path(kind, name))
            except FileNotFoundError:
                continue
            found[name] = (info.st_ino, info.st_size, info.st_mtime_ns)
        return found

    # ----------------------------------------------------------------- chat cursors (per machine)

    def cursor_path(self, worker_id: str) -> Path:
        return self.root / CURSOR_DIR / f"{worker_id}.json"

    def read_cursors(self, worker_id: str) -> dict[str, str]:
        """A worker's read position in each channel (the id of the last message delivered)."""
        try:
            data = structured.loads_json(fs.read_bytes(self.cursor_path(worker_id)))
        except (FileNotFoundError, ValueError, MossError):
            return {}
        return {str(key): str(value) for key, value in data.items()} if isinstance(data, dict) else {}

    def advance_cursors(self, worker_id: str, moves: dict[str, str | None]) -> dict[str, str]:
        """Set (or, with None, forget) a worker's read position in some channels, under the
        cursor file's lock; return every position after the change."""
        path = self.cursor_path(worker_id)
        with fs.locked(path):
            cursors = self.read_cursors(worker_id)
            for channel, cursor in moves.items():
                if cursor is None:
                    cursors.pop(channel, None)
                else:
                    cursors[channel] = cursor
            fs.write_atomic(path, json.dumps(cursors, sort_keys=True, indent=1).encode("utf-8"))
        return cursors


def _changed(
    kind: str, doc: document.Document, item_id: str, relpath: str, change: Callable[[Any], Any]
) -> tuple[Any, tuple[bytes, document.FrontmatterRead | None] | None]:
    """`change` applied to the item `doc` holds: the new item, and the bytes of `doc` edited to
    it (`files.edit_text_read`) with what their frontmatter reads as, None when no field
    changed. What `update` writes and `create(..., then=)` writes in one file."""
    old = _PARSERS[kind](doc, relpath, fallback_id=item_id)
    new = change(old)
    edited = files.edit_text_read(doc, old, new, kind, relpath)
    if edited is None:
        return new, None
    text, read = edited
    return new, (document.encode(text, doc.bom), read)


def _outline_of(saved: _Saved | None, source: int | _Read) -> Task:
    """The outline of a task file's source."""
    if isinstance(source, _Read):
        if source.outline is None:
            source.outline = _outline_task(_outline_row(source.value))
        return source.outline
    assert saved is not None
    return saved.outline(source)


def _at_current_version(kind: str, doc: document.Document, relpath: str) -> bool:
    """Whether a parsed board file is at its kind's current format version (False for an
    older one, and for a marker `fs.upgraded` must judge: it raises FORMAT_TOO_NEW)."""
    from moss_files.foundation import formats  # as fs.upgraded imports it: only writers need it

    try:
        return formats.check_document(kind, doc, relpath) == formats.KINDS[kind].current
    except InvalidDocument:
        return False


def racy_window(mtime_ns: int, ctime_ns: int) -> int:
    """How long after its last change a file's stat cannot yet be trusted to reveal the next."""
    return FINE_RACY_NS if (mtime_ns % 1_000_000_000 or ctime_ns % 1_000_000_000) else COARSE_RACY_NS


_CACHED_NAMES = re.compile(rb"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.md(?:\n[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.md)*")
# Every byte, in order: the status column's bytes up to a table's length are its codes.
_CODES = bytes(range(256))


def _cached_names_valid(column: bytes) -> bool:
    """Whether every file name a cache file's names column lists (one a line, as read) is one
    a board file may have: one pattern over the column's bytes, and names with '..' one by
    one."""
    if _CACHED_NAMES.fullmatch(column) is None:
        return False
    return b".." not in column or all(is_valid_name(name[:-3]) for name in column.decode("ascii").split("\n"))


def _bad_name(prefix: str, name: str) -> InvalidDocument:
    return InvalidDocument(
        f"{name!r} is not a board file name: the stem is the item's id (letters, digits, '.', '_', '-')",
        code="SCHEMA_ERROR",
        path=prefix + name,
    )


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


# --------------------------------------------------------------------------- cache records

_CLASSES: dict[str, type] = {"epic": Epic, "task": Task, "worker": Worker, "team": Team, "proposal": Proposal, "step": Step}
_CLASS_OF_KIND = {kind: cls for kind, cls in _CLASSES.items() if kind != "step"}
_NAMES = {cls: tuple(f.name for f in fields(cls)) for cls in _CLASSES.values()}
# The field names of every cached class and of an outline: a cache written for another
# layout is not used.
_LAYOUT = {**{kind: list(_NAMES[cls]) for kind, cls in _CLASSES.items()}, "outline": list(OUTLINE_FIELDS)}
# Indexes of the fields that hold tuples (those whose default is one); JSON gives lists back.
_TUPLES = {
    cls: tuple(i for i, name in enumerate(_NAMES[cls]) if isinstance(getattr(_sample, name, None), tuple))
    for cls, _sample in (
        (Epic, Epic("x", "x")),
        (Task, Task("x", "x", "x")),
        (Worker, Worker("x")),
        (Team, Team("x", "x")),
        (Proposal, Proposal("x", None, "x", "x", "x")),
        (Step, Step("x", "x")),
    )
}
_PLAN = _NAMES[Task].index("plan")
# An outline row is OUTLINE_FIELDS' values; a task is built from it over a copy of the defaults.
_OUTLINE_AT = tuple(_NAMES[Task].index(name) for name in OUTLINE_FIELDS)
_OUTLINE_TUPLE_AT = tuple(at for at in _OUTLINE_AT if at in _TUPLES[Task])
_OUTLINE_STATUS = OUTLINE_FIELDS.index("status")
_OUTLINE_HOLDER = OUTLINE_FIELDS.index("assigned_worker")
# A task's RANK_FIELDS values, from its outline row or from the task.
_ROW_RANK_FIELDS = itemgetter(*(OUTLINE_FIELDS.index(name) for name in RANK_FIELDS))
_TASK_RANK_FIELDS = attrgetter(*RANK_FIELDS)
_TASK_DEFAULTS: list[Any] = [None if f.default is MISSING else f.default for f in fields(Task)]
_TASK_FACTORIES = tuple((at, f.default_factory) for at, f in enumerate(fields(Task)) if f.default_factory is not MISSING)


def _to_record(item: Any) -> list[Any]:
    """An item as a JSON list of its field values in declaration order."""
    values: list[Any] = [getattr(item, name) for name in _NAMES[type(item)]]
    if type(item) is Task:
        values[_PLAN] = [_to_record(step) for step in item.plan]
    return [list(value) if isinstance(value, tuple) else value for value in values]


def _from_record(cls: Any, record: list[Any]) -> Any:
    """The inverse of `_to_record`."""
    values = list(record)
    for index in _TUPLES[cls]:
        values[index] = tuple(values[index])
    if cls is Task:
        values[_PLAN] = tuple(_from_record(Step, step) for step in values[_PLAN])
    return cls(*values)


def _outline_row(task: Task) -> list[Any]:
    """A task's outline as a JSON list: the values of OUTLINE_FIELDS."""
    return [list(value) if isinstance(value, tuple) else value for value in (getattr(task, name) for name in OUTLINE_FIELDS)]


# A claim builds a thousand outlines, and a frozen dataclass's generated __init__ spends most
# of its time finding `object.__setattr__` again for every field: setting the slots directly
# takes half as long. Only while Task has no __post_init__ that this would skip.
_TASK_SLOTS = tuple(getattr(Task, name).__set__ for name in _NAMES[Task])
_DIRECT = not hasattr(Task, "__post_init__")


# Each slot is set once: the row's values (tuples made of the lists JSON gives) and, for the
# fields outlines leave out, their defaults (a fresh one from each default factory).
_OUTLINE_PUTS = tuple((_TASK_SLOTS[at], at in _OUTLINE_TUPLE_AT) for at in _OUTLINE_AT)
_OMITTED_PUTS = tuple((_TASK_SLOTS[at], _TASK_DEFAULTS[at]) for at in range(len(_TASK_SLOTS)) if at not in _OUTLINE_AT and at not in dict(_TASK_FACTORIES))
_OMITTED_FACTORIES = tuple((_TASK_SLOTS[at], factory) for at, factory in _TASK_FACTORIES if at not in _OUTLINE_AT)
_OUTLINE_FACTORIES = tuple((at, factory) for at, factory in _TASK_FACTORIES if at in _OUTLINE_AT)


def _outline_task(row: list[Any]) -> Task:
    """The task an outline row stands for: OUTLINE_FIELDS from the row, every other field its default."""
    if not _DIRECT or _OUTLINE_FACTORIES or len(row) != len(_OUTLINE_PUTS):
        values = _TASK_DEFAULTS.copy()
        for at, value in zip(_OUTLINE_AT, row, strict=True):  # ValueError for a row of another length
            values[at] = value
        for at in _OUTLINE_TUPLE_AT:
            values[at] = tuple(values[at])
        for at, factory in _TASK_FACTORIES:
            values[at] = factory()
        return Task(*values)
    task = object.__new__(Task)
    for (put, as_tuple), value in zip(_OUTLINE_PUTS, row, strict=True):
        put(task, tuple(value) if as_tuple else value)
    for put, value in _OMITTED_PUTS:
        put(task, value)
    for put, factory in _OMITTED_FACTORIES:
        put(task, factory())
    return task

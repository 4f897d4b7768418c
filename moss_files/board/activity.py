"""The board's activity log on disk: a file per UTC day, and queries that read only the files
that can hold their answer.

Edge layer. Layout, relative to the board folder:

    activity/<YYYY-MM-DD>.jsonl   the events of one UTC day (the day of each event's time)
    activity.jsonl                the log of earlier versions, which kept every event in one
                                  file; still read, and written only for an event whose time
                                  does not start with a date (`day_file`)

Every file is append-only and merged by union in git. An event goes to the file of its own
day, so every clone appends the same day's events to the same file and a merge joins them
line by line; no file is ever moved or rewritten, so there is nothing to lose or duplicate
when a writer is killed, and `git log -- .moss/board/activity` shows the whole history.

A year of history is a million lines, and reading them costs seconds. So each file's
*summary* (its newest timestamp and the task, epic and worker ids and event names it holds,
with the lines it could not read) is kept by the file's stat: in memory for a store's life and
in `.moss/cache/activity.json` for the next process. A query (`newest`) reads the files whose
summary is unknown, then those whose summary can match it, newest first, and stops once it
holds `limit` events newer than anything the files left could hold. The answer is the one a
read of every file gives; only the files read change with history.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from moss_files.board import files
from moss_files.board.model import Event
from moss_files.board.rules import EventQuery
from moss_files.foundation import fs, inotify
from moss_files.foundation.errors import ERROR_CODES, InvalidDocument, MossError

LEGACY_FILE = "activity.jsonl"
FOLDER = "activity"
CACHE_FILE = PurePosixPath(".moss/cache/activity.json")
# Bump when a summary's meaning or the cache file's layout changes.
CACHE_VERSION = 1
MAX_LINE_BYTES = 256 * 1024
# A file changed this recently may change again within its timestamp's tick without its stat
# changing, so a summary read from it then is not kept (the board's COARSE_RACY_NS, for the
# same reason): the day's own file is read at every query, which it is anyway.
RACY_NS = 2_000_000_000
# A log queried this many times lives long (a server's): it watches its files' events
# (`_Watch`) rather than take the stat of every file at every query.
WATCH_AFTER = 2
_DAY = re.compile(rb"^\d{4}-\d{2}-\d{2}")

StatKey = tuple[int, int, int, int]


def day_file(timestamp: str) -> str:
    """The file, relative to the board folder, that holds an event stamped `timestamp`: the
    day's file for a timestamp starting with a date, the legacy file otherwise (a hand-made
    event with a time of another shape stays readable where earlier versions put it)."""
    day = _DAY.match(timestamp.encode("ascii", "replace"))
    return f"{FOLDER}/{day.group().decode()}.jsonl" if day else LEGACY_FILE


@dataclass(frozen=True, slots=True)
class Summary:
    """What one log file held when read: enough to know whether a query can find anything
    in it, and how new that can be, without reading it again."""

    key: StatKey
    read_ns: int  # when it was read (time.time_ns), to tell a racy stat
    newest: str | None  # the largest timestamp of its events (None: no event)
    tasks: frozenset[str]
    epics: frozenset[str]
    workers: frozenset[str]
    kinds: frozenset[str]
    problems: tuple[tuple[int, str, str], ...]  # (line, code, message) of each unreadable line

    def may_hold(self, query: EventQuery) -> bool:
        """Whether an event matching `query` can be in the file."""
        return (
            self.newest is not None
            and (query.task is None or query.task in self.tasks)
            and (query.epic is None or query.epic in self.epics)
            and (query.worker is None or query.worker in self.workers)
            and (query.kinds is None or not query.kinds.isdisjoint(self.kinds))
        )

    def trusted(self, key: StatKey | None) -> bool:
        """Whether this summary still describes a file whose stat is `key`: the same stat, its
        bytes last changed well before the summary was read (a later write changes the time
        again, and `touch`ing it back changes the change time, which the stat holds too)."""
        return key == self.key and key[2] + RACY_NS <= self.read_ns

    def to_json(self) -> dict[str, Any]:
        return {
            "key": list(self.key),
            "read": self.read_ns,
            "newest": self.newest,
            "tasks": sorted(self.tasks),
            "epics": sorted(self.epics),
            "workers": sorted(self.workers),
            "kinds": sorted(self.kinds),
            "problems": [list(problem) for problem in self.problems],
        }

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Summary:
        """A summary from the cache file; raises (KeyError, TypeError, ValueError) on a record
        of another shape, which drops the cache file."""
        key = tuple(int(part) for part in record["key"])
        if len(key) != 4:
            raise ValueError("a stat key has four parts")
        newest = record["newest"]
        if newest is not None and not isinstance(newest, str):
            raise TypeError("newest is a string")
        problems = tuple((int(line), str(code), str(message)) for line, code, message in record["problems"])
        if any(code not in ERROR_CODES for _, code, _ in problems):
            raise ValueError("an unknown error code")
        return cls(
            key=key,
            read_ns=int(record["read"]),
            newest=newest,
            tasks=_texts(record["tasks"]),
            epics=_texts(record["epics"]),
            workers=_texts(record["workers"]),
            kinds=_texts(record["kinds"]),
            problems=problems,
        )


def _texts(values: Any) -> frozenset[str]:
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise TypeError("a list of strings")
    return frozenset(values)


def parse_log(data: bytes, shown: str) -> tuple[list[tuple[int, Event]], list[MossError]]:
    """Every event of one log file's bytes with its line number, and every line that is not
    a valid event (blank lines are neither)."""
    records, problems = files.json_lines(data, shown, max_line_bytes=MAX_LINE_BYTES, what="activity line")
    events: list[tuple[int, Event]] = []
    for number, record in records:
        try:
            events.append((number, files.parse_event(record, shown, number)))
        except MossError as err:
            problems.append(err)
    problems.sort(key=lambda err: err.line or 0)  # in line order, as one pass gave them
    return events, problems


def summarize(key: StatKey, read_ns: int, events: Iterable[tuple[int, Event]], problems: Iterable[MossError]) -> Summary:
    """The summary of a file whose stat was `key` when read at `read_ns`."""
    tasks: set[str] = set()
    epics: set[str] = set()
    workers: set[str] = set()
    kinds: set[str] = set()
    newest: str | None = None
    for _, event in events:
        if event.task is not None:
            tasks.add(event.task)
        if event.epic is not None:
            epics.add(event.epic)
        if event.worker is not None:
            workers.add(event.worker)
        kinds.add(event.event.upper())
        if newest is None or event.timestamp > newest:
            newest = event.timestamp
    return Summary(
        key=key,
        read_ns=read_ns,
        newest=newest,
        tasks=frozenset(tasks),
        epics=frozenset(epics),
        workers=frozenset(workers),
        kinds=frozenset(kinds),
        problems=tuple((err.line or 0, err.code, err.message) for err in problems),
    )


@dataclass(frozen=True, slots=True)
class _File:
    """One log file as listed: its name and its stat."""

    name: str  # relative to the board folder
    key: StatKey


def _key(info: os.stat_result) -> StatKey:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class _Watch:
    """inotify on the board folder (for the legacy file and the day files' folder itself) and
    on the day files' folder: the names changed since the last query, so that a long-lived
    log takes the stat of those only. The kernel queues an event within the call that made the
    change, so a drain covers every change finished before it; an overflowed queue, or a
    folder replaced or gone, has the next query list every file again. Only the folders are
    watched: a write to a log file through a hard link from outside them goes unseen."""

    FOLDER_MASK = inotify.ENTRIES | inotify.CONTENT | inotify.SELF | inotify.IN_ONLYDIR | inotify.IN_EXCL_UNLINK

    def __init__(self, base: Path) -> None:
        self.base = base
        self.inotify = inotify.Inotify()
        self.board: int | None = None  # the board folder's watch
        self.folder: int | None = None  # the day files' folder's watch
        self.files: dict[str, StatKey] | None = None  # every log file's stat; None: list them all
        self.dirty: set[str] = set()
        self.listed: list[_File] | None = None  # `files` in position order, until they change

    def close(self) -> None:
        self.inotify.close()

    def drain(self) -> None:
        for wd, mask, name in self.inotify.events():
            if mask & inotify.IN_Q_OVERFLOW:
                self.files = None
            elif wd == self.folder:
                if mask & (inotify.SELF | inotify.IN_IGNORED | inotify.IN_UNMOUNT):
                    self._drop(wd, mask)
                    self.files, self.folder = None, None
                elif name:
                    self.dirty.add(f"{FOLDER}/{name}")
            elif wd == self.board:
                if mask & (inotify.SELF | inotify.IN_IGNORED | inotify.IN_UNMOUNT):
                    self._drop(wd, mask)
                    self.files, self.board = None, None
                elif name == LEGACY_FILE:
                    self.dirty.add(LEGACY_FILE)
                elif name == FOLDER:
                    self.files = None  # the folder came, went or was replaced

    def _drop(self, wd: int, mask: int) -> None:
        """Stop a folder's watch: one moved away would go on reporting from its new place."""
        if not mask & inotify.IN_IGNORED:
            self.inotify.remove(wd)

    def listing(self, list_all: Callable[[], list[_File]], stat: Callable[[str], StatKey | None]) -> list[_File]:
        """Every log file with its stat, as `list_all` would give it."""
        self.drain()
        if self.files is None:
            # Watch first, then list: a change made while listing is in the next drain.
            if self.board is None:
                self.board = self.inotify.add(str(self.base), self.FOLDER_MASK)
            if self.folder is None:
                self.folder = self.inotify.add(str(self.base / FOLDER), self.FOLDER_MASK)
            self.dirty.clear()
            found = list_all()
            if self.board is None:
                return found  # no board folder to watch yet: list again next time
            self.files = {entry.name: entry.key for entry in found}
            self.listed = None
        elif self.dirty:
            for name in self.dirty:
                key = stat(name) if _log_name(name) else None
                if key is None:
                    self.files.pop(name, None)
                else:
                    self.files[name] = key
            self.dirty.clear()
            self.listed = None
        if self.listed is None:
            # Sorted once per change, not at every query (a year is 365 files); callers only read it.
            self.listed = [_File(name, self.files[name]) for name in sorted(self.files, key=_position)]
        return self.listed


def _log_name(name: str) -> bool:
    """Whether a name relative to the board folder is one of the log's files."""
    if name == LEGACY_FILE:
        return True
    folder, _, leaf = name.partition("/")
    return folder == FOLDER and leaf.endswith(".jsonl") and not leaf.startswith(".") and "/" not in leaf


def _position(name: str) -> tuple[bool, str]:
    return (name != LEGACY_FILE, name)


class ActivityLog:
    """The activity log of one board folder. Thread-safe for queries: a summary is computed
    from one read and replaced whole, and the watch is taken by one query at a time."""

    def __init__(self, root: Path, base: Path, *, persist: bool = True) -> None:
        self.root = root
        self.base = base
        self.persist = persist
        self._cache_path = root / CACHE_FILE
        self._summaries: dict[str, Summary] | None = None  # loaded on first need
        self.files_read: list[str] = []  # the files the last query read, in the order read
        self._queries = 0
        self._watch: _Watch | None = None
        self._watching = True  # until a watch cannot be had here
        self._watch_lock = threading.Lock()

    @property
    def watching(self) -> bool:
        """Whether queries take the stat only of the files the kernel said changed."""
        return self._watch is not None

    def close(self) -> None:
        """Stop watching the log's files (also done when the log is garbage collected)."""
        with self._watch_lock:
            if self._watch is not None:
                self._unwatch()
                self._watch = None
            self._watching = False

    # ----------------------------------------------------------------- writing

    def append(self, event: Event, owed: set[tuple[str, Path]] | None) -> None:
        """Append one event to its day's file as one JSONL line (a single O_APPEND write).

        With `owed` (a board writer's syncs, made after the lock is let go), the file and, when
        this append creates it, its folder are added there instead of synced now."""
        path = self.base / day_file(event.timestamp)
        line = json.dumps(files.event_to_dict(event), ensure_ascii=False, separators=(",", ":"))
        new_file = not os.path.lexists(path)
        if owed is not None:
            owed.add(("file", path))
        fs.append_line(path, line.encode("utf-8"), durable=owed is None)
        if new_file:
            # The file's name must outlive a power cut as its bytes do.
            if owed is not None:
                owed.add(("folder", path.parent))
            else:
                fs.fsync_dir(path.parent)

    # ----------------------------------------------------------------- reading

    def listing(self) -> list[_File]:
        """Every log file with its stat, in position order: the legacy file, then the folder's
        by name. A hand edit in place of an old day's file changes nothing but the file, so
        every file's stat is taken (by name in the folder's descriptor, a microsecond or two
        each), except in a long-lived log, which from its WATCH_AFTER-th query on takes only
        those of the files its watch names."""
        with self._watch_lock:
            self._queries += 1
            if self._watch is None and self._watching and self._queries >= WATCH_AFTER:
                self._start_watching()
            if self._watch is not None:
                try:
                    return self._watch.listing(self._list_all, self._stat)
                except inotify.Unavailable:
                    self._unwatch()
                    self._watch, self._watching = None, False
        return self._list_all()

    def _start_watching(self) -> None:
        watch, self._watching = inotify.start_watch(self.base, lambda: _Watch(self.base))
        if watch is not None:
            self._watch = watch
            self._unwatch = weakref.finalize(self, watch.close)

    def _list_all(self) -> list[_File]:
        found: list[_File] = []
        try:
            found.append(_File(LEGACY_FILE, _key(os.lstat(self.base / LEGACY_FILE))))
        except (FileNotFoundError, NotADirectoryError):
            pass
        try:
            fd = os.open(self.base / FOLDER, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return found
        try:
            for name in sorted(os.listdir(fd)):
                if not name.endswith(".jsonl") or name.startswith("."):
                    continue
                try:
                    found.append(_File(f"{FOLDER}/{name}", _key(os.lstat(name, dir_fd=fd))))
                except FileNotFoundError:
                    continue  # gone since the folder was listed
        finally:
            os.close(fd)
        return found

    def _stat(self, name: str) -> StatKey | None:
        try:
            return _key(os.lstat(self.base / name))
        except FileNotFoundError:
            return None

    def _read(self, entry: _File, *, summary: bool = False) -> tuple[list[tuple[int, Event]], list[MossError], Summary | None]:
        """One file's events and problems and, with `summary`, its summary when it may be kept
        (the file did not change while it was read)."""
        path = self.base / entry.name
        shown = self._display(path)
        read_ns = time.time_ns()
        try:
            data = fs.read_bytes(path)
        except FileNotFoundError:
            return [], [], None  # gone since it was listed: a query reads the files there are
        events, problems = parse_log(data, shown)
        if not summary:
            return events, problems, None
        key = self._stat(entry.name)
        return events, problems, summarize(key, read_ns, events, problems) if key is not None and len(data) == key[1] else None

    def everything(self) -> tuple[list[Event], list[MossError]]:
        """Every event in position order, and every line that is not a valid event."""
        events: list[Event] = []
        problems: list[MossError] = []
        for entry in self.listing():
            read, unreadable, _ = self._read(entry)
            events.extend(event for _, event in read)
            problems.extend(unreadable)
        return events, problems

    def newest(self, query: EventQuery, limit: int) -> tuple[list[Event], list[MossError]]:
        """The newest `limit` events matching `query`, newest first, and every line of the log
        that is not a valid event. Order is by timestamp, then by position (file, then line),
        so lines a union merge interleaved still read in time order: exactly
        `rules.filter_events` over `everything()`."""
        listing = self.listing()
        known = self._load()
        fresh: dict[str, Summary] = {}
        problems: dict[int, list[MossError]] = {}
        unknown: list[int] = []
        candidates: list[tuple[str, int]] = []
        for index, entry in enumerate(listing):
            summary = known.get(entry.name)
            if summary is None or not summary.trusted(entry.key):
                unknown.append(index)
                continue
            if summary.problems:
                problems[index] = [self._problem(entry, line, code, message) for line, code, message in summary.problems]
            if summary.may_hold(query):
                candidates.append((summary.newest or "", index))
        candidates.sort(reverse=True)
        # The unknown files first: each is read anyway, and what it holds may spare older ones.
        order = [(None, index) for index in unknown] + [(newest, index) for newest, index in candidates]
        found: list[tuple[str, int, int, Event]] = []
        read: list[str] = []
        for newest, index in order:
            if newest is not None and (limit <= 0 or (len(found) >= limit and newest < found[limit - 1][0])):
                break  # the rest are older still: none can displace what is held
            entry = listing[index]
            events, unreadable, summary = self._read(entry, summary=newest is None)  # a file whose summary was not known
            read.append(entry.name)
            problems[index] = unreadable
            if summary is not None and summary.trusted(entry.key):
                fresh[entry.name] = summary
            found.extend((event.timestamp, index, line, event) for line, event in events if query.matches(event))
            found.sort(key=lambda held: held[:3], reverse=True)
            del found[max(limit, 0) :]
        self._keep(known, fresh, {entry.name for entry in listing})
        self.files_read = read
        return [held[3] for held in found], [err for index in sorted(problems) for err in problems[index]]

    def _problem(self, entry: _File, line: int, code: str, message: str) -> MossError:
        return InvalidDocument(message, code=code, path=self._display(self.base / entry.name), line=line or None)

    def _display(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    # ----------------------------------------------------------------- the summaries' cache

    def _load(self) -> dict[str, Summary]:
        """The summaries known: this store's, else the cache file's (none when it cannot be read)."""
        if self._summaries is None:
            self._summaries = self._read_cache()
        return self._summaries

    def _read_cache(self) -> dict[str, Summary]:
        try:
            data = fs.read_bytes(self._cache_path)
            record = json.loads(data)
            if not isinstance(record, dict) or record.get("version") != CACHE_VERSION:
                return {}
            return {str(name): Summary.from_json(summary) for name, summary in record["files"].items()}
        except (OSError, MossError, ValueError, KeyError, TypeError, AttributeError):
            return {}  # derived: an unreadable cache file is read again from the log

    def _keep(self, known: dict[str, Summary], fresh: Mapping[str, Summary], present: Collection[str]) -> None:
        """Remember the summaries read now; write the cache file when they add to it or files
        it describes are gone."""
        gone = [name for name in known if name not in present]
        if not fresh and not gone:
            return
        merged = {name: summary for name, summary in known.items() if name in present}
        merged.update(fresh)
        self._summaries = merged
        if not self.persist:
            return
        body = {"version": CACHE_VERSION, "files": {name: merged[name].to_json() for name in sorted(merged)}}
        try:
            fs.write_atomic(self._cache_path, json.dumps(body, separators=(",", ":")).encode("utf-8"))
        except (OSError, MossError):
            pass  # derived: the next process reads the files again

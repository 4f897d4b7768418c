"""Waking waiters when the board's files change: a watchdog observer on `.moss/board/`.

Edge layer: owns the file watcher (the only board module that imports watchdog; it is imported
when a wait starts, never at start-up). A waiter (`moe.wait_for_task`, `moe.chat_wait`,
`moss task wait`) starts a BoardWatcher, checks the board, and sleeps on `changed` until a
file under `.moss/board/` is created, written, moved or deleted, by this process or any other
(a claim, a new task, a chat line, a `git pull`). Events are hints: the waiter re-reads the
files; an event tells it only when to look.

Inotify first. Some mounts (network file systems, some container volumes) deliver no events,
so, as the needlecast sidecar does, a probe file is written at start: if its event does not
arrive within `probe_timeout`, the watcher switches to watchdog's PollingObserver, which
compares directory snapshots every `poll_interval` seconds. An observer that cannot start
(inotify's watch limit, say) also falls back to polling. `poll=True` polls from the start.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from moss_files.foundation import fs

PROBE_TIMEOUT = 1.0
POLL_INTERVAL = 0.25
PROBE_PREFIX = ".wait-probe.tmp-"
# Event kinds that can mean new content (opens and read-only closes are our own reads).
_CHANGE_EVENTS = frozenset({"created", "modified", "moved", "deleted", "closed"})


class _StoppingNoise(logging.Filter):
    """Drops watchdog's complaint that events arrived while its inotify thread was stopping: a
    waiter stops its watcher as soon as it has its answer, often in the middle of the burst of
    events the change that woke it makes, and those late events are not needed. Without a
    logging setup the complaint would reach the waiter's stderr (`moss task wait`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


_QUIET = _StoppingNoise()


def quiet_stopping_noise() -> None:
    """Keep watchdog's "called when the thread is inactive" (logged when an event arrives while
    an observer stops; nothing is lost) off stderr, for every watchdog observer of the process."""
    inotify_log = logging.getLogger("watchdog.observers.inotify")
    if _QUIET not in inotify_log.filters:
        inotify_log.addFilter(_QUIET)


class _Sink:
    """Watchdog handler: forwards change events to the watcher."""

    def __init__(self, watcher: BoardWatcher) -> None:
        self.watcher = watcher

    def dispatch(self, event: Any) -> None:
        kind = getattr(event, "event_type", None)
        if kind not in _CHANGE_EVENTS:
            return
        if kind == "modified" and getattr(event, "is_directory", False):
            return  # a folder's own change comes with the event of the file that changed in it
        for raw in (getattr(event, "src_path", None), getattr(event, "dest_path", None)):
            if raw:
                self.watcher.notice(Path(os.fsdecode(raw)))


class BoardWatcher:
    """Sets `changed` whenever a file under `folder` (the board folder) changes."""

    def __init__(self, folder: Path, *, poll: bool = False, poll_interval: float = POLL_INTERVAL, probe_timeout: float = PROBE_TIMEOUT) -> None:
        self.folder = folder
        self.poll = poll
        self.poll_interval = poll_interval
        self.probe_timeout = probe_timeout
        self.changed = threading.Event()
        self.mode = "none"  # inotify | polling, once started
        self.fallback_reason: str | None = None
        self._observer: Any = None
        self._probe_path: Path | None = None
        self._probe_seen = threading.Event()

    def notice(self, path: Path) -> None:
        """Record that `path` changed (called from the observer's thread)."""
        if self._probe_path is not None and path == self._probe_path:
            self._probe_seen.set()
            return
        if path.name.startswith(PROBE_PREFIX) or fs.is_temporary(path):
            return  # another waiter's probe, or a write not yet renamed into place
        self.changed.set()

    def _start_observer(self, polling: bool) -> None:
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        self._stop_observer()
        quiet_stopping_noise()
        observer: Any = PollingObserver(timeout=self.poll_interval) if polling else Observer()
        observer.daemon = True
        observer.schedule(_Sink(self), str(self.folder), recursive=True)
        observer.start()
        self._observer = observer
        self.mode = "polling" if polling else "inotify"

    def _stop_observer(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
            self._observer = None

    def _probe(self) -> bool:
        """True when a file written in the folder produces an event in time."""
        self._probe_path = self.folder / f"{PROBE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            fs.create_exclusive(self._probe_path, b"probe\n")
            return self._probe_seen.wait(self.probe_timeout)
        finally:
            fs.remove(self._probe_path)
            self._probe_path = None

    def start(self) -> BoardWatcher:
        """Start watching (inotify, else polling); returns self. Creates the folder if missing."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.poll:
            self._start_observer(polling=True)
            return self
        try:
            self._start_observer(polling=False)
        except OSError as exc:
            self.fallback_reason = f"inotify unavailable ({exc.strerror or exc})"
            self._start_observer(polling=True)
            return self
        if not self._probe():
            self.fallback_reason = "no file events arrive on this mount"
            self._start_observer(polling=True)
        return self

    def stop(self) -> None:
        """Stop the observer and wait for its threads."""
        self._stop_observer()

    def __enter__(self) -> BoardWatcher:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.stop()

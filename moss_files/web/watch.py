"""The web view's file watcher: which artifact kinds changed, told to the live pages. Edge layer
(owns watchdog's observer and one thread that gathers its events); watchdog is imported here,
by the board's waiters (`board.watch`, whose filter of watchdog's stopping noise it shares)
and by the sidecar in needlecast.

It watches the toolkit's folders, not the whole project: `.moss/`, `.cstack/` and
`.needlecast/` of the workspace (recursively), the `.needlecast/` of each local sleeve below an
envoy root, and the workspace folder itself (not recursively) to see those folders appear.
Events are hints: each path is mapped to the kind of artifact it holds (`kind_of`); paths
of no interest (locks, temp files of atomic writes, `.moss/run/`, the search cache, which
every search rewrites) are dropped; the kinds gathered are passed on once the burst goes
quiet (QUIET_SECONDS, at most MAX_BATCH_SECONDS after the first), so one claim (a task file,
the activity log, a worker file) is one notice. Only changes count: watchdog's `opened` and
`closed_no_write` events, which every page render's reads cause, are ignored, or each render
would trigger the next.

Where inotify cannot start, or a probe file written at start-up brings no event within
PROBE_TIMEOUT (network and some container mounts are blind to it), it polls instead.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from moss_files.board.watch import quiet_stopping_noise
from moss_files.foundation import fs
from moss_files.foundation.errors import MossError
from moss_files.foundation.loglevels import say

QUIET_SECONDS = 0.025
MAX_BATCH_SECONDS = 0.15
PROBE_TIMEOUT = 2.0
POLL_SECONDS = 0.5
TOP_FOLDERS = (".moss", ".cstack", ".needlecast")
CHANGE_EVENTS = frozenset({"created", "modified", "moved", "deleted", "closed"})
# Folders of `.moss/` and the kind of artifact each holds.
MOSS_KINDS = {"board": "board", "capsules": "capsules", "insights": "loopflow", "sessions": "loopflow", "agent": "agents"}
# Per-machine state under `.moss/` that changes without any artifact changing.
MOSS_IGNORED = frozenset({"run", "cache"})
KINDS = ("board", "capsules", "messages", "memory", "loopflow", "agents", "settings")

OnChange = Callable[[frozenset[str]], None]
Log = Callable[[str], None]


def kind_of(relpath: str) -> str | None:
    """The kind of artifact a changed path (relative to the workspace, `/`-separated) holds,
    or None when the change is of no interest to a page."""
    parts = [part for part in relpath.split("/") if part and part != "."]
    if not parts:
        return None
    name = parts[-1]
    if name.endswith(".lock") or ".tmp-" in name or name.endswith("~") or name.endswith(".swp") or ".locks" in parts:
        return None  # locks, atomic writes' temp files, editors' backups: the real file follows
    if ".needlecast" in parts:
        return "messages"
    if parts[0] == ".cstack":
        return "memory"
    if parts[0] != ".moss" or len(parts) < 2 or parts[1] in MOSS_IGNORED:
        return None
    if len(parts) == 2:
        return "settings" if name.endswith(".toml") else None
    return MOSS_KINDS.get(parts[1])


class _Sink:
    """watchdog's handler: every change event's paths go to the watcher."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def dispatch(self, event: Any) -> None:
        if getattr(event, "event_type", None) not in CHANGE_EVENTS:
            return
        for raw in (getattr(event, "src_path", None), getattr(event, "dest_path", None)):
            if raw:
                self.watcher.notice(os.fsdecode(raw))


class Watcher:
    """Watches the workspace at `root` and calls `on_change(kinds)` from its own thread.

    `sleeve_folders()` names the workspaces of local sleeves (an envoy root's); it is asked at
    start and whenever a top folder appears.
    """

    def __init__(
        self,
        root: Path,
        on_change: OnChange,
        *,
        sleeve_folders: Callable[[], Iterable[Path]] = tuple,
        poll: bool = False,
        log: Log | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.on_change = on_change
        self.sleeve_folders = sleeve_folders
        self.poll = poll
        self.log = log or (lambda text: None)
        self.mode = "off"
        self._prefix = str(self.root) + os.sep
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._first = 0.0
        self._last = 0.0
        self._resync = False
        self._stopping = False
        self._observer: Any = None
        self._watches: dict[Path, Any] = {}
        self._thread: threading.Thread | None = None
        self._probe_path: str | None = None
        self._probe_seen = threading.Event()

    # ----------------------------------------------------------------- events

    def notice(self, path: str) -> None:
        """One changed path (absolute), from the observer's thread."""
        if path == self._probe_path:
            self._probe_seen.set()
            return
        if not path.startswith(self._prefix):
            return
        relpath = path[len(self._prefix) :].replace(os.sep, "/")
        top = "/" not in relpath
        kind = kind_of(relpath)
        if kind is None and not top:
            return
        with self._cond:
            now = time.monotonic()
            if not self._pending and not self._resync:
                self._first = now
            self._last = now
            if kind is not None:
                self._pending.add(kind)
            if top:
                self._resync = True  # a toolkit folder or a sleeve may have appeared or gone
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._resync and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                # Gather until the burst goes quiet, or has lasted MAX_BATCH_SECONDS.
                while not self._stopping:
                    now = time.monotonic()
                    wait = min(self._last + QUIET_SECONDS, self._first + MAX_BATCH_SECONDS) - now
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                kinds, self._pending = frozenset(self._pending), set()
                resync, self._resync = self._resync, False
            if resync:
                try:
                    self._sync_watches()
                except OSError as exc:
                    say(self.log, "warn", f"moss serve: cannot watch a new folder: {exc}")
            if kinds:
                try:
                    self.on_change(kinds)
                except Exception as exc:  # a broken listener must not stop the watching
                    say(self.log, "error", f"moss serve: live update failed: {exc!r}")

    # ----------------------------------------------------------------- watching

    def _wanted(self) -> dict[Path, bool]:
        """Folders to watch, each with whether recursively."""
        wanted = {self.root: False}
        for name in TOP_FOLDERS:
            if (self.root / name).is_dir():
                wanted[self.root / name] = True
        try:
            folders = list(self.sleeve_folders())
        except MossError as err:
            say(self.log, "warn", f"moss serve: not watching the sleeves: {err}")
            folders = []
        for folder in folders:
            box = Path(folder).resolve() / ".needlecast"
            if box.is_dir() and box != self.root / ".needlecast":
                wanted[box] = True
        return wanted

    def _sync_watches(self) -> None:
        observer = self._observer
        if observer is None:
            return
        wanted = self._wanted()
        for path in list(self._watches):
            if path not in wanted or not path.is_dir():
                try:
                    observer.unschedule(self._watches.pop(path))
                except (KeyError, ValueError):
                    pass
        for path, recursive in wanted.items():
            if path not in self._watches and path.is_dir():
                self._watches[path] = observer.schedule(_Sink(self), str(path), recursive=recursive)

    def _start_observer(self, polling: bool) -> None:
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        self._stop_observer()
        # An event that arrives while the observer stops (the daemon removes its record file
        # just then) makes watchdog log an error after `moss serve: stopped`; nothing is lost.
        quiet_stopping_noise()
        self._observer = PollingObserver(timeout=POLL_SECONDS) if polling else Observer()
        self._observer.daemon = True
        self._watches = {}
        self.mode = "polling" if polling else "inotify"
        self._sync_watches()
        self._observer.start()

    def _stop_observer(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
            self._observer = None

    def _probe(self) -> bool:
        """True when a file written in a watched folder brings an event in time."""
        folder = self.root / ".moss" / "run"
        if not folder.is_dir():
            return True  # nothing to probe with; inotify is trusted
        path = folder / f".web-probe.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        self._probe_path = str(path)
        try:
            fs.create_exclusive(path, b"probe\n")
            return self._probe_seen.wait(PROBE_TIMEOUT)
        finally:
            fs.remove(path)
            self._probe_path = None

    def start(self) -> None:
        """Start watching (inotify, else polling) and the thread that passes changes on."""
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="moss-web-watch", daemon=True)
        self._thread.start()
        if self.poll:
            self._start_observer(polling=True)
            return
        try:
            self._start_observer(polling=False)
        except OSError as exc:
            say(self.log, "warn", f"moss serve: inotify unavailable ({exc}); polling every {POLL_SECONDS:g}s")
            self._start_observer(polling=True)
            return
        if not self._probe():
            say(self.log, "warn", f"moss serve: no file events arrive on this mount; polling every {POLL_SECONDS:g}s")
            self._start_observer(polling=True)

    def stop(self) -> None:
        """Stop the observer and the thread; returns when both have ended."""
        self._stop_observer()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.mode = "off"

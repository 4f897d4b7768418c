"""The sidecar daemon: watch outboxes, route on change, sweep, and serve the HTTP API.

Daemon entry layer. Threads: the caller's thread runs the routing loop; one thread reads the
inotify events (watchdog's observer threads, when polling); the HTTP server runs one thread with the event loop that holds every
connection, and a fixed pool of worker threads for complete requests (`needlecast.httpapi`).
`run` returns only after every one of them has stopped, so nothing is orphaned.

Watching: inotify (`_InotifyObserver`, one descriptor of moss-files' `foundation.inotify`).
If it cannot start, or a probe file
written at start-up produces no event within PROBE_TIMEOUT (network and some container mounts
are blind to inotify), or two safety sweeps find work before any event-driven pass has, the
sidecar switches to watchdog's PollingObserver. `--poll` starts with polling.

Events are hints, never trusted for content: each names a sleeve whose outbox may have
changed; names are gathered until the burst goes quiet (QUIET_SECONDS, at most
MAX_BATCH_SECONDS; while a burst goes on, BURST_QUIET_SECONDS, at most BURST_BATCH_SECONDS),
then those sleeves are routed. A full sweep of every outbox runs every
`sweep_seconds` regardless, and re-reads the sleeve directory.

The search index: with `index_watch`, in a workspace that has one (a `.moss/` folder), the
sidecar runs moss-files' `moss index watch --with-parent` beside itself, a child process that
keeps the index fresh from file events so that every search skips the walk of the files.
needlecast never imports moss-files' index: it runs the installed `moss` command (the one
beside this Python, else the one on PATH) and stops it when the sidecar stops.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator, Mapping
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

from moss_files.foundation import fs, inotify
from moss_files.foundation.conflicted import find_conflicted
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, NotFound, WatchError, error_body
from moss_files.foundation.httpguard import is_loopback
from moss_files.foundation.ids import format_time, system_clock
from moss_files.foundation.loglevels import say, shows
from needlecast import DEFAULT_PORT, mailbox, probes
from needlecast import message as msg
from needlecast.gitsync import GitSync, GitSyncSettings
from needlecast.httpapi import Api, Call, EventStream, format_comment, format_event, make_server
from needlecast.mailbox import Mailbox
from needlecast.message import ENVOY
from needlecast.peers import NONCE_LOG, NonceLog, Peer, wall_clock
from needlecast.router import Router, RouteReport, report_to_dict
from needlecast.routing import entry_to_dict
from needlecast.signing import ReplayGuard
from needlecast.sleeves import REGISTRY_NAME, sleeve_to_dict
from needlecast.status import PartCache, build_status, parse_vmrss
from needlecast.watch import InboxWatch

QUIET_SECONDS = 0.002
MAX_BATCH_SECONDS = 0.02
# While a burst goes on (the last pass took BURST_MESSAGES or more out of the outboxes), a pass
# gathers for longer: fewer, larger passes, each with the same few durable steps and the same
# fixed cost for every sender. A lone message is still routed after QUIET_SECONDS.
BURST_MESSAGES = 8
BURST_QUIET_SECONDS = 0.01
BURST_BATCH_SECONDS = 0.1
# After a pass that left archive copies to write (`Router.owes`), this long without new mail,
# and without a writer's temporary written in an outbox, lets a pass write them
# (`Router.route_owed`). A writer's temporaries say more mail is coming (`send --batch` writes
# its next part while the router delivers the last one), which new names alone do not.
OWED_QUIET_SECONDS = 0.05
_WRITES = frozenset({"created", "modified", "closed"})
PROBE_TIMEOUT = 2.0
HELD_RETRY_FIRST = 0.2  # seconds before the first retry of messages held for an unreachable recipient
RUNTIME_FILE = "sidecar.json"
Log = Callable[[str], None]
WorkspaceStats = Callable[[Path], Any]
# The sidecar's `/status` reports the workspace's task counts, which cstack computes; needlecast
# never imports cstack, so the function comes through this entry point group, which
# moss-files' pyproject.toml fills with `cstack = "cstack:stats"`.
STATS_ENTRY_POINTS = "needlecast.workspace_stats"
INDEX_WATCH_COMMAND = ("index", "watch", "--with-parent")  # `moss …`: stops by itself if the sidecar dies
INDEX_WATCH_STOP_SECONDS = 10.0
# An inbox event stream looks at the sidecar's stop flag this often, and says it is alive
# after this long without an event (a client behind a proxy would otherwise be cut off).
STREAM_TICK_SECONDS = 0.5
STREAM_KEEPALIVE_SECONDS = 15.0


def _identity(entry: Any) -> tuple[str, str]:
    """An inbox message's identity, as read.log records it: (sender, id)."""
    return (entry.message.sender or "", entry.key)


def find_workspace_stats() -> WorkspaceStats | None:
    """The installed provider of workspace stats (cstack's), or None."""
    from importlib.metadata import entry_points

    for entry in entry_points(group=STATS_ENTRY_POINTS):
        try:
            loaded: WorkspaceStats = entry.load()
        except ImportError:
            continue
        return loaded
    return None


def _moss_command() -> str | None:
    """The `moss` command installed with this Python (a virtualenv's), else the one on PATH."""
    import shutil

    beside = Path(sys.executable).with_name("moss")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("moss")


def read_runtime(root: Path) -> dict[str, Any] | None:
    """The running sidecar's {pid, url, host, port, requested_port, started} for a workspace, if
    any (`port` is the one it listens on; `requested_port` the one asked for, from which the
    default scans up to the first free one)."""
    path = Mailbox(root).state_dir / RUNTIME_FILE
    try:
        return json.loads(fs.read_bytes(path, max_bytes=65536))
    except (FileNotFoundError, NotADirectoryError, ValueError, MossError):
        return None


# Event kinds that can mean new content. Watchdog also reports opens and read-only closes,
# which the router's own reads cause; reacting to those would route in a loop.
_CHANGE_EVENTS = frozenset({"created", "modified", "moved", "deleted", "closed"})


def _event_filter() -> list[Any]:
    """The event classes worth hearing. Given to watchdog, they become the inotify mask, so the
    kernel never reports the opens and read-only closes of the router's own reads: a pass over
    a thousand v2 messages made some six thousand such events, and handling them in watchdog's
    thread took half the router's CPU."""
    from watchdog import events

    return [
        events.FileCreatedEvent,
        events.FileModifiedEvent,
        events.FileMovedEvent,
        events.FileDeletedEvent,
        events.FileClosedEvent,
        events.DirCreatedEvent,
        events.DirMovedEvent,
        events.DirDeletedEvent,
    ]


_KINDS = (
    (inotify.IN_CREATE, "created"),
    (inotify.IN_MODIFY, "modified"),
    (inotify.IN_CLOSE_WRITE, "closed"),
    (inotify.IN_MOVED_FROM, "moved_from"),
    (inotify.IN_MOVED_TO, "moved_to"),
    (inotify.IN_DELETE, "deleted"),
)
_WATCH_MASK = inotify.ENTRIES | inotify.IN_MODIFY | inotify.IN_CLOSE_WRITE | inotify.SELF | inotify.IN_ONLYDIR | inotify.IN_DONT_FOLLOW


class _InotifyObserver:
    """The part of a watchdog observer the sidecar uses (`schedule`, `unschedule`, `start`,
    `stop`, `join`), on one inotify descriptor that one thread reads, handing each event
    straight to `Sidecar.notice`. Watchdog's reader built an event object for each of a burst's
    eight events a message (a writer's temporary created, written, closed and renamed; a router
    setting the file aside and deleting it) and paired each rename's halves, in Python: in a
    burst of 1,000 v2 messages more CPU than the router's own Python (110-400 ms)."""

    def __init__(self, sidecar: Sidecar) -> None:
        try:
            self._notify = inotify.Inotify()
        except inotify.Unavailable as exc:
            raise OSError(f"inotify unavailable ({exc})") from None
        self._sidecar = sidecar
        self._folders: dict[int, Path] = {}  # watch -> folder
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="needlecast-inotify", daemon=True)
        self.daemon = True

    def schedule(self, _handler: Any, path: str, recursive: bool = False, event_filter: Any = None) -> int:
        try:
            wd = self._notify.add(path, _WATCH_MASK)
        except inotify.Unavailable as exc:
            raise OSError(errno.ENOSPC, str(exc)) from None
        if wd is None:
            raise OSError(errno.ENOENT, "no such folder", path)
        with self._guard:
            self._folders[wd] = Path(path)
        return wd

    def unschedule(self, wd: int) -> None:
        with self._guard:
            if self._folders.pop(wd, None) is None:
                return
        if self._notify.fd is not None:
            self._notify.remove(wd)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self._notify.close()

    def _run(self) -> None:
        fd = self._notify.fd
        assert fd is not None
        while not self._stop.is_set():
            readable, _, _ = select.select([fd], [], [], STREAM_TICK_SECONDS)
            if not readable:
                continue
            for wd, mask, name in self._notify.events():
                if mask & inotify.IN_Q_OVERFLOW:
                    self._sidecar.lost_events()
                    continue
                with self._guard:
                    folder = self._folders.get(wd)
                    if mask & inotify.IN_IGNORED:
                        self._folders.pop(wd, None)
                if folder is None:
                    continue
                if mask & (inotify.SELF | inotify.IN_IGNORED):
                    self._sidecar.notice(folder, True, "deleted")  # the folder itself went: look at the directory again
                    continue
                if not name:
                    continue
                for bit, kind in _KINDS:
                    if mask & bit:
                        self._sidecar.notice(folder / name, bool(mask & inotify.IN_ISDIR), kind)
                        break


class _EventSink:
    """Watchdog handler: turns file events into sleeve names to route (filtering our own noise)."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar

    def dispatch(self, event: Any) -> None:
        kind = getattr(event, "event_type", None)
        if kind not in _CHANGE_EVENTS:
            return
        if kind == "moved" and fs.is_temporary(Path(os.fsdecode(getattr(event, "dest_path", "") or ""))):
            # A file renamed to one of our temporary names (a router setting a routed outbox
            # file aside) left the outbox: nothing new to route. Heard, it would keep every
            # burst's pass looking busy (`Router.more_waiting`) and call one more pass.
            return
        for raw in (getattr(event, "src_path", None), getattr(event, "dest_path", None)):
            if raw:
                self.sidecar.notice(Path(os.fsdecode(raw)), bool(getattr(event, "is_directory", False)), kind)


class Sidecar:
    """One sidecar (or, without HTTP, a foreground router) for the workspace at `root`."""

    def __init__(
        self,
        root: Path,
        *,
        name: str | None = None,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        serve_http: bool = True,
        route: bool | None = None,
        poll: bool = False,
        poll_interval: float = 0.5,
        sweep_seconds: float = 30.0,
        clock: Callable[[], datetime] = system_clock,
        environ: Mapping[str, str] | None = None,
        log: Log | None = None,
        workspace_stats: WorkspaceStats | None = None,
        peers: Mapping[str, Peer] | None = None,
        host_name: str | None = None,
        git_sync: GitSyncSettings | None = None,
        index_watch: bool = False,
        scan: int = 1,
    ) -> None:
        if serve_http and not is_loopback(host) and not token:
            raise InvalidRequest(
                f"refusing to serve on {host} without a token",
                code="TOKEN_REQUIRED",
                hint="set NEEDLECAST_TOKEN (or --token-file), or bind 127.0.0.1",
            )
        self.root = root.resolve()
        self.name = name or self.root.name
        self.host, self.port, self.token = host, port, token
        self.requested_port, self.scan = port, scan
        self.serve_http = serve_http
        self.route_mode = route
        self.poll = poll
        self.poll_interval = poll_interval
        self.sweep_seconds = sweep_seconds
        self.clock = clock
        self.environ = dict(environ or {})
        self.log = log or (lambda text: None)
        self.workspace_stats = workspace_stats if workspace_stats is not None else find_workspace_stats()
        self.box = Mailbox(self.root)
        self.peers = dict(peers or {})
        self.router = Router(
            self.root,
            clock=clock,
            environ=environ,
            log=self.log,
            peers=self.peers,
            host_name=host_name or self.name,
            self_name=self.name,
            more_waiting=lambda: bool(self._pending),  # a hint, read without the lock
            writing=lambda: time.monotonic() - self._writing_at < OWED_QUIET_SECONDS,
        )
        self.cache = PartCache(time.monotonic)
        self._status_lock = threading.Lock()  # HTTP workers share one cache
        self.started = time.monotonic()
        self.stop_event = threading.Event()
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._writing_at = -math.inf  # when a temporary was last written in an outbox (a writer at work)
        self._directory_dirty = True
        self._owners: dict[Path, str] = {}
        self._observer: Any = None
        self._watches: dict[Path, Any] = {}
        self.watcher = "none"
        self._probe_path: Path | None = None
        self._probe_seen = threading.Event()
        self._missed_sweeps = 0  # sweeps that found work since events last proved to work
        self._held_backoff = HELD_RETRY_FIRST
        self.git_settings = git_sync
        self.git: GitSync | None = None
        self._next_sync = math.inf
        self._events_seen = 0
        self.passes = 0
        self.last_pass: str | None = None
        self.last_report: RouteReport | None = None
        self.routing = False
        self.problems: list[dict[str, Any]] = []
        self.url: str | None = None
        self.index_watch = index_watch

    # ----------------------------------------------------------------- events

    def notice(self, path: Path, is_directory: bool, kind: str = "") -> None:
        """Record that `path` changed (called from observer threads) by an event of `kind`
        (watchdog's, or `moved_from` / `moved_to` for each half of a rename)."""
        if self._probe_path is not None and path == self._probe_path:
            self._probe_seen.set()
            return
        if fs.is_temporary(path):
            if kind in _WRITES and path.parent.name == "outbox" and path.parent.parent in self._owners:
                self._writing_at = time.monotonic()  # a writer's next message is on its way
            return
        parent = path.parent
        if kind in ("moved_from", "deleted") and not is_directory and (parent.name == "outbox" or path.name == "outbox.md"):
            return  # a message leaving an outbox (a router setting it aside): nothing new to route
        owner: str | None = None
        if path.name == "outbox.md" and parent in self._owners:
            owner = self._owners[parent]
        elif parent.name == "outbox" and parent.parent in self._owners:
            owner = self._owners[parent.parent]
        elif path.name == "outbox" and parent in self._owners:
            owner = self._owners[parent]
            self._mark_dirty()  # a v2 outbox folder appeared: it needs a watch
        elif path.name == REGISTRY_NAME or (parent == self.root and is_directory and path.name != mailbox.DIR_NAME):
            self._mark_dirty()  # the registry changed, or a folder (maybe a sleeve) came or went
            return
        if owner is None:
            return
        with self._cond:
            self._events_seen += 1
            self._pending.add(owner)
            self._cond.notify_all()

    def lost_events(self) -> None:
        """The kernel dropped events (its queue overflowed): route every sender, re-read the
        directory."""
        with self._cond:
            self._pending.update(self._owners.values())
            self._directory_dirty = True
            self._cond.notify_all()

    def _mark_dirty(self) -> None:
        with self._cond:
            self._directory_dirty = True
            self._cond.notify_all()

    def request_stop(self) -> None:
        """Ask the loop to finish (safe from signal handlers and other threads)."""
        self.stop_event.set()
        with self._cond:
            self._cond.notify_all()

    # ----------------------------------------------------------------- watching

    def _desired_watches(self) -> dict[Path, str | None]:
        wanted: dict[Path, str | None] = {self.root: None}
        owners: dict[Path, str] = {}
        if self.routing:
            for sleeve in self.router.senders():
                assert sleeve.path is not None
                box = Mailbox(sleeve.path)
                owners[box.dir] = sleeve.name
                wanted[box.dir] = sleeve.name
                if box.outbox_dir.is_dir():
                    wanted[box.outbox_dir] = sleeve.name
        if self.box.dir.is_dir():
            wanted.setdefault(self.box.dir, None)
        self._owners = owners
        return wanted

    def _sync_watches(self) -> None:
        if self._observer is None:
            return
        wanted = self._desired_watches()
        for path in list(self._watches):
            if path not in wanted or not path.is_dir():
                try:
                    self._observer.unschedule(self._watches.pop(path))
                except (KeyError, ValueError):
                    pass
        for path in wanted:
            if path not in self._watches and path.is_dir():
                try:
                    self._watches[path] = self._observer.schedule(_EventSink(self), str(path), recursive=False, event_filter=_event_filter())
                except OSError as exc:
                    raise WatchError(f"cannot watch {path}: {exc.strerror}", path=path, hint="raise fs.inotify.max_user_watches, or use --poll") from None

    def _start_observer(self, polling: bool) -> None:
        from watchdog.observers.polling import PollingObserver

        self._stop_observer()
        self._observer = PollingObserver(timeout=self.poll_interval) if polling else _InotifyObserver(self)
        self._observer.daemon = True
        self._watches = {}
        self.watcher = "polling" if polling else "inotify"
        self._sync_watches()
        self._observer.start()

    def _stop_observer(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
            self._observer = None

    def _fall_back(self, why: str) -> None:
        say(self.log, "warn", f"needlecast: switching to polling every {self.poll_interval:g}s: {why}")
        self._start_observer(polling=True)

    def _probe(self) -> bool:
        """True when a file written in a watched folder produces an event in time."""
        folder = self.box.dir if self.box.dir.is_dir() else next(iter(self._owners), None)
        if folder is None:
            return True
        self._probe_path = folder / f".sidecar-probe.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            fs.create_exclusive(self._probe_path, b"probe\n")
            return self._probe_seen.wait(PROBE_TIMEOUT)
        finally:
            fs.remove(self._probe_path)

    def _start_watching(self) -> None:
        if self.poll:
            self._start_observer(polling=True)
            return
        try:
            self._start_observer(polling=False)
        except (OSError, WatchError) as exc:
            self._fall_back(f"inotify unavailable ({exc})")
            return
        if not self._probe():
            self._fall_back("no file events arrive on this mount")

    # ----------------------------------------------------------------- routing

    def _refresh(self) -> None:
        try:
            directory = self.router.refresh()
        except MossError as err:
            self._problem(err)
            return
        # A lone sleeve's sidecar serves only, unless it has peers: then it routes its own outbox.
        others = any(sleeve.origin in ("child", "registry", "peer") for sleeve in directory.sleeves.values())
        self.routing = self.route_mode if self.route_mode is not None else others
        self._sync_watches()

    def _problem(self, err: MossError) -> None:
        self.problems = [{"at": format_time(self.clock()), **error_body(err)["error"]}]
        say(self.log, "error", f"needlecast: {err}")

    def sync_soon(self) -> None:
        """Bring the next git sync round forward: something changed (safe from any thread)."""
        if self.git is None:
            return
        with self._cond:
            self._next_sync = min(self._next_sync, time.monotonic() + self.git.settings.debounce)
            self._cond.notify_all()

    def _git_round(self) -> None:
        assert self.git is not None
        before = (self.git.state, self.git.conflicts)
        pulled = self.git.pulled
        self.git.sync()
        if self.git.pulled != pulled or self.git.conflicts:
            with self._status_lock:  # a merge may have brought (or left) conflict markers
                self.cache.forget("conflicts")
        with self._cond:
            self._next_sync = time.monotonic() + self.git.settings.interval
        if (self.git.state, self.git.conflicts) != before or self.git.state == "error":
            detail = f": {self.git.error['message']}" if self.git.error else ""
            conflicted = f" in {', '.join(self.git.conflicts)}" if self.git.conflicts else ""
            say(self.log, "error" if self.git.state == "error" else "info", f"needlecast: git sync {self.git.state}{conflicted}{detail}")

    def _record(self, report: RouteReport) -> None:
        if report.delivered or report.archived or report.removed or report.dead_letters:
            self.sync_soon()
        self.passes += 1
        self.last_pass = format_time(self.clock())
        self.last_report = report
        self.problems = list(report.problems) + list(report.held)
        if report.delivered or report.dead_letters or report.removed:
            self.log(
                f"needlecast: routed {report.delivered} {'delivery' if report.delivered == 1 else 'deliveries'}, {report.archived} archived, "
                f"{report.dead_letters} dead {'letter' if report.dead_letters == 1 else 'letters'}, {report.pending} waiting"
            )
        elif shows(self.log, "debug"):
            say(self.log, "debug", f"needlecast: pass {self.passes}: nothing routed, {report.pending} waiting, {len(report.held)} held")
        for problem in report.problems:
            say(self.log, "warn", f"needlecast: {problem.get('sleeve')}: [{problem.get('code')}] {problem.get('message')}")

    def _sweep(self, scheduled: bool = True) -> None:
        self._refresh()
        if not self.routing:
            return
        try:
            report = self.router.route_all()
        except MossError as err:  # the registry became unreadable: report it, keep serving
            self._problem(err)
            return
        self._record(report)
        # With working events the event-driven passes deliver first, so a sweep seldom finds
        # work; sweeps that keep finding it mean the watcher is blind on this mount.
        if scheduled and (report.delivered or report.dead_letters):
            self._missed_sweeps += 1
        if self._missed_sweeps >= 2 and self.watcher == "inotify":
            self._fall_back("two safety sweeps found messages no file event had announced")

    def _retry_held(self, report: RouteReport, retry_at: float | None) -> float | None:
        """When a pass held messages for a recipient it could not reach (a peer restarting, a
        sidecar down), look again soon, backing off from HELD_RETRY_FIRST to the sweep interval."""
        if not report.held:
            self._held_backoff = HELD_RETRY_FIRST
            return retry_at
        at = time.monotonic() + self._held_backoff
        self._held_backoff = min(self._held_backoff * 2, max(HELD_RETRY_FIRST, self.sweep_seconds))
        return at if retry_at is None else min(retry_at, at)

    def loop(self) -> None:
        """Route until asked to stop (the first round is a full sweep)."""
        next_sweep = time.monotonic()
        retry_at: float | None = None
        bursting = False
        while not self.stop_event.is_set():
            owed_at = max(time.monotonic(), self._writing_at) + OWED_QUIET_SECONDS if self.routing and self.router.owes() else math.inf
            with self._cond:
                while not (self._pending or self._directory_dirty or self.stop_event.is_set()):
                    wake = min(next_sweep, retry_at or next_sweep, self._next_sync, owed_at)
                    remaining = wake - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(min(remaining, 0.5))
                # Let a burst finish: wait for a short quiet spell, bounded by a batch limit.
                quiet, batch = (BURST_QUIET_SECONDS, BURST_BATCH_SECONDS) if bursting else (QUIET_SECONDS, MAX_BATCH_SECONDS)
                batch_end = time.monotonic() + batch
                seen = self._events_seen
                while self._pending and not self.stop_event.is_set() and time.monotonic() < batch_end:
                    self._cond.wait(quiet)
                    if self._events_seen == seen:
                        break
                    seen = self._events_seen
                names, self._pending = self._pending, set()
                dirty, self._directory_dirty = self._directory_dirty, False
            if self.stop_event.is_set():
                break
            try:
                if dirty:
                    self._refresh()
                if self.routing and not names and self.router.owes() and time.monotonic() >= max(owed_at, self._writing_at + OWED_QUIET_SECONDS):
                    self._record(self.router.route_owed())  # the burst is over: its archive copies
                if names and self.routing:
                    report = self.router.route_names(names)
                    bursting = max(report.removed, report.delivered) >= BURST_MESSAGES
                    self._record(report)
                    if report.delivered or report.dead_letters:
                        self._missed_sweeps = 0  # events do arrive here
                    if report.unsettled:
                        retry_at = time.monotonic() + mailbox.TAIL_SETTLE_SECONDS
                    retry_at = self._retry_held(report, retry_at)
                now = time.monotonic()
                retrying = False
                if retry_at is not None and now >= retry_at:
                    retry_at = None
                    retrying = now < next_sweep
                    next_sweep = now  # an unfinished tail, or held messages, are picked up by a sweep
                if now >= next_sweep:
                    next_sweep = time.monotonic() + self.sweep_seconds
                    self._sweep(scheduled=not retrying)
                    if self.last_report is not None and self.last_report.unsettled:
                        retry_at = time.monotonic() + mailbox.TAIL_SETTLE_SECONDS
                    if self.last_report is not None:
                        retry_at = self._retry_held(self.last_report, retry_at)
                if self.git is not None and time.monotonic() >= self._next_sync:
                    self._git_round()
            except Exception as exc:  # a bug in one pass must not stop the daemon; the next pass retries
                say(self.log, "error", f"needlecast: internal error, retrying in a second: {type(exc).__name__}: {exc}")
                say(self.log, "error", "".join(traceback.format_exception(exc)).rstrip())
                self.stop_event.wait(1.0)

    # ----------------------------------------------------------------- status and API

    def _cstack_part(self) -> Any:
        if not (self.root / ".cstack").is_dir():
            return None
        if self.workspace_stats is None:
            raise MossError(f"no provider of workspace stats is installed (entry point group {STATS_ENTRY_POINTS!r})")
        return self.workspace_stats(self.root)

    def _needlecast_part(self) -> dict[str, Any]:
        # The top (unread mail and recent), read in full; the month folders' read history counted by name.
        entries = mailbox.read_inbox(self.box, top_only=True)
        marks = mailbox.read_marks(self.box)
        unread = sum(1 for e in entries if e.message is not None and (e.message.sender or "", e.key) not in marks)
        return {
            "layout": self.box.layout(),
            "inbox_total": len(entries) + len(mailbox.rotated_inbox_files(self.box)),
            "inbox_unread": unread,
            "outbox_pending": len(mailbox.read_outbox(self.box, self.root_name()).entries),
            "dead_letters": len(mailbox.read_dead_letters(self.box)),
        }

    def _router_part(self) -> dict[str, Any]:
        directory = self.router.directory
        return {
            "enabled": self.routing,
            "watcher": self.watcher,
            "sleeves": sum(1 for s in directory.sleeves.values() if s.origin not in ("envoy", "self")) if directory is not None else 0,
            "peers": sorted(self.peers),
            "passes": self.passes,
            "last_pass": self.last_pass,
            "last_report": report_to_dict(self.last_report) if self.last_report is not None else None,
            "problems": self.problems,
        }

    def _conflicts_part(self) -> list[dict[str, Any]]:
        # The memory files and mailboxes only: the files this daemon reads. Capsules and the
        # board can be many thousand files; `moss merge check` scans those on demand.
        found = find_conflicted(self.root, (".cstack", ".needlecast"))
        return [{"code": "MERGE_CONFLICT", "path": str(path.relative_to(self.root)), "line": line} for path, line in found]

    def _process_part(self) -> dict[str, Any]:
        memory: float | None = None
        try:
            memory = parse_vmrss(Path("/proc/self/status").read_text())
        except OSError:
            pass
        return {"pid": os.getpid(), "uptime_seconds": int(time.monotonic() - self.started), "memory_mb": memory}

    def root_name(self) -> str:
        """The name routing knows this workspace by: `envoy` at an envoy root (other local
        sleeves around it), this sidecar's own name at a lone sleeve. /status and the mailbox
        endpoints report it, so they agree with where messages to the root are delivered."""
        if self.router.directory is None:
            return self.name
        for sleeve in self.router.senders():
            if sleeve.path == self.root and sleeve.origin in ("envoy", "self"):
                return sleeve.name
        return self.name

    def status(self) -> dict[str, Any]:
        """The `/status` body."""
        with self._status_lock:
            parts = {
                "dhf": self.cache.get("dhf", lambda: probes.detect_dhf(self.environ)),
                "cstack": self.cache.get("cstack", self._cstack_part),
                "auth": self.cache.get("auth", lambda: probes.detect_auth(self.environ)),
                "needlecast": self.cache.get("needlecast", self._needlecast_part),
                "router": self.cache.get("router", self._router_part),
                "conflicts": self.cache.get("conflicts", self._conflicts_part),
                "git_sync": self.cache.get("git_sync", lambda: self.git.status() if self.git is not None else {"enabled": False}),
                "process": self.cache.get("process", self._process_part),
                "terminal": self.cache.get("terminal", lambda: probes.detect_terminal(self.environ)),
            }
        return build_status(self.root_name(), str(self.root), parts)

    def _api(self) -> Api:
        log = NonceLog(self.box.state_dir / NONCE_LOG)
        guard = ReplayGuard()
        if self.peers:
            log.load(guard, wall_clock())
        api = Api(self.token, self.log, peers=self.peers, clock=wall_clock, remember=log.append if self.peers else None, guard=guard)
        api.add("GET", "/health", lambda call: (200, {"status": "ok"}))
        api.add("GET", "/status", lambda call: (200, self.status()))
        api.add("GET", "/outbox", self._get_outbox)
        api.add("GET", "/inbox", self._get_inbox)
        api.add("GET", "/inbox/events", self._inbox_events)
        api.add("POST", "/inbox", self._post_inbox, peers=True)
        api.add("GET", "/sleeves", self._get_sleeves)
        api.add("POST", "/sleeves/{name}/inbox", self._post_sleeve_inbox, peers=True)
        return api

    def _get_outbox(self, call: Call) -> tuple[int, Any]:
        name = self.root_name()
        scan = mailbox.read_outbox(self.box, name)
        return 200, {"sleeve": name, "messages": [entry_to_dict(e) for e in scan.entries], "unsettled": scan.unsettled}

    def _get_inbox(self, call: Call) -> tuple[int, Any]:
        unread_only = call.query.get("unread", ["0"])[-1] in ("1", "true", "yes")
        marks = mailbox.read_marks(self.box)
        rows = []
        for entry in mailbox.read_inbox(self.box, top_only=unread_only):
            read = mailbox.is_read(entry, marks)
            if unread_only and read:
                continue
            rows.append({**entry_to_dict(entry), "read": read})
        return 200, {"sleeve": self.root_name(), "messages": rows}

    def _inbox_events(self, call: Call) -> tuple[int, Any]:
        if not self.box.dir.is_dir():
            raise NotFound(f"no mailbox at {self.box.dir}", hint="run `needlecast init` first")
        unread_first = call.query.get("unread", ["0"])[-1] in ("1", "true", "yes")
        return 200, EventStream(self._inbox_event_chunks(unread_first))

    def _inbox_event_chunks(self, unread_first: bool) -> Generator[bytes, None, None]:
        """The inbox's events for one client: a `message` event for each message that arrives
        while it stays (and first the unread ones, when asked), a keep-alive comment every
        STREAM_KEEPALIVE seconds, until the client leaves or the sidecar stops."""
        with InboxWatch(self.box, poll=self.poll, poll_interval=min(self.poll_interval, 0.25)) as watch:
            # New arrivals and unread mail are at the inbox's top (`mailbox.rotate_inbox`).
            entries = [entry for entry in mailbox.read_inbox(self.box, top_only=True) if entry.message is not None]
            seen = {_identity(entry) for entry in entries}
            yield format_comment(f"watching the inbox of {self.name} ({watch.mode})")
            if unread_first:
                marks = mailbox.read_marks(self.box)
                for entry in entries:
                    if _identity(entry) not in marks:
                        yield format_event("message", {**entry_to_dict(entry), "read": False}, entry.key)
            quiet_since = time.monotonic()
            while not self.stop_event.is_set():
                if watch.wait(STREAM_TICK_SECONDS):
                    arrived = [e for e in mailbox.read_inbox(self.box, top_only=True) if e.message is not None and _identity(e) not in seen]
                    for entry in arrived:
                        seen.add(_identity(entry))
                        yield format_event("message", {**entry_to_dict(entry), "read": False}, entry.key)
                    if arrived:
                        quiet_since = time.monotonic()
                if time.monotonic() - quiet_since >= STREAM_KEEPALIVE_SECONDS:
                    yield format_comment("keep-alive")
                    quiet_since = time.monotonic()
                else:
                    yield b""  # lets the server see whether the client is still there

    def _get_sleeves(self, call: Call) -> tuple[int, Any]:
        directory = self.router.directory or self.router.refresh()
        return 200, {"sleeve": self.root_name(), "host": self.router.host_name, "sleeves": [sleeve_to_dict(s) for s in directory.sleeves.values()]}

    def _post_inbox(self, call: Call) -> tuple[int, Any]:
        if not self.box.dir.is_dir():
            mailbox.init_mailbox(self.root)
        return self._deliver_posted(self.box, call)

    def _post_sleeve_inbox(self, call: Call) -> tuple[int, Any]:
        name = call.params["name"]
        if name in (self.name, ENVOY, self.router.host_name):
            return self._post_inbox(call)
        directory = self.router.directory or self.router.refresh()
        target = directory.get(name)
        if target is None or target.remote or target.path is None or "@" in name:
            # Never passed on to another host: a peer reaches the sleeves of this one only.
            raise NotFound(f"no sleeve {name!r} on this host", code="UNKNOWN_RECIPIENT")
        if target.problem is not None:
            raise target.problem
        box = Mailbox(target.path)
        if not box.exists():
            raise NotFound(f"sleeve {name!r} has no mailbox", code="SLEEVE_UNAVAILABLE")
        return self._deliver_posted(box, call)

    def _deliver_posted(self, box: Mailbox, call: Call) -> tuple[int, Any]:
        body = call.body
        items = body.get("messages") if isinstance(body, dict) and "messages" in body else [body]
        if not isinstance(items, list) or not items:
            raise InvalidRequest('send a message object or {"messages": [...]}', code="MESSAGE_INVALID")
        messages = []
        for item in items:
            message = msg.message_from_dict(item)
            if not message.sender:
                raise InvalidRequest("a delivered message needs `from`", code="MESSAGE_INVALID")
            if call.peer is not None:
                message = msg.with_changes(message, sender=self._sender_from_peer(message.sender, call.peer))
            if not message.id:
                # Same content from the same sender names the same message, so retries dedupe.
                canonical = json.dumps(msg.message_to_dict(message), sort_keys=True, ensure_ascii=False)
                message = msg.with_changes(message, id=msg.derive_id(message.sender or "", canonical, "http"))
            if not message.time:
                message = msg.with_changes(message, time=format_time(self.clock()))
            messages.append(message)
        results = mailbox.deliver(box, messages, self.clock())
        status = 201 if mailbox.DELIVERED in results else 200
        if status == 201:
            self.sync_soon()
        return status, {"ok": True, "results": [{"id": m.id, "status": r} for m, r in zip(messages, results, strict=True)]}

    def _sender_from_peer(self, sender: str, peer: str) -> str:
        """The name a peer's sender goes by here: itself when this directory already knows that
        name as living on that peer, else `sender@peer`, so a reply finds its way back and no
        peer can speak for a sleeve of this host or of another peer."""
        if "@" in sender:
            raise InvalidRequest(f"peer {peer!r} may send for its own sleeves only, not {sender!r}", code="MESSAGE_INVALID")
        directory = self.router.directory or self.router.refresh()
        known = directory.sleeves.get(sender)
        return sender if known is not None and known.peer == peer else f"{sender}@{peer}"

    # ----------------------------------------------------------------- the search index

    def _start_index_watcher(self) -> subprocess.Popen[bytes] | None:
        """`moss index watch --with-parent` for this workspace, when it has a search index to
        keep (`.moss/`), runs on Linux and has the `moss` command; else None (said in the log
        when it was wanted but cannot run)."""
        if not (self.root / ".moss").is_dir():
            return None
        if not sys.platform.startswith("linux"):
            say(self.log, "warn", "needlecast: the search index watcher needs Linux inotify; searches walk the files")
            return None
        moss = _moss_command()
        if moss is None:
            say(self.log, "warn", "needlecast: no `moss` command found, so no search index watcher; searches walk the files")
            return None
        try:
            # stderr is the sidecar's: the watcher tells only problems there.
            child = subprocess.Popen([moss, *INDEX_WATCH_COMMAND, "--root", str(self.root)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except OSError as exc:
            say(self.log, "warn", f"needlecast: cannot start the search index watcher ({exc.strerror}); searches walk the files")
            return None
        self.log(f"needlecast: keeping the search index warm (moss index watch, pid {child.pid})")
        return child

    def _stop_index_watcher(self, child: subprocess.Popen[bytes]) -> None:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=INDEX_WATCH_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        elif child.returncode != 0:  # it had stopped on its own: another watcher serves, or it failed
            say(self.log, "warn", f"needlecast: the search index watcher had stopped (exit {child.returncode}); searches walked the files")

    # ----------------------------------------------------------------- lifecycle

    def run(self) -> int:
        """Run until `request_stop` (or SIGTERM/SIGINT when called on the main thread); return 0.

        Raises Conflict ALREADY_RUNNING when another sidecar holds this workspace.
        """
        fs.ensure_ignored(self.box.state_dir)  # per-machine state: ignored by git even where .gitignore lacks the lines
        with ExitStack() as stack:
            try:
                stack.enter_context(fs.locked(self.box.state_dir / "sidecar", timeout=0))
            except Conflict:
                running = read_runtime(self.root) or {}
                raise Conflict(
                    "another sidecar is already running for this workspace",
                    code="ALREADY_RUNNING",
                    path=self.root,
                    details={k: running[k] for k in ("pid", "url") if k in running},
                ) from None
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGTERM, signal.SIGINT):
                    previous = signal.signal(signum, lambda *_: self.request_stop())
                    stack.callback(signal.signal, signum, previous)
            server_thread: threading.Thread | None = None
            if self.serve_http:
                server = make_server(self._api(), self.host, self.port, scan=self.scan)  # Conflict when the port (every one scanned) is taken
                stack.callback(server.close)
                self.port = server.port
                if self.requested_port and self.port != self.requested_port:
                    self.log(f"needlecast: port {self.requested_port} is in use; took {self.port}, the next free one")
                self.url = f"http://{self.host}:{self.port}"
                server_thread = threading.Thread(target=server.run, name="needlecast-http")
                server_thread.start()
                stack.callback(server_thread.join)
                stack.callback(server.stop)
            self._refresh()
            if self.git_settings is not None:
                self.git = GitSync(self.root, self.git_settings, name=self.name, clock=self.clock, environ=self.environ)
                self.git.setup()  # outside a clone: refuse to start (exit 6) rather than pretend
                self._next_sync = time.monotonic()
            self._start_watching()
            stack.callback(self._stop_observer)
            index_watcher = self._start_index_watcher() if self.index_watch else None
            if index_watcher is not None:
                stack.callback(self._stop_index_watcher, index_watcher)
            runtime = self.box.state_dir / RUNTIME_FILE
            fs.write_atomic(
                runtime,
                json.dumps(
                    {
                        "pid": os.getpid(),
                        "url": self.url,
                        "host": self.host,
                        "port": self.port if self.serve_http else None,
                        "requested_port": self.requested_port if self.serve_http else None,
                        "started": format_time(self.clock()),
                    }
                ).encode(),
            )
            stack.callback(runtime.unlink, missing_ok=True)
            where = f" on {self.url}" if self.url else ""
            self.log(f"needlecast: sidecar for {self.root} ready{where} (watcher: {self.watcher}, routing: {'on' if self.routing else 'off'})")
            self.loop()
            if self.routing and self.router.owes():
                try:
                    self._record(self.router.route_owed())  # leave nothing set aside
                except MossError as err:
                    self._problem(err)
            self.log("needlecast: stopping")
        return 0

"""A warm search index: a watcher process that follows the artifact folders' file events
(Linux inotify) and keeps the cache fresh, and the `sync` handshake that lets a query skip the
walk while it runs. Edge layer: owns one inotify descriptor and one Unix socket
(`.moss/run/index.sock`, per machine, git-ignored), and (`start_beside`) the watcher process a
daemon runs beside itself; the index itself is refreshed through `database.SearchIndex`, as
any query would, for the files the events named (a walk of everything only when folders
changed).

Why a query may trust the watcher: the kernel queues a file's inotify event inside the very
system call that changed it, before the call returns. A query connects and asks `sync`; the
watcher then drains every queued event, refreshes the files any of them named (or walks, when
one touched a folder), commits, and only then answers `fresh`. So every change completed before the
query asked is in the index it reads; a file edited one millisecond earlier included. A folder
created, removed or renamed (and a queue overflow) makes the watcher re-read its set of watched
folders and refresh by a full walk, so files written into a new folder before its watch existed
are found too. Without an answer (no watcher, a dead one's socket, a timeout, another
registry), the query walks as before. Not seen by inotify, so not trusted to it: writes through
a shared memory map and changes made by another machine on a network file system.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from moss_files.foundation.errors import CacheError, MossError
from moss_files.foundation.inotify import (
    IN_ATTRIB,
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_DONT_FOLLOW,
    IN_EXCL_UNLINK,
    IN_IGNORED,
    IN_ISDIR,
    IN_MODIFY,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_ONLYDIR,
    IN_Q_OVERFLOW,
    IN_UNMOUNT,
    Inotify,
    Unavailable,
)
from moss_files.foundation.loglevels import say
from moss_files.index.model import WATCH_SOCKET, RefreshReport, Registry

if TYPE_CHECKING:
    import socket
    import subprocess

SOCKET_PATH = Path(WATCH_SOCKET)
SYNC_TIMEOUT = 10.0  # a busy watcher may be walking a large tree; past this the query walks
REQUEST_TIMEOUT = 2.0  # a client that connects and says nothing holds the watcher no longer
SETTLE_SECONDS = 0.02  # events are applied once none came for this long (a burst is one refresh)
MAX_DELAY_SECONDS = 0.25  # ... or once the first of them waited this long; a query's sync never waits
RETRY_SECONDS = 1.0  # after a refresh failed (the cache locked, a full disk), before trying again unasked
_SUN_PATH_MAX = 107  # sockaddr_un's path, less its terminating NUL


_ENTRIES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
_SELF = IN_DELETE_SELF | IN_MOVE_SELF
FOLDER_MASK = _ENTRIES | _SELF | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
ROOT_MASK = _ENTRIES | _SELF | IN_ONLYDIR | IN_DONT_FOLLOW


# --------------------------------------------------------------------------- what an event means

IGNORE, FILE, TREE, GONE = "ignore", "file", "tree", "gone"
_WALK = "walk"  # pending: the folders are watched anew, every file is still to be walked


def classify(folder: str | None, mask: int, name: str, registry: Registry, *, tops: tuple[str, ...]) -> str:
    """What one event asks of the watcher: IGNORE it, refresh the files (FILE), re-read the
    set of watched folders and then refresh (TREE), or stop, the workspace itself being moved
    or removed (GONE). `folder` is the watched folder relative to the workspace ("" for the
    workspace itself; None for a watch the watcher no longer knows)."""
    if folder == "" and mask & (IN_UNMOUNT | IN_IGNORED | _SELF):
        return GONE
    if mask & (IN_Q_OVERFLOW | IN_UNMOUNT | _SELF):
        return TREE
    if folder is None:
        return IGNORE if mask & IN_IGNORED else TREE
    if mask & IN_IGNORED:
        return TREE
    if folder == "":
        return TREE if name in tops else IGNORE
    if name.startswith("."):
        return IGNORE  # temp and lock files; an atomic write's rename names the real file
    if mask & IN_ISDIR:
        return TREE if registry.descend(f"{folder}/{name}") else IGNORE
    return FILE if name.endswith(".md") else IGNORE


def watched_folders(root: Path, registry: Registry) -> list[str]:
    """Every folder the index walk enters (links excluded, as the walk excludes them)."""
    base = str(root)
    stack = [top for top in registry.tops if registry.descend(top) and os.path.isdir(f"{base}/{top}") and not os.path.islink(f"{base}/{top}")]
    folders: list[str] = []
    while stack:
        folder = stack.pop()
        folders.append(folder)
        try:
            entries = os.scandir(f"{base}/{folder}")
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        with entries:
            for entry in entries:
                child = f"{folder}/{entry.name}"
                if entry.name[0] != "." and entry.is_dir(follow_symlinks=False) and registry.descend(child):
                    stack.append(child)
    return folders


# --------------------------------------------------------------------------- the query's side


def socket_path(root: Path) -> Path:
    return Path(root) / SOCKET_PATH


def synced(root: Path, registry_fingerprint: str, *, timeout: float = SYNC_TIMEOUT) -> int | None:
    """Ask a running watcher to bring the index in step with every change made so far.
    The number of files the fresh index holds when the watcher answered so; None (walk
    instead) otherwise."""
    path = str(socket_path(root))
    if len(path.encode()) > _SUN_PATH_MAX or not os.path.exists(path):
        return None
    # The C module alone: `socket` builds its enums at import (a millisecond of every query's
    # start-up), and a plain Unix stream needs none of it. Here: a query with no watcher
    # never pays even for this.
    import _socket

    client = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        client.settimeout(timeout)
        client.connect(path)
        client.sendall(f"sync {registry_fingerprint}\n".encode())
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = client.recv(256)
            if not chunk:
                break
            answer += chunk
        words = answer.split()
        return int(words[1]) if len(words) == 2 and words[0] == b"fresh" and words[1].isdigit() else None
    except OSError:
        return None  # no watcher (ECONNREFUSED: a stale socket), or it did not answer in time
    finally:
        client.close()


# --------------------------------------------------------------------------- the watcher


class _Inotify:
    """The watcher's inotify descriptor (`foundation.inotify`), its failures as CacheError."""

    def __init__(self) -> None:
        try:
            self._watches = Inotify()
        except Unavailable as err:
            raise CacheError(f"cannot start watching files: {err}", hint="on Linux, inotify; elsewhere queries walk the files") from None
        fd = self._watches.fd
        assert fd is not None
        self.fd: int = fd

    def add(self, path: str, mask: int) -> int | None:
        """The watch descriptor of `path` (the same one when it is watched already); None
        when the folder is gone. Raises CacheError when the system's watch limit is reached."""
        try:
            return self._watches.add(path, mask)
        except Unavailable as err:
            raise CacheError(
                f"cannot watch {path}: {err}",
                hint="raise fs.inotify.max_user_watches, or stop the watcher (queries then walk the files)",
            ) from None

    def events(self) -> list[tuple[int, int, str]]:
        """Every queued event as (watch, mask, name), without waiting."""
        return self._watches.events()

    def close(self) -> None:
        self._watches.close()


@dataclass
class WatchStats:
    """Counters of what a watch has done, for its status report."""

    folders: int = 0
    syncs: int = 0
    refreshes: int = 0
    rewatches: int = 0


class Watcher:
    """Keeps one workspace's index fresh from file events and answers `sync` on its socket.

    `refresh(paths)` brings the index in step with the files: with None by a full walk (the
    watcher's own refreshes are the only ones that walk while it runs), else by looking at
    those files alone (relative to the root), the ones the events named. `registry` names
    what is indexed. Events are applied once they settle (SETTLE_SECONDS without another, at
    most MAX_DELAY_SECONDS after the first), so a burst of writes costs one refresh; a query's
    `sync` applies everything queued at once.
    """

    def __init__(
        self,
        root: Path,
        registry: Registry,
        refresh: Callable[[Collection[str] | None], RefreshReport],
        *,
        log: Callable[[str], None] | None = None,
        quiet: bool = False,
    ) -> None:
        self.root = Path(root)
        self.registry = registry
        self.refresh = refresh
        self.log = log or (lambda message: None)
        self.stats = WatchStats()
        self._tops = registry.tops
        self._folders: dict[int, str] = {}
        self.files = 0  # what the index held after the last refresh
        self.gone = False  # the workspace itself was moved or removed: stop, answer nothing
        self._pending = IGNORE  # what events seen so far ask, until a refresh succeeds
        self._paths: set[str] = set()  # the files events named, while `_pending` is FILE
        self._first_event = 0.0  # when the oldest event not yet applied was read
        self._last_event = 0.0
        self._hold_until = 0.0  # after a failed refresh, the next try waits (a sync does not)
        self.quiet = quiet  # log problems only, not each refresh (a daemon's helper)
        self._inotify: _Inotify | None = None
        self._server: socket.socket | None = None

    def serve(self, *, stop: Callable[[], bool] = lambda: False, ready: Callable[[WatchStats], None] | None = None, tick: float = 0.5) -> WatchStats:
        """Watch, refresh and answer until `stop()` is true (checked every `tick` seconds) or
        the process is interrupted. Raises CacheError when another watcher serves this
        workspace or the socket's path is too long for the system."""
        import select
        import socket

        path = socket_path(self.root)
        if len(str(path).encode()) > _SUN_PATH_MAX:
            raise CacheError(f"the watcher's socket path is longer than {_SUN_PATH_MAX} bytes", path=path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._answers(path):
            raise CacheError("another watcher already keeps this workspace's index fresh", path=path)
        path.unlink(missing_ok=True)  # a socket left by a watcher that died
        self._inotify = _Inotify()
        try:
            # Watches first, then the walk: whatever changes after a watch exists queues an
            # event, and whatever changed before is found by the walk.
            self._rewatch()
            self.files = self.refresh(None).files
            self.stats.refreshes += 1
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._server = server
            server.bind(str(path))
            server.listen(64)
            if ready is not None:
                ready(self.stats)
            while not stop() and not self.gone:
                wait = tick if self._pending == IGNORE else max(0.0, min(tick, self._due() - time.monotonic()))
                readable, _, _ = select.select([self._inotify.fd, server.fileno()], [], [], wait)
                if self._inotify.fd in readable:
                    self._take_events()
                if server.fileno() in readable:
                    self._answer(server)
                elif self._pending != IGNORE and time.monotonic() >= self._due():
                    try:
                        self._catch_up()
                    except MossError as err:  # kept pending: the next sync, or a second from now, tries again
                        self._hold_until = time.monotonic() + RETRY_SECONDS
                        say(self.log, "warn", f"cannot refresh the index: {err.message}")
        finally:
            if self._server is not None:
                self._server.close()
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    pass
            self._inotify.close()
        return self.stats

    @staticmethod
    def _answers(path: Path) -> bool:
        import socket

        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(str(path))
            return True
        except OSError:
            return False
        finally:
            probe.close()

    def _rewatch(self) -> None:
        """Watch the workspace and every folder the walk enters, and map each watch to its
        folder anew (a renamed folder keeps its watch under its new name)."""
        assert self._inotify is not None
        folders: dict[int, str] = {}
        root_wd = self._inotify.add(str(self.root), ROOT_MASK)
        if root_wd is not None:
            folders[root_wd] = ""
        for folder in watched_folders(self.root, self.registry):
            wd = self._inotify.add(f"{self.root}/{folder}", FOLDER_MASK)
            if wd is not None:
                folders[wd] = folder
        self._folders = folders
        self.stats.folders = len(folders) - (root_wd is not None)
        self.stats.rewatches += 1

    def _take_events(self) -> None:
        """Read every queued event and note what it asks: the files it names, or a new look
        at the set of watched folders (TREE) and a full walk."""
        assert self._inotify is not None
        events = self._inotify.events()
        if not events:
            return
        now = time.monotonic()
        if self._pending == IGNORE:
            self._first_event = now
        for wd, mask, name in events:
            folder = self._folders.get(wd)
            verdict = classify(folder, mask, name, self.registry, tops=self._tops)
            if verdict == GONE:
                # Its paths name nothing now, or another folder: refreshing would be wrong.
                self.gone = True
                say(self.log, "fatal", "the workspace was moved or removed; the watcher stops")
                return
            if verdict == TREE:
                self._pending = TREE
                self._paths.clear()
            elif verdict == FILE and self._pending in (IGNORE, FILE):
                self._pending = FILE
                self._paths.add(f"{folder}/{name}")
            if verdict != IGNORE:
                self._last_event = now

    def _due(self) -> float:
        """When the pending events are to be applied (monotonic time)."""
        return max(self._hold_until, min(self._last_event + SETTLE_SECONDS, self._first_event + MAX_DELAY_SECONDS))

    def _catch_up(self) -> None:
        """Apply every queued event: re-read the watched folders and walk everything if the
        tree changed, else refresh the files the events named."""
        self._take_events()
        if self.gone or self._pending == IGNORE:
            return
        started = time.perf_counter()
        if self._pending == TREE:
            self._rewatch()
            self._pending, self._paths = _WALK, set()  # a failed walk below is tried again
        paths = None if self._pending == _WALK else self._paths
        self.files = self.refresh(paths).files
        self._pending, self._paths = IGNORE, set()
        self.stats.refreshes += 1
        if not self.quiet:
            what = "every file" if paths is None else f"{len(paths)} files"
            self.log(f"refreshed the index after file events: {what} ({(time.perf_counter() - started) * 1000:.0f} ms)")

    def _answer(self, server: socket.socket) -> None:
        try:
            client, _ = server.accept()
        except OSError:
            return
        with client:
            try:
                client.settimeout(REQUEST_TIMEOUT)
                request = b""
                while not request.endswith(b"\n") and len(request) < 1024:
                    chunk = client.recv(1024)
                    if not chunk:
                        return
                    request += chunk
                words = request.decode("utf-8", "replace").split()
                if words[:1] != ["sync"] or words[1:] != [self.registry.fingerprint]:
                    client.sendall(b"stale other-registry\n")
                    return
                try:
                    self._catch_up()
                except MossError as err:
                    say(self.log, "warn", f"cannot refresh the index: {err.message}")
                    client.sendall(b"stale refresh-failed\n")
                    return
                if self.gone:
                    client.sendall(b"stale workspace-gone\n")
                    return
                self.stats.syncs += 1
                client.sendall(f"fresh {self.files}\n".encode())
            except OSError:
                pass  # the query gave up waiting; it walks by itself


# --------------------------------------------------------------------------- beside a daemon

STOP_TIMEOUT = 10.0  # a helper watcher not gone this long after SIGTERM is killed


def start_beside(root: Path, *, log: Callable[[str], None]) -> subprocess.Popen[bytes] | None:
    """Start `moss index watch --with-parent` for the workspace at `root` as a child of this
    process (a daemon's), so queries skip the walk while the daemon runs. The child stops when
    `stop_beside` asks, and by itself when this process dies. None (said through `log`) where
    it cannot run: a system without inotify, or no process could be started."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        log("search index watcher: not started (it needs Linux inotify); searches walk the files")
        return None
    command = [sys.executable, "-P", "-c", "from moss_files.cli.main import main; main()", "index", "watch", "--with-parent", "--root", str(root)]
    try:
        # stderr is the daemon's: the watcher tells only problems there.
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    except OSError as exc:
        log(f"search index watcher: cannot start it ({exc.strerror}); searches walk the files")
        return None
    log(f"search index watcher: keeping the index warm (pid {child.pid})")
    return child


def stop_beside(child: subprocess.Popen[bytes], *, log: Callable[[str], None]) -> None:
    """Stop a watcher `start_beside` started (SIGTERM, then a kill after STOP_TIMEOUT), and
    say how it ended when that was not by this request."""
    import subprocess

    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        return
    if child.returncode != 0:  # it had stopped on its own: another watcher serves, or it failed
        log(f"search index watcher: it had stopped (exit {child.returncode}); searches walked the files")

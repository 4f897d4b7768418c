"""Waking a waiter when a sleeve's inbox may have changed: inotify on `.needlecast/` (and its
`inbox/` folder), or polling where inotify is blind.

Edge layer: owns one inotify descriptor (through `moss_files.foundation.inotify`, no watchdog
thread) or, in polling mode, the stat calls that stand in for it. Events are hints: the waiter
re-reads the inbox after each wake, and a wake that brought nothing new only sends it back to
sleep. The watch is started before the waiter's first look, so a message delivered between
that look and the first sleep still wakes it.

inotify is trusted only on a local file system (`inotify.local_file_system`): a network or FUSE
mount is changed behind the kernel's back, so there the watch polls (every `poll_interval`
seconds, comparing the inbox file's and folder's stat signatures).
"""

from __future__ import annotations

import os
import select
import time
from pathlib import Path
from types import TracebackType

from moss_files.foundation import fs, inotify
from needlecast.mailbox import Mailbox

POLL_INTERVAL = 0.1
INBOX_FILE = "inbox.md"
INBOX_DIR = "inbox"
_DIR_MASK = inotify.ENTRIES | inotify.IN_CLOSE_WRITE | inotify.IN_MODIFY | inotify.SELF | inotify.IN_ONLYDIR
_Signature = tuple[tuple[int, int, int] | None, tuple[int, int] | None]


class InboxWatch:
    """`wait(seconds)` returns True as soon as the inbox may have changed (False at the end of
    the wait). `mode` says how: `inotify` or `polling` (and `fallback_reason` why polling)."""

    def __init__(self, box: Mailbox, *, poll: bool = False, poll_interval: float = POLL_INTERVAL) -> None:
        self.box = box
        self.poll = poll
        self.poll_interval = poll_interval
        self.mode = "none"
        self.fallback_reason: str | None = None
        self._notify: inotify.Inotify | None = None
        self._dir_wd: int | None = None
        self._inbox_wd: int | None = None
        self._signature: _Signature = (None, None)

    def start(self) -> InboxWatch:
        """Start watching (inotify where it can be trusted, else polling); returns self."""
        if not self.poll:
            reason = self._start_inotify()
            if reason is None:
                self.mode = "inotify"
                return self
            self.fallback_reason = reason
        self.mode = "polling"
        self._signature = self._stat_signature()
        return self

    def _start_inotify(self) -> str | None:
        """None once the watches are set, else why inotify cannot be used here."""
        if not inotify.local_file_system(str(self.box.dir)):
            return "not a local file system: inotify would miss changes made elsewhere"
        try:
            self._notify = inotify.Inotify()
            self._dir_wd = self._notify.add(str(self.box.dir), _DIR_MASK)
            if self._dir_wd is None:
                self.close()
                return f"{self.box.dir} cannot be watched"
            self._watch_inbox_dir()
        except inotify.Unavailable as exc:
            self.close()
            return f"inotify unavailable ({exc})"
        return None

    def _watch_inbox_dir(self) -> None:
        assert self._notify is not None
        if self._inbox_wd is None and self.box.inbox_dir.is_dir():
            self._inbox_wd = self._notify.add(str(self.box.inbox_dir), _DIR_MASK)

    def _relevant(self, events: list[tuple[int, int, str]]) -> bool:
        """Whether any event can mean a new message: the inbox file or folder changed, or a
        file appeared in the folder (not a temporary one still being written)."""
        hit = False
        for wd, mask, name in events:
            if mask & inotify.IN_Q_OVERFLOW:
                hit = True
            elif wd == self._dir_wd and name in (INBOX_FILE, INBOX_DIR):
                hit = True
                if name == INBOX_DIR:
                    if mask & (inotify.IN_DELETE | inotify.IN_MOVED_FROM):
                        self._inbox_wd = None
                    else:
                        self._watch_inbox_dir()  # layout v2 appeared: watch its files too
            elif wd == self._inbox_wd and name and not fs.is_temporary(Path(name)):
                hit = True
        return hit

    def wait(self, seconds: float) -> bool:
        """Sleep until the inbox may have changed (True) or `seconds` pass (False)."""
        deadline = time.monotonic() + max(0.0, seconds)
        if self._notify is not None and self._notify.fd is not None:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                readable, _, _ = select.select([self._notify.fd], [], [], remaining)
                if readable and self._relevant(self._notify.events()):
                    return True
        while True:
            current = self._stat_signature()
            if current != self._signature:
                self._signature = current
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(self.poll_interval, remaining))

    def _stat_signature(self) -> _Signature:
        """What polling compares: the inbox file's (mtime, size, inode), the folder's (mtime, entries)."""
        try:
            st = os.stat(self.box.inbox_file)
            file_sig: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            file_sig = None
        try:
            st = os.stat(self.box.inbox_dir)
            dir_sig: tuple[int, int] | None = (st.st_mtime_ns, len(os.listdir(self.box.inbox_dir)))
        except OSError:
            dir_sig = None
        return file_sig, dir_sig

    def close(self) -> None:
        """Stop watching (closes the inotify descriptor)."""
        if self._notify is not None:
            self._notify.close()
            self._notify = None
        self._dir_wd = self._inbox_wd = None

    def __enter__(self) -> InboxWatch:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

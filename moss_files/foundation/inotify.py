"""Linux inotify through the C library: one descriptor, its watches, its queued events, and
whether a folder's file system reports every change made to it.

Edge layer: owns one inotify descriptor. The kernel queues a file's event inside the very
system call that changed it, before the call returns; so once `events()` has drained the
queue, every change completed before that call is in what it returned. That makes a watch a
cache's proof that nothing else changed: what follows from it is the caller's to decide.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from moss_files.foundation import fs

# <sys/inotify.h>
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000

CONTENT = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE  # a file's bytes or metadata changed
ENTRIES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO  # a folder's names changed
SELF = IN_DELETE_SELF | IN_MOVE_SELF  # the watched thing itself went away
_EVENT = struct.Struct("iIII")

# statfs(2) f_type of the local file systems whose every change goes through this kernel, so
# through inotify: ext2/3/4, XFS, Btrfs, tmpfs, F2FS, ZFS, ReiserFS, JFS, overlayfs (changes
# made through it). Network and FUSE file systems (NFS, CIFS, 9p, sshfs, virtiofs) are
# changed by other machines or processes behind the kernel's back: not trusted.
LOCAL_FILE_SYSTEMS = frozenset({0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0xF2F52010, 0x2FC12FC1, 0x52654973, 0x3153464A, 0x794C7630})


def local_file_system(path: str) -> bool:
    """Whether `path` lies on a local file system that reports every change to inotify (see
    LOCAL_FILE_SYSTEMS); False when that cannot be told."""
    statfs = fs.libc_function("statfs")
    if statfs is None:
        return False
    import ctypes

    buffer = ctypes.create_string_buffer(512)  # struct statfs; f_type is its first word
    if statfs(os.fsencode(path), buffer) != 0:
        return False
    kind = ctypes.c_long.from_buffer(buffer).value & 0xFFFFFFFF
    return kind in LOCAL_FILE_SYSTEMS


class Unavailable(Exception):
    """No inotify here: another system, the instance or watch limit reached."""


Watch = TypeVar("Watch")


def start_watch(folder: Path, make: Callable[[], Watch]) -> tuple[Watch | None, bool]:
    """A watch of `folder` made by `make` where the kernel reports every change there:
    `(watch, True)`; `(None, True)` while the folder does not exist yet (ask again later);
    `(None, False)` where it never will (a network or FUSE mount, no inotify, its limits
    reached): the caller takes the stat of every file, always."""
    if not local_file_system(str(folder)):
        return None, not folder.exists()
    try:
        return make(), True
    except Unavailable:
        return None, False


class Inotify:
    """One non-blocking inotify descriptor. Raises Unavailable when it cannot be made."""

    def __init__(self) -> None:
        import ctypes

        # The C library from the process's own symbols (fs.libc_function: no child ldconfig).
        self._add = fs.libc_function("inotify_add_watch")
        self._remove = fs.libc_function("inotify_rm_watch")
        init = fs.libc_function("inotify_init1")
        if self._add is None or self._remove is None or init is None:
            raise Unavailable("this system has no inotify")
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        fd = init(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise Unavailable(os.strerror(ctypes.get_errno()))
        self.fd: int | None = fd
        self._errno = ctypes.get_errno

    def add(self, path: str | bytes, mask: int) -> int | None:
        """The watch descriptor of `path` (the same one for a file or folder watched already,
        under any of its names); None when it is gone. Raises Unavailable at the watch limit."""
        assert self.fd is not None
        wd = self._add(self.fd, os.fsencode(path), mask)
        if wd >= 0:
            return int(wd)
        code = self._errno()
        if code in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ELOOP):
            return None
        raise Unavailable(os.strerror(code))

    def events(self) -> list[tuple[int, int, str]]:
        """Every queued event as (watch, mask, name), without waiting."""
        assert self.fd is not None
        found: list[tuple[int, int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return found
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                found.append((wd, mask, os.fsdecode(data[offset : offset + length].rstrip(b"\0"))))
                offset += length

    def remove(self, wd: int) -> None:
        """Stop the watch `wd` (nothing when it is gone already)."""
        assert self.fd is not None
        self._remove(self.fd, wd)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

"""Files on disk: guarded reads, atomic durable writes, cross-process locks, appends.

Edge layer: the only module that writes artifact files. Every write goes to a temporary file in
the same folder (`.<name>.tmp-<pid>-<random>`), is fsynced, renamed over the target, and the
folder is fsynced. Read-modify-write takes the target's lock (`.<name>.lock`, never deleted, in
a `.locks/` folder that git ignores by itself: see `lock_path_for`) and refuses to replace a file whose bytes changed since they were read, which is how a
hand edit made in an editor (which takes no lock) survives a concurrent tool write.

Links. Inside the toolkit's own folders (`.moss/`, `.cstack/`, `.needlecast/`) nothing follows a
symbolic link: not the file, and not any folder between the toolkit folder and the file. Each
operation walks down from the folder that holds the toolkit folder with `openat(O_NOFOLLOW |
O_DIRECTORY)`, one name at a time, and then works on names relative to that folder's
descriptor, so a link planted in a cloned repository (say `.moss/capsules/default/pw.md ->
/etc/passwd`, or `.cstack -> ~/.ssh`) is refused with SYMLINK_REFUSED instead of being read into
an agent's context or written through. The workspace root itself, and the folders above it, may
be links: they are the user's choice, made outside any repository. Paths outside the toolkit's
folders (an export file the user names, say) are opened as given.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import stat
import time
from _thread import _local, allocate_lock
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound, RepoError

if TYPE_CHECKING:
    from moss_files.foundation.document import Document

LOCK_SUFFIX = ".lock"
LOCKS_FOLDER = ".locks"
# A folder holding this .gitignore is ignored by git, the file included, whatever the project's
# own .gitignore says (the way tools' cache folders keep themselves out of commits).
SELF_IGNORE = b"# made by moss-files: per-machine files, never committed\n*\n"
TEMP_MARKER = ".tmp-"
DEFAULT_LOCK_TIMEOUT = 10.0
# How long a lock's waiter sleeps between two calls of its `while_waiting` when that does not say.
WAIT_TICK = 0.005
DEFAULT_RETRIES = 5
# The folders whose contents are the toolkit's; mirrors moss_files.foundation.workspace.MARKERS.
TOOLKIT_FOLDERS = frozenset({".moss", ".cstack", ".needlecast"})

Identity = tuple[int, int, int, int]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# A folder opened for listing, or as the base of names, never through a link in its place.
FOLDER_NOFOLLOW = _DIR_FLAGS | os.O_NOFOLLOW
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class Snapshot:
    """A file's bytes as read, with the fingerprint used to detect later changes.

    An immutable value (compared, hashed and shown as the frozen dataclass it was). `digest`
    is computed on first use when not given (None): the changed-since-read check of a write
    compares bytes, so a write never needs it unless the file changed, and hashing a 900 KB
    PLAN.md when reading it and again when returning what was written cost ~1 ms of every
    `cstack add` (issue 29)."""

    __slots__ = ("path", "data", "_digest", "identity")
    __match_args__ = ("path", "data", "digest", "identity")
    path: Path
    data: bytes | None  # None: the file did not exist
    identity: Identity | None  # of the file read, when known
    _digest: str | None

    def __init__(self, path: Path, data: bytes | None, digest: str | None = None, identity: Identity | None = None) -> None:
        for name, value in (("path", path), ("data", data), ("_digest", digest), ("identity", identity)):
            object.__setattr__(self, name, value)

    @property
    def digest(self) -> str:
        """`digest_of(data)` (the empty string for a missing file), unless given otherwise."""
        digest = self._digest
        if digest is None:
            digest = digest_of(self.data)
            object.__setattr__(self, "_digest", digest)
        return digest

    @property
    def exists(self) -> bool:
        return self.data is not None

    def _fields(self) -> tuple[Path, bytes | None, str, Identity | None]:
        return (self.path, self.data, self.digest, self.identity)

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Snapshot) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Snapshot(path={self.path!r}, data={self.data!r}, digest={self.digest!r}, identity={self.identity!r})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Snapshot is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Snapshot is immutable: cannot delete {name}")

    def __reduce__(self) -> tuple[type[Snapshot], tuple[Path, bytes | None, str | None, Identity | None]]:
        return (Snapshot, (self.path, self.data, self._digest, self.identity))


def identity_of(info: os.stat_result) -> Identity:
    """(st_dev, st_ino, st_size, st_mtime_ns): which file this is. The size and mtime tell a
    reused inode number from the file that had it before."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def digest_of(data: bytes | None) -> str:
    """Content fingerprint; the empty string stands for a missing file."""
    if data is None:
        return ""
    try:  # the bundled blake2b: `hashlib` loads OpenSSL's hashes first (2 ms of a listing's start-up)
        from _blake2 import blake2b
    except ImportError:  # a Python built without its bundled hashes
        from hashlib import blake2b

    return blake2b(data, digest_size=16).hexdigest()


# --------------------------------------------------------------------------- walking without links


def _toolkit_split(folder: Path | str) -> tuple[str, tuple[str, ...]] | None:
    """(base, names): `folder` is base/names[0]/…, names[0] being the outermost toolkit folder
    on the path. None when no component of `folder` is a toolkit folder."""
    # Strings, not Path objects: this runs for every file read, and pathlib's parsing cost
    # more than the system calls themselves.
    text = os.fspath(folder)
    parts = text.split("/")
    for index, part in enumerate(parts):
        if part in TOOLKIT_FOLDERS:
            names = tuple(name for name in parts[index:] if name and name != ".")
            if ".." in names:
                raise InvalidRequest("a path inside the toolkit's folders may not contain '..'", path=folder)
            base = "/".join(parts[:index])
            return (base or ("/" if text.startswith("/") else ".")), names
    return None


def symlink_refused(path: Path | str) -> InvalidDocument:
    """The error for a symbolic link met where the toolkit never follows one."""
    return InvalidDocument(
        "is a symbolic link; the toolkit never follows links inside its own folders",
        code="SYMLINK_REFUSED",
        path=path,
        hint="replace the link with the regular file or folder it stands for",
    )


# What each kind of file that is not a regular one is called in messages, and in `details.type`.
_NOT_REGULAR = (
    (stat.S_ISDIR, "folder", "a folder"),
    (stat.S_ISFIFO, "fifo", "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "socket", "a socket"),
    (stat.S_ISCHR, "character-device", "a character device"),
    (stat.S_ISBLK, "block-device", "a block device"),
)


def not_regular(path: Path | str, mode: int) -> InvalidDocument:
    """The error for a folder, FIFO, socket or device met where a file is read or written
    (`mode` is its st_mode): NOT_REGULAR_FILE. Such a file is never read: reading a FIFO
    would wait for a writer forever, and a device is nobody's document."""
    kind, shown = next(((kind, shown) for test, kind, shown in _NOT_REGULAR if test(mode)), ("other", "not a regular file"))
    return InvalidDocument(
        f"is {shown}, not a regular file; it is not read",
        code="NOT_REGULAR_FILE",
        path=path,
        details={"type": kind},
        hint="replace it with a regular file, or remove it",
    )


def not_readable(path: Path | str, exc: OSError, *, folder: bool = False) -> RepoError:
    """The error for a file or folder the operating system does not let this process read
    (EACCES, EPERM): NOT_READABLE, status 403, exit 6."""
    what = "folder" if folder else "file"
    return RepoError(
        f"cannot read the {what}: {exc.strerror or 'permission denied'}",
        code="NOT_READABLE",
        status=403,
        path=path,
        details={"errno": errno.errorcode.get(exc.errno or 0, str(exc.errno))},
        hint=f"give the user running the toolkit read permission on the {what} (and search permission on the folders above it)",
    )


def _refusal(dir_fd: int, name: str, shown: Path, exc: OSError) -> MossError:
    """Explain why `name` in `dir_fd` could not be opened as a folder or a plain file."""
    try:
        mode = os.lstat(name, dir_fd=dir_fd).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return symlink_refused(shown)
    if exc.errno == errno.ENOTDIR:
        return InvalidRequest("is not a folder", path=shown)
    if isinstance(exc, PermissionError):
        return not_readable(shown, exc, folder=True)
    return MossError(f"cannot open folder: {exc.strerror}", path=shown)


def open_folder(folder: Path | str, *, create: bool = False) -> int:
    """An O_DIRECTORY descriptor for `folder` (the caller closes it), reached without following
    any link from the toolkit folder down; with `create`, missing folders are made. Inside
    `folders_held()`, opened from the folder above it, which the scope holds.

    Raises FileNotFoundError for a missing folder (without `create`), InvalidDocument
    SYMLINK_REFUSED for a link on the way, InvalidRequest when a file stands where a folder
    should be.
    """
    split = _toolkit_split(folder)
    if split is None:
        if create:
            Path(folder).mkdir(parents=True, exist_ok=True)
        return _open_top(folder)
    base, names = split
    held = _scope.held
    if held is not None:
        # Opened afresh from the folder above it, which the scope holds: a descriptor of its
        # own, not a duplicate, whose listing offset nobody else moves.
        parent, owned = _held_folder(held, (base, names[:-1]), create)
        try:
            return _open_child(parent, base, names, len(names) - 1, create)
        finally:
            if owned:
                os.close(parent)
    return _walk(_open_base(base, create), base, names, 0, create)


def _open_base(base: str, create: bool) -> int:
    """The workspace root's descriptor, the folder a toolkit path starts from; it may be a
    link (the user's choice). With `create`, made when missing."""
    try:
        return _open_top(base)
    except FileNotFoundError:
        if not create:
            raise
        os.makedirs(base, exist_ok=True)  # made only when missing: a mkdir that finds it there costs two calls
        return _open_top(base)


def _open_child(fd: int, base: str, names: tuple[str, ...], index: int, create: bool) -> int:
    """The folder names[index] inside `fd` (base/names[:index]), never through a link; with
    `create`, made when missing."""
    name = names[index]
    try:
        return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, 0o777, dir_fd=fd)
        except FileExistsError:
            pass  # made by a concurrent writer, or a link: the open below tells
        try:
            return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            raise _refusal(fd, name, Path(base, *names[: index + 1]), exc) from None
    except OSError as exc:
        raise _refusal(fd, name, Path(base, *names[: index + 1]), exc) from None


def _open_top(folder: Path | str) -> int:
    """An O_DIRECTORY descriptor for `folder`, links followed (a folder outside the toolkit's)."""
    try:
        return os.open(folder, _DIR_FLAGS)
    except PermissionError as exc:
        raise not_readable(folder, exc, folder=True) from None


class _Scope(_local):
    """The descriptors `folders_held()` keeps for the thread inside it, by path from the
    workspace root: (base,) for the root, (base, name, ...) for each toolkit folder below.
    (`_thread`'s local, not a ContextVar: `contextvars` costs every command's start-up 0.5 ms,
    and the scope never spans an await.)"""

    held: dict[tuple[str, ...], int] | None = None


_scope = _Scope()
# At most this many descriptors per scope: a walk past them opens and closes as outside one.
HELD_FOLDERS_MAX = 64


@contextmanager
def folders_held() -> Iterator[None]:
    """Inside, every toolkit folder is opened once: `open_folder` and `folder_fd` reuse the
    descriptor the first walk to it opened (and the folders above it), where each walk opened
    every folder from the workspace root down, two system calls a folder. For one short
    operation, such as a board write under its lock (a claim walks to the same five folders
    about fifteen times). Reentrant; per thread.

    A descriptor names the folder it opened, not a path: a folder removed and made again by
    another program within the scope is not seen, and a file made in the removed one fails
    (ENOENT) rather than going astray. Keep the scope as short as the operation. The scope's
    descriptors (what `folder_fd` yields in it) share one listing offset among their users:
    list them with `os.listdir`, which reads them whole and rewinds, or through `open_folder`'s
    own descriptor, never with a `scandir` left open across another listing."""
    if _scope.held is not None:
        yield
        return
    held: dict[tuple[str, ...], int] = {}
    _scope.held = held
    try:
        yield
    finally:
        _scope.held = None
        for fd in held.values():
            os.close(fd)


def _held_folder(held: dict[tuple[str, ...], int], split: tuple[str, tuple[str, ...]], create: bool) -> tuple[int, bool]:
    """(descriptor, owned): the scope's descriptor of the folder `split` (see `_toolkit_split`),
    opened from the deepest folder above it the scope holds, each folder opened on the way
    kept (owned False: the scope closes it); once the scope holds HELD_FOLDERS_MAX, the rest
    of the walk as outside one (owned True: the caller closes it)."""
    base, names = split
    key: tuple[str, ...] = (base, *names)
    found = held.get(key)
    if found is not None:
        return found, False
    depth = len(names)
    while depth >= 0 and key[: depth + 1] not in held:
        depth -= 1
    if depth < 0:
        fd = _open_base(base, create)
        if len(held) >= HELD_FOLDERS_MAX:
            return _walk(fd, base, names, 0, create), True
        held[(base,)] = fd
        depth = 0
    fd = held[key[: depth + 1]]
    for index in range(depth, len(names)):
        if len(held) >= HELD_FOLDERS_MAX:
            return _walk(os.dup(fd), base, names, index, create), True
        fd = _open_child(fd, base, names, index, create)
        held[key[: index + 2]] = fd
    return fd, False


def _walk(fd: int, base: str, names: tuple[str, ...], start: int, create: bool) -> int:
    """The folder names[start:] below `fd` (which this closes), each opened without following
    a link: its descriptor, for the caller to close."""
    try:
        for index in range(start, len(names)):
            child = _open_child(fd, base, names, index, create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def folder_fd(folder: Path | str, *, create: bool = False) -> Iterator[int]:
    """`open_folder` as a context manager that closes the descriptor (inside `folders_held()`,
    the scope's own, left open)."""
    held = _scope.held
    split = _toolkit_split(folder) if held is not None else None
    if held is not None and split is not None:
        fd, owned = _held_folder(held, split, create)
    else:
        fd, owned = open_folder(folder, create=create), True
    try:
        yield fd
    finally:
        if owned:
            os.close(fd)


def check_confined(path: Path) -> None:
    """Raise SYMLINK_REFUSED when `path`, or a folder between its toolkit folder and it, is a
    link. A missing path (or missing folder on the way) passes: there is nothing to follow."""
    try:
        with folder_fd(path.parent) as dir_fd:
            mode = os.lstat(path.name, dir_fd=dir_fd).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode) and _toolkit_split(path) is not None:
        raise symlink_refused(path)


def _open_file(dir_fd: int, path: Path, flags: int, mode: int = 0o666, *, inside: bool | None = None) -> int:
    """`open_regular` for `path.name` inside `dir_fd`, never following a link when it lies in a
    toolkit folder."""
    nofollow = inside if inside is not None else _toolkit_split(os.path.dirname(path)) is not None
    return open_regular(path.name, dir_fd=dir_fd, shown=path, flags=flags, mode=mode, nofollow=nofollow)


def open_regular(
    name: Path | str, *, dir_fd: int | None = None, shown: Path | str | None = None, flags: int = os.O_RDONLY, mode: int = 0o666, nofollow: bool = True
) -> int:
    """A descriptor of the regular file `name` (relative to `dir_fd` when given; the caller
    closes it), opened with `flags`: the one way the toolkit opens a file it reads.

    The open never blocks (O_NONBLOCK, cleared again once the file is known to be regular), so
    a FIFO planted where a file is expected is refused, never waited on. Raises
    FileNotFoundError; InvalidDocument SYMLINK_REFUSED for a link (with `nofollow`),
    NOT_REGULAR_FILE for a folder, FIFO, socket or device; RepoError NOT_READABLE (or
    NOT_WRITABLE, when opening for writing) when permission is denied. `shown` names the file
    in errors (default: `name`).
    """
    shown = name if shown is None else shown
    if nofollow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(name, flags | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _open_refusal(name, dir_fd, shown, flags, exc) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise not_regular(shown, info.st_mode)
    # Clear O_NONBLOCK again: it was only there so that opening a FIFO could not hang. F_SETFL
    # takes only the status flags (O_APPEND, O_NONBLOCK, ...) from its argument, so the open's
    # own flags say what to keep, without an F_GETFL to ask (one call fewer a file opened).
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    return fd


def _open_refusal(name: Path | str, dir_fd: int | None, shown: Path | str, flags: int, exc: OSError) -> Exception:
    """Our error for an open(2) of a file that failed with `exc` (the OSError itself when none fits)."""
    if exc.errno == errno.ELOOP and flags & os.O_NOFOLLOW:
        return symlink_refused(shown)
    if exc.errno in (errno.EISDIR, errno.ENXIO):  # a folder opened to write; a FIFO without reader
        try:
            return not_regular(shown, os.lstat(name, dir_fd=dir_fd).st_mode)
        except OSError:
            return exc
    if isinstance(exc, PermissionError):
        if flags & (os.O_WRONLY | os.O_RDWR):
            return RepoError(f"cannot open the file for writing: {exc.strerror}", code="NOT_WRITABLE", path=shown)
        return not_readable(shown, exc)
    return exc


def _read_fd(fd: int, path: Path, max_bytes: int | None) -> tuple[bytes, Identity]:
    info = os.fstat(fd)
    if max_bytes is not None and info.st_size > max_bytes:
        # Checked before reading: a huge planted file must not be pulled into memory.
        raise InvalidDocument(
            f"file is {info.st_size} bytes; the limit for this kind is {max_bytes}",
            code="FILE_TOO_LARGE",
            path=path,
            details={"max_bytes": max_bytes, "actual_bytes": info.st_size},
        )
    # One read of size + 1 bytes normally ends it: fewer bytes than asked for is the end of
    # the file; more means it grew meanwhile, and the loop reads on.
    limit = None if max_bytes is None else max_bytes + 1
    chunks = []
    total = 0
    want = info.st_size + 1
    while True:
        chunk = os.read(fd, want if limit is None else min(want, limit - total))
        chunks.append(chunk)
        total += len(chunk)
        if limit is not None and total >= limit:
            raise InvalidDocument(f"file grew past the limit of {max_bytes} bytes while being read", code="FILE_TOO_LARGE", path=path)
        if len(chunk) < want:
            break
        want = 1 << 16
    return b"".join(chunks), identity_of(info)


def read_bytes(path: Path, *, max_bytes: int | None = None, follow_links: bool = False) -> bytes:
    """A file's bytes, read without following links inside the toolkit's folders (with
    `follow_links`, a file of the user's own, such as ~/.moss/config.toml, through any link).

    Raises FileNotFoundError for a missing file, InvalidDocument SYMLINK_REFUSED,
    NOT_REGULAR_FILE or FILE_TOO_LARGE (checked before reading), RepoError NOT_READABLE.
    """
    if follow_links:
        fd = open_regular(path, nofollow=False)
        try:
            return _read_fd(fd, path, max_bytes)[0]
        finally:
            os.close(fd)
    with folder_fd(path.parent) as dir_fd:
        fd = _open_file(dir_fd, path, os.O_RDONLY)
        try:
            return _read_fd(fd, path, max_bytes)[0]
        finally:
            os.close(fd)


def read_snapshot(path: Path, *, max_bytes: int | None = None) -> Snapshot:
    """Read a file's bytes (a missing file gives a snapshot with `data=None`).

    Raises InvalidDocument SYMLINK_REFUSED for a link, NOT_REGULAR_FILE, FILE_TOO_LARGE over
    `max_bytes`; RepoError NOT_READABLE.
    """
    read = _read_or_none(path, max_bytes)
    if read is None:
        return Snapshot(path, None, "")
    data, identity = read
    return Snapshot(path, data, None, identity)  # its digest when asked: see Snapshot


def read_if_present(path: Path, *, max_bytes: int | None = None) -> bytes | None:
    """A file's bytes as `read_snapshot` reads them (None for a missing file), without the
    fingerprint: for a reader that writes nothing back, so needs no changed-since-read check
    (hashing a large file costs more than reading it). Raises what `read_snapshot` raises."""
    read = _read_or_none(path, max_bytes)
    return None if read is None else read[0]


def _read_or_none(path: Path, max_bytes: int | None) -> tuple[bytes, Identity] | None:
    folder = os.path.dirname(path) or "."
    try:
        dir_fd = open_folder(folder)
        try:
            fd = _open_file(dir_fd, path, os.O_RDONLY, inside=_toolkit_split(folder) is not None)
        finally:
            os.close(dir_fd)
        try:
            return _read_fd(fd, path, max_bytes)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise InvalidRequest("a file stands where a folder should be", path=path.parent) from None
    except PermissionError as exc:
        raise not_readable(path, exc) from None


def read_in(dir_fd: int, path: Path | str, *, max_bytes: int | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of the file named `path` (its last component) in the folder `dir_fd` (from
    `open_folder`, so no link on the way), never following a link, with the stat of the file
    read, taken before its bytes: for a reader that scans one folder's many files.

    Raises FileNotFoundError for a missing file, InvalidDocument SYMLINK_REFUSED,
    NOT_REGULAR_FILE or FILE_TOO_LARGE (checked before reading), RepoError NOT_READABLE.
    """
    fd = _open_file(dir_fd, Path(path), os.O_RDONLY, inside=True)
    try:
        info = os.fstat(fd)
        return _read_fd(fd, Path(path), max_bytes)[0], info
    finally:
        os.close(fd)


def read_document(path: Path, *, max_bytes: int | None = None) -> Document:
    """Read and parse one document (of at most `max_bytes`, by default the document layer's
    limit). Raises NotFound, or InvalidDocument with file and line."""
    # The document layer (and its YAML) is loaded here: most users of this module never parse.
    from moss_files.foundation import document

    max_bytes = document.DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    snapshot = read_snapshot(path, max_bytes=max_bytes)
    if snapshot.data is None:
        raise NotFound("no such file", path=path)
    return document.parse_bytes(snapshot.data, path, max_bytes=max_bytes)


def temp_path_for(path: Path) -> Path:
    """A fresh temporary name next to `path`, matching the pattern watchers and git ignore."""
    return path.with_name(f".{path.name}{TEMP_MARKER}{os.getpid()}-{os.urandom(4).hex()}")


def is_temporary(path: Path) -> bool:
    """True for our temporary and lock files, which scanners and watchers must skip, and for
    the `#<inode>` name under which inotify reports writes to a file not yet linked into place
    (`create_exclusive`'s O_TMPFILE), and for whatever lies in a `.locks/` folder."""
    name = path.name
    if (name.startswith(".") and (TEMP_MARKER in name or name.endswith(LOCK_SUFFIX))) or (name[:1] == "#" and name[1:].isdigit()):
        return True
    return f"/{LOCKS_FOLDER}/" in f"/{path.as_posix()}" or name == LOCKS_FOLDER


# --------------------------------------------------------------------------- writes


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace (or create) `path` with `data` atomically and durably; the file keeps its mode
    unless `mode` is given. A link at `path` inside the toolkit's folders is refused."""
    with folder_fd(path.parent, create=True) as dir_fd:
        current = _lstat_in(dir_fd, path.name)
        if current is not None and stat.S_ISLNK(current.st_mode) and _toolkit_split(path.parent) is not None:
            raise symlink_refused(path)
        if mode is None and current is not None and stat.S_ISREG(current.st_mode):
            mode = current.st_mode & 0o777
        temp, _ = _durable_temp(dir_fd, path, data, mode)
        try:
            os.replace(temp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            _unlink_quietly(dir_fd, temp)
            raise
        os.fsync(dir_fd)


def create_exclusive(path: Path, data: bytes | Callable[[], Iterable[bytes]], *, dir_fd: int | None = None) -> bool:
    """Create `path` with `data` unless it exists; True when this call created it. `data` may
    be a function giving the bytes in parts, for a file too large to hold whole (a migration
    report of a hundred thousand items); it is called again if a write must start over.

    Durable like write_atomic, and never replaces an existing file (link(2) fails on EEXIST,
    also for a dangling link). `dir_fd`: `path`'s folder, already opened by `folder_fd`.

    Where the file system allows it (Linux's O_TMPFILE), the file is written without a name
    and linked to its own once durable: no temporary name appears in the folder, a kill leaves
    nothing, and a watcher of the folder hears three events instead of five (the creation, and
    the write and close of the unnamed file under inotify's `#<inode>`, which `is_temporary`
    recognises).
    """
    with ExitStack() as stack:
        if dir_fd is None:
            dir_fd = stack.enter_context(folder_fd(path.parent, create=True))
        if _name_taken(dir_fd, path.name):
            return False  # known before writing and syncing a copy that link(2) would refuse
        created = _create_unnamed(dir_fd, path, data)
        if created is not None:
            return created
        temp, _ = _durable_temp(dir_fd, path, data, None)
        try:
            os.link(temp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            return False
        finally:
            _unlink_quietly(dir_fd, temp)
        os.fsync(dir_fd)
    return True


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to the descriptor `fd` (os.write may write less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _name_taken(dir_fd: int, name: str) -> bool:
    """Whether `name` exists in the folder `dir_fd` (a dangling link counts)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


_tmpfile_state: dict[str, bool] = {}  # "off": O_TMPFILE (or /proc) failed once here


def _parts(data: bytes | Callable[[], Iterable[bytes]]) -> Iterable[bytes]:
    """`create_exclusive`'s data as parts: the bytes alone, or what the function gives."""
    return (data,) if isinstance(data, bytes) else data()


def _write_parts(fd: int, data: bytes | Callable[[], Iterable[bytes]]) -> None:
    """Write `data` (bytes, or a function giving them in parts) to the descriptor `fd`."""
    for part in _parts(data):
        write_all(fd, part)


def _create_unnamed(dir_fd: int, path: Path, data: bytes | Callable[[], Iterable[bytes]]) -> bool | None:
    """`create_exclusive` through an O_TMPFILE file linked to its name through /proc: True when
    created, False when the name exists; None where that cannot be done (then a named temporary
    is used)."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or _tmpfile_state.get("off"):
        return None
    try:
        fd = os.open(".", os.O_WRONLY | flag | os.O_CLOEXEC, 0o666 & ~_umask(), dir_fd=dir_fd)
    except OSError:  # a file system without it (EOPNOTSUPP, EISDIR, EINVAL)
        _tmpfile_state["off"] = True
        return None
    try:
        _write_parts(fd, data)
        os.fsync(fd)
        try:
            os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=dir_fd, follow_symlinks=True)
        except FileExistsError:
            return False
        except (FileNotFoundError, PermissionError):  # no /proc here
            _tmpfile_state["off"] = True
            return None
    finally:
        os.close(fd)
    os.fsync(dir_fd)
    return True


def append_line(path: Path, line: bytes, *, durable: bool = True) -> None:
    """Append one record with a single write(2) on an O_APPEND descriptor, then fsync (unless
    not `durable`: a derived cache that may lose its last lines in a power cut, or a caller that
    makes many files durable together and fsyncs this one later)."""
    if not line.endswith(b"\n"):
        line += b"\n"
    with folder_fd(path.parent, create=True) as dir_fd:
        fd = _open_file(dir_fd, path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666 & ~_umask())
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise MossError(f"short append ({written} of {len(line)} bytes)", path=path)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)


def remove(path: Path) -> bool:
    """Delete the file `path` (a link is removed, never followed); True when it existed."""
    try:
        with folder_fd(path.parent) as dir_fd:
            os.unlink(path.name, dir_fd=dir_fd)
            os.fsync(dir_fd)
    except FileNotFoundError:
        return False
    return True


def move_exclusive(source: Path, target: Path) -> bool:
    """Move the file `source` to `target` unless `target` exists; True when moved.

    link(2) then unlink(2), not rename(2), which would silently replace a target that appeared
    a moment earlier. Both folders are reached without following links, and made durable.
    """
    with folder_fd(source.parent) as source_fd, folder_fd(target.parent, create=True) as target_fd:
        try:
            os.link(source.name, target.name, src_dir_fd=source_fd, dst_dir_fd=target_fd, follow_symlinks=False)
        except FileExistsError:
            return False
        os.unlink(source.name, dir_fd=source_fd)
        os.fsync(target_fd)
        os.fsync(source_fd)
    return True


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename in it survives a power cut."""
    with folder_fd(directory) as dir_fd:
        os.fsync(dir_fd)


def fsync_file(path: Path) -> None:
    """fsync a file written earlier without it (`append_line(..., durable=False)`), reached as
    `append_line` reaches it. Raises FileNotFoundError when it is gone."""
    with folder_fd(path.parent) as dir_fd:
        fd = _open_file(dir_fd, path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _lstat_in(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def _unlink_quietly(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


_umask_lock = allocate_lock()  # _thread's lock: importing `threading` costs every command ~0.5 ms


def _umask() -> int:
    # os.umask can only be read by setting it; guard so threads never see a zero umask.
    with _umask_lock:
        current = os.umask(0o022)
        os.umask(current)
    return current


def new_file_mode() -> int:
    """The permission bits a file this process creates gets (0o666 less the umask)."""
    return 0o666 & ~_umask()


def read_given_file(path: Path, *, max_bytes: int, what: str) -> bytes:
    """The bytes of a file a person named on the command line or in a tool call (an import
    file, a sharing bundle), wherever it lies: opened without following a link, refused unless
    it is a regular file of at most `max_bytes` (checked before reading). `what` names the file
    in the messages. Raises NotFound, InvalidRequest (`details.reason` open),
    InvalidDocument NOT_REGULAR_FILE, FILE_TOO_LARGE (413), RepoError NOT_READABLE."""
    try:
        fd = open_regular(path, shown=str(path))
    except FileNotFoundError:
        raise NotFound(f"no such {what}", path=str(path)) from None
    except InvalidDocument as err:
        if err.code != "SYMLINK_REFUSED":
            raise
        raise InvalidRequest(f"the {what} is a symbolic link", path=str(path), details={"reason": "symlink"}) from None
    except OSError as exc:
        raise InvalidRequest(f"cannot open the {what}: {exc.strerror}", path=str(path), details={"reason": "open"}) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if info.st_size > max_bytes:
            raise InvalidDocument(
                f"the {what} is {info.st_size} bytes; the limit is {max_bytes}",
                code="FILE_TOO_LARGE",
                status=413,
                path=str(path),
                details={"max_bytes": max_bytes, "actual_bytes": info.st_size},
            )
        # One byte over the limit: a file that grew after the fstat is still caught by the parser's size checks.
        return handle.read(max_bytes + 1)


def missing_paths(root: Path, relpaths: Iterable[str]) -> list[str] | None:
    """The paths among `relpaths` (relative to `root`, already checked not to climb out of it)
    that name nothing: no file, folder or link there. A path that cannot be looked at (a
    folder without permission) counts as there. None when `root` itself cannot be read: the
    caller cannot tell, and lets the paths through (a check that fails open)."""
    try:
        os.listdir(root)
    except OSError:
        return None
    missing: list[str] = []
    for relpath in relpaths:
        try:
            os.lstat(root / relpath)
        except FileNotFoundError:
            missing.append(relpath)
        except NotADirectoryError:
            missing.append(relpath)  # a path "through" a file: nothing can be there
        except OSError:
            continue
    return missing


def process_alive(pid: int) -> bool:
    """True while process `pid` runs on this machine: a live writer's temporary or staging
    folder is not a leftover to clean up."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_path_for(path: Path) -> Path:
    """The lock file that guards `path`: `.<name>.lock` in the `.locks/` folder of the outermost
    toolkit folder on the path, at the place `path` has below it (`.cstack/PLAN.md` →
    `.cstack/.locks/.PLAN.md.lock`, `.needlecast/.state/route` →
    `.needlecast/.locks/.state/.route.lock`); outside the toolkit folders, in a `.locks/`
    folder beside `path`. The `.locks/` folder ignores itself for git (`ensure_ignored`), so
    a lock never reaches a commit, with or without the scaffold's `.gitignore` lines, in a
    worktree or in a folder that is no repository at all.

    The place depends on the path alone, never on the state of git or of `.gitignore`: every
    process computes the same lock for the same file, so they exclude each other.
    """
    return _lock_place(path)[1]


@functools.lru_cache(maxsize=4096)
def _lock_place(path: Path) -> tuple[Path, Path]:
    """(the `.locks/` folder, the lock file) of `path`. Kept: it depends on the path's text
    alone, every write asks for it, and pathlib takes longer to build it than the lock's
    system calls take."""
    root = _locks_root(path)
    return root, root / _below_toolkit(path).parent / f".{path.name}{LOCK_SUFFIX}"


def _locks_root(path: Path) -> Path:
    split = _toolkit_split(path.parent)
    if split is None:
        return path.parent / LOCKS_FOLDER
    base, names = split
    return Path(base, names[0], LOCKS_FOLDER)


def _below_toolkit(path: Path) -> Path:
    """`path` relative to its outermost toolkit folder (its bare name outside them)."""
    split = _toolkit_split(path.parent)
    if split is None:
        return Path(path.name)
    return Path(*split[1][1:], path.name)


def ensure_ignored(folder: Path) -> Path:
    """Make `folder` (and its parents) if missing and put in it a `.gitignore` that makes git
    ignore the folder and all it holds; returns `folder`. Cheap when done already (one
    lookup). Raises what `folder_fd` raises."""
    with folder_fd(folder, create=True) as dir_fd:
        if not _name_taken(dir_fd, ".gitignore"):
            create_exclusive(Path(folder) / ".gitignore", SELF_IGNORE, dir_fd=dir_fd)
    return Path(folder)


@contextmanager
def locked(path: Path, *, timeout: float = DEFAULT_LOCK_TIMEOUT, while_waiting: Callable[[], float | None] | None = None) -> Iterator[None]:
    """Hold the cross-process (and cross-thread) writer lock for `path` (`.<name>.lock`).

    Raises Conflict LOCK_TIMEOUT when the lock is not free within `timeout` seconds.
    """
    hint = "another moss-files process is writing this file; retry when it is done"
    with flocked(prepared_lock_path(path), timeout=timeout, shown=path, hint=hint, while_waiting=while_waiting):
        yield


def prepared_lock_path(path: Path) -> Path:
    """`lock_path_for(path)`, its `.locks/` folder made and ignored by git.

    Raises RepoError NOT_WRITABLE when the folder cannot be made.
    """
    folder, lock = _lock_place(path)
    try:
        ensure_ignored(folder)
    except (InvalidRequest, OSError) as exc:  # unwritable, or a file where the folder should be
        reason = exc.message if isinstance(exc, InvalidRequest) else exc.strerror
        raise RepoError(f"cannot make the lock folder: {reason}", code="NOT_WRITABLE", path=folder) from None
    return lock


@contextmanager
def flocked(
    lock_file: Path,
    *,
    shared: bool = False,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
    error: type[MossError] = Conflict,
    shown: Path | None = None,
    hint: str | None = None,
    while_waiting: Callable[[], float | None] | None = None,
) -> Iterator[None]:
    """Hold a flock(2) on `lock_file` (made if missing, never deleted), exclusive or `shared`.

    This is the one lock of the toolkit. Each acquisition opens its own descriptor, and flock
    locks belong to the open file, so two threads of one process exclude each other just as
    two processes do; the kernel releases the lock of a process that dies. A held lock is
    waited for in the kernel (`_wait_for_flock`), which hands it over the moment it is free;
    meanwhile `while_waiting` may do work the holder's critical section would otherwise do
    later, called again after the seconds it returns (WAIT_TICK when it returns None).

    Raises `error` (Conflict by default) with code LOCK_TIMEOUT when the lock is not free
    within `timeout` seconds, and NOT_WRITABLE (RepoError, or `error` when it is not
    Conflict) when the lock file cannot be made.
    """
    try:
        with folder_fd(lock_file.parent, create=True) as dir_fd:
            fd = _open_file(dir_fd, lock_file, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
    except (MossError, OSError) as exc:  # unwritable, or a file where the lock or its folder should be
        if isinstance(exc, MossError) and not (isinstance(exc, InvalidRequest) or exc.code in ("NOT_WRITABLE", "NOT_REGULAR_FILE")):
            raise  # a link on the way (SYMLINK_REFUSED)
        # A lock that cannot be made is a problem of the project's files (exit 6), or of the
        # derived cache when the cache asked (exit 7), never a conflict between writers.
        unwritable = error if error is not Conflict else RepoError
        reason = exc.message if isinstance(exc, MossError) else exc.strerror
        raise unwritable(f"cannot make the lock file: {reason}", code="NOT_WRITABLE", path=lock_file) from None
    try:
        deadline = time.monotonic() + timeout
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if not _wait_for_flock(fd, mode, deadline, while_waiting):
                raise error(f"lock held by another process for over {timeout:g}s", code="LOCK_TIMEOUT", path=shown or lock_file, hint=hint) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _wait_for_flock(fd: int, mode: int, deadline: float, while_waiting: Callable[[], float | None] | None) -> bool:
    """Wait until `fd`'s open file gets the flock `mode` or `deadline` (time.monotonic) passes;
    whether it got it. Calls `while_waiting` meanwhile, each time again after the seconds it
    returns (WAIT_TICK when None): a waiter with nothing to do wakes no sooner than it must.

    A thread blocks in flock(2), so the kernel hands the lock over the moment its holder lets
    go (polling left it idle for up to a polling interval, with several waiters every time).
    The thread locks through its own duplicate of `fd`: one open file, so the lock it gets is
    `fd`'s, and a descriptor nobody else closes, so a retry after a signal cannot lock another
    file that took the number. It closes the duplicate once flock returns, which leaves the
    lock with `fd` (a flock lasts while any descriptor of its open file does). After a
    timeout the thread is left waiting; when it gets the lock late, closing the duplicate
    (the open file's last descriptor, `fd` being closed by then) lets it go at once."""
    if time.monotonic() >= deadline:
        return False
    import threading  # here: only a wait for a held lock needs it

    spare = os.dup(fd)
    done = threading.Event()
    failure: list[OSError] = []

    def wait() -> None:
        try:
            fcntl.flock(spare, mode)
        except OSError as exc:  # EDEADLK, ENOLCK: reported by the caller
            failure.append(exc)
        finally:
            os.close(spare)
            done.set()

    threading.Thread(target=wait, name="moss-flock-wait", daemon=True).start()
    pause = WAIT_TICK
    while True:
        left = deadline - time.monotonic()
        if done.wait(max(0.0, min(left, pause))):
            if failure:
                raise failure[0]
            return True
        if time.monotonic() >= deadline:
            return False
        if while_waiting is not None:
            asked = while_waiting()
            pause = WAIT_TICK if asked is None else max(asked, WAIT_TICK)


def write_if_unchanged(snapshot: Snapshot, data: bytes, *, sync_folder: bool = True) -> None:
    """Write `data` to the snapshot's file unless its bytes changed since the snapshot.

    The caller must hold `locked(snapshot.path)`, which keeps cooperating writers out; a hand
    edit takes no lock, so it is caught here, in three steps:

    1. The new bytes are made durable in a temporary, then the file is compared with the
       snapshot (identity first, bytes when the identity matches, and the identity once more
       after reading). Nearly every hand edit lands while the caller computed `data` or while
       the bytes were compared, and is refused here before our bytes are ever visible.
    2. Where the kernel can swap two names atomically (Linux), the temporary and the file are
       exchanged, and the displaced file's identity is compared with the snapshot, so an edit
       landing in the microseconds between step 1 and the swap is not overwritten either: the
       swap is undone (`_undo_swap`), which keeps the hand edit under a second name first,
       checks what its own swap displaces in turn, and never deletes a file it did not write.
    3. Elsewhere the comparison of step 1 is all there is, leaving the instant before the
       rename uncovered.

    Raises Conflict STALE_WRITE on a change: nothing is written. After an undo (step 2) the
    hand edit is in place and also kept, in `displaced_folder(path)` (named in
    `details.kept_copy`), because an editor may have read our bytes in the instant they were
    visible and may save them later, without the hand edit's lines: the next `modify` of the
    file folds them back then, and removes the copy once it is not needed (`settle_displaced`).

    Without `sync_folder`, the folder is not fsynced after the new file takes the name (its
    bytes are durable before, so a power cut leaves the old file or the new one, whole): the
    caller fsyncs it (`fsync_dir`) before it says the write is done.
    """
    path = snapshot.path
    if snapshot.data is None:
        if not create_exclusive(path, data):
            raise _stale(snapshot, read_snapshot(path))
        return
    with folder_fd(path.parent) as dir_fd:
        temp, ours = _durable_temp(dir_fd, path, data, None)
        try:
            # Check first, so that a change made while the caller computed `data` (the likely
            # case) is refused before our bytes are ever visible under the file's name.
            changed = _inspect(dir_fd, path.name, snapshot)
            if changed is None:
                # Comparing the bytes of a large file takes milliseconds; a save landing in
                # them is refused here, by one lstat, rather than undone after the swap.
                changed = _replaced(dir_fd, path.name, snapshot)
            if changed is not None:
                raise _stale(snapshot, changed)
            if exchange(temp, path.name, dir_fd=dir_fd):
                displaced = _inspect(dir_fd, temp, snapshot)
                if displaced is not None:
                    _undo_swap(dir_fd, temp, path, ours, snapshot.data)
            else:
                current = read_snapshot(path)
                if current.digest != snapshot.digest:
                    raise _stale(snapshot, current)
                os.replace(temp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            _unlink_quietly(dir_fd, temp)
        if sync_folder:
            os.fsync(dir_fd)


def _inspect(dir_fd: int, name: str, snapshot: Snapshot) -> Snapshot | None:
    """None when the file now named `name` is the one `snapshot` read (same bytes); else what
    it holds. A different inode is answered without reading, to keep the undo window short."""
    try:
        info = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return Snapshot(snapshot.path, None, "")
    if snapshot.identity is not None and identity_of(info) != snapshot.identity:
        return Snapshot(snapshot.path, None, "replaced", identity_of(info))
    fd = open_regular(name, dir_fd=dir_fd, shown=snapshot.path)  # a FIFO put there is refused, not waited on
    try:
        data, identity = _read_fd(fd, snapshot.path, None)
    finally:
        os.close(fd)
    if snapshot.data is not None and data == snapshot.data:
        return None  # comparing the bytes is exact, and cheaper than hashing a large file
    digest = digest_of(data)
    return None if digest == snapshot.digest else Snapshot(snapshot.path, data, digest, identity)


def _replaced(dir_fd: int, name: str, snapshot: Snapshot) -> Snapshot | None:
    """None when `name` still holds the file `snapshot` read, by identity alone (one lstat)."""
    try:
        info = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return Snapshot(snapshot.path, None, "")
    if snapshot.identity is None or identity_of(info) == snapshot.identity:
        return None
    return Snapshot(snapshot.path, None, "replaced", identity_of(info))


def _undo_swap(dir_fd: int, temp: str, path: Path, ours: Identity, base: bytes) -> None:
    """Put the hand-edited file now at `temp` back at `path`, and take our file out.

    For the few microseconds between the two swaps our bytes were visible, and an editor
    that read them then and saves later would overwrite the hand edit with a save that lacks
    it. So the hand edit is first linked under a kept name, which survives whatever happens
    to `path` afterwards; once our bytes are gone from `path`, the copy is moved into the
    displaced folder with `base`, what our write had read, which tells later what the hand
    edit added (`settle_displaced`). Of every file this moves away from `path`, only our own
    is ever deleted.

    If an editor saved again between the two swaps, the second swap brings back that newer
    save rather than our file (the editor's rename replaced ours); a third swap puts the newer
    save in place, and whatever that one displaces is kept too.
    """
    kept = [_keep(dir_fd, temp, path)]
    hand_edit = identity_of(os.lstat(temp, dir_fd=dir_fd))
    exchange(temp, path.name, dir_fd=dir_fd)
    if identity_of(os.lstat(temp, dir_fd=dir_fd)) != ours:
        exchange(temp, path.name, dir_fd=dir_fd)
        if identity_of(os.lstat(temp, dir_fd=dir_fd)) != hand_edit:
            kept.append(_keep(dir_fd, temp, path))
        os.unlink(temp, dir_fd=dir_fd)  # a link to a kept file, never the only name of one
    os.fsync(dir_fd)
    copies = [str(copy) for copy in _file_displaced(dir_fd, path, kept, base)]
    raise Conflict(
        "the file was saved while it was being written; the save is in place, nothing was written, and a copy of it is kept",
        code="STALE_WRITE",
        path=path,
        details={"kept_copy": copies[-1], "kept_copies": copies},
        hint="write it again: the next write folds back what the copy holds that the file lacks, and removes the copy once it is not needed",
    )


# A save a write displaced is kept in `.<name>.tmp-displaced/` beside the file, as
# `.kept.tmp-<token>` (a second name of the displaced file) with `.base.tmp-<token>` (what the
# write had read); every name carries TEMP_MARKER, so scanners, watchers and git skip them. In
# the instant of the undo it is linked beside the file first (`.<name>.tmp-displaced-<token>`,
# the only form earlier versions knew), where it stays if the folder cannot be made.
_DISPLACED, _KEPT, _BASE = "displaced", f".kept{TEMP_MARKER}", f".base{TEMP_MARKER}"
# How long a kept copy stays once the file holds what it added: an editor that read the
# undone write's bytes may save them a while later, and the copy is what folds the lost lines
# back then; short enough that a line a person deletes on purpose later is not brought back.
# The same time as a displaced outbox's (needlecast.shared_file.KEEP_UNSETTLED_SECONDS).
KEEP_DISPLACED_SECONDS = 600.0
_swept: set[str] = set()  # folders this process looked through for copies kept beside a file


def displaced_folder(path: Path) -> Path:
    """The folder that holds the kept copies of saves a write of `path` displaced."""
    return path.with_name(f".{path.name}{TEMP_MARKER}{_DISPLACED}")


def _beside_prefix(path: Path) -> str:
    return f".{path.name}{TEMP_MARKER}{_DISPLACED}-"


def _keep(dir_fd: int, name: str, path: Path) -> Path:
    """Give the file `name` a second, lasting name next to `path`; return that name."""
    kept = path.with_name(f"{_beside_prefix(path)}{os.getpid()}-{os.urandom(4).hex()}")
    os.link(name, kept.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    return kept


def _file_displaced(dir_fd: int, path: Path, kept: list[Path], base: bytes) -> list[Path]:
    """Move each copy kept beside `path` into its displaced folder, its base recorded first;
    return where each copy is now (beside the file still, when the folder cannot be made)."""
    folder = displaced_folder(path)
    try:
        try:
            os.mkdir(folder.name, 0o777, dir_fd=dir_fd)
        except FileExistsError:
            pass  # earlier copies, or a link: the open below refuses a link
        folder_fd = os.open(folder.name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return kept
    moved = []
    try:
        for copy in kept:
            token = copy.name[len(_beside_prefix(path)) :]
            fd = os.open(f"{_BASE}{token}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=folder_fd)
            try:
                write_all(fd, base)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(copy.name, f"{_KEPT}{token}", src_dir_fd=dir_fd, dst_dir_fd=folder_fd)
            moved.append(folder / f"{_KEPT}{token}")
        os.fsync(folder_fd)
        os.fsync(dir_fd)
    finally:
        os.close(folder_fd)
    return moved


def settle_displaced(path: Path, *, max_bytes: int | None = None, now: float | None = None) -> None:
    """Fold back into `path` what the kept copies of saves its writes displaced hold that it
    lacks, and remove the copies no longer needed. The caller holds `locked(path)`; `modify`
    calls this before each read.

    A copy whose base shows it added no line goes at once. A copy whose added lines the file
    lacks, every one (a late save of the undone write's bytes), is folded back
    (`textmerge.fold_back`; lines the file changed too come back between conflict markers, as
    a merge leaves them). Otherwise, and after a fold, the copy stays KEEP_DISPLACED_SECONDS,
    in case another late save comes. A copy without a base (one kept beside the file, by an
    earlier version or when the folder could not be made; these are looked for once per
    folder and process) is never folded: it goes once it is that old and holds no line the
    file lacks, and is otherwise left to a person.

    Raises Conflict STALE_WRITE when the file changed while a fold was written (the caller
    reads it again), and what `read_snapshot` raises.
    """
    now = time.time() if now is None else now
    if str(path.parent) not in _swept:
        _swept.add(str(path.parent))
        _settle_beside(path, now, max_bytes)
    folder = displaced_folder(path)
    try:
        os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return  # nearly every call: one lstat
    with folder_fd(folder) as dir_fd:
        names = set(os.listdir(dir_fd))
        for token in sorted(name[len(_KEPT) :] for name in names if name.startswith(_KEPT)):
            kept, kept_info = read_in(dir_fd, f"{_KEPT}{token}")
            try:
                base, base_info = read_in(dir_fd, f"{_BASE}{token}")
            except FileNotFoundError:
                gone = _unneeded(path, kept, kept_info, now, max_bytes)  # a crash between the two
            else:
                gone = _fold(path, base, kept, base_info, now, max_bytes)
            if gone:
                for name in (f"{_KEPT}{token}", f"{_BASE}{token}"):
                    _unlink_quietly(dir_fd, name)
                    names.discard(name)
        for name in [name for name in names if name.startswith(_BASE) and f"{_KEPT}{name[len(_BASE) :]}" not in names]:
            _unlink_quietly(dir_fd, name)  # a base whose copy went (a crash between the two unlinks)
            names.discard(name)
        os.fsync(dir_fd)
    if not names:
        with folder_fd(path.parent) as parent:
            try:
                os.rmdir(folder.name, dir_fd=parent)
            except OSError:
                return  # not empty after all: left for the next call
            os.fsync(parent)


def _fold(path: Path, base: bytes, kept: bytes, recorded: os.stat_result, now: float, max_bytes: int | None) -> bool:
    """Fold a kept copy back into `path` if the file lost what it added; True when the copy
    may go."""
    from moss_files.foundation.textmerge import Labels, fold_back  # here: only a displaced save needs it

    current = read_snapshot(path, max_bytes=max_bytes)
    labels = Labels(ours=path.name, base="what the undone write had read", theirs="a save that write displaced")
    fold = fold_back(_text(base), _text(current.data or b""), _text(kept), labels)
    if fold.text is not None:
        write_if_unchanged(current, fold.text.encode("utf-8", "surrogateescape"))
        return False
    return not fold.added or now - recorded.st_mtime > KEEP_DISPLACED_SECONDS


def _unneeded(path: Path, kept: bytes, kept_info: os.stat_result, now: float, max_bytes: int | None) -> bool:
    """Whether a copy without a base may go: old enough, and holding no line the file lacks."""
    if now - kept_info.st_mtime <= KEEP_DISPLACED_SECONDS:
        return False
    present = set(_text(read_snapshot(path, max_bytes=max_bytes).data or b"").splitlines())
    return all(line in present for line in _text(kept).splitlines())


def _settle_beside(path: Path, now: float, max_bytes: int | None) -> None:
    """Remove the copies kept beside `path` (no displaced folder) that are no longer needed."""
    prefix = _beside_prefix(path)
    try:
        with folder_fd(path.parent) as dir_fd:
            for name in os.listdir(dir_fd):
                if name.startswith(prefix):
                    kept, info = read_in(dir_fd, name)
                    if _unneeded(path, kept, info, now, max_bytes):
                        _unlink_quietly(dir_fd, name)
    except (FileNotFoundError, NotADirectoryError):
        return


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")  # any bytes, and back to the same bytes


def _stale(snapshot: Snapshot, current: Snapshot) -> Conflict:
    return Conflict(
        "file changed since it was read; nothing was written",
        code="STALE_WRITE",
        path=snapshot.path,
        details={"expected_digest": snapshot.digest, "actual_digest": current.digest},
        hint="read it again and retry",
    )


def _durable_temp(dir_fd: int, path: Path, data: bytes | Callable[[], Iterable[bytes]], mode: int | None) -> tuple[str, Identity]:
    """Write `data` to a fresh temporary next to `path` (in `dir_fd`), fsynced, with `mode`
    (default: the mode `path` has, else the umask's); return its name and (st_dev, st_ino)."""
    name = temp_path_for(path).name
    if mode is None:
        current = _lstat_in(dir_fd, path.name)
        mode = current.st_mode & 0o777 if current is not None and stat.S_ISREG(current.st_mode) else 0o666 & ~_umask()
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            for part in _parts(data):
                handle.write(part)
            handle.flush()
            os.fsync(handle.fileno())
            info = os.fstat(handle.fileno())
    except BaseException:
        _unlink_quietly(dir_fd, name)
        raise
    return name, identity_of(info)


RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100
_renameat2_state: dict[str, Any] = {}  # "call": the C function; "missing": no renameat2; "refused": flags the kernel refused


def libc_function(name: str) -> Any:
    """The C library's function `name` (errno kept for ctypes.get_errno), or None without it.

    The process's own symbols come first: the interpreter is linked with the C library, so they
    hold its functions. `ctypes.util.find_library` is only the fallback, because it runs
    `ldconfig -p` in a child process and loads tempfile and random, about 15 ms of a write.
    """
    import ctypes

    try:
        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        pass
    import ctypes.util

    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True), name)
    except (OSError, AttributeError):
        return None


def _bare_libc_function(name: str) -> Any:
    """The C library's function `name` from the process's own symbols, bound through `_ctypes`
    (the C half of ctypes) to take C ints and byte strings and return a C int, errno kept; None
    where that cannot be done. Importing `ctypes` itself defines all its C types and costs ~2 ms
    of every write that swaps a file in (a `cstack add`, issue 29); the call is the same."""
    try:
        import _ctypes

        class _Int(_ctypes._SimpleCData):  # a C int, returned as a Python int
            _type_ = "i"

        class _Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = _Int

        class _Process:  # what CFuncPtr reads a library's handle from (a CDLL, to ctypes)
            _handle = _ctypes.dlopen(None, 0)  # type: ignore[arg-type]  # dlopen(NULL): the process's own symbols, as CDLL(None)

        return _Function((name, _Process()))  # type: ignore[arg-type]
    except (ImportError, AttributeError, OSError, TypeError):
        return None


def _typed_renameat2() -> Any:
    """renameat2 through `ctypes` (`libc_function`), typed: the fallback of the bare binding."""
    import ctypes

    call = libc_function("renameat2")
    if call is not None:
        call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return call


def renameat2(source: str, target: str, flags: int, *, src_dir_fd: int = AT_FDCWD, dst_dir_fd: int = AT_FDCWD) -> int | None:
    """Linux renameat2(2) with `flags`: 0 when done, else the errno it failed with; None, having
    done nothing, where the C library, kernel or file system lacks it or those flags (known once
    and remembered, so callers fall back without asking again)."""
    if _renameat2_state.get("missing") or flags in _renameat2_state.get("refused", ()):
        return None
    call = _renameat2_state.get("call")
    if call is None:
        call = _bare_libc_function("renameat2") or _typed_renameat2()
        if call is None:
            _renameat2_state["missing"] = True
            return None
        _renameat2_state["call"] = call
    if call(src_dir_fd, os.fsencode(source), dst_dir_fd, os.fsencode(target), flags) == 0:
        return 0
    import _ctypes  # loaded by now: both bindings stand on it

    code = _ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        _renameat2_state.setdefault("refused", set()).add(flags)
        return None
    return code


def remove_flat_folder(base_fd: int, name: str) -> None:
    """Delete the folder `name` inside `base_fd` and the files it holds (a staging folder: files
    only), if present."""
    try:
        fd = os.open(name, FOLDER_NOFOLLOW, dir_fd=base_fd)
    except FileNotFoundError:
        return
    try:
        for inner in os.listdir(fd):
            os.unlink(inner, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=base_fd)


def move_new(staged: str, name: str, staging_fd: int, dir_fd: int) -> bool:
    """Move a staged file to a place no file holds, in one call (renameat2 RENAME_NOREPLACE):
    True when moved; False, having done nothing, where the kernel or file system cannot (the
    caller links, then unlinks). Raises FileExistsError when a file holds the place, and
    FileNotFoundError when the staged file is gone, as `os.link` does.

    One call rather than two: the staged name goes in the same step as the new one appears,
    so a crash never leaves the file under both names, and a create costs the file system one
    change of its directories rather than two (each an update of the inode's link count)."""
    code = renameat2(staged, name, RENAME_NOREPLACE, src_dir_fd=staging_fd, dst_dir_fd=dir_fd)
    if code is None:
        return False
    if code == errno.EEXIST:
        raise FileExistsError(code, os.strerror(code), name)
    if code == errno.ENOENT:
        raise FileNotFoundError(code, os.strerror(code), staged)
    if code:
        raise OSError(code, os.strerror(code), name)
    return True


def exchange(first: Path | str, second: Path | str, *, dir_fd: int | None = None) -> bool:
    """Atomically swap the files named `first` and `second` (Linux renameat2 RENAME_EXCHANGE),
    both relative to `dir_fd` when given.

    Returns False, having done nothing, where the kernel or file system cannot do it.
    """
    base = AT_FDCWD if dir_fd is None else dir_fd
    code = renameat2(str(first), str(second), RENAME_EXCHANGE, src_dir_fd=base, dst_dir_fd=base)
    if code is None:
        return False
    if code:
        raise OSError(code, os.strerror(code), str(second))
    return True


def modify(
    path: Path,
    transform: Callable[[Snapshot], bytes | None],
    *,
    retries: int = DEFAULT_RETRIES,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
    max_bytes: int | None = None,
    kind: str | None = None,
    relpath: str | None = None,
    sync_folder: bool = True,
    lock: bool = True,
) -> Snapshot:
    """Read-modify-write `path` under its lock; return the snapshot of what was written.

    `transform` receives the current snapshot and returns new bytes, or None to leave the file
    alone. If the file changes between the read and the write (a hand edit, which takes no
    lock), the transform runs again on the new content, up to `retries` times.

    With `kind` (a `formats` kind; `relpath` is the file's path from the workspace root), the
    transform receives the file upgraded to its kind's current version, so an edit of an older
    file writes it at the current version; an edit that changes nothing writes nothing, the
    upgrade included. Without `sync_folder`, see `write_if_unchanged`.

    Without `lock`, the file's own lock is not taken: the caller holds a lock every tool
    writer of the file holds (the board's), or the rare writer without it is caught like a
    hand edit (`write_if_unchanged` refuses to overwrite a change, and the edit runs again).

    Raises Conflict STALE_WRITE when the file keeps changing, LOCK_TIMEOUT when the lock is
    held, InvalidDocument FORMAT_TOO_NEW for a file of a newer version (never written).
    """
    with locked(path, timeout=timeout) if lock else nullcontext():
        for _attempt in range(retries):
            # A save an earlier write displaced is folded back before the file is read, so the
            # transform sees it; so an undone write is simply tried again, like a refused one.
            if not _stale_retry(settle_displaced, path, max_bytes=max_bytes):
                continue
            snapshot = read_snapshot(path, max_bytes=max_bytes)
            work = snapshot if kind is None else upgraded(snapshot, kind, relpath, max_bytes)
            new = transform(work)
            if new is None or new == work.data:
                return snapshot
            if _stale_retry(write_if_unchanged, snapshot, new, sync_folder=sync_folder):
                return Snapshot(path, new)
    raise Conflict(
        f"file kept changing during {retries} attempts; nothing was written",
        code="STALE_WRITE",
        path=path,
    )


def _stale_retry(step: Callable[..., None], *args: Any, **kwargs: Any) -> bool:
    """Run one guarded step of `modify`: False when the file changed under it (STALE_WRITE)."""
    try:
        step(*args, **kwargs)
    except Conflict as exc:
        if exc.code == "STALE_WRITE":
            return False
        raise
    return True


# The kinds whose files are at their current version without a marker (version 1 is current):
# an edit of one whose bytes hold no `moss_format` (formats.MARKER) works on them as they are,
# without loading the format table (2 ms of every `cstack add`). A test checks it against
# formats.KINDS.
CURRENT_UNMARKED = frozenset({"mailbox", "current", "plan", "memory"})
_MARKER_BYTES = b"moss_format"


def upgraded(snapshot: Snapshot, kind: str, relpath: str | None, max_bytes: int | None) -> Snapshot:
    """The snapshot a tool edit works on: the file's bytes at its kind's current version (what
    `modify` with `kind` hands its transform)."""
    if snapshot.data is None:
        return snapshot
    if kind in CURRENT_UNMARKED and _MARKER_BYTES not in snapshot.data:
        return snapshot  # version 1, the current one: formats.upgrade_bytes would return these bytes
    from moss_files.foundation import document, formats  # here: a search process never edits

    mtime_ms = snapshot.identity[3] // 1_000_000 if snapshot.identity is not None else 0
    found = formats.locate(snapshot.path) if relpath is None else None
    facts = formats.Facts(relpath or (found[1] if found is not None else snapshot.path.as_posix()), mtime_ms)
    try:
        data = formats.upgrade_bytes(kind, snapshot.data, facts, max_bytes=max_bytes or document.DEFAULT_MAX_BYTES)
    except InvalidDocument as err:
        if err.code == "FORMAT_TOO_NEW":
            raise
        return snapshot  # a file that does not read: the transform reports it, as it always has
    return snapshot if data == snapshot.data else Snapshot(snapshot.path, data, digest_of(data), snapshot.identity)


def modify_document(
    path: Path,
    transform: Callable[[Document], str | None],
    *,
    retries: int = DEFAULT_RETRIES,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
    max_bytes: int | None = None,
    kind: str | None = None,
    relpath: str | None = None,
) -> Document:
    """Like `modify`, for a markdown document: `transform(doc)` returns new text or None.

    Keeps the file's BOM. With `kind`, the transform edits the document upgraded to the
    kind's current version (see `modify`). Raises NotFound for a missing file and
    InvalidDocument for a malformed one or one of a newer version (untouched).
    """
    from moss_files.foundation import document

    limit = document.DEFAULT_MAX_BYTES if max_bytes is None else max_bytes

    def step(snapshot: Snapshot) -> bytes | None:
        if snapshot.data is None:
            raise NotFound("no such file", path=path)
        doc = document.parse_bytes(snapshot.data, path, max_bytes=limit)
        new_text = transform(doc)
        return None if new_text is None else document.encode(new_text, doc.bom)

    written = modify(path, step, retries=retries, timeout=timeout, max_bytes=limit, kind=kind, relpath=relpath)
    assert written.data is not None
    return document.parse_bytes(written.data, path, max_bytes=limit)


def iter_files(root: Path, suffix: str = ".md") -> Iterator[Path]:
    """Files under `root` with `suffix`, skipping our temp/lock files, sorted by path.

    Folder links below `root` are not entered; a file that is a link (or a FIFO, or anything
    else) is still yielded, so the reader refuses it by name rather than the scan skipping it
    silently. Raises SYMLINK_REFUSED when `root` itself lies behind a link inside a toolkit
    folder, NOT_READABLE for a folder that cannot be listed.
    """
    try:
        with folder_fd(root):
            pass
    except (FileNotFoundError, NotADirectoryError, InvalidRequest):
        return
    for dirpath, dirnames, filenames in walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            candidate = Path(dirpath, name)
            if name.endswith(suffix) and not is_temporary(candidate):
                yield candidate


def walk(top: Path | str) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(top)` (links to folders not entered), except that a folder that cannot be
    listed raises RepoError NOT_READABLE instead of being skipped in silence; a folder gone
    while walking is skipped."""

    def refuse(exc: OSError) -> None:
        if isinstance(exc, PermissionError):
            raise not_readable(exc.filename, exc, folder=True) from None

    return os.walk(top, onerror=refuse)


def list_names(folder: Path | str | int, *, shown: Path | str | None = None) -> list[str]:
    """The names in `folder` (a path, or a descriptor from `open_folder`), unsorted.

    Raises FileNotFoundError, NotADirectoryError, RepoError NOT_READABLE when the folder
    cannot be listed (`shown` names it; default `folder`)."""
    try:
        return os.listdir(folder)
    except PermissionError as exc:
        raise not_readable(shown if shown is not None else str(folder), exc, folder=True) from None


def list_entries(folder: Path | str, *, shown: Path | str | None = None) -> list[os.DirEntry[str]]:
    """`list_names` with each entry's type (os.scandir), unsorted; raises as `list_names`."""
    try:
        with os.scandir(folder) as iterator:
            return list(iterator)
    except PermissionError as exc:
        raise not_readable(shown if shown is not None else folder, exc, folder=True) from None

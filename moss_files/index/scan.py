"""Reading the artifact folders for the search index: walk them, take each file's stat
signature, and read a file's bytes without following links. Edge layer: the disk, read only;
it never writes an artifact file and knows nothing of SQLite (that is `database`).

The walk asks the registry which folders to enter and which files a source owns; its result,
a `Tree`, is what a refresh compares with the cache (by one fingerprint, then file by file).
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from moss_files.foundation.fs import FOLDER_NOFOLLOW, not_regular
from moss_files.index.model import MAX_FILE_BYTES, Problem, Registry, Signature, Stat, blake2b, digest, signature


class Tree(NamedTuple):
    """The files some source owns, in walk order, with their signatures."""

    paths: list[str]
    sigs: list[int]
    links: Sequence[str] = ()  # folders the walk would enter, but links
    unreadable: Sequence[str] = ()  # folders the walk may not list or look into

    def signatures(self) -> dict[str, Signature]:
        return dict(zip(self.paths, self.sigs, strict=True))

    def fingerprint(self) -> str:
        """A digest of every (path, signature) in walk order. The index stores the one of the
        tree it matches exactly; an equal digest later means nothing changed, and a different
        one (a change, or only another walk order) means comparing file by file."""
        data = "\n".join(self.paths).encode("utf-8", "surrogateescape") + array("q", self.sigs).tobytes()
        return blake2b(data, digest_size=16).hexdigest()


# Each folder is listed through a descriptor of its own, so each file's stat resolves one name
# in it rather than the whole path from the root again (about a tenth of a walk's time).
_BY_DESCRIPTOR = os.scandir in os.supports_fd


def walk(root: Path, registry: Registry, *, stat: bool = True, under: str | None = None) -> Tree:
    """Every file some source owns, with its signature (see `model.signature`); with `stat`
    false, the files alone (`sigs` empty), for a caller that takes each one's stat itself.
    With `under` (a folder relative to the root), the files of the whole walk that lie below
    that folder, and no folder elsewhere is listed. A file removed between its folder's
    listing and its stat (another process saving it by remove and write) is left out, as gone:
    a refresh drops its rows, and the next walk lists it again once it is back."""
    base = str(root)
    paths: list[str] = []
    sigs: list[int] = []
    links: list[str] = []
    unreadable: list[str] = []
    stack: list[str] = []
    if under is not None:
        if _walk_enters(base, registry, under):
            stack.append(under)
    else:
        for top in registry.tops:
            if registry.descend(top):
                # A toolkit folder that is a link leads out of the workspace: never read there.
                (links if os.path.islink(f"{base}/{top}") else stack).append(top)
    add_path = paths.append
    add_sig = sigs.append
    while stack:
        folder = stack.pop()
        route = registry.route(folder)
        # Most folders take every .md file; only those naming files ask the route per file.
        takes_all = route is not None and route.default is not None and not route.by_name
        prefix = folder + "/"
        try:
            # Opened without following a link: a folder replaced by one since it was listed
            # is not entered (the next walk lists it as a link).
            fd = os.open(f"{base}/{folder}", FOLDER_NOFOLLOW) if _BY_DESCRIPTOR else -1
        except PermissionError:
            unreadable.append(folder)  # reported (`folder_problems`), never skipped in silence
            continue
        except OSError:  # gone, not a folder (any more), a link
            continue
        try:
            iterator = os.scandir(fd if fd >= 0 else f"{base}/{folder}")
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            if isinstance(exc, PermissionError):
                unreadable.append(folder)
            continue
        start = len(paths)
        try:
            with iterator:
                for entry in iterator:
                    name = entry.name
                    # The common case first, in as few calls as can be: an artifact file. The
                    # checks are those of the general branch below, in another order.
                    if name[-3:] == ".md" and name[0] != "." and entry.is_file(follow_symlinks=False):
                        if takes_all or (route is not None and route.source_for(name) is not None):
                            if stat:
                                try:
                                    add_sig(entry.stat(follow_symlinks=False).st_ctime_ns)  # == signature(stat)
                                except FileNotFoundError:
                                    continue  # removed since the folder was listed: gone, as later walks find it
                            add_path(prefix + name)
                        continue
                    if name[0] == ".":
                        continue  # temp and lock files, .gitkeep, per-machine state folders
                    if entry.is_dir(follow_symlinks=False):
                        if registry.descend(prefix + name):
                            stack.append(prefix + name)
                    elif entry.is_symlink() and entry.is_dir() and registry.descend(prefix + name):
                        links.append(prefix + name)
                    elif name.endswith(".md") and (takes_all or (route is not None and route.source_for(name) is not None)):
                        if stat:
                            try:
                                add_sig(entry.stat(follow_symlinks=False).st_ctime_ns)
                            except FileNotFoundError:
                                continue
                        add_path(prefix + name)
        except PermissionError:
            # A folder that may be listed but not looked into (read without search
            # permission): none of its files can be read, so the folder is the problem.
            del paths[start:], sigs[start:]
            unreadable.append(folder)
        finally:
            if fd >= 0:
                os.close(fd)
    return Tree(paths, sigs, sorted(links), sorted(unreadable))


def _walk_enters(base: str, registry: Registry, folder: str) -> bool:
    """Whether the whole walk would enter `folder`: below a top folder of the registry, every
    folder on the way one it descends into, a folder (never a link), its name not hidden."""
    parts = folder.split("/")
    if parts[0] not in registry.tops:
        return False
    for depth in range(1, len(parts) + 1):
        here = "/".join(parts[:depth])
        if (depth > 1 and parts[depth - 1][:1] in ("", ".")) or not registry.descend(here):
            return False
        try:
            mode = os.lstat(f"{base}/{here}").st_mode
        except OSError:
            return False
        if not stat_module.S_ISDIR(mode):
            return False  # a link (the walk lists it, never enters it), a file, gone
    return True


def stat_paths(root: Path, registry: Registry, paths: Iterable[str]) -> dict[str, Signature]:
    """The signatures of those of `paths` (relative to `root`) that `walk` would list, as they
    are now: files some source owns (a link among them too, which reading then refuses). A
    path that is gone, a folder, under a linked folder, or owned by no source is left out, as
    the walk leaves it out."""
    base = str(root)
    found: dict[str, Signature] = {}
    real: dict[str, bool] = {}  # folder -> not a link, nor under one (the walk enters no link)

    def is_real(folder: str) -> bool:
        if folder not in real:
            parent, _, _ = folder.rpartition("/")
            real[folder] = (not parent or is_real(parent)) and not os.path.islink(f"{base}/{folder}")
        return real[folder]

    for relpath in paths:
        if registry.source_for(relpath) is None or not is_real(relpath.rpartition("/")[0]):
            continue
        path = f"{base}/{relpath}"
        try:
            st = os.lstat(path)
        except OSError:  # gone, or a folder on its way gone or replaced
            continue
        if stat_module.S_ISDIR(st.st_mode) or (stat_module.S_ISLNK(st.st_mode) and os.path.isdir(path) and registry.descend(relpath)):
            continue  # a folder, or a link the walk reports as a linked folder
        found[relpath] = st.st_ctime_ns  # == signature(stat); a link is listed, to be refused
    return found


def folder_problems(root: Path, registry: Registry) -> list[dict[str, Any]]:
    """A problem entry for each folder the index would read but does not: a link, or a folder
    this user may not list or look into."""
    tree = walk(root, registry)
    found = [(link, "SYMLINK_REFUSED", "is a symbolic link to a folder; the index does not follow links") for link in tree.links]
    found += [(folder, "NOT_READABLE", "cannot read the folder: permission denied; its files are not indexed") for folder in tree.unreadable]
    return [{"path": path, "source": None, "code": code, "message": message, "line": None, "severity": "error"} for path, code, message in found]


class FileRead(NamedTuple):
    """A file read for indexing: its stat at the read, bytes and hash, or why not."""

    relpath: str
    stat: Stat
    data: bytes
    digest: str
    problem: Problem | None = None

    @property
    def sig(self) -> int:
        return signature(self.stat)


def read_file(root: Path, relpath: str) -> FileRead | None:
    """Read one file without following links; None when it is gone."""
    path = f"{root}/{relpath}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        try:
            st = os.lstat(path)
        except (FileNotFoundError, PermissionError):
            # Gone; or in a folder this user may not look into, which `folder_problems` names
            # (and `walk`, taking stats, leaves out): either way no file to index here.
            return None
        stat = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if exc.errno == errno.ELOOP:
            problem = Problem("SYMLINK_REFUSED", "is a symbolic link; the index does not follow links")
        elif isinstance(exc, PermissionError):
            problem = Problem("NOT_READABLE", f"cannot read the file: {exc.strerror}")
        else:
            problem = Problem("INVALID_DOCUMENT", f"cannot be read: {exc.strerror}")
        return FileRead(relpath, stat, b"", digest(b""), problem)
    try:
        st = os.fstat(fd)
        stat = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if not stat_module.S_ISREG(st.st_mode):
            refused = not_regular(relpath, st.st_mode)
            return FileRead(relpath, stat, b"", digest(b""), Problem(refused.code, refused.message))
        if st.st_size > MAX_FILE_BYTES:
            problem = Problem("FILE_TOO_LARGE", f"file is {st.st_size} bytes; the index reads files up to {MAX_FILE_BYTES}")
            return FileRead(relpath, stat, b"", digest(str(stat).encode()), problem)
        chunks = []
        while True:
            chunk = os.read(fd, max(st.st_size + 1, 65536))
            if not chunk:
                break
            chunks.append(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    return FileRead(relpath, stat, data, digest(data))

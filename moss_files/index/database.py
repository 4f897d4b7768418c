"""The derived search cache: one SQLite file (FTS5, WAL) under `.moss/cache/`, kept in step
with the artifact files. Edge layer: the only module that imports sqlite3 (schema, FTS5,
transactions). The artifact folders are walked and read by `scan`; nothing here writes an
artifact file.

The cache is disposable. A missing, unreadable or outdated file (schema version, or a registry
with other sources) is rebuilt: into a temporary file next to it, then renamed over it. Every
use holds a shared lock (`index.lock`) for as long as its connection is open and the rename
holds it exclusively, so no connection ever sees a database swapped under it and the WAL files
of the old database are removed while nobody uses them. Refreshes are incremental: files whose
stat signature changed are read, a same content hash keeps their rows, and under SQLite's
write lock a file that changed again is re-read, so the cache never goes back in time.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from moss_files.foundation import fs
from moss_files.foundation.errors import CacheError, InvalidRequest, MossError
from moss_files.index.model import (
    SOURCE_ID_FACET,
    WATCH_SOCKET,
    Extracted,
    FileInput,
    Problem,
    RefreshReport,
    Registry,
    Signature,
    Source,
    plan_refresh,
    stored_signature,
)
from moss_files.index.scan import FileRead, Tree, read_file, stat_paths, walk

if TYPE_CHECKING:
    from moss_files.index.query import Filter, ParsedQuery

# The query language (`index.query`) is loaded by the methods that use it: a refresh alone,
# which every `moss index refresh` and every watcher's event is, never does.

T = TypeVar("T")

SCHEMA_VERSION = 4  # 2: items.handle (a capsule's workspace/name); 3: source_id facets (old ids of migrated items); 4: capsule listing indexes
CACHE_DIR = Path(".moss") / "cache"
DB_NAME = "index.db"
LOCK_NAME = "index.lock"
BUILD_LOCK_NAME = "build.lock"
LOCK_TIMEOUT = 60.0
BUSY_TIMEOUT_MS = 30_000
BATCH_FILES = 1000
PARALLEL_MIN_FILES = 4000  # a full build of at least this many files extracts in worker processes
MAX_BUILD_WORKERS = 4
MMAP_BYTES = 256 * 1024 * 1024
FTS_HASH_BYTES = 8 * 1024 * 1024  # FTS5's buffer of pending terms in a build (its default: 1 MB)
COLUMNS = ("id", "title", "tags", "body", "extra")
# A text search without filters ranks first its RANK_POOL matches of best bm25 (or
# RANK_POOL_PER_ROW times the rows its page needs, up to RANK_POOL_MAX), and every match only
# when those cannot vouch for the page (View._ranked_from_pool). On the generated 100,000-item
# workspace a page of 21 rows needed a pool of 80 to 250, one of 201 rows 660 to 890.
RANK_POOL = 400
RANK_POOL_PER_ROW = 8
RANK_POOL_MAX = 4000

TABLES = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE files(
    path TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    sig INTEGER,
    mtime_ns INTEGER NOT NULL,
    digest TEXT NOT NULL,
    problems TEXT
) WITHOUT ROWID;
CREATE TABLE items(
    rowid INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    anchor TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    line INTEGER,
    title TEXT NOT NULL,
    summary TEXT NOT NULL,
    status TEXT,
    date TEXT,
    updated TEXT,
    ts REAL,
    handle TEXT,
    UNIQUE(path, anchor)
);
CREATE TABLE facets(item INTEGER NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL);
CREATE VIRTUAL TABLE items_fts USING fts5({", ".join(COLUMNS)}, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3');
"""
# The capsules_ indexes serve `moss list|inventory|latest` (service.capsule_items): the newest
# page in index order without sorting every capsule (and the undated ones, first in it), the
# scope's count from a narrow index rather than the wide rows, and the soft-deleted ones apart.
INDEXES = """
CREATE INDEX items_id ON items(id COLLATE NOCASE);
CREATE INDEX items_date ON items(date);
CREATE INDEX items_kind ON items(kind, date);
CREATE INDEX facets_lookup ON facets(field, value, item);
CREATE INDEX facets_item ON facets(item);
CREATE INDEX files_problems ON files(path) WHERE problems IS NOT NULL;
CREATE INDEX capsules_recent ON items(ts DESC, id DESC, path, status) WHERE kind = 'capsule';
CREATE INDEX capsules_scope ON items(path) WHERE kind = 'capsule';
CREATE INDEX capsules_deleted ON items(path) WHERE kind = 'capsule' AND status = 'deleted';
"""
_ITEM_COLUMNS = "i.rowid, i.kind, i.id, i.path, i.anchor, i.line, i.title, i.summary, i.status, i.date, i.updated, i.handle"
_CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
# What SQLite says when the cache file or its folder cannot be written (a read-only checkout
# or mount, a full disk): the search then runs on an index in memory instead.
_UNWRITABLE = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_FULL", "SQLITE_IOERR")
_UNWRITABLE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


def _not_writable(exc: sqlite3.Error | OSError, where: Path) -> CacheError | None:
    """A NOT_WRITABLE CacheError when `exc` means the cache cannot be written; else None."""
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", "") or ""
        if not name.startswith(_UNWRITABLE):
            return None
        reason = str(exc)
    elif exc.errno in _UNWRITABLE_ERRNOS:
        reason = exc.strerror or str(exc)
    else:
        return None
    return CacheError(f"the search cache cannot be written: {reason}", code="NOT_WRITABLE", path=where)


class Hit(NamedTuple):
    """One indexed item as a query returns it."""

    kind: str
    id: str
    path: str
    anchor: str
    line: int | None
    title: str
    summary: str
    status: str | None
    date: str | None
    updated: str | None
    handle: str | None = None
    score: float = 0.0


class Found(NamedTuple):
    """A page of hits, and whether more matches follow it."""

    hits: tuple[Hit, ...]
    more: bool


class _Stored(NamedTuple):
    """What the index holds about one file."""

    sig: Signature
    mtime_ns: int
    digest: str
    source: str


class _Unusable(Exception):
    """The cache file cannot serve (missing, unreadable, outdated): rebuild it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------- locks


def _flock(path: Path, *, exclusive: bool, timeout: float = LOCK_TIMEOUT) -> AbstractContextManager[None]:
    return fs.flocked(
        path, shared=not exclusive, timeout=timeout, error=CacheError, hint="another process is rebuilding or holding the index; retry, or delete .moss/cache/"
    )


# --------------------------------------------------------------------------- rows


class _Rows:
    """The rows of some files for each table, their items numbered from 1 in the order read:
    an item's rowid is its number plus the base its writer gives. Built where the files are
    extracted (a build's worker process, or here), so the writer only hands whole lists to
    SQLite; it pickles as one object of plain tuples."""

    def __init__(self) -> None:
        self.files: list[tuple[Any, ...]] = []
        self.items: list[tuple[Any, ...]] = []
        self.facets: list[tuple[Any, ...]] = []
        self.fts: list[tuple[Any, ...]] = []
        self.count = 0  # items numbered so far
        self.problem_files = 0

    def add(self, done: _Done) -> None:
        # `import … as`: once loaded, a look-up (a `from` import costs a microsecond a file).
        import moss_files.index.query as query

        relpath, source_name, stat, file_digest, now_ns, extracted = done
        problems = _json().dumps([_problem_dict(p) for p in extracted.problems], ensure_ascii=False) if extracted.problems else None
        self.problem_files += bool(extracted.problems)
        self.files.append((relpath, source_name, stored_signature(stat, now_ns), stat[0], file_digest, problems))
        items, facets, fts = self.items, self.facets, self.fts
        number = self.count
        # One unpacking of each entry rather than an attribute look-up per field (Entry's
        # field order; a field added to Entry fails here loudly).
        for kind, id_, title, summary, body, anchor, line, status, date, updated, tags, links, entry_facets, extra, handle in extracted.entries:
            number += 1
            items.append((number, relpath, anchor, kind, id_, line, title, summary, status, date, updated, query.timestamp_of(updated or date), handle))
            # = facets_of(entry): its facets, then its tags and links, each pair once
            pairs = entry_facets
            if tags or links:
                pairs = (*pairs, *[("tag", tag.casefold()) for tag in tags], *[("link", link.casefold()) for link in links])
            facets.extend([(number, name, value) for name, value in dict.fromkeys(pairs)])
            fts.append((number, id_, title, " ".join(tags), body, extra))
        self.count = number

    def write(self, conn: sqlite3.Connection, base: int) -> None:
        """Insert the rows, item number n as rowid `base + n` (SQLite adds it: no row is
        copied here)."""
        conn.executemany("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?)", self.files)
        conn.executemany(f"INSERT INTO items VALUES (? + {int(base)}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self.items)
        conn.executemany(f"INSERT INTO facets VALUES (? + {int(base)}, ?, ?)", self.facets)
        conn.executemany(f"INSERT INTO items_fts(rowid, {', '.join(COLUMNS)}) VALUES (? + {int(base)}, ?, ?, ?, ?, ?)", self.fts)


class _Batch:
    """Rows for a set of files, collected so each table gets one executemany per set."""

    def __init__(self, registry: Registry, next_rowid: int) -> None:
        self.registry = registry
        self.rowid = next_rowid
        self.pending: list[_Rows] = []
        self.problem_files = 0
        self.stored: list[tuple[str, str, Signature]] = []

    def add(self, read: FileRead, source: Source, now_ns: int) -> None:
        if not self.pending:
            self.pending.append(_Rows())
        rows = self.pending[-1]
        files, problem_files = len(rows.files), rows.problem_files
        rows.add(_extract_read(self.registry, read, source, now_ns))
        self._note(rows.files[files:], rows.problem_files - problem_files)

    def add_rows(self, rows: _Rows) -> None:
        """Rows a build's reader made (see `_read_and_extract`)."""
        self.pending.append(rows)
        self._note(rows.files, rows.problem_files)

    def _note(self, files: list[tuple[Any, ...]], problem_files: int) -> None:
        self.stored.extend((row[0], row[1], row[2]) for row in files)
        self.problem_files += problem_files

    def write(self, conn: sqlite3.Connection) -> None:
        for rows in self.pending:
            rows.write(conn, self.rowid)
            self.rowid += rows.count
        self.pending = []


# One file read and extracted: (relpath, source name, stat, digest, when read, rows).
_Done = tuple[str, str, tuple[int, int, int, int], str, int, Extracted]


def _extract_read(registry: Registry, read: FileRead, source: Source, now_ns: int) -> _Done:
    if read.problem is not None:
        extracted = Extracted((), (read.problem,))
    else:
        extracted = registry.extract(source, FileInput(read.relpath, read.data, read.stat[0]))
    return (read.relpath, source.name, read.stat, read.digest, now_ns, extracted)


def _read_and_extract(root: Path, registry: Registry, paths: Sequence[str]) -> _Rows:
    """Read and extract files, into rows (in a worker process of a parallel build); each
    file's time is taken right after its read, as the racy rule needs."""
    rows = _Rows()
    for relpath in paths:
        read = read_file(root, relpath)
        source = registry.source_for(relpath)
        if read is not None and source is not None:
            rows.add(_extract_read(registry, read, source, time.time_ns()))
    return rows


def _extracted_chunks(root: Path, registry: Registry, paths: Sequence[str], workers: int) -> Iterator[_Rows]:
    """The files read and extracted, chunk by chunk in order: in `workers` processes when that
    pays (a big tree, a registry that can be sent to them), else here."""
    chunks = [paths[i : i + BATCH_FILES] for i in range(0, len(paths), BATCH_FILES)]
    workers = min(workers, len(chunks))
    payloads: list[bytes] = []
    if workers > 1:
        import pickle  # here: a build in this process alone never loads it

        try:
            payloads = [pickle.dumps((root, registry, chunks[number::workers])) for number in range(workers)]
        except Exception:  # a registry of local functions (tests, plugins) is read here
            payloads = []
    if not payloads:
        for chunk in chunks:
            yield _read_and_extract(root, registry, chunk)
        return
    # Plain child processes of this interpreter (not multiprocessing): nothing of this
    # process (its threads, its __main__) is inherited or run again. Worker k takes chunks
    # k, k + workers, …, and sends each back as one pickle in order.
    import pickle
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    # -P: the working folder (a project anyone may have written) is never put on the
    # worker's import path, so a `moss_files` folder there cannot stand in for this toolkit.
    command = [sys.executable, "-P", "-c", "from moss_files.index.database import extract_worker; extract_worker()"]
    procs = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env) for _ in payloads]
    try:
        for proc, payload in zip(procs, payloads, strict=True):
            assert proc.stdin is not None
            proc.stdin.write(payload)
            proc.stdin.close()
        for number in range(len(chunks)):
            stream = procs[number % workers].stdout
            assert stream is not None
            try:
                done: _Rows = pickle.load(stream)
            except (EOFError, pickle.UnpicklingError):  # a worker died: read the rest here
                for rest in chunks[number:]:
                    yield _read_and_extract(root, registry, rest)
                return
            yield done
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def extract_worker() -> None:
    """A parallel build's worker process: from stdin a pickled (root, registry, chunks); to
    stdout one pickled list of extracted files per chunk, in order."""
    import pickle
    import sys

    root, registry, chunks = pickle.load(sys.stdin.buffer)
    for chunk in chunks:
        pickle.dump(_read_and_extract(root, registry, chunk), sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
        sys.stdout.buffer.flush()


def build_workers(files: int, busy: Sequence[int | None] = ()) -> int:
    """How many processes read and extract files for a full build of `files` files. `busy` are
    readings of `runnable_elsewhere` taken during the build's first steps; without one that
    answers, the 1-minute load average stands in."""
    if files < PARALLEL_MIN_FILES:
        return 1  # starting workers costs more than they save
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    taken = [count for count in busy if count is not None]
    if taken:
        # The fewest seen: a process that ran for one reading only does not hold a core.
        return workers_for(cpus, min(taken))
    return workers_for(cpus, os.getloadavg()[0] if hasattr(os, "getloadavg") else float(cpus))


def workers_for(cpus: int, busy: float) -> int:
    """The processes a build extracts in on `cpus` cores while `busy` other tasks want to run:
    one for each core nobody else uses, at most one a core (1: in this process). Measured on 2
    idle cores at 10,000 files: one process 1.07 s, two workers 0.82 s, three 0.92 s; with one
    core taken by another task, or at a load of 8 to 10, workers took as long as one process."""
    return max(1, min(MAX_BUILD_WORKERS, cpus, int(cpus - busy + 0.5)))  # a load average is fractional


def runnable_elsewhere() -> int | None:
    """How many tasks besides this process the kernel has ready to run now (Linux), or None.

    The load average is a mean of the past minute: right after another heavy command ends it
    still says a core is taken (a bench's previous rebuild left it at 1.0 on an idle machine, so
    the next rebuild ran in one process). The count of runnable tasks is the kernel's own, now."""
    try:
        with open("/proc/loadavg", "rb") as handle:
            return runnable_from(handle.read())
    except OSError:
        return None


def runnable_from(loadavg: bytes) -> int | None:
    """The tasks besides the reader that /proc/loadavg's text says are runnable: its fourth field
    is `running/total`, and the process reading it is one of the running. None when malformed."""
    fields = loadavg.split()
    try:
        running = int(fields[3].split(b"/", 1)[0])
    except (IndexError, ValueError):
        return None
    return max(0, running - 1)


def _json() -> Any:
    """The json module, loaded on first use: a query of an index without problems never needs it."""
    import json

    return json


def _problem_dict(problem: Problem) -> dict[str, Any]:
    return {"code": problem.code, "message": problem.message, "line": problem.line, "severity": problem.severity}


def _delete_files(conn: sqlite3.Connection, paths: Sequence[str]) -> int:
    """Delete the files' rows and their items; returns how many files the index had."""
    known = 0
    for path in paths:
        rowids = [row[0] for row in conn.execute("SELECT rowid FROM items WHERE path = ?", (path,))]
        if rowids:
            marks = ",".join("?" * len(rowids))
            conn.execute(f"DELETE FROM items_fts WHERE rowid IN ({marks})", rowids)
            conn.execute(f"DELETE FROM facets WHERE item IN ({marks})", rowids)
            conn.execute("DELETE FROM items WHERE path = ?", (path,))
        known += conn.execute("DELETE FROM files WHERE path = ?", (path,)).rowcount
    return known


# --------------------------------------------------------------------------- the index


class SearchIndex:
    """The cache of one workspace. `run(work)` hands `work` a View of a fresh, refreshed index."""

    def __init__(
        self,
        root: Path,
        registry: Registry,
        *,
        cache_dir: Path | None = None,
        notify: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        ask_watcher: bool = True,
    ) -> None:
        self.root = Path(root)
        self.registry = registry
        self.dir = Path(cache_dir) if cache_dir is not None else self.root / CACHE_DIR
        self.path = self.dir / DB_NAME
        self.notify = notify or (lambda message: None)
        self.progress = progress
        self.ask_watcher = ask_watcher  # False for the watcher itself, which must walk
        self.build_workers: int | None = None  # processes extracting files in a full build (None: by size)
        self.last_refresh: RefreshReport | None = None
        self.meta: dict[str, str] = {}  # the meta rows the last connection read

    # ----------------------------------------------------------------- use

    def run(self, work: Callable[[View], T], *, refresh: bool = True, paths: Collection[str] | None = None, scope: str | None = None) -> T:
        """Open the index (rebuilding it when unusable), refresh it, and return `work(view)`.
        With `paths` (relative to the root), the refresh looks at those files alone, as a
        watcher does with the files its events name; it never asks a watcher. With `scope` (a
        folder relative to the root), a refresh without a watcher walks that folder alone, for
        `work` that reads only the rows of files below it (the rest are left as they were,
        until a refresh that walks them). Where the cache
        folder cannot be written (a read-only checkout), the index is built in memory for this
        one call instead, and `notify` says so.

        Raises CacheError when the cache cannot be built or read even after a rebuild, and
        InvalidDocument SYMLINK_REFUSED when a folder on the cache's path is a link.
        """
        fs.check_confined(self.dir)  # a linked `.moss/` must not put the cache somewhere else
        try:
            return self._run_cached(work, refresh, paths, scope)
        except CacheError as err:
            if err.code != "NOT_WRITABLE":
                raise
            self.notify(f"cannot write the search cache in {self.dir} ({err.message}); searching without one")
            return self._run_in_memory(work)

    def _run_cached(self, work: Callable[[View], T], refresh: bool, paths: Collection[str] | None, scope: str | None = None) -> T:
        # A running watcher that answers `sync` has the index fresh as of this moment: no walk.
        warm = self._watcher_synced() if refresh and paths is None else None
        for attempt in range(3):
            try:
                with self._view() as view:
                    if refresh:
                        self.last_refresh = RefreshReport(files=warm, watched=True) if warm is not None else view.refresh(paths, scope=scope)
                    return work(view)
            except _Unusable as unusable:
                if attempt == 2:
                    raise CacheError(f"the search index cannot be used: {unusable.reason}", path=self.path, hint="delete .moss/cache/ and retry") from None
                self._rebuild(reason=unusable.reason, only_if_unusable=True)
        raise AssertionError("unreachable")

    def _watcher_synced(self) -> int | None:
        """The files the index holds, when a watcher keeps it fresh and has just caught up with
        every change; None when no watcher answers so (the query walks)."""
        if not self.ask_watcher or self.dir != self.root / CACHE_DIR:
            return None  # the watcher keeps the workspace's own cache, not this one
        if not os.path.exists(f"{self.root}/{WATCH_SOCKET}"):
            # No watcher: the query walks without loading the watcher's module (and inotify's).
            return None
        from moss_files.index import watch

        return watch.synced(self.root, self.registry.fingerprint)

    def _run_in_memory(self, work: Callable[[View], T]) -> T:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        try:
            self.last_refresh = self._fill(conn, reason="not writable")
            return work(View(self, conn))
        finally:
            conn.close()

    def rebuild(self) -> RefreshReport:
        """Build the whole index anew from the files and swap it in."""
        report = self._rebuild(reason=None, only_if_unusable=False)
        assert report is not None
        return report

    @contextmanager
    def _view(self) -> Iterator[View]:
        if not self.path.exists():
            raise _Unusable("missing")
        self._ensure_dir()
        with _flock(self.dir / LOCK_NAME, exclusive=False):
            conn = self._connect()
            try:
                yield View(self, conn)
            except sqlite3.DatabaseError as exc:
                if getattr(exc, "sqlite_errorname", None) in _CORRUPT:
                    raise _Unusable(f"unreadable ({exc})") from None
                raise _not_writable(exc, self.path) or CacheError(
                    f"search index error: {exc}", path=self.path, hint="retry; if it persists, run `moss index rebuild`"
                ) from None
            finally:
                conn.close()

    def _connect(self) -> sqlite3.Connection:
        """An open connection to a usable index (its meta rows read into `self.meta`)."""
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=True)
        except sqlite3.OperationalError as exc:
            raise _Unusable(f"cannot be opened ({exc})") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise _Unusable(f"schema version {version}, this version of moss-files uses {SCHEMA_VERSION}")
            meta = dict(conn.execute("SELECT key, value FROM meta"))
            if meta.get("registry") != self.registry.fingerprint:
                raise _Unusable("built for other artifact kinds")
            conn.execute("PRAGMA synchronous = NORMAL")
            # A fresh connection per use starts with an empty page cache; mapped pages are
            # read without a copy, which is most of the cost of a refresh's one full scan.
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            self.meta = meta
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise _Unusable(f"unreadable ({exc})") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _ensure_dir(self) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            ignore = self.dir / ".gitignore"
            if not ignore.exists():
                # The cache is per machine; keep it out of git even where `moss init` never ran.
                with open(ignore, "x", encoding="utf-8") as handle:
                    handle.write("# moss-files search cache: per machine, safe to delete\n*\n")
        except FileExistsError:
            pass
        except OSError as exc:
            raise CacheError(f"cannot create the cache folder: {exc.strerror}", code="NOT_WRITABLE", path=self.dir) from None

    # ----------------------------------------------------------------- building

    def _rebuild(self, *, reason: str | None, only_if_unusable: bool) -> RefreshReport | None:
        self._ensure_dir()
        with _flock(self.dir / BUILD_LOCK_NAME, exclusive=True):
            if only_if_unusable and self._usable():
                return None  # another process rebuilt it while this one waited
            temp = self.dir / f"{DB_NAME}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
            try:
                report = self._build(temp, reason)
                with _flock(self.dir / LOCK_NAME, exclusive=True):
                    os.replace(temp, self.path)
                    for suffix in ("-wal", "-shm"):
                        Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            except OSError as exc:
                raise _not_writable(exc, self.dir) or CacheError(f"cannot swap in the rebuilt index: {exc.strerror}", path=self.path) from None
            finally:
                for leftover in (temp, Path(f"{temp}-journal")):
                    try:
                        leftover.unlink(missing_ok=True)
                    except OSError:
                        pass  # a read-only folder holds no leftover of ours either
        if reason is not None:
            self.notify(_rebuild_message(reason))
        self.last_refresh = report
        return report

    def _usable(self) -> bool:
        if not self.path.exists():
            return False
        with _flock(self.dir / LOCK_NAME, exclusive=False):
            try:
                conn = self._connect()
            except _Unusable:
                return False
            try:
                conn.execute("SELECT count(*) FROM files").fetchone()
                return True
            except sqlite3.DatabaseError:
                return False
            finally:
                conn.close()

    def _build(self, temp: Path, reason: str | None) -> RefreshReport:
        try:
            conn = sqlite3.connect(temp, isolation_level=None)
            conn.execute("PRAGMA user_version")  # SQLite creates the file on first use
        except sqlite3.Error as exc:
            raise _not_writable(exc, self.dir) or CacheError(f"cannot create the search index: {exc}", path=temp) from None
        try:
            for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -65536", "temp_store = MEMORY"):
                conn.execute(f"PRAGMA {pragma}")
            report = self._fill(conn, reason)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("PRAGMA journal_mode = WAL")
            return report
        except sqlite3.Error as exc:
            raise _not_writable(exc, self.dir) or CacheError(f"building the search index failed: {exc}", path=temp) from None
        finally:
            conn.close()

    def _fill(self, conn: sqlite3.Connection, reason: str | None) -> RefreshReport:
        """Create the tables in an empty database and index every file into them."""
        started = time.perf_counter()
        busy = [runnable_elsewhere()]  # read again after the walk: see build_workers
        conn.executescript(TABLES)
        # FTS5 writes its pending terms out as a new segment each time they pass `hashsize`
        # (1 MB by default), and merges those segments as they pile up: a full build with a
        # bigger buffer writes and merges a few large segments instead (a quarter less of its
        # CPU at 100,000 files). The setting is stored with the table; later refreshes write
        # at most one transaction's terms either way.
        try:
            conn.execute("INSERT INTO items_fts(items_fts, rank) VALUES ('hashsize', ?)", (FTS_HASH_BYTES,))
        except sqlite3.OperationalError:
            pass  # an SQLite without the setting builds with its default buffer
        # Listed without a stat each: every file's stat is taken when it is read, and that is
        # the signature stored with what was read.
        tree = walk(self.root, self.registry, stat=False)
        paths = sorted(tree.paths)
        batch = _Batch(self.registry, 0)
        conn.execute("BEGIN")
        busy.append(runnable_elsewhere())
        workers = self.build_workers if self.build_workers is not None else build_workers(len(paths), busy)
        for chunk, rows in zip(range(0, len(paths), BATCH_FILES), _extracted_chunks(self.root, self.registry, paths, workers), strict=True):
            batch.add_rows(rows)
            batch.write(conn)
            done_files = min(chunk + BATCH_FILES, len(paths))
            if self.progress is not None and done_files < len(paths):
                self.progress(done_files, len(paths))
        for statement in INDEXES.split(";"):
            if statement.strip():
                conn.execute(statement)
        meta = [("registry", self.registry.fingerprint), ("schema", str(SCHEMA_VERSION))]
        definite = {path: sig for path, _source, sig in batch.stored if sig is not None}
        if len(definite) == len(batch.stored):  # no racy signature: the index holds exactly this tree
            held = [path for path in tree.paths if path in definite]  # in walk order
            meta.append(("tree", Tree(held, [definite[path] for path in held]).fingerprint()))
        conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
        conn.execute("COMMIT")
        if self.progress is not None:
            self.progress(len(paths), len(paths))
        return RefreshReport(
            files=len(batch.stored),
            added=len(batch.stored),
            problems=batch.problem_files,
            rebuilt=True,
            reason=reason,
            seconds=time.perf_counter() - started,
        )


def _matched_trees(value: str | None) -> dict[str, str]:
    """The trees the index matches exactly, from the meta row `tree`: {folder: fingerprint},
    the whole tree's under "". The row holds the whole tree's fingerprint alone (as every
    version of this index writes it), or with folders' trees as lines `folder<TAB>fingerprint`
    (the whole tree's folder empty). Every write of the index deletes the row, so each tree
    in it is one the index still matches; a version that knows only the whole tree finds the
    lines no fingerprint of its, compares file by file, and deletes the row as it writes."""
    if not value:
        return {}
    if "\t" not in value:
        return {"": value}
    return dict(line.split("\t", 1) for line in value.split("\n") if "\t" in line)


def _tree_value(trees: dict[str, str]) -> str:
    """The meta row `tree` for these trees (see `_matched_trees`)."""
    kept = {folder: print_ for folder, print_ in trees.items() if "\t" not in folder and "\n" not in folder}
    if set(kept) <= {""}:
        return kept.get("", "")
    return "\n".join(f"{folder}\t{print_}" for folder, print_ in sorted(kept.items()))


def _rebuild_message(reason: str) -> str:
    if reason == "missing":
        return "search index built"
    return f"search index was {reason}; rebuilt it"


# --------------------------------------------------------------------------- an open index


class View:
    """An open, locked connection to the index, for one operation."""

    def __init__(self, index: SearchIndex, conn: sqlite3.Connection) -> None:
        self.index = index
        self.conn = conn
        self.registry = index.registry
        self.last_ranking: str | None = None  # how the last text search ranked: "pool" or "full"

    # ----------------------------------------------------------------- refresh

    def refresh(self, paths: Collection[str] | None = None, *, scope: str | None = None) -> RefreshReport:
        """Bring the index in step with the files; cheap when nothing changed. With `paths`,
        only those files (relative to the root) are looked at: each one's rows are made to
        match the file, or removed when it is gone or no source owns it any more. With
        `scope` (a folder relative to the root), only the files below it: those the walk
        lists there, and those the index holds there; the report's `files` then counts the
        files below it (counting the whole table's would cost its caller more than the walk
        of a small folder)."""
        started = time.perf_counter()
        root = self.index.root
        walked = paths is None  # a walk (of every folder, or of the scope's) counts the files
        matched = _matched_trees(self.index.meta.get("tree"))
        if paths is None and scope is not None:
            tree = walk(root, self.registry, under=scope)
            fingerprint = tree.fingerprint()
            if fingerprint == matched.get(scope):
                return RefreshReport(files=len(tree.paths), seconds=time.perf_counter() - started)
            disk = tree.signatures()
            version = self._data_version()
            below = {"low": f"{scope}/", "high": f"{scope}0"}  # '0' follows '/': every path below
            cached: dict[str, Signature] = dict(self.conn.execute("SELECT path, sig FROM files WHERE path > :low AND path < :high", below))
        elif paths is None:
            tree = walk(root, self.registry)
            fingerprint = tree.fingerprint()
            if fingerprint == matched.get(""):
                return RefreshReport(files=len(tree.paths), seconds=time.perf_counter() - started)
            disk = tree.signatures()
            version = self._data_version()
            cached = dict(self.conn.execute("SELECT path, sig FROM files"))
        else:
            fingerprint = None
            version = None
            disk = stat_paths(root, self.registry, paths)
            cached = self._cached_signatures(paths)
        plan = plan_refresh(disk, cached)
        if plan.empty:
            if fingerprint is not None:
                self._remember_tree(fingerprint, scope or "", since=version)
            return RefreshReport(files=len(disk) if walked else self._file_count(), seconds=time.perf_counter() - started)
        stored = self._stored(plan.changed)
        reads: dict[str, FileRead] = {}
        for relpath in (*plan.added, *plan.changed):
            read = read_file(root, relpath)
            if read is not None:
                reads[relpath] = read
        now_ns = time.time_ns()
        work = [path for path, read in reads.items() if self._needs_write(path, read, stored.get(path), now_ns)]
        gone = [*plan.removed, *(path for path in (*plan.added, *plan.changed) if path not in reads and path in cached)]
        if not work and not gone:
            files = len(disk) if walked else self._file_count()
            return RefreshReport(files=files, touched=len(plan.changed), seconds=time.perf_counter() - started)
        report = self._apply(work, gone, reads, len(disk), started)
        if fingerprint is not None:
            self._remember_if_matched(fingerprint, scope or "", disk, (*plan.added, *plan.changed, *plan.removed), since=version)
        return report if walked else report._replace(files=self._file_count())

    def _remember_if_matched(self, fingerprint: str, scope: str, disk: Mapping[str, Signature], differed: Sequence[str], *, since: int | None) -> None:
        """After this refresh's write, remember the walked tree when the index now holds
        exactly its signatures: every path that differed is stored with the walked signature
        (or gone from both), as every other path was when compared. Then the next walk of an
        unchanged tree is one fingerprint, not a comparison of every file. A file stored
        racy (no signature) or read anew because it changed after the walk does not match,
        and the tree is not remembered."""
        if self._cached_signatures(differed) == {path: disk[path] for path in differed if path in disk}:
            self._remember_tree(fingerprint, scope, since=since)

    def _cached_signatures(self, paths: Collection[str]) -> dict[str, Signature]:
        """The stored signatures of those of `paths` the index holds."""
        out: dict[str, Signature] = {}
        wanted = list(paths)
        for start in range(0, len(wanted), 500):  # SQLite's bound-parameter limit, with room
            chunk = wanted[start : start + 500]
            out.update(self.conn.execute(f"SELECT path, sig FROM files WHERE path IN ({','.join('?' * len(chunk))})", chunk))
        return out

    def _file_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM files").fetchone()[0])

    def _data_version(self) -> int:
        """SQLite's count of other connections' commits to the index, as this one sees it."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def _remember_tree(self, fingerprint: str, scope: str = "", *, since: int | None = None) -> None:
        """Store the fingerprint of the tree (or of the folder `scope`'s tree) the index now
        matches exactly, if no other writer is busy (it only saves the next refresh a
        comparison; it is never needed). With `since` (`_data_version` before this refresh
        read the stored signatures), only if no other connection has written the index since:
        another writer's rows, stored from its own walk, may be older than this walk's."""
        self.conn.execute("PRAGMA busy_timeout = 0")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            if since is not None and self._data_version() != since:
                self.conn.execute("ROLLBACK")
                return
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'tree'").fetchone()
            value = _tree_value({**_matched_trees(row[0] if row else None), scope: fingerprint})
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('tree', ?)", (value,))
            self.conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorname", None) != "SQLITE_BUSY" and _not_writable(exc, self.index.path) is None:
                raise
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def _stored(self, paths: Sequence[str]) -> dict[str, _Stored]:
        out: dict[str, _Stored] = {}
        for path in paths:
            row = self.conn.execute("SELECT sig, mtime_ns, digest, source FROM files WHERE path = ?", (path,)).fetchone()
            if row is not None:
                out[path] = _Stored(*row)
        return out

    def _same_rows(self, path: str, read: FileRead, stored: _Stored) -> bool:
        """Whether the rows stored for `path` are what reading `read` would give."""
        source = self.registry.source_for(path)
        return (
            source is not None
            and source.name == stored.source
            and read.problem is None
            and read.digest == stored.digest
            and (not source.uses_mtime or read.stat[0] == stored.mtime_ns)
        )

    def _needs_write(self, path: str, read: FileRead, stored: _Stored | None, now_ns: int) -> bool:
        if stored is None or not self._same_rows(path, read, stored):
            return True
        return stored_signature(read.stat, now_ns) != stored.sig

    def _apply(self, work: list[str], gone: list[str], reads: dict[str, FileRead], files: int, started: float) -> RefreshReport:
        conn = self.conn
        root = self.index.root
        gone = list(gone)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM meta WHERE key = 'tree'")  # the index is leaving that tree (and its folders' trees)
            stored = self._stored(work)
            batch = _Batch(self.registry, conn.execute("SELECT coalesce(max(rowid), 0) FROM items").fetchone()[0])
            touched = changed = added = 0
            rewrite: list[str] = []
            for path in work:
                read = reads[path]
                # Another refresh may have stored a newer state meanwhile: never go back.
                try:
                    st = os.lstat(f"{root}/{path}")
                    current = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
                except FileNotFoundError:
                    gone.append(path)
                    continue
                if current != read.stat:
                    fresh = read_file(root, path)
                    if fresh is None:
                        gone.append(path)
                        continue
                    read = fresh
                now_ns = time.time_ns()
                old = stored.get(path)
                if old is not None and not self._needs_write(path, read, old, now_ns):
                    continue
                source = self.registry.source_for(path)
                if source is None:
                    continue
                if old is not None and self._same_rows(path, read, old):
                    conn.execute("UPDATE files SET sig = ? WHERE path = ?", (stored_signature(read.stat, now_ns), path))
                    touched += 1
                    continue
                rewrite.append(path)
                if old is None:
                    added += 1
                else:
                    changed += 1
                batch.add(read, source, now_ns)
            _delete_files(conn, rewrite)
            removed = _delete_files(conn, gone)
            batch.write(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return RefreshReport(
            files=files,
            added=added,
            changed=changed,
            removed=removed,
            touched=touched,
            problems=batch.problem_files,
            seconds=time.perf_counter() - started,
        )

    # ----------------------------------------------------------------- queries

    def search(
        self,
        query: ParsedQuery,
        *,
        now: datetime,
        kinds: Sequence[str] = (),
        limit: int = 20,
        offset: int = 0,
        match_all: bool = False,
        raw: str | None = None,
        pool: int | None = None,
    ) -> Found:
        """Items matching the query, best first (newest first when it has no text). A text
        query without filters ranks a pool of its matches of best bm25 first (see
        `_ranked_from_pool`): `pool` of them (None: as many as its page needs, see RANK_POOL;
        0: none, every match is ranked; the answer is the same). `last_ranking` says which
        ranking answered."""
        from moss_files.index.query import FIELD_WEIGHTS, RECENCY_DAYS, RECENCY_MAX_BOOST, exclusion_expression, fts_expression

        where, params = self._where(query, kinds, now)
        expression = raw if raw is not None else fts_expression(query, match_all=match_all)
        weights = ", ".join(str(FIELD_WEIGHTS[name]) for name in COLUMNS)
        # One more row than asked tells whether there are more (no count of every match:
        # counting costs as much again on a common term). FTS5 is scanned first (CROSS JOIN),
        # then each match's row is joined for the filters and the recency boost.
        if expression:
            boost = f"(1.0 + {RECENCY_MAX_BOOST} * coalesce(max(0.0, min(1.0, 1.0 - (? - i.ts) / {86400.0 * RECENCY_DAYS})), 0.0))"
            if pool is None:
                pool = max(RANK_POOL, RANK_POOL_PER_ROW * (offset + limit + 1))
                pool = pool if pool <= RANK_POOL_MAX else 0  # a deep page: ranking every match costs no more
            # A filter drops matches from the pool as well, leaving it too few to vouch for a page.
            pooled = pool > 0 and not query.filters and not kinds
            try:
                found = self._ranked_from_pool(expression, weights, boost, where, params, now.timestamp(), limit, offset, pool) if pooled else None
            except sqlite3.OperationalError as exc:
                if raw is not None and getattr(exc, "sqlite_errorname", None) == "SQLITE_ERROR":
                    raise InvalidRequest(f"invalid FTS5 query: {exc}", hint="drop --raw to have the text escaped") from None
                raise
            if found is not None:
                self.last_ranking = "pool"
                return found
            self.last_ranking = "full"
            sql = (
                f"SELECT {_ITEM_COLUMNS}, -bm25(items_fts, {weights}) * {boost} AS score "
                f"FROM items_fts CROSS JOIN items i ON i.rowid = items_fts.rowid "
                f"WHERE items_fts MATCH ?{where} "
                f"ORDER BY score DESC, i.date DESC, i.id, i.path, i.anchor LIMIT ? OFFSET ?"
            )
            args: list[Any] = [now.timestamp(), expression, *params, limit + 1, offset]
        else:
            excluded = exclusion_expression(query)
            if excluded:
                where += " AND i.rowid NOT IN (SELECT rowid FROM items_fts WHERE items_fts MATCH ?)"
                params.append(excluded)
            sql = (
                f"SELECT {_ITEM_COLUMNS}, 0.0 AS score FROM items i WHERE 1{where} "
                f"ORDER BY i.date IS NULL, i.date DESC, i.id, i.path, i.anchor LIMIT ? OFFSET ?"
            )
            args = [*params, limit + 1, offset]
        try:
            rows = self.conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            if raw is not None and getattr(exc, "sqlite_errorname", None) == "SQLITE_ERROR":
                raise InvalidRequest(f"invalid FTS5 query: {exc}", hint="drop --raw to have the text escaped") from None
            raise
        return Found(tuple(_hit(row) for row in rows[:limit]), len(rows) > limit)

    def _ranked_from_pool(
        self, expression: str, weights: str, boost: str, where: str, params: list[Any], now: float, limit: int, offset: int, pool: int
    ) -> Found | None:
        """The page `search` gives for a text query, ranked from the matches of best bm25
        alone (the pool): None when the pool cannot vouch for the page (the full ranking
        decides then).

        The full ranking computes bm25 for every match (FTS5 has no top-k), then joins each
        match's row for the filters and the recency boost and sorts them all: on a common term
        (a third of 100,000 items) the join and sort cost as much as bm25 itself. The score is
        bm25 times a boost between 1 and 1 + RECENCY_MAX_BOOST, so a match outside the pool
        (bm25 at most the pool's least, `floor`) scores at most `floor` times the largest
        boost. Ranking the pool alone, with the very expressions, filters and order of the
        full ranking, gives the first offset + limit + 1 rows of the full ranking whenever
        the last of them scores above that bound: every row outside the pool then ranks
        below it (ties included, as they score the same), and the rows above it are all in
        the pool. The pool's bm25 values go back to SQLite as bound doubles, so every score
        is the very number the full ranking computes."""
        from moss_files.index.query import RECENCY_MAX_BOOST

        wanted = offset + limit + 1
        if 2 * pool + len(params) + 2 > self.conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER):
            return None  # more than this SQLite binds at once
        top = self.conn.execute(
            f"SELECT rowid, -bm25(items_fts, {weights}) AS b FROM items_fts WHERE items_fts MATCH ? ORDER BY b DESC LIMIT ?", (expression, pool)
        ).fetchall()
        if not top:
            return Found((), False)
        rows = self.conn.execute(
            f"WITH pool(id, b) AS (VALUES {', '.join(['(?, ?)'] * len(top))}) "
            f"SELECT {_ITEM_COLUMNS}, pool.b * {boost} AS score FROM pool CROSS JOIN items i ON i.rowid = pool.id "
            f"WHERE 1{where} ORDER BY score DESC, i.date DESC, i.id, i.path, i.anchor LIMIT ?",
            [*(value for row in top for value in row), now, *params, wanted],
        ).fetchall()
        if len(top) == pool:  # more matches may lie outside the pool
            floor = top[-1][1]
            # Above the largest boost by a margin, so no rounding in SQLite's arithmetic can
            # make a score outside the pool reach the bound.
            bound = max(floor, floor * (1.0 + RECENCY_MAX_BOOST) * (1.0 + 1e-9))
            if len(rows) < wanted or not rows[-1][-1] > bound:
                return None
        page = rows[offset:]
        return Found(tuple(_hit(row) for row in page[:limit]), len(page) > limit)

    def _where(self, query: ParsedQuery, kinds: Sequence[str], now: datetime) -> tuple[str, list[Any]]:
        from moss_files.index.query import DATE_FIELDS, Filter

        clauses: list[str] = []
        params: list[Any] = []
        filters = list(query.filters)
        if kinds:
            filters.append(Filter("kind", tuple(k.casefold() for k in kinds)))
        for flt in filters:
            clause, values = self._clause(flt, now)
            clauses.append(f"NOT ({clause})" if flt.negated and flt.field in DATE_FIELDS else clause)
            params.extend(values)
        if not any(flt.field == "status" for flt in filters):
            clauses.append("(i.status IS NULL OR i.status != 'deleted')")
        return "".join(f" AND {clause}" for clause in clauses), params

    def _clause(self, flt: Filter, now: datetime) -> tuple[str, list[Any]]:
        from moss_files.index.query import DATE_FIELDS, date_bounds

        values = list(flt.values)
        if flt.field in DATE_FIELDS:
            parts: list[str] = []
            params: list[Any] = []
            for low, below in date_bounds(flt, now):
                bounds = []
                if low is not None:
                    bounds.append("i.date >= ?")
                    params.append(low)
                if below is not None:
                    bounds.append("i.date < ?")
                    params.append(below)
                parts.append("(" + " AND ".join(bounds or ["1"]) + ")")
            return "(i.date IS NOT NULL AND (" + " OR ".join(parts) + "))", params
        marks = ",".join("?" * len(values))
        if flt.field == "kind":
            return (f"i.kind {'NOT ' if flt.negated else ''}IN ({marks})", self._kind_names(values))
        if flt.field == "status":
            if flt.negated:
                return (f"(i.status IS NULL OR i.status NOT IN ({marks}))", values)
            return (f"i.status IN ({marks})", values)
        if flt.field == "id":
            return (f"i.id COLLATE NOCASE {'NOT ' if flt.negated else ''}IN ({marks})", values)
        exists = f"EXISTS (SELECT 1 FROM facets f WHERE f.item = i.rowid AND f.field = ? AND f.value IN ({marks}))"
        return (f"NOT {exists}" if flt.negated else exists, [flt.field, *values])

    def _kind_names(self, values: Sequence[str]) -> list[str]:
        """Kind names as the index stores them: casefolded, a plural (`insights`, as LoopFlow
        and its spec write scopes) made singular when the singular is a kind."""
        kinds = set(self.registry.kinds)
        folded = [value.casefold() for value in values]
        return [v if v in kinds or not v.endswith("s") or v[:-1] not in kinds else v[:-1] for v in folded]

    def lookup(self, ids: Sequence[str]) -> dict[str, list[Hit]]:
        """The items carrying each id (an exact match preferred over one ignoring case); for an
        id no item carries, the items `moss migrate` brought over from an item of that id (their
        `source_id`)."""
        out: dict[str, list[Hit]] = {}
        for wanted in ids:
            rows = self.conn.execute(f"SELECT {_ITEM_COLUMNS} FROM items i WHERE i.id = ? COLLATE NOCASE ORDER BY i.path, i.anchor", (wanted,)).fetchall()
            if not rows:
                rows = self.conn.execute(
                    f"SELECT {_ITEM_COLUMNS} FROM facets f JOIN items i ON i.rowid = f.item WHERE f.field = ? AND f.value = ? ORDER BY i.path, i.anchor",
                    (SOURCE_ID_FACET, wanted.casefold()),
                ).fetchall()
            hits = [_hit(row) for row in rows]
            exact = [hit for hit in hits if hit.id == wanted]
            out[wanted] = exact or hits
        return out

    def links_of(self, hit: Hit) -> list[str]:
        """The ids an item links to, as written in its file (casefolded)."""
        rows = self.conn.execute(
            "SELECT f.value FROM facets f JOIN items i ON i.rowid = f.item WHERE i.path = ? AND i.anchor = ? AND f.field = 'link' ORDER BY f.rowid",
            (hit.path, hit.anchor),
        )
        return [row[0] for row in rows]

    def around(self, date: str, *, before: int, after: int, kinds: Sequence[str] = (), anchor: Hit | None = None) -> tuple[list[Hit], list[Hit]]:
        """Items dated just before and after `date` (or after an item, excluding it), oldest first."""
        kind_clause, kind_params = "", []
        if kinds:
            kind_clause = f" AND i.kind IN ({','.join('?' * len(kinds))})"
            kind_params = self._kind_names(kinds)
        base = f"SELECT {_ITEM_COLUMNS} FROM items i WHERE i.date IS NOT NULL AND (i.status IS NULL OR i.status != 'deleted'){kind_clause}"
        if anchor is not None:
            key = (anchor.date, anchor.kind, anchor.id, anchor.path, anchor.anchor)
            earlier = f"{base} AND (i.date, i.kind, i.id, i.path, i.anchor) < (?, ?, ?, ?, ?)"
            later = f"{base} AND (i.date, i.kind, i.id, i.path, i.anchor) > (?, ?, ?, ?, ?)"
            early_params: list[Any] = [*kind_params, *key]
            late_params: list[Any] = [*kind_params, *key]
        else:
            earlier, later = f"{base} AND i.date < ?", f"{base} AND i.date >= ?"
            early_params = [*kind_params, date]
            late_params = [*kind_params, date]
        order = "i.date, i.kind, i.id, i.path, i.anchor"
        desc = ", ".join(f"{column} DESC" for column in order.split(", "))
        rows_before = self.conn.execute(f"{earlier} ORDER BY {desc} LIMIT ?", [*early_params, before]).fetchall() if before > 0 else []
        rows_after = self.conn.execute(f"{later} ORDER BY {order} LIMIT ?", [*late_params, after]).fetchall() if after > 0 else []
        return [_hit(row) for row in reversed(rows_before)], [_hit(row) for row in rows_after]

    def record(self, hit: Hit) -> dict[str, Any] | None:
        """The full record of an item, read from its file now (None when it is gone).

        Raises MossError when the file can no longer be read as its kind.
        """
        row = self.conn.execute("SELECT source FROM files WHERE path = ?", (hit.path,)).fetchone()
        source = self.registry.source(row[0]) if row else None
        if source is None:
            return None
        read = read_file(self.index.root, hit.path)
        if read is None:
            return None
        if read.problem is not None:
            raise MossError(read.problem.message, code=read.problem.code, path=hit.path)
        return source.record(FileInput(hit.path, read.data, read.stat[0]), hit.anchor)

    # ----------------------------------------------------------------- summaries

    def rows_of(self, kinds: Sequence[str]) -> list[tuple[str, str, str, str, str]]:
        """(path, anchor, kind, id, file digest) of every item of these kinds, by path."""
        marks = ",".join("?" * len(kinds))
        query = (
            f"SELECT i.path, i.anchor, i.kind, i.id, f.digest FROM items i JOIN files f ON f.path = i.path WHERE i.kind IN ({marks}) ORDER BY i.path, i.anchor"
        )
        return [tuple(row) for row in self.conn.execute(query, list(kinds))]

    def set_summaries(self, rows: Sequence[tuple[str, str, str, str]]) -> int:
        """Store `(path, anchor, digest, summary)` as those items' one-line summaries, each only
        while its file still has that digest (a file changed since is left as its refresh made
        it). Returns how many were stored. Only the cache changes: never an artifact file."""
        stored = 0
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for path, anchor, digest, summary in rows:
                stored += self.conn.execute(
                    "UPDATE items SET summary = ? WHERE path = ? AND anchor = ? AND EXISTS (SELECT 1 FROM files WHERE path = ? AND digest = ?)",
                    (summary, path, anchor, path, digest),
                ).rowcount
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return stored

    # ----------------------------------------------------------------- status

    def problems(self) -> list[dict[str, Any]]:
        """Every file with problems: `{path, source, code, message, line, severity}` per problem."""
        out: list[dict[str, Any]] = []
        for path, source, problems in self.conn.execute("SELECT path, source, problems FROM files WHERE problems IS NOT NULL ORDER BY path"):
            for problem in _json().loads(problems):
                out.append({"path": path, "source": source, **problem})
        return out

    def problem_files(self) -> int:
        return self.conn.execute("SELECT count(*) FROM files WHERE problems IS NOT NULL").fetchone()[0]

    def counts(self, *, kind: str | None = None, status: str | None = None) -> dict[str, Any]:
        """Files and items in the index, items per kind (only items of `kind`/`status` if given)."""
        clauses = [(column, value) for column, value in (("kind", kind), ("status", status)) if value is not None]
        where = (" WHERE " + " AND ".join(f"{column} = ?" for column, _ in clauses)) if clauses else ""
        by_kind = dict(self.conn.execute(f"SELECT kind, count(*) FROM items{where} GROUP BY kind ORDER BY kind", [v for _, v in clauses]))
        return {
            "files": self.conn.execute("SELECT count(*) FROM files").fetchone()[0],
            "items": sum(by_kind.values()),
            "by_kind": by_kind,
        }

    def snapshot(self) -> dict[str, Any]:
        """Everything a search can see, independent of row numbers: for comparing two indexes."""
        items = self.conn.execute(
            "SELECT i.path, i.anchor, i.kind, i.id, i.line, i.title, i.summary, i.status, i.date, i.updated, i.ts, i.handle, "
            "f.id, f.title, f.tags, f.body, f.extra FROM items i JOIN items_fts f ON f.rowid = i.rowid ORDER BY i.path, i.anchor"
        ).fetchall()
        facets = self.conn.execute("SELECT i.path, i.anchor, f.field, f.value FROM facets f JOIN items i ON i.rowid = f.item ORDER BY 1, 2, 3, 4").fetchall()
        files = self.conn.execute("SELECT path, source, digest, problems FROM files ORDER BY path").fetchall()
        return {"items": items, "facets": facets, "files": files}


def _hit(row: Sequence[Any]) -> Hit:
    return Hit(
        kind=row[1],
        id=row[2],
        path=row[3],
        anchor=row[4],
        line=row[5],
        title=row[6],
        summary=row[7],
        status=row[8],
        date=row[9],
        updated=row[10],
        handle=row[11],
        score=float(row[12]) if len(row) > 12 else 0.0,
    )

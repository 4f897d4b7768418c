"""The capsule key cache: what each capsule file says its id, workspace, name and deleted state
are, remembered per machine so that a bulk writer (an import) need not parse every capsule to
know which ids and names are taken. Edge layer: owns one SQLite file,
`.moss/cache/capsule-keys.db` (git-ignored, derived, always safe to delete).

The files stay the truth. An entry is used only when the file is provably the one it was made
from: its ctime (which every change of a file moves) equals the stored signature, or, when the
signature was stored as racy (see `index.model.stored_signature`) or moved without a change,
its bytes hash to the stored digest and its mtime is the stored one (a capsule's missing times
derive from its mtime; its key does not today, and the mtime check keeps that safe). A file a
batched import just wrote is stored with its signature at once when the batch proves it holds
the batch's bytes (`FileBatch.written`: its staged inode and mtime, older than the journal);
its entry is then used while both its ctime and its mtime are the stored ones, since a write
within the ctime's clock tick still moves the mtime past the journal's (only a write that also
set the mtime back to the staged nanosecond, within that tick, would pass unseen). Anything else is parsed again, and an unreadable file is never
cached, so the caller sees its error every time. A cache that cannot be opened, read or written
is ignored: the answer is then the full parse's, only slower.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from moss_files.capsules.model import CapsuleKey
from moss_files.index.model import Signature, stored_signature

CACHE_FILE = Path(".moss") / "cache" / "capsule-keys.db"
VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys(
    path TEXT PRIMARY KEY,
    sig INTEGER,
    mtime_ns INTEGER NOT NULL,
    digest TEXT NOT NULL,
    id TEXT NOT NULL,
    workspace TEXT NOT NULL,
    name TEXT,
    deleted INTEGER NOT NULL
) WITHOUT ROWID;
"""


class Cached(NamedTuple):
    """One remembered file: its signature (None: racy, check the digest), mtime, digest, key.
    (A named tuple: `load` makes one per capsule file.)"""

    sig: Signature
    mtime_ns: int
    digest: str
    key: CapsuleKey


class Learned(NamedTuple):
    """A key to remember for the file at `relpath`: read from its bytes (`digest`) when it had
    the stat `(mtime_ns, ctime_ns)`, seen at `seen_ns` (a time taken before that stat; None:
    the `now_ns` of the save, taken before every stat of the batch). (A named tuple: an import
    makes one per file it writes.)"""

    relpath: str
    mtime_ns: int
    ctime_ns: int
    digest: str
    key: CapsuleKey
    seen_ns: int | None = None
    proven: bool = False  # the writer proved these bytes were written before `mtime_ns` was
    # last set, and that this mtime is older than any later write could give (see `usable`)


class KeyCache:
    """The key cache of one workspace root."""

    def __init__(self, root: Path) -> None:
        self.path = root / CACHE_FILE

    def load(self) -> dict[str, Cached]:
        """Every remembered entry by path relative to the capsules folder; empty when the
        cache is missing or unusable."""
        return {path: Cached(row[1], row[2], row[3], key_of(row)) for path, row in self.rows().items()}

    def rows(self) -> dict[str, Row]:
        """`load`'s entries as the table's rows (`Row`), by path: what `CapsuleStore.keys`
        reads, with a key made only for the files it finds (an object per row for 100,000
        rows is most of the cost of reading them)."""
        try:
            if not self.path.is_file():
                return {}
            with _connect(self.path) as conn:
                rows = conn.execute("SELECT path, sig, mtime_ns, digest, id, workspace, name, deleted FROM keys").fetchall()
        except (sqlite3.Error, OSError):
            return {}
        return {row[0]: row for row in rows}

    def save(self, learned: Iterable[Learned], gone: Iterable[str] = (), *, now_ns: int | None = None) -> None:
        """Remember `learned` (a racy stat is stored as racy: judged at each item's `seen_ns`,
        else at `now_ns`) and forget `gone`. Never raises:
        a cache that cannot be written only makes the next reader parse."""
        now = time.time_ns() if now_ns is None else now_ns
        rows = [
            (
                item.relpath,
                item.ctime_ns if item.proven else stored_signature((item.mtime_ns, item.ctime_ns, 0, 0), now if item.seen_ns is None else item.seen_ns),
                item.mtime_ns,
                item.digest,
                item.key.id,
                item.key.workspace_norm,
                item.key.name_norm,
                int(item.key.deleted),
            )
            for item in learned
        ]
        forgotten = [(path,) for path in gone]
        if not rows and not forgotten:
            return
        try:
            _ensure_folder(self.path.parent)
            with _connect(self.path) as conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("DELETE FROM keys WHERE path = ?", forgotten)
                conn.executemany("INSERT OR REPLACE INTO keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
                conn.execute("COMMIT")
        except (sqlite3.Error, OSError):
            self.drop()

    def drop(self) -> None:
        """Delete the cache file (an unusable cache is rebuilt by the next save)."""
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except OSError:
                pass


def _ensure_folder(folder: Path) -> None:
    """Make the cache folder, git-ignored by a `.gitignore` of `*` inside (as the search index
    makes it), so the cache stays out of git where `moss init` never ran."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with open(folder / ".gitignore", "x", encoding="utf-8") as handle:
            handle.write("# moss-files search cache: per machine, safe to delete\n*\n")
    except FileExistsError:
        pass


class _connect:
    """A connection to the cache file with its schema, closed on exit."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != VERSION:
                conn.execute("DROP TABLE IF EXISTS keys")
                conn.execute(f"PRAGMA user_version = {VERSION}")
            conn.execute(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        return conn

    def __exit__(self, *_exc: object) -> None:
        self.conn.close()


# One row of the table: path, sig, mtime_ns, digest, id, workspace, name, deleted (0 or 1).
Row = tuple[str, Signature, int, str, str, str, str | None, int]


def key_of(row: Row) -> CapsuleKey:
    """The capsule key a row holds."""
    return CapsuleKey(row[4], row[5], row[6], row[7] == 1, row[0])


def usable(entry: Row | None, ctime_ns: int, mtime_ns: int) -> bool:
    """Whether `entry` holds for a file whose ctime is `ctime_ns` and mtime `mtime_ns`,
    without reading it. The mtime matters for a `proven` entry, stored with a ctime taken
    within the racy window: a write in the same clock tick as that ctime leaves the ctime as
    it was but sets the mtime to that tick, later than the one stored. (For any other entry,
    an unchanged ctime implies an unchanged mtime.)"""
    return entry is not None and entry[1] is not None and entry[1] == ctime_ns and entry[2] == mtime_ns


def confirmed(entry: Row | None, mtime_ns: int, digest: str) -> bool:
    """Whether `entry` holds for a file read with this mtime and digest."""
    return entry is not None and entry[2] == mtime_ns and entry[3] == digest


def missing(cached: Mapping[str, object], present: Iterable[str]) -> set[str]:
    """The remembered paths that are no longer capsule files."""
    return set(cached) - set(present)

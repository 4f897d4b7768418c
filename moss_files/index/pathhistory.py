"""A derived, disposable record of which commits touched which paths below one folder of a
repository, so that a file's history as `git log --follow -- PATH` shows it is read without
walking the whole of git's history each time. Edge layer: one SQLite file (the workspace's
cache folder, beside the search index; git-ignored, safe to delete), filled from git through
`foundation.gitrepo`. It loads nothing of the search index.

What it keeps:
- `commits`: every commit reachable from the HEAD it was last brought up to, with its parents,
  the fields a version shows, and `seq`, its place in git's walk from that HEAD (ascending:
  the order `git log` shows; NULL for a commit no longer reachable);
- `changes`: for each commit that is no merge, the paths below the folder it changed against
  its parent (renames as a delete and an add) with the new blob;
- `follows`: for a commit that adds a path, where `git log --follow` goes on from there (git's
  own answer, with its rename and copy detection, asked once);
- `derived`: what a caller derived from a blob at a path (capsule history: the capsule's id).

A commit's changes depend only on its id and its parents, so they never go stale; what depends
on HEAD is the walk. On a new HEAD that descends from the last one by a single line of commits
(each with one parent, the usual commit), git's walk is exactly those commits then the old
walk, so they are put in front. Anything else (a merge, a rebase, a reset, a pull of a branch,
a changed shallow boundary) reads the walk again in full (`git log`, a fraction of a second at
50,000 commits) and diffs only the commits never seen, or seen with other parents.

Each update is one SQLite transaction begun with a write lock: a second process waits and then
finds the work done; a process killed halfway leaves the record as it was before (SQLite rolls
the transaction back); the HEAD a record is complete for is written in the same transaction as
the record. A repository whose parents can change under the same commit ids (`git replace`)
is not recorded at all: `Unavailable`, and the caller asks git.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from moss_files.foundation import fs, gitrepo
from moss_files.foundation.errors import MossError

SCHEMA_VERSION = 1
DB_NAME = "history.db"
BUSY_TIMEOUT_S = 120.0  # a first build of a long history holds the write lock for seconds
_BEFORE_ALL = -(2**62)
_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_CHUNK = 500  # ids per `IN (...)`: below SQLite's oldest limit on parameters

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE commits(
    id INTEGER PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    parents TEXT NOT NULL,
    seq INTEGER,
    date TEXT NOT NULL,
    author TEXT NOT NULL,
    email TEXT NOT NULL,
    summary TEXT NOT NULL
);
CREATE INDEX commits_seq ON commits(seq);
CREATE TABLE changes(path TEXT NOT NULL, commit_id INTEGER NOT NULL, status TEXT NOT NULL, blob TEXT, mode TEXT NOT NULL, PRIMARY KEY(path, commit_id)) WITHOUT ROWID;
CREATE INDEX changes_commit ON changes(commit_id);
CREATE TABLE follows(commit_id INTEGER NOT NULL, path TEXT NOT NULL, source TEXT, PRIMARY KEY(commit_id, path)) WITHOUT ROWID;
CREATE TABLE derived(kind TEXT NOT NULL, blob TEXT NOT NULL, path TEXT NOT NULL, value TEXT, PRIMARY KEY(kind, blob, path)) WITHOUT ROWID;
"""


class Unavailable(Exception):
    """The record cannot answer this question (a path outside its folder, replacement refs, an
    unwritable or unusable cache): ask git instead. Not a MossError: never shown to a user."""


@dataclass(frozen=True, slots=True)
class Touch:
    """One version in a file's history: the commit (as `gitrepo.Version`) and the blob it left
    at the path (None when the commit removed the file from that path), with its mode."""

    version: gitrepo.Version
    blob: str | None
    mode: str


@dataclass(frozen=True, slots=True)
class Step:
    """A commit that changed a path, as the walk meets it (pure input of `follow`)."""

    seq: int
    commit_id: int
    status: str


def follow(relpath: str, touches: Callable[[str, int], list[Step]], source_of: Callable[[Step, str], str | None]) -> Iterator[tuple[Step, str]]:
    """Replay of `git log --follow -- relpath` over a recorded walk: each (step, path) in the
    order git shows them. `touches(path, after)` gives the steps that changed `path` later in
    the walk than `after`; at a step that adds the path, `source_of` says where git goes on
    (a rename's or copy's source), and from there on the walk follows that path, as git's one
    global pathspec does. Pure: the record is read through the two callables."""
    path, after = relpath, _BEFORE_ALL
    while True:
        switched = False
        for step in touches(path, after):
            yield step, path
            if step.status == "A":
                source = source_of(step, path)
                if source is not None:
                    path, after, switched = source, step.seq, True
                    break
        if not switched:
            return


class PathHistory:
    """The record of one repository's history below the folder `under` (relative to the
    work tree), kept in `folder`/history.db."""

    def __init__(self, repo: gitrepo.Repo, folder: Path, under: str) -> None:
        self.repo = repo
        self.folder = Path(folder)
        self.path = self.folder / DB_NAME
        under = under.strip("/")
        self.under = "" if under == "." else under  # "": the whole repository

    # ----------------------------------------------------------------- questions

    def history(self, relpath: str, *, limit: int | None = None, show_root: bool = True) -> list[Touch]:
        """The versions of `relpath` as `git log --follow -- relpath` at HEAD lists them, newest
        first, at most `limit`; without `show_root` (git's `log.showRoot` set false), leaving
        out commits without parents as git does. Brings the record up to HEAD first. Raises
        Unavailable."""
        if not self._inside(relpath):
            raise Unavailable(f"{relpath} is outside {self.under}")
        with self._connection() as conn:
            head = self._bring_up_to_head(conn)
            if head is None:
                return []

            shown: dict[tuple[int, str], Touch] = {}

            def touches(path: str, after: int) -> list[Step]:
                if not self._inside(path):
                    raise Unavailable(f"git follows {relpath} to {path}, outside {self.under}")
                rows = conn.execute(
                    "SELECT c.seq, c.id, ch.status, c.hash, c.date, c.author, c.email, c.summary, ch.blob, ch.mode"
                    " FROM changes ch JOIN commits c ON c.id = ch.commit_id WHERE ch.path = ? AND c.seq > ?"
                    f"{'' if show_root else ' AND c.parents != ?'} ORDER BY c.seq",
                    (path, after) if show_root else (path, after, ""),
                )
                steps = []
                for seq, commit_id, status, commit, date, author, email, summary, blob, mode in rows:
                    steps.append(Step(seq, commit_id, status))
                    shown[(commit_id, path)] = Touch(gitrepo.Version(commit, date, author, email, summary, path), blob, mode)
                return steps

            found: list[Touch] = []
            for step, path in follow(relpath, touches, lambda step, path: self._source(conn, step, path)):
                found.append(shown[(step.commit_id, path)])
                if limit is not None and len(found) >= limit:
                    break
            return found

    def derived(self, kind: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], str | None]:
        """What `remember` kept of `kind` for these (blob, path) keys; a key never kept is left
        out. `kind` names the derivation and its version: a new way of deriving, a new kind."""
        with self._connection() as conn:
            wanted = set(keys)
            blobs = sorted({blob for blob, _ in wanted})
            found: dict[tuple[str, str], str | None] = {}
            for start in range(0, len(blobs), _CHUNK):
                chunk = blobs[start : start + _CHUNK]
                rows = conn.execute(f"SELECT blob, path, value FROM derived WHERE kind = ? AND blob IN ({','.join('?' * len(chunk))})", [kind, *chunk])
                found.update(((blob, path), value) for blob, path, value in rows if (blob, path) in wanted)
            return found

    def remember(self, kind: str, values: dict[tuple[str, str], str | None]) -> None:
        """Keep what a caller derived (`kind`) from each (blob, path): a function of the two alone."""
        if not values:
            return
        with self._connection() as conn, _transaction(conn):
            conn.executemany("INSERT OR REPLACE INTO derived(kind, blob, path, value) VALUES (?, ?, ?, ?)", [(kind, b, p, v) for (b, p), v in values.items()])

    def bring_up_to_date(self) -> str | None:
        """Bring the record up to HEAD (the first time: read the whole history). Returns the
        HEAD commit, None on an unborn branch. Raises Unavailable."""
        with self._connection() as conn:
            return self._bring_up_to_head(conn)

    # ----------------------------------------------------------------- reading

    def _inside(self, relpath: str) -> bool:
        return not self.under or relpath.startswith(f"{self.under}/")

    def _source(self, conn: sqlite3.Connection, step: Step, path: str) -> str | None:
        """Where `git log --follow` goes on from `path`, added at `step`: asked of git once, kept."""
        row = conn.execute("SELECT source FROM follows WHERE commit_id = ? AND path = ?", (step.commit_id, path)).fetchone()
        if row is not None:
            return str(row[0]) if row[0] is not None else None
        commit, parents = conn.execute("SELECT hash, parents FROM commits WHERE id = ?", (step.commit_id,)).fetchone()
        # A root (or a shallow clone's boundary) has nothing to be renamed from: no need to ask.
        source = gitrepo.follow_source(self.repo, commit, path) if parents else None
        with _transaction(conn):
            conn.execute("INSERT OR REPLACE INTO follows(commit_id, path, source) VALUES (?, ?, ?)", (step.commit_id, path, source))
        return source

    # ----------------------------------------------------------------- keeping up

    def _bring_up_to_head(self, conn: sqlite3.Connection) -> str | None:
        signature = gitrepo.history_signature(self.repo)
        if signature is None:
            raise Unavailable("the repository has replacement refs (git replace)")
        head = gitrepo.head_commit(self.repo)
        if head is None:
            return None
        wanted = {"head": head, "signature": signature, "under": self.under}
        if _meta(conn) == wanted:
            return head
        with _transaction(conn):
            meta = _meta(conn)  # another process may have done it while this one waited
            if meta != wanted:
                if meta.get("under") != self.under:
                    for table in ("meta", "commits", "changes", "follows", "derived"):
                        conn.execute(f"DELETE FROM {table}")
                    meta = {}
                same_grafts = meta.get("signature") == signature
                if not (same_grafts and "head" in meta and self._extend(conn, meta["head"], head)):
                    self._rewalk(conn, head)
                conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list(wanted.items()))
        return head

    def _extend(self, conn: sqlite3.Connection, old: str, head: str) -> bool:
        """Put the commits since `old` in front of the walk when they are one line of descent
        from it (then git's walk from `head` is exactly them, then the walk from `old`).
        False when they are not, and nothing was changed."""
        try:
            new = gitrepo.walk_commits(self.repo, head, exclude=old)
        except MossError:
            return False  # `old` is gone (a rebase and a gc): read the whole walk
        if not new:
            return False  # HEAD went back (a reset): the walk from there is read anew
        for index, commit in enumerate(new):
            parent = new[index + 1].commit if index + 1 < len(new) else old
            if commit.parents != (parent,):
                return False
        first = conn.execute("SELECT min(seq) FROM commits WHERE seq IS NOT NULL").fetchone()[0]
        old_seq = conn.execute("SELECT seq FROM commits WHERE hash = ?", (old,)).fetchone()
        if first is None or old_seq is None or old_seq[0] != first:
            return False
        for start in range(0, len(new), _CHUNK):
            chunk = [c.commit for c in new[start : start + _CHUNK]]
            if conn.execute(f"SELECT 1 FROM commits WHERE hash IN ({','.join('?' * len(chunk))}) LIMIT 1", chunk).fetchone():
                return False  # seen before in another walk (a reset back and forth): read it all
        self._add(conn, [(first - len(new) + index, commit) for index, commit in enumerate(new)])
        return True

    def _rewalk(self, conn: sqlite3.Connection, head: str) -> None:
        """Read git's whole walk from `head`: every commit gets its place in it; commits never
        seen, or seen with other parents (a shallow clone deepened), are diffed."""
        walked = gitrepo.walk_commits(self.repo, head)
        known = {hash_: (id_, parents) for id_, hash_, parents in conn.execute("SELECT id, hash, parents FROM commits")}
        conn.execute("UPDATE commits SET seq = NULL WHERE seq IS NOT NULL")
        kept: list[tuple[int, int]] = []
        fresh: list[tuple[int, gitrepo.WalkedCommit]] = []
        for seq, commit in enumerate(walked):
            seen = known.get(commit.commit)
            if seen is not None and seen[1] == " ".join(commit.parents):
                kept.append((seq, seen[0]))
                continue
            if seen is not None:  # other parents than when it was diffed
                for table in ("changes", "follows"):
                    conn.execute(f"DELETE FROM {table} WHERE commit_id = ?", (seen[0],))
                conn.execute("DELETE FROM commits WHERE id = ?", (seen[0],))
            fresh.append((seq, commit))
        conn.executemany("UPDATE commits SET seq = ? WHERE id = ?", kept)
        self._add(conn, fresh)

    def _add(self, conn: sqlite3.Connection, placed: list[tuple[int, gitrepo.WalkedCommit]]) -> None:
        """Record new commits at their places in the walk, with what each changed below the folder."""
        changed = gitrepo.changed_paths(self.repo, [c.commit for _, c in placed if len(c.parents) <= 1], self.under)
        for seq, commit in placed:
            cursor = conn.execute(
                "INSERT INTO commits(hash, parents, seq, date, author, email, summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (commit.commit, " ".join(commit.parents), seq, commit.date, commit.author, commit.email, commit.summary),
            )
            commit_id = cursor.lastrowid
            conn.executemany(
                "INSERT INTO changes(path, commit_id, status, blob, mode) VALUES (?, ?, ?, ?, ?)",
                [(change.path, commit_id, change.status, change.blob, change.mode) for change in changed.get(commit.commit, [])],
            )

    # ----------------------------------------------------------------- the file

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """An open, usable record (made, or made anew when unreadable or of another schema).
        Raises Unavailable when the cache folder cannot be written or SQLite fails."""
        try:
            fs.check_confined(self.folder)  # a linked `.moss/` must not put the cache elsewhere
            self._ensure_folder()
            conn = self._open()
        except (OSError, sqlite3.Error, MossError) as exc:
            raise Unavailable(f"the history cache cannot be used: {exc}") from None
        try:
            yield conn
        except (MossError, UnicodeError) as exc:  # git failed here (asked again, it says why), or a path SQLite cannot hold
            raise Unavailable(f"the history cache cannot answer: {exc}") from None
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorname", "") in _CORRUPT:
                self._remove()  # derived: the next use makes it anew
            raise Unavailable(f"the history cache failed: {exc}") from None
        finally:
            conn.close()

    def _open(self) -> sqlite3.Connection:
        for attempt in range(2):
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    with _transaction(conn):
                        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                                conn.execute(f'DROP TABLE IF EXISTS "{name}"')
                            for statement in _SCHEMA.split(";"):  # one by one: executescript would commit
                                if statement.strip():
                                    conn.execute(statement)
                            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                return conn
            except sqlite3.DatabaseError as exc:
                conn.close()
                if attempt or getattr(exc, "sqlite_errorname", "") not in _CORRUPT:
                    raise
                self._remove()  # unreadable: derived, so made anew
        raise AssertionError("unreachable")

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _ensure_folder(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        ignore = self.folder / ".gitignore"
        if not ignore.exists():
            try:
                # Per machine, as the search cache beside it: out of git even where `moss init` never ran.
                with open(ignore, "x", encoding="utf-8") as handle:
                    handle.write("# moss-files search cache: per machine, safe to delete\n*\n")
            except FileExistsError:
                pass


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta"))


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, begun with the write lock (a second writer waits), committed
    whole or rolled back whole."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")

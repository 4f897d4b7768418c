"""Board files under `.moss/board/`: read them all (with a stat-keyed cache), create, edit,
delete, append to the activity log, and the board-wide writer lock.

Edge layer: owns the board folder; every byte goes through `fs` (atomic durable writes,
exclusive creates, O_APPEND log lines). Layout, relative to the workspace root:

    .moss/board/project.md              settings and global rails (optional: defaults apply)
    .moss/board/epics/<EPIC-id>.md      one file per epic; the body is its description
    .moss/board/tasks/<TASK-id>.md      one file per task; the body is its description
    .moss/board/workers/<worker>.md     one file per worker (its name is the agent's id)
    .moss/board/teams/<TEAM-id>.md      one file per team
    .moss/board/proposals/<PROP-id>.md  one file per rail proposal; the body is the reason
    .moss/board/activity.jsonl          the append-only activity log (union-merged by git)
    .moss/board/chat/<channel>.jsonl    one chat channel's lines (union-merged by git)
    .moss/board/comments/<TASK-id>.jsonl  a task's comments and questions (union-merged by git)
    .moss/run/.board.lock               the writers' lock (per machine, git-ignored)
    .moss/run/board/cursors/<worker>.json  a worker's chat read positions (per machine)
    .moss/cache/board.json              parsed items keyed by file stat (derived, git-ignored)

A file's stem is its id. Readers take no lock: every file is replaced by rename, so a reader
sees the old or the new bytes, never a mix. Writers hold the board lock for the whole of one
operation (read the board, decide, write), which serializes them across threads and processes.

Reading thousands of frontmatters costs seconds, so parsed items are kept by each file's
(inode, size, mtime, ctime): in memory for the store's life (a server's), and in
`.moss/cache/board.json` for the next process (a CLI command). A file whose stat differs is
read again; one changed too recently for its stat to be trusted is never cached. The cache
file is rewritten only after a load that had to re-read many files, is always safe to delete,
and a cache that cannot be read or written is simply not used.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath
from typing import Any

from moss_files.board import files, threads
from moss_files.board.model import Board, Epic, Event, Project, Proposal, Step, Task, Team, Worker, default_project, is_valid_name
from moss_files.foundation import document, fs
from moss_files.foundation.errors import Conflict, InvalidDocument, MossError, NotFound

BOARD_DIR = PurePosixPath(".moss/board")
LOCK_TARGET = PurePosixPath(".moss/run/board")
CACHE_FILE = PurePosixPath(".moss/cache/board.json")
# Bump when parsing changes what an item holds, so caches written by older code are dropped.
CACHE_VERSION = 1
# A load that re-reads at least this many files rewrites the cache file; fewer cost less to
# re-read next time than the rewrite would.
CACHE_REWRITE_AFTER = 64
PROJECT_FILE = "project.md"
LOG_FILE = "activity.jsonl"
THREAD_FOLDERS = {"chat": "chat", "comments": "comments"}
CURSOR_DIR = PurePosixPath(".moss/run/board/cursors")
FOLDERS = {"epic": "epics", "task": "tasks", "worker": "workers", "team": "teams", "proposal": "proposals"}
MAX_FILE_BYTES = 1024 * 1024
MAX_LOG_LINE_BYTES = 256 * 1024
LOCK_TIMEOUT = 30.0
# A file changed this recently may change again within the same timestamp tick without its
# stat changing (an edit in place of the same size, or a replace that reuses the freed inode),
# so its parse is not cached. File systems that keep whole seconds (FAT keeps two) need the
# long window; a timestamp with a fraction of a second shows finer ones, whose tick is the
# kernel's coarse clock (at most 10 ms), so a short window suffices and a burst of writes
# does not make every load re-read every file written in the last two seconds.
COARSE_RACY_NS = 2_000_000_000
FINE_RACY_NS = 50_000_000

_PARSERS: dict[str, Callable[..., Any]] = {
    "epic": files.parse_epic,
    "task": files.parse_task,
    "worker": files.parse_worker,
    "team": files.parse_team,
    "proposal": files.parse_proposal,
}
_RENDERERS: dict[str, Callable[[Any], str]] = {
    "epic": files.render_epic,
    "task": files.render_task,
    "worker": files.render_worker,
    "team": files.render_team,
    "proposal": files.render_proposal,
}
_LABEL = {"epic": "Epic", "task": "Task", "worker": "Worker", "team": "Team", "proposal": "Proposal"}

StatKey = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class _Cached:
    key: StatKey
    value: Any  # the parsed entity, or the MossError its file raised


class BoardStore:
    """The board files of one workspace root (the folder holding `.moss/`)."""

    def __init__(self, root: Path, *, persist: bool = True) -> None:
        self.root = root
        self.base = root / BOARD_DIR
        self.persist = persist
        self._cache: dict[str, _Cached] = {}
        self._cache_read = False
        self._reparsed = 0

    # ----------------------------------------------------------------- locations

    def path(self, kind: str, item_id: str) -> Path:
        return self.base / FOLDERS[kind] / f"{item_id}.md"

    @property
    def project_path(self) -> Path:
        return self.base / PROJECT_FILE

    @property
    def log_path(self) -> Path:
        return self.base / LOG_FILE

    def display(self, path: Path) -> str:
        """A path relative to the workspace root, for messages."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    @contextmanager
    def writing(self, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
        """Hold the board-wide writer lock (a flock, released by the kernel if we die).

        Raises Conflict LOCK_TIMEOUT when another writer holds it for over `timeout` seconds.
        """
        with fs.locked(self.root / LOCK_TARGET, timeout=timeout):
            yield

    # ----------------------------------------------------------------- reading

    def load(self) -> Board:
        """Every board file, parsed; files that cannot be read are in `problems`, never dropped."""
        if self.persist and not self._cache_read:
            self._read_cache_file()
        problems: list[MossError] = []
        project = self._load_project(problems)
        found: dict[str, dict[str, Any]] = {}
        for kind in ("epic", "task", "worker", "team"):
            found[kind], trouble = self.load_kind(kind)
            problems.extend(trouble)
        if self.persist and self._reparsed >= CACHE_REWRITE_AFTER:
            self._write_cache_file()
        return Board(project=project, epics=found["epic"], tasks=found["task"], workers=found["worker"], teams=found["team"], problems=tuple(problems))

    def load_kind(self, kind: str) -> tuple[dict[str, Any], list[MossError]]:
        """Every item of one kind by id, and the files of that kind that cannot be read."""
        problems: list[MossError] = []
        items: dict[str, Any] = {}
        now_ns = time.time_ns()
        for item_id, path, relpath in self._listing(FOLDERS[kind], problems):
            value = self._parse_cached(kind, item_id, path, relpath, now_ns)
            if isinstance(value, MossError):
                problems.append(value)
            elif value is not None:
                items[item_id] = value
        return items, problems

    def _load_project(self, problems: list[MossError]) -> Project:
        try:
            return self.read_project()
        except MossError as err:
            problems.append(err)
            return default_project(self.root.name)

    def read_project(self) -> Project:
        """The project settings (defaults when `project.md` does not exist).

        Raises InvalidDocument when the file exists but cannot be read.
        """
        path = self.project_path
        value = self._parse_cached("project", "project", str(path), self.display(path), time.time_ns())
        if value is None:
            return default_project(self.root.name)
        if isinstance(value, MossError):
            raise value
        return value

    def _listing(self, folder: str, problems: list[MossError]) -> Iterator[tuple[str, str, str]]:
        """(id, file path, path relative to the root) of each item file in a board folder."""
        # Plain strings, not Path objects: on a board of thousands of files, pathlib's
        # parsing cost more than the stat calls themselves.
        directory = self.base / folder
        prefix = f"{BOARD_DIR}/{folder}/"
        try:
            fs.check_confined(directory)
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except FileNotFoundError:
            return
        except MossError as err:
            problems.append(err)
            return
        except NotADirectoryError:
            problems.append(InvalidDocument(f"{folder} must be a folder", code="INVALID_DOCUMENT", path=self.display(directory)))
            return
        for entry in entries:
            name = entry.name
            if name.startswith(".") or not name.endswith(".md"):
                continue  # temp and lock files, notes in other formats
            stem = name[:-3]
            if not is_valid_name(stem):
                problems.append(
                    InvalidDocument(
                        f"{name!r} is not a board file name: the stem is the item's id (letters, digits, '.', '_', '-')",
                        code="SCHEMA_ERROR",
                        path=prefix + name,
                    )
                )
                continue
            yield stem, entry.path, prefix + name

    def _parse_cached(self, kind: str, item_id: str, path: str, relpath: str, now_ns: int) -> Any:
        """The entity in `path` (None when missing, a MossError when unreadable), re-parsed only
        when the file's (inode, size, mtime, ctime) changed or is too recent to trust."""
        try:
            stat = os.lstat(path)  # a link's own stat: its target's must never key the cache
        except FileNotFoundError:
            self._cache.pop(relpath, None)
            return None
        key: StatKey = (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
        cached = self._cache.get(relpath)
        if cached is not None and cached.key == key:
            return cached.value
        try:
            snapshot = fs.read_snapshot(Path(path), max_bytes=MAX_FILE_BYTES)
        except MossError as err:
            self._cache.pop(relpath, None)
            return err
        if snapshot.data is None:
            self._cache.pop(relpath, None)
            return None
        try:
            value: Any = self._parse(kind, item_id, snapshot.data, relpath)
        except MossError as err:
            value = err
        if now_ns - stat.st_ctime_ns >= racy_window(stat.st_mtime_ns, stat.st_ctime_ns):
            self._cache[relpath] = _Cached(key, value)
            self._reparsed += 1
        else:
            self._cache.pop(relpath, None)
        return value

    def _read_cache_file(self) -> None:
        self._cache_read = True
        try:
            data = json.loads(fs.read_bytes(self.root / CACHE_FILE))
            if data.get("version") != CACHE_VERSION or data.get("layout") != _LAYOUT:
                return
            for relpath, (kind, ino, size, mtime_ns, ctime_ns, record) in data["items"].items():
                self._cache.setdefault(relpath, _Cached((ino, size, mtime_ns, ctime_ns), _from_record(_CLASSES[kind], record)))
        except (OSError, MossError, ValueError, TypeError, KeyError, AttributeError):
            return  # no cache, or one from other code: read the files

    def _write_cache_file(self) -> None:
        # A server's threads share this store and may add entries meanwhile: copy first (one
        # C-level pass, which no other thread interrupts).
        entries = tuple(self._cache.items())
        items = {
            relpath: [_KIND_OF[type(cached.value)], *cached.key, _to_record(cached.value)] for relpath, cached in entries if type(cached.value) in _KIND_OF
        }
        data = json.dumps({"version": CACHE_VERSION, "layout": _LAYOUT, "items": items}, separators=(",", ":"))
        try:
            fs.write_atomic(self.root / CACHE_FILE, data.encode("utf-8"))
        except (OSError, MossError):
            return  # a read-only checkout still reads its board, only more slowly
        self._reparsed = 0

    def _parse(self, kind: str, item_id: str, data: bytes, relpath: str) -> Any:
        doc = document.parse_bytes(data, relpath, max_bytes=MAX_FILE_BYTES)
        if kind == "project":
            return files.parse_project(doc, relpath, default_name=self.root.name)
        return _PARSERS[kind](doc, relpath, fallback_id=item_id)

    def get(self, kind: str, item_id: str) -> Any:
        """One item, read from its file now.

        Raises NotFound (`Task not found: <id>`) or InvalidDocument with file and line.
        """
        if not is_valid_name(item_id):
            raise NotFound(f"{_LABEL[kind]} not found: {item_id}", details={"id": item_id})
        path = self.path(kind, item_id)
        snapshot = fs.read_snapshot(path, max_bytes=MAX_FILE_BYTES)
        if snapshot.data is None:
            raise NotFound(f"{_LABEL[kind]} not found: {item_id}", details={"id": item_id})
        return self._parse(kind, item_id, snapshot.data, self.display(path))

    # ----------------------------------------------------------------- writing

    def create(self, kind: str, entity: Any) -> Path:
        """Write a new item's file; never replaces one.

        Raises Conflict ALREADY_EXISTS when a file with that id exists.
        """
        path = self.path(kind, entity.id)
        text = _RENDERERS[kind](entity)
        if not fs.create_exclusive(path, text.encode("utf-8")):
            raise Conflict(f"{_LABEL[kind]} {entity.id} exists already", code="ALREADY_EXISTS", path=self.display(path))
        return path

    def update(self, kind: str, item_id: str, change: Callable[[Any], Any]) -> Any:
        """Apply `change(entity) -> entity` to an item's file and return the new entity.

        Only the keys whose values changed are edited (and the body, when the description
        did), so hand edits elsewhere in the file survive. When the file changes between the
        read and the write (a hand edit takes no lock), `change` runs again on the new content;
        `change` may raise to refuse the edit.

        Raises NotFound, InvalidDocument (file and line) or Conflict STALE_WRITE.
        """
        path = self.path(kind, item_id)
        relpath = self.display(path)
        result: list[Any] = []

        def step(snapshot: fs.Snapshot) -> bytes | None:
            result.clear()
            if snapshot.data is None:
                raise NotFound(f"{_LABEL[kind]} not found: {item_id}", details={"id": item_id})
            doc = document.parse_bytes(snapshot.data, relpath, max_bytes=MAX_FILE_BYTES)
            old = _PARSERS[kind](doc, relpath, fallback_id=item_id)
            new = change(old)
            result.append(new)
            text = files.edit_text(doc, old, new, kind, relpath)
            return None if text is None else document.encode(text, doc.bom)

        # kind: an edit of an older file writes it at the current format version.
        fs.modify(path, step, max_bytes=MAX_FILE_BYTES, kind=kind, relpath=relpath)
        return result[0]

    def delete(self, kind: str, item_id: str) -> None:
        """Remove an item's file. Raises NotFound."""
        path = self.path(kind, item_id)
        if not fs.remove(path):
            raise NotFound(f"{_LABEL[kind]} not found: {item_id}", details={"id": item_id})
        self._cache.pop(self.display(path), None)

    def set_global_rails(self, list_name: str, values: tuple[str, ...]) -> Project:
        """Set one list of `project.md`'s global rails (the file must exist); only that key's
        lines change. Raises NotFound, InvalidDocument."""
        path = self.project_path
        relpath = self.display(path)

        def step(snapshot: fs.Snapshot) -> bytes | None:
            if snapshot.data is None:
                raise NotFound("project.md does not exist", path=relpath)
            doc = document.parse_bytes(snapshot.data, relpath, max_bytes=MAX_FILE_BYTES)
            return document.encode(files.edit_project_rails(doc, list_name, values, relpath), doc.bom)

        fs.modify(path, step, max_bytes=MAX_FILE_BYTES, kind="project", relpath=relpath)
        return self.read_project()

    def create_project(self, project: Project) -> bool:
        """Write `project.md` unless it exists; True when this call wrote it."""
        return fs.create_exclusive(self.project_path, files.render_project(project).encode("utf-8"))

    # ----------------------------------------------------------------- activity log

    def append(self, event: Event) -> None:
        """Append one event to the activity log as one JSONL line (a single O_APPEND write)."""
        line = json.dumps(files.event_to_dict(event), ensure_ascii=False, separators=(",", ":"))
        fs.append_line(self.log_path, line.encode("utf-8"))

    def events(self) -> tuple[list[Event], list[MossError]]:
        """Every event in the log, in file order, and every line that is not a valid event."""
        try:
            data = fs.read_bytes(self.log_path)
        except FileNotFoundError:
            return [], []
        shown = self.display(self.log_path)
        events: list[Event] = []
        problems: list[MossError] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                if len(raw) > MAX_LOG_LINE_BYTES:
                    raise InvalidDocument(f"activity line is over {MAX_LOG_LINE_BYTES} bytes", code="FILE_TOO_LARGE", path=shown, line=number)
                try:
                    record = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError) as exc:
                    raise InvalidDocument(f"activity line is not JSON: {exc}", code="INVALID_DOCUMENT", path=shown, line=number) from None
                events.append(files.parse_event(record, shown, number))
            except MossError as err:
                problems.append(err)
        return events, problems

    # ----------------------------------------------------------------- threads (chat, comments)

    def thread_path(self, kind: str, name: str) -> Path:
        """The JSONL file of one chat channel (`chat`) or one task's comments (`comments`)."""
        return self.base / THREAD_FOLDERS[kind] / f"{name}.jsonl"

    @contextmanager
    def thread_lock(self, kind: str, name: str) -> Iterator[None]:
        """Hold one thread's lock: for appends that depend on what the thread holds (a pin that
        must not be doubled, a join written once). Plain appends take no lock."""
        with fs.locked(self.thread_path(kind, name)):
            yield

    def append_record(self, kind: str, name: str, record: dict[str, Any]) -> None:
        """Append one record to a thread as one JSONL line (a single O_APPEND write)."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        fs.append_line(self.thread_path(kind, name), line.encode("utf-8"))

    def _records(self, path: Path) -> tuple[list[tuple[int, Any]], list[MossError]]:
        try:
            data = fs.read_bytes(path)
        except FileNotFoundError:
            return [], []
        shown = self.display(path)
        records: list[tuple[int, Any]] = []
        problems: list[MossError] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            if len(raw) > MAX_LOG_LINE_BYTES:
                problems.append(InvalidDocument(f"line is over {MAX_LOG_LINE_BYTES} bytes", code="FILE_TOO_LARGE", path=shown, line=number))
                continue
            if raw.startswith((b"<<<<<<<", b"=======", b">>>>>>>")):
                problems.append(InvalidDocument("a git conflict marker: finish the merge", code="MERGE_CONFLICT", path=shown, line=number))
                continue
            try:
                records.append((number, json.loads(raw.decode("utf-8"))))
            except (UnicodeDecodeError, ValueError) as exc:
                problems.append(InvalidDocument(f"line is not JSON: {exc}", code="INVALID_DOCUMENT", path=shown, line=number))
        return records, problems

    def read_channel(self, channel: str) -> tuple[list[threads.Post], list[MossError]]:
        """Every line of a channel in file order, and every line that is not a valid one."""
        path = self.thread_path("chat", channel)
        records, problems = self._records(path)
        posts: list[threads.Post] = []
        for number, record in records:
            try:
                posts.append(threads.parse_post(record, channel, self.display(path), number))
            except MossError as err:
                problems.append(err)
        return posts, problems

    def read_comments(self, task_id: str) -> tuple[list[threads.Comment], list[MossError]]:
        """Every comment on a task in file order, and every line that is not a valid one."""
        path = self.thread_path("comments", task_id)
        records, problems = self._records(path)
        found: list[threads.Comment] = []
        for number, record in records:
            try:
                found.append(threads.parse_comment(record, task_id, self.display(path), number))
            except MossError as err:
                problems.append(err)
        return found, problems

    def thread_names(self, kind: str) -> list[str]:
        """The names of the threads of one kind that have a file, sorted."""
        try:
            names = os.listdir(self.base / THREAD_FOLDERS[kind])
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(name[:-6] for name in names if name.endswith(".jsonl") and not name.startswith(".") and is_valid_name(name[:-6]))

    def thread_signatures(self, kind: str) -> dict[str, tuple[int, int, int]]:
        """(inode, size, mtime) of each thread file of one kind: what changed since a look."""
        found: dict[str, tuple[int, int, int]] = {}
        for name in self.thread_names(kind):
            try:
                info = os.stat(self.thread_path(kind, name))
            except FileNotFoundError:
                continue
            found[name] = (info.st_ino, info.st_size, info.st_mtime_ns)
        return found

    # ----------------------------------------------------------------- chat cursors (per machine)

    def cursor_path(self, worker_id: str) -> Path:
        return self.root / CURSOR_DIR / f"{worker_id}.json"

    def read_cursors(self, worker_id: str) -> dict[str, str]:
        """A worker's read position in each channel (the id of the last message delivered)."""
        try:
            data = json.loads(fs.read_bytes(self.cursor_path(worker_id)))
        except (FileNotFoundError, ValueError, MossError):
            return {}
        return {str(key): str(value) for key, value in data.items()} if isinstance(data, dict) else {}

    def advance_cursors(self, worker_id: str, moves: dict[str, str | None]) -> dict[str, str]:
        """Set (or, with None, forget) a worker's read position in some channels, under the
        cursor file's lock; return every position after the change."""
        path = self.cursor_path(worker_id)
        with fs.locked(path):
            cursors = self.read_cursors(worker_id)
            for channel, cursor in moves.items():
                if cursor is None:
                    cursors.pop(channel, None)
                else:
                    cursors[channel] = cursor
            fs.write_atomic(path, json.dumps(cursors, sort_keys=True, indent=1).encode("utf-8"))
        return cursors


def racy_window(mtime_ns: int, ctime_ns: int) -> int:
    """How long after its last change a file's stat cannot yet be trusted to reveal the next."""
    return FINE_RACY_NS if (mtime_ns % 1_000_000_000 or ctime_ns % 1_000_000_000) else COARSE_RACY_NS


# --------------------------------------------------------------------------- cache records

_CLASSES: dict[str, type] = {"epic": Epic, "task": Task, "worker": Worker, "team": Team, "proposal": Proposal, "step": Step}
_KIND_OF = {cls: kind for kind, cls in _CLASSES.items() if kind != "step"}
_NAMES = {cls: tuple(f.name for f in fields(cls)) for cls in _CLASSES.values()}
# The field names of every cached class: a cache written for another layout is not used.
_LAYOUT = {kind: list(_NAMES[cls]) for kind, cls in _CLASSES.items()}
# Indexes of the fields that hold tuples (those whose default is one); JSON gives lists back.
_TUPLES = {
    cls: tuple(i for i, name in enumerate(_NAMES[cls]) if isinstance(getattr(_sample, name, None), tuple))
    for cls, _sample in (
        (Epic, Epic("x", "x")),
        (Task, Task("x", "x", "x")),
        (Worker, Worker("x")),
        (Team, Team("x", "x")),
        (Proposal, Proposal("x", None, "x", "x", "x")),
        (Step, Step("x", "x")),
    )
}
_PLAN = _NAMES[Task].index("plan")


def _to_record(item: Any) -> list[Any]:
    """An item as a JSON list of its field values in declaration order."""
    values: list[Any] = [getattr(item, name) for name in _NAMES[type(item)]]
    if type(item) is Task:
        values[_PLAN] = [_to_record(step) for step in item.plan]
    return [list(value) if isinstance(value, tuple) else value for value in values]


def _from_record(cls: Any, record: list[Any]) -> Any:
    """The inverse of `_to_record`."""
    values = list(record)
    for index in _TUPLES[cls]:
        values[index] = tuple(values[index])
    if cls is Task:
        values[_PLAN] = tuple(_from_record(Step, step) for step in values[_PLAN])
    return cls(*values)

"""Reading migration sources without changing them: files (never through a link, with size
limits), JSON and JSON Lines with the line of any syntax error, SQLite databases opened
read-only, and whether git could bring a source file back (for --move).

Edge layer: the only module of the migrations that imports sqlite3 (tests/test_meta.py allows
it here, as in the index). Nothing here writes: a SQLite database in WAL mode is opened
`immutable` when no writer has it open, because a read-only connection would otherwise leave
`-wal` and `-shm` files beside it.
"""

from __future__ import annotations

import codecs
import json
import os
import sqlite3
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from moss_files.foundation import datafiles, document, fs, structured
from moss_files.foundation.errors import InvalidDocument, MossError, NotFound, RepoError
from moss_files.migrate.model import Where, source_error

MAX_SOURCE_BYTES = 256 * 1024 * 1024  # one source file (an export of a big board, a JSONL dump)


def shown(path: Path, root: Path) -> str:
    """`path` as people see it in reports: relative to the workspace when inside it."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def read_bytes(path: Path, where: str, *, max_bytes: int = MAX_SOURCE_BYTES) -> bytes:
    """A source file's bytes, read without following a link at its name, and never opening
    anything but a regular file (a FIFO among a source's files must not hang a migration).

    Raises NotFound, InvalidDocument SOURCE_INVALID (a link, too large), NOT_REGULAR_FILE,
    RepoError NOT_READABLE.
    """
    try:
        fd = fs.open_regular(path, shown=where)
    except FileNotFoundError:
        raise NotFound("no such source file", path=where) from None
    except InvalidDocument as err:
        if err.code == "SYMLINK_REFUSED":
            raise source_error("the source file is a symbolic link, which is never followed", Where(where)) from None
        raise
    except OSError as exc:
        raise source_error(f"cannot open the source file: {exc.strerror}", Where(where)) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if info.st_size > max_bytes:
            raise source_error(f"the source file is {info.st_size} bytes; the limit is {max_bytes}", Where(where), max_bytes=max_bytes)
        # Sized by the file, not the limit: a read of `max_bytes` allocates that much first.
        data = handle.read(info.st_size + 1)
        if len(data) > info.st_size:  # grown since the stat: the rest, up to the limit
            data += handle.read(max_bytes + 1 - len(data))
        if len(data) > max_bytes:
            raise source_error(f"the source file grew past the limit of {max_bytes} bytes while it was read", Where(where), max_bytes=max_bytes)
        return data


def read_text(path: Path, where: str, *, max_bytes: int = MAX_SOURCE_BYTES) -> str:
    """A source file as text (UTF-8, a BOM dropped). Raises as `read_bytes`, and
    SOURCE_INVALID with the line of bytes that are not UTF-8 or a NUL."""
    return _decoded(read_bytes(path, where, max_bytes=max_bytes), where, max_bytes)


def _decoded(data: bytes, where: str, max_bytes: int) -> str:
    """`read_text`'s text of a source file's bytes (raising as it does)."""
    try:
        text, _bom = document.decode(data, where, max_bytes=max_bytes)
    except InvalidDocument as err:
        raise source_error(err.message, Where(where, err.line), cause=err.code) from None
    return text


def read_lines(path: Path, where: str, *, max_bytes: int = MAX_SOURCE_BYTES) -> list[tuple[int, bytes]]:
    """(line number, the line's UTF-8 bytes, a BOM dropped) of each line of a text source file
    that is not blank, checked as `read_text` checks it and raising as it does. A line's
    bytes, not its text: a single character beyond the Basic Multilingual Plane (an emoji)
    makes a file's whole text four bytes a character (the real Beads export copied up to a
    hundred thousand issues: 73 MB of UTF-8, 278 MB as one text), where each line's bytes
    stay the size of the file."""
    data = read_bytes(path, where, max_bytes=max_bytes)
    if b"\0" in data:
        _decoded(data, where, max_bytes)  # raises BINARY_FILE with the line, as for the whole text
    lines: list[tuple[int, bytes]] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if number == 1 and line.startswith(codecs.BOM_UTF8):
            line = line[len(codecs.BOM_UTF8) :]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            _decoded(data, where, max_bytes)  # raises INVALID_ENCODING with the file's first bad byte and its line
            raise
        if text.strip():
            lines.append((number, line))
    return lines


def load_json(path: Path, where: str) -> Any:
    """A JSON source file's value (read as every JSON file is, `datafiles`). Raises
    SOURCE_INVALID with the line of a syntax error or of a conflict marker (cause MERGE_CONFLICT)."""
    text = read_text(path, where)
    try:
        return datafiles.load_json(text, where, code="SOURCE_INVALID", what="the source", unique_keys=True)
    except InvalidDocument as err:
        if err.code in ("JSON_DUPLICATE_KEY", "JSON_TOO_DEEP"):
            raise  # their own codes, with the file and line: not a syntax error
        raise source_error(err.message, Where(where, err.line), cause=err.code) from None


def load_jsonl(path: Path, where: str) -> list[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON Lines file. Raises SOURCE_INVALID
    naming the first line that is not JSON."""
    return [(located.line or 0, value) for located, value in JsonLines(path, where)]


class JsonLines:
    """The records of a JSON Lines file, parsed each time they are gone through: (where, value)
    of each non-blank line, `where` naming the file as `where` shows it and the line. Holding the
    lines' bytes (`read_lines`) rather than their values keeps a large source (a hundred
    thousand Beads issues: 76 MB of text, some 500 MB as Python objects) to the size of its
    file; a reader that goes through it twice parses it twice. Made for a number of `passes`,
    it lets go of each line as the last pass parses it. A line is checked for a key given
    twice the first time it is parsed only: a later pass reads the text already found sound
    with the plain parser, a third faster.

    Reading the file raises as `read_text`; going through it raises SOURCE_INVALID naming the
    first line that is not JSON (InvalidDocument JSON_DUPLICATE_KEY, JSON_TOO_DEEP).
    """

    __slots__ = ("checked", "count", "lines", "passes", "where")

    def __init__(self, path: Path, where: str, *, passes: int | None = None) -> None:
        self.where = where
        self.lines: list[tuple[int, bytes] | None] = list(read_lines(path, where))
        self.count = len(self.lines)
        self.passes = passes  # how many times it will be gone through: the last lets go of each line once parsed
        self.checked = 0  # the lines before this one have been parsed with the duplicate-key check

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[tuple[Where, Any]]:
        where, lines = self.where, self.lines
        if self.passes is not None:
            if self.passes < 1:
                raise RuntimeError(f"{where}: already gone through as many times as it was made for")
            self.passes -= 1
        last = self.passes == 0
        for index in range(len(lines)):
            entry = lines[index]
            if entry is None:
                raise RuntimeError(f"{where}: gone through again after its last pass")
            number, line = entry
            if last:
                lines[index] = None  # a hundred thousand lines are most of what a large source holds
            unique = index >= self.checked
            try:
                value = structured.loads_json(line.decode("utf-8"), path=where, line=number, unique_keys=unique)
            except json.JSONDecodeError as exc:
                raise source_error(f"line is not valid JSON: {exc.msg} (column {exc.colno})", Where(where, number)) from None
            if unique:
                self.checked = index + 1
            yield Where(where, number), value


def list_files(folder: Path, suffixes: Sequence[str]) -> list[Path]:
    """The files directly in `folder` ending in one of `suffixes`, sorted by name; dot files
    (editors' swap files, our temporaries) left out. Links are listed, so reading them fails
    loudly rather than being skipped."""
    try:
        names = sorted(fs.list_names(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [folder / name for name in names if name.endswith(tuple(suffixes)) and not name.startswith(".")]


def list_entries(folder: Path) -> list[tuple[Path, bool]]:
    """Every entry directly in `folder`, sorted by name, each with whether it is a file (a
    link counts as one, so reading it fails loudly); folders are listed too, as False."""
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        path = folder / name
        try:
            is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
        except FileNotFoundError:
            continue
        found.append((path, not is_dir))
    return found


# --------------------------------------------------------------------------- SQLite


def _wal_idle(path: Path) -> bool:
    """True when the database is in WAL mode and no connection has it open (no -wal file)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except OSError:
        return False
    in_wal = len(header) >= 20 and header[18:20] == b"\x02\x02"
    return in_wal and not Path(f"{path}-wal").exists()


@contextmanager
def open_database(path: Path, where: str) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a source's SQLite database; never writes it or its folder.

    Raises NotFound, InvalidDocument SOURCE_INVALID when it is not a readable database.
    """
    try:
        kind = path.lstat().st_mode
    except FileNotFoundError:
        raise NotFound("no such database", path=where) from None
    if stat.S_ISLNK(kind):
        raise source_error("the database is a symbolic link, which is never followed", Where(where))
    if not stat.S_ISREG(kind):
        raise fs.not_regular(where, kind)  # SQLite would open a FIFO and wait on it
    mode = "ro&immutable=1" if _wal_idle(path) else "ro"
    uri = f"file:{quote(str(path.resolve()))}?mode={mode}"
    try:
        connection = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise source_error(f"cannot open the database: {exc}", Where(where)) from None
    try:
        connection.execute("PRAGMA query_only = 1")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        yield connection
    except sqlite3.DatabaseError as exc:
        raise source_error(f"cannot read the database: {exc}", Where(where)) from None
    finally:
        connection.close()


def tables(connection: sqlite3.Connection) -> dict[str, list[str]]:
    """Each table's columns."""
    names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    return {name: [row[1] for row in connection.execute(f"PRAGMA table_info({_quoted(name)})")] for name in names}


def rows(connection: sqlite3.Connection, table: str, columns: Sequence[str], order: str | None = None) -> list[dict[str, Any]]:
    """Every row of `table` as a mapping of the given columns."""
    listed = ", ".join(_quoted(column) for column in columns)
    query = f"SELECT {listed} FROM {_quoted(table)}" + (f" ORDER BY {order}" if order else "")
    return [dict(zip(columns, row, strict=True)) for row in connection.execute(query)]


def scalar(connection: sqlite3.Connection, query: str) -> Any:
    """The first column of the first row of a query (None when there is none)."""
    row = connection.execute(query).fetchone()
    return row[0] if row else None


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------- git


def move_refusals(root: Path, paths: Sequence[Path]) -> dict[str, str]:
    """Why git could not bring back each of `paths` if it were removed: `untracked`, `ignored`,
    `changed` (against the last commit), or `not in a git work tree`. Empty when all of them
    are committed and unchanged, the only state in which --move removes a source file."""
    from moss_files.foundation import gitrepo  # GitPython loads only for --move

    try:
        repo = gitrepo.open_repo(root)
        top = (repo.working_tree_dir or root).resolve()
    except MossError:
        return {shown(path, root): "not in a git work tree" for path in paths}
    relpaths: dict[str, Path] = {}
    refusals: dict[str, str] = {}
    for path in paths:
        try:
            relpaths[path.resolve().relative_to(top).as_posix()] = path
        except ValueError:
            refusals[shown(path, root)] = "outside the git work tree"
    try:
        states = gitrepo.uncommitted(repo, sorted(relpaths))
    except RepoError as err:
        return {shown(path, root): f"git status failed: {err.message}" for path in paths}
    for relpath, state in states.items():
        if relpath in relpaths:
            refusals[shown(relpaths[relpath], root)] = state
    return refusals

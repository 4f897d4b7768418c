"""One sleeve's `.needlecast/` folder on disk, in either layout. Edge layer: owns these files.

Layout v1 keeps messages as blocks in `inbox.md` / `outbox.md` (see `message` for the block
rule); layout v2 keeps one file per message in `inbox/` / `outbox/`, named
`<time>_<from>_<id>.md` so that sorting names sorts by time. A workspace uses v2 when an
`inbox/` or `outbox/` folder exists; both forms are always read. Next to them:

    archive.md | archive/    routed messages, with `routed:` time and `delivered_to:` (tracked)
    dead-letters/            undeliverable blocks, byte for byte, with the reason (tracked)
    inbox/<YYYY-MM>/         v2: read messages rotated out of a full inbox top (`rotate_inbox`)
    read.log                 JSON lines `{id, from, at}`, appended; a rotation drops the marks
                             of messages it moved (tracked; merge=union)
    .state/                  per-machine state, git-ignored: the router's delivery journal
                             (`needlecast.journal`), its lock, the sidecar's lock and address

Every rewrite of a shared mailbox file goes through `shared_file.rewrite`, which never loses
bytes that an agent appends or an editor writes while the rewrite runs; this module supplies
the merge rules that fold an interrupted rewrite back (`inbox_merge`, `outbox_merge`). Reads,
durable writes, appends and locks are `moss_files.foundation.fs`'s.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
import secrets
import stat
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from moss_files.foundation import conflicts, document, formats, fs, structured
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound
from needlecast import message as msg
from needlecast.message import Message
from needlecast.routing import MONTH_FOLDER, Entry
from needlecast.shared_file import (
    LEFTOVER,
    Merge,
    clear_dead_temporaries,
    create_in_folders,
    create_many,
    fold_leftovers,
    fsync_all,
    list_names,
    read_ends,
    read_if_any,
    read_in,
    refuse_conflicted,
    rename_noreplace,
    rewrite,
    side_name,
)

DIR_NAME = ".needlecast"
KEEP_FILE = ".gitkeep"
KEEP_TEXT = "# Keeps this folder in git, so every clone keeps layout v2 (a file per message).\n"
STATE_DIR = ".state"
TAIL_SETTLE_SECONDS = 2.0  # an outbox not ending in a line break is left alone this long
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_BOM = document.BOM.encode("utf-8")
_BAD_BYTES = re.compile("[\udc80-\udcff]")  # how `mail_text` keeps bytes that are not UTF-8
# The most a v1 mailbox file (inbox.md, outbox.md, archive.md) may hold: readers refuse a larger
# file whole, so delivery never grows an inbox past it (INBOX_FULL holds the messages instead).
MAX_MAILBOX_BYTES = 64 * 1024 * 1024
# History is rotated so that routing works on a bounded set (docs/formats.md, "Rotation"): a
# file-per-message archive keeps at most ARCHIVE_TOP_FILES messages at its top before the routed
# ones move into a folder per month (`archive/2026-01/`); `archive.md` becomes a segment
# (`archived/<time>.md`) once it holds ARCHIVE_SEGMENT_BYTES.
ARCHIVE_TOP_FILES = 256
# An inbox's top likewise: past INBOX_TOP_FILES messages, a reader moves the read ones older
# than INBOX_KEEP_DAYS into a folder per month (`inbox/2026-01/`) and read.log drops their
# marks (`rotate_inbox`); unread mail, and what a retried delivery looks for, stays at the top.
INBOX_TOP_FILES = 256
INBOX_KEEP_DAYS = 7
INBOX_ROTATE_BATCH = 32  # no rotation (and no rewrite of read.log) for fewer moves than this
LOUD_ROTATION = 2000  # a rotation of this many messages or more says so first (it takes a while)
# `send --batch` (v2) names its files in parts, this many first and then twice as many each
# time, each part made durable before its names (one syncfs): the router starts on the first
# part while the next is written, instead of waiting for the whole batch (issue 29).
SEND_CHUNK_FILES = 64
ARCHIVE_SEGMENT_BYTES = 4 * 1024 * 1024
SEGMENTS_DIR = "archived"
_MONTH = re.compile(r"(?P<month>[0-9]{4}-[0-9]{2})-[0-9]{2}T[^_]*_")


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True, slots=True)
class Mailbox:
    """The `.needlecast/` folder of the workspace at `root`."""

    root: Path
    # Each path below, made once: a routing pass asks for them per message (a pathlib join
    # each, some 14,000 joins in a pass of 1,000 messages).
    _paths: dict[tuple[str, ...], Path] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def _at(self, *parts: str) -> Path:
        found = self._paths.get(parts)
        if found is None:
            found = self._paths[parts] = self.root.joinpath(DIR_NAME, *parts)
        return found

    @property
    def dir(self) -> Path:
        return self._at()

    @property
    def inbox_file(self) -> Path:
        return self._at("inbox.md")

    @property
    def outbox_file(self) -> Path:
        return self._at("outbox.md")

    @property
    def archive_file(self) -> Path:
        return self._at("archive.md")

    @property
    def inbox_dir(self) -> Path:
        return self._at("inbox")

    @property
    def outbox_dir(self) -> Path:
        return self._at("outbox")

    @property
    def archive_dir(self) -> Path:
        return self._at("archive")

    @property
    def segments_dir(self) -> Path:
        """Where `archive.md` goes once it is full: one file per segment, oldest first."""
        return self._at(SEGMENTS_DIR)

    @property
    def dead_dir(self) -> Path:
        return self._at("dead-letters")

    @property
    def read_log(self) -> Path:
        return self._at("read.log")

    @property
    def state_dir(self) -> Path:
        return self._at(STATE_DIR)

    @property
    def journal(self) -> Path:
        return self._at(STATE_DIR, "journal.jsonl")

    def exists(self) -> bool:
        return self.dir.is_dir()

    def check_links(self) -> None:
        """Raise InvalidDocument SYMLINK_REFUSED when `.needlecast/`, or a file or folder the
        toolkit reads or writes in it, is a symbolic link (a cloned repository can plant one;
        the raw reads and writes below never follow one because of this check and O_NOFOLLOW).
        `.needlecast/` is reached once (`fs.folder_fd` refuses it if it is a link) and each name
        in it looked at from there."""
        try:
            with fs.folder_fd(self.dir) as dir_fd:
                for name in _CHECKED_NAMES:
                    try:
                        mode = os.lstat(name, dir_fd=dir_fd).st_mode
                    except FileNotFoundError:
                        continue
                    if stat.S_ISLNK(mode):
                        raise fs.symlink_refused(self.dir / name)
        except FileNotFoundError:
            return

    def layout(self) -> str:
        """`v2` when the workspace keeps one file per message, else `v1`."""
        return "v2" if self.inbox_dir.is_dir() or self.outbox_dir.is_dir() else "v1"


# The files and folders of `.needlecast/` that the toolkit reads or writes.
_CHECKED_NAMES = ("inbox.md", "outbox.md", "archive.md", "read.log", "inbox", "outbox", "archive", SEGMENTS_DIR, "dead-letters", STATE_DIR)


def init_mailbox(root: Path, layout: str = "v1") -> Mailbox:
    """Create `.needlecast/` for a workspace if missing; never touches an existing file."""
    if layout not in ("v1", "v2"):
        raise InvalidRequest(f"unknown layout {layout!r}; use v1 or v2", code="INVALID_REQUEST")
    box = Mailbox(root)
    box.check_links()
    box.dir.mkdir(parents=True, exist_ok=True)
    if layout == "v2":
        for folder in (box.inbox_dir, box.outbox_dir):
            folder.mkdir(exist_ok=True)
            # Git tracks files, not folders: without one, a clone would lack the empty folders
            # and take the workspace for layout v1. Readers skip dot files.
            fs.create_exclusive(folder / KEEP_FILE, KEEP_TEXT.encode())
    else:
        for name in ("inbox.md", "outbox.md"):
            fs.create_exclusive(box.dir / name, template(name).encode())
    return box


def template(name: str) -> str:
    """The packaged template text for `inbox.md` / `outbox.md` (a bare title if unavailable)."""
    try:
        from importlib.resources import files

        return (files("moss_files.templates") / "needlecast" / name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return f"# {name[:-3].capitalize()}\n"


# --------------------------------------------------------------------------- entries


def _entry(key: str | None, sender: str, raw: bytes, discriminator: str, message: Message | None, problem: MossError | None, source: Path, line: int) -> Entry:
    if key is None:
        key = msg.derive_id(sender, raw, discriminator)
    digest = msg.content_digest(message) if message is not None else msg.raw_digest(raw)
    return Entry(key, message, problem, raw, source, line, digest)


def mail_text(data: bytes) -> tuple[str, bool]:
    """A v1 mailbox file's text and whether it began with a BOM. Bytes that are not UTF-8 are
    kept as surrogate escapes, so a bad block costs that block alone and re-encoding with
    `encode_mail` gives back the same bytes."""
    bom = data.startswith(_BOM)
    return (data[len(_BOM) :] if bom else data).decode("utf-8", "surrogateescape"), bom


def encode_mail(text: str, bom: bool) -> bytes:
    """Inverse of `mail_text`."""
    return (_BOM if bom else b"") + text.encode("utf-8", "surrogateescape")


def scan_mailfile(data: bytes | None, path: Path, sender: str, *, max_message_bytes: int | None = None) -> tuple[list[Entry], str]:
    """Entries of a v1 mailbox file's bytes, and its preamble.

    The file is split into blocks first and each block judged alone: a block holding a NUL
    byte (BINARY_FILE), bytes that are not UTF-8 (INVALID_ENCODING) or, with
    `max_message_bytes`, more bytes than that (MESSAGE_TOO_LARGE) is an entry with that
    problem and its exact bytes, and the blocks beside it are read as usual. Only a file over
    MAX_MAILBOX_BYTES is one entry holding all its bytes.
    """
    if not data:
        return [], ""
    if len(data) > MAX_MAILBOX_BYTES:
        err = InvalidDocument(
            f"file is {len(data)} bytes; the limit for a mailbox file is {MAX_MAILBOX_BYTES}",
            code="FILE_TOO_LARGE",
            path=path,
            details={"max_bytes": MAX_MAILBOX_BYTES, "actual_bytes": len(data)},
        )
        return [_entry(None, sender, data, "file", None, err, path, 1)], ""
    text, _bom = mail_text(data)
    marker = conflicts.first_marker_line(text)
    if marker is not None:
        # Half of a git merge: which blocks are messages is for a person to settle. The file
        # is one entry with the problem, so readers list it and the router leaves it alone.
        return [_entry(None, sender, data, "file", None, conflicts.conflict_error(path, marker), path, marker)], ""
    try:
        formats.check_text("mailbox", text, path)
    except InvalidDocument as err:
        # A file a newer moss-files wrote (or a malformed marker): like a conflicted file, one
        # entry with the problem, which readers list and the router leaves alone.
        return [_entry(None, sender, data, "file", None, err, path, err.line or 1)], ""
    mailfile = msg.split_blocks(text)
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for block in mailfile.blocks:
        raw = block.raw.encode("utf-8", "surrogateescape")
        message: Message | None = None
        problem = _block_problem(raw, path, block.line, max_message_bytes)
        if problem is None:
            try:
                message = msg.parse_block(block, path=path)
            except InvalidDocument as err:
                problem = err
        # Identical id-less blocks get distinct ids by their order among equals.
        fingerprint = msg.raw_digest(raw)
        occurrence = seen.get(fingerprint, 0)
        seen[fingerprint] = occurrence + 1
        key = message.id if message is not None and message.id else None
        entries.append(_entry(key, message.sender or sender if message else sender, raw, str(occurrence), message, problem, path, block.line))
    return entries, mailfile.preamble


def _block_problem(raw: bytes, path: Path, line: int, max_message_bytes: int | None) -> InvalidDocument | None:
    """Why one block's bytes cannot be a message, before it is parsed; None when they can."""
    if max_message_bytes is not None and len(raw) > max_message_bytes:
        return InvalidDocument(
            f"message is {len(raw)} bytes; the limit is {max_message_bytes}",
            code="MESSAGE_TOO_LARGE",
            path=path,
            line=line,
            details={"max_bytes": max_message_bytes, "actual_bytes": len(raw)},
        )
    try:
        document.decode(raw, path, max_bytes=len(raw))
    except InvalidDocument as err:
        err.line = line + (err.line or 1) - 1  # from the block's first line to the file's
        return err
    return None


def message_names(folder: Path) -> list[str]:
    """The message file names of a file-per-message folder, sorted (so oldest first)."""
    try:
        names = fs.list_names(folder)
    except FileNotFoundError:
        return []
    # Dot files are our temporary and lock files, or an editor's swap files.
    return sorted(name for name in names if name.endswith(".md") and not name[:1] == ".")


def _message_files(folder: Path) -> list[Path]:
    return [folder / name for name in message_names(folder)]


def scan_message_file(data: bytes, path: Path, sender: str, *, max_message_bytes: int | None = None) -> Entry:
    """The entry of one v2 message file (MESSAGE_TOO_LARGE over `max_message_bytes`)."""
    message: Message | None = None
    problem: MossError | None = _block_problem(data, path, 1, max_message_bytes)
    if problem is None:
        try:
            text, _bom = document.decode(data, path, max_bytes=len(data))
            message = msg.parse_message_document(text, path=path)
        except InvalidDocument as err:
            problem = err
    key = message.id if message is not None and message.id else None
    return _entry(key, (message.sender if message else None) or sender, data, path.name, message, problem, path, 1)


def _settled(path: Path, data: bytes, now: float, *, unfinished: bool = False) -> bool:
    """False for content that may still be being written: it is empty, does not end in a line
    break, or (`unfinished`) ends in a message header not closed yet, and changed moments ago
    (a writer between two write calls; git, which checks a file out by creating it empty and
    then writing it)."""
    if data.endswith(b"\n") and not unfinished:
        return True
    try:
        return now - path.stat().st_mtime >= TAIL_SETTLE_SECONDS
    except FileNotFoundError:
        return True


@dataclass(frozen=True, slots=True)
class OutboxScan:
    """What an outbox holds: entries in order, and whether a fresh tail was left for later."""

    entries: tuple[Entry, ...]
    unsettled: bool = False
    preamble: str = ""


def read_outbox(box: Mailbox, sender: str) -> OutboxScan:
    """The pending entries of a sleeve's outbox (both layouts)."""
    box.check_links()
    now = time.time()
    entries: list[Entry] = []
    unsettled = False
    data = fs.read_snapshot(box.outbox_file).data
    found, preamble = scan_mailfile(data, box.outbox_file, sender, max_message_bytes=msg.MAX_MESSAGE_BYTES)
    unclosed = bool(found) and found[-1].problem is not None and found[-1].problem.code == "FRONTMATTER_UNCLOSED"
    if data and found and not _settled(box.outbox_file, data, now, unfinished=unclosed):
        found = found[:-1]
        unsettled = True
    entries.extend(found)
    for path, data in _read_message_files(box.outbox_dir):
        if data is None:
            continue
        if not _settled(path, data, now):
            unsettled = True
            continue
        entries.append(scan_message_file(data, path, sender, max_message_bytes=msg.MAX_MESSAGE_BYTES))
    return OutboxScan(tuple(entries), unsettled, preamble)


def _read_message_files(folder: Path) -> Iterator[tuple[Path, bytes | None]]:
    """(path, bytes) of each message file of a file-per-message folder, in name order, read
    through one descriptor of the folder (None for a file gone since it was listed)."""
    try:
        with fs.folder_fd(folder) as dir_fd:
            names = sorted(name for name in os.listdir(dir_fd) if name.endswith(".md") and not name.startswith("."))
            for name in names:
                yield folder / name, read_in(dir_fd, folder, name)
    except FileNotFoundError:
        return


def read_inbox(box: Mailbox, *, top_only: bool = False) -> list[Entry]:
    """Every entry of a sleeve's inbox, oldest first within each layout: `inbox.md`'s, then
    the month folders' of a file-per-message inbox (read messages rotated out of its top,
    `rotate_inbox`), then its top's. With `top_only`, not the month folders': every unread
    message and every new arrival is at the top, so a look for those reads what is bounded."""
    box.check_links()
    data = fs.read_snapshot(box.inbox_file).data
    entries, _preamble = scan_mailfile(data, box.inbox_file, "")
    for path in _message_files(box.inbox_dir) if top_only else inbox_message_files(box):
        data = read_if_any(path)
        if data is None and not top_only and path.parent == box.inbox_dir:
            # Rotated since the folders were listed: it is in its month folder now.
            path, data = _rotated_copy(box, path.name) or (path, None)
        if data is not None:
            entries.append(scan_message_file(data, path, ""))
    return entries


def inbox_message_files(box: Mailbox) -> list[Path]:
    """The files of a file-per-message inbox, oldest first: its month folders' (read messages
    rotated out of the top, in month order), then its top's. The top is listed first, so a
    message a rotation moves meanwhile is in one listing or both (then named once, in its
    month folder), never in neither."""
    top = _message_files(box.inbox_dir)
    rotated = rotated_inbox_files(box)
    moved = {path.name for path in rotated}
    return rotated + [path for path in top if path.name not in moved]


def rotated_inbox_files(box: Mailbox) -> list[Path]:
    """The files of a file-per-message inbox's month folders, in month order: messages read
    and rotated out of its top (`rotate_inbox`)."""
    return [path for month in _month_folders(box.inbox_dir) for path in _message_files(box.inbox_dir / month)]


def rotated_inbox_messages(box: Mailbox, key: str) -> list[Entry]:
    """The readable messages with id `key` in the inbox's month folders. A rotated file's name
    ends with its id (`rotate_inbox` moves no other), so only those files are read."""
    ending = f"_{safe_part(key)}.md"
    found = []
    for path in rotated_inbox_files(box):
        data = read_if_any(path) if path.name.endswith(ending) else None
        entry = scan_message_file(data, path, "") if data is not None else None
        if entry is not None and entry.message is not None and entry.key == key:
            found.append(entry)
    return found


def in_month_folder(entry: Entry) -> bool:
    """Whether an inbox entry is in one of the inbox's month folders: a message moved there is
    read (`rotate_inbox` moves only read ones, and read.log then drops its mark)."""
    return MONTH_FOLDER.fullmatch(entry.source.parent.name) is not None


def is_read(entry: Entry, marks: Set[tuple[str, str]]) -> bool:
    """Whether an inbox entry is read: marked in read.log, or rotated into a month folder."""
    if entry.message is None:
        return False
    return (entry.message.sender or "", entry.key) in marks or in_month_folder(entry)


def read_archive(box: Mailbox, sender: str) -> list[Entry]:
    """Every entry of a sleeve's archive (both layouts), oldest first within each."""
    box.check_links()
    entries: list[Entry] = []
    for path in [*_message_files(box.segments_dir), box.archive_file]:
        entries.extend(scan_mailfile(read_if_any(path), path, sender)[0])
    for path in archive_message_files(box):
        data = read_if_any(path)
        if data is not None:
            entries.append(scan_message_file(data, path, sender))
    return entries


def archive_message_files(box: Mailbox) -> list[Path]:
    """The files of a file-per-message archive, oldest first: its month folders' (rotated, in
    month order), then its top's."""
    months = _month_folders(box.archive_dir)
    return [path for month in months for path in _message_files(box.archive_dir / month)] + _message_files(box.archive_dir)


def _month_folders(folder: Path) -> list[str]:
    """The names of `folder`'s month folders (`2026-01`), in order."""
    return sorted(name for name in _names(folder) if MONTH_FOLDER.fullmatch(name) and (folder / name).is_dir())


def _names(folder: Path) -> list[str]:
    try:
        return fs.list_names(folder)
    except FileNotFoundError:
        return []


# --------------------------------------------------------------------------- merge rules


def _missing_blocks(current: bytes | None, leftover: bytes, sender: str, identity: Callable[[Entry], Any], skip: Callable[[Entry], bool]) -> bytes:
    """Blocks of `leftover` whose identity is absent from `current` (and not to be skipped),
    joined ready to append."""
    have = {identity(entry) for entry in scan_mailfile(current, Path("current"), sender)[0]}
    blocks = []
    for entry in scan_mailfile(leftover, Path("leftover"), sender)[0]:
        if identity(entry) not in have and not skip(entry):
            blocks.append(entry.raw.decode("utf-8", "surrogateescape").rstrip("\r\n") + "\n\n")
    if not blocks:
        return b""
    prefix = b"" if not current or current.endswith(b"\n\n") else (b"\n" if current.endswith(b"\n") else b"\n\n")
    return prefix + "".join(blocks).encode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------- delivery

DELIVERED, PRESENT, CONFLICT = "delivered", "present", "conflict"


def _identity(entry: Entry) -> tuple[str, str]:
    sender = entry.message.sender if entry.message is not None and entry.message.sender else ""
    return (sender, entry.key)


def inbox_merge(current: bytes | None, leftover: bytes) -> bytes:
    """Merge rule for inboxes: keep every message of the leftover not already present."""
    return _missing_blocks(current, leftover, "", _identity, lambda entry: False)


def safe_part(text: str, limit: int = 60) -> str:
    """A file-name-safe rendering of an id or name; distinct inputs stay distinct."""
    cleaned = _SAFE.sub("-", text)[:limit] or "x"
    if cleaned != text:
        cleaned += "-" + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=3).hexdigest()
    return cleaned


def time_stamp(value: str | None, fallback: datetime) -> str:
    """`2026-01-21T10-00-00Z` from an RFC 3339 time (the fallback when it is not one)."""
    moment = fallback
    if value:
        try:
            parsed = datetime.fromisoformat(value.replace("z", "Z"))
            moment = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except ValueError:
            pass
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")


def message_file_name(message: Message, now: datetime) -> str:
    """`<time>_<from>_<id>.md` for a file-per-message inbox or archive."""
    return f"{time_stamp(message.time, now)}_{safe_part(message.sender or 'unknown', 40)}_{safe_part(message.id or 'x')}.md"


def _suffix(message: Message) -> str:
    return f"_{safe_part(message.sender or 'unknown', 40)}_{safe_part(message.id or 'x')}.md"


def deliver(box: Mailbox, messages: list[Message], now: datetime) -> list[str]:
    """Put messages into an inbox, each at most once per (from, id).

    Returns, per message, `delivered`, `present` (already there, same content) or `conflict`
    (that sender's id is there with different content). Raises InvalidDocument when the inbox
    file is unreadable (nothing is written), Conflict on a lock timeout.
    """
    return deliver_many([(box, messages)], now)[0]


def deliver_many(batches: list[tuple[Mailbox, list[Message]]], now: datetime) -> list[list[str]]:
    """`deliver` for several inboxes; the file-per-message ones among them share one durable
    step (`shared_file.create_in_folders`) instead of taking two each. Raises as `deliver`, for
    the whole batch."""
    _check_deliverable(batches)
    results: list[list[str]] = [[] for _ in batches]
    folders: list[int] = []
    for number, (box, messages) in enumerate(batches):
        if box.inbox_dir.is_dir():
            folders.append(number)
        else:
            results[number] = _deliver_file(box, messages)
    if folders:
        for number, found in zip(folders, _deliver_files([batches[number] for number in folders], now), strict=True):
            results[number] = found
    return results


def _check_deliverable(batches: list[tuple[Mailbox, list[Message]]]) -> None:
    """Raise, before anything is written, when a message cannot be delivered as it is
    (MESSAGE_INVALID, MESSAGE_TOO_LARGE) or an inbox cannot take it (SLEEVE_UNAVAILABLE)."""
    for box, messages in batches:
        for message in messages:
            if not message.id or not message.sender:
                raise InvalidRequest("a delivered message needs an id and a sender", code="MESSAGE_INVALID")
            msg.check_writable(message)
            msg.check_size(message)
        box.check_links()
        if not box.dir.is_dir():
            raise NotFound("workspace has no .needlecast folder", code="SLEEVE_UNAVAILABLE", path=box.dir)


class _Spots:
    """Hash of a message's (from, id) -> where its block lies (start << 32 | length), in about
    16 bytes a message: two aligned arrays of 64-bit numbers sorted by hash, and the newest
    spots in a dict, merged into the arrays once it holds an eighth as many (a dict of every
    message took ~180 bytes each, a router's memory growing with every inbox it delivers into
    for as long as the inbox is not emptied). A hash met twice keeps the later spot."""

    __slots__ = ("fresh", "hashes", "spots")

    def __init__(self) -> None:
        self.hashes = array("Q")
        self.spots = array("Q")
        self.fresh: dict[int, int] = {}

    def get(self, key: int) -> int | None:
        found = self.fresh.get(key)
        if found is not None:
            return found
        at = bisect.bisect_left(self.hashes, key)
        return self.spots[at] if at < len(self.hashes) and self.hashes[at] == key else None

    def add_all(self, found: list[tuple[int, int]]) -> None:
        self.fresh.update(found)
        if len(self.fresh) <= max(64, len(self.hashes) // 8):
            return
        fresh = self.fresh
        # One number a message (hash << 64 | spot): sorting them sorts by hash, spots aligned.
        kept = (key << 64 | spot for key, spot in zip(self.hashes, self.spots, strict=True) if key not in fresh)
        both = sorted([*kept, *(key << 64 | spot for key, spot in fresh.items())])
        self.hashes = array("Q", (number >> 64 for number in both))
        self.spots = array("Q", (number & 0xFFFFFFFFFFFFFFFF for number in both))
        self.fresh = {}


@dataclass(slots=True)
class _Index:
    """What an inbox held when last read, in a few bytes a message: the length and hash of its
    text then, where its last block starts, and for every message before that block the hash
    of its (from, id) -> where its block lies (`_Spots`). Neither the text nor the messages
    are kept: a router delivering into a v1 inbox for a year holds no copy of it."""

    length: int
    digest: bytes
    last_start: int
    before: _Spots


_INDEXES: dict[Path, _Index] = {}  # used under each inbox's lock, so never shared mid-update


def _text_digest(text: str, length: int | None = None) -> bytes:
    """The hash of `text[:length]` (all of it by default), taken a MiB at a time: the bytes of a
    whole inbox (and a copy of its text once it had grown) raised a router's memory by the
    inbox's size at each delivery."""
    digest = hashlib.blake2b(digest_size=16)
    end = len(text) if length is None else min(length, len(text))
    for start in range(0, end, _DIGEST_CHUNK):
        digest.update(text[start : min(end, start + _DIGEST_CHUNK)].encode("utf-8", "surrogateescape"))
    return digest.digest()


_DIGEST_CHUNK = 1 << 20


def _identity_hash(identity: tuple[str, str]) -> int:
    data = f"{identity[0]}\x00{identity[1]}".encode("utf-8", "surrogateescape")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class _InboxIdentities:
    """(from, id) -> content digest of the readable messages of an inbox's text: the messages
    of its last block and those added since (`recent`) are held whole; for the others the
    index says where the block lies, and that block alone is parsed to answer (a hash shared
    by two identities is settled by reading the whole text)."""

    def __init__(self, text: str, path: Path, before: _Spots | dict[int, int], recent: dict[tuple[str, str], str]) -> None:
        self.text, self.path, self.before, self.recent = text, path, before, recent

    def get(self, identity: tuple[str, str]) -> str | None:
        if identity in self.recent:
            return self.recent[identity]
        spot = self.before.get(_identity_hash(identity))
        if spot is None:
            return None
        start, length = spot >> 32, spot & 0xFFFFFFFF
        blocks = msg.split_blocks(self.text[start : start + length]).blocks
        found = _inbox_identity(blocks[0], self.path) if len(blocks) == 1 and len(blocks[0].raw) == length else None
        if found is not None and found[0] == identity:
            return found[1]
        return self.read_all().get(identity)

    def read_all(self) -> dict[tuple[str, str], str]:
        """Every readable message of the text, parsed (the slow answer)."""
        have: dict[tuple[str, str], str] = {}
        for block in msg.split_blocks(self.text).blocks:
            entry = _inbox_identity(block, self.path)
            if entry is not None:
                have[entry[0]] = entry[1]
        have.update(self.recent)
        return have

    def __contains__(self, identity: tuple[str, str]) -> bool:
        return self.get(identity) is not None

    def __getitem__(self, identity: tuple[str, str]) -> str:
        found = self.get(identity)
        if found is None:
            raise KeyError(identity)
        return found

    def __setitem__(self, identity: tuple[str, str], digest: str) -> None:
        self.recent[identity] = digest


def _identities(text: str, path: Path) -> _InboxIdentities:
    """(from, id) -> content digest of every readable message in an inbox's text.

    Inboxes mostly grow at the end, so the last reading is kept (`_Index`) and only what
    follows its last block is parsed again; any other change means a full read.
    """
    cached = _INDEXES.pop(path, None)  # put back once brought up to date
    start, before = 0, _Spots()
    if cached is not None and len(text) >= cached.length and _text_digest(text, cached.length) == cached.digest:
        # Extended in place: a spot of a block read since is checked against the text (`get`).
        start, before = cached.last_start, cached.before
    mailfile = msg.split_blocks(text[start:])
    position = start + len(mailfile.preamble)
    recent: dict[tuple[str, str], str] = {}
    found: list[tuple[int, int]] = []
    last_start = position
    for number, block in enumerate(mailfile.blocks):
        entry = _inbox_identity(block, path)
        if number == len(mailfile.blocks) - 1:
            last_start = position
            if entry is not None:
                recent[entry[0]] = entry[1]
        elif entry is not None:
            # A mailbox file holds at most MAX_MAILBOX_BYTES, so 32 bits hold a block's length.
            found.append((_identity_hash(entry[0]), position << 32 | len(block.raw)))
        position += len(block.raw)
    if not mailfile.blocks:
        last_start = start
    before.add_all(found)
    _INDEXES[path] = _Index(len(text), _text_digest(text), last_start, before)
    return _InboxIdentities(text, path, before, recent)


def _inbox_identity(block: msg.Block, path: Path) -> tuple[tuple[str, str], str] | None:
    if _BAD_BYTES.search(block.raw):
        return None  # bytes that are not UTF-8 (kept as escapes): never a message we delivered
    try:
        message = msg.parse_block(block, path=path)
    except InvalidDocument:
        return None
    if not message.id:
        return None  # a hand-written block without an id was never delivered by us
    return (message.sender or "", message.id), msg.content_digest(message)


def _deliver_file(box: Mailbox, messages: list[Message]) -> list[str]:
    results: list[str] = []

    def transform(data: bytes | None) -> bytes | None:
        results.clear()
        text, bom = (template("inbox.md"), False) if data is None else mail_text(data)
        formats.check_text("mailbox", text, box.inbox_file)  # never write into a newer format
        have = _identities(text, box.inbox_file) if data is not None else _InboxIdentities("", box.inbox_file, {}, {})
        mailfile_dialect = _dialect_hint(text[:8192].encode("utf-8", "surrogateescape"))
        newline = "\r\n" if "\r\n" in text[: text.find("\n") + 1] else "\n"
        blocks = []
        for message in messages:
            ident = (message.sender or "", message.id or "")
            digest = msg.content_digest(message)
            if ident in have:
                results.append(PRESENT if have[ident] == digest else CONFLICT)
                continue
            have[ident] = digest
            results.append(DELIVERED)
            blocks.append(msg.render_block(message, capitalised=mailfile_dialect, newline=newline))
        if not blocks:
            return None
        # A delivery rewrites the file: an older one is written at the current format version.
        new = encode_mail(msg.join_blocks(formats.upgrade_text("mailbox", text, formats.Facts(str(box.inbox_file))), blocks, newline), bom)
        if len(new) > MAX_MAILBOX_BYTES:
            # Past this its reader would refuse the whole file: hold the messages instead (they
            # wait in the senders' outboxes) until the inbox is emptied or moved to layout v2.
            raise Conflict(
                f"delivering would grow {box.inbox_file.name} to {len(new)} bytes, past the {MAX_MAILBOX_BYTES} a mailbox file may hold",
                code="INBOX_FULL",
                status=507,
                path=box.inbox_file,
                details={"max_bytes": MAX_MAILBOX_BYTES, "would_be_bytes": len(new)},
                hint="move read messages out of inbox.md (or switch the sleeve to layout v2); the messages wait in the senders' outboxes",
            )
        return new

    rewrite(box.inbox_file, transform, inbox_merge)
    return list(results)


def _folder_index(names: list[str]) -> dict[str, str]:
    """Map of `_<from>_<id>.md` suffix to file name for a file-per-message folder's names."""
    index: dict[str, str] = {}
    for name in names:
        _time, separator, rest = name.partition("_")
        if separator:
            index["_" + rest] = name
    return index


@dataclass(slots=True)
class FolderDelivery:
    """Deliveries into file-per-message inboxes, decided under the inboxes' locks (which the
    caller holds until the files are in place): per batch the results, and per folder the
    files to create."""

    results: list[list[str]]
    groups: list[tuple[Path, list[tuple[str, bytes]]]]


def plan_folder_deliveries(batches: list[tuple[Mailbox, list[Message]]], now: datetime, stack: ExitStack) -> FolderDelivery:
    """Take the lock of every file-per-message inbox of `batches` into `stack` (in path order,
    so two routers never wait on each other) and decide each message's result and file: a
    message whose (from, id) the folder holds is `present` (same content) or `conflict`.
    Raises as `deliver`, for the whole batch, before anything is written."""
    _check_deliverable(batches)
    for folder in sorted({box.inbox_dir for box, _messages in batches}):
        stack.enter_context(fs.locked(folder))
    results: list[list[str]] = []
    groups: list[tuple[Path, list[tuple[str, bytes]]]] = []
    planned: dict[Path, tuple[dict[str, str], bool, set[str]]] = {}  # folder -> (suffix index, dialect, month folders)
    written: dict[Path, dict[str, bytes]] = {}  # what this batch will write, by folder and name
    for box, messages in batches:
        if box.inbox_dir not in planned:
            wanted = {_suffix(message) for other, listed in batches if other.inbox_dir == box.inbox_dir for message in listed}
            index, newest, months = _find_suffixes(box.inbox_dir, wanted)
            planned[box.inbox_dir] = (index, _dialect_of_file(read_if_any(box.inbox_dir / newest)) if newest else False, months)
        index, capitalised, months = planned[box.inbox_dir]
        ours = written.setdefault(box.inbox_dir, {})
        found: list[str] = []
        new: list[tuple[str, bytes]] = []
        for message in messages:
            suffix = _suffix(message)
            if suffix in index:
                if index[suffix] in ours:  # planned earlier in this batch (two names for one inbox)
                    same = ours[index[suffix]] == _render_for(message, capitalised)
                else:
                    existing = read_if_any(box.inbox_dir / index[suffix])
                    same = existing is not None and scan_message_file(existing, box.inbox_dir / index[suffix], "").digest == msg.content_digest(message)
                found.append(PRESENT if same else CONFLICT)
                continue
            name = message_file_name(message, now)
            rotated = _rotated_copy(box, name) if name[:7] in months else None
            if rotated is not None:
                # Read and rotated since it was delivered: a retry finds it by its name.
                found.append(PRESENT if scan_message_file(rotated[1], rotated[0], "").digest == msg.content_digest(message) else CONFLICT)
                continue
            new.append((name, _render_for(message, capitalised)))
            ours[name] = new[-1][1]
            index[suffix] = name
            found.append(DELIVERED)
        results.append(found)
        groups.append((box.inbox_dir, new))
    return FolderDelivery(results, groups)


def _rotated_copy(box: Mailbox, name: str) -> tuple[Path, bytes] | None:
    """The path and bytes of the file `name` in the inbox's month folder of its time, where
    `rotate_inbox` moves read messages; None when it is not there."""
    match = _MONTH.match(name)
    if match is None:
        return None
    path = box.inbox_dir / match.group("month") / name
    data = read_if_any(path)
    return None if data is None else (path, data)


def _find_suffixes(folder: Path, wanted: set[str]) -> tuple[dict[str, str], str | None, set[str]]:
    """The message files of a file-per-message folder whose `_<from>_<id>.md` suffix is in
    `wanted` (suffix -> name; the newest name when several share one, as `_folder_index` of the
    sorted names), the newest message file's name (None without one), and the names of its
    month folders (`rotate_inbox`'s). The folder is read entry by entry: what this holds grows
    with the batch, never with the folder (a list and an index of every name took ~200 bytes a
    message at each pass, an unread inbox of 25,000 messages raising a router's memory by 5 MB)."""
    found: dict[str, str] = {}
    newest: str | None = None
    months: set[str] = set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                name = entry.name
                if MONTH_FOLDER.fullmatch(name) and entry.is_dir(follow_symlinks=False):
                    months.add(name)
                    continue
                # Dot files are our temporary and lock files, or an editor's swap files.
                if not name.endswith(".md") or name[:1] == ".":
                    continue
                if newest is None or name > newest:
                    newest = name
                _time, separator, rest = name.partition("_")
                if separator and "_" + rest in wanted and name > found.get("_" + rest, ""):
                    found["_" + rest] = name
    except FileNotFoundError:
        return {}, None, months
    except PermissionError as exc:
        raise fs.not_readable(str(folder), exc, folder=True) from None
    return found, newest, months


def _deliver_files(batches: list[tuple[Mailbox, list[Message]]], now: datetime) -> list[list[str]]:
    """Deliver into file-per-message inboxes, holding every one's lock until all the new
    files are durable."""
    with ExitStack() as stack:
        planned = plan_folder_deliveries(batches, now, stack)
        create_in_folders(planned.groups)
    return planned.results


def _render_for(message: Message, capitalised: bool) -> bytes:
    return msg.render_message_document(message, capitalised=capitalised).encode("utf-8")


def create_files(folder: Path, files: list[tuple[str, bytes]]) -> list[bool]:
    """Create each (name, data) in `folder` unless the name exists; True where created:
    durable and never replacing a file, with one durable step for the batch
    (`shared_file.create_many`)."""
    return create_many(folder, files)


def _dialect_of_file(data: bytes | None) -> bool:
    """True when a message file's header uses capitalised keys."""
    head = (data or b"")[:400].decode("utf-8", "replace")
    for line in head.split("\n")[1:]:
        if re.match(r"(?i:id|from|to|thread|type|time)\s*:", line):
            return line[:1].isupper()
    return False


# --------------------------------------------------------------------------- sending


def append_outbox(box: Mailbox, message: Message, now: datetime) -> Path:
    """Add a message to the sleeve's own outbox; return the file written.

    v1 appends one block with a single write under the outbox lock (agents appending by hand
    take no lock, and O_APPEND keeps both intact); v2 creates a new file.
    """
    msg.check_writable(message)
    msg.check_size(message)
    box.check_links()
    # End with a line break: the router leaves a file without one alone for a moment, taking
    # it for a write still in progress.
    message = msg.with_changes(message, body=msg.normalize_body(message.body))
    if box.outbox_dir.is_dir():
        path = box.outbox_dir / f"{time_stamp(message.time, now)}_{safe_part(message.id or 'x')}.md"
        # The folder is opened once for the listing, the newest file (its key case) and the write.
        with fs.folder_fd(box.outbox_dir) as dir_fd:
            names = [name for name in os.listdir(dir_fd) if name.endswith(".md") and name[:1] != "."]
            newest = read_in(dir_fd, box.outbox_dir, max(names)) if names else None
            data = msg.render_message_document(message, capitalised=_dialect_of_file(newest)).encode("utf-8")
            if not fs.create_exclusive(path, data, dir_fd=dir_fd):
                raise Conflict("a message with this id is already in the outbox", code="ALREADY_EXISTS", path=path)
        return path
    _append_blocks(box, [message])
    return box.outbox_file


def append_outbox_many(box: Mailbox, messages: list[Message], now: datetime) -> list[Path]:
    """Add several messages to the sleeve's own outbox in one durable step; return the file
    written for each (`append_outbox`, for a batch).

    Every message is checked before anything is written. v2 creates one file per message,
    in parts (SEND_CHUNK_FILES, then twice as many each time), each made durable together and
    then named, in order
    (`shared_file.create_many`), so that the router delivers the first while the rest are
    written; v1 appends all the blocks with a single write under the outbox lock. Either the
    whole batch is in the outbox or, after a crash, none of it, except v2 files written but not
    all named (the batch's first messages, each whole; the router routes each once). Raises
    Conflict ALREADY_EXISTS, writing nothing, when the outbox holds a file of one of the
    batch's ids.
    """
    if not messages:
        return []
    for message in messages:
        msg.check_writable(message)
        msg.check_size(message)
    box.check_links()
    messages = [msg.with_changes(message, body=msg.normalize_body(message.body)) for message in messages]
    if box.outbox_dir.is_dir():
        with fs.folder_fd(box.outbox_dir) as dir_fd:
            names = [name for name in os.listdir(dir_fd) if name.endswith(".md") and name[:1] != "."]
            capitalised = _dialect_of_file(read_in(dir_fd, box.outbox_dir, max(names)) if names else None)
        files = [
            (f"{time_stamp(m.time, now)}_{safe_part(m.id or 'x')}.md", msg.render_message_document(m, capitalised=capitalised).encode("utf-8"))
            for m in messages
        ]
        taken = set(names) & {name for name, _data in files}
        if taken or len({name for name, _data in files}) < len(files):
            raise Conflict(
                "a message with this id is already in the outbox (or twice in the batch)",
                code="ALREADY_EXISTS",
                path=box.outbox_dir / min(taken or {files[0][0]}),
            )
        created = create_many(box.outbox_dir, files, chunk=SEND_CHUNK_FILES)
        if not all(created):
            # Someone wrote one of these names since the listing: the rest are in the outbox.
            name = next(name for (name, _data), made in zip(files, created, strict=True) if not made)
            raise Conflict("a message with this id is already in the outbox", code="ALREADY_EXISTS", path=box.outbox_dir / name)
        return [box.outbox_dir / name for name, _data in files]
    _append_blocks(box, messages)
    return [box.outbox_file] * len(messages)


def _append_blocks(box: Mailbox, messages: list[Message]) -> None:
    """Append the messages' blocks to the one-file (v1) outbox in one write, under its lock:
    refused when it holds conflict markers or a newer format, made from the template when
    missing, written in the dialect (key case) its first block uses."""
    box.dir.mkdir(parents=True, exist_ok=True)
    with fs.locked(box.outbox_file):
        refuse_conflicted(box.outbox_file, read_if_any(box.outbox_file))
        head, tail = read_ends(box.outbox_file)
        if head is None:
            fs.create_exclusive(box.outbox_file, template("outbox.md").encode("utf-8"))
            head, tail = read_ends(box.outbox_file)
        formats.check_text("mailbox", (head or b"").decode("utf-8", "replace"), box.outbox_file)  # never append to a newer format
        capitalised = _dialect_hint(head or b"")
        blocks = "".join(msg.render_block(message, capitalised=capitalised) for message in messages)
        prefix = "" if not tail or tail.endswith(b"\n\n") else ("\n" if tail.endswith(b"\n") else "\n\n")
        fs.append_line(box.outbox_file, (prefix + blocks).encode("utf-8"))  # one write; a block ends in a line break


def _dialect_hint(head: bytes) -> bool:
    """True when the first message block in `head` uses capitalised keys."""
    text = head.decode("utf-8", "replace")
    return bool(msg.dialect_of(msg.split_blocks(text[: text.rfind("\n") + 1])))


# --------------------------------------------------------------------------- archive, removal


def archive(
    box: Mailbox, messages: list[Message], now: datetime, *, files: bool, segment_bytes: int = ARCHIVE_SEGMENT_BYTES, top: ArchiveTop | None = None
) -> None:
    """Record routed messages in the sender's archive, each once (by id); `archive.md` first
    becomes a segment when it holds `segment_bytes` (`_rotate_archive_file`). `top`: what the
    caller knows the file-per-message archive's top holds (`archive_top`), kept up to date."""
    if not messages:
        return
    if files:
        box.archive_dir.mkdir(parents=True, exist_ok=True)
        written = archive_files(box, messages, now, top)
        try:
            create_files(box.archive_dir, written)
        except BaseException:
            if top is not None:
                top.forget_all()  # some of the files may be in place: list the top again
            raise
        if top is not None:
            top.add(name for name, _data in written)
            top.sign(box.archive_dir)
        return
    with fs.locked(box.archive_file):
        _rotate_archive_file(box, now, segment_bytes)
        head, _tail = read_ends(box.archive_file)
        if head is None:
            head = formats.stamp_text("mailbox", "# Archive\n\n").encode("utf-8")
            fs.create_exclusive(box.archive_file, head)
        formats.check_text("mailbox", head.decode("utf-8", "replace"), box.archive_file)  # never append to a newer format
        capitalised = _dialect_hint(head)
        blocks = [msg.render_block(m, capitalised=capitalised) for m in messages]
        # Only a crash between this append and the journal's `archived` record can make the
        # router archive a batch again, and then the batch is what the file ends with: look
        # for each block's opening lines in the tail rather than reading the whole archive.
        window = 2 * sum(len(b.encode()) for b in blocks) + 4096
        _head, recent = read_ends(box.archive_file, 0, window)
        if len(recent) < window:
            # Just rotated: the batch a crash left may end the newest segment instead.
            recent = _newest_segment_tail(box, window) + recent
        todo = [b for b in blocks if _opening(b) not in recent]
        if not todo:
            return
        tail = recent[-2:]
        prefix = "" if tail.endswith(b"\n\n") else ("\n" if tail.endswith(b"\n") else "\n\n")
        fs.append_line(box.archive_file, (prefix + "".join(todo)).encode("utf-8"))  # whole blocks: one write


def _rotate_archive_file(box: Mailbox, now: datetime, segment_bytes: int) -> None:
    """Make `archive.md` a segment (`archived/<time>.md`) once it holds `segment_bytes`;
    the caller holds the archive's lock. One rename: at every instant each block is in exactly
    one file, and the next append starts a new `archive.md`."""
    try:
        size = os.lstat(box.archive_file).st_size
    except FileNotFoundError:
        return
    if size < segment_bytes:
        return
    box.segments_dir.mkdir(exist_ok=True)
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    taken = set(_names(box.segments_dir))
    name = next(f"{stamp}{'' if n == 0 else f'-{n}'}.md" for n in range(len(taken) + 1) if f"{stamp}{'' if n == 0 else f'-{n}'}.md" not in taken)
    with fs.folder_fd(box.dir) as dir_fd, fs.folder_fd(box.segments_dir) as segments_fd:
        # rename(2), not link and unlink: a kill between those would leave the blocks twice.
        # Under the archive's lock nobody else names a segment, so nothing is replaced.
        os.rename("archive.md", name, src_dir_fd=dir_fd, dst_dir_fd=segments_fd)
        os.fsync(segments_fd)
        os.fsync(dir_fd)


def _newest_segment_tail(box: Mailbox, size: int) -> bytes:
    """The last `size` bytes of the newest `archive.md` segment (b"" without one)."""
    names = _message_files(box.segments_dir)
    return read_ends(names[-1], 0, size)[1] if names else b""


def rotate_archive_folder(
    box: Mailbox,
    pending: Iterable[Entry],
    sender: str,
    *,
    top_files: int = ARCHIVE_TOP_FILES,
    top: ArchiveTop | None = None,
) -> int:
    """Move the routed messages of a file-per-message archive's top into a folder per month
    (`archive/2026-01/`, the month of the file name's time) once the top holds more than
    `top_files`; return how many moved. The caller holds the sender's route lock.

    `top`: what the caller knows the top holds (`archive_top`), kept up to date here, so that a
    pass does not list the top (a folder that once held many files stays slow to list).

    A message still in the outbox (`pending`) stays at the top, where the router looks for a
    copy that a killed pass archived already. Each move is one rename that never replaces a
    file (renameat2 RENAME_NOREPLACE; else the month folder is listed first), so a message is
    in exactly one place at every instant; the folders are made durable together at the end.
    """
    known = archive_top(box, top).names
    if len(known) <= top_files:
        return 0
    names = sorted(known)
    keep = {f"_{safe_part(sender, 40)}_{safe_part(entry.key)}.md" for entry in pending}
    moves: dict[str, list[str]] = {}
    for name in names:
        match = _MONTH.match(name)
        if match and "_" + name.partition("_")[2] not in keep:
            moves.setdefault(match.group("month"), []).append(name)
    try:
        gone = _move_to_months(box.archive_dir, moves)
    except BaseException:
        if top is not None:
            top.forget_all()  # list the top again next time
        raise
    if top is not None:
        top.forget(gone)
        top.sign(box.archive_dir)
    return len(gone)


def _move_to_months(top: Path, moves: Mapping[str, Iterable[str]]) -> list[str]:
    """Move files of the folder `top` into its month folders (`moves`: month -> names), each
    by one rename that never replaces a file (renameat2 RENAME_NOREPLACE; else the month
    folder is listed first), so a message is in exactly one place at every instant; the
    folders are made durable together at the end. Returns the names moved: a name its month
    folder holds already (a git merge brought both) stays where it is, for a person."""
    gone: list[str] = []
    with ExitStack() as stack:
        top_fd = stack.enter_context(fs.folder_fd(top))
        touched = [top_fd]
        for month, files in moves.items():
            folder = stack.enter_context(fs.folder_fd(top / month, create=True))
            touched.append(folder)
            there: set[str] | None = None
            for name in files:
                done = rename_noreplace(name, name, src_dir_fd=top_fd, dst_dir_fd=folder)
                if done is None:
                    # No RENAME_NOREPLACE here: look at the month folder once, then rename.
                    there = set(os.listdir(folder)) if there is None else there
                    if name not in there:
                        os.rename(name, name, src_dir_fd=top_fd, dst_dir_fd=folder)
                        there.add(name)
                        done = True
                if done:
                    gone.append(name)
        fsync_all(touched)
    return gone


@dataclass(slots=True)
class ArchiveTop:
    """The message file names at the top of a file-per-message archive, as a router listed
    them and then changed them itself (`archive_top`), with the folder's signature after its
    own last change: a change by anyone else (a git pull, a person, another router) changes
    the signature, and the top is listed again."""

    names: set[str]
    suffixes: dict[str, str]  # `_<from>_<id>.md` -> file name (`_folder_index`)
    signature: tuple[int, int, int] | None

    def add(self, names: Iterable[str]) -> None:
        for name in names:
            self.names.add(name)
            self.suffixes.update(_folder_index([name]))

    def forget(self, names: Iterable[str]) -> None:
        for name in names:
            self.names.discard(name)
            _time, separator, rest = name.partition("_")
            if separator and self.suffixes.get("_" + rest) == name:
                del self.suffixes["_" + rest]

    def forget_all(self) -> None:
        """Make the next `refresh` list the folder again (after a change that failed midway)."""
        self.signature = None

    def sign(self, folder: Path) -> None:
        """Record the folder's signature after a change of the caller's own."""
        self.signature = _folder_signature(folder)

    def refresh(self, folder: Path) -> ArchiveTop:
        """List the folder again unless it is unchanged since the holder's own last change."""
        signature = _folder_signature(folder)
        if signature is None or signature != self.signature:
            names = message_names(folder)
            self.names, self.suffixes, self.signature = set(names), _folder_index(names), signature
        return self


def _folder_signature(folder: Path) -> tuple[int, int, int] | None:
    """(inode, change time, links) of a folder: any name added or removed changes it (Linux
    gives a folder changed after a look at it a fine-grained time); None when it is missing."""
    try:
        found = os.stat(folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return (found.st_ino, found.st_ctime_ns, found.st_nlink)


def archive_top(box: Mailbox, known: ArchiveTop | None = None) -> ArchiveTop:
    """What a file-per-message archive's top holds: `known` when the folder is unchanged since
    its holder's own last change (its signature), else a fresh listing."""
    return (known if known is not None else ArchiveTop(set(), {}, None)).refresh(box.archive_dir)


def archive_files(box: Mailbox, messages: list[Message], now: datetime, top: ArchiveTop | None = None) -> list[tuple[str, bytes]]:
    """The (name, bytes) of the file-per-message archive files to create for `messages`: those
    whose id the archive's top does not hold yet (a repeat after a crash finds its copy there;
    `top` is what the caller knows the top holds, else it is listed)."""
    index = archive_top(box, top).suffixes
    return [(message_file_name(m, now), msg.render_message_document(m).encode("utf-8")) for m in messages if _suffix(m) not in index]


def _opening(block: str) -> bytes:
    """A rendered block's fence and first header line (its id line), as bytes."""
    return "\n".join(block.split("\n", 2)[:2]).encode() + b"\n"


def outbox_merge(done: Callable[[Entry], bool], sender: str) -> Merge:
    """Merge rule for an outbox: keep every block of the leftover that is neither in the
    current file nor already routed (`done`)."""
    return lambda current, leftover: _missing_blocks(current, leftover, sender, lambda e: (e.key, e.digest), done)


def outbox_settled(done: Callable[[Entry], bool], sender: str) -> Callable[[bytes], bool]:
    """When a displaced outbox version may go: once every message it holds is routed (`done`).
    Until then a block folded back from it can still be saved away by an editor that read the
    outbox just before the fold, and the version is the block's only other copy."""
    return lambda leftover: all(
        entry.message is None or entry.problem is not None or done(entry) for entry in scan_mailfile(leftover, Path("leftover"), sender)[0]
    )


def remove_from_outbox(
    box: Mailbox, sender: str, routed: Iterable[Entry], done: Callable[[Entry], bool], *, settle: bool = True, set_aside: Mapping[Path, str] | None = None
) -> None:
    """Take routed entries out of the outbox; blocks that changed or were added meanwhile stay.

    With `settle` False the removal of file-per-message entries is not made durable here: the
    caller makes `box.outbox_dir` durable later (with the other outboxes of its pass).
    `set_aside`: file-per-message entries already set aside and compared
    (`set_aside_outbox_files`), by their name aside."""
    file_entries = [entry for entry in routed if entry.source == box.outbox_file]
    folder_entries = [entry for entry in routed if entry.source != box.outbox_file]
    if file_entries:
        wanted = {(entry.key, entry.digest) for entry in file_entries}
        whole = [entry for entry in file_entries if entry.problem is not None and entry.problem.code == "FILE_TOO_LARGE"]

        def transform(data: bytes | None) -> bytes | None:
            if not data:
                return None
            if whole:
                raw = whole[0].raw
                return data[len(raw) :] if data.startswith(raw) else None
            entries, preamble = scan_mailfile(data, box.outbox_file, sender, max_message_bytes=msg.MAX_MESSAGE_BYTES)
            kept = [entry for entry in entries if (entry.key, entry.digest) not in wanted]
            if len(kept) == len(entries):
                return None
            # A rewrite of an older file writes it at the current format version (the preamble
            # holds the marker; the blocks, and so the ids derived from them, stay as they are).
            preamble = formats.upgrade_text("mailbox", preamble, formats.Facts(str(box.outbox_file)))
            return encode_mail(preamble, data.startswith(_BOM)) + b"".join(_stamped(entry) for entry in kept)

        rewrite(box.outbox_file, transform, outbox_merge(done, sender), settled=outbox_settled(done, sender))
    if folder_entries:
        _remove_files(box, folder_entries, settle=settle, set_aside=set_aside)


def rewrite_mailbox_file(path: Path, transform: Callable[[bytes | None], bytes | None]) -> bool:
    """Rewrite a v1 mailbox file (`inbox.md`, `outbox.md`, `archive.md`) with `transform`
    (current bytes in, new bytes or None out) under its lock, losing neither a block an agent
    appends meanwhile nor an editor's save: the rewrite every router pass uses. `moss upgrade`
    writes the format version this way. Returns True when the file changed."""
    merge = outbox_merge(lambda _entry: False, "") if path.name == "outbox.md" else inbox_merge
    return rewrite(path, transform, merge)


def _stamped(entry: Entry) -> bytes:
    """The block's bytes with its derived id written into the header, when it had none.

    An id-less block is known by its text and its rank among identical blocks; once an earlier
    twin leaves the file its rank would change, so the id it was known by is written down.
    """
    if entry.message is None or entry.message.id is not None:
        return entry.raw
    first_break = entry.raw.find(b"\n")
    newline = b"\r\n" if entry.raw[first_break - 1 : first_break] == b"\r" else b"\n"
    key = b"ID" if entry.message.capitalised else b"id"
    return entry.raw[: first_break + 1] + key + b": " + entry.key.encode() + newline + entry.raw[first_break + 1 :]


def _remove_files(box: Mailbox, entries: list[Entry], *, settle: bool = True, set_aside: Mapping[Path, str] | None = None) -> None:
    """Remove routed v2 outbox files, each unless it changed since it was routed.

    Each file is first renamed aside inside its own folder (so nobody can rewrite it while it
    is compared), then deleted or put back. Staying in the folder matters: a rename out of a
    watched folder is an unpaired inotify move, which watchdog holds back for half a second,
    delaying every event after it. The folder is opened once for the batch and made durable
    once at the end (by the caller instead, with `settle` False).

    `set_aside`: entries (by source) that `set_aside_outbox_files` already set aside and
    compared, by the name they have now: that name is deleted.
    """
    restore: list[tuple[Path, str]] = []
    aside = set_aside or {}
    with fs.folder_fd(box.outbox_dir) as dir_fd:
        for entry in entries:
            if entry.source in aside:
                try:
                    os.unlink(aside[entry.source], dir_fd=dir_fd)
                except FileNotFoundError:
                    pass
                continue
            moved = side_name(entry.source, "aside")
            try:
                os.rename(entry.source.name, moved.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileNotFoundError:
                continue
            if (read_in(dir_fd, box.outbox_dir, moved.name) or b"") == entry.raw:
                os.unlink(moved.name, dir_fd=dir_fd)
            else:
                restore.append((moved, entry.source.name))
        if settle:
            os.fsync(dir_fd)
    for moved, name in restore:
        _restore(moved, name, unshare=False)  # set aside here, never linked


def _restore(moved: Path, name: str, *, unshare: bool = True) -> None:
    # Put back a file that must not be removed, under a fresh name if its own was taken.
    target = moved.with_name(name)
    try:
        shared = unshare and os.stat(moved, follow_symlinks=False).st_nlink > 1
    except FileNotFoundError:
        return
    if shared:
        # Linked into an inbox as its delivered copy (`set_aside_outbox_files`): the outbox gets
        # a copy of its own, so that an edit to one file never changes the other.
        data = fs.read_bytes(moved)
        if not fs.create_exclusive(target, data):
            fs.create_exclusive(target.with_name(f"{target.stem}.{secrets.token_hex(3)}.md"), data)
        moved.unlink()
        return
    if not fs.move_exclusive(moved, target):
        fs.move_exclusive(moved, target.with_name(f"{target.stem}.{secrets.token_hex(3)}.md"))


def set_aside_outbox_files(box: Mailbox, entries: list[Entry]) -> dict[Path, str]:
    """Rename routed v2 outbox files aside in their folder (`side_name` "aside"), each kept
    aside only when it still holds the bytes it was routed with and is a file like one this
    process would create (its owner, the mode its umask gives, no other name: nobody else can
    change it through another path or wider rights once it is someone's inbox copy); the
    others are put back at once. Return {entry source: name aside} of those kept. The caller
    holds the sender's route lock.

    A file set aside can become a recipient's delivered copy by a link (one directory entry
    where a new file costs an inode), and is then deleted by `remove_from_outbox(set_aside=)`,
    or put back by `put_back_aside`. A kill in between leaves it aside, and the next pass's
    `recover_mailbox` puts it back (as a copy of its own, when an inbox shares it) unless the
    journal says it was archived: it is routed again, and each inbox and the archive take it
    once.
    """
    kept: dict[Path, str] = {}
    restore: list[tuple[Path, str]] = []
    mode, owner = fs.new_file_mode(), os.geteuid()
    with fs.folder_fd(box.outbox_dir) as dir_fd:
        for entry in entries:
            moved = side_name(entry.source, "aside")
            try:
                os.rename(entry.source.name, moved.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileNotFoundError:
                continue
            found = os.stat(moved.name, dir_fd=dir_fd, follow_symlinks=False)
            plain = stat.S_ISREG(found.st_mode) and found.st_nlink == 1 and found.st_uid == owner and stat.S_IMODE(found.st_mode) == mode
            if plain and (read_in(dir_fd, box.outbox_dir, moved.name) or b"") == entry.raw:
                kept[entry.source] = moved.name
            else:
                restore.append((moved, entry.source.name))
    for moved, name in restore:
        _restore(moved, name, unshare=False)  # never linked: any other name is the writer's own
    return kept


def put_back_aside(box: Mailbox, set_aside: Mapping[Path, str]) -> None:
    """Put outbox files set aside by `set_aside_outbox_files` back under their names (a copy of
    their own where an inbox shares the file), for entries that stay in the outbox."""
    for source, name in set_aside.items():
        _restore(box.outbox_dir / name, source.name)


def recover_mailbox(box: Mailbox, done: Callable[[Entry], bool], sender: str, *, thorough: bool = True, keep: Set[str] = frozenset()) -> None:
    """Finish what a killed router left half done in one workspace (the caller holds the
    sender's route lock): fold interrupted rewrites of `outbox.md` and `inbox.md` back in, put
    back v2 outbox files set aside but not yet checked (except the names in `keep`: the
    caller's own, delivered and waiting for their archive copies), and (when `thorough`)
    clear dead writers' temporaries from the file-per-message folders, which can be long to
    list."""
    names = list_names(box.dir)
    folds = ((box.outbox_file, outbox_merge(done, sender), outbox_settled(done, sender)), (box.inbox_file, inbox_merge, None))
    for path, merge, settled in folds:
        if any((m := LEFTOVER.match(n)) and m.group("name") == path.name for n in names):
            with fs.locked(path):
                fold_leftovers(path, merge, settled)
    outbox_names = list_names(box.outbox_dir)
    for name in outbox_names:
        match = LEFTOVER.match(name)
        if not match or match.group("kind") != "aside" or name in keep:
            continue
        moved = box.outbox_dir / name
        data = read_if_any(moved)
        if data is None:
            continue
        entry = scan_message_file(data, box.outbox_dir / match.group("name"), sender)
        if done(entry):
            moved.unlink()
        else:
            _restore(moved, match.group("name"))
    clear_dead_temporaries(box.dir, names)
    clear_dead_temporaries(box.outbox_dir, outbox_names)
    if not thorough:
        return
    if box.inbox_dir.is_dir():
        with fs.locked(box.inbox_dir):
            clear_dead_temporaries(box.inbox_dir)
    for folder in (box.archive_dir, box.dead_dir):
        clear_dead_temporaries(folder)


def dead_letter(box: Mailbox, entry: Entry, *, code: str, reason: str, recipients: Iterable[str], now: datetime) -> Path:
    """Keep an undeliverable entry's bytes, unchanged, with why; once per (entry, code)."""
    box.check_links()
    box.dead_dir.mkdir(parents=True, exist_ok=True)
    clear_dead_temporaries(box.dead_dir)
    suffix = f"_{safe_part(entry.key)}_{code.lower()}.md"
    for name in list_names(box.dead_dir):
        if name.endswith(suffix):
            return box.dead_dir / name
    meta: dict[str, Any] = {
        "id": entry.key,
        "code": code,
        "reason": reason,
        "source": str(entry.source.relative_to(box.root)) if entry.source.is_relative_to(box.root) else entry.source.name,
        "line": entry.line,
        "dead_at": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    names = list(recipients)
    if names:
        meta["recipients"] = names
    meta[formats.MARKER] = formats.KINDS["dead-letter"].current
    header = msg.render_header(msg.Message(extra=meta))
    path = box.dead_dir / f"{now.astimezone(UTC).strftime('%Y-%m-%dT%H-%M-%SZ')}{suffix}"
    fs.create_exclusive(path, f"---\n{header}---\n".encode() + entry.raw)
    return path


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead letter as listed: its metadata and the exact bytes it keeps; `problem` when the
    file cannot be read as one (written by a newer moss-files: FORMAT_TOO_NEW)."""

    path: Path
    meta: dict[str, Any]
    raw: bytes
    problem: MossError | None = None


def read_dead_letters(box: Mailbox) -> list[DeadLetter]:
    """Dead letters of a workspace, oldest first. The kept bytes need not be UTF-8."""
    return [_dead_letter(path, read_if_any(path) or b"") for path in _message_files(box.dead_dir)]


def _dead_letter(path: Path, data: bytes) -> DeadLetter:
    end = data.find(b"\n---\n", 3)
    meta: dict[str, Any] = {}
    raw = data
    if data.startswith(b"---\n") and end > 0:
        try:
            meta = msg.parse_header(data[4 : end + 1].decode("utf-8"), path=path, line=2)
            raw = data[end + 5 :]
        except (InvalidDocument, UnicodeDecodeError):
            meta = {}
    try:
        formats.check_record("dead-letter", meta, path)
    except InvalidDocument as err:
        return DeadLetter(path, {}, data, err)
    meta.pop(formats.MARKER, None)  # the file's format version, not the letter's metadata
    return DeadLetter(path, meta, raw)


def requeue_dead_letter(box: Mailbox, path: Path, message: Message, now: datetime) -> Path:
    """Put `message` (a dead letter's message, made to be sent again) into the outbox and mark
    the dead letter `retried_as` its id, under the dead letter's lock; return the outbox file.
    The dead letter keeps its bytes, now with `retried_as:` and `retried_at:` in its header.

    Raises Conflict ALREADY_EXISTS for a dead letter retried already, NotFound when it is gone.
    """
    with fs.locked(path):
        data = read_if_any(path)
        if data is None:
            raise NotFound(f"dead letter {path.name} is gone", path=path)
        letter = _dead_letter(path, data)
        if letter.problem is not None:
            raise letter.problem
        if "retried_as" in letter.meta:
            raise Conflict(
                f"dead letter {path.name} was sent again already, as {letter.meta['retried_as']}",
                code="ALREADY_EXISTS",
                path=path,
                details={"retried_as": letter.meta["retried_as"]},
            )
        try:
            written = append_outbox(box, message, now)
        except Conflict as err:
            # Queued by a retry that stopped before it marked the letter: the id is the same.
            if err.code != "ALREADY_EXISTS":
                raise
            written = box.outbox_dir
        meta = {**letter.meta, "retried_as": message.id, "retried_at": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        meta[formats.MARKER] = formats.KINDS["dead-letter"].current
        header = msg.render_header(msg.Message(extra=meta))
        fs.write_atomic(path, f"---\n{header}---\n".encode() + letter.raw)
    return written


# --------------------------------------------------------------------------- a git merge's result

# The files of `.needlecast/` that writers change in place (sends, deliveries, routing passes,
# read marks, appends by hand): a git sync brings a merge into them with `apply_merged`, the way
# those writers change them, never by letting git replace them.
SHARED_FILES = ("inbox.md", "outbox.md", "archive.md", "read.log")


def is_shared_file(relpath: str) -> bool:
    """True when `relpath` (`/`-separated, from the top of a clone) names one of SHARED_FILES."""
    parts = relpath.split("/")
    return len(parts) >= 2 and parts[-2] == DIR_NAME and parts[-1] in SHARED_FILES


def apply_merged(path: Path, base: bytes | None, merged: bytes) -> None:
    """Bring a merge's version `merged` of a shared file (SHARED_FILES) into the work tree.

    `base` is the version the merge started from (the sync's own commit; None: it had no such
    file). Under the file's lock, as every writer changes it (`shared_file.rewrite`): a file
    still as in `base` becomes `merged`; a file written since (a send, a delivery, a routing
    pass, an append by hand) is merged with `merged` again, so what was written meanwhile stays;
    bytes appended during the rewrite are carried over, and an editor's save is folded back.

    Raises Conflict STALE_WRITE when what was written meanwhile does not merge (the sync commits
    it and merges again through git), InvalidDocument MERGE_CONFLICT for a file with markers.
    """
    from needlecast.merge import merge_mailbox, union_lines

    log = path.name == "read.log"

    def transform(data: bytes | None) -> bytes | None:
        if data == base:
            return merged
        if data is None:
            raise Conflict("deleted since the sync's commit; merging again", code="STALE_WRITE", path=path)
        if log:
            return union_lines(base or b"", data, merged)
        appended = _with_appended(base, data, merged)
        if appended is not None:
            return appended
        (old, _), (ours, bom), (theirs, theirs_bom) = (mail_text(version) for version in (base or b"", data, merged))
        result = merge_mailbox(old, ours, theirs)
        if result.conflicts:
            raise Conflict("changed since the sync's commit in a way that does not merge here; merging again", code="STALE_WRITE", path=path)
        return encode_mail(result.text, bom or theirs_bom)

    if log:
        rule: Merge = lambda current, leftover: union_lines(b"", leftover, current or b"")[len(current or b"") :]  # noqa: E731
    elif path.name == "outbox.md":
        # An editor's save folded back must not bring back what the merge removed: messages the
        # other clone routed.
        kept = {(entry.key, entry.digest) for entry in scan_mailfile(merged, path, "")[0]}
        removed = {(entry.key, entry.digest) for entry in scan_mailfile(base, path, "")[0]} - kept
        rule = outbox_merge(lambda entry: (entry.key, entry.digest) in removed, "")
    else:
        rule = inbox_merge
    rewrite(path, transform, rule, fold_others=False)


def _with_appended(base: bytes | None, data: bytes, merged: bytes) -> bytes | None:
    """`merged` followed by what was appended to `base` to make `data`, when that is whole
    blocks none of which `merged` holds (what sends, deliveries and archiving do); None for any
    other change, which takes the full merge. The full merge reads every block of three
    versions, which costs a busy inbox a good part of a second; this reads the new ones."""
    if not base or not data.startswith(base):
        return None
    text, _bom = mail_text(data[len(base) :])
    tail = msg.split_blocks(text)
    merged_text, _bom = mail_text(merged)
    if tail.preamble.strip() or not tail.blocks or any(block.raw.rstrip() in merged_text for block in tail.blocks):
        return None
    prefix = b"" if not merged or merged.endswith(b"\n\n") else (b"\n" if merged.endswith(b"\n") else b"\n\n")
    return merged + prefix + encode_mail(text[len(tail.preamble) :], False)


# --------------------------------------------------------------------------- read state


def read_marks(box: Mailbox) -> set[tuple[str, str]]:
    """(from, id) pairs marked read. Unreadable lines (a torn write) and marks of a newer
    format (`moss_format` above 1) are ignored, never fatal."""
    return _marks_in(read_if_any(box.read_log) or b"")


def _marks_in(data: bytes) -> set[tuple[str, str]]:
    return {mark for line in data.splitlines() if (mark := _mark_of(line)) is not None}


def mark_read(box: Mailbox, sender: str, key: str, now: datetime) -> None:
    """Append one read mark; an append-only log merges in git without conflicts (merge=union)."""
    record = {"id": key, "from": sender, "at": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    fs.append_line(box.read_log, json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8"))


def rotate_inbox(
    box: Mailbox,
    now: datetime,
    *,
    top_files: int = INBOX_TOP_FILES,
    keep_days: float = INBOX_KEEP_DAYS,
    batch: int = INBOX_ROTATE_BATCH,
    say: Callable[[str], None] | None = None,
) -> int:
    """Once a file-per-message inbox's top holds more than `top_files` messages and at least
    `batch` of them can move, move the read ones whose file name's time is over `keep_days`
    old into a folder per month (`inbox/2026-01/`, as the archive's rotation does), then drop
    from read.log the marks of messages no longer at the top; return how many moved. A
    reader calls it after marking a message read.

    So the top holds the unread messages and the recent ones, and read.log the marks of
    messages at the top: what a look for unread mail reads stays bounded however long the
    inbox's history. Only messages whose file reads, is named by its (from, id) and is marked
    read move; a recent one stays, where a router's retry of a delivery looks for it (a retried
    message keeps its name, so delivery also looks in its month folder). It runs under the
    inbox folder's lock, the one delivery takes. A kill at any instant loses nothing: a moved
    message is read whatever read.log holds, and marks left behind go at the next rotation.
    `say` hears of a rotation of LOUD_ROTATION messages or more (the first in an inbox that
    grew before rotation existed: some seconds for 100,000 files).
    """
    if not box.inbox_dir.is_dir() or len(message_names(box.inbox_dir)) <= top_files:
        return 0
    horizon = time_stamp(None, now - timedelta(days=keep_days))
    with fs.locked(box.inbox_dir):
        names = message_names(box.inbox_dir)
        log = read_if_any(box.read_log) or b""
        refuse_conflicted(box.read_log, log)  # it could not be rewritten: nothing moves
        marks = _marks_in(log)
        named = marked_names(marks)
        # By name first (no file read): a rotation waits until a batch can move.
        candidates = [
            (name, found.group("month"))
            for name in names
            if (found := _MONTH.match(name)) and name[: len(horizon)] < horizon and name.partition("_")[2] in named
        ]
        if len(names) <= top_files or len(candidates) < batch:
            return 0
        if say is not None and len(candidates) >= LOUD_ROTATION:
            say(f"moving up to {len(candidates):,} read messages over {keep_days:g} days old into the inbox's month folders (once)")
        moves: dict[str, list[str]] = {}
        for name, month in candidates:
            data = read_if_any(box.inbox_dir / name)
            entry = scan_message_file(data, box.inbox_dir / name, "") if data is not None else None
            if entry is None or entry.message is None or (entry.message.sender or "", entry.key) not in marks:
                continue
            if not entry.message.id or "_" + name.partition("_")[2] != _suffix(entry.message):
                continue  # named otherwise than by its (from, id): found by reading, so it stays at the top
            moves.setdefault(month, []).append(name)
        gone = _move_to_months(box.inbox_dir, moves) if moves else []
        if gone:
            _keep_marks_of(box, {(entry.message.sender or "", entry.key) for entry in read_inbox(box, top_only=True) if entry.message is not None})
    return len(gone)


def marked_names(marks: Iterable[tuple[str, str]]) -> set[str]:
    """The `<from>_<id>.md` ends of the file names that the (from, id) pairs `marks` give
    their messages (`message_file_name`), to tell read messages by name."""
    return {f"{safe_part(sender or 'unknown', 40)}_{safe_part(key or 'x')}.md" for sender, key in marks}


def _keep_marks_of(box: Mailbox, present: Set[tuple[str, str]]) -> None:
    """Rewrite read.log with only the marks of `present` (from, id) pairs, the messages at
    the inbox's top and in `inbox.md`: a message rotated into a month folder is read without
    one. Every line that is not a mark of this version stays as it is, and a mark appended
    meanwhile is kept (`shared_file.rewrite`)."""

    def kept(data: bytes | None) -> bytes | None:
        if not data:
            return None
        lines = [line for line in data.splitlines(keepends=True) if (mark := _mark_of(line)) is None or mark in present]
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        return b"".join(lines)

    rewrite(box.read_log, kept, _keep_missing_lines)


def _mark_of(line: bytes) -> tuple[str, str] | None:
    """The (from, id) a read.log line marks; None for a line that is not a mark of this version."""
    try:
        record = structured.loads_json(line)
        formats.check_record("read-log", record)
        return (str(record.get("from") or ""), str(record["id"]))
    except (ValueError, KeyError, TypeError, AttributeError, InvalidDocument):
        return None


def _keep_missing_lines(current: bytes | None, leftover: bytes) -> bytes:
    """Merge rule for read.log (`shared_file.Merge`: what to append to the file): each line of
    a version an editor saved over a rewrite that the file lacks."""
    have = set((current or b"").splitlines())
    return b"".join(line + b"\n" for line in dict.fromkeys(leftover.splitlines()) if line and line not in have)


def iter_mailboxes(root: Path) -> Iterator[Path]:
    """Child folders of `root` that hold a `.needlecast/` folder, sorted by name."""
    try:
        children = sorted(fs.list_entries(root), key=lambda item: item.name)
    except FileNotFoundError:
        return
    for child in children:
        if child.is_dir() and not child.name.startswith(".") and (Path(child.path) / DIR_NAME).is_dir():
            yield Path(child.path)

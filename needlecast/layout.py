"""Moving messages between mailbox forms: one sleeve's layout v1 (a file per mailbox) to v2 (a
file per message) and back, and messages from older mailboxes (cortical-stack's INBOX.md and
OUTBOX.md) into a sleeve's own. Shell layer: gathers with `mailbox`, decides here, applies with
`mailbox` and `shared_file`.

Nothing is lost either way. Every message keeps its id; a block that had none is given, in
writing, the id the router already knows it by (its derived id), so the delivery journal's
records, the read marks in `read.log` and the inbox's "(from, id) once" rule stay true across
the switch. A v1 file keeps its preamble (title, comment) and only its blocks move out, so
hand-appended blocks and the router keep working while and after the layout changes; the
blocks of a v2 folder go to the end of the v1 file. Unreadable blocks move byte for byte.
The caller decides whether a file may be emptied or removed (`may_remove`): the migration
allows it only for files git could bring back.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from moss_files.foundation import formats, fs
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest
from needlecast import mailbox as boxes
from needlecast import message as msg
from needlecast.mailbox import Mailbox
from needlecast.message import Message
from needlecast.routing import Entry
from needlecast.shared_file import read_if_any, rewrite

LAYOUTS = ("v1", "v2")
BOXES = ("inbox", "outbox", "archive")


# --------------------------------------------------------------------------- reading


def read_mailfile(data: bytes, path: Path) -> list[Entry]:
    """The entries of a single-file mailbox's bytes, in any dialect (`From:` or `from:`), each
    keyed by its id or, for a block without one, the id the router would derive for it."""
    entries, _preamble = boxes.scan_mailfile(data, path, "")
    return entries


def with_key(entry: Entry) -> Message:
    """The entry's message with its key written as its id (unchanged when it had one)."""
    assert entry.message is not None
    if entry.message.id == entry.key:
        return entry.message
    return msg.with_changes(entry.message, id=entry.key)


def known_messages(root: Path) -> dict[str, set[Any]]:
    """What a sleeve's mailbox holds already, in both layouts: `inbox` as (from, id) pairs,
    `outbox`, `archive` and `dead` as ids, `read` as (from, id) pairs marked read."""
    box = Mailbox(root)
    if not box.exists():
        return {"inbox": set(), "outbox": set(), "archive": set(), "dead": set(), "read": set()}
    messages = [(entry.message.sender or "", entry.key, entry) for entry in boxes.read_inbox(box) if entry.message is not None]
    inbox = {(sender, key) for sender, key, _entry in messages}
    # A message rotated into a month folder is read, its mark gone from read.log.
    rotated = {(sender, key) for sender, key, entry in messages if boxes.in_month_folder(entry)}
    outbox = {entry.key for entry in boxes.read_outbox(box, root.name).entries}
    archive = {entry.key for entry in boxes.read_archive(box, root.name)}
    dead = {str(letter.meta.get("id")) for letter in boxes.read_dead_letters(box) if letter.meta.get("id")}
    return {"inbox": inbox, "outbox": outbox, "archive": archive, "dead": dead, "read": boxes.read_marks(box) | rotated}


# --------------------------------------------------------------------------- importing messages


def import_messages(
    root: Path,
    *,
    inbox: Sequence[Message],
    outbox: Sequence[Message],
    read: Iterable[tuple[str, str]],
    now: datetime,
) -> dict[str, list[str]]:
    """Put messages into a sleeve's mailbox (its own layout; v1 when it has no `.needlecast/`
    yet): `inbox` delivered once per (from, id), `outbox` appended for the router to send,
    `read` marked read. Returns the files written by box. Raises Conflict DUPLICATE_MESSAGE_ID
    when an inbox holds a different message under the same sender and id (nothing written)."""
    box = Mailbox(root)
    if not box.exists():
        boxes.init_mailbox(root, "v1")
    known = known_messages(root)
    clashes = [m for m in inbox if (m.sender or "", m.id or "") in known["inbox"]]
    if clashes:
        present = {(entry.message.sender or "", entry.key): entry.digest for entry in boxes.read_inbox(box) if entry.message is not None}
        different = [m.id for m in clashes if present.get((m.sender or "", m.id or "")) != msg.content_digest(m)]
        if different:
            raise Conflict(
                f"the inbox holds other messages under the ids {', '.join(str(d) for d in different[:5])}",
                code="DUPLICATE_MESSAGE_ID",
                path=box.dir,
                details={"ids": different},
            )
    written: dict[str, list[str]] = {"inbox": [], "outbox": [], "read": []}
    fresh = [m for m in inbox if (m.sender or "", m.id or "") not in known["inbox"]]
    if fresh:
        boxes.deliver(box, list(fresh), now)
        written["inbox"].append(_shown(box.inbox_dir if box.inbox_dir.is_dir() else box.inbox_file, root))
    for message in outbox:
        if message.id in known["outbox"] or message.id in known["archive"]:
            continue
        path = boxes.append_outbox(box, message, now)
        written["outbox"].append(_shown(path, root))
    for sender, key in read:
        if (sender, key) not in known["read"]:
            boxes.mark_read(box, sender, key, now)
            known["read"].add((sender, key))
            written["read"] = [_shown(box.read_log, root)]
    return written


def _shown(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


# --------------------------------------------------------------------------- switching layouts


@dataclass(slots=True)
class Move:
    """One message moving between forms: its box, key, sender, and where it was and goes."""

    box: str
    key: str
    sender: str | None
    source: str
    target: str


@dataclass(slots=True)
class Switch:
    """A layout switch of one sleeve, decided before anything is written."""

    target: str
    moves: list[Move] = field(default_factory=list)
    new_files: list[tuple[Path, bytes]] = field(default_factory=list)  # v2 files to create
    appends: dict[Path, list[str]] = field(default_factory=dict)  # v1 file -> blocks to add
    emptied: dict[Path, list[Entry]] = field(default_factory=dict)  # v1 file -> blocks moving out
    removed: list[Entry] = field(default_factory=list)  # v2 files moving into v1 files
    folders: list[Path] = field(default_factory=list)  # v2 folders to take away once empty (month folders first)
    # (from, id) of rotated inbox messages moving into inbox.md: a month folder made them read,
    # inbox.md needs a mark (written before the blocks move).
    marks: list[tuple[str, str]] = field(default_factory=list)

    def touched(self) -> list[Path]:
        """Every existing file the switch empties or removes (what `may_remove` is asked)."""
        return sorted({*self.emptied, *(entry.source for entry in self.removed)})


def _folder(box: Mailbox, name: str) -> Path:
    return {"inbox": box.inbox_dir, "outbox": box.outbox_dir, "archive": box.archive_dir}[name]


def _file(box: Mailbox, name: str) -> Path:
    return {"inbox": box.inbox_file, "outbox": box.outbox_file, "archive": box.archive_file}[name]


def _file_entries(box: Mailbox, name: str, sender: str) -> list[Entry]:
    path = _file(box, name)
    entries, _preamble = boxes.scan_mailfile(read_if_any(path), path, "" if name == "inbox" else sender)
    return entries


def _folder_entries(box: Mailbox, name: str, sender: str) -> list[Entry]:
    """The messages of a v2 folder, oldest first, those its rotation moved into month folders
    (inbox, archive) included."""
    paths = {"inbox": boxes.inbox_message_files, "archive": boxes.archive_message_files}.get(name)
    files = paths(box) if paths is not None else [_folder(box, name) / file_name for file_name in boxes.message_names(_folder(box, name))]
    entries = []
    for path in files:
        data = read_if_any(path)
        if data is not None:
            entries.append(boxes.scan_message_file(data, path, "" if name == "inbox" else sender))
    return entries


def plan_switch(root: Path, target: str, now: datetime) -> Switch:
    """What switching the sleeve at `root` to layout `target` moves. Reads only.

    Raises InvalidRequest for an unknown layout or a workspace without `.needlecast/`, and
    MESSAGE_INVALID naming a v2 file that is not a readable message (a v1 file can hold any
    bytes only between readable blocks, so such a file must be fixed or moved first).
    """
    if target not in LAYOUTS:
        raise InvalidRequest(f"unknown layout {target!r}; use v1 or v2", details={"layout": target})
    box = Mailbox(root)
    box.check_links()
    if not box.exists():
        raise InvalidRequest(f"{root} has no .needlecast/ folder", details={"path": str(root)})
    sender = root.name
    switch = Switch(target)
    for name in BOXES:
        if target == "v2":
            entries = _file_entries(box, name, sender)
            folder = _folder(box, name)
            taken = {file.name for file in (folder.iterdir() if folder.is_dir() else ())}
            for entry in entries:
                if entry.problem is not None and entry.problem.code == "MERGE_CONFLICT":
                    raise entry.problem
                if entry.message is not None:
                    message = with_key(entry)
                    if name == "outbox":
                        file_name = f"{boxes.time_stamp(message.time, now)}_{boxes.safe_part(message.id or 'x')}.md"
                    else:
                        file_name = boxes.message_file_name(message, now)
                    data = msg.render_message_document(message, capitalised=message.capitalised).encode("utf-8")
                else:
                    file_name = f"{boxes.time_stamp(None, now)}_{boxes.safe_part(sender, 40)}_{boxes.safe_part(entry.key)}.md"
                    data = entry.raw
                if file_name in taken:
                    raise Conflict(f"{folder.name}/{file_name} exists already", code="ALREADY_EXISTS", path=folder / file_name)
                taken.add(file_name)
                switch.new_files.append((folder / file_name, data))
                switch.emptied.setdefault(entry.source, []).append(entry)
                switch.moves.append(
                    Move(
                        name,
                        entry.key,
                        entry.message.sender if entry.message else None,
                        f"{_shown(entry.source, root)}:{entry.line}",
                        _shown(folder / file_name, root),
                    )
                )
            if name in ("inbox", "outbox") and not folder.is_dir():
                switch.new_files.append((folder / boxes.KEEP_FILE, boxes.KEEP_TEXT.encode()))
        else:
            entries = _folder_entries(box, name, sender)
            for entry in entries:
                if entry.message is None:
                    assert entry.problem is not None
                    raise InvalidDocument(
                        f"{_shown(entry.source, root)} is not a readable message ({entry.problem.code}); fix or move it before switching to v1",
                        code="MESSAGE_INVALID",
                        path=entry.source,
                        line=entry.problem.line,
                    )
                message = with_key(entry)
                path = _file(box, name)
                switch.appends.setdefault(path, []).append(msg.render_block(message, capitalised=message.capitalised))
                switch.removed.append(entry)
                switch.moves.append(Move(name, entry.key, message.sender, _shown(entry.source, root), _shown(path, root)))
                if name == "inbox" and boxes.in_month_folder(entry):
                    switch.marks.append((message.sender or "", entry.key))
            folder = _folder(box, name)
            if folder.is_dir():
                months = sorted({entry.source.parent for entry in entries if entry.source.parent != folder})
                switch.folders.extend([*months, folder])
    return switch


def apply_switch(root: Path, target: str, now: datetime, may_remove: Callable[[list[Path]], None]) -> Switch:
    """Switch the sleeve at `root` to layout `target`, holding the router's lock for this
    sleeve and its inbox locks, so no routing pass interleaves. The plan is made again under
    the locks; `may_remove(paths)` raises to refuse emptying or removing those files. New
    forms are written and read back before the old forms go. Returns what was done."""
    box = Mailbox(root)
    with ExitStack() as stack:
        # The sleeve's own routing pass, and deliveries into its inbox folder, wait for the
        # switch; a delivery into inbox.md takes that file's lock, which the rewrites below
        # take too, so no block is lost or doubled there either.
        stack.enter_context(fs.locked(box.state_dir / "route"))
        stack.enter_context(fs.locked(box.inbox_dir))
        switch = plan_switch(root, target, now)
        touched = switch.touched()
        if touched:
            may_remove(touched)
        if target == "v2":
            for path, data in switch.new_files:
                if not fs.create_exclusive(path, data):
                    raise Conflict(f"{_shown(path, root)} exists already", code="ALREADY_EXISTS", path=path)
            _verify(switch, root)
            for path, entries in switch.emptied.items():
                _empty(box, path, entries, root.name)
        else:
            for sender, key in switch.marks:
                boxes.mark_read(box, sender, key, now)
            for path, blocks in switch.appends.items():
                _append_blocks(path, blocks)
            for entry in switch.removed:
                _remove_if_unchanged(entry.source, entry.raw)
            for folder in switch.folders:
                _remove_folder(folder)
    return switch


def _verify(switch: Switch, root: Path) -> None:
    """Every new file reads back with the bytes written (else no v1 file is touched)."""
    for path, data in switch.new_files:
        if read_if_any(path) != data:
            raise Conflict(f"{_shown(path, root)} did not read back as written; the v1 files are left as they were", path=path)


def _empty(box: Mailbox, path: Path, entries: list[Entry], sender: str) -> None:
    """Take the moved blocks out of a v1 file, keeping its preamble and anything added since
    (the mailbox's own rewrite, which never loses a concurrent append or editor's save)."""
    wanted = {(entry.key, entry.digest) for entry in entries}
    merge = boxes.inbox_merge if path == box.inbox_file else boxes.outbox_merge(lambda entry: (entry.key, entry.digest) in wanted, sender)

    def transform(data: bytes | None) -> bytes | None:
        if not data:
            return None
        found, preamble = boxes.scan_mailfile(data, path, "" if path == box.inbox_file else sender)
        kept = [entry for entry in found if (entry.key, entry.digest) not in wanted]
        if len(kept) == len(found):
            return None
        bom = data.startswith(b"\xef\xbb\xbf")
        preamble = formats.upgrade_text("mailbox", preamble, formats.Facts(str(path)))  # a rewrite writes the current format
        return boxes.encode_mail(preamble, bom) + b"".join(entry.raw for entry in kept)

    rewrite(path, transform, merge)


def _append_blocks(path: Path, blocks: list[str]) -> None:
    """Add rendered blocks at the end of a v1 file (made from its template when missing),
    under the file's lock, as a delivery does."""
    with fs.locked(path):
        head = read_if_any(path)
        if head is None:
            template = boxes.template(path.name) if path.name in ("inbox.md", "outbox.md") else formats.stamp_text("mailbox", "# Archive\n\n")
            fs.create_exclusive(path, template.encode("utf-8"))
            head = read_if_any(path) or b""
        prefix = "" if head.endswith(b"\n\n") or not head else ("\n" if head.endswith(b"\n") else "\n\n")
        fs.append_line(path, (prefix + "".join(blocks)).encode("utf-8"))


def _remove_if_unchanged(path: Path, raw: bytes) -> None:
    """Remove a moved v2 file unless it changed since it was read (then it stays, and the
    switch stops: a person edited it meanwhile)."""
    current = read_if_any(path)
    if current is None:
        return
    if current != raw:
        raise Conflict(f"{path.name} changed while the layout was switched; it is left in place", code="STALE_WRITE", path=path)
    fs.remove(path)


def _remove_folder(folder: Path) -> None:
    """Take away a v2 folder once only our keep file (and lock or temporary files) remain."""
    leftovers = [name for name in os.listdir(folder) if name != boxes.KEEP_FILE and not fs.is_temporary(folder / name)]
    if leftovers:
        return  # a message arrived meanwhile: the folder stays, and both layouts are read
    for name in os.listdir(folder):
        fs.remove(folder / name)
    try:
        folder.rmdir()
    except OSError:
        pass


def switch_to_dict(switch: Switch) -> dict[str, Any]:
    """The JSON shape of a layout switch."""
    return {
        "layout": switch.target,
        "messages": [{"box": m.box, "key": m.key, "from": m.sender, "source": m.source, "target": m.target} for m in switch.moves],
    }

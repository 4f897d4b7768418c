"""Three-way merge of a single-file mailbox (`inbox.md`, `outbox.md`, layout v1), for the git
merge driver. Core layer (pure).

Every message block of both sides is kept once: blocks are matched by (from, id), or by their
bytes when a hand-written block has no id; blocks both sides added at one place are put in
time order; a block one side removed (the router archived it, or its owner deleted it) is
removed. Two different blocks under one (from, id) are both kept: the router then delivers
one and dead-letters the other as DUPLICATE_MESSAGE_ID, so nothing is lost either way.
Layout v2 (a file per message) needs no driver: two clones never write the same file.
"""

from __future__ import annotations

from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument
from moss_files.foundation.itemmerge import OURS, THEIRS, Item, Outcome, Piece, Result, merge_items
from moss_files.foundation.textmerge import Labels
from needlecast import message as msg


def _pieces(text: str) -> list[Piece]:
    mailfile = msg.split_blocks(text)
    pieces: list[Piece] = list(mailfile.preamble.splitlines(keepends=True))
    for block in mailfile.blocks:
        try:
            meta = msg.parse_header(block.header, path=None, line=block.line + 1)
        except InvalidDocument:
            meta = {}
        sender = meta.get(document.find_key(meta, "from") or "from")
        ident = meta.get(document.find_key(meta, "id") or "id")
        when = meta.get(document.find_key(meta, "time") or "time")
        key = f"from:{sender}|id:{ident}" if ident else f"raw:{msg.raw_digest(block.raw)}"
        pieces.append(Item(key, tuple(block.raw.splitlines(keepends=True)), str(when) if when is not None else None))
    return pieces


def _merge_block(base: Item | None, ours: Item | None, theirs: Item | None) -> Outcome:
    if ours is None or theirs is None:
        kept = ours if theirs is None else theirs
        if kept is None or base is not None:
            return Outcome(())  # routed (archived) or deleted on one side
        return Outcome(kept.lines, OURS if theirs is None else THEIRS)
    if ours.lines == theirs.lines or (base is not None and theirs.lines == base.lines):
        return Outcome(ours.lines, OURS)
    if base is not None and ours.lines == base.lines:
        return Outcome(theirs.lines, THEIRS)
    return Outcome((*_ended(ours.lines), *theirs.lines), OURS)


def _ended(lines: tuple[str, ...]) -> tuple[str, ...]:
    if lines and not lines[-1].endswith("\n"):
        return (*lines[:-1], lines[-1] + "\n")
    return lines


def merge_mailbox(base: str, ours: str, theirs: str, labels: Labels = Labels()) -> Result:
    """Merge three versions of a v1 `inbox.md` or `outbox.md` (see the module docstring)."""
    return merge_items(base, ours, theirs, split=_pieces, merge_item=_merge_block, labels=labels)


def union_lines(base: bytes, ours: bytes, theirs: bytes) -> bytes:
    """git's union merge of an append-only log (`read.log`): `theirs`, then each line `ours`
    added to `base` that `theirs` lacks, in `ours`' order."""
    have = set(theirs.splitlines())
    old = set(base.splitlines())
    added = [line for line in ours.splitlines() if line not in old and line not in have]
    if not added:
        return theirs
    separator = b"" if not theirs or theirs.endswith(b"\n") else b"\n"
    return theirs + separator + b"".join(line + b"\n" for line in dict.fromkeys(added))

"""Three-way merge of a text that holds items: task lines, memory entries, message blocks.

Core layer (pure). A plain line merge conflicts whenever both sides append to the same list,
which in these files is the common case (two clones each add a task after the last one).
Here each item is first replaced by one token line, so the line merge sees the text around
the items plus where each item sits; then:

- a conflicted hunk in which one side only added, moved or removed items (tokens and blank
  lines), resolves to our lines followed by the items only they added (in the kind's order,
  `order`), without the items they removed;
- text that both sides changed at one place stays a conflict, with git's markers;
- each item's own lines are merged by the kind (`merge_item`), which sees the three versions
  (None where a version lacks the item) and returns the lines to keep, which side's position
  wins when the two sides moved the item to different places, or None for a conflict;
- an item that the line merge dropped but `merge_item` keeps (deleted on one side, edited on
  the other) is put back where the editing side has it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from moss_files.foundation.textmerge import Hunk, Labels, Lines, merge_lines, render

OURS, THEIRS = "ours", "theirs"
_TOKEN = "\x00item "  # no artifact file holds a NUL byte (readers refuse them), so no line looks like this


@dataclass(frozen=True, slots=True)
class Item:
    """One item of a version: its key (the same item has the same key in every version), its
    lines (with their endings) and what orders items that both sides added at one place."""

    key: str
    lines: Lines
    order: Any = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What `merge_item` decided for one item: the lines to write (none: the item is gone),
    the side whose place wins when both moved it (None: ours), notes for the person reading
    the merge, and whether it is a conflict (then `lines` holds the whole marked block)."""

    lines: Lines
    side: str | None = None
    conflict: bool = False


Piece = str | Item
Split = Callable[[str], Sequence[Piece]]
MergeItem = Callable[[Item | None, Item | None, Item | None], Outcome]


@dataclass(frozen=True, slots=True)
class Result:
    """A merged text and how many conflicts it holds."""

    text: str
    conflicts: int


def union_lines(base: Lines, ours: Lines, theirs: Lines) -> Lines:
    """A three-way merge of an item's own lines (its details) that never conflicts: where both
    sides changed the same lines, our lines and then theirs that ours lacks, counted (a line
    one side holds twice stays twice), so the lines kept are the same whichever side is ours.
    An item both sides added has no base: pass ()."""
    merged: list[str] = []
    for hunk in merge_lines(base, ours, theirs):
        if hunk.merged is not None:
            merged.extend(hunk.merged)
        else:
            merged.extend(hunk.ours)
            extra = Counter(hunk.theirs) - Counter(hunk.ours)
            for line in hunk.theirs:
                if extra[line] > 0:
                    extra[line] -= 1
                    merged.append(line)
    return tuple(merged)


def _skeleton(pieces: Sequence[Piece]) -> tuple[list[str], dict[str, Item]]:
    lines: list[str] = []
    items: dict[str, Item] = {}
    for piece in pieces:
        if isinstance(piece, Item):
            key = piece.key
            suffix = 2
            while key in items:  # a key repeated within one version keeps its occurrences apart
                key = f"{piece.key}#{suffix}"
                suffix += 1
            items[key] = Item(key, piece.lines, piece.order)
            lines.append(f"{_TOKEN}{key}\n")
        else:
            lines.append(piece)
    return lines, items


def _key(line: str) -> str | None:
    return line[len(_TOKEN) : -1] if line.startswith(_TOKEN) else None


def _only_items(lines: Lines) -> bool:
    return all(_key(line) is not None or not line.strip() for line in lines)


def merge_items(base: str, ours: str, theirs: str, *, split: Split, merge_item: MergeItem, labels: Labels = Labels()) -> Result:
    """Merge three versions of an item-holding text (see the module docstring)."""
    old_lines, old = _skeleton(split(base))
    our_lines, mine = _skeleton(split(ours))
    their_lines, other = _skeleton(split(theirs))
    outcomes = {key: merge_item(old.get(key), mine.get(key), other.get(key)) for key in {*old, *mine, *other}}

    # The merged skeleton: (line, where it came from) pairs, and conflicted hunks left as they are.
    entries: list[tuple[str, str] | Hunk] = []
    for hunk in merge_lines(old_lines, our_lines, their_lines):
        if hunk.base == hunk.ours == hunk.theirs:
            entries.extend((line, "both") for line in hunk.ours)
        elif hunk.merged is not None:
            side = OURS if hunk.merged == hunk.ours else THEIRS
            entries.extend((line, side) for line in hunk.merged)
        else:
            settled = _settle(hunk, old, mine, other)
            entries.extend(settled if settled is not None else [hunk])
    entries = _one_place_each(entries, outcomes)
    entries = _put_back(entries, outcomes, our_lines, their_lines)

    final: list[Hunk] = []
    conflicts = 0
    for entry in entries:
        if isinstance(entry, Hunk):
            final.append(Hunk(_expand(entry.base, old), _expand(entry.ours, mine), _expand(entry.theirs, other), None))
            continue
        line, _side = entry
        key = _key(line)
        if key is None:
            lines: Lines = (line,)
        else:
            lines = outcomes[key].lines
            conflicts += outcomes[key].conflict
        final.append(Hunk((), lines, lines, lines))
    out, text_conflicts = render(final, labels, newline="\r\n" if "\r\n" in ours else "\n")
    return Result("".join(out), conflicts + text_conflicts)


def _settle(hunk: Hunk, old: dict[str, Item], mine: dict[str, Item], other: dict[str, Item]) -> list[tuple[str, str]] | None:
    """Resolve a conflicted hunk in which at most one side wrote text (the other only added,
    moved or removed items): our lines without the items they removed, then the lines they
    added; items both sides appended at the end of one list are put in the kind's order.
    None when both sides wrote text there."""
    if not (_only_items(hunk.ours) or _only_items(hunk.theirs)):
        return None
    base_keys = {_key(line) for line in hunk.base} - {None}
    removed_by_them = base_keys - {_key(line) for line in hunk.theirs}
    removed_by_us = base_keys - {_key(line) for line in hunk.ours}
    kept = [(line, OURS) for line in hunk.ours if _key(line) not in removed_by_them or _key(line) is None]
    present = {_key(line) for line, _ in kept} - {None}
    added = [(line, THEIRS) for line in hunk.theirs if line.strip() and _key(line) not in present and _key(line) not in removed_by_us]
    new_tail = 0  # how many of our last lines are items we added (not moved here)
    while new_tail < len(kept) and (_key(kept[-1 - new_tail][0]) or "") not in old and _key(kept[-1 - new_tail][0]) is not None:
        new_tail += 1
    if new_tail and added and all(_key(line) is not None for line, _ in added):
        tail = kept[len(kept) - new_tail :] + added
        tail.sort(key=lambda pair: _order(pair[0], mine, other))
        return kept[: len(kept) - new_tail] + tail
    return kept + added


def _expand(lines: Lines, side: dict[str, Item]) -> Lines:
    """A side of a conflicted hunk with each token replaced by that side's item lines."""
    out: list[str] = []
    for line in lines:
        key = _key(line)
        out.extend((line,) if key is None else side[key].lines)
    return tuple(out)


def _order(line: str, mine: dict[str, Item], other: dict[str, Item]) -> tuple[int, Any]:
    key = _key(line) or ""
    item = mine.get(key) or other.get(key)
    order = item.order if item is not None else None
    return (0, order) if order is not None else (1, 0)


def _one_place_each(entries: list[tuple[str, str] | Hunk], outcomes: dict[str, Outcome]) -> list[tuple[str, str] | Hunk]:
    """An item both sides moved to different places appears twice: keep the place the side
    that `merge_item` named put it (ours when it named none)."""
    places: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, Hunk) and _key(entry[0]) is not None:
            places.setdefault(_key(entry[0]) or "", []).append(index)
    dropped: set[int] = set()
    for key, indexes in places.items():
        if len(indexes) < 2:
            continue
        wanted = outcomes[key].side or OURS
        chosen = next((i for i in indexes if entries[i][1] == wanted), indexes[0])  # type: ignore[index]
        dropped.update(i for i in indexes if i != chosen)
    return [entry for index, entry in enumerate(entries) if index not in dropped]


def _put_back(
    entries: list[tuple[str, str] | Hunk], outcomes: dict[str, Outcome], our_lines: list[str], their_lines: list[str]
) -> list[tuple[str, str] | Hunk]:
    """Put back each item that `merge_item` keeps but the line merge dropped (deleted on one
    side, edited on the other): after the nearest item before it, in the version that has
    it, that the merge placed; else before the nearest such item after it; else at the end."""

    def placed() -> dict[str, int]:
        return {_key(entry[0]) or "": index for index, entry in enumerate(entries) if not isinstance(entry, Hunk) and _key(entry[0]) is not None}

    where = placed()
    in_conflicts = {_key(line) for entry in entries if isinstance(entry, Hunk) for line in (*entry.ours, *entry.theirs)}
    missing = sorted(key for key, outcome in outcomes.items() if outcome.lines and key not in where and key not in in_conflicts)
    for key in missing:  # rare: a merge puts back few items, so recounting after each is cheap
        token = f"{_TOKEN}{key}\n"
        source, side = (our_lines, OURS) if token in our_lines else (their_lines, THEIRS)
        at = source.index(token) if token in source else len(source)
        before = next((where[k] for k in (_key(line) for line in reversed(source[:at])) if k in where), None)
        after = next((where[k] for k in (_key(line) for line in source[at + 1 :]) if k in where), None)
        position = before + 1 if before is not None else after if after is not None else len(entries)
        entries.insert(position, (token, side))
        where = placed()
    return entries

"""Three-way merges of line sequences (diff3), the building block of every merge driver.

Core layer (pure). `merge_lines(base, ours, theirs)` cuts the three versions into hunks: runs
all three share, and changed runs between them. A changed run that only one side touched, or
that both sides changed alike, resolves by itself; the rest are conflicts, which a kind's
driver may still resolve by what it knows of its lines (two sides that each appended a task
to one list keep both) before `render` writes git's markers for what is left.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

Lines = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Hunk:
    """One run of the merge. `merged` is the result when the run resolved; None marks a
    conflict between `ours` and `theirs` (both changed `base`, differently)."""

    base: Lines
    ours: Lines
    theirs: Lines
    merged: Lines | None

    @property
    def conflicted(self) -> bool:
        return self.merged is None


@dataclass(frozen=True, slots=True)
class Labels:
    """The names git's markers carry for each side."""

    ours: str = "ours"
    base: str = "base"
    theirs: str = "theirs"


def _sync_regions(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """Runs of `base` that both sides kept unchanged: (base_start, length, ours_start,
    theirs_start), in order, ending with an empty run at the three ends."""
    with_ours = SequenceMatcher(None, base, ours, autojunk=False).get_matching_blocks()
    with_theirs = SequenceMatcher(None, base, theirs, autojunk=False).get_matching_blocks()
    regions = []
    x = y = 0
    while x < len(with_ours) - 1 and y < len(with_theirs) - 1:  # the last block is a sentinel
        a_base, a_side, a_size = with_ours[x]
        b_base, b_side, b_size = with_theirs[y]
        start, end = max(a_base, b_base), min(a_base + a_size, b_base + b_size)
        if start < end:
            regions.append((start, end - start, a_side + start - a_base, b_side + start - b_base))
        if a_base + a_size < b_base + b_size:
            x += 1
        else:
            y += 1
    regions.append((len(base), 0, len(ours), len(theirs)))
    return regions


def merge_lines(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> list[Hunk]:
    """The hunks of a three-way merge, in order. Joining every hunk's `merged` gives the
    result when no hunk is conflicted."""
    hunks: list[Hunk] = []
    at_base = at_ours = at_theirs = 0
    for start, size, ours_start, theirs_start in _sync_regions(base, ours, theirs):
        old = tuple(base[at_base:start])
        mine = tuple(ours[at_ours:ours_start])
        other = tuple(theirs[at_theirs:theirs_start])
        if old or mine or other:
            hunks.append(Hunk(old, mine, other, resolve(old, mine, other)))
        if size:
            same = tuple(base[start : start + size])
            hunks.append(Hunk(same, same, same, same))
        at_base, at_ours, at_theirs = start + size, ours_start + size, theirs_start + size
    return hunks


def resolve(base: Lines, ours: Lines, theirs: Lines) -> Lines | None:
    """The merge of one changed run when it resolves by the plain rules, else None."""
    if ours == base:
        return theirs
    if theirs == base or ours == theirs:
        return ours
    return None


def render(hunks: Sequence[Hunk], labels: Labels = Labels(), *, newline: str = "\n") -> tuple[list[str], int]:
    """The merged lines, with git's diff3-style markers around each conflicted hunk, and the
    number of conflicts. Lines keep their own endings; a side whose last line lacks one gets
    `newline` before the next marker, so markers always start a line."""
    out: list[str] = []
    conflicts = 0
    for hunk in hunks:
        if hunk.merged is not None:
            out.extend(hunk.merged)
            continue
        conflicts += 1
        for marker, lines in (("<" * 7 + " " + labels.ours, hunk.ours), ("|" * 7 + " " + labels.base, hunk.base), ("=" * 7, hunk.theirs)):
            out.append(marker + newline)
            out.extend(_ended(lines, newline))
        out.append(">" * 7 + " " + labels.theirs + newline)
    return out, conflicts


def _ended(lines: Lines, newline: str) -> list[str]:
    if lines and not lines[-1].endswith(("\n", "\r")):
        return [*lines[:-1], lines[-1] + newline]
    return list(lines)


def merge_text(base: str, ours: str, theirs: str, labels: Labels = Labels(), settle: Callable[[Hunk], Lines | None] | None = None) -> tuple[str, int]:
    """Merge three texts line by line: the result (with markers where it conflicts) and the
    number of conflicts left. `settle` may resolve a conflicted hunk (return its lines) or
    leave it (None)."""
    hunks = merge_lines(base.splitlines(keepends=True), ours.splitlines(keepends=True), theirs.splitlines(keepends=True))
    if settle is not None:
        hunks = [hunk if hunk.merged is not None else Hunk(hunk.base, hunk.ours, hunk.theirs, settle(hunk)) for hunk in hunks]
    lines, conflicts = render(hunks, labels, newline="\r\n" if "\r\n" in ours else "\n")
    return "".join(lines), conflicts


@dataclass(frozen=True, slots=True)
class FoldBack:
    """What a kept copy of a displaced save means for the file now: `text` is the file with
    the copy's changes folded in (None: nothing to fold), `conflicts` how many of its changes
    the file changed too (marked as a merge marks them), and `added` whether the copy added any
    line to its base at all (a copy that added none can hold nothing the file needs)."""

    text: str | None
    conflicts: int = 0
    added: bool = True


def fold_back(base: str, current: str, kept: str, labels: Labels = Labels()) -> FoldBack:
    """Fold a kept copy of a displaced save back into the file.

    A tool's write that an editor's save overtook is undone, but its bytes were visible for an
    instant, and an editor that read them then may save them later: a save without the lines
    of the save the write displaced (`kept`). Such a late save holds none of the lines `kept`
    added to `base` (what the write had read); then `kept`'s changes since `base` are merged
    into `current`, three ways, so neither the tool's lines nor the editor's are lost, and
    lines both inserted at one place are all kept. When `current` holds any of those lines, it
    comes from the displaced save itself, and a line of it missing now was removed on purpose:
    nothing is folded.
    """
    added = Counter(line.rstrip("\r\n") for line in kept.splitlines() if line.strip())
    added -= Counter(line.rstrip("\r\n") for line in base.splitlines())
    if not added:
        return FoldBack(None, added=False)
    present = {line.rstrip("\r\n") for line in current.splitlines()}
    if any(line in present for line in added):
        return FoldBack(None)
    newline = "\r\n" if "\r\n" in current else "\n"

    def both_inserted(hunk: Hunk) -> Lines | None:
        return None if hunk.base else (*_ended(hunk.ours, newline), *hunk.theirs)

    text, conflicts = merge_text(base, current, kept, labels, settle=both_inserted)
    return FoldBack(text, conflicts)

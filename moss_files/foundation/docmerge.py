"""Three-way merge of a frontmatter document: field by field, then the body line by line.

Core layer (pure). Used by the merge driver for every one-file-per-item kind (capsules,
insights, sessions, board items). For each top-level key: a value changed on one side wins;
both sides making the same change is that change; a modification time (`updated_at` and its
spellings) takes the later value; the format version (`moss_format`) takes the highest any
side records, so a file one clone upgraded and the other edited merges into the upgraded form; a kind may add rules for its own keys (the board's status,
say); anything else changed on both sides is a conflict on that key, shown with git's markers
around the key's lines. The result starts from our text, so our comments, key order and
quoting survive, and only keys the other side changed are edited in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moss_files.foundation import document, formats
from moss_files.foundation.textmerge import Labels, merge_text

MISSING: Any = document.DELETE  # a key absent from a version (and, in changes, a key to remove)
CONFLICT: Any = object()  # what a field rule returns to leave a key conflicted
TIME_KEYS = frozenset({"updated_at", "updatedAt", "updated", "modified", "modified_at", "modifiedAt", "last_modified"})

FieldRule = Callable[[Any, Any, Any], Any]
"""(base, ours, theirs) -> merged value, MISSING to drop the key, or CONFLICT."""


@dataclass(frozen=True, slots=True)
class Merged:
    """A merge's text (with markers where it conflicts) and what conflicted."""

    text: str
    conflicted_keys: tuple[str, ...] = ()
    body_conflicts: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def clean(self) -> bool:
        return not self.conflicted_keys and not self.body_conflicts


def later(first: Any, second: Any) -> Any:
    """The later of two modification times (RFC 3339 strings, or numbers such as Moss's
    milliseconds); a value of another type makes it a conflict."""
    if isinstance(first, bool) or isinstance(second, bool):
        return CONFLICT
    if isinstance(first, int | float) and isinstance(second, int | float):
        return max(first, second)
    if isinstance(first, str) and isinstance(second, str):
        # RFC 3339 in UTC with a Z sorts as text; that is how every kind writes its times.
        return max(first, second)
    return CONFLICT


def merge_value(base: Any, ours: Any, theirs: Any, *, rule: FieldRule | None = None, key: str = "") -> Any:
    """The merged value of one key, MISSING for a key both sides (or the changing side)
    removed, or CONFLICT."""
    if ours == theirs:
        return ours
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    if rule is not None:
        return rule(base, ours, theirs)
    if key in TIME_KEYS and ours is not MISSING and theirs is not MISSING:
        return later(ours, theirs)
    if isinstance(ours, dict) and isinstance(theirs, dict):
        nested = _merge_mappings(base if isinstance(base, dict) else {}, ours, theirs, {})
        if CONFLICT not in nested.values():
            return {key: value for key, value in nested.items() if value is not MISSING}
    return CONFLICT


def _merge_mappings(base: Mapping[str, Any], ours: Mapping[str, Any], theirs: Mapping[str, Any], rules: Mapping[str, FieldRule]) -> dict[str, Any]:
    """Key by key, in our order then the keys only theirs has."""
    keys = list(ours) + [key for key in theirs if key not in ours] + [key for key in base if key not in ours and key not in theirs]
    merged = {key: merge_value(base.get(key, MISSING), ours.get(key, MISSING), theirs.get(key, MISSING), rule=rules.get(key), key=key) for key in keys}
    if formats.MARKER in merged:
        version = formats.merge_versions(ours.get(formats.MARKER), theirs.get(formats.MARKER))
        merged[formats.MARKER] = MISSING if version is None else version
    return merged


def merge_document(
    base: str,
    ours: str,
    theirs: str,
    *,
    path: Path | str | None = None,
    rules: Mapping[str, FieldRule] | None = None,
    labels: Labels = Labels(),
) -> Merged:
    """Merge three versions of one document.

    Raises InvalidDocument when a version cannot be read (the driver then falls back to a
    plain line merge, which a person resolves).
    """
    old, mine, other = (document.parse(text, path) for text in (base, ours, theirs))
    body, body_conflicts = merge_text(old.body, mine.body, other.body, labels)
    merged = _merge_mappings(old.meta, mine.meta, other.meta, rules or {})
    conflicted = tuple(key for key, value in merged.items() if value is CONFLICT)
    changes = {
        key: value
        for key, value in merged.items()
        if value is not CONFLICT
        and not (value is MISSING and key not in mine.meta)
        and (key not in mine.meta or value is MISSING or not _same(mine.meta[key], value))
    }
    text = document.edit_frontmatter(ours, changes, path) if changes else ours
    doc = document.parse(text, path)
    if conflicted and not doc.has_frontmatter:  # we removed the frontmatter, they changed a key
        text = f"---{doc.newline}---{doc.newline}{text}"
        doc = document.parse(text, path)
    if not doc.has_frontmatter:
        return Merged(body, (), body_conflicts)
    head = text[: text.index("\n") + 1]
    tail = text[len(head) + len(doc.frontmatter_text) : len(text) - len(doc.body)]
    frontmatter = doc.frontmatter_text
    for key in conflicted:
        sides = (_key_lines(old.frontmatter_text, key), _key_lines(mine.frontmatter_text, key), _key_lines(other.frontmatter_text, key))
        frontmatter = _mark_key(frontmatter, key, sides, labels, doc.newline)
    return Merged(head + frontmatter + tail + body, conflicted, body_conflicts)


def _same(first: Any, second: Any) -> bool:
    return type(first) is type(second) and first == second


def _key_lines(frontmatter: str, key: str) -> list[str]:
    """The lines of top-level `key` in a frontmatter text: its own line and the indented or
    list lines under it (comments directly under it included)."""
    lines = frontmatter.splitlines(keepends=True)
    for index, line in enumerate(lines):
        name = line.split(":", 1)[0].strip().strip("'\"")
        if line[:1] not in (" ", "\t", "#", "-") and ":" in line and name == key:
            end = index + 1
            while end < len(lines) and (lines[end][:1] in (" ", "\t", "-") or not lines[end].strip()):
                end += 1
            return lines[index:end]
    return []


def _mark_key(frontmatter: str, key: str, sides: tuple[list[str], list[str], list[str]], labels: Labels, newline: str) -> str:
    """`frontmatter` with `key`'s lines replaced by git's markers around the three versions
    (appended at the end when our side has no such key)."""
    base, ours, theirs = sides
    block = [
        f"{'<' * 7} {labels.ours}{newline}",
        *_ended(ours, newline),
        f"{'|' * 7} {labels.base}{newline}",
        *_ended(base, newline),
        f"{'=' * 7}{newline}",
        *_ended(theirs, newline),
        f"{'>' * 7} {labels.theirs}{newline}",
    ]
    lines = _ended(frontmatter.splitlines(keepends=True), newline)
    current = _key_lines(frontmatter, key)
    start = next((i for i in range(len(lines)) if current and lines[i : i + len(current)] == _ended(current, newline)), len(lines))
    lines[start : start + len(current)] = block
    return "".join(lines)


def _ended(lines: list[str], newline: str) -> list[str]:
    """`lines` with a line ending after the last one."""
    if lines and not lines[-1].endswith("\n"):
        return [*lines[:-1], lines[-1] + newline]
    return list(lines)

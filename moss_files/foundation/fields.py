"""Typed access to a document's frontmatter keys, for every artifact kind's parser.

Core layer (pure). Keys are found in any letter case, and under aliases a kind declares
(`assigned_worker` also read as `assignedWorker`); a value of the wrong shape raises
InvalidDocument SCHEMA_ERROR with the line of its key, so a person fixing a file by hand is
sent to the right line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from moss_files.foundation.document import Document
from moss_files.foundation.errors import InvalidDocument
from moss_files.foundation.ids import is_safe_id

_SCALARS = (str, int, float)


def key_line(doc: Document, key: str | None) -> int | None:
    """The 1-based file line of a top-level frontmatter key (None when absent)."""
    if key is None or not doc.has_frontmatter:
        return None
    pattern = re.compile(rf"^['\"]?{re.escape(key)}['\"]?[ \t]*:")
    for number, line in enumerate(doc.frontmatter_text.split("\n"), start=2):  # line 1 is the fence
        if pattern.match(line):
            return number
    return None


def type_name(value: Any) -> str:
    """How an error names a value's YAML type."""
    return {dict: "a mapping", list: "a list", bool: "true/false"}.get(type(value), type(value).__name__)


def normalized_choice(allowed: Sequence[str]) -> Callable[[str], str | None]:
    """A normalizer for `choice`: lower case, `-` as `_`, and only the allowed values."""

    def normalize(value: str) -> str | None:
        found = value.strip().lower().replace("-", "_")
        return found if found in allowed else None

    return normalize


class FieldReader:
    """The typed frontmatter fields of one document."""

    def __init__(self, doc: Document, path: Path | str | None, aliases: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.doc = doc
        self.meta = doc.meta
        self.path = path
        self.aliases = aliases or {}
        # One pass over the keys instead of a case-insensitive scan per field and alias: the
        # scans were half the cost of reading a big board.
        self.folded: dict[str, str] = {}
        for key in self.meta:
            if isinstance(key, str):
                self.folded.setdefault(key.lower(), key)

    def key(self, name: str) -> str | None:
        """The key spelling this document uses for `name` (or an alias), if any."""
        # `name` first, unrolled: this runs for every field of every file a listing reads
        # (70 times a board task), and most fields have no alias.
        if name in self.meta:
            return name
        found = self.folded.get(name.lower())
        if found is not None:
            return found
        for candidate in self.aliases.get(name, ()):
            if candidate in self.meta:
                return candidate
            found = self.folded.get(candidate.lower())
            if found is not None:
                return found
        return None

    def raw(self, name: str) -> tuple[str | None, Any]:
        """(key, value as parsed) for `name`; (None, None) when absent."""
        key = self.key(name)
        return key, (self.meta[key] if key is not None else None)

    def error(self, key: str | None, message: str) -> InvalidDocument:
        """The SCHEMA_ERROR for a value of `key`, at its line."""
        return InvalidDocument(message, code="SCHEMA_ERROR", path=self.path, line=key_line(self.doc, key))

    def item_id(self, kind: str, fallback_id: str | None, *, max_length: int = 128) -> str:
        """The document's `id` (else `fallback_id`, the file's stem), which names its file:
        SCHEMA_ERROR when there is none, or it holds more than letters, digits, '.', '_', '-'."""
        item_id = (self.text("id") or "").strip() or (fallback_id or "")
        if not item_id:
            raise InvalidDocument(f"{kind} has no id", code="SCHEMA_ERROR", path=self.path, line=1)
        if not is_safe_id(item_id, max_length=max_length):
            raise self.error(self.key("id"), f"id {item_id!r} may hold only letters, digits, '.', '_' and '-'")
        return item_id

    def text(self, name: str, *, default: str | None = None, blank_is_default: bool = False) -> str | None:
        """A scalar as text (numbers read as written); `default` when absent or null (or blank,
        with `blank_is_default`). Raises SCHEMA_ERROR for a list, mapping or true/false."""
        key, value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, _SCALARS):
            raise self.error(key, f"{name!r} must be text, not {type_name(value)}")
        text = str(value)
        return default if blank_is_default and not text.strip() else text

    def items(self, name: str, *, comma_separated: bool = False) -> tuple[str, ...]:
        """A list of scalars as stripped texts, blanks dropped. A single text is one item, or,
        with `comma_separated`, split at commas (`tags: a, b` by hand reads as two)."""
        key, value = self.raw(name)
        if value is None:
            return ()
        if isinstance(value, str):
            parts = value.split(",") if comma_separated else [value]
            return tuple(part.strip() for part in parts if part.strip())
        if not isinstance(value, list) or any(isinstance(item, bool) or not isinstance(item, _SCALARS) for item in value):
            raise self.error(key, f"{name!r} must be a list of texts")
        return tuple(str(item).strip() for item in value if str(item).strip())

    def number(self, name: str, *, default: int | float = 0, minimum: int | None = None, integer: bool = False) -> int | float:
        """A number (a whole one with `integer`), at least `minimum`; `default` when absent."""
        key, value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            raise self.error(key, f"{name!r} must be {'a whole number' if integer else 'a number'}, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{name!r} must be at least {minimum}")
        return value

    def choice(self, name: str, allowed: Sequence[str], default: str, normalize: Callable[[str], str | None] | None = None) -> str:
        """One of `allowed` (as `normalize` reads it: by default any case, `-` for `_`);
        `default` when absent or blank."""
        key, value = self.raw(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return default
        found = (normalize or normalized_choice(allowed))(value) if isinstance(value, str) else None
        if found is None:
            raise self.error(key, f"{name} {value!r} is not one of {', '.join(allowed)}")
        return found

    def mapping(self, name: str) -> tuple[str | None, Mapping[str, Any]]:
        """(key, the mapping) for `name`; an empty mapping when absent."""
        key, value = self.raw(name)
        if value is None:
            return key, {}
        if not isinstance(value, dict):
            raise self.error(key, f"{name!r} must be a mapping of keys to values")
        return key, value

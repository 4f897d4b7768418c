"""JSON and TOML text read into values, with the problems of hand-written files reported by
code, file and line: nesting too deep for the parsers (JSON_TOO_DEEP, TOML_TOO_DEEP), and
JSON objects that hold a key twice (JSON_DUPLICATE_KEY), which `json.loads` would silently
resolve to the last value.

Core layer: text in, values out; imports only the standard library and the error tree. Syntax
errors pass through as the parsers raise them (`json.JSONDecodeError`,
`tomllib.TOMLDecodeError`): each caller reports those with its own code (SOURCE_INVALID for a
migration source, REGISTRY_INVALID for sleeves.toml, PARSE_ERROR for an import line, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from moss_files.foundation.errors import InvalidDocument


class _DuplicateKey(Exception):
    """Raised inside the JSON parser at the first object that holds a key twice."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _DuplicateKey
    return found


def json_blocks(data: Any, *, indent: int = 2, default: Callable[[Any], Any] | None = None, block: int = 8192) -> Iterator[str]:
    """The text `json.dumps(data, ensure_ascii=False, indent=indent, default=default)` gives,
    as blocks of about `block` pieces each. With an indent, `json.dumps` collects every piece
    (a key, a comma, a line's indent) in one list before joining them: a migration report of
    a hundred thousand items is some ten million pieces, several times the text's own size."""
    encoder = json.JSONEncoder(ensure_ascii=False, indent=indent, default=default)
    pieces: list[str] = []
    for piece in encoder.iterencode(data):
        pieces.append(piece)
        if len(pieces) >= block:
            yield "".join(pieces)
            pieces.clear()
    if pieces:
        yield "".join(pieces)


def loads_json(text: str | bytes, *, path: Path | str | None = None, line: int | None = None, unique_keys: bool = False) -> Any:
    """The value of one JSON text (`line`: the line it starts on in `path`, for a JSON Lines
    record). With `unique_keys`, an object holding a key twice is refused rather than keeping
    the last value.

    Raises json.JSONDecodeError for a syntax error, InvalidDocument JSON_TOO_DEEP when the
    nesting is deeper than the parser can follow, JSON_DUPLICATE_KEY (with the key's line).
    """
    try:
        if unique_keys:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        return json.loads(text)
    except RecursionError:
        raise InvalidDocument(
            "the JSON nests too deeply to be read",
            code="JSON_TOO_DEEP",
            path=path,
            line=line,
            hint="flatten the nesting; no file this toolkit reads nests deeply",
        ) from None
    except _DuplicateKey:
        source = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
        key, offset = duplicate_key(source) or ("?", 0)
        at = source.count("\n", 0, offset) + (line or 1)
        raise InvalidDocument(
            f"duplicate key {key!r}: a key appears twice in the same JSON object",
            code="JSON_DUPLICATE_KEY",
            path=path,
            line=at,
            details={"key": key},
            hint="keep one of the two values",
        ) from None


def duplicate_key(text: str) -> tuple[str, int] | None:
    """(key, offset of its second occurrence) of the first key, in text order, that appears
    twice within one object of the JSON `text`; None when there is none. Only the structure is
    followed (strings, braces, brackets, commas, colons), so it suits text `json.loads` read."""
    scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
    objects: list[set[str] | None] = []  # per open container: its keys so far, None for an array
    expect_key = False
    index, end = 0, len(text)
    while index < end:
        char = text[index]
        if char == '"':
            value, after = scanstring(text, index + 1)
            keys = objects[-1] if objects else None
            if expect_key and keys is not None:
                if value in keys:
                    return value, index
                keys.add(value)
                expect_key = False
            index = after
            continue
        if char == "{":
            objects.append(set())
            expect_key = True
        elif char == "[":
            objects.append(None)
        elif char in "}]":
            if objects:
                objects.pop()
            expect_key = False
        elif char == ",":
            expect_key = bool(objects) and objects[-1] is not None
        index += 1
    return None


def loads_toml(text: str, *, path: Path | str | None = None) -> dict[str, Any]:
    """The table of a TOML text. Raises tomllib.TOMLDecodeError for a syntax error,
    InvalidDocument TOML_TOO_DEEP when arrays or inline tables nest deeper than the parser
    can follow."""
    import tomllib  # here: most commands read no TOML at all

    try:
        return tomllib.loads(text)
    except RecursionError:
        raise InvalidDocument(
            "the TOML nests too deeply to be read", code="TOML_TOO_DEEP", path=path, hint="flatten the nested arrays or inline tables"
        ) from None

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
from collections.abc import Callable, Iterable, Iterator
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


_DEEPEST = 64  # levels json_blocks writes itself; deeper values go to json's own encoder, which finds a cycle
_LONG = 256  # a container with more members than this is written member by member, in blocks


def json_blocks(data: Any, *, indent: int | str | None = 2, default: Callable[[Any], Any] | None = None, block: int = 8192) -> Iterator[str]:
    """The text `json.dumps(data, ensure_ascii=False, indent=indent, default=default)` gives,
    as blocks of about `block` pieces each. With an indent, `json.dumps` collects every piece
    (a key, a comma, a line's indent) in one list before joining them: a migration report of
    a hundred thousand items is some ten million pieces, several times the text's own size.

    With an indent, the layout is written here and each text through json's C escaper: json's
    own encoder writes indented text in pure Python, a generator step for every piece, twice
    the time (a migration's report and its --json answer: 10 us an item each). What is not a
    str, int, bool, None, list or dict of its exact type (a float, a tuple, a subclass, what
    only `default` can turn into JSON), a dict with a key that is not text, and whatever lies
    deeper than _DEEPEST levels are written by json's encoder, their lines indented to their
    place: JSON text holds a newline nowhere but between its tokens."""
    encoder = json.JSONEncoder(ensure_ascii=False, indent=indent, default=default)
    if indent is None:
        yield from _joined(encoder.iterencode(data), block)
        return
    yield from _indented_blocks(data, encoder, indent if isinstance(indent, str) else " " * indent, block)


def _joined(pieces: Iterable[str], block: int) -> Iterator[str]:
    """`pieces` joined `block` at a time."""
    held: list[str] = []
    for piece in pieces:
        held.append(piece)
        if len(held) >= block:
            yield "".join(held)
            held.clear()
    if held:
        yield "".join(held)


def _indented_blocks(data: Any, encoder: json.JSONEncoder, step: str, block: int) -> Iterator[str]:
    """`json_blocks` with an indent of `step`: every container down to the top level's
    members, and every long one, is gone through member by member (`walk`, yielding a block
    whenever `block` pieces are held); the others are written whole (`put`)."""
    pieces: list[str] = []
    append = pieces.append
    escape = json.encoder.encode_basestring  # what json's encoder uses with ensure_ascii=False: C where built

    def other(value: Any, pad: str) -> None:
        append("".join(encoder.iterencode(value)).replace("\n", pad))

    def put(value: Any, pad: str, depth: int) -> None:
        kind = type(value)
        if kind is str:
            append(escape(value))
        elif (kind is dict or kind is list) and depth < _DEEPEST:
            is_dict = kind is dict
            if not value:
                append("{}" if is_dict else "[]")
                return
            mark = len(pieces)
            inner = pad + step
            separator = ("{" if is_dict else "[") + inner
            for member in value.items() if is_dict else value:
                append(separator)
                if is_dict:
                    key, member = member
                    if type(key) is not str:
                        del pieces[mark:]  # json's encoder turns the keys into text
                        other(value, pad)
                        return
                    append(escape(key))
                    append(": ")
                if type(member) is str:  # most members: spared a call
                    append(escape(member))
                else:
                    put(member, inner, depth + 1)
                separator = "," + inner
            append(pad + ("}" if is_dict else "]"))
        elif kind is int:
            append(int.__repr__(value))
        elif value is None:
            append("null")
        elif value is True:
            append("true")
        elif value is False:
            append("false")
        else:
            other(value, pad)

    def walked(value: Any, depth: int) -> bool:
        """Whether `value` is gone through member by member: a container not empty, of its
        exact type, with text keys, near the top or long."""
        kind = type(value)
        if (kind is not dict and kind is not list) or not value or depth >= _DEEPEST or (depth > 1 and len(value) <= _LONG):
            return False
        return kind is list or all(type(key) is str for key in value)

    def walk(value: Any, pad: str, depth: int) -> Iterator[str]:
        inner = pad + step
        is_dict = type(value) is dict
        separator = ("{" if is_dict else "[") + inner
        for entry in value.items() if is_dict else value:
            append(separator)
            if is_dict:
                append(escape(entry[0]))
                append(": ")
                entry = entry[1]
            if walked(entry, depth + 1):
                yield from walk(entry, inner, depth + 1)
            else:
                put(entry, inner, depth + 1)
            if len(pieces) >= block:
                yield "".join(pieces)
                pieces.clear()
            separator = "," + inner
        append(pad + ("}" if is_dict else "]"))

    if walked(data, 0):
        yield from walk(data, "\n", 0)
    else:
        put(data, "\n", 0)
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

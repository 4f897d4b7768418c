"""TOML and JSON files read the one way every reader of the toolkit reads them.

Core layer (pure; the standard library alone until a format version is checked, for the
installer's scaffold). Markdown documents have their reader in `document`; every TOML or JSON file
(the config, `sleeves.toml`, `.moss/agent.toml` and its policy, `.mcp.json`, sharing bundles,
JSON Lines imports) comes through here, so that:

- a UTF-8 byte order mark is dropped, as `document` drops it: editors that write one (Notepad,
  PowerShell's `Out-File`) save files that read like any other;
- git's conflict markers left by an unfinished merge are reported as MERGE_CONFLICT at the
  marker's line (`conflicts`), like a markdown file's, rather than as a syntax error;
- a syntax error carries the caller's code, the file and the line;
- nesting too deep for the parsers and (where asked) a JSON key given twice are reported by
  their own codes (`structured`: JSON_TOO_DEEP, TOML_TOO_DEEP, JSON_DUPLICATE_KEY).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from moss_files.foundation import conflicts, structured
from moss_files.foundation.errors import InvalidDocument

BOM = "\ufeff"
_BOM_BYTES = BOM.encode("utf-8")
_TOML_LINE = re.compile(r"line (\d+)")


def without_bom(data: bytes) -> bytes:
    """A file's bytes without a leading UTF-8 byte order mark."""
    return data[len(_BOM_BYTES) :] if data.startswith(_BOM_BYTES) else data


def has_bom(data: bytes) -> bool:
    """Whether a file's bytes begin with a byte order mark."""
    return data.startswith(_BOM_BYTES)


def _text(source: str | bytes, path: Path | str | None, code: str, what: str) -> str:
    if isinstance(source, bytes):
        data = without_bom(source)
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise InvalidDocument(f"{what} is not UTF-8 text (byte {exc.start})", code=code, path=path, line=line) from None
    text = source[1:] if source.startswith(BOM) else source
    conflicts.check_no_conflict(text, path)
    return text


def load_toml(
    source: str | bytes, path: Path | str | None, *, code: str = "INVALID_DOCUMENT", what: str = "the file", kind: str | None = None
) -> dict[str, Any]:
    """The table a TOML file holds. `kind` (a `formats` kind) checks its format version first.

    Raises InvalidDocument MERGE_CONFLICT (the marker's line), FORMAT_TOO_NEW, TOML_TOO_DEEP,
    and `code` for text that is not UTF-8 or not TOML (with the line).
    """
    import tomllib  # here: most commands read no TOML file

    text = _text(source, path, code, what)
    if kind is not None:
        from moss_files.foundation import formats  # here: the installer's scaffold reads JSON on the standard library alone

        formats.check_text(kind, text, path)
    try:
        return structured.loads_toml(text, path=path)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        raise InvalidDocument(f"{what} is not valid TOML: {exc}", code=code, path=path, line=int(found.group(1)) if found else None) from None


def load_json(source: str | bytes, path: Path | str | None, *, code: str = "INVALID_DOCUMENT", what: str = "the file", unique_keys: bool = False) -> Any:
    """The value a JSON file holds; with `unique_keys`, an object holding a key twice is
    refused (hand-written sources and bundles) rather than keeping the last value.

    Raises InvalidDocument MERGE_CONFLICT (the marker's line), JSON_TOO_DEEP,
    JSON_DUPLICATE_KEY (the key's line), and `code` for text that is not UTF-8 or not JSON
    (with the line).
    """
    import json

    text = _text(source, path, code, what)
    try:
        return structured.loads_json(text, path=path, unique_keys=unique_keys)
    except json.JSONDecodeError as exc:
        raise InvalidDocument(f"{what} is not valid JSON: {exc.msg} (column {exc.colno})", code=code, path=path, line=exc.lineno) from None

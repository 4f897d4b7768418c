"""Checking the arguments a use case receives: one helper per shape, one error for all.

Core layer (pure). Entry points parse types (typer for the CLIs, the MCP SDK's schema for
tools); what no type can say (a required text that is blank, a count below one, a value
outside its set) is checked here, once, by the use case. Every refusal is InvalidRequest
INVALID_REQUEST with `details.field` naming the argument as its caller spelled it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from moss_files.foundation.errors import InvalidRequest


def refuse(field: str, message: str, **details: Any) -> InvalidRequest:
    """The error for a bad argument `field`."""
    return InvalidRequest(f"{field} {message}", details={"field": field, **details})


def required(value: str | None, field: str) -> str:
    """`value` stripped; refused when missing or blank."""
    if value is None or not value.strip():
        raise refuse(field, "is required")
    return value.strip()


def optional(value: str | None) -> str | None:
    """`value` stripped, with a blank text meaning no value (as Moss and Moe treat '')."""
    if value is None or not value.strip():
        return None
    return value.strip()


def texts(values: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """A list of texts, stripped, blanks dropped; one text is a list of one; None stays None."""
    if values is None:
        return None
    items = [values] if isinstance(values, str) else list(values)
    return tuple(item.strip() for item in items if item.strip())


def count(value: int | None, field: str, *, default: int, maximum: int | None = None, minimum: int = 1) -> int:
    """A whole number of at least `minimum` (default when None), capped at `maximum`."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse(field, "must be a whole number")
    if value < minimum:
        raise refuse(field, f"must be at least {minimum}", value=value)
    return value if maximum is None else min(value, maximum)


def choice(value: str, allowed: Sequence[str], field: str, *, upper: bool = True) -> str:
    """`value` (upper-cased when `upper`) if it is one of `allowed`."""
    found = value.strip().upper() if upper else value.strip()
    if found not in allowed:
        raise refuse(field, f"must be one of {', '.join(allowed)}", value=value, allowed=list(allowed))
    return found


def one_line(value: str | None, field: str) -> str | None:
    """`value` when it holds no line break (a field that becomes one line of a file)."""
    if value is not None and ("\n" in value or "\r" in value):
        raise refuse(field, "must be a single line")
    return value


def given_path(raw: str | None) -> Path:
    """A path a caller gave (`path`), made absolute against the working folder: refused when
    missing, holding NUL or going up with `..` (details.reason: nul, traversal). What the
    path may name (its suffix, links, allowed folders) is the caller's to check next."""
    if not raw:
        raise refuse("path", "is required")
    if "\0" in raw:
        raise InvalidRequest("path must not contain NUL characters", details={"reason": "nul"})
    path = Path(raw).expanduser()
    if ".." in path.parts:
        raise InvalidRequest("path must not contain '..'", details={"reason": "traversal", "path": raw})
    return path if path.is_absolute() else Path.cwd() / path

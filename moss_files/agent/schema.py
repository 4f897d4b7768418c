"""Checking tool arguments against a tool's input schema, and reading `--arg key=value`.
Core layer (pure).

A basic shape check (Bosun M1 §8.1), run before a call leaves the runtime: the arguments are an
object; required ones are there; each has its declared type (`type`, a list of types, `enum`,
`const`, `anyOf`/`oneOf` of those, nested objects and array items, `minimum`/`maximum`,
`minLength`/`maxLength`); no unknown ones where the schema declares `properties`, unless its
`additionalProperties` is true or a schema. (JSON Schema allows undeclared ones when that key is
left out, as most servers' schemas leave it; an argument the tool does not declare is then a
mistake the server ignores or fails on, so it is refused here.) What this does not check
(formats, patterns, `$ref`) the server checks again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_TYPES: Mapping[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
MAX_PROBLEMS = 10


def check_arguments(arguments: Any, schema: Mapping[str, Any]) -> list[dict[str, str]]:
    """Problems with `arguments` under `schema`, each `{field, message}`; empty when fine."""
    problems: list[dict[str, str]] = []
    if not isinstance(arguments, dict):
        return [{"field": "(arguments)", "message": "must be an object"}]
    _check(arguments, {"type": "object", **dict(schema)}, "", problems)
    return problems[:MAX_PROBLEMS]


def _check(value: Any, schema: Any, where: str, problems: list[dict[str, str]]) -> None:
    if not isinstance(schema, Mapping) or len(problems) >= MAX_PROBLEMS:
        return
    field = where or "(arguments)"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            if not any(not _problems_of(value, option, where) for option in options):
                problems.append({"field": field, "message": f"matches none of the allowed shapes ({key})"})
                return
    if "const" in schema and value != schema["const"]:
        problems.append({"field": field, "message": f"must be {schema['const']!r}"})
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        problems.append({"field": field, "message": f"must be one of {', '.join(map(repr, enum))}"})
        return
    wanted = schema.get("type")
    types = [wanted] if isinstance(wanted, str) else wanted if isinstance(wanted, list) else []
    known = [name for name in types if name in _TYPES]
    if known and not any(_TYPES[name](value) for name in known):
        problems.append({"field": field, "message": f"must be {' or '.join(known)}, not {_type_name(value)}"})
        return
    if isinstance(value, dict):
        _check_object(value, schema, where, problems)
    elif isinstance(value, list):
        items = schema.get("items")
        for index, item in enumerate(value):
            _check(item, items, f"{where}[{index}]", problems)
    elif isinstance(value, str):
        low, high = schema.get("minLength"), schema.get("maxLength")
        if isinstance(low, int) and len(value) < low:
            problems.append({"field": field, "message": f"must be at least {low} characters"})
        if isinstance(high, int) and len(value) > high:
            problems.append({"field": field, "message": f"must be at most {high} characters"})
    elif isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            problems.append({"field": field, "message": f"must be at least {low}"})
        if isinstance(high, int | float) and value > high:
            problems.append({"field": field, "message": f"must be at most {high}"})


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], where: str, problems: list[dict[str, str]]) -> None:
    found_properties = schema.get("properties")
    properties: Mapping[str, Any] = found_properties if isinstance(found_properties, Mapping) else {}
    found_required = schema.get("required")
    required: list[Any] = found_required if isinstance(found_required, list) else []
    prefix = f"{where}." if where else ""
    for name in required:
        if name not in value:
            problems.append({"field": f"{prefix}{name}", "message": "is required"})
    extra = schema.get("additionalProperties", not isinstance(found_properties, Mapping))
    for name, item in value.items():
        if name in properties:
            _check(item, properties[name], f"{prefix}{name}", problems)
        elif extra is False:
            problems.append({"field": f"{prefix}{name}", "message": f"is not an argument of this tool (it takes {', '.join(properties) or 'none'})"})
        elif isinstance(extra, Mapping):
            _check(item, extra, f"{prefix}{name}", problems)


def _problems_of(value: Any, schema: Any, where: str) -> list[dict[str, str]]:
    found: list[dict[str, str]] = []
    _check(value, schema, where, found)
    return found


def _type_name(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__


def parse_assignments(items: list[str], schema: Mapping[str, Any]) -> dict[str, Any]:
    """`key=value` pairs as arguments, each value read by its property's declared type: text
    stays text (`name=42` is the string "42" for a string argument), numbers and true/false are
    parsed for numeric and boolean ones, and JSON for objects, arrays and undeclared ones.
    Raises ValueError for an item without `=` or a value its type cannot read."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    arguments: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        arguments[key] = _read_value(raw, properties.get(key) if isinstance(properties, Mapping) else None, key)
    return arguments


def _read_value(raw: str, schema: Any, key: str) -> Any:
    types = _declared_types(schema)
    if types == {"string"} or (types and types <= {"string", "null"} and raw != "null"):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        if not types or "string" in types:
            return raw
        raise ValueError(f"{key}={raw!r} is not a {' or '.join(sorted(types))}") from None
    if types and "string" in types and not any(_TYPES[name](value) for name in types if name in _TYPES):
        return raw
    return value


def _declared_types(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    wanted = schema.get("type")
    if isinstance(wanted, str):
        return {wanted}
    if isinstance(wanted, list):
        return {name for name in wanted if isinstance(name, str)}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            found |= _declared_types(option)
    return found

"""Editing JSON text in place: add a member to an object or an item to an array, replace a
value, remove a member or an item, and leave every other byte of the text as it was. Core layer
(pure functions over text; the standard library only, so the scaffold can use it on a bare
python3).

A person's settings file keeps its key order, spacing, layout and line ends: an edit touches
only the span of what it adds, replaces or removes. What is added is laid out like the file:
indented by the file's own indentation unit (two spaces, four, a tab; two for a file with
none), one member or item a line in a container laid out on several lines, on one line in one
that is. Removing what was added last gives the text back byte for byte: an item added after
the last one is taken out with the separator before it, and an item added to an empty
container is taken out with the layout added around it (a container that was laid out as
`{ }` or `{\n}` comes back as `{}`). JSON has no comments, so there are none to keep.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_WS = " \t\r\n"
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_INDENT = re.compile(r"^([ \t]+)[\"\[{\]}]", re.MULTILINE)


class JsonTextError(ValueError):
    """The text is not a JSON document (with the 1-based line and column of the fault)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line, self.column = line, column


@dataclass(slots=True)
class Node:
    """A value in the text: its kind, its span [start, end), and what it holds (`value` for a
    scalar, `members` for an object as (key, key's start, value node), `items` for an array)."""

    kind: str
    start: int
    end: int
    value: Any = None
    members: list[tuple[str, int, Node]] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def member(self, key: str) -> Node | None:
        """The value of `key` in an object (the last one, as JSON parsers take it)."""
        found = [node for name, _start, node in self.members if name == key]
        return found[-1] if found else None

    def keys(self) -> list[str]:
        return [name for name, _start, _node in self.members]


def parse(text: str) -> Node:
    """The tree of spans of a JSON document. Raises JsonTextError."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonTextError(exc.msg, exc.lineno, exc.colno) from None
    node, end = _value(text, _skip(text, 0))
    return node


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WS:
        index += 1
    return index


def _value(text: str, index: int) -> tuple[Node, int]:
    char = text[index]
    if char == "{":
        return _object(text, index)
    if char == "[":
        return _array(text, index)
    if char == '"':
        end = _string_end(text, index)
        return Node("string", index, end, json.loads(text[index:end])), end
    for word, value in (("true", True), ("false", False), ("null", None)):
        if text.startswith(word, index):
            return Node(word, index, index + len(word), value), index + len(word)
    found = _NUMBER.match(text, index)
    assert found is not None  # json.loads accepted the text
    return Node("number", index, found.end(), json.loads(found.group())), found.end()


def _string_end(text: str, index: int) -> int:
    index += 1
    while text[index] != '"':
        index += 2 if text[index] == "\\" else 1
    return index + 1


def _object(text: str, start: int) -> tuple[Node, int]:
    node = Node("object", start, start)
    index = _skip(text, start + 1)
    while text[index] != "}":
        key_end = _string_end(text, index)
        key = json.loads(text[index:key_end])
        value, after = _value(text, _skip(text, _skip(text, key_end) + 1))
        node.members.append((key, index, value))
        index = _skip(text, after)
        if text[index] == ",":
            index = _skip(text, index + 1)
    node.end = index + 1
    return node, node.end


def _array(text: str, start: int) -> tuple[Node, int]:
    node = Node("array", start, start)
    index = _skip(text, start + 1)
    while text[index] != "]":
        item, after = _value(text, index)
        node.items.append(item)
        index = _skip(text, after)
        if text[index] == ",":
            index = _skip(text, index + 1)
    node.end = index + 1
    return node, node.end


# --------------------------------------------------------------------------- layout


def indent_unit(text: str) -> str:
    """The file's indentation step: the smallest leading whitespace of an indented line."""
    found = [match.group(1) for match in _INDENT.finditer(text)]
    if not found:
        return "  "
    if any("\t" in item for item in found):
        return "\t"
    return min(found, key=len)


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line_indent(text: str, index: int) -> str:
    """The leading whitespace of the line holding `index`."""
    line_start = text.rfind("\n", 0, index) + 1
    end = line_start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[line_start:end]


def _render(value: Any, text: str, indent: str, multiline: bool) -> str:
    """`value` as JSON laid out like the file, its lines after the first indented by `indent`."""
    if not multiline:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    unit = indent_unit(text)
    rendered = json.dumps(value, ensure_ascii=False, indent=unit if unit != "\t" else "\t")
    return rendered.replace("\n", _newline(text) + indent)


def _multiline(text: str, node: Node) -> bool:
    """Whether a container is laid out on several lines (an empty one: whether the file is)."""
    inner = text[node.start : node.end]
    if node.members or node.items:
        return "\n" in inner
    return "\n" in text.strip()


def _entries(node: Node) -> list[tuple[int, Node]]:
    """A container's entries as (where the entry starts, its value)."""
    if node.kind == "object":
        return [(key_start, value) for _key, key_start, value in node.members]
    return [(item.start, item) for item in node.items]


def _insert(text: str, node: Node, entry: str) -> str:
    entries = _entries(node)
    newline = _newline(text)
    base = _line_indent(text, node.start)
    child = base + indent_unit(text)
    if entries:
        last_end = entries[-1][1].end
        if _multiline(text, node):
            return text[:last_end] + "," + newline + child + entry + text[last_end:]
        return text[:last_end] + ", " + entry + text[last_end:]
    inner = (newline + child + entry + newline + base) if _multiline(text, node) else entry
    return text[: node.start + 1] + inner + text[node.end - 1 :]


# --------------------------------------------------------------------------- edits


def add_member(text: str, node: Node, key: str, value: Any) -> str:
    """`text` with `key: value` added as the last member of the object `node`."""
    if node.kind != "object":
        raise ValueError("members are added to objects")
    multiline = _multiline(text, node)
    child = _line_indent(text, node.start) + indent_unit(text)
    return _insert(text, node, json.dumps(key, ensure_ascii=False) + ": " + _render(value, text, child, multiline))


def add_item(text: str, node: Node, value: Any) -> str:
    """`text` with `value` added as the last item of the array `node`."""
    if node.kind != "array":
        raise ValueError("items are added to arrays")
    multiline = _multiline(text, node)
    child = _line_indent(text, node.start) + indent_unit(text)
    return _insert(text, node, _render(value, text, child, multiline))


def replace_value(text: str, node: Node, value: Any) -> str:
    """`text` with the value `node` spans replaced by `value`, laid out where it stands."""
    multiline = "\n" in text[node.start : node.end] or (node.kind in ("object", "array") and "\n" in text.strip())
    rendered = _render(value, text, _line_indent(text, node.start), multiline)
    return text[: node.start] + rendered + text[node.end :]


def remove_entry(text: str, node: Node, position: int) -> str:
    """`text` without the entry at `position` of the container `node` (a member with its key),
    and without the separator and layout that came with it."""
    entries = _entries(node)
    start, value = entries[position]
    if len(entries) == 1:
        return text[: node.start + 1] + text[node.end - 1 :]
    if position == len(entries) - 1:
        return text[: entries[position - 1][1].end] + text[value.end :]
    return text[:start] + text[entries[position + 1][0] :]

"""Reading frontmatter YAML fast: a plain scanner, then PyYAML's C loader.

Core layer: no I/O. The scanner handles the shapes tools and people usually write and falls
back to the C loader for the rest. Scalars resolve with the rules in `yaml12`; aliases,
anchors and explicit tags are refused and duplicate keys reported, so this path and the
round-trip edit path (`yamlrt`, ruamel.yaml) agree on every document they accept.

PyYAML is imported on first use of the C loader, not with this module: every command imports
this module, most read only files without frontmatter or with frontmatter the scanner reads,
and importing PyYAML costs several milliseconds of each process's start-up.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from moss_files.foundation import yaml_scalars as yaml12

if TYPE_CHECKING:
    import yaml

MAX_DEPTH = 32


class YamlProblem(Exception):
    """A reason the frontmatter cannot be used; `line` is 0-based within the YAML text."""

    def __init__(self, code: str, message: str, line: int | None = None) -> None:
        super().__init__(code, message, line)
        self.code = code
        self.message = message
        self.line = line


# --------------------------------------------------------------------------- fast read path

_PLAIN_KEY = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_ENTRY = re.compile(rf"({_PLAIN_KEY}):(?: +(.*))?")
_CHILD_ITEM = re.compile(r"( *)- +(.*)")
_CHILD_ENTRY = re.compile(rf"( +)({_PLAIN_KEY}):(?: +(.*))?")
_SINGLE_QUOTED = re.compile(r"'((?:[^']|'')*)'(?: +(#.*)?)?")
_DOUBLE_QUOTED = re.compile(r'"([^"\\]*)"(?: +(#.*)?)?')
# First characters that make a value anything but a simple plain scalar.
_NOT_SIMPLE_START = frozenset("?:,[]{}#&*!|>%@`")
_FLOW_ITEM = re.compile(r"[A-Za-z0-9_.+~/][A-Za-z0-9_.\-/+~ ]*|-[A-Za-z0-9_.+~/][A-Za-z0-9_.\-/+~ ]*")
_NOT_SIMPLE = object()


def scan_simple(yaml_text: str) -> dict[str, Any] | None:
    """Parse the frontmatter shapes that tools and most people write, without a YAML parser.

    Handles top-level `key: value` lines whose values are plain scalars, simply quoted strings
    (no backslash escapes, one line) or flow lists of plain items, plus one level of block list
    (`  - item`) or block mapping (`  key: value`) under a `key:` line, with comments and blank
    lines anywhere. Returns None as soon as the text needs a real YAML parser; the caller then
    uses the C loader. Raises YamlProblem for a duplicate key.
    """
    if "\t" in yaml_text:
        return None
    if "\r" in yaml_text:
        yaml_text = yaml_text.replace("\r\n", "\n")
    result: dict[str, Any] = {}
    open_key: str | None = None  # a `key:` with no inline value, whose children may follow
    children: Any = None
    indent = -1
    for number, line in enumerate(yaml_text.split("\n")):
        stripped = line.lstrip(" ")
        if not stripped or stripped[0] == "#":
            continue
        if line[0] != " " and line[0] != "-":
            if open_key is not None:
                result[open_key] = children
                open_key = None
            match = _ENTRY.fullmatch(line)
            if match is None:
                return None
            key = match.group(1)
            if key in result:
                raise YamlProblem("FRONTMATTER_DUPLICATE_KEY", f"duplicate key {key!r}", number)
            if not isinstance(_resolve(key), str):
                return None  # `true:` or `null:` keys are not strings
            raw = match.group(2)
            value = _inline_value(raw.rstrip(" ")) if raw else None
            if value is _NOT_SIMPLE:
                return None
            if value is None and (not raw or raw.lstrip(" ")[:1] in ("", "#")):
                open_key, children, indent = key, None, -1
                result[key] = None  # keeps key order; replaced when children arrive
            else:
                result[key] = value
            continue
        if open_key is None:
            return None  # an indented line continuing a scalar, or nesting we do not handle
        item = _CHILD_ITEM.fullmatch(line)
        if item is not None and (children is None or isinstance(children, list)):
            if children is None:
                children, indent = [], len(item.group(1))
            elif len(item.group(1)) != indent:
                return None
            value = _inline_value(item.group(2).rstrip(" "))
            if value is _NOT_SIMPLE or value is None or isinstance(value, list):
                return None
            children.append(value)
            continue
        entry = _CHILD_ENTRY.fullmatch(line)
        if entry is None or not (children is None or isinstance(children, dict)):
            return None
        if children is None:
            children, indent = {}, len(entry.group(1))
        elif len(entry.group(1)) != indent:
            return None
        key = entry.group(2)
        if not isinstance(_resolve(key), str):
            return None
        raw = entry.group(3)
        value = _inline_value(raw.rstrip(" ")) if raw else None
        if value is _NOT_SIMPLE or (value is None and raw and raw.lstrip(" ")[:1] not in ("", "#")):
            return None
        if value is None and not raw:
            return None  # `key:` inside a nested mapping may open deeper nesting
        if key in children:
            raise YamlProblem("FRONTMATTER_DUPLICATE_KEY", f"duplicate key {key!r}", number)
        children[key] = value
    if open_key is not None:
        result[open_key] = children
    return result


# Line breaks other than LF that YAML 1.1 (libyaml) counts as one: a text holding any is left
# to the C loader, whose lines would then differ from the scanner's.
_OTHER_BREAKS = ("\r", "\x85", "\u2028", "\u2029")
# How deep the nested scanner follows blocks before it leaves the text to the C loader (which
# refuses past MAX_DEPTH with its own error).
_SCAN_DEPTH = 16
# The lines the nested scanner reads: (line number, indentation, the line past it).
_Lines = list[tuple[int, int, str]]


class _Declined(Exception):
    """The nested scanner meets something it does not read: the C loader takes the text."""


def scan_nested(yaml_text: str) -> dict[str, Any] | None:
    """Parse block mappings and block sequences nested to any depth (up to _SCAN_DEPTH) over
    the scalars `scan_simple` reads, the shape of a board task's `plan:` (a list of mappings
    holding lists), without a YAML parser: indentation alone gives the structure. Returns
    None as soon as the text needs a real YAML parser (a scalar running on over lines, a
    sequence nested straight in a sequence, `-` or `- # note` alone, an indentation no block
    has, the root not a mapping at column 0); the caller then uses the C loader. Raises
    YamlProblem for a duplicate key, as the C loader's path does (once the whole text is
    read: a text the C loader refuses for its syntax gets that error from it)."""
    if "\t" in yaml_text:
        return None
    if "\r" in yaml_text:
        yaml_text = yaml_text.replace("\r\n", "\n")
    if any(mark in yaml_text for mark in _OTHER_BREAKS):
        return None
    # The lines that are neither blank nor a comment, which YAML ignores at any indentation.
    lines: _Lines = []
    for number, line in enumerate(yaml_text.split("\n")):
        rest = line.lstrip(" ")
        if rest and rest[0] != "#":
            lines.append((number, len(line) - len(rest), rest))
    if not lines:
        return {}
    if lines[0][1] != 0 or _is_item(lines[0][2]):
        return None
    duplicates: list[YamlProblem] = []
    try:
        root, end = _scan_mapping(lines, 0, 0, 1, duplicates)
    except _Declined:
        return None
    if end != len(lines):
        return None
    if duplicates:
        raise duplicates[0]
    return root


def _is_item(rest: str) -> bool:
    """Whether a line (past its indentation) is a block sequence's entry."""
    return rest[0] == "-" and (len(rest) == 1 or rest[1] == " ")


def _scan_block(lines: _Lines, index: int, depth: int, duplicates: list[YamlProblem]) -> tuple[Any, int]:
    if depth > _SCAN_DEPTH:
        raise _Declined
    _number, column, rest = lines[index]
    if _is_item(rest):
        return _scan_sequence(lines, index, column, depth, duplicates)
    return _scan_mapping(lines, index, column, depth, duplicates)


def _scan_mapping(lines: _Lines, index: int, column: int, depth: int, duplicates: list[YamlProblem]) -> tuple[dict[str, Any], int]:
    """The block mapping whose entries stand at `column`, from lines[index]: (it, the index
    of the first line past it). A key met twice goes to `duplicates`."""
    result: dict[str, Any] = {}
    count = len(lines)
    while index < count:
        number, indent, rest = lines[index]
        if indent < column:
            break
        if indent > column or _is_item(rest):
            raise _Declined  # a scalar running on, or an entry no block here can hold
        match = _ENTRY.fullmatch(rest)
        if match is None:
            raise _Declined
        key = match.group(1)
        if key in result:
            duplicates.append(YamlProblem("FRONTMATTER_DUPLICATE_KEY", f"duplicate key {key!r}", number))
        if not isinstance(_resolve(key), str):
            raise _Declined  # `true:` or `1:` keys are not strings
        raw = match.group(2)
        value = _inline_value(raw.rstrip(" ")) if raw else None
        if value is _NOT_SIMPLE:
            raise _Declined
        index += 1
        if value is None and (not raw or raw.lstrip(" ")[:1] in ("", "#")):
            # `key:` opens a block: one indented deeper, or a sequence at the key's own column.
            if index < count and (lines[index][1] > column or (lines[index][1] == column and _is_item(lines[index][2]))):
                value, index = _scan_block(lines, index, depth + 1, duplicates)
        result.setdefault(key, value)
    return result, index


def _scan_sequence(lines: _Lines, index: int, column: int, depth: int, duplicates: list[YamlProblem]) -> tuple[list[Any], int]:
    """The block sequence whose dashes stand at `column`, from lines[index]: (it, the index of
    the first line past it)."""
    result: list[Any] = []
    count = len(lines)
    while index < count:
        number, indent, rest = lines[index]
        if indent != column or not _is_item(rest):
            if indent > column:
                raise _Declined  # a scalar item running on
            break  # the sequence ends (the next entry of the mapping it belongs to, or less indented)
        item = rest[1:].lstrip(" ")
        if not item or item[0] == "#" or _is_item(item):
            raise _Declined  # an entry opening a block below it, or a sequence in a sequence
        if _ENTRY.fullmatch(item):
            # `- key: …`: a mapping whose entries stand at the column of this first key.
            lines[index] = (number, column + len(rest) - len(item), item)
            value, index = _scan_mapping(lines, index, lines[index][1], depth + 1, duplicates)
        else:
            value = _inline_value(item.rstrip(" "))
            if value is _NOT_SIMPLE:
                raise _Declined
            index += 1
        result.append(value)
    return result, index


def plain_lines(yaml_text: str) -> bool:
    """Whether every line is blank, a comment, or, past its indentation and list dashes, a
    `key: value` or a lone value that the plain scanner reads (or a `key:` that opens a
    block): block structure nested to any depth over simple scalars, which libyaml and ruamel
    read alike line by line (no tabs, block scalars, flow mappings, or quotes that run on or
    escape). What `scan_simple` declines only for its depth."""
    if "\t" in yaml_text:
        return False
    for line in yaml_text.split("\n"):
        rest = line.rstrip("\r").lstrip(" ")
        if not rest or rest[0] == "#":
            continue
        while rest[:2] == "- ":
            rest = rest[2:].lstrip(" ")
        entry = _ENTRY.fullmatch(rest)
        if entry is not None:
            raw = entry.group(2)
            if not raw:
                continue
            value = _inline_value(raw.rstrip(" "))
            if value is _NOT_SIMPLE or (value is None and raw.lstrip(" ")[:1] not in ("", "#")):
                return False
            continue
        value = _inline_value(rest.rstrip(" "))
        if value is _NOT_SIMPLE or value is None:
            return False
    return True


@functools.lru_cache(maxsize=1024)
def resolve_plain_cached(text: str) -> Any:
    """`yaml12.resolve_plain`, cached: scalars repeat a lot across a workspace (statuses,
    kinds, names), and the results are immutable. A thousand of them hold the ones that repeat;
    ids and times never do, and a daemon that reads a message stream fills the cache with them
    (8,192 entries held ~1.5 MB, reached only after ~8,000 messages)."""
    return yaml12.resolve_plain(text)


_resolve = resolve_plain_cached


def _inline_value(text: str) -> Any:
    """Value of the text after `key: ` or `- `, or _NOT_SIMPLE."""
    if not text:
        return None
    first = text[0]
    if first == "'":
        match = _SINGLE_QUOTED.fullmatch(text)
        return match.group(1).replace("''", "'") if match else _NOT_SIMPLE
    if first == '"':
        match = _DOUBLE_QUOTED.fullmatch(text)
        return match.group(1) if match else _NOT_SIMPLE
    if " #" in text:
        text = text.split(" #", 1)[0].rstrip(" ")
    if first == "#":
        return None
    if ": " in text or text.endswith(":"):
        return _NOT_SIMPLE
    if first == "[" and text[-1] == "]":
        inner = text[1:-1].strip(" ")
        if not inner:
            return []
        items = [item.strip(" ") for item in inner.split(",")]
        if not all(_FLOW_ITEM.fullmatch(item) for item in items):
            return _NOT_SIMPLE
        return [_resolve(item) for item in items]
    if first in _NOT_SIMPLE_START or (first == "-" and (len(text) == 1 or text[1] == " ")):
        return _NOT_SIMPLE
    return _resolve(text)


@functools.cache
def _fast_loader() -> type:
    """PyYAML's C loader with YAML 1.2 core-schema resolution and no timestamps, built (and
    PyYAML imported) on first use."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _FastLoader(base):  # type: ignore[misc,valid-type]
        """PyYAML's C loader with YAML 1.2 core-schema resolution and no timestamps."""

        yaml_implicit_resolvers: dict[Any, Any] = {}

    for tag, regexp, first in yaml12.IMPLICIT_RULES:
        _FastLoader.add_implicit_resolver(tag, regexp, list(first) + ([""] if tag == yaml12.TAG_NULL else []))
    _FastLoader.add_constructor(yaml12.TAG_INT, _construct_int)
    _FastLoader.add_constructor(yaml12.TAG_FLOAT, _construct_float)
    _FastLoader.add_constructor(yaml12.TAG_BOOL, _construct_bool)
    _FastLoader.add_constructor(yaml12.TAG_NULL, _construct_null)
    return _FastLoader


def __getattr__(name: str) -> Any:
    # `_FastLoader` stays a module attribute for the tests that drive the C loader directly.
    if name == "_FastLoader":
        return _fast_loader()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _construct_int(loader: Any, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    if not yaml12.INT_RE.match(text):
        raise YamlProblem("FRONTMATTER_SYNTAX", f"{text!r} is not an integer", node.start_mark.line)
    return yaml12.parse_int(text)


def _construct_float(loader: Any, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node)
    if not (yaml12.FLOAT_RE.match(text) or yaml12.INT_RE.match(text)):
        raise YamlProblem("FRONTMATTER_SYNTAX", f"{text!r} is not a number", node.start_mark.line)
    return yaml12.parse_float(text) if yaml12.FLOAT_RE.match(text) else float(yaml12.parse_int(text))


def _construct_bool(loader: Any, node: yaml.ScalarNode) -> bool:
    text = loader.construct_scalar(node)
    if not yaml12.BOOL_RE.match(text):
        raise YamlProblem("FRONTMATTER_SYNTAX", f"{text!r} is not a boolean", node.start_mark.line)
    return text[0] in "tT"


def _construct_null(loader: Any, node: yaml.ScalarNode) -> None:
    text = loader.construct_scalar(node)
    if not yaml12.NULL_RE.match(text):
        raise YamlProblem("FRONTMATTER_SYNTAX", f"{text!r} is not null", node.start_mark.line)
    return None


def load_fast(yaml_text: str) -> dict[str, Any]:
    """Return the frontmatter mapping as plain Python values.

    Raises YamlProblem for syntax errors, a non-mapping, duplicate keys, aliases, non-core
    tags and nesting deeper than MAX_DEPTH.
    """
    simple = scan_simple(yaml_text)
    if simple is None:
        simple = scan_nested(yaml_text)
    if simple is not None:
        return simple
    import yaml  # loaded once, by `_fast_loader`; this is a dictionary look-up

    loader = _fast_loader()(yaml_text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}
        _check_tree(node, yaml_text)
        data = loader.construct_document(node)
    except YamlProblem:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(part for part in (exc.context, exc.problem) if part)
        code = "FRONTMATTER_SYNTAX"
        if "found duplicate anchor" in message:
            code = "FRONTMATTER_ALIAS"
        if "could not determine a constructor" in message:
            code = "FRONTMATTER_TAG"
        raise YamlProblem(code, message or str(exc), mark.line if mark else None) from None
    except yaml.YAMLError as exc:
        raise YamlProblem("FRONTMATTER_SYNTAX", str(exc)) from None
    except (TypeError, ValueError) as exc:  # e.g. an unhashable (list) key
        raise YamlProblem("FRONTMATTER_SYNTAX", str(exc)) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "null"
        raise YamlProblem("FRONTMATTER_NOT_MAPPING", f"frontmatter must be a mapping of keys, not {kind}", 0)
    return data


def _check_tree(root: yaml.Node, yaml_text: str) -> None:
    """Refuse aliases, explicit tags, duplicate keys and excessive depth, before constructing.

    Walks the composed node graph iteratively, so a hostile document cannot exhaust the stack,
    and refuses aliases outright, so a "billion laughs" document cannot exhaust memory later.
    """
    import yaml  # already loaded: only the C loader makes nodes

    if not isinstance(root, yaml.MappingNode):
        return  # construct, then report FRONTMATTER_NOT_MAPPING with the value's type
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            # The composer shares one node for an anchor and its aliases, so the line is the anchor's.
            raise YamlProblem(
                "FRONTMATTER_ALIAS", "the anchor on this line is used through an alias; aliases are not allowed in frontmatter", node.start_mark.line
            )
        seen.add(id(node))
        prop = _node_property(yaml_text, node.start_mark.index)
        if prop == "&":
            # Anchors are only useful with aliases, and the two YAML libraries disagree on
            # which characters an anchor name may hold; refusing both keeps them in agreement.
            raise YamlProblem("FRONTMATTER_ALIAS", "YAML anchors and aliases are not allowed in frontmatter", node.start_mark.line)
        if node.tag not in yaml12.ALLOWED_TAGS or prop == "!":
            # Explicit tags are refused (even `!!str`): the libraries disagree on some (`!`
            # alone), and quoting says the same thing portably.
            raise YamlProblem("FRONTMATTER_TAG", "explicit YAML tags are not supported; quote the value instead", node.start_mark.line)
        if depth > MAX_DEPTH:
            raise YamlProblem("FRONTMATTER_TOO_DEEP", f"frontmatter nests deeper than {MAX_DEPTH} levels", node.start_mark.line)
        # Children are pushed in reverse so the walk visits nodes in document order and the
        # first problem reported is the first one a reader meets.
        if isinstance(node, yaml.MappingNode):
            keys: set[tuple[str, str]] = set()
            for key_node, _value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    identity = (key_node.tag, key_node.value)
                    if identity in keys:
                        raise YamlProblem("FRONTMATTER_DUPLICATE_KEY", f"duplicate key {key_node.value!r}", key_node.start_mark.line)
                    keys.add(identity)
            for key_node, value_node in reversed(node.value):
                stack.append((value_node, depth + 1))
                stack.append((key_node, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in reversed(node.value))


def _node_property(yaml_text: str, index: int) -> str:
    # A node's start mark points at its properties (`&anchor`, `!tag`) when it has any.
    return yaml_text[index : index + 1]

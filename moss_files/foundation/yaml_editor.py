"""The faithful edit path: ruamel.yaml's round-trip mode, configured like the fast read path.

Core layer: no I/O. Kept apart from `yamlio` so that reading (every command, the index) never
pays for importing ruamel.yaml; only writes load it. Scalars resolve with the `yaml12` rules,
so values read here equal those `yamlio.load_fast` returns (a property test checks this).
"""

from __future__ import annotations

import functools
import io
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError as RuamelMarkedError
from ruamel.yaml.error import YAMLError as RuamelYAMLError
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarbool import ScalarBoolean
from ruamel.yaml.scalarfloat import ScalarFloat
from ruamel.yaml.scalarint import ScalarInt
from ruamel.yaml.scalarstring import ScalarString

from moss_files.foundation import yaml_scalars as yaml12
from moss_files.foundation.yaml_reader import YamlProblem


def _rules_table(extra: tuple[tuple[str, re.Pattern[str], str], ...] = ()) -> dict[Any, list[Any]]:
    table: dict[Any, list[Any]] = {}
    for tag, regexp, first in yaml12.IMPLICIT_RULES + extra:
        for char in list(first) + ([""] if tag == yaml12.TAG_NULL else []):
            table.setdefault(char, []).append((tag, regexp))
    return table


class _LoadResolver(VersionedResolver):
    """ruamel resolver with exactly the `yaml12` rules (no timestamps, no 1.1 booleans)."""

    _table = _rules_table()

    @property
    def versioned_resolver(self) -> Any:
        return self._table


class _DumpResolver(VersionedResolver):
    """Resolver used when writing: also treats YAML 1.1 look-alikes as non-strings, so that
    strings such as `no` or `0755` are written quoted and mean the same to every reader."""

    _table = _rules_table(((yaml12.TAG_BOOL, yaml12.YAML11_LOOKALIKE_RE, "yYnNoO-+0123456789.<="),))

    @property
    def versioned_resolver(self) -> Any:
        return self._table


def _roundtrip_yaml(resolver: type) -> YAML:
    rt = YAML(typ="rt")
    rt.Resolver = resolver
    rt.preserve_quotes = True
    rt.width = 1 << 20  # never fold long values onto continuation lines
    rt.allow_duplicate_keys = False
    return rt


def load_roundtrip(yaml_text: str) -> CommentedMap:
    """Return the frontmatter as ruamel's round-trip mapping (comments and styles attached).

    Callers validate with `load_fast` first; this path only has to agree with it.
    Raises YamlProblem when ruamel cannot read the text.
    """
    try:
        data = _roundtrip_yaml(_LoadResolver).load(yaml_text)
    except RuamelMarkedError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlProblem("FRONTMATTER_SYNTAX", str(exc.problem or exc), mark.line if mark else None) from None
    except RuamelYAMLError as exc:
        raise YamlProblem("FRONTMATTER_SYNTAX", str(exc)) from None
    if data is None:
        return CommentedMap()
    if not isinstance(data, CommentedMap):
        raise YamlProblem("FRONTMATTER_NOT_MAPPING", "frontmatter must be a mapping of keys", 0)
    return data


# Strings written plain by both this fast path and ruamel: a letter, digit or `_` first, then
# only characters that carry no YAML meaning in a block mapping's value (`:` is let through but
# never before a space or at the end; see `_plain_safe`).
_PLAIN_SIMPLE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ .,:/+@()-]*")
_KEY_SIMPLE = re.compile(r"[a-z_][a-z0-9_]*")


@functools.lru_cache(maxsize=8192)  # pure; a bulk write renders the same workspace, source, tags and times again and again
def _plain_safe(text: str) -> bool:
    if not _PLAIN_SIMPLE.fullmatch(text) or text.endswith((" ", ":")) or ": " in text:
        return False
    # A string that reads as another type (`true`, `12`, `0755`, `no`) must be quoted: leave it
    # to ruamel. The rules are the ones ruamel's dump resolver applies, picked by first letter.
    return not any(regexp.match(text) for _tag, regexp in _DumpResolver._table.get(text[0], ()))


@functools.lru_cache(maxsize=256)
def _simple_key(key: str) -> bool:
    # Cached: a bulk write renders the same dozen keys for every file.
    return bool(_KEY_SIMPLE.fullmatch(key)) and _plain_safe(key)


def dump_simple(data: Any) -> str | None:
    """The text `dump_roundtrip` gives for a fresh, plain mapping of simple keys to plain
    strings, integers, booleans and non-empty lists of such strings; None for anything else.

    Writing a new file through ruamel costs milliseconds, most of a bulk import; this renders
    the common case directly, and tests/foundation/test_yaml_simple.py checks it equals ruamel's text.
    """
    if type(data) is not dict or not data:
        return None
    lines: list[str] = []
    for key, value in data.items():
        if type(key) is not str or not _simple_key(key):
            return None
        kind = type(value)
        if kind is str:
            if not _plain_safe(value):
                return None
            lines.append(f"{key}: {value}\n")
        elif kind is bool:
            lines.append(f"{key}: {'true' if value else 'false'}\n")
        elif kind is int:
            lines.append(f"{key}: {value}\n")
        elif kind is list and value and all(type(item) is str and _plain_safe(item) for item in value):
            lines.append(f"{key}:\n" + "".join(f"  - {item}\n" for item in value))
        else:
            return None
    return "".join(lines)


def dump_roundtrip(data: Any, *, sequence_offset: int = 2) -> str:
    """Render a mapping as block YAML text, keeping ruamel's attached comments and styles."""
    rt = _roundtrip_yaml(_DumpResolver)
    rt.indent(mapping=2, sequence=sequence_offset + 2, offset=sequence_offset)
    stream = io.StringIO()
    rt.dump(data, stream)
    return stream.getvalue()


def to_plain(value: Any) -> Any:
    """Convert ruamel round-trip objects to plain dict/list/str/int/float/bool/None."""
    if isinstance(value, dict):
        return {to_plain(key): to_plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_plain(item) for item in value]
    if isinstance(value, ScalarBoolean):
        return bool(value)
    if isinstance(value, ScalarString):
        return str(value)
    if isinstance(value, ScalarInt):
        return int(value)
    if isinstance(value, ScalarFloat):
        return float(value)
    return value


def styled_like(old: Any, new: Any) -> Any:
    """Return `new` dressed in `old`'s style (quotes for strings, flow style for collections).
    A mapping that replaces a block mapping is `old` itself, edited: its keys keep their order
    and comments, unchanged values keep their text, removed keys go and new keys come last."""
    if isinstance(old, ScalarString) and isinstance(new, str) and not isinstance(new, ScalarString):
        return type(old)(new)
    if isinstance(new, dict) and not isinstance(new, CommentedMap) and isinstance(old, CommentedMap) and not old.fa.flow_style():
        for key in [key for key in old if key not in new]:
            del old[key]
        for key, item in new.items():
            if key not in old or to_plain(old[key]) != item or type(to_plain(old[key])) is not type(item):
                old[key] = styled_like(old.get(key), item)
        return old
    if isinstance(new, list) and not isinstance(new, CommentedSeq):
        seq = CommentedSeq(styled_like(None, item) for item in new)
        if isinstance(old, CommentedSeq) and old.fa.flow_style():
            seq.fa.set_flow_style()
        return seq
    if isinstance(new, dict) and not isinstance(new, CommentedMap):
        mapping = CommentedMap((key, styled_like(None, item)) for key, item in new.items())
        if isinstance(old, CommentedMap) and old.fa.flow_style():
            mapping.fa.set_flow_style()
        return mapping
    return new

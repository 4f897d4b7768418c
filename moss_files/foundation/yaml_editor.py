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


# Keys written by the fast path: words of letters, digits and `_` (and not `on`, `No`, … which
# `_block_plain` finds read as another type).
_KEY_SIMPLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Leading characters that bar a plain scalar (YAML indicators), and the printable text the fast
# path renders itself: ASCII without control characters, plus the Unicode ruamel writes as it is
# (allow_unicode) outside double quotes. Breaks, tabs, NEL, BOM and the like are left to ruamel.
_INDICATOR_FIRST = frozenset("#,[]{}&*!|>'\"%@`")
_PRINTABLE = re.compile(r"[\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]+")
_ASCII_PRINTABLE = re.compile(r"[\x20-\x7e]+")


def _reads_as_other_type(text: str) -> bool:
    # A string that reads as another type (`true`, `12`, `0755`, `no`) must be quoted. The
    # rules are the ones ruamel's dump resolver applies, picked by first letter.
    return any(regexp.match(text) for _tag, regexp in _DumpResolver._table.get(text[0], ()))


def _block_plain(text: str) -> bool:
    """Whether ruamel's emitter writes the non-empty, single-line printable `text` as a plain
    scalar in block context: its `analyze_scalar` rules for such text, then the implicit check."""
    first = text[0]
    if first == " " or text[-1] == " " or first in _INDICATOR_FIRST or text.startswith(("---", "...")):
        return False
    if first in "?:-" and (len(text) == 1 or text[1] == " "):
        return False
    # `:` before a space or at the end, and `#` after a space, start a key or a comment.
    if ": " in text or text.endswith(":") or " #" in text:
        return False
    return not _reads_as_other_type(text)


@functools.lru_cache(maxsize=8192)  # pure; a bulk write renders the same workspace, source, tags and times again and again
def _scalar_text(text: str) -> str | None:
    """`text` as ruamel writes a string value in a block mapping or sequence (plain, single or
    double quoted, by its emitter's `choose_scalar_style`), or None where this path does not
    follow ruamel (empty or multi-line text, control characters, escapes beyond `\\` and `"`)."""
    if not text or not _PRINTABLE.fullmatch(text):
        return None
    if _block_plain(text):
        return text
    if "'" not in text:
        return f"'{text}'"
    # ruamel prefers double quotes for text holding a single quote.
    if not _ASCII_PRINTABLE.fullmatch(text):
        return None  # double quotes escape characters beyond ASCII ruamel's way; not followed here
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


@functools.lru_cache(maxsize=256)
def _simple_key(key: str) -> bool:
    # Cached: a bulk write renders the same dozen keys for every file.
    return bool(_KEY_SIMPLE.fullmatch(key)) and _block_plain(key)


def dump_simple(data: Any) -> str | None:
    """The text `dump_roundtrip` gives for a fresh, plain mapping; None where this path does not
    follow ruamel. Followed: simple keys (a letter or `_`, then letters, digits and `_`) to
    single-line strings, integers, booleans, non-empty mappings of the same, and non-empty lists
    of such scalars and mappings.

    Writing a new file through ruamel costs milliseconds, most of a bulk import; this renders
    the common case directly, and tests/foundation/test_yaml_simple.py checks it equals ruamel's text.
    """
    if type(data) is not dict or not data:
        return None
    lines: list[str] = []
    return "".join(lines) if _mapping_lines(data, "", lines) else None


def _scalar(value: str | bool | int) -> str | None:
    """A string, boolean or integer as ruamel writes it in block context; None for a string
    this path does not follow (see `_scalar_text`)."""
    if type(value) is str:
        return _scalar_text(value)
    if type(value) is bool:
        return "true" if value else "false"
    return str(value)


def _mapping_lines(data: dict[Any, Any], indent: str, lines: list[str]) -> bool:
    """Append a block mapping's lines at `indent` (ruamel's: mappings indent 2, sequences
    4 with the dash at 2); False where the fast path steps aside."""
    for key, value in data.items():
        if type(key) is not str or not _simple_key(key):
            return False
        kind = type(value)
        if kind is str or kind is bool or kind is int:
            text = _scalar(value)
            if text is None:
                return False
            lines.append(f"{indent}{key}: {text}\n")
        elif kind is dict and value:
            lines.append(f"{indent}{key}:\n")
            if not _mapping_lines(value, indent + "  ", lines):
                return False
        elif kind is list and value:
            lines.append(f"{indent}{key}:\n")
            if not _sequence_lines(value, indent + "  ", lines):
                return False
        else:
            return False
    return True


def _sequence_lines(items: list[Any], indent: str, lines: list[str]) -> bool:
    """Append a block sequence's lines, each item after `indent` and a dash; a mapping item
    starts on the dash's line, its other keys under its first."""
    for item in items:
        kind = type(item)
        if kind is str or kind is bool or kind is int:
            text = _scalar(item)
            if text is None:
                return False
            lines.append(f"{indent}- {text}\n")
        elif kind is dict and item:
            start = len(lines)
            if not _mapping_lines(item, indent + "  ", lines):
                return False
            lines[start] = f"{indent}- {lines[start][len(indent) + 2 :]}"
        else:
            return False
    return True


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

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

import yaml.resolver
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
    return _plain_allowed(text) and not _reads_as_other_type(text)


def _plain_allowed(text: str) -> bool:
    """Whether an emitter's `analyze_scalar` allows the non-empty, single-line printable `text`
    (no tab) plain in block context; ruamel's and libyaml's rules agree on such text."""
    first = text[0]
    if first == " " or text[-1] == " " or first in _INDICATOR_FIRST or text.startswith(("---", "...")):
        return False
    if first in "?:-" and (len(text) == 1 or text[1] == " "):
        return False
    # `:` before a space or at the end, and `#` after a space, start a key or a comment.
    return not (": " in text or text.endswith(":") or " #" in text)


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


# --------------------------------------------------------------------------- PyYAML's C emitter, followed

# The text libyaml writes as it is in plain and single-quoted scalars (its IS_PRINTABLE, with
# allow_unicode), line feeds included: no tab, no other break (CR, NEL, U+2028/9), no BOM and
# nothing beyond the BMP, all of which it escapes in double quotes.
_LIBYAML_TEXT = re.compile(r"[\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*")
# libyaml folds a scalar at a space once a line passes the dump's width (4096 columns for
# `dump_libyaml_simple`); a line kept under this many columns is never folded.
_LIBYAML_COLUMNS = 4000


def dump_libyaml_simple(data: Any) -> str | None:
    """The text PyYAML's C emitter (`yaml.dump(data, Dumper=yaml.CSafeDumper,
    default_flow_style=False, sort_keys=False, allow_unicode=True, width=4096)`) gives for a
    fresh, plain mapping, when that text reads back as the same values under the toolkit's
    YAML 1.2 rules; None where this path does not follow libyaml, or where its text would read
    back otherwise (`1e3`, which PyYAML's YAML 1.1 rules leave plain, is a number in YAML 1.2).
    Followed: simple keys to strings of `_LIBYAML_TEXT` (multi-line ones included: single
    quoted, each run of line feeds one longer), integers, booleans, None, non-empty mappings of
    the same and non-empty lists of scalars and mappings (indentless, as PyYAML writes them).

    Migrations fall back to PyYAML for values `dump_simple` does not follow, most often
    multi-line text, and render and read back each such block: this renders it directly, and
    tests/foundation/test_yaml_libyaml.py checks it equals PyYAML's text.
    """
    if type(data) is not dict or not data:
        return None
    lines: list[str] = []
    return "".join(lines) if _libyaml_mapping(data, "", lines, set()) else None


def _libyaml_mapping(data: dict[Any, Any], indent: str, lines: list[str], seen: set[int]) -> bool:
    """Append a block mapping's lines at `indent` (nested mappings 2 further, lists at their
    key's indent); False where this path steps aside. `seen` holds the ids of the mappings and
    lists met: PyYAML writes one met twice as an anchor and an alias, which this does not."""
    if id(data) in seen:
        return False
    seen.add(id(data))
    for key, value in data.items():
        if type(key) is not str or len(key) > 128 or not _simple_key(key) or not _pyyaml_reads_as_text(key):
            return False
        kind = type(value)
        if kind is dict and value:
            lines.append(f"{indent}{key}:\n")
            if not _libyaml_mapping(value, indent + "  ", lines, seen):
                return False
        elif kind is list and value:
            lines.append(f"{indent}{key}:\n")
            if not _libyaml_sequence(value, indent, lines, seen):
                return False
        else:
            text = _libyaml_scalar(value, indent + "  ", len(indent) + len(key) + 2)
            if text is None:
                return False
            lines.append(f"{indent}{key}: {text}\n")
    return True


def _libyaml_sequence(items: list[Any], indent: str, lines: list[str], seen: set[int]) -> bool:
    """Append a block sequence's lines, each item after `indent` and a dash; a mapping item
    starts on the dash's line, its other keys under its first."""
    if id(items) in seen:
        return False
    seen.add(id(items))
    for item in items:
        if type(item) is dict and item:
            start = len(lines)
            if not _libyaml_mapping(item, indent + "  ", lines, seen):
                return False
            lines[start] = f"{indent}- {lines[start][len(indent) + 2 :]}"
            continue
        text = _libyaml_scalar(item, indent + "  ", len(indent))
        if text is None:
            return False
        lines.append(f"{indent}- {text}\n")
    return True


def _libyaml_scalar(value: Any, indent: str, column: int) -> str | None:
    """A scalar as libyaml writes it after `column` characters, a multi-line one continued at
    `indent`; None where this path does not follow it."""
    kind = type(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    if kind is not str:
        return None
    if "\n" not in value:
        return None if column + len(value) > _LIBYAML_COLUMNS else _libyaml_line(value)
    # A single-quoted scalar over lines: a space next to a line feed would be lost (libyaml
    # writes such text in double quotes), and so would a too long line (folded).
    if " \n" in value or "\n " in value or not _LIBYAML_TEXT.fullmatch(value):
        return None
    if column + max(map(len, value.split("\n"))) > _LIBYAML_COLUMNS or len(indent) > _LIBYAML_COLUMNS // 2:
        return None
    quoted = value.replace("'", "''")
    return "'" + _LINE_FEEDS.sub(lambda feeds: "\n" * (len(feeds.group()) + 1) + indent, quoted) + "'"


_LINE_FEEDS = re.compile(r"\n+")


@functools.lru_cache(maxsize=8192)  # pure; the same statuses, ids and times again and again
def _libyaml_line(text: str) -> str | None:
    """A single-line string as libyaml writes it in block context: plain where its analysis
    allows and PyYAML's YAML 1.1 rules read it as text, else single quoted; None where this
    path does not follow it, or where the plain text reads as another type in YAML 1.2."""
    if not text:
        return "''"
    if not _LIBYAML_TEXT.fullmatch(text):
        return None
    if _plain_allowed(text) and _pyyaml_reads_as_text(text):
        return None if _reads_as_other_type(text) else text
    return "'" + text.replace("'", "''") + "'"


@functools.lru_cache(maxsize=8192)
def _pyyaml_reads_as_text(text: str) -> bool:
    """Whether PyYAML's resolver (YAML 1.1) reads the plain, non-empty `text` as a string:
    otherwise PyYAML's emitter quotes it."""
    table = yaml.resolver.Resolver.yaml_implicit_resolvers
    return not any(regexp.match(text) for _tag, regexp in [*table.get(text[0], ()), *table.get(None, ())])


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

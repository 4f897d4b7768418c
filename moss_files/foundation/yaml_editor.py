"""The faithful edit path: ruamel.yaml's round-trip mode, configured like the fast read path.

Core layer: no I/O. Kept apart from `yamlio` so that reading (every command, the index) never
pays for importing ruamel.yaml; only writes load it. Scalars resolve with the `yaml12` rules,
so values read here equal those `yamlio.load_fast` returns (a property test checks this).
"""

from __future__ import annotations

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
    """Return `new` dressed in `old`'s style (quotes for strings, flow style for collections)."""
    if isinstance(old, ScalarString) and isinstance(new, str) and not isinstance(new, ScalarString):
        return type(old)(new)
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

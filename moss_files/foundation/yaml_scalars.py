"""YAML 1.2 core-schema scalars, shared by the fast read path and the faithful edit path.

Core layer: stdlib only. Both YAML libraries we use are configured from these rules, so a value
reads the same whichever path parsed it:
- booleans are only true/false (any case variant the spec lists); `no`, `on`, `yes` are strings;
- timestamps are NOT resolved: `2026-01-21` and `2026-01-21T10:00:00Z` stay strings;
- integers are decimal, `0o` octal or `0x` hex; `017` is 17 and `1_000` is a string;
- merge keys (`<<`) and the `=` value key have no special meaning.
"""

from __future__ import annotations

import math
import re
from typing import Any

BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)

# Plain scalars that YAML 1.1 readers (PyYAML's defaults, older tools) would not read as strings.
# We never resolve them this way, but when we *write* a string that looks like one we quote it,
# so the file means the same thing to every reader.
YAML11_LOOKALIKE_RE = re.compile(
    r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF"
    r"|[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"
    r"|[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*"
    r"|<<|=)$"
)

TAG_NULL = "tag:yaml.org,2002:null"
TAG_BOOL = "tag:yaml.org,2002:bool"
TAG_INT = "tag:yaml.org,2002:int"
TAG_FLOAT = "tag:yaml.org,2002:float"
TAG_STR = "tag:yaml.org,2002:str"
TAG_SEQ = "tag:yaml.org,2002:seq"
TAG_MAP = "tag:yaml.org,2002:map"

# Explicit tags a document may use; anything else (!!timestamp, !!binary, !custom …) is refused
# so that no reader has to guess what a tool-specific type means.
ALLOWED_TAGS = frozenset({TAG_NULL, TAG_BOOL, TAG_INT, TAG_FLOAT, TAG_STR, TAG_SEQ, TAG_MAP})

# (tag, regexp, first characters) in the order a resolver must try them.
IMPLICIT_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (TAG_BOOL, BOOL_RE, "tTfF"),
    (TAG_INT, INT_RE, "-+0123456789"),
    (TAG_FLOAT, FLOAT_RE, "-+0123456789."),
    (TAG_NULL, NULL_RE, "~nN"),
)


def resolve_plain(text: str) -> Any:
    """Return the value of an unquoted scalar under the YAML 1.2 core schema."""
    if not text or text[0] not in "tTfF-+0123456789.~nN":
        return text if text else None
    if NULL_RE.match(text):
        return None
    if BOOL_RE.match(text):
        return text[0] in "tT"
    if INT_RE.match(text):
        return parse_int(text)
    if FLOAT_RE.match(text):
        return parse_float(text)
    return text


def parse_int(text: str) -> int:
    """Value of a scalar that matched INT_RE."""
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def parse_float(text: str) -> float:
    """Value of a scalar that matched FLOAT_RE."""
    lowered = text.lower()
    if lowered.endswith(".inf"):
        return -math.inf if lowered.startswith("-") else math.inf
    if lowered == ".nan":
        return math.nan
    return float(text)

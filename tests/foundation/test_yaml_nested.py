"""The nested block scanner reads what PyYAML's C loader and ruamel read, or steps aside.

`yaml_reader.scan_nested` reads block mappings and sequences nested to any depth by their
indentation alone (a board task's `plan:` is a list of mappings holding lists), where the C
loader took about six times as long. Its answer must be the loaders' answer on every text it
does not decline, errors included: the texts here are built from the same blocks with the
variations that change how YAML reads them (compact sequences at their key's column, extra
spaces after a dash, comments and blank lines at any indentation, a line shifted by one
column, scalars that run on, duplicate keys, keys that are not strings).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from moss_files.foundation import yaml_reader as yamlio
from tests.foundation.test_yaml_agreement import TOKENS, _fast_c, _outcome, _roundtrip, check_scanner, same

KEYS = st.sampled_from(["id", "plan", "status", "files", "a", "b", "x_1", "true", "null", "No", "on", "deps"])


@st.composite
def block(draw: st.DrawFn, column: int, depth: int) -> list[tuple[int, str]]:
    """(indentation, text) lines of a block mapping or sequence standing at `column`."""
    if depth > 3 or draw(st.booleans()):
        return mapping_lines(draw, column, depth)
    return sequence_lines(draw, column, depth)


def value_lines(draw: st.DrawFn, key_line: tuple[int, str], column: int, depth: int) -> list[tuple[int, str]]:
    """The lines of one mapping entry: `key: scalar`, or `key:` and a block below it."""
    indent, key = key_line
    if depth > 3 or draw(st.integers(0, 2)) == 0:
        return [(indent, f"{key}: {draw(TOKENS)}")]
    opener = draw(st.sampled_from(["", " ", "  # note"]))
    shape = draw(st.sampled_from(["map", "seq", "compact", "nothing"]))
    if shape == "nothing":
        return [(indent, f"{key}:{opener}")]
    if shape == "compact":  # a sequence at the key's own column
        return [(indent, f"{key}:{opener}"), *sequence_lines(draw, column, depth + 1)]
    step = draw(st.sampled_from([1, 2, 4]))
    below = mapping_lines(draw, column + step, depth + 1) if shape == "map" else sequence_lines(draw, column + step, depth + 1)
    return [(indent, f"{key}:{opener}"), *below]


def mapping_lines(draw: st.DrawFn, column: int, depth: int, first_prefix: str = "") -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    for key in draw(st.lists(KEYS, min_size=1, max_size=3)):
        lines += value_lines(draw, (column, key), column, depth)
    if first_prefix:
        indent, text = lines[0]
        lines[0] = (indent - len(first_prefix), first_prefix + text)
    return lines


def sequence_lines(draw: st.DrawFn, column: int, depth: int) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["scalar", "scalar", "map", "map", "nested", "empty", "comment"]))
        gap = " " * draw(st.sampled_from([1, 1, 2, 3]))
        if kind == "scalar":
            lines.append((column, f"-{gap}{draw(TOKENS)}"))
        elif kind == "map":
            lines += mapping_lines(draw, column + 1 + len(gap), depth + 1, first_prefix="-" + gap)
        elif kind == "nested":
            lines.append((column, f"-{gap}- {draw(TOKENS)}"))
        elif kind == "empty":
            lines += [(column, "-"), *mapping_lines(draw, column + 2, depth + 1)]
        else:
            lines += [(column, "- # note"), *mapping_lines(draw, column + 2, depth + 1)]
    return lines


@st.composite
def nested_frontmatter(draw: st.DrawFn) -> str:
    lines = mapping_lines(draw, 0, 0)
    out = []
    for indent, text in lines:
        noise = draw(st.sampled_from(["", "", "", "", "blank", "comment", "shift", "trail"]))
        if noise == "blank":
            out.append(" " * draw(st.integers(0, 3)))
        elif noise == "comment":
            out.append(" " * draw(st.integers(0, 6)) + "# c")
        elif noise == "shift":
            indent = max(0, indent + draw(st.sampled_from([-1, 1])))
        elif noise == "trail":
            text += draw(st.sampled_from(["  ", " # t", "   # t"]))
        out.append(" " * indent + text)
    return "\n".join(out) + "\n"


def check(text: str) -> None:
    check_scanner(yamlio.scan_nested, text)


@given(nested_frontmatter())
@settings(max_examples=600)
@example("plan:\n- id: a\n  files:\n  - x\n  status: done\n- id: b\nb: 1\n")
@example("a:\n  -   id: 1\n      x: [p, q]\n  - y\n")
@example("a: 1\na: 2\n")
@example("a: 1\na: 2\nb: [x\n")
@example("a:\n  - x\n   y\n")
@example("a:\n   b: 1\n  c: 2\n")
def test_the_nested_scanner_agrees_with_both_yaml_loaders(text: str) -> None:
    check(text)


TASK = """id: TASK-1
epic: EPIC-1
title: 'Fix: rounding'
status: WORKING
order: 3
definition_of_done:
  - totals match
plan:
  - id: step-1
    description: Change module 1
    status: COMPLETED  # done on Monday
    affected_files:
      - src/a.py
      - src/b.py
  # the second step waits
  - id: step-2
    description: "Cover it"
    status: PENDING
    affected_files: []
reopen_count: 0
created: 2026-01-21T10:00:00Z
"""


def test_a_task_with_a_plan_is_read_without_the_c_loader() -> None:
    scanned = yamlio.scan_nested(TASK)
    assert scanned is not None
    assert same(scanned, _fast_c(TASK)) and same(scanned, _roundtrip(TASK))
    assert scanned["plan"][0]["affected_files"] == ["src/a.py", "src/b.py"]
    assert scanned["plan"][1]["affected_files"] == []


@pytest.mark.parametrize(
    "text",
    [
        "a:\n  b: x\n    y\n",  # a scalar running on
        "a:\n- - x\n",  # a sequence straight in a sequence
        "a:\n-\n  b: 1\n",  # an entry whose block is below its dash
        "a:\n- # note\n  b: 1\n",
        "  a: 1\n",  # the root not at column 0
        "- a\n",  # the root a sequence
        "a:\n  b: |\n    text\n",  # a block scalar
        "a: 1\r\nb:\r\n  - x\rc: 2\n",  # a lone carriage return (a line break to libyaml)
        "a:\n  b: 1\u2028c: 2\n",
        "true:\n  - x\n",  # a key that is not a string
    ],
)
def test_what_it_does_not_read_is_left_to_the_c_loader(text: str) -> None:
    assert yamlio.scan_nested(text) is None


def test_a_duplicate_key_is_reported_on_its_line_once_the_text_is_read() -> None:
    with pytest.raises(yamlio.YamlProblem) as found:
        yamlio.scan_nested("plan:\n  - id: a\n    id: b\n")
    assert (found.value.code, found.value.line) == ("FRONTMATTER_DUPLICATE_KEY", 2)
    assert _outcome(_fast_c, "plan:\n  - id: a\n    id: b\n") == ("error", "FRONTMATTER_DUPLICATE_KEY")
    # A text the C loader refuses for its syntax gets that error from it: the scanner steps aside.
    assert yamlio.scan_nested("a: 1\na: 2\nb:\n  c: [x\n") is None


def test_load_fast_reads_nested_frontmatter_as_the_c_loader_does() -> None:
    assert same(yamlio.load_fast(TASK), _fast_c(TASK))


def test_deep_nesting_is_left_to_the_c_loader() -> None:
    text = "".join(" " * (2 * level) + f"k{level}:\n" for level in range(20)) + " " * 40 + "leaf: 1\n"
    assert yamlio.scan_nested(text) is None
    shallow = "".join(" " * (2 * level) + f"k{level}:\n" for level in range(5)) + " " * 10 + "leaf: 1\n"
    assert yamlio.scan_nested(shallow) == {"k0": {"k1": {"k2": {"k3": {"k4": {"leaf": 1}}}}}}

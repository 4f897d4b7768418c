"""The direct rendering of PyYAML's C emitter's text gives exactly PyYAML's text, where that
text reads back as the same values under YAML 1.2, or steps aside."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.foundation import yaml_editor as yamlrt
from moss_files.foundation import yaml_reader

pytestmark = pytest.mark.skipif(not getattr(yaml, "__with_libyaml__", False), reason="PyYAML without libyaml")


def general(data: dict[str, Any]) -> str | None:
    """What migrations' general path keeps of PyYAML's text: it, when it reads back as `data`."""
    text = yaml.dump(data, Dumper=yaml.CSafeDumper, default_flow_style=False, sort_keys=False, allow_unicode=True, width=4096)
    try:
        return text if yaml_reader.load_fast(text) == data else None
    except (yaml.YAMLError, yaml_reader.YamlProblem, ValueError):
        return None


def check(data: dict[str, Any]) -> str | None:
    fast = yamlrt.dump_libyaml_simple(data)
    if fast is not None:
        assert fast == general(data)
    return fast


# Leading and trailing spaces, tabs, line feeds (runs, leading, trailing), other breaks, quotes,
# `#`, `: `, YAML 1.1 and 1.2 look-alikes, Unicode in and beyond the BMP, a BOM, control characters.
ODD = st.text(
    alphabet="aZ09_ .,:/+@()-#'\"!&*?|>%=~[]{}`\\\t\n\r\x00\x07\x1b\x7f\x85\u00e9\u00a0\u2014\u2028\ufeff\U0001f600yYnNoOeEx",
    max_size=14,
)
WORDS = st.sampled_from(
    ["1e3", "0o17", "0x1F", "yes", "No", "~", "null", "12:30", "2026-04-01", "2026-04-01T18:00:00Z", ".inf", "-", "---", "...", "'", "a\n", "\n", "a\n\nb"]
)
MILD = st.text(alphabet="ab '#:-\n\u00e9", max_size=12)  # text this path mostly follows
SCALARS = st.one_of(ODD, WORDS, MILD, MILD, st.text(max_size=8), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
KEYS = st.sampled_from(["id", "title", "text", "on", "No", "x_1", "camelCase", "a b", "1"])
NESTED = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)), max_leaves=10)


@settings(max_examples=600)
@given(st.dictionaries(KEYS, NESTED, max_size=4))
def test_the_rendered_text_equals_pyyamls_whenever_it_is_given(data: dict[str, Any]) -> None:
    check(data)


# Values this path mostly follows, so that most examples compare two texts.
PLAIN_KEYS = st.sampled_from(["id", "title", "text", "x_1", "camelCase"])
FOLLOWED = st.recursive(
    st.one_of(MILD, WORDS, st.integers(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, min_size=1, max_size=3), st.dictionaries(PLAIN_KEYS, inner, min_size=1, max_size=3)),
    max_leaves=10,
)


@settings(max_examples=600)
@given(st.dictionaries(PLAIN_KEYS, FOLLOWED, max_size=4))
def test_followed_values_render_as_pyyaml_does(data: dict[str, Any]) -> None:
    check(data)


@settings(max_examples=300)
@given(st.text(alphabet="ab '#:\n\t\u00e9", max_size=30), st.integers(min_value=0, max_value=2))
def test_multi_line_text_at_any_depth(text: str, depth: int) -> None:
    data: dict[str, Any] = {"text": text}
    for _ in range(depth):
        data = {"source_fields": copy.deepcopy(data), "list": [copy.deepcopy(data), text]}
    check(data)


@pytest.mark.parametrize("length", [3990, 3995, 4000, 4090, 4100, 9000])
def test_long_lines_near_the_width_are_rendered_as_pyyaml_does_or_left_to_it(length: int) -> None:
    line = ("word " * length)[:length]
    for text in (line, f"{line}\n{line}", f"short\n{line}"):
        check({"imported_from": "beads", "source_fields": {"title": text, "comments": [{"text": text}]}})


def test_the_multi_line_values_of_beads_issues_take_this_path() -> None:
    extra = {
        "imported_from": "beads",
        "source_id": "bd-t3",
        "source_fields": {
            "title": "Daemon leaves the database stale after a pull\n",
            "status": "blocked",
            "priority": 4,
            "comments": [
                {"id": 7, "issue_id": "bd-e1", "author": "mira", "text": "## Plan\n\nHash ids first, it's 'the' plan.", "created_at": "2026-04-01T18:00:00Z"}
            ],
            "labels": ["sync", "no"],
        },
    }
    fast = check(extra)
    assert fast is not None
    assert "text: '## Plan\n\n\n      Hash ids first, it''s ''the'' plan.'\n" in fast


def test_a_value_met_twice_is_left_to_pyyaml() -> None:
    shared = {"a": 1}
    assert yamlrt.dump_libyaml_simple({"x": shared, "y": shared}) is None

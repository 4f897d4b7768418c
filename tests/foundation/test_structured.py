"""JSON and TOML text to values: nesting too deep, and JSON objects holding a key twice."""

from __future__ import annotations

import json
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moss_files.foundation import structured
from moss_files.foundation.errors import InvalidDocument


def test_json_reads_as_json_loads_does() -> None:
    text = '{"a": [1, {"b": "x"}], "c": null}'
    assert structured.loads_json(text) == structured.loads_json(text, unique_keys=True) == json.loads(text)
    assert structured.loads_json(b'{"a": 1}') == {"a": 1}


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000])
def test_json_nesting_past_the_parser_is_json_too_deep_not_a_recursion_error(text: str) -> None:
    for unique in (False, True):
        with pytest.raises(InvalidDocument) as caught:
            structured.loads_json(text, path="a.jsonl", line=7, unique_keys=unique)
        assert (caught.value.code, caught.value.path, caught.value.line) == ("JSON_TOO_DEEP", "a.jsonl", 7)


def test_json_syntax_errors_pass_through_for_the_caller_to_report() -> None:
    with pytest.raises(json.JSONDecodeError):
        structured.loads_json('{"a": ', unique_keys=True)


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ('{"id": 1,\n "title": "a",\n "title": "b"}', "title", 3),
        ('{\n  "outer": {\n    "x": 1,\n    "x": 2\n  }\n}', "x", 4),
        ('[{"a": 1}, {"a": 2},\n {"b": 1, "b": 2}]', "b", 2),  # the same key in two objects is fine
        ('{"s": "{\\"k\\": 1, \\"k\\": 2}",\n "k": 1,\n "k\\u0020": 2,\n "k": 3}', "k", 4),  # strings and escapes are not keys
        ('{"a": 1,\n "a": {"b": 1,\n "b": 2}}', "a", 2),  # the first in text order, not the first object closed
    ],
)
def test_a_key_twice_in_one_object_is_json_duplicate_key_with_its_line(text: str, key: str, line: int) -> None:
    assert json.loads(text)  # json alone keeps the last value without a word
    with pytest.raises(InvalidDocument) as caught:
        structured.loads_json(text, path="bundle.json", unique_keys=True)
    err = caught.value
    assert (err.code, err.path, err.line, err.details["key"]) == ("JSON_DUPLICATE_KEY", "bundle.json", line, key)


def test_a_json_lines_record_counts_lines_from_its_own() -> None:
    with pytest.raises(InvalidDocument) as caught:
        structured.loads_json('{"a": 1, "a": 2}', path="issues.jsonl", line=12, unique_keys=True)
    assert (caught.value.code, caught.value.line) == ("JSON_DUPLICATE_KEY", 12)


def test_duplicates_are_allowed_where_not_asked_for() -> None:
    assert structured.loads_json('{"a": 1, "a": 2}') == {"a": 2}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_valid_json_without_duplicates_reads_the_same_with_and_without_the_check(value: object) -> None:
    text = json.dumps(value, indent=1)
    assert structured.duplicate_key(text) is None
    assert structured.loads_json(text, unique_keys=True) == value


@pytest.mark.parametrize("text", ["a = " + "[" * 5000 + "]" * 5000, "a = " + "{b = " * 3000 + "1" + "}" * 3000])
def test_toml_nesting_past_the_parser_is_toml_too_deep(text: str) -> None:
    with pytest.raises(InvalidDocument) as caught:
        structured.loads_toml(text, path=".moss/config.toml")
    assert (caught.value.code, caught.value.path) == ("TOML_TOO_DEEP", ".moss/config.toml")


def test_toml_reads_as_tomllib_does_and_its_syntax_errors_pass_through() -> None:
    assert structured.loads_toml('a = [1, [2]]\n[t]\nb = "c"\n') == {"a": [1, [2]], "t": {"b": "c"}}
    with pytest.raises(tomllib.TOMLDecodeError):
        structured.loads_toml("a = [")


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=20,
)


@given(JSON_VALUES, st.sampled_from([1, 2, 7, 8192]))
def test_json_in_blocks_is_the_text_json_dumps_gives(value: object, block: int) -> None:
    blocks = list(structured.json_blocks(value, block=block))
    assert "".join(blocks) == json.dumps(value, ensure_ascii=False, indent=2)
    assert all(blocks)


class _Text(str):
    pass


class _Number(int):
    pass


class _Mapping(dict[object, object]):
    pass


# What json_blocks writes itself (exact str, int, bool, None, list, dict with text keys) mixed
# with what it hands to json's encoder: floats, tuples, subclasses, keys that are not text,
# values only `default` turns into JSON; lists long enough to be written in blocks.
ODD_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=6),
    st.text(max_size=4).map(_Text),
    st.integers().map(_Number),
    st.frozensets(st.integers(), max_size=3),
)
ODD_VALUES = st.recursive(
    ODD_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.lists(st.integers(), min_size=255, max_size=260),
        st.dictionaries(st.text(max_size=4), inner, max_size=4),
        st.dictionaries(st.text(max_size=4), inner, max_size=4).map(_Mapping),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers(), st.floats(), st.booleans(), st.none()), inner, max_size=4),
    ),
    max_leaves=30,
)


@given(ODD_VALUES, st.sampled_from([1, 3, 8192]), st.sampled_from([2, 0, "\t"]))
def test_json_in_blocks_is_the_text_json_dumps_gives_for_odd_values_too(value: object, block: int, indent: int | str) -> None:
    blocks = list(structured.json_blocks(value, block=block, indent=indent, default=sorted))
    assert "".join(blocks) == json.dumps(value, ensure_ascii=False, indent=indent, default=sorted)
    assert all(blocks)


def test_json_in_blocks_deeper_than_it_writes_itself_and_without_indent_is_json_dumps_text() -> None:
    deep: object = "bottom"
    for level in range(200):
        deep = {"level": level, "inner": [deep, 1.5]}
    for indent in (2, None):
        assert "".join(structured.json_blocks(deep, indent=indent)) == json.dumps(deep, ensure_ascii=False, indent=indent)


@pytest.mark.parametrize("depth", [0, 3, 100])
def test_json_in_blocks_refuses_a_cycle_as_json_dumps_does(depth: int) -> None:
    cycle: list[object] = []
    value: object = cycle
    for _level in range(depth):
        value = {"next": value}
    cycle.append(value)
    with pytest.raises(ValueError, match="Circular reference detected"):
        json.dumps(cycle, indent=2)
    with pytest.raises(ValueError, match="Circular reference detected"):
        list(structured.json_blocks(cycle))


def test_json_in_blocks_hands_values_it_cannot_encode_to_default() -> None:
    assert "".join(structured.json_blocks({"when": {1, 2}}, default=sorted)) == json.dumps({"when": [1, 2]}, indent=2)
    with pytest.raises(TypeError):
        list(structured.json_blocks({"when": {1}}))

"""Property tests: the fast read path and the round-trip edit path agree on every document.

Three readers must give the same values for any frontmatter they all accept: the plain
key/value scanner, PyYAML's C loader configured for YAML 1.2, and ruamel's round-trip loader.
Run longer with `HYPOTHESIS_PROFILE=thorough` (see conftest.py).
"""

from __future__ import annotations

import math
from typing import Any

import frontmatter
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from moss_files.foundation import document
from moss_files.foundation import yaml_editor as yamlrt
from moss_files.foundation import yaml_reader as yamlio
from moss_files.foundation.yaml_reader import YamlProblem

KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
# Characters that matter to YAML's plain-scalar rules, plus ordinary text.
TOKEN_ALPHABET = "abcxyz019 :#-._'\"[]{},!&*|>%@~+\\/\tTtNnoOeE"
TOKENS = st.one_of(
    st.sampled_from(
        [
            "no",
            "on",
            "yes",
            "Off",
            "y",
            "2026-01-21",
            "2026-01-21T10:00:00Z",
            "017",
            "0o17",
            "0x1F",
            "1_000",
            "1e3",
            ".5",
            "1.",
            "-0",
            "+5",
            "~",
            "null",
            "Null",
            "True",
            "FALSE",
            ".inf",
            "-.Inf",
            ".NaN",
            "1.10",
            "a #b",
            "a#b",
            "http://x.y/z",
            "C#",
            "[a, b]",
            "[]",
            "[1, no, x]",
            "{a: 1}",
            "'q'",
            '"d"',
            "- x",
            "=",
            "<<",
        ]
    ),
    st.text(alphabet=TOKEN_ALPHABET, max_size=12),
)


def _outcome(reader, text: str) -> Any:
    try:
        return ("ok", reader(text))
    except YamlProblem as problem:
        return ("error", problem.code)


def _fast_c(text: str) -> Any:
    loader = yamlio._FastLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}
        yamlio._check_tree(node, text)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _roundtrip(text: str) -> Any:
    return yamlrt.to_plain(yamlrt.load_roundtrip(text))


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@given(st.lists(st.tuples(KEYS, TOKENS), max_size=6, unique_by=lambda pair: pair[0]))
@example([("a", "no"), ("b", "2026-01-21"), ("c", "017")])
def test_plain_scanner_agrees_with_both_yaml_loaders(pairs: list[tuple[str, str]]) -> None:
    text = "".join(f"{key}: {token}\n" for key, token in pairs)
    simple = yamlio.scan_simple(text)
    if simple is None:
        return  # the scanner declined; the loaders take over (checked below)
    assert same(simple, _fast_c(text)), text
    assert same(simple, _roundtrip(text)), text


COMMENTS = st.sampled_from(["", "# note\n", "  # indented note\n", "\n"])


@st.composite
def structured_frontmatter(draw: st.DrawFn) -> str:
    """Top-level entries that are scalars, block lists or one-level mappings, with comments."""
    lines = []
    for key in draw(st.lists(KEYS, max_size=5, unique=True)):
        lines.append(draw(COMMENTS))
        shape = draw(st.sampled_from(["scalar", "list", "map"]))
        if shape == "scalar":
            lines.append(f"{key}: {draw(TOKENS)}\n")
            continue
        lines.append(f"{key}:{draw(st.sampled_from(['', ' ', '  # c']))}\n")
        indent = " " * draw(st.sampled_from([0, 2, 4] if shape == "list" else [2, 4]))
        for child in draw(st.lists(KEYS, min_size=1, max_size=3, unique=True)):
            lines.append(draw(COMMENTS))
            if shape == "list":
                lines.append(f"{indent}- {draw(TOKENS)}\n")
            else:
                lines.append(f"{indent}{child}: {draw(TOKENS)}\n")
    return "".join(lines)


@given(structured_frontmatter())
@example("a:\n  - x\n  # c\n  - 'y'\nb:\n  k: \"v\"\n")
def test_structured_scanner_agrees_with_both_yaml_loaders(text: str) -> None:
    check_scanner(yamlio.scan_simple, text)


def check_scanner(scanner: Any, text: str) -> None:
    """A scanner's answer on `text` is both loaders' answer (its error the C loader's), unless
    it declines (None: the C loader takes the text)."""
    scanned = _outcome(scanner, text)
    if scanned == ("ok", None):
        return
    c_loader = _outcome(_fast_c, text)
    if scanned[0] == "error":
        assert c_loader == scanned, text
        return
    assert c_loader[0] == "ok" and same(scanned[1], c_loader[1]), text
    assert same(scanned[1], _roundtrip(text)), text


@given(st.lists(st.tuples(KEYS, TOKENS), max_size=6, unique_by=lambda pair: pair[0]))
def test_fast_path_and_edit_path_agree_whenever_the_fast_path_accepts(pairs: list[tuple[str, str]]) -> None:
    text = "".join(f"{key}: {token}\n" for key, token in pairs)
    fast = _outcome(yamlio.load_fast, text)
    edit = _outcome(_roundtrip, text)
    if fast[0] == "error" or edit[0] == "error":
        # libyaml is more lenient than ruamel in a few corners (`a:<TAB>`, `a: |#`); such a
        # document reads fine, and an edit of it is refused with FRONTMATTER_SYNTAX, unwritten.
        return
    assert same(edit[1], fast[1]), text


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=True),
    st.text(max_size=20).filter(lambda s: "\x85" not in s and "\u2028" not in s and "\u2029" not in s),
    TOKENS,
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=3)),
    max_leaves=8,
)
METAS = st.dictionaries(KEYS, VALUES, max_size=6)


def _printable(value: Any) -> bool:
    # YAML cannot hold most C0 control characters even quoted-escaped round trips are fine,
    # but surrogates can never be encoded as UTF-8; keep those out.
    if isinstance(value, str):
        return not any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, list):
        return all(_printable(item) for item in value)
    if isinstance(value, dict):
        return all(_printable(item) for item in value.values())
    return True


@given(METAS, st.text(max_size=60))
@example({}, "---")
@example({}, "---\r\nx")
def test_rendered_documents_read_back_identically_on_both_paths(meta: dict[str, Any], body: str) -> None:
    assume(_printable(meta) and _printable(body))
    text = document.render(meta, body)
    doc = document.parse(text)
    assert same(doc.meta, meta)
    assert doc.body == body
    if meta:
        assert same(_roundtrip(doc.frontmatter_text), meta)


@given(METAS, KEYS, VALUES, st.text(max_size=40))
def test_an_edit_changes_only_the_edited_key(meta: dict[str, Any], key: str, value: Any, body: str) -> None:
    assume(_printable(meta) and _printable(value) and _printable(body))
    original = document.render(meta, "\n" + body) if meta else "---\nseed: 1\n---\n" + body
    before = document.parse(original)
    edited = document.edit_frontmatter(original, {key: value})
    after = document.parse(edited)
    expected = dict(before.meta)
    expected[key] = value
    assert same(after.meta, expected)
    assert after.body == before.body
    # Every other key keeps its exact lines.
    untouched = [k for k in before.meta if k != key]
    for other in untouched:
        assert _key_lines(before.frontmatter_text, other) == _key_lines(after.frontmatter_text, other)


def _key_lines(fm_text: str, key: str) -> list[str]:
    lines = fm_text.splitlines()
    starts = [i for i, line in enumerate(lines) if line and not line[0].isspace() and not line.startswith(("#", "-"))]
    for position, index in enumerate(starts):
        if lines[index].split(":", 1)[0].strip("'\"") == key:
            end = starts[position + 1] if position + 1 < len(starts) else len(lines)
            return lines[index:end]
    return []


@pytest.mark.parametrize(
    "text",
    [
        "---\ntitle: Hello\ntags: [a, b]\n---\nBody\n",
        "---\ntitle: 'Quoted: yes'\nn: 3\n---\n\nBody with --- inside\n---\nmore\n",
        "no frontmatter here\n",
    ],
)
def test_split_agrees_with_python_frontmatter_on_ordinary_documents(text: str) -> None:
    ours = document.parse(text)
    theirs = frontmatter.loads(text)
    assert ours.meta == dict(theirs.metadata)
    # python-frontmatter strips the body; ours keeps every byte, so compare modulo that.
    assert ours.body.strip() == theirs.content.strip()


SIMPLE_VALUES = st.one_of(
    st.booleans(),
    st.integers(min_value=-1000, max_value=10**9),
    st.from_regex(r"[A-Za-z0-9_./~][A-Za-z0-9 _.,/~+@=%-]{0,12}", fullmatch=True),
    st.lists(st.from_regex(r"[a-z0-9][a-z0-9_-]{0,6}", fullmatch=True), max_size=3),
    st.sampled_from(["no", "yes", "017", "2026-01-21", "1.10", "null", "a #b", "x: y", "-", "~x"]),
    st.sampled_from(["2026-01-21T10:00:00Z", "2026-01-21T10:00:00.123Z", "1:20", "12:30:45", "a:b", "http://x.y/z", "x:", "a::b", "0:1"]),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9:._-]{0,10}", fullmatch=True),
)


@given(st.lists(st.tuples(KEYS, TOKENS), min_size=1, max_size=5, unique_by=lambda pair: pair[0]), KEYS, SIMPLE_VALUES)
def test_quick_splice_writes_what_the_round_trip_path_writes(pairs: list[tuple[str, str]], key: str, value: Any) -> None:
    """The ruamel-free splice for common edits must produce the same bytes as the round-trip
    path, so which path ran never shows in a file."""
    fm_text = "".join(f"{k}: {token}\n" for k, token in pairs)
    try:
        before = yamlio.load_fast(fm_text)
        roundtrip = yamlrt.load_roundtrip(fm_text)
    except YamlProblem:
        return
    if key in before and same(before[key], value):
        return
    expected = {**before, key: value}
    quick = document._splice_simple(fm_text, {key: value}, "\n")
    if quick is None or not document._reads_as(quick, expected):
        return  # not a quick edit: the round-trip path takes it
    slow = document._splice(fm_text, roundtrip, {key: value}, "\n")
    assert quick == slow, (fm_text, key, value)


# A task file's plan: a list of mappings, deeper than the plain scanner goes.
NESTED_BLOCKS = st.sampled_from(
    [
        "plan:\n  - id: step-1\n    description: Change it\n    affected_files:\n      - src/a.py\n",
        "plan:\n- id: step-1\n  status: PENDING\n- id: step-2\n  status: 'DONE'\n",
        "steps:\n  - id: s\n    files: [a.py, b.py]  # two\n\n  # between\n  - id: t\n",
        "plan:\n  - id: s\n    note: |\n      kept\n",
        "plan:\n  - {id: s, status: x}\n",
        "plan:\n  - id: s\n    note: 'run\n      on'\n",
        "plan:\n  - id: s\n    note: a:\tb\n",
    ]
)


@given(st.lists(st.tuples(KEYS, TOKENS), min_size=1, max_size=4, unique_by=lambda pair: pair[0]), NESTED_BLOCKS, st.integers(0, 4), KEYS, SIMPLE_VALUES)
def test_scalar_splice_in_nested_frontmatter_writes_what_the_round_trip_path_writes(
    pairs: list[tuple[str, str]], block: str, at: int, key: str, value: Any
) -> None:
    """The ruamel-free edit of a top-level scalar in a frontmatter with a list of mappings (a
    task's plan) gives the round-trip path's bytes, and takes no document ruamel refuses."""
    lines = [f"{k}: {token}\n" for k, token in pairs]
    fm_text = "".join(lines[:at]) + block + "".join(lines[at:])
    try:
        before = yamlio.load_fast(fm_text)
    except YamlProblem:
        return
    if key in before and same(before[key], value):
        return
    if isinstance(value, list) or isinstance(before.get(key), list | dict):
        return  # lists are the round-trip path's
    expected = {**before, key: value}
    quick = document._splice_scalars(fm_text, before, {key: value}, "\n")
    if quick is None or not document._reads_as(quick, expected):
        return  # not a quick edit: the round-trip path takes it
    roundtrip = yamlrt.load_roundtrip(fm_text)  # ruamel reads every document the splice takes
    slow = document._splice(fm_text, roundtrip, {key: value}, "\n")
    assert quick == slow, (fm_text, key, value)


def test_scalar_splice_declines_what_only_the_lenient_reader_reads() -> None:
    for fm_text in ("a:\t\nplan:\n  - id: s\n", "plan:\n  - id: s\n    note: |#\n      x\n"):
        meta = yamlio.load_fast(fm_text)
        assert document._splice_scalars(fm_text, meta, {"b": "2"}, "\n") is None

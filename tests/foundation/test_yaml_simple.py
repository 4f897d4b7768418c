"""The fast writer of plain frontmatter gives exactly ruamel's text, or steps aside."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from moss_files.foundation import document
from moss_files.foundation import yaml_editor as yamlrt

# Characters that change how YAML reads a scalar, mixed with ordinary ones.
TRICKY = st.text(alphabet="aZ09_ .,:/+@()-#'\"!&*?|>%=~[]{}`\\\tyYnNoOeEx\u00e9\u00a0\u2014\ufeff\x85\n\U0001f600", min_size=0, max_size=10)
VALUES = st.one_of(TRICKY, st.integers(), st.booleans(), st.lists(TRICKY, max_size=3), st.none())


def ruamel_text(data: dict[str, Any]) -> str:
    return yamlrt.dump_roundtrip(yamlrt.styled_like(None, dict(data)))


@given(st.dictionaries(st.sampled_from(["id", "name", "tags", "title", "x_1", "Key", "on"]), VALUES, max_size=5))
def test_the_fast_text_equals_ruamels_whenever_it_is_given(data: dict[str, Any]) -> None:
    fast = yamlrt.dump_simple(data)
    if fast is not None:
        assert fast == ruamel_text(data)


def test_the_common_capsule_frontmatter_takes_the_fast_path() -> None:
    meta = {
        "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "workspace": "default",
        "name": "auth flow",
        "tags": ["a", "b c"],
        "created_at": "2026-01-19T10:00:01Z",
        "count": 3,
        "ok": True,
    }
    assert yamlrt.dump_simple(meta) == ruamel_text(meta)
    assert document.render(meta, "body\n") == f"---\n{ruamel_text(meta)}---\nbody\n"


@given(st.dictionaries(st.sampled_from(["title", "name"]), st.one_of(st.text(max_size=12), st.lists(st.text(max_size=8), max_size=3)), max_size=2))
def test_any_text_is_rendered_as_ruamel_does_or_left_to_it(data: dict[str, Any]) -> None:
    fast = yamlrt.dump_simple(data)
    if fast is not None:
        assert fast == ruamel_text(data)


KEYS = st.sampled_from(["id", "Key", "camelCase", "x_1", "deps", "a", "b", "No"])
SCALARS = st.one_of(TRICKY, st.text(alphabet="ab :#-'\"", min_size=1, max_size=6), st.integers(), st.booleans())
NESTED = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, min_size=1, max_size=3)), max_leaves=8)


@given(st.dictionaries(KEYS, NESTED, max_size=4))
def test_nested_mappings_and_lists_are_rendered_as_ruamel_does_or_left_to_it(data: dict[str, Any]) -> None:
    fast = yamlrt.dump_simple(data)
    if fast is not None:
        assert fast == ruamel_text(data)


def test_a_migrated_items_source_fields_take_the_fast_path() -> None:
    """The shape `source_fields` has in a Beads migration: flat strings, a list of labels and
    a list of link mappings."""
    meta = {
        "imported_from": "beads",
        "source_id": "bd-e1.2",
        "source_fields": {
            "close_reason": "Done: merged in #12",
            "labels": ["ops", "p1"],
            "dependencies": [{"issue_id": "bd-e1.2", "depends_on_id": "external:gh:412", "type": "tracks"}],
            "timeout": 3600000000000,
        },
    }
    fast = yamlrt.dump_simple(meta)
    assert fast is not None and fast == ruamel_text(meta)


def test_values_that_need_quotes_take_the_fast_path_in_ruamels_quotes() -> None:
    """Real titles (a Beads board's: `Digest: mol-refinery-patrol`, `Merge: bd-05a8`, `GHI #888: …`)
    need quotes; the fast path writes them as ruamel would, not through it."""
    cases = {
        "true": "'true'",
        "no": "'no'",
        "0755": "'0755'",
        "1.5": "'1.5'",
        "null": "'null'",
        "~": "'~'",
        "a: b": "'a: b'",
        "ends:": "'ends:'",
        "x #y": "'x #y'",
        " lead": "' lead'",
        "trail ": "'trail '",
        "- dash": "'- dash'",
        "-dash": "-dash",
        "Review & merge PR #1019: feat(ui)": "'Review & merge PR #1019: feat(ui)'",
        "bd show --json doesn't include it": "bd show --json doesn't include it",
        "it's: here": '"it\'s: here"',
        "'quoted' \\ \"both\"": '"\'quoted\' \\\\ \\"both\\""',
        "été": "été",
        "— dash first": "— dash first",
    }
    for value, shown in cases.items():
        assert yamlrt.dump_simple({"k": value}) == f"k: {shown}\n" == ruamel_text({"k": value}), value
        assert yamlrt.dump_simple({"k": [value]}) == f"k:\n  - {shown}\n" == ruamel_text({"k": [value]}), value


def test_values_this_path_does_not_follow_are_left_to_ruamel() -> None:
    for value in ("", "two\nlines", "tab\there", "nel\x85", "bom\ufeff", "bell\x07", "été's: x"):
        assert yamlrt.dump_simple({"k": value}) is None, value
    assert yamlrt.dump_simple({"k": []}) is None and yamlrt.dump_simple({"k": None}) is None
    assert yamlrt.dump_simple({"on": "x"}) is None and yamlrt.dump_simple({"k": {"n": None}}) is None
    assert yamlrt.dump_simple({"k": [[1]]}) is None and yamlrt.dump_simple({"k": {}}) is None and yamlrt.dump_simple({"k": 1.5}) is None


def test_the_plain_scalar_cache_keeps_a_bounded_working_set_for_a_stream_of_new_values() -> None:
    """A daemon reading a message stream meets new ids and times forever: the cache of
    resolved scalars stays at 1,024 entries (it held 8,192, ~1.5 MB, filled only after
    ~8,000 messages), and answers as the uncached resolution."""
    from moss_files.foundation import yaml_reader
    from moss_files.foundation import yaml_scalars as yaml12

    for number in range(5000):
        assert yaml_reader.load_fast(f"id: msg-{number}\ntime: 2026-03-01T10:{number % 60:02d}:00Z\ncount: {number}\n") == {
            "id": f"msg-{number}",
            "time": yaml12.resolve_plain(f"2026-03-01T10:{number % 60:02d}:00Z"),
            "count": number,
        }
    assert yaml_reader.resolve_plain_cached.cache_info().currsize <= 1024

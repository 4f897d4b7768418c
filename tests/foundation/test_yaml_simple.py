"""The fast writer of plain frontmatter gives exactly ruamel's text, or steps aside."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from moss_files.foundation import document
from moss_files.foundation import yaml_editor as yamlrt

# Characters that change how YAML reads a scalar, mixed with ordinary ones.
TRICKY = st.text(alphabet="aZ09_ .,:/+@()-#'\"!&*?|>%=~[]{}\\\tyYnNoOeEx\u00e9", min_size=0, max_size=10)
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


def test_values_that_need_quotes_are_left_to_ruamel() -> None:
    for value in ("true", "no", "0755", "1.5", "null", "~", "a: b", "ends:", "x #y", "", " lead", "trail ", "-dash", "été"):
        assert yamlrt.dump_simple({"k": value}) is None, value
    assert yamlrt.dump_simple({"k": []}) is None and yamlrt.dump_simple({"k": None}) is None


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

"""Editing JSON text in place: an edit changes the value as asked and no other byte; adding
then removing gives the text back; layouts (indent, tabs, one line, CRLF) are followed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moss_files.foundation import jsonedit

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=10)
LAYOUTS = st.sampled_from([{"indent": 2}, {"indent": 4}, {"indent": "\t"}, {}, {"separators": (",", ":")}, {"indent": 2, "crlf": True}])


def dumps(value: object, layout: dict) -> str:
    options = {k: v for k, v in layout.items() if k != "crlf"}
    text = json.dumps(value, ensure_ascii=False, **options) + "\n"
    return text.replace("\n", "\r\n") if layout.get("crlf") else text


@given(st.dictionaries(st.text(max_size=6), VALUES, max_size=4), VALUES, LAYOUTS)
def test_a_member_added_then_removed_gives_the_text_back(document: dict, value: object, layout: dict) -> None:
    text = dumps(document, layout)
    key = "added-" + "x" * len(document)  # a key the object does not have
    added = jsonedit.add_member(text, jsonedit.parse(text), key, value)
    assert json.loads(added) == {**document, key: value}
    root = jsonedit.parse(added)
    again = jsonedit.remove_entry(added, root, root.keys().index(key))
    if document or not layout.get("indent"):
        assert again == text
    else:  # an empty object laid out on several lines comes back as {}
        assert json.loads(again) == {}


@given(st.lists(VALUES, max_size=4), VALUES, LAYOUTS)
def test_an_item_added_then_removed_gives_the_text_back(items: list, value: object, layout: dict) -> None:
    text = dumps({"list": items, "after": 1}, layout)
    node = jsonedit.parse(text).member("list")
    assert node is not None
    added = jsonedit.add_item(text, node, value)
    assert json.loads(added) == {"list": [*items, value], "after": 1}
    listed = jsonedit.parse(added).member("list")
    assert listed is not None
    again = jsonedit.remove_entry(added, listed, len(items))
    assert json.loads(again) == {"list": items, "after": 1}
    if items:
        assert again == text


def test_every_other_byte_stays_and_the_layout_is_the_files() -> None:
    text = '{\r\n\t"b": [1,2],   "a": {"x": true}\r\n}\r\n'
    root = jsonedit.parse(text)
    added = jsonedit.add_member(text, root, "c", {"k": [1]})
    assert added == '{\r\n\t"b": [1,2],   "a": {"x": true},\r\n\t"c": {\r\n\t\t"k": [\r\n\t\t\t1\r\n\t\t]\r\n\t}\r\n}\r\n'
    inline = jsonedit.add_item(text, root.member("b"), 3)  # type: ignore[arg-type]
    assert inline == '{\r\n\t"b": [1,2, 3],   "a": {"x": true}\r\n}\r\n'
    replaced = jsonedit.replace_value(text, root.member("a"), False)  # type: ignore[arg-type]
    assert replaced == '{\r\n\t"b": [1,2],   "a": false\r\n}\r\n'
    middle = jsonedit.remove_entry(text, root, 0)
    assert middle == '{\r\n\t"a": {"x": true}\r\n}\r\n'
    assert jsonedit.indent_unit('{\n    "a": 1\n}') == "    " and jsonedit.indent_unit("{}") == "  "


@pytest.mark.parametrize("text", ["", "{", '{"a": 1,}', "{'a': 1}", '{"a": 1} // note', "[1, 2"])
def test_text_that_is_not_json_is_refused_with_its_place(text: str) -> None:
    with pytest.raises(jsonedit.JsonTextError) as caught:
        jsonedit.parse(text)
    assert caught.value.line >= 1 and caught.value.column >= 1


def test_strings_with_escapes_and_numbers_are_spanned_exactly() -> None:
    text = '{"k\\"ey": "v\\\\\\"x", "n": -1.5e+3, "u": "\\u00e9", "z": null}'
    root = jsonedit.parse(text)
    assert root.keys() == ['k"ey', "n", "u", "z"]
    assert [text[node.start : node.end] for _key, _start, node in root.members] == ['"v\\\\\\"x"', "-1.5e+3", '"\\u00e9"', "null"]

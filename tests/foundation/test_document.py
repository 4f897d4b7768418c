"""Documents: splitting, reading, faithful edits, and every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.foundation import document, fs
from moss_files.foundation.errors import InvalidDocument

HAND_WRITTEN = """\
---
# Written by a human; the tool must keep every byte it does not change.
title: "Auth rework"      # quoted on purpose
status: open
owner:   alice
weird_key: 'single ''quoted'' text'
flags: [a, b]
when: 2026-01-21
enabled: no

notes: |
  line one
  # not a comment: block scalar content
custom:
  nested: true
---
Body starts here.

---

A body line that is just three dashes (above) must not confuse anything.
"""


def diff_lines(before: str, after: str) -> list[tuple[str, str]]:
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(a) == len(b), "line count changed"
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


def test_values_read_back_as_written_under_yaml_1_2() -> None:
    doc = document.parse(HAND_WRITTEN)
    assert doc.meta["enabled"] == "no"
    assert doc.meta["when"] == "2026-01-21"
    assert doc.meta["weird_key"] == "single 'quoted' text"
    assert doc.meta["notes"] == "line one\n# not a comment: block scalar content\n"
    assert doc.meta["custom"] == {"nested": True}
    assert doc.body.startswith("Body starts here.\n\n---\n")
    assert doc.body_line == 17


@pytest.mark.parametrize(
    ("key", "value", "old_line", "new_line"),
    [
        ("status", "done", "status: open\n", "status: done\n"),
        ("title", "Auth v2", 'title: "Auth rework"      # quoted on purpose\n', 'title: "Auth v2"      # quoted on purpose\n'),
        ("owner", "bob", "owner:   alice\n", "owner:   bob\n"),
        ("flags", ["a", "b", "c"], "flags: [a, b]\n", "flags: [a, b, c]\n"),
        ("enabled", "yes", "enabled: no\n", "enabled: 'yes'\n"),
        ("when", "2026-02-01", "when: 2026-01-21\n", "when: 2026-02-01\n"),
    ],
)
def test_a_field_change_changes_only_that_line(key: str, value: object, old_line: str, new_line: str) -> None:
    edited = document.edit_frontmatter(HAND_WRITTEN, {key: value})
    assert diff_lines(HAND_WRITTEN, edited) == [(old_line, new_line)]
    assert document.parse(edited).meta[key] == value


def test_adding_and_deleting_keys_touch_only_their_lines() -> None:
    added = document.edit_frontmatter(HAND_WRITTEN, {"id": "01J0000000000000000000000"})
    assert added.replace("id: 01J0000000000000000000000\n", "", 1) == HAND_WRITTEN
    removed = document.edit_frontmatter(HAND_WRITTEN, {"owner": document.DELETE})
    assert removed == HAND_WRITTEN.replace("owner:   alice\n", "")


def test_an_unchanged_value_returns_the_text_untouched() -> None:
    assert document.edit_frontmatter(HAND_WRITTEN, {"status": "open"}) is HAND_WRITTEN


def test_document_without_frontmatter_gains_one_and_keeps_its_body() -> None:
    body = "# Notes\n\n---\nplain markdown\n"
    edited = document.edit_frontmatter(body, {"id": "x1"})
    assert edited == "---\nid: x1\n---\n" + body


def test_bom_and_crlf_survive_an_edit(tmp_path: Path) -> None:
    path = tmp_path / "crlf.md"
    original = "\ufeff---\r\nstatus: open\r\ntitle: T\r\n---\r\nbody\r\n\r\nmore\r\n".encode()
    path.write_bytes(original)
    fs.modify_document(path, lambda doc: document.edit_frontmatter(doc.text, {"status": "done"}))
    assert path.read_bytes() == original.replace(b"status: open", b"status: done")


def test_new_documents_render_in_declared_order_and_read_back() -> None:
    meta = {"id": "01J", "time": "2026-01-21T10:00:00Z", "answer": "no", "version": "1.10", "tags": ["x"]}
    text = document.render(meta, "Body\n")
    assert text.splitlines()[1:3] == ["id: 01J", "time: 2026-01-21T10:00:00Z"]
    assert document.parse(text).meta == meta


BAD_INPUTS = [
    ("unclosed", b"---\ntitle: x\nbody without a fence\n", "FRONTMATTER_UNCLOSED", 1),
    ("list", b"---\n- a\n- b\n---\nbody\n", "FRONTMATTER_NOT_MAPPING", 2),
    ("scalar", b"---\njust text\n---\nbody\n", "FRONTMATTER_NOT_MAPPING", 2),
    ("duplicate", b"---\ntitle: a\nstatus: x\ntitle: b\n---\n", "FRONTMATTER_DUPLICATE_KEY", 4),
    ("duplicate-nested", b"---\nx:\n  a: 1\n  a: 2\n---\n", "FRONTMATTER_DUPLICATE_KEY", 4),
    ("tabs", b"---\nlist:\n\t- a\n---\n", "FRONTMATTER_SYNTAX", 3),
    ("syntax", b"---\ntitle: [unclosed\nnext: 1\n---\n", "FRONTMATTER_SYNTAX", None),
    ("utf8", b"---\ntitle: ok\n---\nline two\nbad \xff byte\n", "INVALID_ENCODING", 5),
    ("binary", b"---\na: 1\n---\n\x00\x01\x02", "BINARY_FILE", 4),
    (
        "alias-bomb",
        b"---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n---\n",
        "FRONTMATTER_ALIAS",
        2,
    ),
    ("tag", b"---\nwhen: !!timestamp 2026-01-01\n---\n", "FRONTMATTER_TAG", 2),
    ("custom-tag", b"---\nx: !python/object:os.system ls\n---\n", "FRONTMATTER_TAG", 2),
    ("deep", b"---\nx: " + b"[" * 60 + b"]" * 60 + b"\n---\n", "FRONTMATTER_TOO_DEEP", 2),
]


@pytest.mark.parametrize(("name", "data", "code", "line"), BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_bad_input_is_reported_with_code_and_line(name: str, data: bytes, code: str, line: int | None) -> None:
    with pytest.raises(InvalidDocument) as caught:
        document.parse_bytes(data, f"{name}.md")
    assert caught.value.code == code
    assert caught.value.path == f"{name}.md"
    if line is not None:
        assert caught.value.line == line


def test_oversized_file_is_refused() -> None:
    with pytest.raises(InvalidDocument) as caught:
        document.parse_bytes(b"x" * 2048, "big.md", max_bytes=1024)
    assert caught.value.code == "FILE_TOO_LARGE"
    assert caught.value.details == {"max_bytes": 1024, "actual_bytes": 2048}


@pytest.mark.parametrize(("name", "data", "code", "line"), BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_cli_reports_bad_input_and_never_rewrites_it(tmp_path: Path, name: str, data: bytes, code: str, line: int | None) -> None:
    path = tmp_path / f"{name}.md"
    path.write_bytes(data)
    check = run_cli("moss", "doc", "check", "--json", str(path))
    assert check.returncode == 4
    result = json.loads(check.stdout)["results"][0]
    assert result["error"]["code"] == code
    assert result["error"]["path"] == str(path)
    if line is not None:
        assert result["error"]["line"] == line
    edit = run_cli("moss", "doc", "set", "--json", str(path), "status=done")
    assert edit.returncode == 4
    assert json.loads(edit.stderr)["error"]["code"] == code
    assert "Traceback" not in edit.stderr
    assert path.read_bytes() == data


def test_edit_refused_where_only_the_lenient_reader_accepts(tmp_path: Path) -> None:
    # libyaml reads `a:<TAB>` as an empty value; ruamel (the editor) refuses it. The edit must
    # then fail cleanly and leave the file alone rather than guess.
    path = tmp_path / "lenient.md"
    data = b"---\na:\t\nb: 1\n---\nbody\n"
    path.write_bytes(data)
    assert fs.read_document(path).meta == {"a": None, "b": 1}
    result = run_cli("moss", "doc", "set", str(path), "b=2")
    assert result.returncode == 4
    assert path.read_bytes() == data


def test_cli_set_edits_faithfully(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text(HAND_WRITTEN)
    result = run_cli("moss", "doc", "set", "--json", str(path), "status=done", "owner=")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["meta"]["status"] == "done"
    expected = HAND_WRITTEN.replace("status: open", "status: done").replace("owner:   alice\n", "")
    assert path.read_text() == expected
    got = run_cli("moss", "doc", "get", str(path), "status")
    assert got.stdout == "done\n"
    missing = run_cli("moss", "doc", "get", "--json", str(path), "nope")
    assert missing.returncode == 3
    assert json.loads(missing.stderr)["error"]["code"] == "NOT_FOUND"


PROJECT = """\
---
id: proj
name: Shop
settings:
  # CONTROL until the rails are settled
  approval_mode: CONTROL   # a human approves every plan
  speed_mode_delay_ms: 2000
  task_sizing:
    warn_steps: 8
zeta: last
---
Body.
"""


def test_cli_set_addresses_nested_keys_by_dotted_paths(tmp_path: Path) -> None:
    """Issue 27 item 8: `settings.approval_mode=TURBO` changes the nested key (one line of the
    diff, the comments kept), not a new top-level key named `settings.approval_mode`."""
    path = tmp_path / "project.md"
    path.write_text(PROJECT)
    result = run_cli("moss", "doc", "set", "--json", str(path), "settings.approval_mode=TURBO")
    assert result.returncode == 0, result.stderr
    meta = json.loads(result.stdout)["meta"]
    assert "settings.approval_mode" not in meta and meta["settings"]["approval_mode"] == "TURBO"
    ((before, after),) = diff_lines(PROJECT, path.read_text())
    assert before == "  approval_mode: CONTROL   # a human approves every plan\n"
    assert after.split() == ["approval_mode:", "TURBO", "#", "a", "human", "approves", "every", "plan"]
    assert run_cli("moss", "doc", "get", str(path), "settings.approval_mode").stdout == "TURBO\n"
    # Deeper, new keys and deletions; a missing table is made.
    assert run_cli("moss", "doc", "set", str(path), "settings.task_sizing.max_steps=20", "settings.speed_mode_delay_ms=", "extra.a.b=1").returncode == 0
    meta = document.parse(path.read_text()).meta
    assert meta["settings"] == {"approval_mode": "TURBO", "task_sizing": {"warn_steps": 8, "max_steps": 20}}
    assert meta["extra"] == {"a": {"b": 1}} and list(meta) == ["id", "name", "settings", "zeta", "extra"]
    assert "# CONTROL until the rails are settled\n" in path.read_text()


def test_cli_set_refuses_a_dotted_path_through_a_value_that_is_no_mapping(tmp_path: Path) -> None:
    path = tmp_path / "project.md"
    path.write_text(PROJECT)
    for assignment in ("zeta.x=1", "settings.approval_mode.x=1", "settings..x=1", ".x=1", "settings.=1"):
        result = run_cli("moss", "doc", "set", "--json", str(path), assignment)
        assert result.returncode == 2, (assignment, result.stdout)
        error = json.loads(result.stderr)["error"]
        assert error["code"] == "INVALID_REQUEST" and error.get("hint"), assignment
    assert path.read_text() == PROJECT


def test_a_top_level_key_with_a_dot_in_its_name_is_still_set_as_written(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text("---\nsettings.mode: a\n---\n")
    assert run_cli("moss", "doc", "set", str(path), "settings.mode=b").returncode == 0
    assert path.read_text() == "---\nsettings.mode: b\n---\n"
    assert run_cli("moss", "doc", "get", str(path), "settings.mode").stdout == "b\n"


def _split_line_by_line(text: str) -> tuple[str, str, str, str] | None:
    """The plain reading `document.split` must agree with: every line after the opening
    fence looked at in turn, the first that is exactly `---` (or `---` and a CR) closing the
    frontmatter; None where it is never closed."""
    first_end = text.find("\n")
    first_line = text if first_end < 0 else text[:first_end]
    if first_line.rstrip("\r") != "---" or (first_end < 0 and first_line != "---"):
        return "", "", "", text
    if first_end < 0:
        return None
    position = first_end + 1
    for line in text[position:].split("\n"):
        if line in ("---", "---\r"):
            tail_end = min(position + len(line) + 1, len(text))
            return text[: first_end + 1], text[first_end + 1 : position], text[position:tail_end], text[tail_end:]
        position += len(line) + 1
    return None


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="-\r\n a:", max_size=40), st.sampled_from(["---\n", "---\r\n", "---", "--\n", "x\n", ""]))
def test_split_finds_the_fence_the_line_by_line_reading_finds(rest: str, opening: str) -> None:
    """`split` looks only at lines that start with the dashes (with `find`); it must close the
    frontmatter where reading every line would, CR line endings, `----` and a fence at the
    very end of the text included."""
    text = opening + rest
    expected = _split_line_by_line(text)
    if expected is None:
        with pytest.raises(InvalidDocument) as raised:
            document.split(text)
        assert raised.value.code == "FRONTMATTER_UNCLOSED"
    else:
        assert document.split(text) == expected
        assert "".join(expected) == text


EDITED_CASES = [
    ("---\ntitle: A\nstatus: WORKING\n---\nBody.\n", {"status": "DONE", "assignee": "w1"}),
    ("---\r\ntitle: A # kept\r\nlist:\r\n  - x\r\n---\r\nBody.\r\n", {"title": "B", "list": ["y", "z"]}),
    ("---\ntitle: A\nnested:\n  a: 1\n---\n", {"nested": {"a": 2, "b": [1, 2]}, "title": document.DELETE}),
    ("---\nflow: {a: 1, b: 2}\n---\nx\n", {"flow": {"a": 3}}),
    ("Just a body.\n", {"title": "new"}),
]


@pytest.mark.parametrize(("text", "changes"), EDITED_CASES)
def test_an_edit_reports_what_its_frontmatter_reads_as(text: str, changes: dict[str, object]) -> None:
    """The read an edit's check made (and hands to `parse(known=)`) is the plain parse's."""
    edited, read = document.edit_frontmatter_read(text, changes)
    assert edited == document.edit_frontmatter(text, changes)
    plain = document.parse(edited)
    if read is not None:
        assert read.text == plain.frontmatter_text
        assert read.meta == plain.meta and list(read.meta) == list(plain.meta)
    assert document.parse(edited, known=read) == plain


def test_a_known_read_of_another_frontmatter_is_not_used() -> None:
    """`known` stands only for the very text it was read from: any other is read afresh."""
    text = "---\ntitle: A\n---\nBody.\n"
    other = document.FrontmatterRead("title: B\n", {"title": "B"})
    assert document.parse(text, known=other).meta == {"title": "A"}
    assert document.parse_bytes(text.encode(), known=other) == document.parse(text)

"""Format versions, the pure part: the registry of kinds, markers, the checks readers make, and
every upgrade path from the oldest format to the newest, planned on the fixtures the previous
release's tools wrote (tests/fixtures/formats/v1, made by generate_v1.py) and compared byte
for byte with the expected files (tests/fixtures/formats/v2)."""

from __future__ import annotations

from pathlib import Path

import pytest

import moss_files.capsules.model  # also registers the capsule step
import needlecast
from moss_files.foundation import docmerge, document, formats
from moss_files.foundation.errors import InvalidDocument, MossError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
V1, V2 = FIXTURES / "v1", FIXTURES / "v2"
MTIME_MS = 1_795_168_800_000  # 2026-11-20T10:00:00Z, the mtime the tests give the fixtures
needlecast.parse_message_document  # noqa: B018  (loads needlecast.message, which registers the message-file step)


def fixture_files(base: Path) -> dict[str, bytes]:
    return {path.relative_to(base).as_posix(): path.read_bytes() for path in sorted(base.rglob("*")) if path.is_file()}


def test_every_kind_has_its_whole_chain_of_steps_and_one_name_for_its_marker() -> None:
    for spec in formats.KINDS.values():
        steps = formats.chain(spec.name)
        assert [step.version for step in steps] == list(range(2, spec.current + 1)), spec.name
        assert all(step.description for step in steps)
        assert spec.rewritable == (spec.marker in (formats.FRONTMATTER, formats.COMMENT, formats.HEAD_COMMENT, formats.TOML))
    assert {spec.name for spec in formats.KINDS.values() if not spec.rewritable} == {
        "activity",
        "chat",
        "comments",
        "agent-events",
        "audit",
        "read-log",
        "bundle",
    }


def test_every_file_the_previous_release_wrote_has_a_kind() -> None:
    kinds = {relpath: formats.kind_of(relpath) for relpath in fixture_files(V1)}
    assert [relpath for relpath, spec in kinds.items() if spec is None] == [".moss/README.md"]  # the folder's note to people
    found = {spec.name for spec in kinds.values() if spec is not None}
    # No tool call was audited; a bundle lives outside; checkpoint notes and observations came after release 1.
    assert found == set(formats.KINDS) - {"audit", "bundle", "checkpoint", "observation"}


@pytest.mark.parametrize("relpath", sorted(fixture_files(V1)))
def test_every_upgrade_path_from_the_oldest_format_to_the_newest(relpath: str) -> None:
    """Each fixture of format 1 planned to format 2 equals the expected file byte for byte,
    at its new place; planning the result again changes nothing."""
    spec = formats.kind_of(relpath)
    expected = fixture_files(V2)
    data = (V1 / relpath).read_bytes()
    if spec is None or not spec.rewritable or formats.in_flight(spec, relpath):
        assert expected[relpath] == data  # logs, notes and messages in flight are never rewritten
        return
    text = data.decode("utf-8")
    planned = formats.plan(spec.name, text, formats.Facts(relpath, MTIME_MS))
    if spec.current == 1:  # a file other tools share, whose format never changed: left as written
        assert not planned.changes and planned.text == text and expected[relpath] == data
        return
    assert (planned.old_version, planned.new_version) == (1, 2)
    assert planned.text.encode("utf-8") == expected[planned.new_relpath], planned.new_relpath
    again = formats.plan(spec.name, planned.text, formats.Facts(planned.new_relpath, MTIME_MS))
    assert not again.changes and again.text == planned.text and again.new_relpath == planned.new_relpath


def test_files_named_before_the_windows_escape_move_to_their_escaped_names() -> None:
    moved = {
        relpath: formats.plan("capsule", (V1 / relpath).read_text(), formats.Facts(relpath, MTIME_MS)).new_relpath
        for relpath in fixture_files(V1)
        if "capsules" in relpath
    }
    assert moved[".moss/capsules/default/con.md"] == ".moss/capsules/default/%63on.md"
    assert moved[".moss/capsules/nul/plans.md"] == ".moss/capsules/%6Eul/plans.md"
    assert all(source == target for source, target in moved.items() if "con.md" not in source and "/nul/" not in source)


def test_a_hand_written_capsule_keeps_the_id_and_times_it_was_known_by() -> None:
    relpath = ".moss/capsules/default/notes.md"
    text = (V1 / relpath).read_text()
    before = moss_files.capsules.model.parse_capsule(document.parse(text), Path("default/notes.md"), mtime_ms=MTIME_MS)  # type: ignore[arg-type]
    after_text = formats.plan("capsule", text, formats.Facts(relpath, MTIME_MS)).text
    after = moss_files.capsules.model.parse_capsule(document.parse(after_text), Path("default/notes.md"), mtime_ms=0)  # type: ignore[arg-type]
    assert (after.id, after.created_ms, after.updated_ms, after.text) == (before.id, before.created_ms, before.updated_ms, before.text)


def test_a_message_file_without_an_id_keeps_the_id_its_read_marks_name() -> None:
    relpath = ".needlecast/inbox/2026-11-27T03-00-00Z_dave_by-hand.md"
    text = (V1 / relpath).read_text()
    derived = needlecast.message.derive_id("dave", text.encode(), relpath.rsplit("/", 1)[-1])  # type: ignore[attr-defined]
    upgraded = formats.plan("message", text, formats.Facts(relpath)).text
    assert needlecast.parse_message_document(upgraded).id == derived


# --------------------------------------------------------------------------- reading markers


def test_a_frontmatter_marker_is_read_with_one_lookup_and_a_newer_one_is_refused_at_its_line() -> None:
    assert formats.check_document("task", document.parse("---\ntitle: x\n---\n")) == 1
    assert formats.check_document("task", document.parse("---\ntitle: x\nmoss_format: 2\n---\n")) == 2
    with pytest.raises(InvalidDocument) as caught:
        formats.check_document("task", document.parse("---\ntitle: x\nmoss_format: 3\n---\n"), "t.md")
    assert (caught.value.code, caught.value.line, caught.value.path) == ("FORMAT_TOO_NEW", 3, "t.md")
    assert caught.value.details == {"kind": "task", "version": 3, "supported": 2} and "upgrade moss-files" in (caught.value.hint or "")
    for bad in ("two", "true", "0", "1.5", "[2]"):
        with pytest.raises(InvalidDocument) as caught:
            formats.check_document("task", document.parse(f"---\nmoss_format: {bad}\n---\n"))
        assert caught.value.code == "SCHEMA_ERROR" and caught.value.line == 2


def test_comment_markers_sit_first_or_after_the_frontmatter_and_a_mailbox_marker_only_first() -> None:
    assert formats.check_text("plan", "# Plan\n") == 1
    assert formats.check_text("plan", "<!-- moss_format: 2 -->\n# Plan\n") == 2
    assert formats.check_text("current", "---\nstatus: working\n---\n<!-- moss_format: 2 -->\n# Current\n") == 2
    with pytest.raises(InvalidDocument) as caught:
        formats.check_text("current", "---\nstatus: working\n---\n<!-- moss_format: 7 -->\n", ".cstack/CURRENT.md")
    assert (caught.value.code, caught.value.line, caught.value.path) == ("FORMAT_TOO_NEW", 4, ".cstack/CURRENT.md")
    with pytest.raises(InvalidDocument) as caught:
        formats.check_text("plan", "<!-- moss_format: x -->\n")
    assert caught.value.code == "SCHEMA_ERROR" and caught.value.line == 1
    # A v1 mailbox may start with a message block: that is not frontmatter, a marker goes first.
    block = "---\nid: m1\nfrom: bob\n---\nhi\n"
    assert formats.check_text("mailbox", block) == 1
    assert formats.set_marker(formats.HEAD_COMMENT, block, 2) == "<!-- moss_format: 2 -->\n" + block
    assert formats.set_marker(formats.COMMENT, "---\nstatus: x\n---\nbody\n", 2) == "---\nstatus: x\n---\n<!-- moss_format: 2 -->\nbody\n"
    assert formats.check_text("config", "# moss_format: 2\nx = 1\n") == 2
    with pytest.raises(InvalidDocument) as caught:
        formats.check_text("config", "# moss_format: 3\n")
    assert caught.value.code == "FORMAT_TOO_NEW"


def test_files_other_tools_share_get_no_marker_and_those_an_earlier_release_marked_keep_reading() -> None:
    """The memory files and v1 mailboxes never changed format: a new one is written as its
    authors' tools write it, an upgrade adds nothing, and a file marked 2 by an earlier release
    reads (version 3 of them would be a real change, and is refused until this toolkit knows it)."""
    for kind in ("current", "plan", "memory", "mailbox"):
        spec = formats.KINDS[kind]
        assert (spec.current, spec.retired) == (1, (2,)), kind
        assert formats.stamp_text(kind, "# Plan\n") == "# Plan\n"
        assert formats.upgrade_text(kind, "# Plan\n", formats.Facts(spec.places[0])) == "# Plan\n"
        marked = "<!-- moss_format: 2 -->\n# Plan\n"
        assert formats.check_text(kind, marked) == 2
        planned = formats.plan(kind, marked, formats.Facts(spec.places[0]))
        assert not planned.changes and planned.text == marked  # kept as it is, never taken out either
        with pytest.raises(InvalidDocument) as caught:
            formats.check_text(kind, "<!-- moss_format: 3 -->\n# Plan\n")
        assert caught.value.code == "FORMAT_TOO_NEW" and caught.value.details["supported"] == 2
    assert formats.stamp("task", {"title": "x"}) == {"title": "x", "moss_format": 2}  # our own kinds keep their version 2


def test_set_marker_keeps_every_other_byte_and_the_line_ending() -> None:
    crlf = "\ufeff## Tasks\r\n- [ ] one\r\n"
    assert formats.set_marker(formats.COMMENT, crlf, 2) == "<!-- moss_format: 2 -->\r\n" + crlf
    marked = formats.set_marker(formats.COMMENT, "# Plan\n", 2)
    assert formats.set_marker(formats.COMMENT, marked, 3) == "<!-- moss_format: 3 -->\n# Plan\n"
    assert formats.without_marker(formats.COMMENT, marked) == ("# Plan\n", 2)
    assert formats.without_marker(formats.COMMENT, "# Plan\n") == ("# Plan\n", None)
    text = "---\n# a comment\ntitle: x   # kept\n---\nbody  \n"
    assert formats.set_marker(formats.FRONTMATTER, text, 2) == "---\n# a comment\ntitle: x   # kept\nmoss_format: 2\n---\nbody  \n"


def test_an_unclosed_frontmatter_is_reported_never_repaired_by_an_upgrade() -> None:
    with pytest.raises(InvalidDocument) as caught:
        formats.plan("plan", "---\na: 1\n## Tasks\n", formats.Facts(".cstack/PLAN.md"))
    assert caught.value.code == "FRONTMATTER_UNCLOSED"


def test_log_lines_carry_their_own_version_and_a_newer_line_is_refused_alone() -> None:
    assert formats.check_record("activity", {"id": "EVT-1"}) == 1
    assert formats.check_record("activity", {"id": "EVT-1", "moss_format": 1}) == 1
    with pytest.raises(InvalidDocument) as caught:
        formats.check_record("activity", {"moss_format": 2}, ".moss/board/activity.jsonl", 7)
    assert (caught.value.code, caught.value.line) == ("FORMAT_TOO_NEW", 7)
    formats.check_bundle_version("1.0")
    formats.check_bundle_version("0.9")  # older: the bundle reader's own SCHEMA_ERROR says so
    for newer in ("1.1", "2.0", 2):
        with pytest.raises(InvalidDocument) as caught:
            formats.check_bundle_version(newer)
        assert caught.value.code == "FORMAT_TOO_NEW"


def test_a_newer_file_is_never_planned_and_a_missing_owner_step_is_a_bug_not_a_silent_skip() -> None:
    with pytest.raises(InvalidDocument) as caught:
        formats.plan("insight", "---\nid: INS-1\nmoss_format: 9\n---\nx\n", formats.Facts(".moss/insights/INS-1.md"))
    assert caught.value.code == "FORMAT_TOO_NEW"
    saved = formats.KINDS["capsule"]
    formats.register_steps("capsule", ())
    try:
        with pytest.raises(MossError) as bug:
            formats.chain("capsule")
        assert bug.value.code == "INTERNAL"
    finally:
        formats.KINDS["capsule"] = saved


def test_stamp_puts_the_version_last_and_once() -> None:
    assert list(formats.stamp("insight", {"id": "x", "moss_format": 1, "type": "t"})) == ["id", "type", "moss_format"]
    assert formats.stamp("insight", {"id": "x"})["moss_format"] == 2


def test_locate_finds_the_kind_from_the_outermost_toolkit_folder() -> None:
    found = formats.locate("/home/me/project/.moss/board/tasks/TASK-1.md")
    assert found is not None and found[0].name == "task" and found[1] == ".moss/board/tasks/TASK-1.md"
    assert formats.locate("/home/me/notes/todo.md") is None
    assert formats.locate("/p/.moss/README.md") is None


# --------------------------------------------------------------------------- merging


def test_a_field_merge_keeps_the_highest_version_any_side_records() -> None:
    base = "---\ntitle: a\n---\nbody\n"
    upgraded = "---\ntitle: a\nmoss_format: 2\n---\nbody\n"
    edited = "---\ntitle: b\n---\nbody\n"
    merged = docmerge.merge_document(base, upgraded, edited)
    assert merged.clean and merged.text == "---\ntitle: b\nmoss_format: 2\n---\nbody\n"
    merged = docmerge.merge_document(base, edited, upgraded)
    assert merged.clean and document.parse(merged.text).meta == {"title": "b", "moss_format": 2}
    newer = "---\ntitle: a\nmoss_format: 3\n---\nbody\n"
    merged = docmerge.merge_document(upgraded, upgraded.replace("title: a", "title: c"), newer)
    assert merged.clean and document.parse(merged.text).meta == {"title": "c", "moss_format": 3}
    assert formats.merge_versions(None, None) is None and formats.merge_versions(2, None) == 2 and formats.merge_versions(2, 3) == 3


def test_the_format_versions_table_in_the_docs_names_every_kind_at_its_version() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    section = page.split("## Format versions", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    for spec in formats.KINDS.values():
        (row,) = [row for row in rows if f"`{spec.name}`" in row.split("|")[1]]
        assert row.split("|")[3].strip() == str(spec.current), spec.name


def test_kinds_current_when_unmarked_are_those_at_version_1_that_are_rewritten() -> None:
    """fs.modify skips the format table for these kinds when their bytes hold no marker."""
    from moss_files.foundation import fs

    assert fs.CURRENT_UNMARKED == {name for name, spec in formats.KINDS.items() if spec.current == 1 and spec.rewritable}
    assert fs._MARKER_BYTES == formats.MARKER.encode()


UNMARKED = [
    b"# Plan\n\n## Tasks\n\n- [ ] one\n",
    b"\xef\xbb\xbf# Plan\r\n\r\n- [x] done\r\n",
    b"---\ntitle: x\n---\n# Current\n",
    b"---\ntitle: [unclosed\n# Current\n",
    b"---\na: 1\n",
    b"# Memory\n\xe9 not utf-8\n",
    b"# Memory\n\x00 binary\n",
    b"",
    b"<!-- moss_form at: 2 -->\n# Plan\n",
]


@pytest.mark.parametrize("data", UNMARKED)
def test_an_unmarked_file_of_a_current_unmarked_kind_is_edited_as_the_format_table_would_have_it(tmp_path: Path, data: bytes) -> None:
    """The fast path of fs.upgraded equals the table's answer: the bytes as they are (an
    unreadable file is left for the edit to report, as the table's path leaves it)."""
    from moss_files.foundation import fs

    for kind in sorted(fs.CURRENT_UNMARKED):
        relpath = formats.KINDS[kind].places[0]
        snapshot = fs.Snapshot(tmp_path / Path(relpath).name, data, fs.digest_of(data))
        try:
            table = formats.upgrade_bytes(kind, data, formats.Facts(relpath), max_bytes=document.DEFAULT_MAX_BYTES)
        except InvalidDocument as err:
            assert err.code != "FORMAT_TOO_NEW"
            table = data
        assert fs.upgraded(snapshot, kind, relpath, None).data == table == data, kind
    marked = b"<!-- moss_format: 9 -->\n# Plan\n"  # the marker takes the table's path
    with pytest.raises(InvalidDocument) as caught:
        fs.upgraded(fs.Snapshot(tmp_path / "PLAN.md", marked, fs.digest_of(marked)), "plan", ".cstack/PLAN.md", None)
    assert caught.value.code == "FORMAT_TOO_NEW"

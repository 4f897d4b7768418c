"""The capsule core: lint, normalization, sections, file names, file and JSONL forms, import plans."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moss_files.capsules import model as core
from moss_files.capsules import records
from moss_files.capsules.model import Capsule
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument, MossError

FULL = """## Objective
Ship login.

## Current status
Half done.

## Decisions
- JWT

## Next actions
- tests

## Key locations
- src/auth.py

## Open questions
- none yet
"""


def make(**fields: object) -> Capsule:
    base: dict[str, object] = {
        "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "workspace": "default",
        "name": "auth",
        "text": FULL,
        "created_ms": 1_737_260_000_000,
        "updated_ms": 1_737_260_500_000,
    }
    base.update(fields)
    return Capsule(**base)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- lint


def test_lint_accepts_markdown_headers() -> None:
    assert core.lint(FULL, max_chars=12000).missing == ()


def test_lint_accepts_colon_lines() -> None:
    text = "Objective: a\nStatus: b\nDecisions: c\nNext steps: d\nFiles: e\nRisks: f\n"
    assert core.lint(text, max_chars=12000).missing == ()


def test_lint_accepts_top_level_json_keys() -> None:
    text = json.dumps({"goal": 1, "state": 2, "choices": 3, "todo": 4, "paths": 5, "unknowns": 6})
    assert core.lint(text, max_chars=12000).missing == ()


def test_nested_json_keys_do_not_count() -> None:
    text = json.dumps({"objective": 1, "more": {"status": 2}})
    assert "Current status" in core.lint(text, max_chars=12000).missing


@pytest.mark.parametrize(
    ("canonical", "synonym"),
    [(canonical, synonym) for canonical, synonyms in core.SECTIONS for synonym in synonyms],
)
def test_every_synonym_counts_in_every_form_and_case(canonical: str, synonym: str) -> None:
    for text in (f"## {synonym}\nx\n", f"# {synonym.upper()}\n", f"{synonym.title()}: x\n", json.dumps({synonym: 1})):
        assert canonical in core.sections_present(text), text


@pytest.mark.parametrize("level", range(1, 7))
def test_header_levels_one_to_six(level: int) -> None:
    assert core.sections_present("#" * level + " Objective\n") == {"Objective"}


def test_seven_hashes_is_not_a_header() -> None:
    assert core.sections_present("####### Objective\n") == set()


def test_missing_sections_reported_in_canonical_order() -> None:
    text = "## Objective\nx\n## Open questions\ny\n## Status\nz\n"
    assert core.lint(text, max_chars=12000).missing == ("Decisions", "Next actions", "Key locations")


def test_no_false_positives() -> None:
    text = (
        "We discussed the objective at length.\n"
        "- Status: fine\n"  # a list item, not a line starting with the name
        "## Objective and more\n"  # the header must be only the name
        "  Decisions: indented\n"
        "The next actions are unclear.\n"
    )
    assert core.sections_present(text) == set()


def test_headers_inside_fenced_code_do_not_count() -> None:
    text = "## Objective\nx\n```\n## Status\nStatus: y\n```\n~~~~\n## Decisions\n~~~~\n"
    assert core.sections_present(text) == {"Objective"}


def test_empty_text_misses_all_six() -> None:
    assert len(core.lint("", max_chars=12000).missing) == 6


def test_allow_thin_skips_the_section_check_but_not_the_size() -> None:
    assert core.lint("hello", max_chars=12000, allow_thin=True).missing == ()
    with pytest.raises(InvalidDocument) as caught:
        core.check_text("x" * 11, max_chars=10, allow_thin=True)
    assert caught.value.code == "CAPSULE_TOO_LARGE"
    assert caught.value.status == 413
    assert caught.value.details == {"max_chars": 10, "actual_chars": 11}


def test_too_thin_error_shape() -> None:
    with pytest.raises(InvalidDocument) as caught:
        core.check_text("## Objective\nx\n", max_chars=12000)
    err = caught.value
    assert (err.code, err.status, err.exit_code) == ("CAPSULE_TOO_THIN", 422, 4)
    assert err.details["missing"] == ["Current status", "Decisions", "Next actions", "Key locations", "Open questions"]


def test_size_counts_characters_not_bytes() -> None:
    text = "é" * 10  # 20 bytes of UTF-8
    assert core.count_chars(text) == 10
    core.check_text(text, max_chars=10, allow_thin=True)
    with pytest.raises(InvalidDocument):
        core.check_text("🙂" * 11, max_chars=10, allow_thin=True)


def test_zero_max_means_no_limit() -> None:
    assert not core.lint("x" * 100_000, max_chars=0, allow_thin=True).too_large


# --------------------------------------------------------------------------- normalization


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("StartupA", "startupa"), ("  My Project  ", "my project"), ("LOUD_NAME", "loud_name"), ("a \t\n b", "a b"), ("", "")],
)
def test_normalize(raw: str, norm: str) -> None:
    assert core.normalize(raw) == norm


def test_token_estimate_is_words_times_1_3_rounded_up() -> None:
    assert core.estimate_tokens("one two three") == 4
    assert core.estimate_tokens("") == 0
    assert core.estimate_tokens("a " * 10) == 13


# --------------------------------------------------------------------------- sections


def test_parse_sections_boundaries_and_custom_sections() -> None:
    text = "intro\n# Objective\nx\n## Design Reviews\n(none)\n### Files\nf\n"
    sections = core.parse_sections(text)
    assert [s.name for s in sections] == ["Objective", "Design Reviews", "Files"]
    assert [s.canonical for s in sections] == ["Objective", None, "Key locations"]
    assert text[sections[0].content_start : sections[0].content_end] == "x\n"
    assert sections[1].placeholder and not sections[0].placeholder
    assert sections[2].content_end == len(text)


@pytest.mark.parametrize("body", ["", "  \n", "(pending)", "(None)", "TBD", "n/a", "none", "Pending", "-", "(empty)", "(tbd)", "(n/a)"])
def test_placeholders(body: str) -> None:
    assert core.parse_sections(f"## A\n{body}\n## B\nx\n")[0].placeholder


def test_fenced_code_hides_headers_from_sections() -> None:
    text = "## A\n```python\n# not a header\n```\n## B\n~~~\n## hidden\n~~~\n"
    assert [s.name for s in core.parse_sections(text)] == ["A", "B"]


def test_unclosed_fence_hides_nothing() -> None:
    text = "## A\n```\n## B\n"
    assert [s.name for s in core.parse_sections(text)] == ["A", "B"]


def test_fence_closes_only_with_same_char_and_at_least_its_length() -> None:
    text = "````\n```\n## inside\n~~~~\n## still inside\n````\n## after\n"
    assert [s.name for s in core.parse_sections(text)] == ["after"]


def test_indented_fences() -> None:
    assert [s.name for s in core.parse_sections("   ```\n## in\n   ```\n## out\n")] == ["out"]
    # Four spaces make an indented code line, not a fence.
    assert [s.name for s in core.parse_sections("    ```\n## a\n")] == ["a"]


def test_find_section_synonyms_and_exact() -> None:
    sections = core.parse_sections("## Next steps\nx\n## Notes\ny\n")
    assert core.find_section(sections, "next actions").name == "Next steps"  # type: ignore[union-attr]
    assert core.find_section(sections, "NOTES").name == "Notes"  # type: ignore[union-attr]
    assert core.find_section(sections, "next actions", exact=True) is None
    assert core.find_section(sections, "next STEPS", exact=True).name == "Next steps"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "which", "expected"),
    [
        ("## A\nold\n\n## B\nx\n", 0, "## A\nold\n\nNEW\n\n## B\nx\n"),
        ("## A\n(none)\n\n## B\nx\n", 0, "## A\nNEW\n\n## B\nx\n"),
        ("## A\nx\n## B\n-\n## C\ny\n", 1, "## A\nx\n## B\nNEW\n## C\ny\n"),
        ("## A\nx\n## B\nlast\n", 1, "## A\nx\n## B\nlast\n\nNEW\n"),
        ("## A\nx\n## B\n", 1, "## A\nx\n## B\nNEW\n"),
        ("## A\n## B\n", 0, "## A\nNEW\n## B\n"),
        ("## A\nx\n## B", 1, "## A\nx\n## B\nNEW"),
    ],
)
def test_insert_into_section(text: str, which: int, expected: str) -> None:
    section = core.parse_sections(text)[which]
    assert core.insert_into_section(text, section, "NEW") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A placeholder written as a list item, as the README's template has it, is a placeholder.
        ("## Q\n- (none)\n\n## B\nx\n", "## Q\n- NEW\n\n## B\nx\n"),
        ("## Q\n* TBD\n## B\nx\n", "## Q\n- NEW\n## B\nx\n"),
        ("## Q\n-   n/a\n", "## Q\n- NEW\n"),
        # A list item after a list item continues the list: no blank line makes it a loose list.
        ("## Q\n- one\n\n## B\nx\n", "## Q\n- one\n- NEW\n\n## B\nx\n"),
        ("## Q\n- one\n  more of one\n", "## Q\n- one\n  more of one\n- NEW\n"),
        ("## Q\n1. one\n", "## Q\n1. one\n- NEW\n"),
        # Prose before the item, or an item after prose, still gets its blank line.
        ("## Q\nSome prose.\n", "## Q\nSome prose.\n\n- NEW\n"),
        # A bare `-` item with text of its own is no placeholder.
        ("## Q\n- none of these apply yet\n", "## Q\n- none of these apply yet\n- NEW\n"),
    ],
)
def test_appending_a_list_item_continues_the_list_and_replaces_a_listed_placeholder(text: str, expected: str) -> None:
    """Issue 27 item 13."""
    section = core.parse_sections(text)[0]
    assert core.insert_into_section(text, section, "- NEW") == expected


def test_appending_prose_after_a_list_keeps_the_blank_line() -> None:
    text = "## Q\n- one\n"
    assert core.insert_into_section(text, core.parse_sections(text)[0], "A paragraph.") == "## Q\n- one\n\nA paragraph.\n"


def test_sequential_appends_accumulate() -> None:
    text = "## Log\n(none)\n\n## End\nx\n"
    for entry in ("one", "two", "three"):
        text = core.insert_into_section(text, core.find_section(core.parse_sections(text), "log"), entry)  # type: ignore[arg-type]
    assert text == "## Log\none\n\ntwo\n\nthree\n\n## End\nx\n"


def test_select_sections_in_requested_order_skipping_missing_and_placeholders() -> None:
    text = "## Objective\nO\n## Status\n(none)\n## Decisions\nD\n"
    assert core.select_sections(text, ["decisions", "status", "key locations", "goal"]) == "## Decisions\nD\n\n## Objective\nO"
    assert core.select_sections('{"objective": 1}', ["objective"]) == ""


# --------------------------------------------------------------------------- file names


@given(st.text(min_size=1, max_size=80))
def test_encoded_names_are_safe_and_reversible(name: str) -> None:
    norm = core.normalize(name)
    if not norm:
        return
    encoded = core.encode_component(norm)
    assert "/" not in encoded and "\\" not in encoded and ".." not in encoded and "\0" not in encoded
    assert not encoded.startswith((".", "@", "~"))
    assert len(encoded) <= core.MAX_STEM
    if "~" not in encoded:
        assert core.decode_component(encoded) == norm


@given(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30))
def test_different_names_never_share_a_file_even_ignoring_case(a: str, b: str) -> None:
    na, nb = core.normalize(a), core.normalize(b)
    if na and nb and na != nb:
        assert core.slot_filename(na).lower() != core.slot_filename(nb).lower()


@given(st.sampled_from(sorted(core.WINDOWS_RESERVED)), st.sampled_from(["", " ", ".txt", "1", "-x", ".md"]), st.booleans())
def test_names_windows_reserves_never_become_file_names(reserved: str, suffix: str, upper: bool) -> None:
    norm = core.normalize((reserved.upper() if upper else reserved) + suffix)
    filename = core.slot_filename(norm)
    # Windows refuses a device name as a file's base name, whatever follows its first dot.
    assert filename.split(".", 1)[0].lower() not in core.WINDOWS_RESERVED
    assert core.workspace_dir(norm).split(".", 1)[0].lower() not in core.WINDOWS_RESERVED
    assert core.decode_component(filename[: -len(core.SUFFIX)]) == norm


def test_reserved_names_escape_one_letter_and_old_files_still_read() -> None:
    assert core.slot_filename("con") == "%63on.md" and core.slot_filename("com1") == "%63om1.md"
    assert core.slot_filename("console") == "console.md" and core.slot_filename("com10") == "com10.md"
    assert core.decode_component("con") == "con"  # a file named before the escape existed


def test_readable_encodings() -> None:
    assert core.encode_component("auth") == "auth"
    assert core.encode_component("my project") == "my+project"
    assert core.encode_component("../etc/passwd") == "%2E%2E%2Fetc%2Fpasswd"
    assert core.decode_component("Auth") is None  # uppercase letters are never produced


def test_long_names_end_in_a_hash() -> None:
    long_a, long_b = "x" * 300 + "a", "x" * 300 + "b"
    assert core.encode_component(long_a) != core.encode_component(long_b)
    assert len(core.slot_filename(long_a)) < 200


def test_capsule_relpath_layout() -> None:
    assert str(core.capsule_relpath(make(workspace="Startup A"))) == "startup+a/auth.md"
    assert str(core.capsule_relpath(make(name=None))) == "default/@01ARZ3NDEKTSV4RRFFQ69G5FAV.md"
    assert str(core.capsule_relpath(make(deleted_ms=1))) == "default/deleted/01ARZ3NDEKTSV4RRFFQ69G5FAV.md"


# --------------------------------------------------------------------------- file form


def parse_at(text: str, relpath: str, mtime_ms: int = 1_000) -> Capsule:
    return core.parse_capsule(document.parse(text), PurePosixPath(relpath), mtime_ms=mtime_ms)


def test_render_then_parse_round_trips() -> None:
    capsule = make(title="Auth: sessions #1", tags=("auth", "no"), source="codex", run_id="r1", phase="design", role="qa", workspace="StartupA")
    text = core.render_capsule(capsule)
    assert text.endswith(FULL)
    assert parse_at(text, "startupa/auth.md") == capsule


def test_body_is_kept_byte_for_byte() -> None:
    body = "---\nnot frontmatter\r\n\n  trailing spaces  \n\n\n"
    capsule = make(text=body)
    assert parse_at(core.render_capsule(capsule), "default/auth.md").text == body


def test_hand_written_capsule_without_frontmatter() -> None:
    parsed = parse_at(FULL, "default/auth.md", mtime_ms=5_000)
    assert (parsed.workspace, parsed.name, parsed.text) == ("default", "auth", FULL)
    assert parsed.created_ms == parsed.updated_ms == 5_000
    assert core.is_capsule_id(parsed.id)
    assert parsed.id == parse_at(FULL, "default/auth.md", mtime_ms=9_000).id  # stable


def test_unnamed_and_deleted_files_take_their_id_from_the_file_name() -> None:
    unnamed = parse_at("text", "default/@01ARZ3NDEKTSV4RRFFQ69G5FAV.md")
    assert unnamed.id == "01ARZ3NDEKTSV4RRFFQ69G5FAV" and unnamed.name is None
    deleted = parse_at("---\nname: auth\n---\ntext", "default/deleted/01ARZ3NDEKTSV4RRFFQ69G5FAV.md", mtime_ms=7_000)
    assert deleted.deleted_ms == 7_000 and deleted.name == "auth"


@pytest.mark.parametrize(
    ("text", "relpath", "line"),
    [
        ("---\nname: other\n---\nx", "default/auth.md", 2),  # name belongs in another slot
        ("---\nworkspace: other\n---\nx", "default/auth.md", 2),
        ("---\nid: nope\n---\nx", "default/auth.md", 2),
        ("---\ntitle: [a, b]\n---\nx", "default/auth.md", 2),
        ("---\na: 1\ncreated_at: yesterday\n---\nx", "default/auth.md", 3),
        ("---\ntags: {a: 1}\n---\nx", "default/auth.md", 2),
        ("---\nname: auth\n---\nx", "default/@01ARZ3NDEKTSV4RRFFQ69G5FAV.md", 2),
        ("---\nid: 01BX5ZZKBKACTAV9WEVGEMMVRZ\n---\nx", "default/@01ARZ3NDEKTSV4RRFFQ69G5FAV.md", 2),
        ("x", "Default/auth.md", None),
        ("x", "default/@bad.md", None),
        ("x", "default/sub/auth.md", None),
    ],
)
def test_files_that_disagree_with_their_place_are_refused_with_a_line(text: str, relpath: str, line: int | None) -> None:
    with pytest.raises(InvalidDocument) as caught:
        parse_at(text, relpath)
    assert caught.value.code == "SCHEMA_ERROR"
    assert caught.value.line == line


def test_hand_written_values_are_read_leniently() -> None:
    parsed = parse_at("---\nName: Auth\ntags: a, b\ncreated_at: 2026-01-19\nrun_id: 42\ntitle: no\n---\nx", "default/auth.md")
    assert parsed.name == "Auth" and parsed.tags == ("a", "b") and parsed.run_id == "42" and parsed.title == "no"
    assert parsed.created_ms == core.parse_time("2026-01-19T00:00:00Z")


def test_edit_keeps_unknown_keys_comments_and_adds_only_the_missing_id_and_the_version() -> None:
    text = "---\n# hand-made\nname: auth   # the handle\npriority: high\ncreated_at: 2026-01-19T10:00:00Z\nupdated_at: 2026-01-19T10:00:00Z\n---\nbody\n"
    parsed = parse_at(text, "default/auth.md")
    edited = core.edit_capsule(text, parsed)
    # The edit of a format-1 file writes it at format 2: the id it lacked, then the marker.
    assert edited == text.replace("---\nbody", f"id: {parsed.id}\nmoss_format: 2\n---\nbody")
    old_lines, new_lines = text.splitlines(), edited.splitlines()
    assert [line for line in new_lines if line not in old_lines] == [f"id: {parsed.id}", "moss_format: 2"]
    assert core.edit_capsule(edited, parse_at(edited, "default/auth.md")) == edited  # nothing to change: nothing changes


def test_edit_changes_only_changed_lines_and_the_body() -> None:
    capsule = make(tags=("a",))
    text = core.render_capsule(capsule).replace("name: auth\n", "name: auth\nowner: me  # keep\n")
    edited = core.edit_capsule(text, core.with_changes(capsule, title="New", text="new body\n", updated_ms=capsule.updated_ms + 1000))
    assert "owner: me  # keep\n" in edited and "title: New\n" in edited
    assert edited.endswith("---\nnew body\n")
    changed = set(edited.splitlines()) ^ set(text.splitlines())
    assert {line.split(":")[0] for line in changed} <= {"title", "updated_at", "new body", *FULL.splitlines()}


# --------------------------------------------------------------------------- JSONL


def test_export_record_field_order_and_header() -> None:
    record = core.capsule_to_record(make(tags=("auth",), title="T"))
    assert list(record) == [
        "id", "workspace_raw", "workspace_norm", "name_raw", "name_norm", "title", "capsule_text", "capsule_chars",
        "tokens_estimate", "tags", "source", "run_id", "phase", "role", "created_at", "updated_at", "deleted_at",
    ]  # fmt: skip
    assert record["created_at"] == 1_737_260_000 and record["deleted_at"] is None
    assert core.render_record(core.export_header(5)) == '{"_moss_export":true,"schema_version":"1.0","exported_at":5}'


def test_record_round_trip_recomputes_derived_fields() -> None:
    capsule = make(tags=("x",), source="codex")
    record = core.capsule_to_record(capsule)
    record.update(workspace_norm="LIES", name_norm="lies", capsule_chars=1, tokens_estimate=1)
    parsed = records.parse_record(json.dumps(record), now_ms=0)
    assert parsed == capsule
    assert parsed is not None and parsed.name_norm == "auth"


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("{not json", "PARSE_ERROR"),
        ("[1]", "PARSE_ERROR"),
        ('{"workspace_raw": "w", "capsule_text": "x"}', "INVALID_RECORD"),
        ('{"id": "../../x", "workspace_raw": "w", "capsule_text": "x"}', "INVALID_RECORD"),
        ('{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "capsule_text": "x"}', "INVALID_RECORD"),
        ('{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "workspace_raw": "w", "capsule_text": ""}', "INVALID_RECORD"),
        ('{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "workspace_raw": "w", "capsule_text": "x", "created_at": "soon"}', "INVALID_RECORD"),
        ('{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "workspace_raw": "w", "capsule_text": "x", "name_raw": "a\\nb"}', "INVALID_RECORD"),
    ],
)
def test_bad_records(line: str, code: str) -> None:
    with pytest.raises(records.RecordProblem) as caught:
        records.parse_record(line, now_ms=0)
    assert caught.value.code == code


def test_blank_orchestration_fields_become_null() -> None:
    line = json.dumps({"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "workspace_raw": "w", "capsule_text": "x", "run_id": " ", "phase": "", "role": None})
    parsed = records.parse_record(line, now_ms=0)
    assert parsed is not None and (parsed.run_id, parsed.phase, parsed.role) == (None, None, None)


# --------------------------------------------------------------------------- import planning

A = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
B = "01BX5ZZKBKACTAV9WEVGEMMVRZ"
C = "01CCCCCCCCCCCCCCCCCCCCCCCC"


def test_plan_error_mode_refuses_id_and_name_collisions() -> None:
    existing = [make(id=A, name="auth")]
    _, errors = records.plan_import(existing, [(2, make(id=A, name="x")), (3, make(id=B, name="AUTH"))], "error", lambda: C)
    assert [(e["line"], e["code"]) for e in errors] == [(2, "ID_COLLISION"), (3, "NAME_COLLISION")]


def test_plan_deleted_capsules_hold_ids_but_not_names() -> None:
    existing = [make(id=A, name="auth", deleted_ms=1)]
    actions, errors = records.plan_import(existing, [(2, make(id=B, name="auth"))], "error", lambda: C)
    assert not errors and actions[0].capsule.id == B


def test_plan_replace_by_id_by_name_and_ambiguous() -> None:
    existing = [make(id=A, name="auth"), make(id=B, name="other")]
    actions, errors = records.plan_import(existing, [(2, make(id=A, name="auth", title="new"))], "replace", lambda: C)
    assert not errors and actions[0].replaces == A
    actions, errors = records.plan_import(existing, [(2, make(id=C, name="Auth"))], "replace", lambda: C)
    assert not errors and actions[0].replaces == A and actions[0].capsule.id == A
    _, errors = records.plan_import(existing, [(2, make(id=A, name="other"))], "replace", lambda: C)
    assert errors[0]["code"] == "AMBIGUOUS_COLLISION"


def test_plan_rename_suffixes_names_and_renews_ids() -> None:
    existing = [make(id=A, name="auth"), make(id=B, name="auth-1")]
    actions, errors = records.plan_import(
        existing, [(2, make(id=A, name="Auth")), (3, make(id=C, name="auth"))], "rename", iter(["01DDDDDDDDDDDDDDDDDDDDDDDD"]).__next__
    )
    assert not errors
    assert [(a.capsule.id, a.capsule.name) for a in actions] == [("01DDDDDDDDDDDDDDDDDDDDDDDD", "auth-2"), (C, "auth-3")]


def test_plan_counts_collisions_inside_the_file() -> None:
    _, errors = records.plan_import([], [(2, make(id=A)), (3, make(id=B))], "error", lambda: C)
    assert [e["code"] for e in errors] == ["NAME_COLLISION"]


def test_errors_carry_registered_codes() -> None:
    for code in ("CAPSULE_TOO_LARGE", "CAPSULE_TOO_THIN", "COMPOSE_TOO_LARGE"):
        MossError("x", code=code)

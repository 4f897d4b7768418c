"""diff3 over lines (foundation.textmerge) and the marker scan (foundation.conflicts)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moss_files.foundation import conflicts
from moss_files.foundation.errors import InvalidDocument
from moss_files.foundation.textmerge import Hunk, merge_text

BASE = "".join(f"line {n}\n" for n in range(12))


def test_a_change_on_one_side_is_taken() -> None:
    ours = BASE.replace("line 3\n", "line three\n")
    assert merge_text(BASE, ours, BASE) == (ours, 0)
    assert merge_text(BASE, BASE, ours) == (ours, 0)


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    both = BASE.replace("line 3\n", "line three\n")
    assert merge_text(BASE, both, both) == (both, 0)


def test_changes_far_apart_both_land() -> None:
    ours = BASE.replace("line 1\n", "line one\n")
    theirs = BASE.replace("line 10\n", "line ten\n")
    merged, count = merge_text(BASE, ours, theirs)
    assert count == 0 and "line one\n" in merged and "line ten\n" in merged


def test_a_conflict_is_written_with_gits_diff3_markers() -> None:
    ours, theirs = BASE.replace("line 5\n", "ours\n"), BASE.replace("line 5\n", "theirs\n")
    merged, count = merge_text(BASE, ours, theirs)
    assert count == 1
    assert "<<<<<<< ours\nours\n||||||| base\nline 5\n=======\ntheirs\n>>>>>>> theirs\n" in merged
    assert conflicts.first_marker_line(merged) == 6


def test_a_settle_function_may_resolve_a_conflicted_hunk() -> None:
    ours, theirs = BASE + "a\n", BASE + "b\n"
    merged, count = merge_text(BASE, ours, theirs, settle=lambda hunk: (*hunk.ours, *hunk.theirs))
    assert (merged, count) == (BASE + "a\nb\n", 0)


def test_a_last_line_without_an_ending_still_gets_its_marker_on_a_new_line() -> None:
    merged, count = merge_text("x", "y", "z")
    assert count == 1 and merged.splitlines() == ["<<<<<<< ours", "y", "||||||| base", "x", "=======", "z", ">>>>>>> theirs"]


def git_merge_file(tmp_path: Path, base: str, ours: str, theirs: str) -> tuple[str, bool]:
    for name, text in (("o", base), ("a", ours), ("b", theirs)):
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        ["git", "merge-file", "-p", str(tmp_path / "a"), str(tmp_path / "o"), str(tmp_path / "b")], capture_output=True, text=True, check=False
    )
    assert done.returncode >= 0, done.stderr
    return done.stdout, done.returncode == 0


edit = st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.integers(0, 30), st.integers(0, 99))


def apply(lines: list[str], edits: list[tuple[str, int, int]]) -> str:
    out = list(lines)
    for kind, where, value in edits:
        at = min(where, len(out))
        if kind == "insert":
            out.insert(at, f"new {value}\n")
        elif out:
            at = min(at, len(out) - 1)
            if kind == "delete":
                del out[at]
            else:
                out[at] = f"changed {value}\n"
    return "".join(out)


@settings(max_examples=150)
@given(size=st.integers(0, 25), ours=st.lists(edit, max_size=3), theirs=st.lists(edit, max_size=3))
def test_agrees_with_git_merge_file(tmp_path_factory: pytest.TempPathFactory, size: int, ours: list, theirs: list) -> None:
    """Where git merges cleanly, so do we, to the same text; where git conflicts, so do we."""
    base_lines = [f"line {n}\n" for n in range(size)]
    base, mine, other = "".join(base_lines), apply(base_lines, ours), apply(base_lines, theirs)
    expected, clean = git_merge_file(tmp_path_factory.mktemp("merge"), base, mine, other)
    merged, count = merge_text(base, mine, other)
    assert (count == 0) == clean
    if clean:
        assert merged == expected


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a\n<<<<<<< ours\nb\n=======\nc\n>>>>>>> theirs\n", 2),
        ("a\n<<<<<<< HEAD\n", 2),
        ("a\n||||||| base\n", 2),
        ("a\nb\n>>>>>>> feature\n", 3),  # the opening marker deleted by hand
        ("x\r\n<<<<<<<\r\n", 2),
        ("Title\n=======\n\ntext\n", None),  # a setext heading, not a marker
        ("```\n<<<<<<< in a code example\n```\n", None),
        ("~~~~\n>>>>>>> quoted\n~~~~\n<<<<<<< real\n", 4),
        ("<<<<<<<<< eight is not git's\n", None),
        ("> quote\n>> deeper\n", None),
    ],
)
def test_markers_are_found_at_line_starts_outside_fenced_code(text: str, line: int | None) -> None:
    assert conflicts.first_marker_line(text) == line


def test_the_conflict_error_names_file_line_and_what_to_do() -> None:
    with pytest.raises(InvalidDocument) as caught:
        conflicts.check_no_conflict("ok\n<<<<<<< ours\n", "PLAN.md")
    err = caught.value
    assert (err.code, err.path, err.line, err.exit_code) == ("MERGE_CONFLICT", "PLAN.md", 2, 4)
    assert "moss merge setup" in (err.hint or "")


def test_hunks_report_which_runs_conflicted() -> None:
    from moss_files.foundation.textmerge import merge_lines

    hunks = merge_lines(["a\n", "b\n"], ["a\n", "x\n"], ["a\n", "y\n"])
    assert [hunk.conflicted for hunk in hunks] == [False, True] and hunks[1] == Hunk(("b\n",), ("x\n",), ("y\n",), None)

"""Golden files: every dialect example and every template reads as expected and renders back
to the same bytes."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from cstack import current, memory, plan

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cstack"
TEMPLATES = ("CURRENT.md", "PLAN.md", "MEMORY.md")


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def _parsed(name: str, text: str) -> dict:
    if name.startswith("plan"):
        parsed = plan.parse_plan(text)
        return {"tasks": [plan.task_to_dict(t) for t in parsed.tasks], "stats": plan.plan_stats(parsed), "warnings": list(parsed.warnings)}
    if name.startswith("current"):
        return current.current_to_dict(current.parse_current(text))
    return memory.memory_to_dict(memory.parse_memory(text))


def _render(name: str, text: str) -> str:
    if name.startswith("plan"):
        return plan.render_plan(plan.parse_plan(text))
    if name.startswith("current"):
        return current.render_current(current.parse_current(text))
    return memory.render_memory(memory.parse_memory(text))


FIXTURE_FILES = sorted(FIXTURES.glob("*.md"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_reads_as_expected(path: Path) -> None:
    expected = json.loads((path.with_name(path.stem + ".expected.json")).read_text(encoding="utf-8"))
    assert _parsed(path.name, _read(path)) == expected


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_round_trips_byte_for_byte(path: Path) -> None:
    text = _read(path)
    assert _render(path.name, text) == text


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_crlf_and_missing_final_newline_round_trip(path: Path) -> None:
    text = _read(path)
    for variant in (text.replace("\n", "\r\n"), text.rstrip("\n")):
        assert _render(path.name, variant) == variant
        assert _parsed(path.name, variant) == _parsed(path.name, text)


def test_canonical_task_lines_render_from_their_fields() -> None:
    # Every task line of the reference's V2 example is in canonical layout, so rendering the
    # parsed fields gives the line back: the parser loses nothing a line can say.
    for name in ("plan_v2_example.md", "plan_v3_deps.md"):
        for task in plan.parse_plan(_read(FIXTURES / name)).tasks:
            if task.text.startswith("- "):
                assert plan.render_task_line(task) == task.text


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_round_trips_and_reads_empty(name: str) -> None:
    text = resources.files("moss_files.templates").joinpath("cstack", name).read_text(encoding="utf-8")
    kind = name.split(".")[0].lower()
    assert _render(kind, text) == text
    parsed = _parsed(kind, text)
    if kind == "plan":
        assert parsed["tasks"] == [] and parsed["warnings"] == []
    elif kind == "current":
        assert parsed["dialect"] == "template"
        assert (parsed["task"], parsed["status"], parsed["focus"]) == (None, None, None)
        assert parsed["next_steps"] == [] and parsed["blockers"] == []
        assert parsed["progress"] == {"total": 0, "completed": 0}
    else:
        assert all(entries == [] for entries in parsed.values())


def test_template_has_the_reference_structure() -> None:
    """Our templates are ours in wording but keep the v1.6 headings, legend and marker lines."""
    root = resources.files("moss_files.templates").joinpath("cstack")
    reference = {
        "CURRENT.md": _read(FIXTURES / "current_template_v16.md"),
        "PLAN.md": _read(FIXTURES / "plan_template_v16.md"),
        "MEMORY.md": _read(FIXTURES / "memory_template_v16.md"),
    }
    for name, ref_text in reference.items():
        ours = root.joinpath(name).read_text(encoding="utf-8")
        headings = [line for line in ours.splitlines() if line.startswith("#")]
        assert headings == [line for line in ref_text.splitlines() if line.startswith("#")]
    plan_text = root.joinpath("PLAN.md").read_text(encoding="utf-8")
    assert "`- [ ]` Pending | `- [>]` In Progress | `- [x]` Completed | `- [!]` Blocked | `- [~]` Closed" in plan_text
    current_text = root.joinpath("CURRENT.md").read_text(encoding="utf-8")
    assert "**Task:** _none_ | **Status:** -- | **Started:** --" in current_text
    assert "> **Last Updated:** -- | **Active Task:** _none_" in current_text


def test_current_md_of_a_newer_format_is_refused_and_a_bad_marker_reported() -> None:
    from moss_files.foundation import formats
    from moss_files.foundation.errors import InvalidDocument

    assert current.FORMAT_MARKER == formats.MARKER  # parse_current checks the format only when the marker is there
    for text, code in (("<!-- moss_format: 7 -->\n# Current\n", "FORMAT_TOO_NEW"), ("---\nstatus: working\n---\n<!-- moss_format: x -->\n", "SCHEMA_ERROR")):
        with pytest.raises(InvalidDocument) as caught:
            current.parse_current(text, ".cstack/CURRENT.md")
        assert caught.value.code == code
    assert current.parse_current("<!-- moss_format: 1 -->\n## Now\n\n- Round once.\n").focus == "- Round once."


def test_plan_md_of_a_newer_format_is_refused_and_a_bad_marker_reported() -> None:
    from cstack import plan
    from moss_files.foundation import formats
    from moss_files.foundation.errors import InvalidDocument

    assert plan.FORMAT_MARKER == formats.MARKER  # parse_plan checks the format only when the marker is there
    for text, code in (("<!-- moss_format: 7 -->\n# Plan\n", "FORMAT_TOO_NEW"), ("---\nowner: me\n---\n<!-- moss_format: x -->\n", "SCHEMA_ERROR")):
        with pytest.raises(InvalidDocument) as caught:
            plan.parse_plan(text, ".cstack/PLAN.md")
        assert caught.value.code == code
    assert [task.title for task in plan.parse_plan("<!-- moss_format: 2 -->\n## Tasks\n\n- [ ] Round once\n").tasks] == ["Round once"]

"""Every template parses, reads back to identical bytes, and an empty edit leaves it alone."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from moss_files.foundation import document

TEMPLATES = Path(__file__).resolve().parent.parent.parent / "templates"
MARKDOWN = sorted(TEMPLATES.rglob("*.md"))


def test_there_are_templates_for_every_part() -> None:
    parts = {path.relative_to(TEMPLATES).parts[0] for path in MARKDOWN}
    assert {"cstack", "needlecast", "moss", "agents"} <= parts


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_markdown_template_round_trips_byte_for_byte(path: Path) -> None:
    data = path.read_bytes()
    doc = document.parse_bytes(data, path)
    assert document.encode(doc.text, doc.bom) == data
    assert document.edit_frontmatter(doc.text, {}) == doc.text
    if doc.has_frontmatter:
        assert document.render(doc.meta, doc.body).encode() == data


@pytest.mark.parametrize("path", sorted(TEMPLATES.rglob("*.toml")), ids=lambda p: p.name)
def test_toml_templates_parse(path: Path) -> None:
    tomllib.loads(path.read_text(encoding="utf-8"))

"""The repository summary agents keep for each other (LoopFlow's repo context, set with
`loop_update_summary`, shown by `loop_orient`) as one markdown file, `.moss/summary.md`.

Core layer: pure functions over documents (the time and session come in). The file:

    ---
    updated: 2026-01-22T10:43:53Z
    updated_by_session: SES-20260122-7f3k9q2m
    ---
    ## Summary
    What the repository is and where it stands.

    ## Folder structure
    src/ ... annotated tree

    ## Suggested actions
    What the next session should do.

An update replaces the text under the headings it names and leaves every other line (and
any section a person added) alone; the frontmatter records when and from which session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import moss_files.loopflow.sessions as sessions
from moss_files.foundation import document, formats
from moss_files.foundation.document import Document
from moss_files.foundation.errors import InvalidRequest
from moss_files.foundation.fields import FieldReader

PATH = Path(".moss") / "summary.md"
SECTIONS = {"repo_summary": "Summary", "folder_structure": "Folder structure", "suggested_actions": "Suggested actions"}


@dataclass(frozen=True, slots=True)
class RepoSummary:
    """What the summary file holds (None for a section that is missing or empty)."""

    repo_summary: str | None = None
    folder_structure: str | None = None
    suggested_actions: str | None = None
    updated: str | None = None
    updated_by_session: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.repo_summary or self.folder_structure or self.suggested_actions)


def parse_summary(doc: Document, path: Path | str | None = None) -> RepoSummary:
    """The summary a document holds. Raises InvalidDocument SCHEMA_ERROR for a wrong shape."""
    formats.check_document("summary", doc, path)
    reader = FieldReader(doc, path)
    found = sessions.read_sections(doc.body, SECTIONS.values())
    values = {name: found.get(title) for name, title in SECTIONS.items()}
    return RepoSummary(
        **{name: value.strip() if value and value.strip() else None for name, value in values.items()},
        updated=reader.text("updated"),
        updated_by_session=reader.text("updated_by_session"),
    )


def check_values(values: Mapping[str, str | None]) -> dict[str, str]:
    """The sections an update sets. Raises InvalidRequest when it sets none."""
    given = {name: value for name, value in values.items() if value is not None}
    if not given:
        raise InvalidRequest("no updates provided: give at least one of repo_summary, folder_structure, suggested_actions", details={"fields": list(SECTIONS)})
    return given


def new_text(values: Mapping[str, str], *, now: str, session: str | None) -> str:
    """The text of a new summary file."""
    meta: dict[str, Any] = {"updated": now}
    if session:
        meta["updated_by_session"] = session
    body = sessions.set_sections("", {SECTIONS[name]: values[name] for name in SECTIONS if name in values})
    return document.render(formats.stamp("summary", meta), body.lstrip("\n"))


def edited_text(text: str, values: Mapping[str, str], *, now: str, session: str | None, path: Path | str | None = None) -> str:
    """An existing summary file's text with the given sections replaced and the stamp moved."""
    changes: dict[str, Any] = {"updated": now, "updated_by_session": session if session else document.DELETE}
    stamped = document.edit_frontmatter(text, changes, path)
    return sessions.body_with_sections(stamped, {SECTIONS[name]: value for name, value in values.items()}, path)


def summary_to_dict(found: RepoSummary, *, path: str) -> dict[str, Any]:
    """LoopFlow's `repo_summary` shape: `{description, folder_structure, suggested_actions,
    updated_at, updated_by_session, path}`."""
    return {
        "description": found.repo_summary,
        "folder_structure": found.folder_structure,
        "suggested_actions": found.suggested_actions,
        "updated_at": found.updated,
        "updated_by_session": found.updated_by_session,
        "path": path,
    }

"""How `moss search` reads the board: one index row per epic and per task. Core layer (pure).

`extract` and `record` are registered in `sources.SOURCES` (as the `board` source); it owns the files directly in
`.moss/board/epics/` and `.moss/board/tasks/` (the board's other files stay with the catch-all
document source). Filters a query can use on a task: `kind:task`, `status:working`,
`priority:high`, `agent:<worker holding it>`, `link:<epic, dependency or parent id>`. A file
there that is not a valid epic or task is still indexed, as a plain document, with a warning
naming what is wrong; one that is not even a readable document is reported as an error.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from moss_files.foundation import summaries
from moss_files.foundation.errors import MossError
from moss_files.index.model import Entry, Extracted, FileInput, Problem
from moss_files.index.readers import document_extract, document_record

BOARD = ".moss/board"


def _item(file: FileInput) -> tuple[str, Any]:
    """("epic" | "task", the parsed item). Raises MossError for a file that is not one."""
    from moss_files.board import files
    from moss_files.foundation import document

    folder = PurePosixPath(file.relpath).parent.name
    doc = document.parse_bytes(file.data, file.relpath)
    if folder == "epics":
        return "epic", files.parse_epic(doc, file.relpath, fallback_id=file.stem)
    return "task", files.parse_task(doc, file.relpath, fallback_id=file.stem)


def extract(file: FileInput) -> Extracted:
    """The row of an epic or task file; a plain document's row (and a warning) for a file that
    is not a valid one."""
    try:
        kind, item = _item(file)
    except MossError as err:
        plain = document_extract(file)
        why = Problem(err.code, f"not a valid board item ({err.message}); indexed as a plain document", err.line, "warning")
        return Extracted(plain.entries, (*plain.problems, why))
    summary = summaries.summarize(item.description) if item.description else item.title
    if kind == "epic":
        body = "\n\n".join(filter(None, (item.description, item.architecture_notes, *item.epic_rails)))
        entry = Entry(
            kind="epic",
            id=item.id,
            title=item.title,
            summary=summary or item.title,
            body=body,
            line=1,
            status=item.status,
            date=item.created,
            updated=item.updated,
            extra=" ".join(item.epic_rails),
        )
        return Extracted((entry,))
    steps = [step.description for step in item.plan]
    body = "\n".join(filter(None, (item.description, *item.definition_of_done, *steps, item.reopen_reason or "")))
    links = tuple(dict.fromkeys(filter(None, (item.epic, *item.depends_on, item.parent))))
    facets = (("priority", item.priority.lower()), ("agent", item.assigned_worker or ""))
    entry = Entry(
        kind="task",
        id=item.id,
        title=item.title,
        summary=summary or item.title,
        body=body,
        line=1,
        status=item.status,
        date=item.created,
        updated=item.updated,
        links=links,
        facets=facets,
        extra=" ".join(filter(None, (item.test_file, *item.task_rails))),
    )
    return Extracted((entry,))


def record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    """The full record `moss expand` shows for an epic or task row."""
    from moss_files.board import shapes

    try:
        kind, item = _item(file)
    except MossError:
        return document_record(file, anchor)
    return shapes.epic_to_dict(item, path=file.relpath) if kind == "epic" else shapes.task_to_dict(item, path=file.relpath)

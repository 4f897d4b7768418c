"""Board items made from other systems' tasks: their files (the board's own renderers, plus the
provenance keys), the status and priority words of each system, and the epic that holds tasks
of a system without epics. Core layer (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moss_files.board import files as board_files
from moss_files.board.model import Epic, Proposal, Task, Team, Worker, normalize_priority
from moss_files.migrate.ledger import Fate
from moss_files.migrate.model import Candidate, Where, derived_id, with_provenance

BOARD = ".moss/board"
FOLDERS = {"epic": "epics", "task": "tasks", "worker": "workers", "team": "teams", "proposal": "proposals"}
PREFIXES = {"epic": "EPIC", "task": "TASK", "team": "TEAM", "proposal": "PROP"}
_RENDER: dict[str, Any] = {
    "epic": board_files.render_epic,
    "task": board_files.render_task,
    "worker": board_files.render_worker,
    "team": board_files.render_team,
    "proposal": board_files.render_proposal,
}
BoardItem = Epic | Task | Worker | Team | Proposal


def item_path(kind: str, item_id: str) -> str:
    """Where the board keeps an item, relative to the workspace root."""
    return f"{BOARD}/{FOLDERS[kind]}/{item_id}.md"


def new_board_id(kind: str, scope: str, old_id: str, created: str | None, today: str) -> str:
    """The board id an imported item gets (see `model.derived_id`)."""
    day = created[:10].replace("-", "") if created and len(created) >= 10 else today
    return derived_id(PREFIXES[kind], scope, kind, old_id, day)


def candidate(
    kind: str,
    item: BoardItem,
    old_id: str,
    where: Where,
    imported_from: str,
    fields: Mapping[str, Any] | None = None,
    note: str | None = None,
    *,
    fates: tuple[Fate, ...] = (),
    made: bool = False,
) -> Candidate:
    """The new file of one board item, with `imported_from`, `source_id` and the source's
    leftover fields; `fates` account for each source field (see `ledger`), `made` marks an
    item made here to hold others (not a source item)."""
    leftovers = _clean(fields or {})

    def render() -> bytes:
        return with_provenance(_RENDER[kind](item), imported_from, old_id, leftovers).encode("utf-8")

    return Candidate(kind, old_id, item.id, item_path(kind, item.id), render, where, note, fates, made)


def _clean(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Leftover source fields worth keeping: empty values (null, "", [], {}) carry nothing."""
    return {key: value for key, value in fields.items() if value not in (None, "", [], {})}


def priority(value: Any, default: str = "MEDIUM") -> tuple[str, str | None]:
    """A board priority from the words and numbers systems use (`high`, `P1`, Beads' 0–4), and
    a note when the value was not understood."""
    if value is None or value == "":
        return default, None
    if isinstance(value, int) and not isinstance(value, bool):
        return ("CRITICAL", "HIGH", "MEDIUM", "LOW", "LOW")[min(max(value, 0), 4)], None
    found = normalize_priority(str(value))
    if found is None:
        return default, f"priority {value!r} read as {default}"
    return found, None


def imported_epic(scope: str, system: str, title: str, created: str | None, today: str) -> Epic:
    """The epic that holds a system's tasks when the system has no epics of its own."""
    epic_id = new_board_id("epic", scope, f"{system}:tasks", created, today)
    return Epic(id=epic_id, title=title, description=f"Tasks imported from {system}.", status="ACTIVE", created=created, updated=created)


def join_sections(parts: Mapping[str, str | None], lead: str | None = None) -> str:
    """A task description: `lead`, then each non-empty part under its own `##` heading."""
    chunks = [lead.strip()] if lead and lead.strip() else []
    for heading, text in parts.items():
        if text and text.strip():
            chunks.append(f"## {heading}\n\n{text.strip()}")
    return "\n\n".join(chunks)

"""Beads' issues (`.beads/issues.jsonl`, or `beads.jsonl` of older versions) planned as board
epics and tasks. Core layer (pure).

One JSON object a line: `id` (hash ids such as `bd-a1b2`, children `bd-a1b2.1`), `title`,
`description`, `design`, `acceptance_criteria`, `notes`, `status` (open, in_progress, blocked,
deferred, closed; `tombstone` for a deletion), `priority` 0–4, `issue_type` (epic, task, bug,
feature, chore, …), `assignee`, `labels`, `dependencies` (`{issue_id, depends_on_id, type}`:
`blocks`, `parent-child`, `related`, `discovered-from`, …), `comments`, times. Epics become
epics; a `parent-child` link to an epic puts a task in it, one to a task makes it the parent;
`blocks` links become dependencies; the rest of the record is kept under `source_fields`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from moss_files.board.model import Epic, Task
from moss_files.migrate import tasks as board_items
from moss_files.migrate.model import SKIP, Candidate, Item, Where, iso_time, source_error

SYSTEM = "beads"
_TASK_STATUS = {
    "open": "BACKLOG",
    "in_progress": "WORKING",
    "blocked": "BACKLOG",
    "deferred": "BACKLOG",
    "closed": "DONE",
    "pinned": "BACKLOG",
    "hooked": "WORKING",
}
_EPIC_STATUS = {"open": "PLANNED", "in_progress": "ACTIVE", "blocked": "ACTIVE", "deferred": "PLANNED", "closed": "COMPLETED"}
_MAPPED = {
    "id",
    "title",
    "description",
    "design",
    "notes",
    "acceptance_criteria",
    "status",
    "priority",
    "issue_type",
    "created_at",
    "updated_at",
    "closed_at",
    "dependencies",
    "_type",
}


def _text(record: Mapping[str, Any], key: str, where: Where) -> str | None:
    value = record.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise source_error(f"{key} must be text", Where(where.file, where.line, None), field=key)
    return str(value)


def plan(
    records: Sequence[tuple[Where, Any]],
    *,
    scope: str,
    imported: Mapping[tuple[str, str], str],
    include_deleted: bool,
    today: str,
) -> tuple[list[Candidate], list[Item], list[str]]:
    """Candidates for every issue, items skipped (tombstones, records that are not issues) and
    notes. Raises SOURCE_INVALID naming the line of a record without an id or title."""
    imported_from = f"{SYSTEM}:{scope}" if scope != SYSTEM else SYSTEM
    notes: list[str] = []
    skipped: list[Item] = []
    issues: list[tuple[Where, dict[str, Any]]] = []
    for where, record in records:
        if not isinstance(record, dict):
            raise source_error("a line must be a JSON object", where)
        kind = record.get("_type", "issue")
        if kind != "issue":
            skipped.append(Item(str(kind), str(record.get("id") or where), where, SKIP, reason=f"a {kind} record, not an issue; the board has no such kind"))
            continue
        if not _text(record, "id", where):
            raise source_error("the issue has no id", where)
        if record.get("status") == "tombstone" and not include_deleted:
            skipped.append(Item("task", str(record["id"]), where, SKIP, reason="deleted in Beads (a tombstone; --include-deleted brings it as ARCHIVED)"))
            continue
        if not _text(record, "title", where):
            raise source_error("the issue has no title", where)
        issues.append((where, record))

    def is_epic(record: Mapping[str, Any]) -> bool:
        kind = record.get("issue_type") or record.get("original_type")
        return kind == "epic"

    by_id = {str(record["id"]): record for _where, record in issues}
    new_ids: dict[tuple[str, str], str] = {key: path.rsplit("/", 1)[-1].removesuffix(".md") for key, path in imported.items()}
    for _where, record in issues:
        kind = "epic" if is_epic(record) else "task"
        old = str(record["id"])
        new_ids.setdefault((kind, old), board_items.new_board_id(kind, scope, old, iso_time(record.get("created_at")), today))

    def links(record: Mapping[str, Any], where: Where) -> list[dict[str, Any]]:
        value = record.get("dependencies") or []
        if not isinstance(value, list) or not all(isinstance(dep, dict) for dep in value):
            raise source_error("dependencies must be a list of objects", where, field="dependencies")
        return [dep for dep in value if str(dep.get("issue_id", record["id"])) == str(record["id"])]

    candidates: list[Candidate] = []
    fallback: Epic | None = None
    for where, record in issues:
        old = str(record["id"])
        status_word = str(record.get("status") or "open")
        created = iso_time(record.get("created_at"))
        updated = iso_time(record.get("updated_at")) or created
        leftovers = {key: value for key, value in record.items() if key not in _MAPPED}
        deps = links(record, where)
        other_links = [dep for dep in deps if dep.get("type") not in ("blocks", "parent-child")]
        if other_links:
            leftovers["links"] = other_links
        if status_word == "tombstone":
            leftovers["status"] = "tombstone"
        body = board_items.join_sections(
            {"Design": _text(record, "design", where), "Notes": _text(record, "notes", where)},
            _text(record, "description", where),
        )
        if is_epic(record):
            epic = Epic(
                id=new_ids[("epic", old)],
                title=" ".join(str(record["title"]).split()),
                description=body,
                status="ARCHIVED" if status_word == "tombstone" else _EPIC_STATUS.get(status_word, "PLANNED"),
                created=created,
                updated=updated,
            )
            candidates.append(board_items.candidate("epic", epic, old, where, imported_from, leftovers))
            continue
        epic_id: str | None = None
        parent: str | None = None
        depends: list[str] = []
        for dep in deps:
            target = str(dep.get("depends_on_id", ""))
            if dep.get("type") == "parent-child":
                if ("epic", target) in new_ids:
                    epic_id = new_ids[("epic", target)]
                elif ("task", target) in new_ids:
                    parent = new_ids[("task", target)]
                else:
                    notes.append(f"{where}: parent {target} is not in the source; kept under source_fields")
                    leftovers.setdefault("links", []).append(dep)
            elif dep.get("type") == "blocks":
                if ("task", target) in new_ids:
                    depends.append(new_ids[("task", target)])
                else:
                    notes.append(f"{where}: depends on {target}, which is not a task in the source; kept as written")
                    depends.append(target)
        if epic_id is None and parent is None and "." in old:
            # Hierarchical ids name their parent: bd-a3f8.1 is a child of bd-a3f8.
            head = old.rsplit(".", 1)[0]
            if head in by_id:
                if is_epic(by_id[head]):
                    epic_id = new_ids[("epic", head)]
                else:
                    parent = new_ids[("task", head)]
        if epic_id is None:
            if fallback is None:
                fallback = board_items.imported_epic(scope, "Beads", f"Beads issues{f' ({scope})' if scope != SYSTEM else ''}", None, today)
                fallback = Epic(
                    id=new_ids.get(("epic", f"{SYSTEM}:tasks"), fallback.id), title=fallback.title, description=fallback.description, status="ACTIVE"
                )
            epic_id = fallback.id
        status = "ARCHIVED" if status_word == "tombstone" else _TASK_STATUS.get(status_word, "BACKLOG")
        note = None
        if status_word not in ("open", "in_progress", "closed"):
            note = f"status {status_word} read as {status}"
            leftovers["status"] = status_word
        rank, priority_note = board_items.priority(record.get("priority"))
        criteria = [
            line.strip().removeprefix("- [ ] ").removeprefix("- [x] ").removeprefix("- ").strip()
            for line in (_text(record, "acceptance_criteria", where) or "").split("\n")
        ]
        task = Task(
            id=new_ids[("task", old)],
            epic=epic_id,
            title=" ".join(str(record["title"]).split()),
            description=body,
            status=status,
            priority=rank,
            depends_on=tuple(dict.fromkeys(depends)),
            parent=parent,
            definition_of_done=tuple(item for item in criteria if item),
            created=created,
            updated=updated,
            completed=iso_time(record.get("closed_at")) if status == "DONE" else None,
        )
        joined = "; ".join(part for part in (note, priority_note) if part) or None
        candidates.append(board_items.candidate("task", task, old, where, imported_from, leftovers, joined))
    if fallback is not None:
        candidates.append(board_items.candidate("epic", fallback, f"{SYSTEM}:tasks", issues[0][0], imported_from))
    return candidates, skipped, notes

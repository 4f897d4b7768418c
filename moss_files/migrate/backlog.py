"""Backlog.md's task files (`backlog/tasks/`, `drafts/`, `completed/`, `archive/tasks/`) planned
as board tasks. Core layer (pure).

A Backlog.md task is a markdown file named `back-42 - Title.md` with YAML frontmatter (`id`,
`title`, `status`, `assignee`, `labels`, `dependencies`, `parent_task_id`, `priority`,
`created_date`, …) and body sections, newer files fencing them with machine markers
(`<!-- SECTION:DESCRIPTION:BEGIN -->`, `<!-- AC:BEGIN -->` with `- [x] #1 …` items). The
description and the other prose sections become the task's body, acceptance criteria and the
definition of done its checklist; milestones become epics; labels, assignees, ordinals and the
checked state of each criterion are kept under `source_fields`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from moss_files.board.model import Epic, Task
from moss_files.foundation import document
from moss_files.migrate import tasks as board_items
from moss_files.migrate.model import Candidate, Where, iso_time, source_error

SYSTEM = "backlog"
FOLDERS = {"tasks": None, "drafts": "BACKLOG", "completed": "DONE", "archive/tasks": "ARCHIVED"}
_MAPPED = {"id", "title", "status", "dependencies", "parent_task_id", "parent", "priority", "created_date", "updated_date", "milestone"}
_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*$")
_MARKER = re.compile(r"^\s*<!--\s*(SECTION:[A-Z_]+:(BEGIN|END)|AC:(BEGIN|END)|DOD:(BEGIN|END))\s*-->\s*$")
_CHECK = re.compile(r"^\s*[-*]\s+\[([ xX])\]\s+(?:#(\d+)\s+)?(.*\S)\s*$")


@dataclass(frozen=True, slots=True)
class TaskFile:
    """One task file as read: where it is, its text, and the folder it was found in."""

    where: Where
    text: str
    folder: str  # tasks | drafts | completed | archive/tasks


def status_of(value: str | None, folder: str, statuses: Sequence[str]) -> tuple[str, str | None]:
    """The board status of a Backlog.md status word (its folder decides for completed and
    archived files), and a note when the word had to be guessed."""
    forced = FOLDERS.get(folder)
    if forced and forced != "BACKLOG":
        return forced, None
    word = (value or (statuses[0] if statuses else "To Do")).strip()
    folded = word.casefold()
    if folded in ("to do", "todo", "open", "new", "backlog"):
        return "BACKLOG", None
    if folded in ("in progress", "doing", "wip", "in-progress"):
        return "WORKING", None
    if folded in ("done", "complete", "completed", "closed"):
        return "DONE", None
    if "review" in folded:
        return "REVIEW", f"status {word!r} read as REVIEW"
    if statuses and folded == statuses[-1].casefold():
        return "DONE", f"status {word!r} (the last configured status) read as DONE"
    return "BACKLOG", f"status {word!r} read as BACKLOG"


def sections(body: str) -> tuple[dict[str, str], list[tuple[bool, str]], list[tuple[bool, str]]]:
    """The body's `##` sections (markers removed), its acceptance criteria and its definition
    of done as (checked, text) pairs."""
    found: dict[str, list[str]] = {}
    order: list[str] = []
    current = ""
    for line in body.split("\n"):
        heading = _HEADING.match(line)
        if heading:
            current = heading.group(1).strip()
            if current not in found:
                found[current] = []
                order.append(current)
            continue
        if _MARKER.match(line):
            continue
        found.setdefault(current, []).append(line)
    texts = {name: "\n".join(found[name]).strip() for name in ([""] if "" in found else []) + order}
    criteria = _checks(texts.pop("Acceptance Criteria", ""))
    done = _checks(texts.pop("Definition of Done", ""))
    return {name: text for name, text in texts.items()}, criteria, done


def _checks(text: str) -> list[tuple[bool, str]]:
    items = []
    for line in text.split("\n"):
        match = _CHECK.match(line)
        if match:
            items.append((match.group(1) != " ", match.group(3)))
        elif line.strip().startswith(("- ", "* ")):
            items.append((False, line.strip()[2:].strip()))
    return items


def plan(
    files: Sequence[TaskFile],
    *,
    scope: str,
    project: str | None,
    statuses: Sequence[str],
    imported: Mapping[tuple[str, str], str],
    today: str,
) -> tuple[list[Candidate], list[str]]:
    """Candidates for every task file (and an epic per milestone, or one for the project).

    Raises InvalidDocument with the file and line of frontmatter Backlog.md's own parser would
    choke on (an unquoted `: ` in a title, an unclosed fence), and SOURCE_INVALID for a file
    without an id or title: one such file stops the whole source.
    """
    imported_from = f"{SYSTEM}:{scope}" if scope != SYSTEM else SYSTEM
    notes: list[str] = []
    parsed: list[tuple[TaskFile, dict[str, Any], str]] = []
    for task_file in files:
        doc = document.parse(task_file.text, task_file.where.file)
        meta = doc.meta
        old = meta.get("id")
        if not isinstance(old, str | int) or not str(old).strip():
            raise source_error("the task has no id in its frontmatter", Where(task_file.where.file, 1))
        if not isinstance(meta.get("title"), str | int) or not str(meta["title"]).strip():
            raise source_error("the task has no title in its frontmatter", Where(task_file.where.file, 1))
        parsed.append((task_file, meta, doc.body))
    new_ids: dict[tuple[str, str], str] = {key: path.rsplit("/", 1)[-1].removesuffix(".md") for key, path in imported.items()}
    for _file, meta, _body in parsed:
        old = _key(meta["id"])
        new_ids.setdefault(("task", old), board_items.new_board_id("task", scope, old, iso_time(meta.get("created_date")), today))

    epics: dict[str, Epic] = {}
    candidates: list[Candidate] = []
    # An epic is as old as its oldest task, so every clone derives the same id for it.
    first: dict[str, str] = {}
    for _file, meta, _body in parsed:
        key = f"milestone:{_str(meta.get('milestone'))}" if _str(meta.get("milestone")) else f"{SYSTEM}:tasks"
        stamp = iso_time(meta.get("created_date"))
        if stamp and (key not in first or stamp < first[key]):
            first[key] = stamp

    def epic_for(milestone: str | None, where: Where) -> str:
        key = f"milestone:{milestone}" if milestone else f"{SYSTEM}:tasks"
        if key not in epics:
            title = f"Milestone {milestone}" if milestone else f"Backlog.md: {project or 'tasks'}"
            epic = board_items.imported_epic(scope, key, title, first.get(key), today)
            description = f"Tasks of the Backlog.md milestone {milestone}." if milestone else epic.description
            epic = Epic(
                id=new_ids.get(("epic", key), epic.id), title=title, description=description, status="ACTIVE", created=epic.created, updated=epic.created
            )
            epics[key] = epic
            candidates.append(board_items.candidate("epic", epic, key, where, imported_from))
            new_ids[("epic", key)] = epic.id
        return new_ids[("epic", key)]

    def ref(old: Any, where: Where) -> str:
        found = new_ids.get(("task", _key(old)))
        if found is None:
            notes.append(f"{where}: refers to task {old}, which is not in the source; kept as written")
            return str(old)
        return found

    for task_file, meta, body in parsed:
        old = _key(meta["id"])
        where = task_file.where
        status, status_note = status_of(_str(meta.get("status")), task_file.folder, statuses)
        rank, priority_note = board_items.priority(meta.get("priority"))
        prose, criteria, done = sections(body)
        description = prose.pop("Description", "") or prose.pop("", "")
        lead = prose.pop("", "") if description else ""
        parts = {name: text for name, text in prose.items() if text}
        if lead:
            parts = {"Notes": lead, **parts}
        created = iso_time(meta.get("created_date"))
        updated = iso_time(meta.get("updated_date")) or created
        milestone = _str(meta.get("milestone"))
        leftovers = {key: value for key, value in meta.items() if key not in _MAPPED}
        if task_file.folder != "tasks":
            leftovers["folder"] = task_file.folder
        if _str(meta.get("status")) and status_note:
            leftovers["status"] = meta.get("status")
        checked = [f"AC #{n}" for n, (ok, _t) in enumerate(criteria, 1) if ok] + [f"DoD #{n}" for n, (ok, _t) in enumerate(done, 1) if ok]
        if checked:
            leftovers["checked"] = checked
        parent = meta.get("parent_task_id") or meta.get("parent")
        task = Task(
            id=new_ids[("task", old)],
            epic=epic_for(milestone, where),
            title=" ".join(str(meta["title"]).split()),
            description=board_items.join_sections(parts, description),
            status=status,
            priority=rank,
            order=meta["ordinal"] if isinstance(meta.get("ordinal"), int | float) and not isinstance(meta.get("ordinal"), bool) else 0,
            depends_on=tuple(ref(dep, where) for dep in _list(meta.get("dependencies"))),
            parent=ref(parent, where) if parent else None,
            definition_of_done=tuple(text for _ok, text in criteria + done),
            created=created,
            updated=updated,
            completed=updated if status == "DONE" else None,
        )
        note = "; ".join(part for part in (status_note, priority_note) if part) or None
        candidates.append(board_items.candidate("task", task, old, where, imported_from, leftovers, note))
    return candidates, notes


def _key(value: Any) -> str:
    """Backlog.md compares ids without case (`BACK-1` and `back-1` are one task)."""
    return str(value).strip().upper()


def _str(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).strip() else None


def _list(value: Any) -> list[Any]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [item for item in value if str(item).strip()]
    return [part.strip() for part in str(value).split(",") if part.strip()]


def file_name_id(name: str) -> str | None:
    """The id a task file's name starts with (`back-42 - Title.md` -> `back-42`)."""
    match = re.match(r"^([A-Za-z]+-\d+(?:\.\d+)*)\b", name)
    return match.group(1) if match else None

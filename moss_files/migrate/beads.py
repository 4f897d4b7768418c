"""Beads' issues (`.beads/issues.jsonl`, or `beads.jsonl` of older versions) planned as board
epics, tasks and comments, every field accounted. Core layer (pure).

One JSON object a line, read as `bd import` reads it: `id` (hash ids such as `bd-a1b2`,
children `bd-a1b2.1`), `title`, `description`, `design`, `acceptance_criteria`, `notes`,
`status` (open, in_progress, blocked, deferred, closed, pinned, hooked; `tombstone` for a
deletion; absent: open), `priority` 0–4 (absent: 0, as Beads reads it), `issue_type` (epic,
task, bug, feature, chore, event, …; absent: task), `assignee`, `labels`, `dependencies`
(`{issue_id, depends_on_id, type, created_at, created_by, metadata}`), `comments`, times, and
whatever else a version of Beads wrote (kept verbatim).

Where each field goes (the ledger, `docs/migrate.md` lists it in full):
- an epic becomes an epic; every other type a task whose `type` is the issue type;
- `parent-child` links: the first to an epic puts the task in it, the first to a task makes it
  the parent (a task without an epic parent is in its parent's epic); further parents, and
  every link of an epic, are kept verbatim;
- `blocks` links become `depends_on`, an epic's new id included (the board counts a
  dependency on an epic as met once the epic is COMPLETED); a link to an issue Beads does not
  wait on (not in the file, deleted, pinned) is kept verbatim instead, as Beads treats it as
  met; every other link type is kept verbatim;
- a task's comments go to its board comments; an epic's are kept verbatim;
- statuses and priorities on another scale are mapped to the nearest and the source's value
  is kept beside it (`blocked` -> BACKLOG, priority 4 -> LOW).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from moss_files.board.model import Epic, Task
from moss_files.migrate import tasks as board_items
from moss_files.migrate.ledger import Account, base_field
from moss_files.migrate.model import SKIP, Candidate, Comment, Item, TrackerPlan, Where, derived_id, iso_time, source_error

SYSTEM = "beads"
_TASK_STATUS = {
    "open": "BACKLOG",
    "in_progress": "WORKING",
    "closed": "DONE",
    "blocked": "BACKLOG",
    "deferred": "BACKLOG",
    "pinned": "BACKLOG",
    "hooked": "WORKING",
    "tombstone": "ARCHIVED",
}
_EPIC_STATUS = {
    "open": "PLANNED",
    "in_progress": "ACTIVE",
    "closed": "COMPLETED",
    "blocked": "ACTIVE",
    "deferred": "PLANNED",
    "pinned": "PLANNED",
    "hooked": "ACTIVE",
    "tombstone": "ARCHIVED",
}
_SAME_STATUS = {"open", "in_progress", "closed"}  # the statuses the board has a word for
# The statuses Beads waits on in a `blocks` link (blocked_cache.go), and closed: a link to an
# issue in any other state (pinned, deleted) never blocks there.
_BLOCKING = {"open", "in_progress", "blocked", "deferred", "hooked"}
_PRIORITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW")
_TEXTS = ("description", "design", "notes", "acceptance_criteria")
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # a comment record is measured in this form; made once


def _text(record: Mapping[str, Any], key: str, where: Where) -> str | None:
    value = record.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        # Beads reads these as Go strings: a line with another type fails its whole import.
        raise source_error(f"{key} must be text", Where(where.file, where.line, None), field=key)
    return value


def _is_epic(record: Mapping[str, Any]) -> bool:
    kind = record.get("issue_type") or "task"
    return kind == "epic" or (record.get("status") == "tombstone" and record.get("original_type") == "epic")


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the first pass keeps of an issue for the links to it: whether it is an epic, and
    its status."""

    is_epic: bool
    status: str


def plan(
    records: Iterable[tuple[Where, Any]],
    *,
    scope: str,
    imported: Mapping[tuple[str, str], str],
    include_deleted: bool,
    today: str,
    max_comment_bytes: int | None = None,
) -> TrackerPlan:
    """Candidates for every issue, items skipped (tombstones, records that are not issues),
    the comments of each task and notes. Raises SOURCE_INVALID naming the line of a record
    whose text field is not text (Beads refuses such a file as a whole).

    `records` is gone through twice (`sources.JsonLines` parses its lines again), so that a
    hundred thousand issues are never all held as objects: the first pass checks every record
    and keeps a few facts of each issue; the candidates come from the second, one at a time, as
    `TrackerPlan.later` is consumed (each task's comments join `comments` meanwhile).
    """
    imported_from = f"{SYSTEM}:{scope}" if scope != SYSTEM else SYSTEM
    result = TrackerPlan()
    wanted: set[int] = set()  # the positions in `records` of the issues to bring
    first: Where | None = None
    facts: dict[str, _Facts] = {}  # by old id: the last record of an id counts, as when Beads reads it
    task_parents: dict[str, list[str]] = {}  # a task's parent-child targets, in order
    deleted: set[str] = set()
    new_ids: dict[tuple[str, str], str] = {key: path.rsplit("/", 1)[-1].removesuffix(".md") for key, path in imported.items()}
    for position, (where, record) in enumerate(records):
        if not isinstance(record, dict):
            result.skipped.append(Item("record", f"line {where.line}", where, SKIP, reason="not a JSON object, so not an issue", loss=True))
            continue
        kind = record.get("_type", "issue")
        old = record.get("id")
        if kind != "issue":
            result.skipped.append(
                Item(str(kind), str(old or f"line {where.line}"), where, SKIP, reason=f"a {kind} record, not an issue; the board has no such kind", loss=True)
            )
            continue
        if not isinstance(old, str) or not old.strip():
            result.skipped.append(Item("task", f"line {where.line}", where, SKIP, reason="the record has no id, which Beads requires", loss=True))
            continue
        if record.get("status") == "tombstone" and not include_deleted:
            reason = "deleted in Beads (a tombstone, which Beads no longer lists; --include-deleted brings it as ARCHIVED)"
            result.skipped.append(Item("epic" if _is_epic(record) else "task", old, where, SKIP, reason=reason))
            deleted.add(old)
            continue
        if not isinstance(record.get("title"), str) or not record["title"].strip():
            result.skipped.append(Item("task", old, where, SKIP, reason="the issue has no title, which Beads requires", loss=True))
            continue
        for key in _TEXTS:
            _text(record, key, where)
        wanted.add(position)
        first = first or where
        is_epic = _is_epic(record)
        facts[old] = _Facts(is_epic, str(record.get("status") or "open"))
        if not is_epic:
            task_parents[old] = [str(dep.get("depends_on_id", "")) for dep in _links(record) if dep.get("type") == "parent-child"]
        kind = "epic" if is_epic else "task"
        if (kind, old) not in new_ids:  # the first record of an id names its file
            new_ids[(kind, old)] = board_items.new_board_id(kind, scope, old, iso_time(record.get("created_at")), today)

    known = _Known(wanted, first, facts, new_ids, deleted)
    known.place(task_parents)
    result.later = _second_pass(records, known, result, scope, imported_from, today, max_comment_bytes)
    return result


@dataclass(slots=True)
class _Known:
    """What the first pass learnt that the second needs: the positions of the issues to bring,
    where the first one is, the facts of each id (its last record's, as Beads ends up reading
    it), the new id of each (kind, old id) (its first record's), the ids deleted, and each
    task's (first epic parent, first task parent) by old id."""

    wanted: set[int]
    first: Where | None
    facts: dict[str, _Facts]
    new_ids: dict[tuple[str, str], str]
    deleted: set[str]
    placement: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def target_of(self, old: str) -> tuple[str, str] | None:
        """(kind, new id) of an issue this file brings, or None."""
        found = self.facts.get(old)
        if found is None:
            return None
        kind = "epic" if found.is_epic else "task"
        return kind, self.new_ids[(kind, old)]

    def place(self, task_parents: Mapping[str, list[str]]) -> None:
        """Each task's place from its parent-child targets, in order: the first that is an
        epic here, and the first that is a task here."""
        for old, targets in task_parents.items():
            epic_parent = task_parent = None
            for target in targets:
                found = self.target_of(target)
                if found is None:
                    continue
                if found[0] == "epic" and epic_parent is None:
                    epic_parent = target
                elif found[0] == "task" and task_parent is None:
                    task_parent = target
            self.placement[old] = (epic_parent, task_parent)

    def epic_of(self, old: str) -> str | None:
        """The epic a task is in: its epic parent, else its task parent's (up the chain)."""
        seen: set[str] = set()
        current: str | None = old
        while current is not None and current not in seen:
            seen.add(current)
            epic_parent, task_parent = self.placement.get(current, (None, None))
            if epic_parent is not None:
                return self.new_ids[("epic", epic_parent)]
            current = task_parent
        return None


def _second_pass(
    records: Iterable[tuple[Where, Any]],
    known: _Known,
    result: TrackerPlan,
    scope: str,
    imported_from: str,
    today: str,
    max_comment_bytes: int | None,
) -> Iterator[Candidate]:
    """The candidate of each wanted record, one at a time (see `plan`), then the epic made to
    hold tasks that have none."""
    fallback: Epic | None = None
    for position, (where, record) in enumerate(records):
        if position not in known.wanted:
            continue
        old = str(record["id"])
        account = Account()
        leftovers: dict[str, Any] = {}
        is_epic = _is_epic(record)
        account.mapped("id", "source_id", old)
        title = " ".join(str(record["title"]).split())
        if title != record["title"]:
            account.mapped("title", "title", record["title"], changed="white space made single spaces; the source's title is kept")
            leftovers["title"] = record["title"]
        else:
            account.mapped("title", "title", title)
        body = _body(record, where, account, is_epic)
        status_word = str(record["status"]) if isinstance(record.get("status"), str) and record["status"] else "open"
        table = _EPIC_STATUS if is_epic else _TASK_STATUS
        status = table.get(status_word, "PLANNED" if is_epic else "BACKLOG")
        if status_word in _SAME_STATUS and "status" in record:
            account.mapped("status", "status", status_word)
        elif "status" not in record:
            account.mapped("status", "status", reason="absent: Beads reads it as open")
        else:
            account.mapped("status", "status", status_word, changed=f"{status_word} -> {status}; the source's status is kept")
            leftovers["status"] = record["status"]
        kind_word = record.get("issue_type")
        if is_epic:
            account.mapped("issue_type", "the item is an epic", kind_word or record.get("original_type"))
        elif kind_word in (None, ""):
            account.mapped("issue_type", "type", reason="absent: Beads reads it as task")
        else:
            account.mapped("issue_type", "type", kind_word)
        times = {key: iso_time(record.get(key)) for key in ("created_at", "updated_at")}
        created = times["created_at"]
        updated = times["updated_at"] or created
        for key, home in (("created_at", "created"), ("updated_at", "updated")):
            if record.get(key) not in (None, ""):
                if times[key] is None:
                    account.kept(key, record[key], reason="not a time")
                    leftovers[key] = record[key]
                else:
                    account.mapped(key, home, record[key])
        completed = iso_time(record.get("closed_at")) if status == "DONE" else None
        if "closed_at" in record and record["closed_at"] not in (None, ""):
            if completed is not None:
                account.mapped("closed_at", "completed", record["closed_at"])
            else:
                account.kept("closed_at", record["closed_at"], reason="the board keeps a completion time on DONE tasks only")
                leftovers["closed_at"] = record["closed_at"]
        if "_type" in record:
            account.mapped("_type", "the record's kind", record["_type"])
        priority, priority_note = "MEDIUM", None
        if not is_epic:
            priority, priority_note = _priority(record, account)
            if priority_note:
                leftovers["priority"] = record.get("priority")
        elif "priority" in record:
            account.kept("priority", record["priority"], reason="the board's epics have no priority")
            leftovers["priority"] = record["priority"]

        links = _links(record)
        epic_parent, task_parent = (None, None) if is_epic else known.placement.get(old, (None, None))
        depends: list[str] = []
        for dep in record.get("dependencies") or []:
            dep_type = str(dep.get("type") or "blocks")
            name = f"dependencies[{dep_type}]"
            target = str(dep.get("depends_on_id", ""))
            if dep not in links:
                account.kept(name, dep, home="source_fields.dependencies", reason="a link of another issue")
                continue
            found = known.target_of(target)
            if is_epic:
                account.kept(name, target, home="source_fields.dependencies", reason="the board's epics have no parents or dependencies")
            elif dep_type == "parent-child":
                if found is None:
                    account.kept(name, target, home="source_fields.dependencies", reason=_missing(target, known.deleted))
                elif target == epic_parent:
                    account.mapped(name, "epic", target)
                elif target == task_parent:
                    account.mapped(name, "parent", target)
                else:
                    account.kept(
                        name, target, home="source_fields.dependencies", reason="a board task has one epic and one parent; the first of each is mapped"
                    )
            elif dep_type == "blocks":
                target_status = known.facts[target].status if found is not None else None
                if found is None:
                    account.kept(name, target, home="source_fields.dependencies", reason=_missing(target, known.deleted) + "; Beads does not wait on it")
                elif target_status not in _BLOCKING and target_status != "closed":
                    account.kept(name, target, home="source_fields.dependencies", reason=f"the target is {target_status}, which Beads does not wait on")
                else:
                    depends.append(found[1])
                    account.mapped(name, "depends_on (an epic: met once COMPLETED)" if found[0] == "epic" else "depends_on", target)
            else:
                account.kept(name, target, home="source_fields.dependencies", reason=f"the board has no {dep_type} links")
        if record.get("dependencies"):
            leftovers["dependencies"] = record["dependencies"]
            account.kept(
                "dependencies (records)",
                f"{len(record['dependencies'])} link(s)",
                home="source_fields.dependencies",
                reason="each link as Beads wrote it, with its time and author",
            )
        elif "dependencies" in record:
            account.empty("dependencies")
        if "parent" in record:
            # Dolt-era exports name the parent beside the parent-child link.
            if record["parent"] in (epic_parent, task_parent):
                account.mapped("parent", "epic" if record["parent"] == epic_parent else "parent", record["parent"])
            else:
                account.kept("parent", record["parent"])
                leftovers["parent"] = record["parent"]

        comments: list[Comment] = []
        raw_comments = record.get("comments")
        if raw_comments not in (None, []):
            if is_epic or not isinstance(raw_comments, list):
                why = "the board keeps comments on tasks only" if is_epic else "not a list of comments"
                account.kept("comments", raw_comments, reason=why)
                leftovers["comments"] = raw_comments
            else:
                task_id = known.new_ids[("task", old)]
                kept_comments = []
                defaulted: set[str] = set()
                for index, raw in enumerate(raw_comments, start=1):
                    made, filled = _comment(raw, index, old, task_id, scope, today)
                    size = len(_COMPACT_JSON.encode(made).encode("utf-8")) if made else 0
                    if made is None or (max_comment_bytes is not None and size > max_comment_bytes):
                        kept_comments.append(raw)
                    else:
                        comments.append(Comment(task_id, made))
                        defaulted.update(filled)
                if comments:
                    changed = f"no {' or '.join(sorted(defaulted))} in the source: filled in" if defaulted else None
                    account.mapped("comments", "comments", f"{len(comments)} comment(s)", changed=changed)
                if kept_comments:
                    account.kept("comments", kept_comments, reason="a comment without text, or longer than a board comment line may be")
                    leftovers["comments"] = kept_comments

        accounted = {base_field(fate.field) for fate in account.fates}
        for key, value in record.items():
            if key in accounted:
                continue
            if value in (None, "", [], {}):
                account.empty(key)
                continue
            account.kept(key, value)
            leftovers[key] = value

        if is_epic:
            epic = Epic(
                id=known.new_ids[("epic", old)],
                title=title,
                description=body,
                status=status,
                created=created,
                updated=updated,
            )
            yield board_items.candidate("epic", epic, old, where, imported_from, leftovers, fates=account.done())
            continue
        epic_id = known.epic_of(old)
        if epic_id is None:
            if fallback is None:
                holder = board_items.imported_epic(scope, "Beads", f"Beads issues{f' ({scope})' if scope != SYSTEM else ''}", None, today)
                fallback = Epic(
                    id=known.new_ids.get(("epic", f"{SYSTEM}:tasks"), holder.id), title=holder.title, description=holder.description, status="ACTIVE"
                )
            epic_id = fallback.id
        criteria = _criteria(record.get("acceptance_criteria"))
        task = Task(
            id=known.new_ids[("task", old)],
            epic=epic_id,
            title=title,
            description=body,
            status=status,
            priority=priority,
            depends_on=tuple(dict.fromkeys(depends)),
            parent=known.new_ids[("task", task_parent)] if task_parent else None,
            definition_of_done=criteria or (),
            created=created,
            updated=updated,
            completed=completed,
            type=str(kind_word) if kind_word else "task",
        )
        if comments:
            result.comments[task.id] = comments
        yield board_items.candidate("task", task, old, where, imported_from, leftovers, fates=account.done())
    if fallback is not None and known.first is not None:
        yield board_items.candidate("epic", fallback, f"{SYSTEM}:tasks", Where(known.first.file), imported_from, made=True)


def _links(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's own links (those whose `issue_id` is the record's, or that name none)."""
    value = record.get("dependencies") or []
    if not isinstance(value, list):
        return []
    return [dep for dep in value if isinstance(dep, dict) and str(dep.get("issue_id", record["id"])) == str(record["id"])]


def _missing(target: str, deleted: set[str]) -> str:
    return "the target is deleted in Beads (a tombstone)" if target in deleted else "the target is not in the file"


def _priority(record: Mapping[str, Any], account: Account) -> tuple[str, str | None]:
    """The board priority of a record, accounted. Beads' 0–4 (P0 critical): 4 is LOW here."""
    if "priority" not in record:
        account.mapped("priority", "priority", reason="absent: Beads reads it as 0 (critical)")
        return "CRITICAL", None
    value = record["priority"]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        account.mapped("priority", "priority", value)
        return _PRIORITIES[value], None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 4:
        note = f"{value} -> LOW; the source's priority is kept"
        account.mapped("priority", "priority", value, changed=note)
        return "LOW", note
    found, _unknown = board_items.priority(value)
    change = f"{value!r} -> {found}; the source's priority is kept"
    account.mapped("priority", "priority", value, changed=change)
    return found, change


def _body(record: Mapping[str, Any], where: Where, account: Account, is_epic: bool) -> str:
    """The description: Beads' description, then its design, notes and (when they are not a
    checklist) acceptance criteria, each under its heading."""
    sections: dict[str, str | None] = {}
    texts = {key: _text(record, key, where) for key in _TEXTS}
    for key in _TEXTS:
        if key in record and texts[key] is None:
            account.empty(key)
    lead = texts["description"]
    if lead is not None:
        account.mapped("description", "description", lead)
    for key, heading in (("design", "Design"), ("notes", "Notes")):
        text = texts[key]
        if text is not None:
            sections[heading] = text
            account.mapped(key, f"description (## {heading})", text)
    criteria = texts["acceptance_criteria"]
    if criteria is not None:
        items = None if is_epic else _criteria(criteria)
        if items is not None:
            account.mapped("acceptance_criteria", "definition_of_done", criteria)
            if any(_checked(line) for line in criteria.split("\n")):
                sections["Acceptance Criteria"] = criteria
                account.mapped("acceptance_criteria", "description (## Acceptance Criteria)", reason="checked items: the list is kept as written")
        else:
            sections["Acceptance Criteria"] = criteria
            account.mapped("acceptance_criteria", "description (## Acceptance Criteria)", criteria)
    return board_items.join_sections(sections, lead)


def _criteria(text: Any) -> tuple[str, ...] | None:
    """Acceptance criteria as definition-of-done items when every line that is not blank is a
    list item (`- `, `* `, `- [ ] `, `1. `); None when the text is prose."""
    if not isinstance(text, str) or not text.strip():
        return None
    items = []
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped:
            continue
        for prefix in ("- [ ] ", "- [x] ", "- [X] ", "* [ ] ", "* [x] ", "- ", "* "):
            if stripped.startswith(prefix):
                items.append(stripped[len(prefix) :].strip())
                break
        else:
            head, dot, rest = stripped.partition(". ")
            if not (dot and head.isdigit()):
                return None
            items.append(rest.strip())
    return tuple(item for item in items if item) or None


def _checked(line: str) -> bool:
    return line.strip().startswith(("- [x]", "- [X]", "* [x]", "* [X]"))


def _comment(raw: Any, index: int, task_old: str, task_id: str, scope: str, today: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The board comment record of a Beads comment (`{id, issue_id, author, text,
    created_at}`), or None when it has no text, and what had to be filled in (an author, a
    time). Its id derives from the task's and the comment's, so every clone makes the same
    one; the comment's own id and any other key are kept in the record as they were."""
    if not isinstance(raw, dict) or not isinstance(raw.get("text"), str) or not raw["text"].strip():
        return None, []
    source_id = raw.get("id", index)
    stamp = iso_time(raw.get("created_at"))
    day = stamp[:10].replace("-", "") if stamp else today
    filled = [name for name, present in (("author", bool(raw.get("author"))), ("time", stamp is not None)) if not present]
    record: dict[str, Any] = {
        "id": derived_id("COMMENT", scope, "comment", f"{task_old}#{source_id}", day),
        "taskId": task_id,
        "author": str(raw.get("author") or "beads"),
        "content": raw["text"],
        "timestamp": stamp or f"{day[:4]}-{day[4:6]}-{day[6:]}T00:00:00Z",
        "sourceId": source_id,
    }
    extra = {key: value for key, value in raw.items() if key not in ("id", "issue_id", "author", "text", "created_at")}
    if "created_at" in raw and stamp is None:
        extra["created_at"] = raw["created_at"]
    if extra:
        record["sourceFields"] = extra
    return record, filled

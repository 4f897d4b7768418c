"""Backlog.md's folders (`backlog/tasks/`, `drafts/`, `completed/`, `archive/tasks/`,
`archive/drafts/`, `milestones/`, `archive/milestones/`) planned as board tasks, epics and
comments, every field accounted. Core layer (pure).

Backlog.md reads, in each folder, only the files its glob names (`<task_prefix>-*.md` for
tasks, `draft-*.md` for drafts, `m-*.md` for milestones; the prefix is config.yml's
`task_prefix`, `task` by default): the others (a folder's `readme.md`) are skipped here too,
and said so. A file Backlog.md could not parse is skipped with the reason (Backlog.md leaves
it out of its lists too); the rest are imported. How each part of a task is read is
`backlog_format`'s; where it goes:
- frontmatter: `id` -> `source_id`, `title`, `status` (its folder decides for completed and
  archived files; a word the board lacks is kept beside), `priority`, `type`, `milestone` ->
  the milestone's epic (a task without one: the project's epic), `dependencies` ->
  `depends_on`, `parent_task_id` -> `parent`, `ordinal` -> `order`, `created_date`,
  `updated_date`, `completed_date`; every other key (assignee, labels, references, …) kept;
- body: the description, then the text no section holds, then the implementation plan,
  notes and final summary under their headings; acceptance criteria and definition of done
  -> `definition_of_done` (their checked marks kept; a section with prose beside its items
  also goes to the description as written); comments -> the task's board comments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from moss_files.board.model import Epic, Task
from moss_files.foundation import document
from moss_files.foundation.errors import MossError
from moss_files.migrate import backlog_format as fmt
from moss_files.migrate import tasks as board_items
from moss_files.migrate.ledger import Account, base_field
from moss_files.migrate.model import SKIP, Candidate, Comment, Item, TrackerPlan, Where, derived_id, iso_time

SYSTEM = "backlog"
# Each folder Backlog.md reads: the status its files have here when the folder decides it.
TASK_FOLDERS = {"tasks": None, "drafts": None, "completed": "DONE", "archive/tasks": "ARCHIVED", "archive/drafts": "ARCHIVED"}
MILESTONE_FOLDERS = {"milestones": "ACTIVE", "archive/milestones": "ARCHIVED"}
FOLDERS = (*TASK_FOLDERS, *MILESTONE_FOLDERS)
DEFAULT_STATUSES = ("To Do", "In Progress", "Done")
_SAME_STATUS = {"to do": "BACKLOG", "in progress": "WORKING", "done": "DONE"}
_SAME_PRIORITY = {"high": "HIGH", "medium": "MEDIUM", "low": "LOW"}
_SECTION_HOMES = {"plan": "Implementation Plan", "notes": "Implementation Notes", "summary": "Final Summary"}
_BODY = "## "  # body parts are named by their heading in the ledger


@dataclass(frozen=True, slots=True)
class Config:
    """What of `backlog/config.yml` the import uses."""

    project_name: str | None = None
    task_prefix: str = "task"
    statuses: tuple[str, ...] = DEFAULT_STATUSES


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a folder Backlog.md reads: its name, and its text once read (None for
    an entry Backlog.md does not read, or one that could not be read: `problem` says why)."""

    where: Where
    folder: str
    name: str
    is_file: bool = True
    text: str | None = None
    problem: str | None = None


def parse_config(text: str) -> tuple[Config, list[str]]:
    """The config, read line by line as Backlog.md's parseConfig reads it (a `key: value`
    per line, quotes dropped; `statuses` a list), and notes on what could not be read."""
    values: dict[str, str] = {}
    notes: list[str] = []
    statuses: tuple[str, ...] | None = None
    lines = text.replace("\r\n", "\n").split("\n")
    for index, line in enumerate(lines):
        if not line.strip() or line.strip().startswith("#") or line[:1].isspace() or ":" not in line:
            continue
        key, _colon, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "statuses":
            listed = _config_list(value, lines[index + 1 :])
            if listed is None:
                notes.append("config.yml: statuses could not be read; Backlog.md's defaults (To Do, In Progress, Done) are used")
            else:
                statuses = listed
        elif key in ("project_name", "task_prefix"):
            values[key] = re.sub(r"['\"]", "", value)
    prefix = values.get("task_prefix") or "task"
    return Config(values.get("project_name") or None, prefix.lower(), statuses or DEFAULT_STATUSES), notes


def _config_list(value: str, following: list[str]) -> tuple[str, ...] | None:
    if value.startswith("["):
        try:
            loaded = document.parse(f"---\nv: {value}\n---\n").meta.get("v")
        except MossError:
            return None
        return tuple(str(item) for item in loaded) if isinstance(loaded, list) else None
    if value:
        return None
    items = []
    for line in following:
        match = re.match(r"^\s+-\s+(.*)$", line)
        if not match:
            break
        items.append(match.group(1).strip().strip("'\""))
    return tuple(items) or None


def pattern_of(folder: str, config: Config) -> str:
    """The glob Backlog.md lists a folder's files with."""
    if folder in ("drafts", "archive/drafts"):
        return "draft-*.md"
    if folder in MILESTONE_FOLDERS:
        return "m-*.md"
    return f"{config.task_prefix}-*.md"


def reads(folder: str, name: str, config: Config) -> bool:
    """Whether Backlog.md reads the file `name` of `folder` (its glob is case-sensitive)."""
    return fnmatchcase(name, pattern_of(folder, config))


@dataclass(slots=True)
class _Parsed:
    """One Backlog.md file read: its entry, frontmatter, body and identity."""

    entry: Entry
    meta: dict[str, Any]
    body: str
    key: str  # the item's identity (`source_id`): its id, in capitals
    twin: str | None = None  # the task that holds the same id, when this one is told apart by its file name


def plan(
    entries: Sequence[Entry],
    *,
    config: Config,
    scope: str,
    imported: Mapping[tuple[str, str], str],
    today: str,
    max_comment_bytes: int | None = None,
) -> TrackerPlan:
    """Candidates for every task and milestone file Backlog.md reads (and an epic for each
    milestone value that names no milestone file, and one for tasks without a milestone),
    every other entry skipped with the reason."""
    imported_from = f"{SYSTEM}:{scope}" if scope != SYSTEM else SYSTEM
    result = TrackerPlan()
    tasks: list[_Parsed] = []
    milestones: list[_Parsed] = []
    for entry in entries:
        kind = "milestone" if entry.folder in MILESTONE_FOLDERS else "task"
        if not entry.is_file:
            reason = f"a folder: Backlog.md reads only the files directly in {entry.folder}/"
            result.skipped.append(Item("entry", entry.name, entry.where, SKIP, reason=reason))
            continue
        if not reads(entry.folder, entry.name, config):
            reason = f"not read by Backlog.md either: it reads only {pattern_of(entry.folder, config)} files in {entry.folder}/"
            result.skipped.append(Item("entry", entry.name, entry.where, SKIP, reason=reason))
            continue
        ident = _name_id(entry.name)
        if entry.problem is not None or entry.text is None:
            result.skipped.append(Item(kind, ident, entry.where, SKIP, reason=f"could not be read: {entry.problem}", loss=True))
            continue
        parsed = _parse(entry, kind, ident)
        if isinstance(parsed, Item):
            result.skipped.append(parsed)
            continue
        (milestones if kind == "milestone" else tasks).append(parsed)

    # Milestones are epics; a task names its milestone by id or title (Backlog.md's aliases).
    aliases = fmt.milestone_aliases(
        [(_str(m.meta.get("id")) or "", _str(m.meta.get("title")) or "") for m in milestones if m.entry.folder == "milestones"],
        [(_str(m.meta.get("id")) or "", _str(m.meta.get("title")) or "") for m in milestones if m.entry.folder != "milestones"],
    )
    keys = _identities(tasks)
    new_ids: dict[tuple[str, str], str] = {key: path.rsplit("/", 1)[-1].removesuffix(".md") for key, path in imported.items()}
    for parsed in tasks:
        new_ids.setdefault(("task", parsed.key), board_items.new_board_id("task", scope, parsed.key, iso_time(parsed.meta.get("created_date")), today))
    first_task: dict[str, str] = {}  # a made epic is as old as its oldest task, so every clone derives the same id
    for parsed in tasks:
        stamp = iso_time(parsed.meta.get("created_date"))
        group = _group(parsed, aliases)
        if stamp and (group not in first_task or stamp < first_task[group]):
            first_task[group] = stamp
    epic_of: dict[str, str] = {}
    for parsed in milestones:
        candidate = _milestone(parsed, scope, imported_from, new_ids, first_task, today)
        epic_of[f"milestone:{parsed.key}"] = candidate.new_id
        result.candidates.append(candidate)

    def epic_for(parsed: _Parsed) -> str:
        group = _group(parsed, aliases)
        if group not in epic_of:
            value = group.partition(":")[2]
            title = value if group.startswith("value:") else f"Backlog.md: {config.project_name or 'tasks'}"
            made = board_items.imported_epic(scope, group, title, first_task.get(group), today)
            description = f"Tasks whose Backlog.md milestone is {value!r} (no milestone file names it)." if group.startswith("value:") else made.description
            epic = Epic(
                id=new_ids.get(("epic", group), made.id), title=title, description=description, status="ACTIVE", created=made.created, updated=made.created
            )
            result.candidates.append(board_items.candidate("epic", epic, group, Where(parsed.entry.where.file), imported_from, made=True))
            epic_of[group] = epic.id
        return epic_of[group]

    for parsed in tasks:
        candidate, comments = _task(parsed, config, scope, imported_from, new_ids, keys, epic_for(parsed), aliases, today, max_comment_bytes)
        result.candidates.append(candidate)
        if comments:
            result.comments[candidate.new_id] = comments
    return result


def canonical(ident: str, prefix: str | None = None) -> str:
    """A task id as Backlog.md compares ids (taskIdsEqual): its prefix in capitals and each
    number without leading zeroes (`back-24.02` is `BACK-24.2`); a bare number takes `prefix`."""
    text = str(ident).strip()
    match = re.fullmatch(r"(?:([A-Za-z]+)-)?(\d+(?:\.\d+)*)", text)
    if match is None:
        return text.upper()
    head = match.group(1) or prefix or ""
    body = ".".join(part.lstrip("0") or "0" for part in match.group(2).split("."))
    return f"{head.upper()}-{body}" if head else body


def _identities(tasks: list[_Parsed]) -> dict[str, str]:
    """Each task's identity (its key) by canonical id. Backlog.md's sequential ids collide
    across branches, so one id may name two files; both are Backlog.md's tasks: the first (in
    tasks/, drafts/, completed/, then the archive) keeps the id and what refers to it, and
    the others are told apart by their file name (`BACK-41 (back-41 - Title.md)`)."""
    found: dict[str, str] = {}
    for parsed in tasks:
        ident = canonical(parsed.key)
        if ident in found:
            parsed.twin = found[ident]
            parsed.key = f"{parsed.key} ({parsed.entry.name})"
        else:
            found[ident] = parsed.key
    return found


def _parse(entry: Entry, kind: str, ident: str) -> _Parsed | Item:
    """A file's frontmatter and body, read as Backlog.md reads them, or the skip saying why
    Backlog.md could not read it either."""
    text = entry.text or ""
    split = fmt.split_frontmatter(text)
    if split is None:
        return Item(kind, ident, entry.where, SKIP, reason="no frontmatter: Backlog.md finds no id or title in it", loss=True)
    frontmatter, body = split
    try:
        meta = document.parse(f"---\n{fmt.preprocess(frontmatter)}\n---\n", entry.where.file).meta
    except MossError as err:
        where = f" at line {err.line}" if err.line else ""
        return Item(
            kind, ident, Where(entry.where.file, err.line), SKIP, reason=f"{err.code}{where}: {err.message} (Backlog.md cannot parse it either)", loss=True
        )
    old = _str(meta.get("id"))
    if old is None:
        return Item(kind, ident, entry.where, SKIP, reason="no id in its frontmatter", loss=True)
    if _str(meta.get("title")) is None and kind == "task":
        return Item(kind, old, entry.where, SKIP, reason="no title in its frontmatter", loss=True)
    return _Parsed(entry, meta, body, _key(old) if kind == "task" else old.strip())


def _group(parsed: _Parsed, aliases: Mapping[str, str]) -> str:
    """The epic a task goes to: `milestone:<id>` of the milestone its value names, `value:<v>`
    for a value that names none, `backlog:tasks` for a task without one."""
    value = _str(parsed.meta.get("milestone"))
    if value is None:
        return f"{SYSTEM}:tasks"
    found = fmt.resolve_milestone(value, aliases)
    return f"milestone:{found}" if found else f"value:{value.strip()}"


def _milestone(parsed: _Parsed, scope: str, imported_from: str, new_ids: dict[tuple[str, str], str], first_task: Mapping[str, str], today: str) -> Candidate:
    account = Account()
    meta = parsed.meta
    old = f"milestone:{parsed.key}"
    account.mapped("id", "source_id", parsed.key)
    title = _str(meta.get("title")) or parsed.key
    account.mapped("title", "title", meta.get("title")) if _str(meta.get("title")) else account.mapped(
        "title", "title", reason=f"absent: the id {parsed.key} is the title"
    )
    content = parsed.body.replace("\r\n", "\n").strip()
    heading = re.match(r"## Description[ \t]*\n", content, re.IGNORECASE)
    description = content[heading.end() :].strip() if heading and "\n## " not in content[heading.end() :] else content
    if content:
        account.mapped(_BODY + "Description", "description", description)
    status = MILESTONE_FOLDERS[parsed.entry.folder]
    account.mapped("(folder)", f"status {status}", parsed.entry.folder)
    leftovers = {"folder": parsed.entry.folder} if parsed.entry.folder != "milestones" else {}
    for key, value in meta.items():
        if key in ("id", "title"):
            continue
        if value in (None, "", [], {}):
            account.empty(key)
        else:
            account.kept(key, value)
            leftovers[key] = value
    created = first_task.get(old)
    epic_id = new_ids.get(("epic", old)) or board_items.new_board_id("epic", scope, old, created, today)
    epic = Epic(id=epic_id, title=" ".join(title.split()), description=description, status=status, created=created, updated=created)
    return board_items.candidate("epic", epic, old, parsed.entry.where, imported_from, leftovers, fates=account.done())


def _task(
    parsed: _Parsed,
    config: Config,
    scope: str,
    imported_from: str,
    new_ids: Mapping[tuple[str, str], str],
    keys: Mapping[str, str],
    epic_id: str,
    aliases: Mapping[str, str],
    today: str,
    max_comment_bytes: int | None,
) -> tuple[Candidate, list[Comment]]:
    meta, entry = parsed.meta, parsed.entry
    account = Account()
    leftovers: dict[str, Any] = {}
    raw_id = _str(meta.get("id")) or parsed.key
    if parsed.twin is not None:
        why = f"{raw_id} -> {parsed.key}: the source holds this id twice (Backlog.md lists both); the first, {parsed.twin}, keeps it"
        account.mapped("id", "source_id", raw_id, changed=why)
        leftovers["id"] = meta["id"]
    elif raw_id.strip() == parsed.key:
        account.mapped("id", "source_id", raw_id)
    else:
        account.mapped("id", "source_id", raw_id, changed=f"{raw_id} -> {parsed.key} (Backlog.md's own form); the source's id is kept")
        leftovers["id"] = meta["id"]
    raw_title = _str(meta.get("title")) or ""
    title = " ".join(raw_title.split())
    if title == raw_title:
        account.mapped("title", "title", raw_title)
    else:
        account.mapped("title", "title", raw_title, changed="white space made single spaces; the source's title is kept")
        leftovers["title"] = meta["title"]
    status = _status(meta, entry.folder, config, account, leftovers)
    if entry.folder != "tasks":
        account.kept("(folder)", entry.folder, home="source_fields.folder")
        leftovers["folder"] = entry.folder
    else:
        account.mapped("(folder)", "status", entry.folder)
    priority = board_items.priority(None)[0]
    if "priority" in meta:
        word = _str(meta["priority"])
        if word is None:
            account.empty("priority")
        elif word.strip().lower() in _SAME_PRIORITY:
            priority = _SAME_PRIORITY[word.strip().lower()]
            account.mapped("priority", "priority", word)
        else:
            priority = board_items.priority(word)[0]
            account.mapped("priority", "priority", word, changed=f"{word} -> {priority}; the source's priority is kept")
            leftovers["priority"] = meta["priority"]
    task_type = None
    if "type" in meta:
        task_type = _str(meta["type"])
        account.mapped("type", "type", meta["type"]) if task_type else account.empty("type")
    milestone = _str(meta.get("milestone"))
    if milestone is not None:
        found = fmt.resolve_milestone(milestone, aliases)
        home = f"epic (milestone {found})" if found else "epic (named after the value: no milestone file names it)"
        account.mapped("milestone", home, milestone)
    elif "milestone" in meta:
        account.empty("milestone")
    created = iso_time(meta.get("created_date"))
    updated = iso_time(meta.get("updated_date")) or created
    completed = None
    for key, home in (("created_date", "created"), ("updated_date", "updated"), ("completed_date", "completed")):
        if key not in meta:
            continue
        value = meta[key]
        if value in (None, ""):
            account.empty(key)
        elif iso_time(value) is None:
            account.kept(key, value, reason="not a date Backlog.md writes")
            leftovers[key] = value
        elif key == "completed_date" and status != "DONE":
            account.kept(key, value, reason="the board keeps a completion time on DONE tasks only")
            leftovers[key] = value
        else:
            account.mapped(key, home, value)
            completed = iso_time(value) if key == "completed_date" else completed
    if status == "DONE" and completed is None:
        completed = updated
    order: int | float = 0
    if "ordinal" in meta:
        value = meta["ordinal"]
        if isinstance(value, int | float) and not isinstance(value, bool):
            order = value
            account.mapped("ordinal", "order", value)
        elif value in (None, ""):
            account.empty("ordinal")
        else:
            account.kept("ordinal", value, reason="not a number")
            leftovers["ordinal"] = value

    def resolve(name: str, values: list[Any], home: str) -> list[str]:
        found, missing = [], []
        own_prefix = parsed.key.split("-", 1)[0] if "-" in parsed.key else None
        for value in values:
            key = keys.get(canonical(str(value), own_prefix))
            if key is not None and key != parsed.key:
                found.append(new_ids[("task", key)])
            else:
                missing.append(value)
        if found:
            account.mapped(name, home, [value for value in values if value not in missing])
        if missing:
            account.kept(name, missing, reason="names no other task of the source (Backlog.md finds none either)")
            leftovers[name] = meta[name]
        return found

    depends: list[str] = []
    if "dependencies" in meta:
        listed = _list(meta["dependencies"])
        depends = resolve("dependencies", listed, "depends_on") if listed else []
        if not listed:
            account.empty("dependencies")
    parent = None
    for name in ("parent_task_id", "parent"):
        if name in meta:
            value = _str(meta[name])
            if value is None:
                account.empty(name)
            elif parent is None:
                parents = resolve(name, [value], "parent")
                parent = parents[0] if parents else None
            else:
                account.kept(name, meta[name], reason="a second parent: a board task has one")
                leftovers[name] = meta[name]
    accounted = {base_field(fate.field) for fate in account.fates}
    for key, value in meta.items():
        if key in accounted:
            continue
        if value in (None, "", [], {}):
            account.empty(key)
        else:
            account.kept(key, value)
            leftovers[key] = value

    body = fmt.read_body(parsed.body)
    description, criteria = _body(body, account, leftovers)
    comments = _comments(body.comments, parsed.key, new_ids[("task", parsed.key)], scope, created or updated, today, account, leftovers, max_comment_bytes)
    task = Task(
        id=new_ids[("task", parsed.key)],
        epic=epic_id,
        title=title,
        description=description,
        status=status,
        priority=priority,
        order=order,
        depends_on=tuple(dict.fromkeys(depends)),
        parent=parent,
        definition_of_done=criteria,
        created=created,
        updated=updated,
        completed=completed,
        type=task_type,
    )
    return board_items.candidate("task", task, parsed.key, entry.where, imported_from, leftovers, fates=account.done()), comments


def _status(meta: Mapping[str, Any], folder: str, config: Config, account: Account, leftovers: dict[str, Any]) -> str:
    """The board status of a task: its folder's for completed and archived files, else its
    word's; a word the board has no equal for is kept beside, and the change listed."""
    word = _str(meta.get("status"))
    forced = TASK_FOLDERS.get(folder)
    if word is None:
        status = forced or "BACKLOG"
        if "status" in meta:
            account.empty("status")
        account.mapped("(folder)" if forced else "status", "status", folder, reason=f"no status: {status}" if not forced else None)
        return status
    folded = word.strip().casefold()
    status = forced or _SAME_STATUS.get(folded) or _guess(folded, config)
    if not forced and folded in _SAME_STATUS:
        account.mapped("status", "status", word)
        return status
    why = f"(its folder, {folder}/)" if forced else "(the nearest board status)"
    if forced and _SAME_STATUS.get(folded) == forced:
        account.mapped("status", "status", word)
        return status
    account.mapped("status", "status", word, changed=f"{word} -> {status} {why}; the source's status is kept")
    leftovers["status"] = meta["status"]
    return status


def _guess(folded: str, config: Config) -> str:
    if "review" in folded:
        return "REVIEW"
    if "progress" in folded or folded in ("doing", "wip"):
        return "WORKING"
    if config.statuses and folded == config.statuses[-1].casefold():
        return "DONE"
    return "BACKLOG"


def _body(body: fmt.Body, account: Account, leftovers: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The board description and definition of done of a task body, accounted."""
    lead = body.sections.get("description")
    if lead is not None:
        account.mapped(_BODY + "Description", "description", lead)
    for key, (heading, _marker) in fmt.STRUCTURED.items():
        if key in body.present and key not in body.sections:
            account.empty(_BODY + heading)
    parts: dict[str, str | None] = {}
    if body.outside:
        account.mapped("text outside sections", "description (after the description, as written)", body.outside)
        lead = "\n\n".join(part for part in (lead, body.outside) if part)
    for key, heading in _SECTION_HOMES.items():
        text = body.sections.get(key)
        if text is not None:
            parts[heading] = text
            account.mapped(_BODY + heading, f"description (## {heading})", text)
    items: list[str] = []
    checked: list[str] = []
    for checklist, heading, tag in ((body.criteria, "Acceptance Criteria", "AC"), (body.done, "Definition of Done", "DoD")):
        if checklist.items:
            items.extend(check.text for check in checklist.items)
            checked.extend(f"{tag} #{number}" for number, check in enumerate(checklist.items, 1) if check.checked)
            account.mapped(_BODY + heading, "definition_of_done", f"{len(checklist.items)} item(s)")
        if checklist.prose:
            parts[heading] = "\n\n".join(text.strip() for text in checklist.bodies if text.strip())
            account.mapped(_BODY + heading, f"description (## {heading})", reason="text beside the items: the section is kept as written")
        elif checklist.spans and not checklist.items:
            account.empty(_BODY + heading)
    if checked:
        leftovers["checked"] = checked
        account.kept(_BODY + "checked marks", checked, home="source_fields.checked")
    return board_items.join_sections(parts, lead), tuple(items)


def _comments(
    found: Sequence[fmt.TaskComment],
    task_old: str,
    task_id: str,
    scope: str,
    fallback_time: str | None,
    today: str,
    account: Account,
    leftovers: dict[str, Any],
    max_bytes: int | None,
) -> list[Comment]:
    """Board comments of a task's Backlog.md comments (author and time as written; one
    without either gets `backlog` and the task's time, and the change is listed). A comment
    longer than a board comment line may be is kept verbatim instead."""
    made: list[Comment] = []
    too_long: list[dict[str, Any]] = []
    filled: set[str] = set()
    for number, comment in enumerate(found, start=1):
        stamp = iso_time(comment.created)
        moment = stamp or fallback_time or f"{today[:4]}-{today[4:6]}-{today[6:]}T00:00:00Z"
        record: dict[str, Any] = {
            "id": derived_id("COMMENT", scope, "comment", f"{task_old}#{number}", moment[:10].replace("-", "")),
            "taskId": task_id,
            "author": comment.author or "backlog",
            "content": comment.body,
            "timestamp": moment,
            "sourceId": number,
        }
        if comment.created and stamp is None:
            record["sourceFields"] = {"created": comment.created}
        if max_bytes is not None and len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) > max_bytes:
            too_long.append({"author": comment.author, "created": comment.created, "body": comment.body})
            continue
        filled.update(name for name, missing in (("time", stamp is None), ("author", not comment.author)) if missing)
        made.append(Comment(task_id, record))
    if made:
        changed = f"no {' or '.join(sorted(filled))} in the source: filled in" if filled else None
        account.mapped(_BODY + "Comments", "comments", f"{len(made)} comment(s)", changed=changed)
    if too_long:
        account.kept(_BODY + "Comments", f"{len(too_long)} comment(s)", home="source_fields.comments", reason="longer than a board comment line may be")
        leftovers["comments"] = too_long
    return made


def _name_id(name: str) -> str:
    """The id a file's name starts with (`back-42 - Title.md` -> `BACK-42`), else the name."""
    match = re.match(r"^([A-Za-z]+-\d+(?:\.\d+)*)\b", name)
    return match.group(1).upper() if match else name


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

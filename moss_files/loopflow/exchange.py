"""LoopFlow's own files written from ours (`moss export --format loopflow`): `insights.json`
and `backlog.json` as LoopFlow 1.x exports them, and the sessions as its `progress.txt`, the
three files LoopFlow reads from `.loop-flow/` into an empty database. Core layer (pure).

Ids: an item `moss migrate loopflow` brought over goes back under its LoopFlow id (its
`source_id`: INS-001, LF-049, 2026-01-21-S18); any other keeps its own id, except a session,
which `progress.txt` can only name by its day and a number (`2026-01-21-S3`, the next free
number of that day). Every reference between exported items (links, an insight's source, a
task's dependencies, a session's task) is rewritten to the exported ids. What the import kept of
an item's LoopFlow fields (`source_fields`) goes back where the item still holds what the import
made of it (`Edge-Case` for edge_case, a tag with a space for its hyphenated form), and as
itself where we have no field for it (`source.original_id`). Summaries and contexts go along
only when a person wrote them: LoopFlow makes its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moss_files.loopflow.insights import Insight
from moss_files.loopflow.sessions import Session

SCHEMA_VERSION = "1.1.0"  # the LoopFlow release whose export format this is
SOURCE = "moss-files"  # LoopFlow writes "loopflow-sqlite": the `source` says who exported
DESCRIPTION = "Structured learnings (zettelkasten). Links form a knowledge graph."
FILES = ("insights.json", "backlog.json", "progress.txt")
PROGRESS_TITLE = "# Progress"
PROGRESS_MARK = "Exported by moss-files in LoopFlow's progress.txt format"
LIST_SECTIONS = (("completed", "Completed"), ("in_progress", "In progress"), ("blocked_on", "Blocked on"), ("next_actions", "Next actions"))

_SESSION_ID = re.compile(r"^(?P<day>\d{4}-\d{2}-\d{2})-S(?P<number>\d+)(?P<suffix>[a-z]?)$")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*[A-Za-z0-9]|[A-Za-z0-9]")
_HEADER_LINE = re.compile(r"^(?:Task|Outcome|Manual QA):")
_SECTION = re.compile(r"^##(\s)", re.MULTILINE)  # the inverse of the import's `###` -> `##`
_TAG_BAD = re.compile(r"[\s,]+")  # == migrate.loopflow._TAG_BAD: how the import made tags


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an item came from: the LoopFlow id `moss migrate` kept (`source_id` of an item
    `imported_from` loopflow), and the LoopFlow fields it kept (`source_fields`)."""

    source_id: str | None = None
    leftovers: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExportTask:
    """A task in LoopFlow's shape (`record`: title, description, status, priority, depends_on
    as our ids, acceptance_criteria, test_file, notes, created_at, updated_at) with our id and
    its origin."""

    id: str
    record: Mapping[str, Any]
    origin: Origin = Origin()
    home: str = "plan"  # plan (PLAN.md) | board


@dataclass(frozen=True, slots=True)
class ExportPlan:
    """The three files' texts, the exported id of each item (ours -> LoopFlow's), and what was
    left out, with why."""

    files: dict[str, str]
    ids: dict[str, dict[str, str]]
    counts: dict[str, int]
    skipped: list[dict[str, Any]]


def plan_export(
    insights: Sequence[tuple[Insight, Origin]],
    sessions: Sequence[tuple[Session, Origin]],
    tasks: Sequence[ExportTask],
    *,
    now: str,
    project: str,
) -> ExportPlan:
    """LoopFlow's files for these items (`now`: the export time, RFC 3339)."""
    skipped: list[dict[str, Any]] = []
    insight_ids = _assign([(item.id, origin.source_id) for item, origin in insights])
    task_ids = _assign([(task.id, task.origin.source_id if task.origin.source_id else (task.id if task.home == "plan" else None)) for task in tasks])
    session_ids, undated = _session_ids(sessions)
    for session in undated:
        skipped.append({"kind": "session", "id": session.id, "reason": "progress.txt names a session by its day, and this one has none (no `started`)"})
    ours_to_theirs = {**task_ids, **session_ids, **insight_ids}
    chosen_insights = sorted(insights, key=lambda pair: (pair[0].created or "", pair[0].id))
    records = [_insight_record(item, origin, ours_to_theirs, insight_ids[item.id]) for item, origin in chosen_insights]
    backlog = [_task_record(task, ours_to_theirs, task_ids[task.id]) for task in tasks]
    dated = sorted((pair for pair in sessions if pair[0].id in session_ids), key=lambda pair: (_session_key(session_ids[pair[0].id]), pair[0].started or ""))
    files = {
        "insights.json": _dump({"schema_version": SCHEMA_VERSION, "description": DESCRIPTION, "exported_at": now, "source": SOURCE, "insights": records}),
        "backlog.json": _dump({"project": project, "last_updated": now[:10], "notes": "", "exported_at": now, "source": SOURCE, "tasks": backlog}),
        "progress.txt": render_progress([(session, origin, session_ids[session.id]) for session, origin in dated], ours_to_theirs, now),
    }
    return ExportPlan(
        files=files,
        ids={"insight": insight_ids, "task": task_ids, "session": session_ids},
        counts={"insights": len(records), "tasks": len(backlog), "sessions": len(dated)},
        skipped=skipped,
    )


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def _assign(items: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    """Our id -> exported id: the LoopFlow id where one is given and still free, else ours (two
    workspaces' imports may both hold an INS-001; the first keeps it)."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for ours, theirs in items:
        if theirs and theirs.casefold() not in taken:
            out[ours] = theirs
            taken.add(theirs.casefold())
    for ours, _theirs in items:
        if ours not in out:
            wanted = ours
            number = 2
            while wanted.casefold() in taken:  # our own id is some other item's LoopFlow id
                wanted = f"{ours}-{number}"
                number += 1
            out[ours] = wanted
            taken.add(wanted.casefold())
    return out


def _session_key(session_id: str) -> tuple[str, int, str]:
    match = _SESSION_ID.match(session_id)
    return (match.group("day"), int(match.group("number")), match.group("suffix")) if match else (session_id, 0, "")


def _session_ids(sessions: Sequence[tuple[Session, Origin]]) -> tuple[dict[str, str], list[Session]]:
    """Our session id -> `YYYY-MM-DD-S<n>`: a LoopFlow session's own id, a new one the next free
    number of its day; and the sessions with no day at all."""
    out: dict[str, str] = {}
    used: dict[str, set[int]] = {}
    taken: set[str] = set()
    for session, origin in sessions:
        match = _SESSION_ID.match(origin.source_id or "")
        if match and origin.source_id not in taken:
            out[session.id] = origin.source_id or ""
            taken.add(out[session.id])
            used.setdefault(match.group("day"), set()).add(int(match.group("number")))
    undated: list[Session] = []
    for session, _origin in sorted(sessions, key=lambda pair: (pair[0].started or pair[0].date or "", pair[0].id)):
        if session.id in out:
            continue
        day = session.date
        if day is None:
            undated.append(session)
            continue
        numbers = used.setdefault(day, set())
        number = max(numbers, default=0) + 1
        numbers.add(number)
        out[session.id] = f"{day}-S{number}"
    return out, undated


def rewrite_ids(text: str, ids: Mapping[str, str]) -> str:
    """`text` with every whole id of ours that `ids` names replaced by the exported one."""
    return _TOKEN.sub(lambda match: ids.get(match.group(0), match.group(0)), text)


# --------------------------------------------------------------------------- insights


def _insight_record(insight: Insight, origin: Origin, ids: Mapping[str, str], exported_id: str) -> dict[str, Any]:
    record: dict[str, Any] = {"id": exported_id, "content": insight.content, "type": insight.type, "status": insight.status}
    source = {key: ids.get(value, value) for key, value in insight.source.items()}
    if source:
        record["source"] = source
    if insight.tags:
        record["tags"] = list(insight.tags)
    if insight.links:
        record["links"] = [ids.get(link, link) for link in insight.links]
    if insight.notes:
        record["notes"] = insight.notes
    record["created"] = insight.created
    if insight.summary and insight.summary_source is None:
        record["summary"] = insight.summary  # a person's; LoopFlow reads none and makes its own
    if insight.context:
        record["context"] = insight.context
    if insight.updated:
        record["updated"] = insight.updated
    return _restore(record, origin.leftovers)


def _restore(record: dict[str, Any], leftovers: Mapping[str, Any]) -> dict[str, Any]:
    """`record` with the LoopFlow fields the import kept put back: where the record still holds
    what the import made of a value, the value as LoopFlow had it; a field with no home here,
    as it was."""
    for key, value in leftovers.items():
        if key not in record:
            record[key] = value
        elif key in ("type", "status") and isinstance(value, str) and value.strip().lower().replace("-", "_") == str(record[key]).lower():
            record[key] = value
        elif key == "tags" and isinstance(value, list) and _made_tags(value) == record[key]:
            record[key] = value
        elif key in ("summary", "title") and isinstance(value, str) and " ".join(value.split()) == record[key]:
            record[key] = value
        elif key == "source" and isinstance(value, dict) and isinstance(record[key], dict):
            record[key] = {**value, **{name: item for name, item in record[key].items()}}
    return record


def _made_tags(values: Sequence[Any]) -> list[str]:
    out: list[str] = []
    for value in values:
        clean = _TAG_BAD.sub("-", str(value).strip())[:64]
        if clean and clean not in out:
            out.append(clean)
    return out


# --------------------------------------------------------------------------- tasks


def _task_record(task: ExportTask, ids: Mapping[str, str], exported_id: str) -> dict[str, Any]:
    given = task.record
    record: dict[str, Any] = {"id": exported_id, "title": given["title"]}
    if given.get("description"):
        record["description"] = given["description"]
    record["status"] = given["status"]
    record["priority"] = given["priority"]
    record["depends_on"] = [ids.get(dep, dep) for dep in given.get("depends_on") or ()]
    if given.get("acceptance_criteria"):
        record["acceptance_criteria"] = list(given["acceptance_criteria"])
    if given.get("test_file"):
        record["test_file"] = given["test_file"]
    if given.get("notes"):
        record["notes"] = given["notes"]
    for key in ("created_at", "updated_at"):  # LoopFlow's database has them, its export not: read back by our import
        if given.get(key):
            record[key] = given[key]
    return _restore(record, task.origin.leftovers)


# --------------------------------------------------------------------------- sessions


def render_progress(sessions: Sequence[tuple[Session, Origin, str]], ids: Mapping[str, str], now: str) -> str:
    """`progress.txt`: a title, then one entry per session, oldest first, each
    `## YYYY-MM-DD | Session N (title)` with its `Task:` and `Outcome:` lines and its sections
    at `###`, as LoopFlow writes it and `moss migrate loopflow` reads it back."""
    parts = [f"{PROGRESS_TITLE}\n\n{PROGRESS_MARK} on {now}; sessions, oldest first.\n\n---\n"]
    for session, origin, exported_id in sessions:
        parts.append(_entry(session, origin, exported_id, ids))
    return "\n".join(parts)


def _entry(session: Session, origin: Origin, exported_id: str, ids: Mapping[str, str]) -> str:
    match = _SESSION_ID.match(exported_id)
    assert match is not None  # _session_ids made it so
    title = origin.leftovers.get("title") if isinstance(origin.leftovers.get("title"), str) else None
    if title is None and session.headline and session.headline_source is None:
        title = session.headline  # a person's one line
    header = f"## {match.group('day')} | Session {match.group('number')}{match.group('suffix')}" + (f" ({_one_line(title)})" if title else "")
    body = session.body.strip("\n")
    lines = body.split("\n") if body else []
    own = 0
    while own < len(lines) and _HEADER_LINE.match(lines[own]):
        own += 1  # an entry LoopFlow wrote keeps its own Task:, Outcome: and Manual QA: lines
    head = lines[:own]
    if not any(line.startswith("Task:") for line in head):
        head.insert(0, f"Task: {rewrite_ids(session.task, ids) if session.task else 'N/A'}")
    outcome = session.outcome or ("IN_PROGRESS" if session.active else None)
    at = next((index for index, line in enumerate(head) if line.startswith("Outcome:")), None)
    if at is None and outcome:
        head.insert(1, f"Outcome: {outcome}")
    elif at is not None and outcome and head[at][len("Outcome:") :].split(None, 1)[:1] != [outcome]:
        head[at] = f"Outcome: {outcome}"  # changed since LoopFlow wrote it
    rest = "\n".join(lines[own:]).strip("\n")
    rest = _SECTION.sub(r"###\1", rest) if rest else ""
    extra = []
    for name, heading in LIST_SECTIONS:
        values = getattr(session, name)
        if values:
            extra.append(f"### {heading}\n\n" + "\n".join(f"- {rewrite_ids(value, ids)}" for value in values))
    blocks = ["\n".join([header, *head])]
    if rest:
        blocks.append(rest)
    blocks.extend(extra)
    return "\n\n".join(blocks) + "\n\n---\n"


def _one_line(text: str) -> str:
    return " ".join(text.replace("(", "[").replace(")", "]").split())

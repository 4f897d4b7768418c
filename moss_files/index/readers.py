"""How the search index reads each artifact kind (the board's reader is board_reader.py).

Core layer: each kind is a pair of pure functions over one file's bytes (`extract` → rows,
`record` → one item's full record). Other packages' formats are read through their public
parse functions (`cstack.parse_plan`/`parse_current`/`parse_memory`, `needlecast.split_blocks`/
`parse_block`/`parse_message_document`, `capsules.model.parse_capsule`), loaded inside the
functions so a search that re-reads nothing loads none of them (`import a.b as core`: once
loaded, a look-up, where `from a import b` runs the import system's fromlist handling, a
microsecond for every file a build reads).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import cstack
import needlecast

# document is loaded with formats (which reads through it): named here, it costs no load,
# and no import statement runs for each file read.
from moss_files.foundation import document, formats, summaries
from moss_files.foundation.errors import MossError
from moss_files.index.model import Entry, Extracted, FileInput, Problem, problem_from
from moss_files.index.query import normalize_date

if TYPE_CHECKING:
    from moss_files.foundation.document import Document

WHOLE = ""  # the anchor of a file's only item


def _doc(file: FileInput) -> Document:
    return document.parse_bytes(file.data, file.relpath)


def _text(file: FileInput) -> str:
    return document.decode(file.data, file.relpath)[0]


def _line_anchor(line: int) -> str:
    return f"L{line}"


def _anchor_line(anchor: str) -> int | None:
    return int(anchor[1:]) if anchor.startswith("L") and anchor[1:].isdigit() else None


# --------------------------------------------------------------------------- insights


def insight_extract(file: FileInput) -> Extracted:
    import moss_files.loopflow.insights as core

    found = core.parse_insight(_doc(file), file.relpath, fallback_id=file.stem)
    facets = [("type", found.type)]
    facets.extend((name, value) for name, value in found.source.items() if name in ("task", "session"))
    body = "\n\n".join(part for part in (found.content, found.context, found.notes) if part)
    summary = found.effective_summary
    entry = Entry(
        kind="insight",
        id=found.id,
        title=summary,
        summary=summary,
        body=body,
        line=1,
        status="deleted" if found.deleted else found.status,  # soft-deleted: out of search and timelines
        date=normalize_date(found.created),
        updated=normalize_date(found.updated),
        tags=found.tags,
        links=found.links,
        facets=tuple(facets),
        extra=" ".join(found.source.values()),
    )
    return Extracted((entry,))


def insight_record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    import moss_files.loopflow.insights as core

    found = core.parse_insight(_doc(file), file.relpath, fallback_id=file.stem)
    return core.insight_to_dict(found, path=file.relpath)


# --------------------------------------------------------------------------- sessions


def session_extract(file: FileInput) -> Extracted:
    import moss_files.loopflow.sessions as core

    found = core.parse_session(_doc(file), file.relpath, fallback_id=file.stem)
    title = found.task or f"Session {found.date or found.id}"
    lists = [f"{name}: {item}" for name in core.LIST_FIELDS for item in getattr(found, name)]
    summary = found.effective_headline
    facets = [("outcome", found.outcome or ""), ("task", found.task or ""), ("agent", found.agent or "")]
    entry = Entry(
        kind="session",
        id=found.id,
        title=title,
        summary=summary,
        body="\n".join([found.body, *lists]),
        line=1,
        status=found.status,
        date=normalize_date(found.started) or normalize_date(found.date),
        updated=normalize_date(found.ended) or normalize_date(found.started),
        facets=tuple(facets),
        extra=" ".join(filter(None, (found.task, found.agent))),
    )
    return Extracted((entry,))


def session_record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    import moss_files.loopflow.sessions as core

    found = core.parse_session(_doc(file), file.relpath, fallback_id=file.stem)
    return core.session_to_dict(found, path=file.relpath)


# --------------------------------------------------------------------------- observations


def observation_extract(file: FileInput) -> Extracted:
    import moss_files.loopflow.observations as core

    found = core.parse_observation(_doc(file), file.relpath, fallback_id=file.stem)
    facets = [("type", found.kind), ("session", found.session or "")]
    details = " ".join(f"{key} {' '.join(map(str, value)) if isinstance(value, list) else value}" for key, value in found.context.items())
    summary = found.effective_summary
    when = normalize_date(found.time)
    entry = Entry(
        kind="observation",
        id=found.id,
        title=summary,
        summary=summary,
        body=found.text,
        line=1,
        date=when,
        updated=when,
        facets=tuple(facets),
        extra=" ".join(filter(None, (found.session, details))),
    )
    return Extracted((entry,))


def observation_record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    import moss_files.loopflow.observations as core

    found = core.parse_observation(_doc(file), file.relpath, fallback_id=file.stem)
    return core.observation_to_dict(found, path=file.relpath)


# --------------------------------------------------------------------------- capsules

CAPSULES = ".moss/capsules"


def _capsule(file: FileInput) -> Any:
    import moss_files.capsules.model as core

    relpath = PurePosixPath(file.relpath).relative_to(CAPSULES)
    # The store's size limit, so the index reads no capsule file the store refuses.
    doc = document.parse_bytes(file.data, file.relpath, max_bytes=core.MAX_FILE_BYTES)
    return core.parse_capsule(doc, relpath, mtime_ms=file.mtime_ns // 1_000_000, path=file.relpath)


def capsule_extract(file: FileInput) -> Extracted:
    import moss_files.capsules.model as core

    found = _capsule(file)
    facets = [("workspace", found.workspace_norm), ("name", found.name_norm or "")]
    facets.extend((name, getattr(found, name) or "") for name in ("role", "phase", "source"))
    facets.append(("run", found.run_id or ""))
    # Facets are stored casefolded; `cased` names the fields whose value is not, so a listing
    # that filters on them knows which capsules' own values it must read (a few, mostly none).
    values = {"name": [found.name_norm or ""], "run": [found.run_id or ""], "phase": [found.phase or ""], "role": [found.role or ""], "tag": found.tags or ()}
    facets.extend(("cased", field) for field, texts in values.items() if any(text != text.casefold() for text in texts))
    entry = Entry(
        kind="capsule",
        id=found.id,
        title=found.title or found.name or found.id,
        # Headings are skipped, so this is the first lines of the Objective in a linted capsule.
        summary=summaries.summarize(found.text),
        body=found.text,
        line=1,
        status="deleted" if found.deleted else "live",
        date=core.ms_to_rfc3339(found.created_ms),
        updated=core.ms_to_rfc3339(found.updated_ms),
        tags=tuple(found.tags or ()),
        facets=tuple(facets),
        extra=" ".join(filter(None, (found.name, found.workspace, found.role, found.phase))),
        handle=f"{found.workspace}/{found.name}" if found.name else None,
    )
    return Extracted((entry,))


def capsule_record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    import moss_files.capsules.model as core

    return {**core.capsule_to_dict(_capsule(file), include_text=True), "path": file.relpath}


# --------------------------------------------------------------------------- cstack memory files


def cstack_extract(file: FileInput) -> Extracted:
    text = _text(file)
    if file.name == "PLAN.md":
        return _plan_entries(text, file)
    if file.name == "MEMORY.md":
        return _memory_entries(text, file)
    return _current_entries(text, file)


def _current_entries(text: str, file: FileInput) -> Extracted:
    current = cstack.parse_current(text, file.relpath)
    headline = current.task or current.focus or "Current state"
    parts = [current.focus or "", *current.next_steps]
    entry = Entry(
        kind="current",
        id=file.name,
        title=headline,
        summary=summaries.summarize(current.focus or current.task or " ".join(current.next_steps)) or headline,
        body=formats.without_marker(formats.COMMENT, text)[0],  # the version marker is not content
        line=1,
        status=current.state,
        date=normalize_date(current.last_updated) or normalize_date(current.started),
        extra=" ".join(filter(None, parts)),
    )
    return Extracted((entry,))


def _plan_entries(text: str, file: FileInput) -> Extracted:
    plan = cstack.parse_plan(text, file.relpath)
    entries = []
    for task in plan.tasks:
        facets = [("priority", (task.priority or "").lower()), ("section", "/".join(task.section))]
        links = tuple(dict.fromkeys([*task.depends, *([task.parent] if task.parent else [])]))
        entries.append(
            Entry(
                kind="task",
                id=task.id or f"{file.name}:L{task.line}",
                title=task.title,
                summary=summaries.summarize_task(task.title),
                body=task.text,
                anchor=_line_anchor(task.line),
                line=task.line,
                status=task.status,
                date=normalize_date(task.modified) or normalize_date(task.closed),
                updated=normalize_date(task.modified),
                tags=task.labels,
                links=links,
                facets=tuple(facets),
            )
        )
    problems = tuple(_plan_warning(warning) for warning in plan.warnings if warning.startswith("line "))
    return Extracted(tuple(entries), problems)


def _plan_warning(warning: str) -> Problem:
    head, _, rest = warning.partition(":")
    number = head.removeprefix("line ").strip()
    return Problem("SCHEMA_ERROR", rest.strip() or warning, int(number) if number.isdigit() else None, "warning")


def _memory_entries(text: str, file: FileInput) -> Extracted:
    memory = cstack.parse_memory(text, file.relpath)
    entries = [
        Entry(
            kind="memory",
            id=f"{file.name}:L{item.line}",
            title=summaries.summarize(item.text),
            summary=summaries.summarize(item.text),
            body=item.text,
            anchor=_line_anchor(item.line),
            line=item.line,
            date=normalize_date(item.date),
            facets=(("type", item.category),),
        )
        for item in memory.entries
    ]
    return Extracted(tuple(entries))


def cstack_record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    text = _text(file)
    line = _anchor_line(anchor)
    if file.name == "PLAN.md":
        for task in cstack.parse_plan(text, file.relpath).tasks:
            if task.line == line:
                return {**cstack.task_to_dict(task), "path": file.relpath}
        return None
    if file.name == "MEMORY.md":
        for item in cstack.parse_memory(text, file.relpath).entries:
            if item.line == line:
                return {**cstack.entry_to_dict(item), "path": file.relpath}
        return None
    return {**cstack.current_to_dict(cstack.parse_current(text, file.relpath)), "text": text, "path": file.relpath}


# --------------------------------------------------------------------------- needlecast messages


def _box_of(relpath: str) -> str:
    """inbox | outbox | archive, from `inbox.md` or a file under `inbox/` (an `archive.md`
    segment under `archived/` is the archive's)."""
    parts = relpath.split("/")
    box = parts[1][: -len(".md")] if parts[1].endswith(".md") else parts[1]
    return "archive" if box == "archived" else box


def _message_entry(message: Any, *, box: str, fallback_id: str, anchor: str, line: int) -> Entry:
    facets = [("from", message.sender or ""), ("thread", message.thread or ""), ("type", message.type or ""), ("box", box)]
    facets.extend(("to", name) for name in message.to)
    subject = message.extra.get("subject") if isinstance(message.extra.get("subject"), str) else None
    summary = summaries.summarize(message.body)
    title = subject or summary or f"{message.type or 'message'} from {message.sender or '?'}"
    return Entry(
        kind="message",
        id=message.id or fallback_id,
        title=title,
        summary=summary or title,
        body=message.body,
        anchor=anchor,
        line=line,
        status=box,
        date=normalize_date(message.time),
        updated=normalize_date(message.time),
        facets=tuple(facets),
        extra=" ".join(filter(None, (message.sender, *message.to, message.thread, message.type))),
    )


def mailbox_extract(file: FileInput) -> Extracted:
    text = _text(file)
    box = _box_of(file.relpath)
    entries: list[Entry] = []
    problems: list[Problem] = []
    for block in needlecast.split_blocks(text).blocks:
        try:
            message = needlecast.parse_block(block, path=file.relpath)
        except MossError as err:  # one bad block must not hide the others
            problems.append(problem_from(err))
            continue
        entries.append(_message_entry(message, box=box, fallback_id=f"{file.name}:L{block.line}", anchor=_line_anchor(block.line), line=block.line))
    return Extracted(tuple(entries), tuple(problems))


def mailbox_record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    text = _text(file)
    line = _anchor_line(anchor)
    for block in needlecast.split_blocks(text).blocks:
        if block.line == line:
            message = needlecast.parse_block(block, path=file.relpath)
            return {**needlecast.message_to_dict(message), "box": _box_of(file.relpath), "path": file.relpath, "line": line}
    return None


def message_file_extract(file: FileInput) -> Extracted:
    text = _text(file)
    message = needlecast.parse_message_document(text, path=file.relpath)
    return Extracted((_message_entry(message, box=_box_of(file.relpath), fallback_id=file.stem, anchor=WHOLE, line=1),))


def message_file_record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    text = _text(file)
    message = needlecast.parse_message_document(text, path=file.relpath)
    return {**needlecast.message_to_dict(message), "box": _box_of(file.relpath), "path": file.relpath}


# --------------------------------------------------------------------------- any other document


def document_extract(file: FileInput) -> Extracted:
    """The row of any markdown document: title, summary, dates and tags from common keys."""
    doc = _doc(file)
    meta = doc.meta

    def text(name: str) -> str | None:
        key = document.find_key(meta, name)
        value = meta.get(key) if key is not None else None
        return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None

    tags_value = meta.get(document.find_key(meta, "tags") or "")
    tags = tuple(str(t) for t in tags_value if isinstance(t, str | int)) if isinstance(tags_value, list) else ()
    folder = file.relpath.split("/")[-2] if file.relpath.count("/") >= 2 else "document"
    kind = (text("kind") or folder.rstrip("s") or "document").strip().lower()
    summary = text("summary") or summaries.summarize(doc.body)
    title = text("title") or text("name") or summary or file.stem
    entry = Entry(
        kind=kind,
        id=(text("id") or file.relpath).strip(),
        title=title,
        summary=summary or title,
        body=doc.body,
        line=1,
        status=text("status"),
        date=normalize_date(text("created") or text("created_at") or text("date") or text("time")),
        updated=normalize_date(text("updated") or text("updated_at")),
        tags=tags,
        facets=(("priority", text("priority") or ""), ("type", text("type") or "")),
    )
    return Extracted((entry,))


def document_record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    """A document's full record: its path, frontmatter and body."""
    doc = _doc(file)
    return {"path": file.relpath, "meta": doc.meta, "body": doc.body}

"""The artifact kinds the search index reads, registered in one place: `default_registry()`.

Core layer. To add a kind: write its `extract(file) -> Extracted` and `record(file, anchor)`
(readers.py, or a module of its own as board_reader.py), and add one `Source(...)` here.
Place it by folder; the deepest folder wins, so a source for `.moss/board/` takes those files
from the catch-all `documents` source.
"""

from __future__ import annotations

from moss_files.agent import search as agent_search
from moss_files.index import board_reader
from moss_files.index.model import Place, Registry, Source
from moss_files.index.readers import (
    CAPSULES,
    capsule_extract,
    capsule_record,
    cstack_extract,
    cstack_record,
    document_extract,
    document_record,
    insight_extract,
    insight_record,
    mailbox_extract,
    mailbox_record,
    message_file_extract,
    message_file_record,
    session_extract,
    session_record,
)

SOURCES: tuple[Source, ...] = (
    Source("insight", ("insight",), (Place(".moss/insights"),), insight_extract, insight_record),
    Source("session", ("session",), (Place(".moss/sessions"),), session_extract, session_record),
    # version 2: capsule files over the store's 4 MB are unreadable, as the store finds them;
    # `cased` facets name the fields whose values are not casefolded
    Source("capsule", ("capsule",), (Place(CAPSULES),), capsule_extract, capsule_record, version=2, uses_mtime=True),
    Source(
        "cstack",
        ("current", "task", "memory"),
        (Place(".cstack", recursive=False, names=frozenset({"CURRENT.md", "PLAN.md", "MEMORY.md"})),),
        cstack_extract,
        cstack_record,
    ),
    Source(
        "mailbox",
        ("message",),
        (Place(".needlecast", recursive=False, names=frozenset({"inbox.md", "outbox.md", "archive.md"})),),
        mailbox_extract,
        mailbox_record,
    ),
    Source(
        "message",
        ("message",),
        tuple(Place(f".needlecast/{box}") for box in ("inbox", "outbox", "archive")),
        message_file_extract,
        message_file_record,
    ),
    board_reader.SOURCE,  # epics and tasks (.moss/board/)
    # The agent runtime's sessions, with a row per run and per tool step (.moss/agent/sessions/).
    Source("agent", agent_search.KINDS, (Place(agent_search.FOLDER, recursive=False),), agent_search.extract, agent_search.record),
    # Every other markdown file under .moss/ (notes, and whatever else people keep there).
    Source("documents", ("document",), (Place(".moss"),), document_extract, document_record),
)


def default_registry() -> Registry:
    """The registry of every artifact kind the toolkit indexes."""
    return Registry(SOURCES)

"""The artifact kinds the search index reads, registered in one place: `default_registry()`.

Core layer. To add a kind: write its `extract(file) -> Extracted` and `record(file, anchor)`
(readers.py, or a module of its own as board_reader.py), and add one `Source(...)` here, naming
them with `Deferred(module, name)`: a reader is imported when a file of its kind is first read,
so a search that finds nothing changed loads none of them. Place it by folder; the deepest
folder wins, so a source for `.moss/board/` takes those files from the catch-all `documents`
source.
"""

from __future__ import annotations

from moss_files.index.model import Deferred, Place, Registry, Source

READERS = "moss_files.index.readers"
BOARD_READER = "moss_files.index.board_reader"
AGENT_READER = "moss_files.agent.search"
CAPSULES = ".moss/capsules"  # == readers.CAPSULES
BOARD = ".moss/board"  # == board_reader.BOARD
AGENT_SESSIONS = ".moss/agent/sessions"  # == agent.search.FOLDER
AGENT_KINDS = ("agent-session", "agent-run", "agent-step")  # == agent.search.KINDS (a test checks all four)


def _reader(module: str, kind: str) -> tuple[Deferred, Deferred]:
    """The (extract, record) pair of one reader, by name; `kind` prefixes both names."""
    prefix = f"{kind}_" if kind else ""
    return Deferred(module, f"{prefix}extract"), Deferred(module, f"{prefix}record")


SOURCES: tuple[Source, ...] = (
    # version 2: a soft-deleted insight (`deleted_at`, in `deleted/`) has the status `deleted`
    Source("insight", ("insight",), (Place(".moss/insights"),), *_reader(READERS, "insight"), version=2),
    # version 2: a stored `headline` is the session's summary
    Source("session", ("session",), (Place(".moss/sessions"),), *_reader(READERS, "session"), version=2),
    Source("observation", ("observation",), (Place(".moss/observations"),), *_reader(READERS, "observation")),
    # version 2: capsule files over the store's 4 MB are unreadable, as the store finds them;
    # `cased` facets name the fields whose values are not casefolded
    Source("capsule", ("capsule",), (Place(CAPSULES),), *_reader(READERS, "capsule"), version=2, uses_mtime=True),
    Source(
        "cstack",
        ("current", "task", "memory"),
        (Place(".cstack", recursive=False, names=frozenset({"CURRENT.md", "PLAN.md", "MEMORY.md"})),),
        *_reader(READERS, "cstack"),
    ),
    Source(
        "mailbox",
        ("message",),
        (Place(".needlecast", recursive=False, names=frozenset({"inbox.md", "outbox.md", "archive.md"})), Place(".needlecast/archived", recursive=False)),
        *_reader(READERS, "mailbox"),
    ),
    Source(
        "message",
        ("message",),
        tuple(Place(f".needlecast/{box}") for box in ("inbox", "outbox", "archive")),
        *_reader(READERS, "message_file"),
    ),
    # Epics and tasks, one file each directly in these folders (the board's other files are
    # the catch-all's).
    Source("board", ("epic", "task"), (Place(f"{BOARD}/epics", recursive=False), Place(f"{BOARD}/tasks", recursive=False)), *_reader(BOARD_READER, "")),
    # The agent runtime's sessions, with a row per run and per tool step.
    Source("agent", AGENT_KINDS, (Place(AGENT_SESSIONS, recursive=False),), *_reader(AGENT_READER, "")),
    # Every other markdown file under .moss/ (notes, and whatever else people keep there).
    Source("documents", ("document",), (Place(".moss"),), *_reader(READERS, "document")),
)


def default_registry() -> Registry:
    """The registry of every artifact kind the toolkit indexes."""
    return Registry(SOURCES)

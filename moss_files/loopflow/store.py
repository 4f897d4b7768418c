"""Insight, session, observation and feedback files: find, read, create, edit and (insights)
soft-delete them under `.moss/insights/`, `.moss/sessions/`, `.moss/observations/` and
`.moss/feedback/`.

Edge layer: owns those folders, one markdown file per item named after its id; all bytes
go through `fs` (a new file is created exclusively, an edit is a guarded read-modify-write), and
the pure models (`insights`, `sessions`) parse what is read. Files that cannot be read are
reported as problems, never skipped silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from moss_files.foundation import fs
from moss_files.foundation.document import Document
from moss_files.foundation.errors import MossError, NotFound
from moss_files.loopflow import feedback, insights, observations, sessions
from moss_files.loopflow.feedback import Feedback
from moss_files.loopflow.insights import Insight
from moss_files.loopflow.observations import Observation
from moss_files.loopflow.sessions import Session

T = TypeVar("T", Insight, Session, Feedback, Observation)

CREATE_ATTEMPTS = 5
SOURCE_ID = "source_id"  # == migrate.model.SOURCE_ID: the key `moss migrate` keeps an old id under


@dataclass(frozen=True, slots=True)
class Kind(Generic[T]):
    """One kind of item kept a file each: its name, folder, id prefix and parser; `deleted`
    names the subfolder soft-deleted items move to (None: the kind is never soft-deleted)."""

    name: str
    folder: Path  # relative to the workspace root
    prefix: str
    parse: Callable[[Document, str, str], T]  # (document, relpath, file stem) -> item
    deleted: str | None = None


def _parse_insight(doc: Document, relpath: str, stem: str) -> Insight:
    return insights.parse_insight(doc, relpath, fallback_id=stem)


def _parse_session(doc: Document, relpath: str, stem: str) -> Session:
    return sessions.parse_session(doc, relpath, fallback_id=stem)


def _parse_feedback(doc: Document, relpath: str, stem: str) -> Feedback:
    return feedback.parse_feedback(doc, relpath, fallback_id=stem)


def _parse_observation(doc: Document, relpath: str, stem: str) -> Observation:
    return observations.parse_observation(doc, relpath, fallback_id=stem)


INSIGHTS: Kind[Insight] = Kind("insight", insights.FOLDER, insights.ID_PREFIX, _parse_insight, deleted=insights.DELETED_FOLDER)
SESSIONS: Kind[Session] = Kind("session", sessions.FOLDER, sessions.ID_PREFIX, _parse_session)
FEEDBACK: Kind[Feedback] = Kind("feedback", feedback.FOLDER, feedback.ID_PREFIX, _parse_feedback)
OBSERVATIONS: Kind[Observation] = Kind("observation", observations.FOLDER, observations.ID_PREFIX, _parse_observation)


class ItemStore(Generic[T]):
    """The files of one kind in one workspace."""

    def __init__(self, root: Path, kind: Kind[T]) -> None:
        self.root = Path(root)
        self.kind: Kind[T] = kind
        self.folder = self.root / kind.folder

    def relpath(self, path: Path) -> str:
        """`path` relative to the workspace root, as results show it."""
        return path.relative_to(self.root).as_posix()

    def parse(self, path: Path, doc: Document) -> T:
        """The item a document read from `path` holds. Raises InvalidDocument."""
        return self.kind.parse(doc, self.relpath(path), path.stem)

    def read(self, path: Path) -> T:
        """The item in `path`. Raises NotFound, InvalidDocument."""
        return self.parse(path, fs.read_document(path))

    def is_deleted(self, path: Path, item: T) -> bool:
        """Whether the item is soft-deleted: in the deleted folder, or stamped `deleted_at`
        (a delete stopped between its stamp and its move)."""
        if self.kind.deleted is None:
            return False
        return path.parent == self.folder / self.kind.deleted or getattr(item, "deleted", None) is not None

    def read_all(self, *, include_deleted: bool = False) -> tuple[list[tuple[Path, T]], list[dict[str, Any]]]:
        """Every readable item with its file (live ones only, unless `include_deleted`), and a
        problem entry for each file that is not readable."""
        items: list[tuple[Path, T]] = []
        problems: list[dict[str, Any]] = []
        for path in fs.iter_files(self.folder):
            parts = path.relative_to(self.folder).parts
            if any(part.startswith(".") for part in parts):
                continue
            if not include_deleted and self.kind.deleted is not None and parts[0] == self.kind.deleted and len(parts) > 1:
                continue
            try:
                item = self.read(path)
            except MossError as err:
                problems.append({"path": self.relpath(path), "code": err.code, "message": err.message, "line": err.line})
                continue
            if include_deleted or not self.is_deleted(path, item):
                items.append((path, item))
        return items, problems

    def find(self, wanted: str, *, include_deleted: bool = False) -> tuple[Path, T]:
        """The file and item with id `wanted` (exact, else ignoring case), else the one `moss
        migrate` brought over from an item of that id (its `source_id`: LoopFlow's INS-002).
        A soft-deleted item is found only with `include_deleted`. Raises NotFound."""
        what = self.kind.name
        if not insights.is_valid_id(wanted):
            raise NotFound(f"no {what} {wanted!r}", details={"id": wanted})
        direct = self.folder / f"{wanted}.md"
        if os.path.lexists(direct):  # a FIFO or link there is refused by the read, by name
            found = self.read(direct)
            if found.id == wanted and (include_deleted or not self.is_deleted(direct, found)):
                return direct, found
        items, _problems = self.read_all(include_deleted=include_deleted)
        exact = [(path, item) for path, item in items if item.id == wanted]
        loose = [(path, item) for path, item in items if item.id.casefold() == wanted.casefold()]
        if exact or loose:
            return (exact or loose)[0]
        for path, item in items:
            if self._source_id(path).casefold() == wanted.casefold():
                return path, item
        raise NotFound(f"no {what} {wanted!r}", details={"id": wanted}, hint=f"list them with `moss {what} list`")

    def _source_id(self, path: Path) -> str:
        """The id the item in `path` had before `moss migrate` brought it over ("" when none)."""
        try:
            value = fs.read_document(path).meta.get(SOURCE_ID)
        except MossError:
            return ""
        return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""

    def create(self, new_id: Callable[[], str], render: Callable[[str], str]) -> tuple[str, Path]:
        """A new file named after a fresh id, holding `render(id)`; never replaces a file (a
        clash draws another id). Returns the id and the file."""
        for _attempt in range(CREATE_ATTEMPTS):
            item_id = new_id()
            path = self.folder / f"{item_id}.md"
            if fs.create_exclusive(path, render(item_id).encode("utf-8")):
                return item_id, path
        raise MossError(f"could not find a free {self.kind.prefix} id after {CREATE_ATTEMPTS} attempts", path=self.folder)

    def edit(self, path: Path, transform: Callable[[Document], str | None]) -> Document:
        """Apply `transform` (new text, or None for no change) to the file as it is at write
        time; returns the document written (or read). Raises Conflict when it keeps changing."""
        # kind: an edit of an older file writes it at the current format version.
        return fs.modify_document(path, transform, kind=self.kind.name, relpath=self.relpath(path))

    def digest(self, path: Path) -> str:
        """The content hash of a file now (to tell whether an edit changed anything)."""
        return fs.read_snapshot(path).digest


def insight_store(root: Path) -> ItemStore[Insight]:
    """The insight files of a workspace."""
    return ItemStore(root, INSIGHTS)


def session_store(root: Path) -> ItemStore[Session]:
    """The session files of a workspace."""
    return ItemStore(root, SESSIONS)


def feedback_store(root: Path) -> ItemStore[Feedback]:
    """The feedback files of a workspace."""
    return ItemStore(root, FEEDBACK)


def observation_store(root: Path) -> ItemStore[Observation]:
    """The observation files of a workspace."""
    return ItemStore(root, OBSERVATIONS)

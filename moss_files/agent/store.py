"""Sessions and their event logs on disk, under `.moss/agent/sessions/`. Edge layer (files).

`<id>.md` is the session (frontmatter totals, a section per finished run), `<id>.jsonl` its
events, `.<id>.run.lock` the lock that keeps a session's runs serial across processes (git
ignores it, as every `.moss/**/.*.lock`). Every write goes through foundation.fs: the session
file by atomic, guarded edits that keep a person's changes, each event by one O_APPEND write
and an fsync before the runtime goes on. Every text written passes the redactor first, so a
secret the runtime holds (the API key) cannot reach a file even if a tool or the model echoes
it back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TextIO

from moss_files.agent import model
from moss_files.agent.model import Event, EventLog, Session
from moss_files.foundation import document, fs
from moss_files.foundation.errors import Conflict, MossError, NotFound

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words


class Redactor:
    """Replaces every secret value the runtime holds, wherever it appears in a text."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        self.secrets = tuple(sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True))

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def error(self, err: MossError) -> MossError:
        """`err` with its message, details and hint redacted (the same object)."""
        if self.secrets:
            err.message = self.text(err.message)
            err.args = (err.message,)
            err.details = self.data(err.details)
            err.hint = self.text(err.hint) if err.hint else err.hint
        return err

    def data(self, value: Any) -> Any:
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(key)): self.data(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value


class SessionStore:
    """The sessions of one workspace."""

    def __init__(self, root: Path, folder: str = ".moss/agent", *, redactor: Redactor | None = None) -> None:
        self.root = root
        self.folder = root / folder / "sessions"
        self.redactor = redactor or Redactor()

    # ----------------------------------------------------------------- paths

    def session_path(self, session_id: str) -> Path:
        return self.folder / f"{session_id}.md"

    def events_path(self, session_id: str) -> Path:
        return self.folder / f"{session_id}.jsonl"

    def lock_path(self, session_id: str) -> Path:
        # Kept where every lock is, in a folder git ignores by itself (`fs.lock_path_for`).
        return fs.prepared_lock_path(self.folder / f"{session_id}.run")

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # ----------------------------------------------------------------- sessions

    def session_ids(self) -> list[str]:
        """Every session's id (from the file names), sorted (ULIDs sort by creation)."""
        return sorted(path.name[: -len(".md")] for path in fs.iter_files(self.folder, ".md") if path.parent == self.folder)

    def create(self, session: Session, event: Event) -> Session:
        """Write a new session file and its `session.created` event. Raises Conflict
        ALREADY_EXISTS when the id is taken."""
        path = self.session_path(session.id)
        text = self.redactor.text(model.new_session_text(session))
        if not fs.create_exclusive(path, document.encode(text)):
            raise Conflict(f"session {session.id} exists already", code="ALREADY_EXISTS", path=self.relpath(path))
        self.append(event)
        return self.read_session(session.id)

    def read_session(self, session_id: str) -> Session:
        """One session. Raises NotFound, or InvalidDocument for a broken file."""
        path = self.session_path(session_id)
        try:
            doc = fs.read_document(path)
        except NotFound:
            raise NotFound(f"no session {session_id}", details={"session": session_id}, hint="`moss agent sessions` lists them") from None
        return model.parse_session(doc, self.relpath(path), fallback_id=session_id)

    def read_body(self, session_id: str) -> str:
        return fs.read_document(self.session_path(session_id)).body

    def list_sessions(self) -> list[Session]:
        """Every session, newest first. Only the session files are read, never the event logs."""
        return [self.read_session(ident) for ident in reversed(self.session_ids())]

    def update_session(self, session_id: str, changes: Mapping[str, Any], *, section: str | None = None) -> Session:
        """Set frontmatter keys (and append a run's section) in one guarded edit."""
        path = self.session_path(session_id)
        safe_changes = self.redactor.data(dict(changes))

        def transform(doc: document.Document) -> str:
            text = document.edit_frontmatter(doc.text, safe_changes, path)
            if section is not None:
                text = model.append_section(text, self.redactor.text(section))
            return text

        # kind: an edit of an older file writes it at the current format version.
        fs.modify_document(path, transform, kind="agent-session", relpath=self.relpath(path))
        return self.read_session(session_id)

    # ----------------------------------------------------------------- events

    def append(self, event: Event) -> None:
        """Append one event (redacted) to its session's log, durably."""
        assert event.session is not None
        clean = Event(event.id, event.ts, event.kind, event.session, event.run, self.redactor.data(dict(event.data)))
        fs.append_line(self.events_path(event.session), model.event_to_line(clean))

    def read_events(self, session_id: str) -> EventLog:
        """A session's events in order; bad lines are reported in `problems`, never fatal."""
        snapshot = fs.read_snapshot(self.events_path(session_id))
        return model.parse_events(snapshot.data or b"")

    def end_torn_line(self, session_id: str) -> None:
        """End a log's torn last line, so the next event starts a line of its own."""
        fs.append_line(self.events_path(session_id), b"")

    # ----------------------------------------------------------------- the run lock

    @contextmanager
    def run_lock(self, session_id: str, *, wait: float) -> Iterator[None]:
        """Hold the session's run lock, waiting at most `wait` seconds for it.

        Raises Conflict SESSION_BUSY when another run keeps it longer.
        """
        with ExitStack() as stack:
            try:
                stack.enter_context(fs.flocked(self.lock_path(session_id), timeout=wait))
            except Conflict as exc:
                if exc.code != "LOCK_TIMEOUT":
                    raise
                raise self.busy_error(session_id, wait) from None
            yield

    def busy_error(self, session_id: str, wait: float) -> Conflict:
        return Conflict(
            f"session {session_id} is running another run (waited {wait:g}s)",
            code="SESSION_BUSY",
            details={"session": session_id, "waited_seconds": wait},
            hint="wait for it, or pass --wait SECONDS to queue behind it",
        )

    def is_running(self, session_id: str) -> bool:
        """Whether some process holds the session's run lock right now."""
        try:
            with fs.flocked(self.lock_path(session_id), timeout=0, shared=True):
                return False
        except Conflict as exc:
            if exc.code == "LOCK_TIMEOUT":
                return True
            raise

    # ----------------------------------------------------------------- lookups

    def resolve_session(self, prefix: str) -> str:
        """The session id an id or unambiguous prefix names; `last` names the newest session
        (no ULID holds an L, so it is never a prefix)."""
        ids = self.session_ids()
        if prefix.strip().lower() == "last":
            if not ids:
                raise NotFound("there is no session yet", hint='`moss agent run "..."` starts one')
            return ids[-1]
        return model.resolve_prefix(prefix, ids, "session")

    def resolve_run(self, prefix: str) -> tuple[str, str]:
        """(session id, run id) for a run id or unambiguous prefix: from the run sections of
        the session files and the run each names as current (never the event logs)."""
        owners: dict[str, str] = {}
        for session_id in self.session_ids():
            doc = fs.read_document(self.session_path(session_id))
            for run_id in model.run_ids_in(doc.body):
                owners[run_id] = session_id
            current = doc.meta.get("current_run")
            if isinstance(current, str) and current:
                owners[current] = session_id
        run_id = model.resolve_prefix(prefix, owners, "run")
        return owners[run_id], run_id


def open_server_log(root: Path, name: str) -> TextIO:
    """An append-only text file for an MCP server's stderr, `.moss/run/agent/<name>.log`
    (per machine, git-ignored with the rest of `.moss/run/`)."""
    folder = root / ".moss" / "run" / "agent"
    with fs.folder_fd(folder, create=True) as dir_fd:
        fd = os.open(f"{name}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    return os.fdopen(fd, "a", encoding="utf-8", errors="replace")

"""The one Context every use case takes: the workspace, the clock and ids, the settings, who
acts, and where to report progress. Core layer (no I/O).

Entry points (the CLIs, the MCP server, the daemons) build a Context once, from flags and the
environment; use cases read only what it carries, so nothing below an entry point reads the
environment or the clock of the machine. A use case that keeps a resource for the Context's
life (the board's parsed-file cache, an open search index) stores it with `resource`, so one
long-lived Context (the MCP server's) keeps it warm while each CLI run starts fresh.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from moss_files.foundation.config import Config
from moss_files.foundation.ids import Clock, format_date, format_time, system_clock

if TYPE_CHECKING:
    from moss_files.foundation.ids import IdSource

HUMAN = "human"  # the CLIs: people, who may approve plans
AGENT = "agent"  # the MCP server: agents, bound by the ownership guards

T = TypeVar("T")


class Context:
    """What a use case needs besides its own arguments. Read-only: `replace` gives a changed copy.

    `actor` says who calls (HUMAN for the CLIs, AGENT for the MCP server); `worker_id` and
    `task_id` are the defaults an agent's environment names (MOE_WORKER_ID, MOE_TASK_ID);
    `sleeve` is the name messages are sent under; `home` holds the user's settings and the
    default export folder (the user's home when None). `notify` takes messages for a person,
    `progress(done, total)` reports long work.

    A plain slotted class, not the frozen dataclass it was: every command builds one, and the
    `dataclasses` import with the methods a frozen dataclass generates cost about 2 ms of each
    process's start-up (`cstack done` was 2 ms over its target, issue 29).
    """

    __slots__ = ("root", "clock", "ids", "config", "actor", "home", "sleeve", "worker_id", "task_id", "notify", "progress", "_resources")
    # The fields `replace` copies, in the constructor's order (all but the shared resources).
    FIELDS = __slots__[:-1]

    root: Path
    clock: Clock
    ids: IdSource | None
    config: Config
    actor: str
    home: Path | None
    sleeve: str | None
    worker_id: str | None
    task_id: str | None
    notify: Callable[[str], None] | None
    progress: Callable[[int, int], None] | None
    _resources: dict[str, Any]

    def __init__(
        self,
        root: Path,
        clock: Clock = system_clock,
        ids: IdSource | None = None,
        config: Config | None = None,
        actor: str = HUMAN,
        home: Path | None = None,
        sleeve: str | None = None,
        worker_id: str | None = None,
        task_id: str | None = None,
        notify: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        values: tuple[object, ...] = (root, clock, ids, Config() if config is None else config, actor, home, sleeve, worker_id, task_id, notify, progress, {})
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> Context:
        """A copy with the fields `changes` names set anew. The copy shares this context's
        resources (a long-lived context's warm caches serve the copies made per call).

        Raises TypeError for a name that is not a field, as the constructor does."""
        copy = Context(**{name: changes.pop(name, getattr(self, name)) for name in self.FIELDS}, **changes)
        object.__setattr__(copy, "_resources", self._resources)
        return copy

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Context is read-only: use replace({name}=...) for a changed copy")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("a Context is read-only")

    def __repr__(self) -> str:
        return f"Context(root={self.root!r}, actor={self.actor!r}, sleeve={self.sleeve!r}, worker_id={self.worker_id!r}, task_id={self.task_id!r})"

    def now(self) -> datetime:
        """The current time from the context's clock (timezone-aware)."""
        return self.clock()

    def stamp(self) -> str:
        """The current time as files store it: RFC 3339 UTC, seconds, with a `Z`."""
        return format_time(self.clock())

    def today(self) -> str:
        """The current date, `YYYY-MM-DD` in UTC."""
        return format_date(self.clock())

    def id_source(self) -> IdSource:
        """The id source: the context's, else one over its clock."""
        if self.ids is not None:
            return self.ids
        # Imported on first use: making ids loads the ULID package, which read-only commands
        # never need.
        from moss_files.foundation.ids import IdSource

        return IdSource(clock=self.clock)

    def new_ulid(self) -> str:
        """A new ULID."""
        return self.id_source().ulid()

    def new_id(self, prefix: str) -> str:
        """A new `<PREFIX>-<YYYYMMDD>-<random>` id."""
        return self.id_source().prefixed(prefix)

    def home_folder(self) -> Path:
        """The user's home folder (or the one the context names)."""
        return self.home if self.home is not None else Path.home()

    def resource(self, key: str, make: Callable[[], T]) -> T:
        """The resource kept under `key` for this context's life, made on first use. Two threads
        asking at once may both make one; the first stored is kept and returned to both."""
        found = self._resources.get(key)
        if found is None:
            found = self._resources.setdefault(key, make())
        kept: T = found
        return kept

    def say(self, text: str) -> None:
        """Pass a message for a person to `notify`, when there is one."""
        if self.notify is not None:
            self.notify(text)

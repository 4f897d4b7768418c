"""The search index's model: rows (entries), artifact kinds (sources), the registry that routes
files to sources, and refresh planning. Core layer: pure (no sqlite3, no file I/O).

A **source** owns some places in the workspace (folders, or named files in a folder) and turns
one file's bytes into zero or more entries (index rows) plus problems. PLAN.md yields one row
per task line, a single-file inbox one row per message, an insight file one row. Sources are
registered in one list (`index_sources.default_registry`); adding a kind is one new Source
there. When a file belongs to several places, the deepest folder wins, so a catch-all source
for `.moss/` yields to `.moss/insights/`.

A refresh compares each file's stat signature with the cached one (`plan_refresh`); the edge
then confirms changes by content hash before re-reading a file's rows.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any, NamedTuple

from moss_files.foundation.errors import MossError

try:  # the blake2b hashlib gives, without hashlib loading OpenSSL's hashes first (2 ms of every
    # search's start-up: each query hashes its walk)
    from _blake2 import blake2b
except ImportError:  # a Python built without its bundled hashes
    from hashlib import blake2b

# A file's stat as (mtime_ns, ctime_ns, size, inode), and its signature: the ctime, which
# every change of the file moves (a write, a replacing rename, a restore that resets the
# mtime) and no user can set, so a refresh compares two plain dicts of ints. A racy
# signature (the file changed too recently for its ctime to tell a second change within
# the same clock tick) is stored as None, which equals nothing, so the next refresh
# re-checks that file's content.
Stat = tuple[int, int, int, int]
Signature = int | None
RACY_WINDOW_NS = 2_000_000_000
EXCLUDED = (".moss/cache", ".moss/run")
SUFFIX = ".md"
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_SUMMARY = 100  # == summaries.MAX_SUMMARY (a test checks)
# Where a running `moss index watch` listens, relative to the root (`watch.socket_path`):
# named here so that a query looks for it before it loads the watcher's module.
WATCH_SOCKET = ".moss/run/index.sock"


# The index's records are NamedTuples, not frozen dataclasses: every search, listing and
# refresh process defines them at start-up, and a NamedTuple is made in a fifth of the time
# (with `_replace` for `dataclasses.replace`).


class Entry(NamedTuple):
    """One searchable item: what the index stores about it (never the whole record).

    `anchor` tells the item apart from others in the same file ("" for a file holding one
    item, `L<line>` for a line or block). `facets` are `(field, value)` pairs the query's
    `field:value` filters match (tags are added as `tag` facets). `extra` is more text to
    search, weighted between title and body (names, addresses). `handle` is the name people
    address the item by besides its id, where it has one (a capsule's `workspace/name`).
    """

    kind: str
    id: str
    title: str
    summary: str
    body: str = ""
    anchor: str = ""
    line: int | None = None
    status: str | None = None
    date: str | None = None
    updated: str | None = None
    tags: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    facets: tuple[tuple[str, str], ...] = ()
    extra: str = ""
    handle: str | None = None


class Problem(NamedTuple):
    """Why a file, or part of it, is not (fully) in the index. Errors leave items out;
    warnings mark text that was read differently than it may have been meant."""

    code: str
    message: str
    line: int | None = None
    severity: str = "error"


def problem_from(err: MossError) -> Problem:
    """A Problem carrying an error's code, message and line."""
    return Problem(err.code, err.message, err.line)


class Extracted(NamedTuple):
    """A source's reading of one file."""

    entries: tuple[Entry, ...] = ()
    problems: tuple[Problem, ...] = ()


class FileInput(NamedTuple):
    """One file as a source sees it: its path relative to the workspace, bytes and mtime."""

    relpath: str
    data: bytes
    mtime_ns: int = 0

    @property
    def name(self) -> str:
        return self.relpath.rsplit("/", 1)[-1]

    @property
    def stem(self) -> str:
        name = self.name
        return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name

    def relative_to(self, folder: str) -> PurePosixPath:
        return PurePosixPath(self.relpath).relative_to(folder)


class Place(NamedTuple):
    """Where a source's files are: `.md` files in `folder` (and its subfolders when
    `recursive`), only those named in `names` when given."""

    folder: str
    recursive: bool = True
    names: frozenset[str] | None = None


class Deferred:
    """A function named by its module and name, imported on its first call. A source
    registered with these costs no import until a file of its kind is read (a search that
    re-reads nothing loads no reader), and a registry of them pickles by name, as functions do.
    """

    __slots__ = ("_function", "module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self._function: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        function = self._function
        if function is None:
            function = self._function = getattr(importlib.import_module(self.module), self.name)
        return function(*args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Deferred) and (other.module, other.name) == (self.module, self.name)

    def __hash__(self) -> int:
        return hash((self.module, self.name))

    def __repr__(self) -> str:
        return f"Deferred({self.module!r}, {self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Deferred, (self.module, self.name))


Extractor = Callable[[FileInput], Extracted]
Recorder = Callable[[FileInput, str], "dict[str, Any] | None"]


class Source(NamedTuple):
    """An artifact kind (or family of kinds) the index reads.

    `extract(file)` returns the file's entries and problems (raising MossError for a file it
    cannot read at all); `record(file, anchor)` returns the full record of one item for
    `expand` (None when the anchor is gone). Bump `version` when either changes what it
    returns, so existing caches are rebuilt. `uses_mtime`: entries depend on the file's
    mtime (a date taken from it), so an mtime change re-reads the file even when its bytes
    are unchanged.
    """

    name: str
    kinds: tuple[str, ...]
    places: tuple[Place, ...]
    extract: Extractor
    record: Recorder
    version: int = 1
    uses_mtime: bool = False


class _Route(NamedTuple):
    by_name: Mapping[str, Source]
    default: Source | None

    def source_for(self, name: str) -> Source | None:
        return self.by_name.get(name) or self.default


class Registry:
    """The sources, and which of them owns each folder and file of a workspace."""

    def __init__(self, sources: Sequence[Source], excluded: Sequence[str] = EXCLUDED) -> None:
        names = [source.name for source in sources]
        if len(set(names)) != len(names):
            raise ValueError(f"source names must be unique: {names}")
        self.sources = tuple(sources)
        self.excluded = tuple(excluded)
        self._by_name = {source.name: source for source in sources}
        self._places = [(place, source) for source in sources for place in source.places]
        self._routes: dict[str, _Route | None] = {}
        self._descend: dict[str, bool] = {}
        self._owners: dict[str, _Route | None] = {}  # folder -> its route, if a walk enters it

    @property
    def fingerprint(self) -> str:
        """Names and versions of the sources: a cache built by another registry is rebuilt."""
        return ",".join(f"{s.name}:{s.version}:{int(s.uses_mtime)}" for s in self.sources)

    @property
    def tops(self) -> tuple[str, ...]:
        """The workspace's top-level folders any source reads from."""
        return tuple(sorted({place.folder.split("/", 1)[0] for place, _ in self._places}))

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(kind for source in self.sources for kind in source.kinds))

    def source(self, name: str) -> Source | None:
        return self._by_name.get(name)

    def route(self, folder: str) -> _Route | None:
        """Which sources own the `.md` files directly in `folder` (None: no source)."""
        if folder in self._routes:
            return self._routes[folder]
        if self._is_excluded(folder):
            self._routes[folder] = None
            return None
        candidates = [
            (place, source) for place, source in self._places if place.folder == folder or (place.recursive and folder.startswith(place.folder + "/"))
        ]
        # Shallow to deep: a deeper place overrides a shallower one, and at one depth a
        # place naming files overrides one that takes every file.
        candidates.sort(key=lambda pair: (len(pair[0].folder), pair[0].names is not None))
        by_name: dict[str, Source] = {}
        default: Source | None = None
        for place, source in candidates:
            if place.names is None:
                default = source
                by_name = {}
            else:
                by_name.update(dict.fromkeys(place.names, source))
        route = _Route(by_name, default) if (by_name or default) else None
        self._routes[folder] = route
        return route

    def descend(self, folder: str) -> bool:
        """Whether a walk should enter `folder` (some source may own files in or below it)."""
        known = self._descend.get(folder)
        if known is not None:
            return known
        answer = not self._is_excluded(folder) and any(
            place.folder == folder or place.folder.startswith(folder + "/") or (place.recursive and folder.startswith(place.folder + "/"))
            for place, _ in self._places
        )
        self._descend[folder] = answer
        return answer

    def source_for(self, relpath: str) -> Source | None:
        """The source that owns the file at `relpath` (None when no source does)."""
        folder, _, name = relpath.rpartition("/")
        if not name.endswith(SUFFIX) or name.startswith(".") or not folder:
            return None
        if folder in self._owners:
            route = self._owners[folder]
        else:
            parts = folder.split("/")
            walked = not any(part.startswith(".") for part in parts[1:]) and all(self.descend("/".join(parts[: i + 1])) for i in range(len(parts)))
            route = self._owners[folder] = self.route(folder) if walked else None
        return route.source_for(name) if route else None

    def _is_excluded(self, folder: str) -> bool:
        return any(folder == ex or folder.startswith(ex + "/") for ex in self.excluded)

    def extract(self, source: Source, file: FileInput) -> Extracted:
        """`source.extract(file)` made safe: an unreadable file becomes a Problem, entries get
        unique anchors, one-line titles and summaries of at most 100 characters."""
        if len(file.data) > MAX_FILE_BYTES:
            return Extracted((), (Problem("FILE_TOO_LARGE", f"file is {len(file.data)} bytes; the index reads files up to {MAX_FILE_BYTES}"),))
        try:
            extracted = source.extract(file)
        except MossError as err:
            return Extracted((), (problem_from(err),))
        except Exception as exc:  # a bug in a source: report it where `index status` shows it
            return Extracted((), (Problem("INTERNAL", f"source {source.name!r} failed: {type(exc).__name__}: {exc}"),))
        return Extracted(tidy_entries(with_provenance(extracted.entries, file.data)), extracted.problems)


_PROVENANCE = re.compile(rb"^(imported_from|source_id)[ \t]*:[ \t]*['\"]?([^'\"\r\n#]*)", re.MULTILINE)
_BOM = b"\xef\xbb\xbf"
SOURCE_ID_FACET = "source_id"


def with_provenance(entries: Iterable[Entry], data: bytes) -> Iterable[Entry]:
    """Entries of a file `moss migrate` wrote, searchable and addressable by the id the item had
    in the system it came from: the frontmatter's `imported_from` and `source_id` join each
    entry's extra text, and `source_id` is a facet, which `lookup` falls back to (`moss expand
    INS-002` finds the insight LoopFlow called INS-002)."""
    head = data[len(_BOM) :] if data.startswith(_BOM) else data
    if b"source_id" not in head[:65536] or not head.startswith(b"---"):
        return entries
    end = head.find(b"\n---", 3)
    found = [(match.group(1), match.group(2).decode("utf-8", "replace").strip()) for match in _PROVENANCE.finditer(head[: end if end > 0 else 0])]
    text = " ".join(value for _key, value in found if value)
    if not text:
        return entries
    facets = tuple((SOURCE_ID_FACET, value) for key, value in found if key == b"source_id" and value)
    return [entry._replace(extra=f"{entry.extra} {text}".strip(), facets=entry.facets + facets) for entry in entries]


def tidy_entries(entries: Iterable[Entry]) -> tuple[Entry, ...]:
    """Entries as the index stores them: anchors unique within the file (a repeat gets `~2`),
    one-line titles, summaries cut to 100 characters, facets and tags casefolded."""
    seen: set[str] = set()
    out: list[Entry] = []
    for entry in entries:
        anchor = entry.anchor
        number = 2
        while anchor in seen:
            anchor = f"{entry.anchor}~{number}"
            number += 1
        seen.add(anchor)
        title = " ".join(entry.title.split())
        summary = entry.summary
        if len(summary) > MAX_SUMMARY or "\n" in summary:
            from moss_files.foundation import summaries  # here: only a file being read needs it

            summary = summaries.truncate_at_word(summary, MAX_SUMMARY)
        facets = tuple(dict.fromkeys((name, value.casefold()) for name, value in entry.facets if value))
        status = entry.status.casefold() if entry.status else None
        if (anchor, title, summary, status, facets) != (entry.anchor, entry.title, entry.summary, entry.status, entry.facets):
            entry = entry._replace(anchor=anchor, title=title, summary=summary, status=status, facets=facets)
        out.append(entry)
    return tuple(out)


def facets_of(entry: Entry) -> tuple[tuple[str, str], ...]:
    """Every `(field, value)` an entry can be filtered by: its facets, tags and links."""
    pairs = list(entry.facets)
    pairs.extend(("tag", tag.casefold()) for tag in entry.tags)
    pairs.extend(("link", link.casefold()) for link in entry.links)
    return tuple(dict.fromkeys(pairs))


# --------------------------------------------------------------------------- refresh planning


class RefreshPlan(NamedTuple):
    """Files to read because they are new or their signature changed, and files gone."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)


def signature(stat: Stat) -> int:
    """The integer that stands for a stat (its ctime in nanoseconds)."""
    return stat[1]


def plan_refresh(disk: Mapping[str, Signature], cached: Mapping[str, Signature]) -> RefreshPlan:
    """Compare the files on disk with the cached signatures (a racy cached one never matches)."""
    if disk == cached:
        return RefreshPlan()
    # Set operations on the dict views run in C; a refresh with a few changes stays cheap.
    differing = {path for path, _sig in disk.items() - cached.items()}
    added = sorted(path for path in differing if path not in cached)
    changed = sorted(path for path in differing if path in cached)
    removed = sorted(cached.keys() - disk.keys())
    return RefreshPlan(tuple(added), tuple(changed), tuple(removed))


def stored_signature(stat: Stat, now_ns: int, window_ns: int = RACY_WINDOW_NS) -> Signature:
    """The signature to store for a file stat'ed at `now_ns`: None (racy) when its ctime is
    within `window_ns` of now or in the future, because a second write in the same clock
    tick would not change it."""
    if now_ns - stat[1] < window_ns:
        return None
    return signature(stat)


def digest(data: bytes) -> str:
    """The content hash that confirms a change (the same as `fs.digest_of`)."""
    return blake2b(data, digest_size=16).hexdigest()


class RefreshReport(NamedTuple):
    """What a refresh or rebuild did."""

    files: int
    added: int = 0
    changed: int = 0
    removed: int = 0
    touched: int = 0  # signature changed, content the same: rows kept
    problems: int = 0
    rebuilt: bool = False
    reason: str | None = None
    seconds: float = 0.0
    watched: bool = False  # a running watcher had the index fresh: no walk was needed


def report_to_dict(report: RefreshReport) -> dict[str, Any]:
    """The JSON shape of `moss index refresh|rebuild`."""
    return {
        "files": report.files,
        "added": report.added,
        "changed": report.changed,
        "removed": report.removed,
        "touched": report.touched,
        "problems": report.problems,
        "rebuilt": report.rebuilt,
        "reason": report.reason,
        "seconds": round(report.seconds, 4),
        "watched": report.watched,
    }

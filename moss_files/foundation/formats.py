"""Format versions: each file kind's current version, where a file records its version, and the
chain of pure steps that brings an older file to the current version.

Core layer (pure: text in, text out; imports only the foundation's document layer and errors).
A file without a marker is version 1, the format every release before markers wrote. A kind's
version goes up only with a real change of its format, so a kind still at version 1 writes no
marker at all (the memory files and v1 mailboxes, which other tools share: see `_SHARED`). Readers
check the marker with one dictionary lookup (or one `startswith`) and refuse a file of a newer
version than this toolkit knows with FORMAT_TOO_NEW; they never rewrite what they read. A tool
edit of an older file starts from its upgraded text (see `upgrade_text`), and `moss upgrade`
plans every file's upgrade with `plan`. Append-only logs are history: their lines are never
rewritten, a line's version is its `moss_format` key (absent: 1), and a reader reports a line
of a newer version as a problem and reads the others (`check_record`).

Kinds are declared here, in one table (`KINDS`). A kind whose upgrade needs knowledge of its
own model (a capsule stores the id and times it was known by; a message file stores the id
derived from its bytes) registers its steps from its model module (`register_steps`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, NamedTuple

from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument, MossError

MARKER = "moss_format"
"""The one name of the marker: a frontmatter key, a JSON key, and the word in comment markers.
Namespaced, so it collides with no key of a person or of the tools whose formats we read."""

# Where a kind records its version.
FRONTMATTER = "frontmatter"  # a `moss_format: N` key in the YAML frontmatter
COMMENT = "comment"  # a first line `<!-- moss_format: N -->` (after the frontmatter, if any)
HEAD_COMMENT = "head-comment"  # the same line, always the file's first (a v1 mailbox has no frontmatter)
TOML = "toml"  # a first line `# moss_format: N`
JSON_LINE = "json-line"  # a `"moss_format": N` key in each JSON line (absent: 1)
JSON = "json"  # the bundle's own `"version": "1.0"` (LoopFlow's sharing format)

_COMMENT_LINE = re.compile(r"<!-- moss_format: (\d+) -->\r?\n?")
_TOML_LINE = re.compile(r"# moss_format: (\d+)\r?\n?")
UPGRADE_HINT = "it was written by a newer moss-files: upgrade moss-files on this machine (./install.sh, or pip install -U moss-files) to read it"


# These records are NamedTuples, not frozen dataclasses: every process that reads a capsule
# imports this module, and a NamedTuple is made in a fifth of the time (`_replace` replaces).


class Facts(NamedTuple):
    """What the edge knows of a file besides its text: its path relative to the workspace
    root (posix) and its modification time. A step may use them (a capsule's missing id is
    derived from its path, a missing time from the file's mtime); they come in as values."""

    relpath: str
    mtime_ms: int = 0


class Step(NamedTuple):
    """One upgrade: from `version - 1` to `version`. `apply(text, facts)` returns the new
    text; `move(relpath)`, when given, the file's new place (relative to the root)."""

    version: int
    description: str
    apply: Callable[[str, Facts], str]
    move: Callable[[str], str] | None = None


class Kind(NamedTuple):
    """A file kind: its name (`moss upgrade --kind`), what it is, its current version, where
    the version is recorded, the places its files live (patterns relative to the workspace
    root, `*` within one folder), and its upgrade steps (version 2 onwards, in order).
    `in_flight` names places among them whose files are about to be consumed (a v2 outbox:
    the router moves each message to the archive, written at the current version), which
    `moss upgrade` leaves alone. `retired` lists marker versions an earlier release wrote
    although the format had not changed: a file marked so reads as the current format, keeps
    its marker, and is never written at that version again (the next real change of the
    format takes the number after the highest retired one)."""

    name: str
    title: str
    current: int
    marker: str
    places: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()
    note: str = ""
    in_flight: tuple[str, ...] = ()
    retired: tuple[int, ...] = ()

    def reads(self, version: int) -> bool:
        """Whether this toolkit reads a file that records `version`."""
        return version <= self.current or version in self.retired

    @property
    def rewritable(self) -> bool:
        """False for logs (history) and bundles (files people pass around): never rewritten."""
        return self.marker in (FRONTMATTER, COMMENT, HEAD_COMMENT, TOML)


class Upgrade(NamedTuple):
    """A planned upgrade of one file: from which version to which, its new text and place,
    and what each step does."""

    kind: str
    relpath: str
    old_version: int
    new_version: int
    text: str
    new_relpath: str
    steps: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        return self.old_version != self.new_version


# --------------------------------------------------------------------------- markers


def _line_marker(marker: str, version: int) -> Callable[[str, Facts], str]:
    def apply(text: str, facts: Facts) -> str:
        return set_marker(marker, text, version, facts.relpath)

    return apply


def record_marker(marker: str, version: int) -> Step:
    """The step that only records the version: nothing else about the format changed."""
    where = {
        FRONTMATTER: f"adds `{MARKER}: {version}` at the end of the frontmatter",
        COMMENT: f"adds the line `<!-- {MARKER}: {version} -->` first (after the frontmatter, if any)",
        HEAD_COMMENT: f"adds the line `<!-- {MARKER}: {version} -->` first",
        TOML: f"adds the line `# {MARKER}: {version}` first",
    }
    return Step(version, f"records the version: {where[marker]}", _line_marker(marker, version))


def _frontmatter_version(value: Any, kind: Kind, path: Path | str | None, line: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidDocument(f"{MARKER} must be a positive whole number, not {value!r}", code="SCHEMA_ERROR", path=path, line=line)
    return value


def _too_new(kind: Kind, version: int, path: Path | str | None, line: int | None) -> InvalidDocument:
    return InvalidDocument(
        f"this {kind.title} is in format {version}; this moss-files reads formats up to {max((kind.current, *kind.retired))}, so it neither reads nor writes the file",
        code="FORMAT_TOO_NEW",
        path=path,
        line=line,
        details={"kind": kind.name, "version": version, "supported": max((kind.current, *kind.retired))},
        hint=UPGRADE_HINT,
    )


def _marker_line(doc: document.Document) -> int | None:
    for number, line in enumerate(doc.frontmatter_text.split("\n"), start=2):  # line 1 is the fence
        if line.startswith(MARKER) and line[len(MARKER) :].lstrip(" \t").startswith(":"):
            return number
    return None


def check_document(kind: str, doc: document.Document, path: Path | str | None = None) -> int:
    """The version of a parsed document of a frontmatter kind (1 without a marker).

    The read path's whole cost is one dictionary lookup. Raises InvalidDocument FORMAT_TOO_NEW
    (with the marker's line) for a version newer than this toolkit's, SCHEMA_ERROR for a
    marker that is not a positive whole number.
    """
    value = doc.meta.get(MARKER)
    if value is None:
        return 1
    spec = KINDS[kind]
    if value == spec.current and type(value) is int:
        return value
    version = _frontmatter_version(value, spec, path, _marker_line(doc))
    if not spec.reads(version):
        raise _too_new(spec, version, path, _marker_line(doc))
    return version


def _line_version(marker: str, text: str) -> tuple[int, int] | None:
    """(version, 1-based line) of a comment or TOML marker in `text`, or None without one."""
    prefix = "# moss_format:" if marker == TOML else "<!-- moss_format:"
    start, line = 0, 1
    if not text.startswith(prefix) and marker == COMMENT and text.startswith(document.FENCE):
        head, fm_text, tail, _body = document.split(text)  # FRONTMATTER_UNCLOSED: never "repaired"
        start = len(head) + len(fm_text) + len(tail)
        line = 1 + (head + fm_text + tail).count("\n")
    if not text.startswith(prefix, start):
        return None
    end = text.find("\n", start)
    first = text[start:] if end < 0 else text[start : end + 1]
    match = (_TOML_LINE if marker == TOML else _COMMENT_LINE).fullmatch(first)
    if match is None or int(match.group(1)) < 1:
        raise InvalidDocument(f"a {MARKER} line must read `{_render_line(marker, 2).strip()}` with a positive whole number", code="SCHEMA_ERROR", line=line)
    return int(match.group(1)), line


def check_text(kind: str, text: str, path: Path | str | None = None) -> int:
    """The version of a file of a comment or TOML kind, from its first line (1 without a
    marker). Raises InvalidDocument FORMAT_TOO_NEW or SCHEMA_ERROR, with the marker's line."""
    spec = KINDS[kind]
    try:
        found = _line_version(spec.marker, text)
    except InvalidDocument as err:
        err.path = str(path) if path is not None else None
        raise
    if found is None:
        return 1
    version, line = found
    if not spec.reads(version):
        raise _too_new(spec, version, path, line)
    return version


def check_record(kind: str, record: Mapping[str, Any], path: Path | str | None = None, line: int | None = None) -> int:
    """The version of one JSON line of a log (1 without a `moss_format` key). Raises
    InvalidDocument FORMAT_TOO_NEW for a line of a newer version (its reader reports the line
    as a problem and reads the others), SCHEMA_ERROR for a key that is not a version."""
    value = record.get(MARKER)
    if value is None:
        return 1
    spec = KINDS[kind]
    version = _frontmatter_version(value, spec, path, line)
    if not spec.reads(version):
        raise _too_new(spec, version, path, line)
    return version


def check_bundle_version(value: Any, path: Path | str | None = None) -> None:
    """Refuse a sharing bundle of a newer version than "1.0" with FORMAT_TOO_NEW; an older or
    malformed version is the caller's SCHEMA_ERROR."""
    spec = KINDS["bundle"]
    major, _, minor = str(value).partition(".")
    if major.isdigit() and (minor or "0").isdigit() and (int(major), int(minor or "0")) > (spec.current, 0):
        raise _too_new(spec, int(major), path, None)


def version_of(kind: str, text: str, path: Path | str | None = None) -> int:
    """The version of a file's text (1 without a marker). Raises InvalidDocument for a file
    that cannot be read as its kind's documents are (frontmatter), FORMAT_TOO_NEW."""
    spec = KINDS[kind]
    if spec.marker == FRONTMATTER:
        return check_document(kind, document.parse(text, path), path)
    return check_text(kind, text, path)


def _render_line(marker: str, version: int, newline: str = "\n") -> str:
    return (f"# {MARKER}: {version}" if marker == TOML else f"<!-- {MARKER}: {version} -->") + newline


def set_marker(marker: str, text: str, version: int, path: Path | str | None = None) -> str:
    """`text` recording `version`; everything else keeps its bytes. A frontmatter key is set
    in place or added at the end of the frontmatter (a document without one gains one); a
    comment or TOML line replaces the marker line, or goes first (for a comment, after the
    frontmatter when the file has one)."""
    if marker == FRONTMATTER:
        return document.edit_frontmatter(text, {MARKER: version}, path)
    newline = "\r\n" if text.split("\n", 1)[0].endswith("\r") else "\n"
    found = _line_version(marker, text)
    start = 0
    if marker == COMMENT and text.startswith(document.FENCE):
        head, fm_text, tail, _body = document.split(text, path)
        start = len(head) + len(fm_text) + len(tail)
    end = start
    if found is not None:
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
    return text[:start] + _render_line(marker, version, newline) + text[end:]


def stamp(kind: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A new file's frontmatter: `meta` with the kind's current version as its last key
    (none at version 1, which is the format without a marker)."""
    stamped = {key: value for key, value in meta.items() if key != MARKER}
    if KINDS[kind].current > 1:
        stamped[MARKER] = KINDS[kind].current
    return stamped


def stamp_text(kind: str, text: str) -> str:
    """A new file's text of a comment or TOML kind, marked with the current version (as it
    is at version 1, the format without a marker)."""
    spec = KINDS[kind]
    return text if spec.current == 1 else set_marker(spec.marker, text, spec.current)


def without_marker(marker: str, text: str) -> tuple[str, int | None]:
    """`text` without its comment or TOML marker line, and the version it recorded (None
    without one, or with a malformed one, which stays as text). The merge driver merges files
    this way and marks the result again; the index leaves the marker out of a file's text."""
    try:
        found = _line_version(marker, text)
    except InvalidDocument:
        return text, None
    if found is None:
        return text, None
    start = 0
    if marker == COMMENT and text.startswith(document.FENCE):
        head, fm_text, tail, _body = document.split(text)
        start = len(head) + len(fm_text) + len(tail)
    end = text.find("\n", start)
    end = len(text) if end < 0 else end + 1
    return text[:start] + text[end:], found[0]


def merge_versions(*versions: Any) -> Any:
    """The marker a three-way merge keeps: the highest version any side records (the sides
    that lack one count as 1), or None when no side records one."""
    numbers = [value for value in versions if isinstance(value, int) and not isinstance(value, bool)]
    return max(numbers) if numbers else None


# --------------------------------------------------------------------------- upgrades


def chain(kind: str) -> tuple[Step, ...]:
    """The kind's steps, version 2 to current. Raises MossError (a bug) when a kind's model
    module has not registered the steps it owns."""
    spec = KINDS[kind]
    if [step.version for step in spec.steps] != list(range(2, spec.current + 1)):
        raise MossError(f"the upgrade steps of {kind} are not registered (import the kind's model module first)")
    return spec.steps


def plan(kind: str, text: str, facts: Facts) -> Upgrade:
    """The upgrade of one file: its version now, its text and place at the current version.

    Raises InvalidDocument: FORMAT_TOO_NEW, or the kind's own error for a file that does not
    read (such a file is a problem to report, never rewritten).
    """
    spec = KINDS[kind]
    version = version_of(kind, text, facts.relpath)
    relpath = facts.relpath
    done: list[str] = []
    for step in chain(kind)[version - 1 :]:
        text = step.apply(text, facts._replace(relpath=relpath))
        if step.move is not None:
            relpath = step.move(relpath)
        done.append(f"{step.version - 1} -> {step.version}: {step.description}")
    return Upgrade(kind, facts.relpath, version, spec.current if done else version, text, relpath, tuple(done))


def upgrade_text(kind: str, text: str, facts: Facts) -> str:
    """The text a tool edit starts from: `text` at the current version (itself when current).
    The file's place is the caller's: a step's move happens where the kind moves files.

    Raises InvalidDocument FORMAT_TOO_NEW: a tool never writes over a newer file.
    """
    return plan(kind, text, facts).text


def upgrade_bytes(kind: str, data: bytes, facts: Facts, *, max_bytes: int = document.DEFAULT_MAX_BYTES) -> bytes:
    """`upgrade_text` for a file's bytes (a BOM is kept); the same bytes when current."""
    text, bom = document.decode(data, facts.relpath, max_bytes=max_bytes)
    upgraded = upgrade_text(kind, text, facts)
    return data if upgraded == text else document.encode(upgraded, bom)


def register_steps(kind: str, steps: tuple[Step, ...]) -> None:
    """Give a kind the steps its model module owns (replacing the table's placeholder)."""
    KINDS[kind] = KINDS[kind]._replace(steps=steps)


def in_flight(spec: Kind, relpath: str) -> bool:
    """True when the file at `relpath` lies in one of the kind's in-flight places."""
    return any(fnmatchcase(relpath, pattern) and relpath.count("/") == pattern.count("/") for pattern in spec.in_flight)


def kind_of(relpath: str) -> Kind | None:
    """The kind of the file at `relpath` (relative to the workspace root), or None."""
    for spec in KINDS.values():
        for pattern in spec.places:
            if fnmatchcase(relpath, pattern) and relpath.count("/") == pattern.count("/"):
                return spec
    return None


def locate(path: Path | str) -> tuple[Kind, str] | None:
    """The kind of the file at `path` and its path from the workspace root, found from the
    outermost toolkit folder (`.moss`, `.cstack`, `.needlecast`) on the path; None for a file
    that is not one of the kinds."""
    parts = Path(path).parts
    for index, part in enumerate(parts):
        if part in (".moss", ".cstack", ".needlecast"):
            relpath = "/".join(parts[index:])
            spec = kind_of(relpath)
            return None if spec is None else (spec, relpath)
    return None


# --------------------------------------------------------------------------- the table


def _kind(
    name: str,
    title: str,
    marker: str,
    places: tuple[str, ...],
    *,
    current: int = 2,
    owned: bool = False,
    note: str = "",
    in_flight: tuple[str, ...] = (),
    retired: tuple[int, ...] = (),
) -> Kind:
    steps = () if owned or current == 1 or marker not in (FRONTMATTER, COMMENT, HEAD_COMMENT, TOML) else (record_marker(marker, 2),)
    return Kind(name, title, current, marker, places + in_flight, steps, note, in_flight, retired)


# The files cortical-stack, Protectorate and needlecast's own tools read and write too stay as
# their authors wrote them: their format never changed, so they carry no marker. Version 2 only
# added the marker line (an earlier release wrote it); such files keep reading.
_SHARED = "shared with cortical-stack and Protectorate: no marker until its format changes; a file an earlier release marked 2 reads as version 1"


_DOCS = (
    _kind("capsule", "capsule", FRONTMATTER, (".moss/capsules/*/*.md", ".moss/capsules/*/deleted/*.md"), owned=True),
    _kind("task", "board task", FRONTMATTER, (".moss/board/tasks/*.md",)),
    _kind("epic", "board epic", FRONTMATTER, (".moss/board/epics/*.md",)),
    _kind("worker", "board worker", FRONTMATTER, (".moss/board/workers/*.md",)),
    _kind("team", "board team", FRONTMATTER, (".moss/board/teams/*.md",)),
    _kind("proposal", "rail proposal", FRONTMATTER, (".moss/board/proposals/*.md",)),
    _kind("project", "board project", FRONTMATTER, (".moss/board/project.md",)),
    _kind("insight", "insight", FRONTMATTER, (".moss/insights/*.md", ".moss/insights/deleted/*.md")),
    _kind("session", "session", FRONTMATTER, (".moss/sessions/*.md",)),
    _kind("observation", "observation", FRONTMATTER, (".moss/observations/*.md",)),
    _kind("feedback", "feedback item", FRONTMATTER, (".moss/feedback/*.md",)),
    _kind("summary", "repository summary", FRONTMATTER, (".moss/summary.md",)),
    _kind("agent-session", "agent session", FRONTMATTER, (".moss/agent/sessions/*.md",)),
    _kind("checkpoint", "checkpoint note", FRONTMATTER, (".moss/checkpoints/*.md",)),
    _kind(
        "message",
        "message file",
        FRONTMATTER,
        (".needlecast/inbox/*.md", ".needlecast/inbox/*/*.md", ".needlecast/archive/*.md", ".needlecast/archive/*/*.md"),
        owned=True,
        note="outbox files are in flight and left alone: the router archives each at the current version",
        in_flight=(".needlecast/outbox/*.md",),
    ),
    _kind("dead-letter", "dead letter", FRONTMATTER, (".needlecast/dead-letters/*.md",)),
    _kind(
        "mailbox",
        "mailbox file (layout v1)",
        HEAD_COMMENT,
        (".needlecast/inbox.md", ".needlecast/outbox.md", ".needlecast/archive.md", ".needlecast/archived/*.md"),
        current=1,
        retired=(2,),
        note=_SHARED,
    ),
    _kind("current", "CURRENT.md", COMMENT, (".cstack/CURRENT.md",), current=1, retired=(2,), note=_SHARED),
    _kind("plan", "PLAN.md", COMMENT, (".cstack/PLAN.md",), current=1, retired=(2,), note=_SHARED),
    _kind("memory", "MEMORY.md", COMMENT, (".cstack/MEMORY.md",), current=1, retired=(2,), note=_SHARED),
    _kind("config", "settings file", TOML, (".moss/config.toml",)),
    _kind("agent-policy", "agent settings file", TOML, (".moss/agent.toml",)),
    _kind("sleeves", "sleeve registry", TOML, (".needlecast/sleeves.toml",)),
)
_LOGS = (
    _kind("activity", "activity log line", JSON_LINE, (".moss/board/activity/*.jsonl", ".moss/board/activity.jsonl"), current=1),
    _kind("chat", "chat line", JSON_LINE, (".moss/board/chat/*.jsonl",), current=1),
    _kind("comments", "comment line", JSON_LINE, (".moss/board/comments/*.jsonl",), current=1),
    _kind("agent-events", "agent event line", JSON_LINE, (".moss/agent/sessions/*.jsonl",), current=1),
    _kind("audit", "audit log line", JSON_LINE, (".moss/audit/*.jsonl",), current=1),
    _kind("read-log", "read mark", JSON_LINE, (".needlecast/read.log",), current=1),
    _kind("bundle", "sharing bundle", JSON, (), current=1, note='LoopFlow\'s format records `"version": "1.0"`'),
)

KINDS: dict[str, Kind] = {spec.name: spec for spec in (*_DOCS, *_LOGS)}
"""Every file kind the toolkit writes, by name."""

"""Capsules: the model, name normalization, lint, sections, file and JSONL forms.

Core layer: pure functions over text and values (no I/O, no clock; times are passed in as
milliseconds since the epoch). Imports the stdlib and the other core modules only.

A capsule file is a markdown document: frontmatter for the metadata, the body is the capsule
text byte for byte. Where it lives under `.moss/capsules/` is part of its meaning (see
`capsule_relpath`), and `parse_capsule` checks that the file agrees with its location.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any, NamedTuple

from moss_files.foundation import document, formats, structured
from moss_files.foundation.errors import InvalidDocument, InvalidRequest

DEFAULT_WORKSPACE = "default"
DEFAULT_MAX_CHARS = 12000
MAX_FETCH_MANY = 50
LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT = 20, 100
INVENTORY_DEFAULT_LIMIT, INVENTORY_MAX_LIMIT = 100, 500
EXPORT_SCHEMA_VERSION = "1.0"
CURRENT_FORMAT = formats.KINDS["capsule"].current  # the file format version (foundation.formats)
CAPSULES_FOLDER = PurePosixPath(".moss/capsules")  # relative to the workspace root

SUFFIX = ".md"
# A capsule is at most capsule_max_chars characters of UTF-8 plus frontmatter; files far past
# that are not capsules and are refused before they are parsed (by the store and the index).
MAX_FILE_BYTES = 4 * 1024 * 1024
UNNAMED_PREFIX = "@"
DELETED_DIR = "deleted"
# Longest file stem we write; longer encoded names end in a hash of the whole name instead.
MAX_STEM = 160

# Canonical section name -> accepted spellings (lowercase), in the order lint reports them.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Objective", ("objective", "goal", "purpose")),
    ("Current status", ("current status", "status", "state", "where we are")),
    ("Decisions", ("decisions", "decisions / constraints", "decisions/constraints", "constraints", "choices")),
    ("Next actions", ("next actions", "next steps", "action items", "todo", "tasks")),
    ("Key locations", ("key locations", "locations", "files", "paths", "references")),
    ("Open questions", ("open questions", "open questions / risks", "open questions/risks", "questions", "risks", "unknowns")),
)
_CANONICAL_BY_SYNONYM = {synonym: canonical for canonical, synonyms in SECTIONS for synonym in synonyms}
PLACEHOLDERS = frozenset({"(pending)", "(none)", "(empty)", "(tbd)", "(n/a)", "tbd", "n/a", "none", "pending", "-"})
# A markdown list item's marker: `-`, `*`, `+`, or `1.` / `1)`, then blanks (or the line's end).
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")

# Frontmatter keys the toolkit owns, in the order a new file lists them.
FIELDS = ("id", "workspace", "name", "title", "tags", "source", "run_id", "phase", "role", "created_at", "updated_at", "deleted_at")
OPTIONAL_TEXT_FIELDS = ("title", "source", "run_id", "phase", "role")


# --------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class Capsule:
    """One capsule. Times are integer milliseconds since the epoch (UTC)."""

    id: str
    workspace: str  # as given (raw); `workspace_norm` is derived
    name: str | None
    text: str
    created_ms: int
    updated_ms: int
    title: str | None = None
    tags: tuple[str, ...] | None = None
    source: str | None = None
    run_id: str | None = None
    phase: str | None = None
    role: str | None = None
    deleted_ms: int | None = None

    @property
    def workspace_norm(self) -> str:
        return normalize(self.workspace) or DEFAULT_WORKSPACE

    @property
    def name_norm(self) -> str | None:
        return normalize(self.name) if self.name is not None else None

    @property
    def chars(self) -> int:
        return count_chars(self.text)

    @property
    def tokens_estimate(self) -> int:
        return estimate_tokens(self.text)

    @property
    def deleted(self) -> bool:
        return self.deleted_ms is not None


@functools.lru_cache(maxsize=8192)  # pure; a capsule's name and workspace are normalized several times over (slot, key, plan, path)
def normalize(text: str) -> str:
    """Moss's lookup form: trimmed, lowercased, internal whitespace collapsed to one space."""
    return " ".join(text.split()).lower()


def count_chars(text: str) -> int:
    """Size in characters (code points), never bytes."""
    return len(text)


def estimate_tokens(text: str) -> int:
    """Moss's heuristic: ceil(words x 1.3)."""
    return math.ceil(len(text.split()) * 1.3)


# --------------------------------------------------------------------------- time


@functools.lru_cache(maxsize=8192)  # pure; a new capsule's created and updated times are usually the same instant
def ms_to_rfc3339(ms: int) -> str:
    """`2026-01-19T10:00:00Z`, with `.123` milliseconds only when they are not zero."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    base = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{ms % 1000:03d}Z" if ms % 1000 else f"{base}Z"


def parse_time(value: Any) -> int | None:
    """Milliseconds for an RFC 3339 string, a `YYYY-MM-DD` date or unix seconds; None if unusable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000 if 0 <= value < 2**40 else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def ms_to_seconds(ms: int | None) -> int | None:
    return None if ms is None else ms // 1000


def datetime_to_ms(moment: datetime) -> int:
    """Milliseconds since the epoch for an aware datetime."""
    return round(moment.timestamp() * 1000)


# --------------------------------------------------------------------------- lint


class LintResult(NamedTuple):
    """What lint found: the size and the canonical names of missing sections."""

    chars: int
    max_chars: int
    missing: tuple[str, ...]

    @property
    def too_large(self) -> bool:
        return self.max_chars > 0 and self.chars > self.max_chars


def lint(text: str, *, max_chars: int, allow_thin: bool = False) -> LintResult:
    """Check size and the six required sections (skipped with `allow_thin`)."""
    missing: tuple[str, ...] = ()
    if not allow_thin:
        present = sections_present(text)
        missing = tuple(canonical for canonical, _ in SECTIONS if canonical not in present)
    return LintResult(chars=count_chars(text), max_chars=max_chars, missing=missing)


def check_text(text: str, *, max_chars: int, allow_thin: bool = False) -> LintResult:
    """Lint and raise on failure.

    Raises InvalidDocument CAPSULE_TOO_LARGE (status 413, details max_chars/actual_chars) or
    CAPSULE_TOO_THIN (status 422, details.missing in canonical order).
    """
    result = lint(text, max_chars=max_chars, allow_thin=allow_thin)
    if result.too_large:
        raise too_large_error("CAPSULE_TOO_LARGE", "Capsule exceeds capsule_max_chars", result.max_chars, result.chars)
    if result.missing:
        raise InvalidDocument(
            "Capsule missing required sections",
            code="CAPSULE_TOO_THIN",
            status=422,
            details={"missing": list(result.missing)},
            hint="add a header or 'Name:' line for each missing section, or pass allow_thin",
        )
    return result


def too_large_error(code: str, message: str, max_chars: int, actual: int) -> InvalidDocument:
    return InvalidDocument(
        f"{message} ({actual} > {max_chars} characters)",
        code=code,
        status=413,
        details={"max_chars": max_chars, "actual_chars": actual},
    )


_MD_HEADER = re.compile(r"^#{1,6}\s*(.*?)\s*$")
_COLON_LINE = re.compile(r"^([^:\n]*?)\s*:")


def sections_present(text: str) -> set[str]:
    """Canonical names of the sections the text has, in any of the three forms.

    Forms: a markdown header (`## Goal`), a `Name:` line, or a top-level key when the whole
    text is a JSON object. Case does not matter; lines inside fenced code blocks do not count.
    """
    found: set[str] = set()
    lines = text.split("\n")
    hidden = fenced_lines(lines)
    for index, raw_line in enumerate(lines):
        if index in hidden:
            continue
        line = raw_line.rstrip("\r")
        header = _MD_HEADER.match(line) if line.startswith("#") else None
        if header:
            canonical = canonical_section(header.group(1))
            if canonical:
                found.add(canonical)
            continue
        colon = _COLON_LINE.match(line)
        if colon:
            canonical = canonical_section(colon.group(1))
            if canonical and colon.group(1) == colon.group(1).lstrip():
                found.add(canonical)
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = structured.loads_json(stripped)
        except (ValueError, InvalidDocument):
            data = None
        if isinstance(data, dict):
            for key in data:
                canonical = canonical_section(str(key))
                if canonical:
                    found.add(canonical)
    return found


def canonical_section(label: str) -> str | None:
    """The canonical section a header label or key stands for, if any (synonym-aware)."""
    return _CANONICAL_BY_SYNONYM.get(" ".join(label.split()).lower())


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def fenced_lines(lines: Sequence[str]) -> set[int]:
    """Indexes of lines inside (or fencing) closed code blocks.

    A fence is 3+ backticks or tildes indented at most 3 spaces; it closes on a line of the same
    character at least as long. An unclosed fence hides nothing, as in Moss: text after a stray
    fence still counts.
    """
    hidden: set[int] = set()
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index].rstrip("\r"))
        if not opening:
            index += 1
            continue
        marker = opening.group(1)
        close = re.compile(r"^ {0,3}" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}[ \t]*$")
        end = next((j for j in range(index + 1, len(lines)) if close.match(lines[j].rstrip("\r"))), None)
        if end is None:
            index += 1
            continue
        hidden.update(range(index, end + 1))
        index = end + 1
    return hidden


# --------------------------------------------------------------------------- sections


class Section(NamedTuple):
    """A markdown section: offsets into the text, end exclusive."""

    header: str  # the whole header line, without its line ending
    name: str
    canonical: str | None
    header_start: int
    content_start: int
    content_end: int
    placeholder: bool


_SECTION_HEADER = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*$")


def parse_sections(text: str) -> tuple[Section, ...]:
    """Markdown sections (headers `#`..`######` outside fenced code); content runs to the next header."""
    lines = text.split("\n")
    hidden = fenced_lines(lines)
    starts: list[tuple[int, int, str, str]] = []  # (line start, content start, header, name)
    offset = 0
    for index, line in enumerate(lines):
        end = offset + len(line)
        body = line.rstrip("\r")
        if index not in hidden:
            match = _SECTION_HEADER.match(body)
            if match:
                content_start = min(end + 1, len(text))
                starts.append((offset, content_start, body, match.group(2)))
        offset = end + 1
    sections: list[Section] = []
    for position, (start, content_start, header, name) in enumerate(starts):
        content_end = starts[position + 1][0] if position + 1 < len(starts) else len(text)
        content = text[content_start:content_end]
        sections.append(
            Section(
                header=header,
                name=name,
                canonical=canonical_section(name),
                header_start=start,
                content_start=content_start,
                content_end=content_end,
                placeholder=is_placeholder(content),
            )
        )
    return tuple(sections)


def find_section(sections: Iterable[Section], name: str, *, exact: bool = False) -> Section | None:
    """The first section called `name` (case-insensitive); synonym-aware unless `exact`."""
    wanted = " ".join(name.split()).lower()
    sections = tuple(sections)
    if not exact:
        canonical = canonical_section(name)
        if canonical:
            for section in sections:
                if section.canonical == canonical:
                    return section
    for section in sections:
        if " ".join(section.name.split()).lower() == wanted:
            return section
    return None


def is_placeholder(body: str) -> bool:
    """True for a section body that says nothing yet: empty, or one placeholder such as
    `(none)` or `TBD`, also written as a list's only item (`- (none)`, the README's template)."""
    text = body.strip()
    if "\n" not in text:
        marker = _LIST_ITEM.match(text)
        if marker is not None and text != "-":
            text = text[marker.end() :].strip()
    return not text or text.lower() in PLACEHOLDERS


def _ends_in_list_item(body: str) -> bool:
    """True when the last paragraph of `body` is a list whose last item is still open: its last
    line is an item, or an indented continuation of one."""
    paragraph = re.split(r"\n[ \t]*\r?\n", body.rstrip())[-1].split("\n")
    last = paragraph[-1].rstrip("\r")
    if _LIST_ITEM.match(last):
        return True
    return last[:1] in (" ", "\t") and any(_LIST_ITEM.match(line) for line in paragraph)


def insert_into_section(text: str, section: Section, content: str) -> str:
    """Add `content` to a section: it replaces a placeholder body, continues a list when both
    the body and `content` are list items, else follows after a blank line.

    Whatever separated the section from the next one (blank lines, or no final newline at the
    end of the text) is kept.
    """
    newline = "\r\n" if "\r\n" in text else "\n"
    addition = content.strip("\r\n")
    if section.content_start == len(text) and not text.endswith("\n"):
        return text + newline + addition  # the header is the last line and has no line ending
    body = text[section.content_start : section.content_end]
    kept = body.rstrip()
    gap = body[len(kept) :]
    at_end = section.content_end >= len(text)
    if "\n" not in gap and (not at_end or text.endswith("\n")):
        gap = newline
    if section.placeholder:
        new_body = addition
    elif _LIST_ITEM.match(addition) and _ends_in_list_item(kept):
        new_body = kept + newline + addition  # a blank line between items would make a loose list
    else:
        new_body = kept + newline + newline + addition
    return text[: section.content_start] + new_body + gap + text[section.content_end :]


def select_sections(text: str, names: Sequence[str]) -> str:
    """The requested sections (header + content), in the requested order, skipping missing and
    placeholder ones; '' when nothing is left."""
    sections = parse_sections(text)
    pieces: list[str] = []
    for name in names:
        section = find_section(sections, name)
        if section is None or section.placeholder:
            continue
        content = text[section.content_start : section.content_end].rstrip()
        pieces.append(f"{section.header}\n{content}")
    return "\n\n".join(pieces)


# --------------------------------------------------------------------------- location


_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
# Names Windows reserves for devices, whatever the extension: a file `con.md` cannot exist
# there, so a clone of the repository on Windows would fail. Their first letter is escaped.
WINDOWS_RESERVED = frozenset({"con", "prn", "aux", "nul", *(f"com{n}" for n in range(1, 10)), *(f"lpt{n}" for n in range(1, 10))})


@functools.lru_cache(maxsize=8192)  # pure; an import encodes the same workspace for every capsule
def encode_component(norm: str) -> str:
    """A file-name form of a normalized name that never contains a separator or `..`.

    Letters a-z, digits, `_` and `-` stay; a space becomes `+`; every other character is `%XX`
    per UTF-8 byte (uppercase hex). Injective, also on case-insensitive file systems, because
    plain letters are always lowercase and escapes always uppercase. A name Windows reserves
    (`con`, `nul`, `com1`, …) has its first letter escaped too (`%63on`). Overlong results end
    in `~` and a hash of the whole name.
    """
    out: list[str] = []
    for char in norm:
        if char in _SAFE:
            out.append(char)
        elif char == " ":
            out.append("+")
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    encoded = "".join(out)
    if encoded in WINDOWS_RESERVED:
        encoded = f"%{ord(encoded[0]):02X}{encoded[1:]}"
    if len(encoded) > MAX_STEM:
        from hashlib import blake2b  # here: only overlong names need it, and it loads OpenSSL

        digest = blake2b(norm.encode("utf-8"), digest_size=16).hexdigest()
        cut = encoded[: MAX_STEM - 34]
        cut = cut[: cut.rfind("%")] if "%" in cut[-2:] else cut  # never split an escape
        encoded = f"{cut}~{digest}"
    return encoded


def decode_component(stem: str) -> str | None:
    """Inverse of `encode_component` for names that were not hashed; None otherwise."""
    if "~" in stem:
        return None
    data = bytearray()
    index = 0
    while index < len(stem):
        char = stem[index]
        if char == "%":
            pair = stem[index + 1 : index + 3]
            if len(pair) != 2 or not re.fullmatch(r"[0-9A-F]{2}", pair):
                return None
            data.append(int(pair, 16))
            index += 3
            continue
        if char == "+":
            data.append(0x20)
        elif char in _SAFE:
            data.append(ord(char))
        else:
            return None
        index += 1
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # A bare reserved name is how files were named before the escape: still read as written.
    return text if encode_component(text) == stem or stem in WINDOWS_RESERVED else None


def workspace_dir(workspace_norm: str) -> str:
    """Folder (relative to the capsules folder) that holds a workspace."""
    return encode_component(workspace_norm)


def slot_filename(name_norm: str) -> str:
    """The one file name a live capsule with this normalized name may have."""
    return encode_component(name_norm) + SUFFIX


@functools.lru_cache(maxsize=1024)  # an import places many capsules in the same few folders
def _workspace_folder(workspace_norm: str) -> PurePosixPath:
    return PurePosixPath(workspace_dir(workspace_norm))


def capsule_relpath(capsule: Capsule) -> PurePosixPath:
    """Where a capsule belongs, relative to `.moss/capsules/`.

    Live named: `<ws>/<name>.md` (the name slot, so a name is unique among live capsules by
    construction); live unnamed: `<ws>/@<ID>.md`; soft-deleted: `<ws>/deleted/<ID>.md`.
    """
    folder = _workspace_folder(capsule.workspace_norm)
    if capsule.deleted:
        return folder / DELETED_DIR / f"{capsule.id}{SUFFIX}"
    if capsule.name_norm:
        return folder / slot_filename(capsule.name_norm)
    return folder / f"{UNNAMED_PREFIX}{capsule.id}{SUFFIX}"


_ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def is_capsule_id(text: str) -> bool:
    """True for a well-formed (uppercase) ULID, the only id form a file name may carry."""
    return bool(_ULID.match(text))


def provisional_id(relpath: PurePosixPath, created_ms: int | None) -> str:
    """A stable id for a hand-written capsule that has none yet: ULID-shaped, from its path.

    It stays the same while the file stays where it is, and the next tool write stores it.
    """
    from hashlib import blake2b  # here: a hand-written capsule without an id is rare

    moment = (created_ms or 0) & ((1 << 48) - 1)
    randomness = blake2b(str(relpath).encode("utf-8"), digest_size=10).digest()
    number = int.from_bytes(moment.to_bytes(6, "big") + randomness, "big")
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "".join(alphabet[(number >> shift) & 31] for shift in range(125, -1, -5))


class Address(NamedTuple):
    """Exactly one way to name a capsule: an id, or a workspace and a name (normalized)."""

    id: str | None
    workspace_norm: str
    name_norm: str | None

    def shown(self) -> str:
        """The address as messages show it: the id, else `workspace/name`."""
        return self.id or f"{self.workspace_norm}/{self.name_norm}"


def address(id: str | None = None, workspace: str | None = None, name: str | None = None) -> Address:
    """Check addressing: an id, or a name (in `workspace`, default "default"; blank means default).

    Raises InvalidRequest AMBIGUOUS_ADDRESSING for both, INVALID_REQUEST for neither, a blank
    name or a part that is not text (refs in a list come from JSON the caller wrote).
    """
    for field, value in (("id", id), ("workspace", workspace), ("name", name)):
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(f"{field} must be a string", details={"field": field})
    has_id = bool(id)
    has_name = name is not None and name != ""
    if has_id and has_name:
        raise InvalidRequest(
            "address a capsule by id or by workspace+name, not both",
            code="AMBIGUOUS_ADDRESSING",
            details={"id": id, "name": name},
        )
    if has_id:
        assert id is not None
        return Address(id.strip(), DEFAULT_WORKSPACE, None)
    if not has_name:
        raise InvalidRequest("must specify either id or name")
    assert name is not None
    name_norm = normalize(name)
    if not name_norm:
        raise InvalidRequest("name must not be blank", details={"field": "name"})
    chosen = workspace if workspace is not None and workspace.strip() else DEFAULT_WORKSPACE
    return Address(None, normalize(chosen), name_norm)


# --------------------------------------------------------------------------- file form


def parse_capsule(doc: document.Document, relpath: PurePosixPath, *, mtime_ms: int, path: Any = None) -> Capsule:
    """Read a capsule from a parsed document and where it lives (relative to the capsules folder).

    Missing metadata is derived: workspace from the folder, name from the file name, id from
    the file name or `provisional_id`, times from `mtime_ms`.

    Raises InvalidDocument SCHEMA_ERROR (with the key's line) for a wrong type, or when the file
    disagrees with its location (a name that belongs in another file, a workspace that belongs
    in another folder); EMPTY_FILE for a file with nothing in it (0 bytes, or blank lines).
    """
    where = path if path is not None else str(relpath)
    if not doc.text.strip():
        # Everything could be derived (name, id, times), but a capsule with no text and no
        # metadata is a truncated or half-created file, not a capsule: say so.
        raise InvalidDocument(
            "the capsule file is empty: it holds neither frontmatter nor text",
            code="EMPTY_FILE",
            path=where,
            hint="restore the file from git (git checkout -- FILE), or delete it",
        )
    formats.check_document("capsule", doc, where)
    parts = relpath.parts
    in_deleted = len(parts) == 3 and parts[1] == DELETED_DIR
    if len(parts) != 2 and not in_deleted:
        raise InvalidDocument("not a capsule location: expected <workspace>/<file>.md or <workspace>/deleted/<ID>.md", code="SCHEMA_ERROR", path=where)
    if not relpath.name.endswith(SUFFIX):
        raise InvalidDocument("capsule files end in .md", code="SCHEMA_ERROR", path=where)
    stem = relpath.name[: -len(SUFFIX)]
    reader = _MetaReader(doc, where)

    folder_norm = decode_component(parts[0])
    if folder_norm is None or folder_norm != normalize(folder_norm) or not folder_norm:
        raise InvalidDocument(
            f"folder {parts[0]!r} is not a workspace folder name (lowercase, spaces as '+', other characters %XX)",
            code="SCHEMA_ERROR",
            path=where,
        )
    workspace = reader.text("workspace")
    if workspace is None or not workspace.strip():
        workspace = folder_norm
    elif normalize(workspace) != folder_norm:
        raise reader.error("workspace", f"workspace {workspace!r} belongs in folder {workspace_dir(normalize(workspace))!r}, not {parts[0]!r}")

    created = reader.time("created_at")
    updated = reader.time("updated_at")
    deleted = reader.time("deleted_at")
    created = created if created is not None else (updated if updated is not None else mtime_ms)
    updated = updated if updated is not None else max(created, mtime_ms)
    if in_deleted and deleted is None:
        deleted = mtime_ms  # a file moved under deleted/ by hand is deleted

    file_id: str | None = None
    name: str | None
    name_key = reader.key("name")
    if in_deleted or stem.startswith(UNNAMED_PREFIX):
        file_id = stem if in_deleted else stem[len(UNNAMED_PREFIX) :]
        if not is_capsule_id(file_id):
            raise InvalidDocument(f"file name {relpath.name!r} should be a capsule id (ULID)", code="SCHEMA_ERROR", path=where)
        name = reader.text("name")
        if name is not None and not name.strip():
            name = None
        if name is not None and not in_deleted:
            raise reader.error("name", f"a capsule named {name!r} belongs in {slot_filename(normalize(name))!r}, not in an unnamed capsule's file")
    else:
        # A hand-written file without a name key is named after its file.
        name = reader.text("name") if name_key is not None else (decode_component(stem) or stem)
        if name is None or not name.strip():
            raise reader.error("name", f"file {relpath.name!r} is a name slot; an unnamed capsule belongs in '@<ID>.md'")
        expected = slot_filename(normalize(name))
        legacy = stem == normalize(name) and stem in WINDOWS_RESERVED  # named before the escape
        if expected != relpath.name and deleted is None and not legacy:
            raise reader.error("name" if name_key else None, f"a capsule named {name!r} belongs in {expected!r}, not {relpath.name!r}")

    stored_id = reader.text("id")
    if stored_id is not None and stored_id.strip():
        capsule_id = stored_id.strip()
        if not is_capsule_id(capsule_id):
            raise reader.error("id", f"id {capsule_id!r} is not a ULID (26 characters of Crockford base32, uppercase)")
        if file_id is not None and capsule_id != file_id:
            raise reader.error("id", f"id {capsule_id} does not match the file name {relpath.name!r}")
    else:
        capsule_id = file_id or provisional_id(relpath, reader.time("created_at"))

    return Capsule(
        id=capsule_id,
        workspace=workspace,
        name=name,
        text=doc.body,
        created_ms=created,
        updated_ms=updated,
        title=reader.optional_text("title"),
        tags=reader.tags("tags"),
        source=reader.optional_text("source"),
        run_id=reader.optional_text("run_id"),
        phase=reader.optional_text("phase"),
        role=reader.optional_text("role"),
        deleted_ms=deleted,
    )


class _MetaReader:
    """Typed, case-insensitive access to frontmatter keys, with the key's line for errors."""

    def __init__(self, doc: document.Document, path: Any) -> None:
        self.doc = doc
        self.path = path

    def key(self, name: str) -> str | None:
        return document.find_key(self.doc.meta, name)

    def line(self, key: str | None) -> int | None:
        if key is None or not self.doc.has_frontmatter:
            return None
        pattern = re.compile(r"^['\"]?" + re.escape(key) + r"['\"]?\s*:")
        for index, line in enumerate(self.doc.frontmatter_text.split("\n")):
            if pattern.match(line):
                return index + 2  # line 1 is the opening fence
        return None

    def error(self, name: str | None, message: str) -> InvalidDocument:
        key = self.key(name) if name else None
        return InvalidDocument(message, code="SCHEMA_ERROR", path=self.path, line=self.line(key))

    def raw(self, name: str) -> Any:
        key = self.key(name)
        return None if key is None else self.doc.meta[key]

    def text(self, name: str) -> str | None:
        value = self.raw(name)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        raise self.error(name, f"{name} must be a string, not {type(value).__name__}")

    def optional_text(self, name: str) -> str | None:
        value = self.text(name)
        return value if value else None

    def time(self, name: str) -> int | None:
        value = self.raw(name)
        if value is None or value == "":
            return None
        ms = parse_time(value)
        if ms is None:
            raise self.error(name, f"{name} must be an RFC 3339 time such as 2026-01-19T10:00:00Z, got {value!r}")
        return ms

    def tags(self, name: str) -> tuple[str, ...] | None:
        value = self.raw(name)
        if value is None or value == "" or value == []:
            return None
        if isinstance(value, str):
            items: list[Any] = [part.strip() for part in value.split(",") if part.strip()]
        elif isinstance(value, list):
            items = value
        else:
            raise self.error(name, "tags must be a list of strings")
        out: list[str] = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (str, int)):
                raise self.error(name, "tags must be a list of strings")
            out.append(str(item))
        return tuple(out) or None


def capsule_meta(capsule: Capsule) -> dict[str, Any]:
    """The frontmatter a tool writes for `capsule`, in FIELDS order, without empty values."""
    values: dict[str, Any] = {
        "id": capsule.id,
        "workspace": capsule.workspace,
        "name": capsule.name,
        "title": capsule.title,
        "tags": list(capsule.tags) if capsule.tags else None,
        "source": capsule.source,
        "run_id": capsule.run_id,
        "phase": capsule.phase,
        "role": capsule.role,
        "created_at": ms_to_rfc3339(capsule.created_ms),
        "updated_at": ms_to_rfc3339(capsule.updated_ms),
        "deleted_at": ms_to_rfc3339(capsule.deleted_ms) if capsule.deleted_ms is not None else None,
    }
    return {key: value for key, value in values.items() if value is not None}


def render_capsule(capsule: Capsule) -> str:
    """A new capsule file: frontmatter (at the current format version), then the text byte
    for byte."""
    return document.render(formats.stamp("capsule", capsule_meta(capsule)), capsule.text)


def edit_capsule(old_text: str, capsule: Capsule, path: Any = None) -> str:
    """Rewrite an existing capsule file to hold `capsule`, changing only what differs.

    Unknown keys, comments, quoting and key spelling survive; a missing id or time is added
    (one line each); the body is replaced only when the text changed. An edit of a file of an
    older format records the current version: with the id and times stored, that is the whole
    upgrade (`upgrade_step`). An edit that changes nothing changes nothing.

    Raises InvalidDocument FORMAT_TOO_NEW for a file of a newer format (never written over).
    """
    doc = document.parse(old_text, path)
    version = formats.check_document("capsule", doc, path)
    wanted = capsule_meta(capsule)
    changes: dict[str, Any] = {}
    for field in FIELDS:
        key = document.find_key(doc.meta, field) or field
        if field in wanted:
            if field in ("workspace", "name") and key in doc.meta and _same_identity(doc.meta[key], wanted[field]):
                continue  # keep the hand-written spelling of the identity
            if key not in doc.meta and _derivable(field, capsule):
                continue  # the file's place says it already; a hand-written file stays lean
            if field.endswith("_at") and key in doc.meta and parse_time(doc.meta[key]) == parse_time(wanted[field]):
                continue  # same instant, written differently: leave the human's form
            if field == "tags" and key in doc.meta and isinstance(doc.meta[key], str) and _tag_list(doc.meta[key]) == wanted[field]:
                continue
            changes[key] = wanted[field]
        elif key in doc.meta and doc.meta[key] not in (None, "", []):
            changes[key] = document.DELETE
    if version < CURRENT_FORMAT and (changes or doc.body != capsule.text):
        changes[formats.MARKER] = CURRENT_FORMAT
    new_text = document.edit_frontmatter(old_text, changes, path) if changes else old_text
    head, fm_text, tail, body = document.split(new_text, path)
    if body == capsule.text:
        return new_text
    return head + fm_text + tail + capsule.text


def _upgrade_to_2(text: str, facts: formats.Facts) -> str:
    """Format 1 to 2: store the id and times the file is known by (derived from its path and
    modification time while they are missing, and so changed by any rewrite), then record
    the version."""
    relpath = PurePosixPath(facts.relpath).relative_to(CAPSULES_FOLDER)
    doc = document.parse(text, facts.relpath)
    stored = edit_capsule(text, parse_capsule(doc, relpath, mtime_ms=facts.mtime_ms, path=facts.relpath), facts.relpath)
    return formats.set_marker(formats.FRONTMATTER, stored, 2, facts.relpath)


def escaped_place(relpath: str) -> str:
    """Where a capsule file named before the Windows escape belongs (relative to the
    workspace root): a workspace folder or name slot called `con`, `nul`, `com1`, … gets its
    first letter escaped (`%63on`). Any other path is returned as it is."""
    parts = relpath.split("/")
    base = len(CAPSULES_FOLDER.parts)
    if len(parts) > base + 1 and parts[base] in WINDOWS_RESERVED:
        parts[base] = workspace_dir(parts[base])
    stem = parts[-1].removesuffix(SUFFIX)
    if len(parts) == base + 2 and stem in WINDOWS_RESERVED:
        parts[-1] = slot_filename(stem)
    return "/".join(parts)


UPGRADE_STEPS = (
    formats.Step(
        2,
        "stores the id and times a hand-written file was known by, records the version; a workspace or name Windows "
        "reserves (con, nul, com1, ...) moves to its escaped file name (%63on)",
        _upgrade_to_2,
        escaped_place,
    ),
)
formats.register_steps("capsule", UPGRADE_STEPS)


def _derivable(field: str, capsule: Capsule) -> bool:
    """True when `parse_capsule` would derive the field's value from the file's location."""
    if field == "workspace":
        return capsule.workspace == capsule.workspace_norm
    if field == "name" and capsule.name is not None and not capsule.deleted:
        return decode_component(encode_component(capsule.name_norm or "")) == capsule.name
    return False


def _same_identity(stored: Any, wanted: str) -> bool:
    return stored is not None and str(stored) == wanted


def _tag_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


# --------------------------------------------------------------------------- JSON shapes


def fetch_key(capsule: Capsule) -> dict[str, str]:
    """How to fetch this capsule again: by name when it has one, else by id."""
    if capsule.name:
        return {"moss_capsule": capsule.name, "moss_workspace": capsule.workspace}
    return {"moss_id": capsule.id}


def summary_to_dict(capsule: Capsule) -> dict[str, Any]:
    """Moss's summary shape (list, inventory, latest): never the text."""
    data: dict[str, Any] = {"id": capsule.id, "workspace": capsule.workspace, "workspace_norm": capsule.workspace_norm}
    if capsule.name is not None:
        data["name"] = capsule.name
        data["name_norm"] = capsule.name_norm
    if capsule.title is not None:
        data["title"] = capsule.title
    data["capsule_chars"] = capsule.chars
    data["tokens_estimate"] = capsule.tokens_estimate
    if capsule.tags:
        data["tags"] = list(capsule.tags)
    for field in ("source", "run_id", "phase", "role"):
        value = getattr(capsule, field)
        if value is not None:
            data[field] = value
    data["created_at"] = ms_to_seconds(capsule.created_ms)
    data["updated_at"] = ms_to_seconds(capsule.updated_ms)
    if capsule.deleted_ms is not None:
        data["deleted_at"] = ms_to_seconds(capsule.deleted_ms)
    return data


def capsule_to_dict(capsule: Capsule, *, include_text: bool = True) -> dict[str, Any]:
    """Moss's fetch shape: the summary fields, `capsule_text` when asked for, and `fetch_key`."""
    data = summary_to_dict(capsule)
    if include_text:
        # Moss places the text right after the title; keep that order for readers of raw JSON.
        ordered: dict[str, Any] = {}
        for key, value in data.items():
            if key == "capsule_chars":
                ordered["capsule_text"] = capsule.text
            ordered[key] = value
        data = ordered
    data["fetch_key"] = fetch_key(capsule)
    return data


def export_header(exported_at: int) -> dict[str, Any]:
    """The first line of a Moss JSONL export."""
    return {"_moss_export": True, "schema_version": EXPORT_SCHEMA_VERSION, "exported_at": exported_at}


def capsule_to_record(capsule: Capsule) -> dict[str, Any]:
    """One JSONL export record, fields in Moss's order, times in unix seconds."""
    return {
        "id": capsule.id,
        "workspace_raw": capsule.workspace,
        "workspace_norm": capsule.workspace_norm,
        "name_raw": capsule.name,
        "name_norm": capsule.name_norm,
        "title": capsule.title,
        "capsule_text": capsule.text,
        "capsule_chars": capsule.chars,
        "tokens_estimate": capsule.tokens_estimate,
        "tags": list(capsule.tags) if capsule.tags else None,
        "source": capsule.source,
        "run_id": capsule.run_id,
        "phase": capsule.phase,
        "role": capsule.role,
        "created_at": ms_to_seconds(capsule.created_ms),
        "updated_at": ms_to_seconds(capsule.updated_ms),
        "deleted_at": ms_to_seconds(capsule.deleted_ms),
    }


def render_record(data: Mapping[str, Any]) -> str:
    """One compact JSONL line (no newline), UTF-8 kept as is."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_fields(capsule: Capsule) -> None:
    """Refuse metadata a file cannot hold faithfully. Raises InvalidRequest."""
    for field in ("workspace", "name", "title", "source", "run_id", "phase", "role"):
        value = getattr(capsule, field)
        if value is not None and CONTROL_CHARACTERS.search(value):
            raise InvalidRequest(f"{field} must not contain control characters (newlines included)", details={"field": field})
    for tag in capsule.tags or ():
        if CONTROL_CHARACTERS.search(tag):
            raise InvalidRequest("tags must not contain control characters", details={"field": "tags"})
    if "\0" in capsule.text:
        raise InvalidRequest("capsule_text must not contain NUL characters", details={"field": "capsule_text"})


def with_changes(capsule: Capsule, **changes: Any) -> Capsule:
    """A copy of `capsule` with fields replaced."""
    return replace(capsule, **changes)


# --------------------------------------------------------------------------- capsule keys
# (the import's plan, in `records`, and the store's key cache both work from these)


class CapsuleKey(NamedTuple):
    """What an import must know of a capsule already in the workspace: its id, its name slot
    and whether it is deleted (so whether it holds its name), and where its file is. A named
    tuple, not a dataclass: a bulk writer makes one per capsule file (100,000 of them from the
    key cache), and a tuple is made in a fraction of the time."""

    id: str
    workspace_norm: str
    name_norm: str | None
    deleted: bool
    relpath: str  # relative to the capsules folder, with '/'

    @classmethod
    def of(cls, capsule: Capsule, relpath: PurePosixPath) -> CapsuleKey:
        return cls(capsule.id, capsule.workspace_norm, capsule.name_norm, capsule.deleted, relpath.as_posix())


# --------------------------------------------------------------------------- search snippets

SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT = 20, 100
MAX_QUERY_CHARS = 1000
SNIPPET_CHARS = 300
_ELLIPSIS = "..."
_HEADING_MARK = re.compile(r"(?m)^[ \t]{0,3}#{1,6}[ \t]+")


def _term_pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    """One pattern matching any term at the start of a word (a phrase with any white space
    between its words), longest alternatives first, ignoring case."""
    pieces: list[str] = []
    for term in sorted({" ".join(t.split()) for t in terms if t and t.strip()}, key=len, reverse=True):
        words = [re.escape(word) for word in term.split()]
        pieces.append(r"(?<!\w)" + r"\s+".join(words))
    return re.compile("|".join(pieces), re.IGNORECASE) if pieces else None


def snippet(text: str, terms: Sequence[str], *, max_chars: int = SNIPPET_CHARS) -> str:
    """An HTML-safe excerpt of `text` around its first match of any of `terms`.

    At most `max_chars` characters of the text (white space collapsed), cut at word boundaries
    where it can be, with `...` where text was left out. The text is HTML-escaped and every
    match inside the excerpt is wrapped in `<b>`...`</b>`; those tags are the only markup, and
    the cut is made before escaping, so no entity or tag is ever broken. Terms match at the
    start of a word, ignoring case, as the index's prefix search does; with no match the
    excerpt is the start of the text.
    """
    # Heading marks say nothing about the match; their words stay.
    flat = " ".join(_HEADING_MARK.sub("", text).split())
    if max_chars <= 0 or not flat:
        return _ELLIPSIS if flat else ""
    pattern = _term_pattern(terms)
    first = pattern.search(flat) if pattern else None
    start = 0
    if first is not None and first.end() > max_chars:
        # Put the match about a third of the way in, starting the excerpt at a word.
        start = max(0, min(first.start() - max_chars // 3, len(flat) - max_chars))
        if start > 0:
            space = flat.find(" ", start)
            start = space + 1 if 0 <= space < first.start() else start
    end = min(len(flat), start + max_chars)
    if end < len(flat):
        space = flat.rfind(" ", start, end + 1)
        if space > start + max_chars // 2:
            end = space
    window = flat[start:end]
    import html  # here: only a search's snippet escapes text

    out: list[str] = []
    at = 0
    if pattern is not None:
        for match in pattern.finditer(window):
            out.append(html.escape(window[at : match.start()], quote=False))
            out.append("<b>" + html.escape(match.group(0), quote=False) + "</b>")
            at = match.end()
    out.append(html.escape(window[at:], quote=False))
    body = "".join(out).strip()
    return (_ELLIPSIS if start > 0 else "") + body + (_ELLIPSIS if end < len(flat) else "")

"""Markdown documents with optional YAML frontmatter: decode, split, read, edit, render.

Core layer: pure functions over bytes and text; no file I/O (that is `fs`). A document is an
optional frontmatter block between two lines of exactly `---` at the very top, then a body.
Reading never changes anything; editing returns new text in which only the lines of the keys
that changed differ, and the body is carried over byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from moss_files.foundation import conflicts
from moss_files.foundation.errors import InvalidDocument, InvalidRequest, MossError

if TYPE_CHECKING:
    from moss_files.foundation.yaml_reader import YamlProblem

# The YAML reader (yaml_reader, yaml_scalars) loads where a frontmatter is read or edited: a
# file without one (PLAN.md, CURRENT.md) never needs it, and it costs a millisecond to load.

BOM = "\ufeff"
FENCE = "---"
DEFAULT_MAX_BYTES = 8 * 1024 * 1024


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


DELETE: Any = _Delete()
"""Pass as a value in `edit_frontmatter(changes=...)` to remove that key."""


class Document(NamedTuple):
    """A parsed document. `head + frontmatter_text + tail + body == text` always holds.

    A named tuple, not a frozen dataclass: every command that reads a file imports this module,
    and building a dataclass costs about a millisecond of each process's start-up."""

    meta: dict[str, Any]
    body: str
    text: str
    has_frontmatter: bool = False
    frontmatter_text: str = ""
    newline: str = "\n"
    body_line: int = 1  # 1-based line on which the body starts
    bom: bool = False


class FrontmatterRead(NamedTuple):
    """A frontmatter's text and the mapping it reads as (what an edit's own check read back):
    `parse(..., known=)` takes the mapping instead of reading that text once more."""

    text: str
    meta: dict[str, Any]


def decode(data: bytes, path: Path | str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[str, bool]:
    """Return `(text, had_bom)` for a file's bytes.

    Raises InvalidDocument: FILE_TOO_LARGE, BINARY_FILE (a NUL byte) or INVALID_ENCODING, with
    the line of the first offending byte.
    """
    if len(data) > max_bytes:
        raise InvalidDocument(
            f"file is {len(data)} bytes; the limit is {max_bytes}",
            code="FILE_TOO_LARGE",
            path=path,
            details={"max_bytes": max_bytes, "actual_bytes": len(data)},
        )
    nul = data.find(b"\0")
    if nul >= 0:
        raise InvalidDocument(
            "file holds NUL bytes; it is binary, not a text document",
            code="BINARY_FILE",
            path=path,
            line=data.count(b"\n", 0, nul) + 1,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidDocument(
            f"invalid UTF-8 at byte {exc.start}",
            code="INVALID_ENCODING",
            path=path,
            line=data.count(b"\n", 0, exc.start) + 1,
            details={"byte_offset": exc.start},
        ) from None
    return strip_bom(text)


def strip_bom(text: str) -> tuple[str, bool]:
    """Return `(text, had_bom)` with a leading BOM removed: it marks the encoding of the file the
    text was read from (Notepad writes one), and is no part of the text."""
    if text.startswith(BOM):
        return text[1:], True
    return text, False


def encode(text: str, bom: bool = False) -> bytes:
    """Inverse of `decode`."""
    return ((BOM if bom else "") + text).encode("utf-8")


def split(text: str, path: Path | str | None = None) -> tuple[str, str, str, str]:
    """Split text into `(head, frontmatter_text, tail, body)`; all empty but body when there is
    no frontmatter. `head` is the opening fence line and `tail` the closing one, each with its
    line ending, so the four parts concatenate to the input.

    Raises InvalidDocument FRONTMATTER_UNCLOSED when the opening fence has no closing fence.
    """
    first_end = text.find("\n")
    first_line = text if first_end < 0 else text[:first_end]
    if first_line.rstrip("\r") != FENCE or (first_end < 0 and first_line != FENCE):
        return "", "", "", text
    if first_end < 0:
        raise InvalidDocument("frontmatter opened with '---' but never closed", code="FRONTMATTER_UNCLOSED", path=path, line=1)
    head = text[: first_end + 1]
    # The closing fence: the first line that is exactly `---` (or `---` and a CR). Only lines
    # that start with `---` are looked at, found with `find` rather than line by line (the
    # search index splits every file it reads).
    position = first_end + 1
    while position >= 0:
        if text.startswith(FENCE, position):
            after = position + len(FENCE)
            ending = text[after : after + 2]  # what follows the dashes on their line
            if ending[:1] == "\n":
                tail_end = after + 1
            elif ending in ("", "\r", "\r\n"):  # the end of the text, or a CR line ending
                tail_end = after + len(ending)
            else:
                tail_end = -1  # more on the line: not a fence
            if tail_end >= 0:
                return head, text[first_end + 1 : position], text[position:tail_end], text[tail_end:]
        position = text.find("\n" + FENCE, position)
        if position >= 0:
            position += 1  # the start of the next line that begins with the dashes
    raise InvalidDocument(
        "frontmatter opened with '---' on line 1 but no closing '---' line follows",
        code="FRONTMATTER_UNCLOSED",
        path=path,
        line=1,
        hint="add a line of exactly '---' after the last frontmatter key",
    )


def parse(text: str, path: Path | str | None = None, *, bom: bool = False, known: FrontmatterRead | None = None) -> Document:
    """Parse decoded text into a Document using the fast read path. `known`, when its text is
    this document's frontmatter text, gives what that text reads as (the result is then the
    one reading it gives: an edit's check read the very same text).

    Raises InvalidDocument with the frontmatter code, the path and the 1-based line, and
    MERGE_CONFLICT (with the first marker's line) for a file an unfinished git merge left.
    """
    conflicts.check_no_conflict(text, path)
    head, fm_text, tail, body = split(text, path)
    meta: dict[str, Any] = {}
    if head:
        meta = known.meta if known is not None and known.text == fm_text else _load(fm_text, path)
    newline = "\r\n" if (head or text).split("\n", 1)[0].endswith("\r") else "\n"
    body_line = 1 + (head + fm_text + tail).count("\n")
    return Document(
        meta=meta,
        body=body,
        text=text,
        has_frontmatter=bool(head),
        frontmatter_text=fm_text,
        newline=newline,
        body_line=body_line,
        bom=bom,
    )


def parse_bytes(data: bytes, path: Path | str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES, known: FrontmatterRead | None = None) -> Document:
    """Decode and parse a file's bytes (`known` as `parse` takes it). Raises InvalidDocument as
    `decode` and `parse` do."""
    text, bom = decode(data, path, max_bytes=max_bytes)
    return parse(text, path, bom=bom, known=known)


def _load(fm_text: str, path: Path | str | None) -> dict[str, Any]:
    # `import … as`, not `from … import`: once loaded, a look-up without the import system's
    # fromlist handling (2 µs of every file the index reads).
    import moss_files.foundation.yaml_reader as yamlio

    try:
        return yamlio.load_fast(fm_text)
    except yamlio.YamlProblem as problem:
        raise _located(problem, fm_text, path) from None


def _located(problem: YamlProblem, fm_text: str, path: Path | str | None) -> InvalidDocument:
    # The frontmatter starts on line 2 of the file (line 1 is the opening fence).
    line = problem.line + 2 if problem.line is not None else None
    hint = None
    if problem.code == "FRONTMATTER_SYNTAX" and problem.line is not None:
        lines = fm_text.split("\n")
        if problem.line < len(lines) and "\t" in lines[problem.line]:
            hint = "YAML indentation must use spaces, not tabs"
    return InvalidDocument(problem.message, code=problem.code, path=path, line=line, hint=hint)


def render(meta: Mapping[str, Any], body: str, *, newline: str = "\n") -> str:
    """Render a new document: frontmatter keys in the mapping's order, then the body verbatim.

    An empty mapping renders the body alone, unless the body itself starts with a `---` line:
    then an empty frontmatter block goes first, so the body cannot be mistaken for one.
    """
    if not meta:
        if body.split("\n", 1)[0].rstrip("\r") == FENCE:
            return f"{FENCE}{newline}{FENCE}{newline}{body}"
        return body
    import moss_files.foundation.yaml_editor as yamlrt  # `import … as`: no fromlist handling for each file

    plain = dict(meta)
    fm_text = yamlrt.dump_simple(plain)
    if fm_text is None:
        fm_text = yamlrt.dump_roundtrip(yamlrt.styled_like(None, plain))
    if newline != "\n":
        fm_text = fm_text.replace("\n", newline)
    return f"{FENCE}{newline}{fm_text}{FENCE}{newline}{body}"


def find_key(meta: Mapping[str, Any], name: str) -> str | None:
    """Return the key of `meta` equal to `name` ignoring case (exact match preferred)."""
    if name in meta:
        return name
    lowered = name.lower()
    for key in meta:
        if isinstance(key, str) and key.lower() == lowered:
            return key
    return None


def find_path(meta: Mapping[str, Any], name: str) -> tuple[Any, ...] | None:
    """The keys leading to `name`'s value: `(key,)` for a top-level key (`find_key`), else,
    for a dotted path such as `settings.approval_mode`, one key per mapping it goes through
    (each found as `find_key` finds it). None when nothing is there."""
    key = find_key(meta, name)
    if key is not None:
        return (key,)
    keys: list[Any] = []
    node: Any = meta
    for part in name.split(".") if "." in name else ():
        found = find_key(node, part) if isinstance(node, Mapping) else None
        if found is None:
            return None
        keys.append(found)
        node = node[found]
    return tuple(keys) or None


def nested_changes(meta: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`changes` as `edit_frontmatter` takes them (top-level keys only): a dotted key naming no
    top-level key, such as `settings.approval_mode`, sets (or, with DELETE, removes) that key
    of the nested mapping, made where missing; the mapping is passed on whole, so only its
    changed line differs. A top-level key spelled with dots is still set as written.

    Raises InvalidRequest for an empty segment, a path through a value that is no mapping,
    or a key set both whole and through a path.
    """
    out: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    for key, value in changes.items():
        if "." not in key or key in meta:
            if key in nested:
                raise InvalidRequest(f"{key!r} is set both whole and through a dotted path", hint="set it one way")
            out[key] = value
            continue
        parts = key.split(".")
        if not all(parts):
            raise InvalidRequest(f"{key!r} has an empty part", hint="a dotted path names nested keys: settings.approval_mode=TURBO")
        top = parts[0]
        if top in out:
            raise InvalidRequest(f"{top!r} is set both whole and through a dotted path", hint="set it one way")
        if top not in nested:
            current = meta.get(top)
            if current is not None and not isinstance(current, Mapping):
                raise _not_a_mapping(key, top)
            nested[top] = _copy_tree(current or {})
        node = nested[top]
        for depth, part in enumerate(parts[1:-1], start=2):
            child = node.get(part)
            if child is None:
                if value is DELETE:
                    break
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise _not_a_mapping(key, ".".join(parts[:depth]))
            node = child
        else:
            if value is DELETE:
                node.pop(parts[-1], None)
            else:
                node[parts[-1]] = value
    for top, tree in nested.items():
        if top in meta or tree:
            out[top] = tree
    return out


def _copy_tree(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_tree(item) for item in value]
    return value


def _not_a_mapping(key: str, where: str) -> InvalidRequest:
    return InvalidRequest(
        f"{key!r}: {where!r} holds a value, not a mapping of keys, so nothing can be set inside it",
        hint=f"set {where!r} itself (KEY=VALUE), or delete it first ({where}=)",
    )


# --------------------------------------------------------------------------- faithful edits


def edit_frontmatter(
    text: str,
    changes: Mapping[str, Any],
    path: Path | str | None = None,
    *,
    parsed: Document | None = None,
) -> str:
    """Return `text` with top-level frontmatter keys set (or removed, with DELETE).

    Only the lines of changed keys differ in the result: other keys, comments, quoting, blank
    lines and the body keep their bytes. New keys go at the end of the frontmatter; a document
    without frontmatter gains one. The result is re-read and checked before it is returned.
    `parsed` is `text` parsed already, when the caller has it.

    Raises InvalidDocument when the existing frontmatter cannot be read.
    """
    return edit_frontmatter_read(text, changes, path, parsed=parsed)[0]


def edit_frontmatter_read(
    text: str,
    changes: Mapping[str, Any],
    path: Path | str | None = None,
    *,
    parsed: Document | None = None,
) -> tuple[str, FrontmatterRead | None]:
    """`edit_frontmatter`'s text, and what the check of the result read its frontmatter as
    (None when nothing was read back: no change, or no frontmatter before), for a caller that
    parses the result (`parse(..., known=)`)."""
    doc = parsed if parsed is not None and parsed.text == text else parse(text, path)
    changes = {
        key: value for key, value in changes.items() if ((key in doc.meta) if value is DELETE else (key not in doc.meta or not _same(doc.meta[key], value)))
    }
    if not changes:
        return text, None
    expected = dict(doc.meta)
    for key, value in changes.items():
        if value is DELETE:
            expected.pop(key, None)
        else:
            expected[key] = value
    nl = doc.newline
    if not doc.has_frontmatter:
        return (render(expected, doc.body, newline=nl) if expected else doc.body), None
    head = text[: text.index("\n") + 1]
    tail = text[len(head) + len(doc.frontmatter_text) : len(text) - len(doc.body)]
    quick = _splice_simple(doc.frontmatter_text, changes, nl)
    if quick is None:
        quick = _splice_scalars(doc.frontmatter_text, doc.meta, changes, nl)
    if quick is not None and (read := _read_as(quick, expected)) is not None:
        return head + quick + tail + doc.body, read
    from moss_files.foundation import yaml_editor as yamlrt  # ruamel loads only for edits the quick splice cannot do
    from moss_files.foundation.yaml_reader import YamlProblem

    try:
        roundtrip = yamlrt.load_roundtrip(doc.frontmatter_text)
    except YamlProblem as problem:
        raise _located(problem, doc.frontmatter_text, path) from None
    new_fm = _splice(doc.frontmatter_text, roundtrip, changes, nl)
    read = _read_as(new_fm, expected) if new_fm is not None else None
    if read is None:
        new_fm = _redump(roundtrip, changes, nl)
        read = _read_as(new_fm, expected)
        if read is None:
            raise MossError("edit would not read back as intended; nothing written", path=path)
    return head + read.text + tail + doc.body, read


def _reads_as(fm_text: str, expected: Mapping[str, Any]) -> bool:
    return _read_as(fm_text, expected) is not None


def _read_as(fm_text: str, expected: Mapping[str, Any]) -> FrontmatterRead | None:
    """What `fm_text` reads as, when that is `expected` (same values, same key order); None
    when it is not, or does not read."""
    from moss_files.foundation import yaml_reader as yamlio
    from moss_files.foundation.yaml_reader import YamlProblem

    try:
        got = yamlio.load_fast(fm_text)
    except YamlProblem:
        return None
    return FrontmatterRead(fm_text, got) if _same(got, expected) and list(got) == list(expected) else None


def _same(a: Any, b: Any) -> bool:
    # NaN never equals itself; compare by representation so a NaN round-trip still counts.
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _redump(roundtrip: Any, changes: Mapping[str, Any], nl: str) -> str:
    """Fallback: apply changes to ruamel's tree and dump it whole (comments kept by ruamel)."""
    from moss_files.foundation import yaml_editor as yamlrt

    for key, value in changes.items():
        if value is DELETE:
            roundtrip.pop(key, None)
        else:
            roundtrip[key] = yamlrt.styled_like(roundtrip.get(key), value)
    text = yamlrt.dump_roundtrip(roundtrip)
    if text == "{}\n":
        text = ""
    return text.replace("\n", nl) if nl != "\n" else text


def _splice(fm_text: str, roundtrip: Any, changes: Mapping[str, Any], nl: str) -> str | None:
    """Replace just the lines of each changed key; None when the layout is too unusual."""
    keys = list(roundtrip.keys())
    starts: dict[Any, int] = {}
    for key in keys:
        line, column = roundtrip.lc.key(key)
        if column != 0:
            return None  # an indented top-level mapping; let ruamel re-emit it
        starts[key] = line
    order = sorted(starts.values())
    if order != [starts[k] for k in keys] or len(set(order)) != len(order):
        return None  # keys out of line order or several on one line (flow mapping)

    def entry(key: Any, value: Any, old_lines: list[str]) -> list[str]:
        return _render_entry(key, value, roundtrip.get(key) if old_lines else None, nl)

    return _splice_lines(fm_text.splitlines(keepends=True), starts, changes, entry, nl)


# A colon is safe inside (timestamps), never before a space or at the end: checked below.
_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_./~(][A-Za-z0-9 _.,/~+@()=%:-]*")


def _splice_simple(fm_text: str, changes: Mapping[str, Any], nl: str) -> str | None:
    """The common edit without ruamel: frontmatter the plain scanner reads, new values that are
    plain scalars or lists of them. Returns None for anything else (the round-trip path then
    does the edit); the caller re-reads the result either way."""
    from moss_files.foundation import yaml_reader as yamlio

    if yamlio.scan_simple(fm_text) is None:
        return None
    lines = fm_text.splitlines(keepends=True)
    # In what the plain scanner accepts, every line starting in column 0 with a key is an entry.
    starts = {line.split(":", 1)[0]: index for index, line in enumerate(lines) if line[:1] not in ("", " ", "-", "#", "\r", "\n")}
    return _splice_lines(lines, starts, changes, lambda key, value, old_lines: _quick_entry(key, value, old_lines, nl), nl)


def _splice_scalars(fm_text: str, meta: Mapping[str, Any], changes: Mapping[str, Any], nl: str) -> str | None:
    """The common edit of a frontmatter the plain scanner declines only for its depth (a list
    of mappings, as a task's plan): top-level keys set to plain scalars (or removed), without
    ruamel. Only where every line is plain (`yamlio.plain_lines`), every top-level key starts a
    line in column 0 in the parser's order and no other line does, and for keys whose old
    value is no list or mapping. Returns None for anything else."""
    if any(value is not DELETE and isinstance(value, list | dict) for value in changes.values()):
        return None
    from moss_files.foundation import yaml_reader as yamlio

    if any(isinstance(meta.get(key), list | dict) for key in changes) or not yamlio.plain_lines(fm_text):
        return None
    lines = fm_text.splitlines(keepends=True)
    starts: dict[str, int] = {}
    for index, line in enumerate(lines):
        if line[:1] in ("", " ", "\t", "-", "#", "\r", "\n"):
            continue
        key = line.split(":", 1)[0]
        if key in starts:
            return None
        starts[key] = index
    if list(starts) != list(meta):
        return None
    return _splice_lines(lines, starts, changes, lambda key, value, old_lines: _quick_entry(key, value, old_lines, nl), nl)


def _splice_lines(
    lines: list[str],
    starts: Mapping[Any, int],
    changes: Mapping[str, Any],
    entry: Callable[[Any, Any, list[str]], list[str] | None],
    nl: str,
) -> str | None:
    """Apply `changes` to frontmatter `lines` whose top-level keys start at `starts`.

    Each key owns its lines up to the next key, less trailing blank and comment lines (they
    belong to what follows). `entry(key, value, old_lines)` renders a key's new lines, or
    returns None when it cannot, which makes the whole splice return None.
    """
    order = sorted(starts.values())
    spans: dict[Any, tuple[int, int]] = {}
    for key, begin in starts.items():
        position = order.index(begin)
        end = order[position + 1] if position + 1 < len(order) else len(lines)
        while end - 1 > begin and _is_trailing_filler(lines[end - 1]):
            end -= 1
        spans[key] = (begin, end)
    replacements: dict[int, tuple[int, list[str]]] = {}
    appended: list[str] = []
    for key, value in changes.items():
        span = spans.get(key)
        if value is DELETE:
            if span is not None:
                replacements[span[0]] = (span[1], [])
            continue
        old_lines = lines[span[0] : span[1]] if span else []
        block = entry(key, value, old_lines)
        if block is None:
            return None
        if span is None:
            appended.extend(block)
        else:
            replacements[span[0]] = (span[1], _keep_key_text_and_comment(old_lines, block, key))
    out: list[str] = []
    index = 0
    while index < len(lines):
        if index in replacements:
            end, block = replacements[index]
            out.extend(block)
            index = end
            continue
        out.append(lines[index])
        index += 1
    if appended:
        if out and not out[-1].endswith("\n"):
            out[-1] += nl
        out.extend(appended)
    return "".join(out)


def _quick_entry(key: str, value: Any, old_lines: list[str], nl: str) -> list[str] | None:
    """`key: value` lines written the way the round-trip path would write them, or None."""
    if _quick_scalar(key, "") != key:
        return None  # a key such as `n` or `on` that the round-trip path would quote
    old_value = old_lines[0].split(":", 1)[1].strip() if old_lines else ""
    if isinstance(value, list):
        items = [_quick_scalar(item, "") for item in value]
        if any(item is None for item in items):
            return None
        if old_value.startswith("["):  # keep a flow list flow; anything else becomes a block list
            return [f"{key}: [{', '.join(items)}]{nl}"]  # type: ignore[arg-type]
        if not items:
            return [f"{key}: []{nl}"]
        return [f"{key}:{nl}", *(f"  - {item}{nl}" for item in items)]
    scalar = _quick_scalar(value, old_value[:1] if old_value[:1] in ("'", '"') else "")
    return None if scalar is None else [f"{key}: {scalar}{nl}"]


def _quick_scalar(value: Any, quote: str) -> str | None:
    """A scalar as YAML text, in the given quote style when it is a string; None if unsure."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str) or not _PLAIN_SAFE.fullmatch(value) or value != value.strip():
        return None
    if " #" in value or ": " in value or value.endswith(":"):
        return None
    if quote == "'":
        return f"'{value}'"
    if quote == '"':
        return f'"{value}"'
    from moss_files.foundation import yaml_reader as yamlio
    from moss_files.foundation import yaml_scalars as yaml12

    if not isinstance(yamlio.resolve_plain_cached(value), str) or yaml12.YAML11_LOOKALIKE_RE.match(value):
        return None  # would read as another type somewhere: let the round-trip path quote it
    return value


def _is_trailing_filler(line: str) -> bool:
    stripped = line.strip()
    return not stripped or (line[0] == "#")


def _render_entry(key: Any, value: Any, old: Any, nl: str) -> list[str]:
    from moss_files.foundation import yaml_editor as yamlrt

    offset = 2
    mapping = yamlrt.CommentedMap()
    mapping[key] = yamlrt.styled_like(old, value)
    text = yamlrt.dump_roundtrip(mapping, sequence_offset=offset)
    if nl != "\n":
        text = text.replace("\n", nl)
    return text.splitlines(keepends=True)


_COMMENT_AFTER_PLAIN = re.compile(r"[ \t]+#")


def _keep_key_text_and_comment(original: list[str], block: list[str], key: Any) -> list[str]:
    """Carry over the key as the human wrote it and a trailing comment on a one-line value."""
    if len(original) != 1 or len(block) != 1:
        return block
    old_line = original[0]
    ending = old_line[len(old_line.rstrip("\r\n")) :]
    old_body = old_line.rstrip("\r\n")
    new_body = block[0].rstrip("\r\n")
    colon = _key_colon(old_body)
    new_colon = _key_colon(new_body)
    if colon is not None and new_colon is not None:
        # Keep the key as written and the blanks the human put after its colon.
        gap_end = colon + 1
        while gap_end < len(old_body) and old_body[gap_end] in " \t":
            gap_end += 1
        value_text = new_body[new_colon + 1 :].lstrip(" ")
        new_body = old_body[:gap_end] + value_text if gap_end > colon + 1 else old_body[: colon + 1] + " " + value_text
    comment = _trailing_comment(old_body, colon)
    if comment:
        new_body += comment
    return [new_body + (ending or block[0][len(block[0].rstrip("\r\n")) :])]


def _key_colon(line: str) -> int | None:
    """Index of the colon ending a top-level key on `line` (quoted keys included)."""
    if line[:1] in ("'", '"'):
        end = _quoted_end(line, 0)
        if end is None:
            return None
        return end if line[end : end + 1] == ":" else None
    match = re.match(r"[^:#]*?:(?=\s|$)", line)
    return match.end() - 1 if match else None


def _quoted_end(line: str, start: int) -> int | None:
    quote = line[start]
    index = start + 1
    while index < len(line):
        char = line[index]
        if quote == '"' and char == "\\":
            index += 2
            continue
        if char == quote:
            if quote == "'" and line[index + 1 : index + 2] == "'":
                index += 2
                continue
            return index + 1
        index += 1
    return None


def _trailing_comment(line: str, colon: int | None) -> str:
    """The ` # comment` at the end of a `key: scalar` line, with its leading blanks."""
    if colon is None:
        return ""
    position = colon + 1
    while position < len(line) and line[position] in " \t":
        position += 1
    if position >= len(line):
        return ""
    if line[position] in ("'", '"'):
        end = _quoted_end(line, position)
        if end is None:
            return ""
        rest = line[end:]
        return rest if rest.strip().startswith("#") else ""
    if line[position] == "#":
        return ""  # an empty value followed by a comment; the new value's line replaces it
    match = _COMMENT_AFTER_PLAIN.search(line, position)
    return line[match.start() :] if match else ""


def changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The `changes` mapping that turns `old` into `new` (DELETE for removed keys)."""
    changes: dict[str, Any] = {key: DELETE for key in old if key not in new}
    changes.update({key: value for key, value in new.items() if key not in old or not _same(old[key], value)})
    return changes

"""Needlecast messages: the model, the single-file block rule, and file-per-message documents.

Core layer: pure functions over text; no I/O, no clock (times are passed in). Imports only the
stdlib and the `moss_files` core (errors, yamlio, document).

A message is a header of `key: value` lines plus a markdown body. The known keys are `id, from,
to, thread, type, time`, read in any letter case (`From:` and `from:` both exist in the wild);
any other key is kept, in order, as `extra`. A file-per-message file (layout v2) is an ordinary
frontmatter document. A single mailbox file (layout v1, `inbox.md` / `outbox.md`) holds a
preamble followed by message blocks, split by this rule:

* A **block start** is a line of exactly `---` followed by one or more non-blank *header lines*
  and then another line of exactly `---`, where the first header line is a `key:` line and at
  least one header line is a known message key (`id`, `from`, `to`, `thread`, `type`, `time`,
  any case). At most MAX_HEADER_LINES header lines are considered.
* A **malformed start** is a `---` line that opens no block but is plainly meant to: it is
  followed by `key:` lines holding a known message key that no `---` line closes (a blank
  line, the body or the end of the file comes first: FRONTMATTER_UNCLOSED), or by a first line
  that is not a `key:` line and then, before any blank line, a known message key and a closing
  `---` (MESSAGE_INVALID). It starts a block all the same, one that reads as that problem, so
  a hand-written message missing its closing fence is reported (listed, dead-lettered) rather
  than read as part of the message before it or of the preamble.
* A block runs from its start to the next block start, or to the end of the file. Text before
  the first block start is the preamble (a title, a comment) and belongs to no message.
* The **body** is everything after the closing `---` of the header. Trailing line breaks are
  trimmed to a single `\\n`; every other byte is kept.
* **Escaping**: a body line made of zero or more backslashes followed by `---` is written with
  one more backslash (`---` becomes `\\---`), and the reader removes one. So a written body
  never contains a line of exactly `---`, no body can ever be read as a block start, and
  multi-paragraph bodies, code fences and horizontal rules survive. A hand-written body line
  `---` that does not form a block start is read as itself.

The writer (`render_block`) emits each header value on one line (plain when that reads back
identically, otherwise a double-quoted YAML string or flow collection), so a header can never
contain a blank line or a `---` line; `tests/test_needlecast_message.py` checks with random
bodies and values that the reader splits every written file into exactly what was written.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from moss_files.foundation import document, formats
from moss_files.foundation import yaml_reader as yamlio
from moss_files.foundation import yaml_scalars as yaml12
from moss_files.foundation.errors import InvalidDocument, InvalidRequest

KNOWN_KEYS = ("id", "from", "to", "thread", "type", "time")
CAPITALISED = {key: key.capitalize() for key in KNOWN_KEYS} | {"id": "ID"}
TYPES = ("task", "question", "response", "milestone", "directive", "blocked", "done")
ALL = "all"
ENVOY = "envoy"
RESERVED_NAMES = frozenset({ALL, ENVOY})
MAX_HEADER_LINES = 64
# The most one message may hold, header and body, as written in a mailbox: `send` refuses more,
# the router dead-letters more (MESSAGE_TOO_LARGE), and the sidecar's 1 MiB request limit
# matches it, so no sleeve can fill another's inbox with a few huge messages.
MAX_MESSAGE_BYTES = 1024 * 1024
FENCE = "---"

_KEY_LINE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*[ \t]*:(?:[ \t]|$)")
_MESSAGE_KEY_LINE = re.compile(r"(?i:id|from|to|thread|type|time)[ \t]*:(?:[ \t]|$)")
_ESCAPABLE = re.compile(r"^(\\*---\r?)$", re.MULTILINE)
_ESCAPED = re.compile(r"^\\(\\*---\r?)$", re.MULTILINE)
_PLAIN_FLOW_ITEM = re.compile(r"[A-Za-z0-9_.@/+~][A-Za-z0-9_.@/+~ \-]*")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


@dataclass(frozen=True, slots=True)
class Message:
    """One message. `to` is always a tuple (`("all",)` for a broadcast); `extra` holds unknown
    header keys in file order with their original spelling."""

    id: str | None = None
    sender: str | None = None
    to: tuple[str, ...] = ()
    thread: str | None = None
    type: str | None = None
    time: str | None = None
    body: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    capitalised: bool = False  # header dialect it was read in (`From:` rather than `from:`)


@dataclass(frozen=True, slots=True)
class Block:
    """One message block of a single-file mailbox, exactly as it appears in the file."""

    raw: str  # from the opening fence up to (not including) the next block start
    line: int  # 1-based line of the opening fence
    header: str  # the lines between the fences, with their line ends
    body_raw: str  # everything after the closing fence, escapes not yet removed
    malformed: tuple[str, str] | None = None  # (code, reason) of a malformed start: no header, no body


@dataclass(frozen=True, slots=True)
class Mailfile:
    """A single-file mailbox split into its preamble and blocks (`preamble + raws == text`)."""

    preamble: str
    blocks: tuple[Block, ...]
    newline: str = "\n"


# --------------------------------------------------------------------------- splitting


def _is_fence(line: str) -> bool:
    return line == FENCE or line == FENCE + "\r"


def _header_end(lines: list[str], start: int) -> int | None:
    """Index of the closing fence when `lines[start]` opens a block, else None."""
    first = start + 1
    if first >= len(lines) or not _KEY_LINE.match(lines[first]):
        return None
    has_message_key = False
    for index in range(first, min(len(lines), first + MAX_HEADER_LINES + 1)):
        line = lines[index]
        if _is_fence(line):
            return index if has_message_key and index > first else None
        if not line.strip():
            return None
        if _MESSAGE_KEY_LINE.match(line):
            has_message_key = True
    return None


def _continues_header(line: str) -> bool:
    """True for a line a header may hold: a `key:` line, or a YAML continuation (indented, or a
    `- item` of a block list)."""
    return bool(_KEY_LINE.match(line)) or line[:1] in (" ", "\t") or line.startswith("- ")


def _malformed_start(lines: list[str], start: int) -> tuple[str, str] | None:
    """(code, reason) when the fence `lines[start]`, which opens no block, is a malformed start
    (see the module docstring); None when it is text (a rule in a body, a non-message header)."""
    first = start + 1
    if first >= len(lines) or not lines[first].strip() or _is_fence(lines[first]):
        return None
    window = lines[first : first + MAX_HEADER_LINES + 1]
    if _KEY_LINE.match(lines[first]):
        run = []
        for line in window:
            if not _continues_header(line):
                break
            run.append(line)
        if any(_MESSAGE_KEY_LINE.match(line) for line in run):
            return "FRONTMATTER_UNCLOSED", "this message header has no closing '---' line: end the header lines with '---' before the message text"
        return None
    for index, line in enumerate(window[1:], start=1):
        if not line.strip():
            return None
        if _is_fence(line):
            if any(_MESSAGE_KEY_LINE.match(header) for header in window[1:index]):
                return "MESSAGE_INVALID", "the first line of this message header is not a `key: value` line"
            return None
    return None


def split_blocks(text: str) -> Mailfile:
    """Split a single-file mailbox into preamble and blocks by the module's block rule."""
    lines = text.split("\n")
    # `lines` drops the "\n"s; offsets[i] is where line i starts in `text`.
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    # (opening line index, closing line index, or the problem of a malformed start)
    starts: list[tuple[int, int | tuple[str, str]]] = []
    index = 0
    while index < len(lines):
        if _is_fence(lines[index]):
            end = _header_end(lines, index)
            if end is not None:
                starts.append((index, end))
                index = end + 1
                continue
            problem = _malformed_start(lines, index)
            if problem is not None:
                starts.append((index, problem))
        index += 1
    first_break = text.find("\n")
    newline = "\r\n" if first_break > 0 and text[first_break - 1] == "\r" else "\n"
    if not starts:
        return Mailfile(text, (), newline)
    blocks: list[Block] = []
    for number, (open_index, close_index) in enumerate(starts):
        begin = offsets[open_index]
        finish = offsets[starts[number + 1][0]] if number + 1 < len(starts) else len(text)
        if isinstance(close_index, tuple):
            blocks.append(Block(raw=text[begin:finish], line=open_index + 1, header="", body_raw="", malformed=close_index))
            continue
        header_begin = offsets[open_index + 1]
        header_end = offsets[close_index]
        body_begin = min(len(text), offsets[close_index] + len(lines[close_index]) + 1)
        blocks.append(
            Block(
                raw=text[begin:finish],
                line=open_index + 1,
                header=text[header_begin:header_end],
                body_raw=text[body_begin:finish],
            )
        )
    return Mailfile(text[: offsets[starts[0][0]]], tuple(blocks), newline)


def escape_body(body: str) -> str:
    """Add one backslash to every body line that is backslashes followed by `---`."""
    return _ESCAPABLE.sub(r"\\\1", body)


def unescape_body(body: str) -> str:
    """Inverse of `escape_body`."""
    return _ESCAPED.sub(r"\1", body)


def normalize_body(body: str) -> str:
    """The body as a single-file mailbox stores it: trailing line breaks trimmed to one `\\n`."""
    trimmed = body.rstrip("\r\n")
    return trimmed + "\n" if trimmed else ""


# --------------------------------------------------------------------------- header -> Message


def _text_value(meta: Mapping[str, Any], name: str, where: dict[str, Any]) -> str | None:
    key = document.find_key(meta, name)
    if key is None:
        return None
    value = meta[key]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidDocument(f"message key {key!r} must be a single value", code="MESSAGE_INVALID", **where)
    return str(value)


def _recipients(value: Any, where: dict[str, Any]) -> tuple[str, ...]:
    if value is None:
        return ()
    items: list[Any]
    if isinstance(value, str):
        # Hand-written `To: bob, carol` is common; read it as two recipients.
        items = [part for part in (piece.strip() for piece in value.split(",")) if part]
    elif isinstance(value, list):
        items = value
    else:
        raise InvalidDocument("`to` must be a name, a list of names, or `all`", code="MESSAGE_INVALID", **where)
    names: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidDocument("every recipient in `to` must be a non-empty name", code="MESSAGE_INVALID", **where)
        name = item.strip()
        if name.lower() in RESERVED_NAMES:
            name = name.lower()
        if name not in names:
            names.append(name)
    return tuple(names)


def message_from_meta(meta: Mapping[str, Any], body: str, *, path: Path | str | None = None, line: int | None = None) -> Message:
    """Build a Message from a parsed header mapping. Raises InvalidDocument MESSAGE_INVALID."""
    where: dict[str, Any] = {"path": path, "line": line}
    known = {document.find_key(meta, name) for name in KNOWN_KEYS} - {None}
    to_key = document.find_key(meta, "to")
    capital_votes = sum(1 for key in known if isinstance(key, str) and key[:1].isupper())
    return Message(
        id=_text_value(meta, "id", where),
        sender=_text_value(meta, "from", where),
        to=_recipients(meta[to_key] if to_key is not None else None, where),
        thread=_text_value(meta, "thread", where),
        type=_text_value(meta, "type", where),
        time=_text_value(meta, "time", where),
        body=body,
        # The format version is the file's, not the message's: it is not carried along.
        extra={key: value for key, value in meta.items() if key not in known and key != formats.MARKER},
        capitalised=capital_votes * 2 > len(known),
    )


def parse_header(header: str, *, path: Path | str | None = None, line: int | None = None) -> dict[str, Any]:
    """Parse a block's header lines (`line`: 1-based file line of the first header line).

    Raises InvalidDocument with the frontmatter code and the file line of the problem.
    """
    try:
        return yamlio.load_fast(header)
    except yamlio.YamlProblem as problem:
        at = line + problem.line if line is not None and problem.line is not None else line
        raise InvalidDocument(f"message header: {problem.message}", code=problem.code, path=path, line=at) from None


def parse_block(block: Block, *, path: Path | str | None = None, line_offset: int = 0) -> Message:
    """Parse one block into a Message. Raises InvalidDocument naming the file and line (a
    malformed start: FRONTMATTER_UNCLOSED or MESSAGE_INVALID, at its `---` line)."""
    if block.malformed is not None:
        code, reason = block.malformed
        raise InvalidDocument(reason, code=code, path=path, line=block.line + line_offset)
    first_header_line = block.line + 1 + line_offset
    meta = parse_header(block.header, path=path, line=first_header_line)
    body = normalize_body(unescape_body(block.body_raw))
    return message_from_meta(meta, body, path=path, line=block.line + line_offset)


def parse_message_document(text: str, *, path: Path | str | None = None) -> Message:
    """Parse a file-per-message document (frontmatter + body, body kept verbatim).

    Raises InvalidDocument for malformed frontmatter, MESSAGE_INVALID for a file without one,
    FORMAT_TOO_NEW for a file of a newer format.
    """
    doc = document.parse(text, path)
    if not doc.has_frontmatter:
        raise InvalidDocument("a message file must start with a `---` header", code="MESSAGE_INVALID", path=path, line=1)
    formats.check_document("message", doc, path)
    return message_from_meta(doc.meta, doc.body, path=path, line=1)


def dialect_of(mailfile: Mailfile) -> bool | None:
    """True when the file's headers use capitalised keys, False for lowercase, None if unknown."""
    for block in mailfile.blocks:
        for line in block.header.split("\n"):
            match = _MESSAGE_KEY_LINE.match(line)
            if match:
                return line[:1].isupper()
    return None


# --------------------------------------------------------------------------- Message -> text


def _needs_escape(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or code == 0x7F or 0x80 <= code <= 0x9F or code in (0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF) or 0xD800 <= code <= 0xDFFF


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar on one line, escaping everything a reader could misread."""
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif _needs_escape(char):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def _plain_reads_back(text: str) -> bool:
    if not text or text != text.strip() or any(_needs_escape(c) for c in text):
        return False
    if yaml12.YAML11_LOOKALIKE_RE.match(text):
        return False  # `yes`, `0777`: strings to us, but not to a YAML 1.1 reader of the file
    try:
        return yamlio.load_fast(f"k: {text}\n") == {"k": text}
    except yamlio.YamlProblem:
        return False


def _scalar(value: Any, *, in_flow: bool = False) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, str):
        if in_flow:
            plain = bool(_PLAIN_FLOW_ITEM.fullmatch(value)) and value == value.strip() and _plain_reads_back(value)
        else:
            plain = _plain_reads_back(value)
        return value if plain else _quoted(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_scalar(item, in_flow=True) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)}: {_scalar(v, in_flow=True)}" for k, v in value.items()) + "}"
    raise InvalidRequest(f"cannot write a {type(value).__name__} in a message header", code="MESSAGE_INVALID")


def _key(key: Any) -> str:
    if isinstance(key, str):
        if _PLAIN_KEY.fullmatch(key) and _plain_reads_back(key) and key.lower() != "null":
            return key
        return _quoted(key)
    return _scalar(key, in_flow=True)


def header_items(message: Message, *, capitalised: bool | None = None) -> list[tuple[str, Any]]:
    """The header as (key, value) pairs in canonical order, known keys in the chosen case."""
    upper = message.capitalised if capitalised is None else capitalised

    def name(key: str) -> str:
        return CAPITALISED[key] if upper else key

    items: list[tuple[str, Any]] = []
    if message.id is not None:
        items.append((name("id"), message.id))
    if message.sender is not None:
        items.append((name("from"), message.sender))
    if message.to:
        items.append((name("to"), message.to[0] if len(message.to) == 1 else list(message.to)))
    for key in ("thread", "type", "time"):
        value = getattr(message, key)
        if value is not None:
            items.append((name(key), value))
    items.extend(message.extra.items())
    return items


def render_header(message: Message, *, capitalised: bool | None = None, newline: str = "\n") -> str:
    """Header lines (each ending with `newline`), one line per key."""
    return "".join(f"{_key(k)}: {_scalar(v)}{newline}" for k, v in header_items(message, capitalised=capitalised))


def check_writable(message: Message) -> None:
    """Refuse text no file can hold. Raises InvalidRequest MESSAGE_INVALID."""
    texts = [("body", message.body)] + [(str(k), v) for k, v in header_items(message) if isinstance(v, str)]
    for label, text in texts:
        if "\x00" in text:
            raise InvalidRequest(f"message {label} holds a NUL character", code="MESSAGE_INVALID")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequest(f"message {label} is not valid Unicode text", code="MESSAGE_INVALID") from None


def block_size_bound(message: Message) -> int | None:
    """At least the UTF-8 size of `render_block(message)`, from the lengths of its texts alone,
    or None when a header value is not text or a list of texts (then only rendering tells).

    A character takes at most 8 bytes in the header (`\\u` and four digits in a quoted
    value; 4 in UTF-8), and a body line gains at most one backslash (before a `---`, so at most
    one character in three); each key, value and list item adds at most its quotes, a
    separator and a line break.
    """
    total = 16 + 8 * len(message.body)
    to: Any = message.to
    for key, value in [
        ("id", message.id),
        ("from", message.sender),
        ("to", to),
        ("thread", message.thread),
        ("type", message.type),
        ("time", message.time),
        *message.extra.items(),
    ]:
        if value is None:
            continue
        if not isinstance(key, str):
            return None
        total += 8 * len(key) + 16
        if isinstance(value, str):
            total += 8 * len(value) + 8
        elif isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
            total += sum(8 * len(item) + 8 for item in value) + 8
        else:
            return None
    return total


def check_size(message: Message) -> None:
    """Refuse a message over MAX_MESSAGE_BYTES. Raises InvalidRequest MESSAGE_TOO_LARGE (413)."""
    bound = block_size_bound(message)
    if bound is not None and bound <= MAX_MESSAGE_BYTES:
        return  # far below the limit: no need to render the block to know (a router's pass checks every message)
    size = len(render_block(message).encode("utf-8"))
    if size > MAX_MESSAGE_BYTES:
        raise InvalidRequest(
            f"the message is {size} bytes; the limit is {MAX_MESSAGE_BYTES}",
            code="MESSAGE_TOO_LARGE",
            status=413,
            details={"max_bytes": MAX_MESSAGE_BYTES, "actual_bytes": size},
            hint="send a path to a file in the repository instead of its contents",
        )


def render_block(message: Message, *, capitalised: bool | None = None, newline: str = "\n") -> str:
    """One single-file block: fences, header, escaped body, then a blank separator line."""
    check_writable(message)
    body = normalize_body(message.body)
    if newline != "\n":
        body = body.replace("\r\n", "\n").replace("\n", newline)
    return f"{FENCE}{newline}{render_header(message, capitalised=capitalised, newline=newline)}{FENCE}{newline}{escape_body(body)}{newline}"


def join_blocks(existing: str, blocks: Iterable[str], newline: str = "\n") -> str:
    """Append rendered blocks to a mailbox's text, keeping a blank line between blocks."""
    text = existing
    pieces = list(blocks)
    if not pieces:
        return text
    if text and not text.endswith("\n"):
        text += newline
    if text and not text.endswith(newline + newline) and text.strip():
        text += newline
    return text + "".join(pieces)


def render_message_document(message: Message, *, capitalised: bool | None = None) -> str:
    """A file-per-message document, at the current format version (its last header line);
    the body is kept verbatim (no escaping is needed there)."""
    check_writable(message)
    version = f"{formats.MARKER}: {formats.KINDS['message'].current}\n"
    return f"{FENCE}\n{render_header(message, capitalised=capitalised)}{version}{FENCE}\n{message.body}"


# --------------------------------------------------------------------------- identity


def content_digest(message: Message) -> str:
    """A fingerprint of what a message says (not where or how it is spelled)."""
    to = ",".join(message.to)
    text = "\x1f".join([message.type or "", message.thread or "", to, normalize_body(message.body)])
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=10).hexdigest()


def raw_digest(raw: str | bytes) -> str:
    """Fingerprint of a block's bytes, ignoring trailing whitespace (separators vary)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return hashlib.blake2b(data.rstrip(), digest_size=10).hexdigest()


def derive_id(sender: str, raw: str | bytes, discriminator: str) -> str:
    """The id of a hand-written message that has none: the same for the same sender, bytes and
    position (`discriminator`: occurrence number in a file, or the file name), so a router that
    crashes and retries names the message the same way and cannot deliver it twice."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    seed = f"{sender}\x00{discriminator}\x00".encode() + data.rstrip()
    return "nc-" + hashlib.blake2b(seed, digest_size=8).hexdigest()


# --------------------------------------------------------------------------- JSON shape


def message_to_dict(message: Message) -> dict[str, Any]:
    """The one JSON shape of a message (CLI --json, HTTP, MCP)."""
    return {
        "id": message.id,
        "from": message.sender,
        "to": list(message.to),
        "thread": message.thread,
        "type": message.type,
        "time": message.time,
        "body": message.body,
        "extra": {str(k): v for k, v in message.extra.items()},
    }


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Inverse of `message_to_dict` (for HTTP input). Raises InvalidRequest MESSAGE_INVALID."""
    if not isinstance(data, Mapping):
        raise InvalidRequest("a message must be a JSON object", code="MESSAGE_INVALID")
    extra = data.get("extra") or {}
    if not isinstance(extra, Mapping):
        raise InvalidRequest("`extra` must be an object", code="MESSAGE_INVALID")
    body = data.get("body", "")
    if not isinstance(body, str):
        raise InvalidRequest("`body` must be a string", code="MESSAGE_INVALID")
    meta: dict[str, Any] = {key: data[key] for key in KNOWN_KEYS if data.get(key) is not None}
    try:
        message = message_from_meta({**meta, **{k: v for k, v in extra.items() if k.lower() not in KNOWN_KEYS}}, body)
    except InvalidDocument as err:
        raise InvalidRequest(err.message, code="MESSAGE_INVALID") from None
    check_writable(message)
    return message


def with_changes(message: Message, **changes: Any) -> Message:
    """A copy with fields replaced (extra keys merged when `extra` is given)."""
    if "extra" in changes:
        changes["extra"] = {**message.extra, **changes["extra"]}
    return replace(message, **changes)


# --------------------------------------------------------------------------- format versions


def _message_file_to_2(text: str, facts: formats.Facts) -> str:
    """Format 1 to 2 of a message file: a file without an id is known by one derived from its
    bytes, which any rewrite would change (and with it the read marks that name it), so that
    id is stored first; then the version is recorded."""
    doc = document.parse(text, facts.relpath)
    changes: dict[str, Any] = {}
    if not _text_value(doc.meta, "id", {"path": facts.relpath, "line": 1}):
        message = message_from_meta(doc.meta, doc.body, path=facts.relpath, line=1)
        name = facts.relpath.rsplit("/", 1)[-1]
        key = document.find_key(doc.meta, "id") or ("ID" if message.capitalised else "id")
        changes[key] = derive_id(message.sender or "", text.encode("utf-8", "surrogatepass"), name)
    changes[formats.MARKER] = 2
    return document.edit_frontmatter(text, changes, facts.relpath)


formats.register_steps(
    "message",
    (formats.Step(2, "stores the id a file without one was known by (derived from its bytes), records the version", _message_file_to_2),),
)

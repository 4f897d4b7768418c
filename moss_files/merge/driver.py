"""The git merge driver: `moss merge driver %O %A %B %P` merges one file by its kind.

Shell layer. Git runs the driver for every path `.gitattributes` marks `merge=moss`, with the
ancestor's, our and their versions in three temporary files; the driver writes the result
into our file (%A) and exits 0 when it is clean, 1 when conflict markers are left for a
person. Which merge applies is decided from the path (%P) by `merge_for` (pure): a board
item merges field by field, its status and its plan by the board's rules (a finished item
stays finished; two clones' amendments of one step are both kept); a version
that cannot be read as its kind (or that already holds markers, as a recursive merge's
virtual ancestor may) falls back to the plain line merge, which git's own driver would do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from moss_files.foundation import conflicts, document, formats, fs
from moss_files.foundation.docmerge import CONFLICT, merge_document
from moss_files.foundation.errors import InvalidDocument, InvalidRequest
from moss_files.foundation.textmerge import Labels, merge_text

Merge = Callable[[str, str, str, Labels], tuple[str, int]]

# Board statuses a task or epic does not leave by a merge with an older edit.
_FINAL_STATUSES = frozenset({"DONE", "ARCHIVED", "COMPLETED"})


@dataclass(frozen=True, slots=True)
class DriverReport:
    """What one run of the driver did: which merge, how many conflicts are left, how long."""

    path: str
    kind: str
    conflicts: int
    fallback: str | None
    seconds: float


def _board_status(base: object, ours: object, theirs: object) -> object:
    """A board item's status when both sides changed it: a finished item stays finished."""
    finished = [value for value in (ours, theirs) if isinstance(value, str) and value.upper() in _FINAL_STATUSES]
    return finished[0] if len(finished) == 1 else CONFLICT


def _documents(rules: dict[str, Callable[[object, object, object], object]] | None = None) -> Merge:
    def merge(base: str, ours: str, theirs: str, labels: Labels) -> tuple[str, int]:
        merged = merge_document(base, ours, theirs, rules=rules, labels=labels)
        return merged.text, len(merged.conflicted_keys) + merged.body_conflicts

    return merge


def _plain(base: str, ours: str, theirs: str, labels: Labels) -> tuple[str, int]:
    return merge_text(base, ours, theirs, labels)


def _items(name: str) -> Merge:
    marker = formats.HEAD_COMMENT if name == "mailbox" else formats.COMMENT

    def merge(base: str, ours: str, theirs: str, labels: Labels) -> tuple[str, int]:
        import cstack
        import needlecast

        merge_function = {"plan": cstack.merge_plan, "current": cstack.merge_current, "memory": cstack.merge_memory, "mailbox": needlecast.merge_mailbox}[name]
        # The format version line is merged apart: the highest any side records is kept, so a
        # file one clone upgraded and the other edited merges without a conflict on that line.
        (base, _), (ours, mine), (theirs, other) = (formats.without_marker(marker, text) for text in (base, ours, theirs))
        result = merge_function(base, ours, theirs, labels)
        version = formats.merge_versions(mine, other)
        return (result.text if version is None else formats.set_marker(marker, result.text, version)), result.conflicts

    return merge


def merge_for(path: str) -> tuple[str, Merge]:
    """The kind of the file at repository path `path` and the merge that suits it."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    folder = parts[-2] if len(parts) > 1 else ""
    if folder == ".cstack" and name in ("PLAN.md", "CURRENT.md", "MEMORY.md"):
        kind = name.removesuffix(".md").lower()
        return f"cstack-{kind}", _items(kind)
    if folder == ".needlecast" and name in ("inbox.md", "outbox.md"):
        return "needlecast-mailbox", _items("mailbox")
    if ".moss" in parts and name.endswith(".md"):
        inside = parts[parts.index(".moss") + 1 :]
        if inside[:1] == ("board",):
            from moss_files.board.files import PLAN_KEYS, merge_plans

            return "board-item", _documents({"status": _board_status, **dict.fromkeys(PLAN_KEYS, merge_plans)})
        return f"{inside[0] if len(inside) > 1 else 'moss'}-document", _documents()
    return "text", _plain


def run(base_file: Path, ours_file: Path, theirs_file: Path, path: str, labels: Labels = Labels()) -> DriverReport:
    """Merge the three versions git hands over and write the result into `ours_file`.

    Raises InvalidRequest when a version cannot be read at all (git then reports the
    driver's failure and leaves the path conflicted).
    """
    started = time.perf_counter()
    texts = []
    for file in (base_file, ours_file, theirs_file):
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise InvalidRequest(f"cannot read a version handed over by git: {exc.strerror}", path=file) from None
        # A version that is not text (invalid UTF-8, NUL bytes) raises here: git then leaves
        # the path conflicted with our version untouched, as for any binary file.
        texts.append(document.decode(data, path, max_bytes=document.DEFAULT_MAX_BYTES)[0])
    base, ours, theirs = texts
    kind, merge = merge_for(path)
    fallback = None
    if any(conflicts.first_marker_line(text) is not None for text in texts):
        fallback, merge = "a version already holds conflict markers", _plain
    try:
        result, count = merge(base, ours, theirs, labels)
    except InvalidDocument as exc:
        fallback = f"{exc.code}: {exc.message}"
        result, count = _plain(base, ours, theirs, labels)
    bom = ours_file.read_bytes().startswith(b"\xef\xbb\xbf")
    fs.write_atomic(ours_file, document.encode(result, bom))
    return DriverReport(path, kind, count, fallback, time.perf_counter() - started)


def report_to_dict(report: DriverReport) -> dict[str, object]:
    """The JSON shape of a driver run (`moss merge driver --json`)."""
    return {"path": report.path, "kind": report.kind, "conflicts": report.conflicts, "fallback": report.fallback, "seconds": round(report.seconds, 4)}

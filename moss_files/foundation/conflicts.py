"""Git conflict markers left in a file by a merge: finding them, and the error that says so.

Core layer (pure). A merge that git could not resolve leaves `<<<<<<< ours`, `=======`,
`>>>>>>> theirs` (and, in diff3 style, `||||||| base`) at line starts. A reader that went on
would read both sides as one (two copies of a task, a message hidden between markers), and a
writer would commit the markers; so every reader of an artifact calls `check_no_conflict`
first, and every writer reads before it writes.

Markdown has lookalikes, so a marker counts only outside fenced code, and `=======` (which
also underlines a heading) is never taken for one.
"""

from __future__ import annotations

from pathlib import Path

from moss_files.foundation.errors import InvalidDocument

MARKER_SIZE = 7  # git's default conflict-marker-size
_OPEN, _BASE, _CLOSE = "<" * MARKER_SIZE, "|" * MARKER_SIZE, ">" * MARKER_SIZE
HINT = (
    "the file holds an unresolved git merge: edit it to keep what each side meant, delete the marker lines, "
    "then `git add` it; `moss merge setup` installs the merge driver that resolves most such merges by itself"
)


def _is_marker(line: str, marker: str) -> bool:
    """`line` is `marker` alone or followed by a space and a label (git's form)."""
    if not line.startswith(marker):
        return False
    rest = line[MARKER_SIZE:].rstrip("\r\n")
    return rest == "" or rest[0] in " \t"


def first_marker_line(text: str) -> int | None:
    """The 1-based line of the first conflict marker in `text`, or None when it has none."""
    # Nearly every file has no marker at all: one substring search answers for them.
    if _OPEN not in text and _CLOSE not in text and _BASE not in text:
        return None
    fence = ""  # the open code fence (its character repeated), or "" outside code
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip(" ")
        if len(line) - len(stripped) <= 3 and stripped[:3] in ("```", "~~~"):
            run = len(stripped) - len(stripped.lstrip(stripped[0]))
            if not fence:
                fence = stripped[0] * run
            elif stripped.rstrip() == fence[0] * len(stripped.rstrip()) and run >= len(fence):
                fence = ""
            continue
        # `=======` alone is not checked: it also underlines headings, and in a real conflict
        # an opening `<<<<<<<` (or, if that was deleted by hand, a closing `>>>>>>>`) is met.
        if not fence and (_is_marker(line, _OPEN) or _is_marker(line, _BASE) or _is_marker(line, _CLOSE)):
            return number
    return None


def conflict_error(path: Path | str | None, line: int) -> InvalidDocument:
    """The MERGE_CONFLICT error for a file whose first marker is at `line`."""
    return InvalidDocument(
        "the file holds git conflict markers from an unfinished merge; nothing reads or writes it until they are resolved",
        code="MERGE_CONFLICT",
        path=path,
        line=line,
        hint=HINT,
    )


def check_no_conflict(text: str, path: Path | str | None = None) -> None:
    """Raise InvalidDocument MERGE_CONFLICT, with the line of the first marker, when `text`
    holds git conflict markers outside fenced code."""
    line = first_marker_line(text)
    if line is not None:
        raise conflict_error(path, line)

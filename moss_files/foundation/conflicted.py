"""Which of the toolkit's files hold git conflict markers: the scan behind `moss merge check` and
the sidecar's `/status`. Edge layer (reads files)."""

from __future__ import annotations

import os
from pathlib import Path

from moss_files.foundation import conflicts, fs
from moss_files.foundation.errors import MossError

TOOLKIT_FOLDERS = (".cstack", ".needlecast", ".moss")
_SKIPPED = {"cache", "run", "exports", ".state"}  # derived or per-machine: never merged


def find_conflicted(root: Path, folders: tuple[str, ...] = TOOLKIT_FOLDERS) -> list[tuple[Path, int]]:
    """(file, line of its first marker) for every text file under the workspace's toolkit
    folders (or the given ones) that holds git conflict markers, in path order."""
    found: list[tuple[Path, int]] = []
    for folder in folders:
        top = root / folder
        if not top.is_dir() or top.is_symlink():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(name for name in dirnames if name not in _SKIPPED)
            for name in sorted(filenames):
                path = Path(dirpath, name)
                if fs.is_temporary(path) or not name.endswith((".md", ".jsonl", ".log", ".toml")):
                    continue
                try:
                    text = fs.read_bytes(path, max_bytes=64 * 1024 * 1024).decode("utf-8", errors="replace")
                except (MossError, OSError):
                    continue  # unreadable files are reported by the readers of their kind
                line = conflicts.first_marker_line(text)
                if line is not None:
                    found.append((path, line))
    return found

"""Helpers of the migration tests: a scaffolded workspace in a git repository, a Context with a
fixed clock, copies of the hand-written source fixtures, and snapshots of a whole tree."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from moss_files import scaffold
from moss_files.foundation.context import Context
from moss_files.foundation.ids import IdSource, fixed_clock, seeded_random

FIXTURES = Path(__file__).resolve().parent / "migrate" / "fixtures"
NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)


def make_workspace(root: Path) -> Path:
    """A git repository at `root` set up as a moss-files project (what `moss init` writes)."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    return root


def context(root: Path, home: Path | None = None) -> Context:
    """A Context over `root` with a fixed clock and seeded ids."""
    clock = fixed_clock(NOW)
    return Context(root, clock=clock, ids=IdSource(clock=clock, random_bytes=seeded_random(7)), home=home)


def copy_fixture(name: str, root: Path) -> None:
    """Copy the files of fixture folder `name` (hidden folders included) into `root`."""
    source = FIXTURES / name
    for entry in source.iterdir():
        target = root / entry.name
        if entry.is_dir():
            shutil.copytree(entry, target, dirs_exist_ok=True)
        else:
            shutil.copy2(entry, target)


def build_database(sql_file: Path, target: Path, *, wal: bool = False) -> Path:
    """A SQLite database made from a fixture's SQL, as the system that owns it would leave it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(target)
    try:
        if wal:
            connection.execute("PRAGMA journal_mode = WAL")
        connection.executescript(sql_file.read_text(encoding="utf-8"))
        connection.commit()
    finally:
        connection.close()
    return target


def commit_all(root: Path, message: str = "state") -> None:
    """Commit everything in the repository at `root`."""
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", message], check=True)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under `root`, `.git` included: a dry run and a
    refused run must leave all of it as it was, byte for byte."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = b"link" if os.path.islink(path) else Path(path).read_bytes()
    return found


def files_under(root: Path, folder: str) -> dict[str, bytes]:
    """The files below `folder` of `root`, by path relative to the root."""
    base = root / folder
    if not base.is_dir():
        return {}
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(base.rglob("*")) if path.is_file() and not path.name.startswith(".")}

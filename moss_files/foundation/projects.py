"""The project registry: the projects a user works on, by name, so `--project NAME` finds one
from anywhere. Edge layer (the registry files in the home folder); the parsing, ordering and
lookup are pure functions beside the two that read and write.

Ours is `~/.moss/projects.json`, written by `moss projects add|remove` only: atomically, under
its lock, re-read under the lock (a hand edit made meanwhile is kept). Moe's JetBrains plugin
keeps `~/.moe/projects.json` in the same shape, a JSON array of `{path, name, lastOpenedAt}`
objects, newest first; we read it beside ours and never write it. Ours wins on a name both
hold. Keys we do not know are kept as written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moss_files.foundation import fs
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, NotFound

REGISTRY = Path(".moss") / "projects.json"  # under the home folder: ours
MOE_REGISTRY = Path(".moe") / "projects.json"  # under the home folder: Moe's, read only
MAX_BYTES = 4 * 1024 * 1024
SOURCES = ("moss", "moe")


@dataclass(frozen=True, slots=True)
class Project:
    """A registered project: its name, its folder (absolute, as written), when it was last
    opened (RFC 3339 text, as written; empty when the entry has none) and which registry holds
    it (`moss` or `moe`)."""

    name: str
    path: str
    last_opened: str
    source: str


@dataclass(frozen=True, slots=True)
class Registry:
    """Both registries' projects, ours first, and what could not be read of Moe's (each
    problem `{path, index?, code, message}`)."""

    projects: tuple[Project, ...]
    problems: tuple[dict[str, Any], ...] = ()

    def named(self, name: str) -> Project | None:
        """The project called `name`: ours, else the first of Moe's (newest first, as Moe's
        launcher picks it)."""
        return next((project for project in self.projects if project.name == name), None)


def registry_path(home: Path) -> Path:
    return home / REGISTRY


def moe_registry_path(home: Path) -> Path:
    return home / MOE_REGISTRY


def is_name(text: str) -> bool:
    """Whether `text` could be a project's name rather than a path: one word of a path, not
    `.`, `..` or `~…`."""
    return bool(text.strip()) and "/" not in text and text not in (".", "..") and not text.startswith("~")


def check_name(name: str) -> str:
    """`name` as a project's name. Raises InvalidRequest for one that would read as a path,
    or holds a control character."""
    cleaned = name.strip()
    if not is_name(cleaned) or cleaned.startswith("-") or any(ord(ch) < 32 or ord(ch) == 127 for ch in cleaned):
        raise InvalidRequest(
            f"{name!r} cannot name a project: a name is one word of a path (no '/', not '.', '..', '~…' or '-…'), without control characters",
            details={"field": "name", "value": name},
        )
    return cleaned


# --------------------------------------------------------------------------- parsing (pure)


def parse_entries(text: str, shown: Path) -> list[dict[str, Any]]:
    """The entries of a registry file as written (objects, their keys in order).

    Raises InvalidDocument (file and line) for text that is not a JSON array of objects, and
    SCHEMA_ERROR for an entry whose `name` or `path` is not a non-empty text."""
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidDocument(f"the project registry is not valid JSON: {exc.msg}", path=shown, line=exc.lineno) from None
    if not isinstance(data, list):
        raise InvalidDocument("the project registry is not a JSON array of projects", code="SCHEMA_ERROR", path=shown)
    for index, entry in enumerate(data):
        problem = entry_problem(entry)
        if problem:
            raise InvalidDocument(f"project {index + 1} of the registry {problem}", code="SCHEMA_ERROR", path=shown, details={"index": index})
    return data


def entry_problem(entry: Any) -> str:
    """Why `entry` is not a project (empty when it is one)."""
    if not isinstance(entry, dict):
        return "is not an object"
    for key in ("name", "path"):
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            return f"has no {key} (a non-empty text)"
    stamp = entry.get("lastOpenedAt")
    if stamp is not None and not isinstance(stamp, str):
        return "has a lastOpenedAt that is not a text"
    return ""


def project_of(entry: Mapping[str, Any], source: str) -> Project:
    return Project(str(entry["name"]), str(entry["path"]), str(entry.get("lastOpenedAt") or ""), source)


def parse_moe(text: str, shown: Path) -> tuple[list[Project], list[dict[str, Any]]]:
    """Moe's registry as Moe reads it: what it cannot use is skipped, and each skip reported."""
    try:
        data = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as exc:
        return [], [{"path": str(shown), "line": exc.lineno, "code": "INVALID_DOCUMENT", "message": f"not valid JSON ({exc.msg}); Moe's registry skipped"}]
    if not isinstance(data, list):
        return [], [{"path": str(shown), "code": "SCHEMA_ERROR", "message": "not a JSON array; Moe's registry skipped"}]
    projects, problems = [], []
    for index, entry in enumerate(data):
        problem = entry_problem(entry)
        if problem:
            problems.append({"path": str(shown), "index": index, "code": "SCHEMA_ERROR", "message": f"entry {index + 1} {problem}; skipped"})
            continue
        projects.append(project_of(entry, "moe"))
    return projects, problems


def newest_first(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`entries` ordered as Moe writes its registry: the most recently opened first (a stable
    sort, on the timestamps' text, as Moe sorts them)."""
    return sorted(entries, key=lambda entry: str(entry.get("lastOpenedAt") or ""), reverse=True)


def render(entries: Sequence[dict[str, Any]]) -> bytes:
    return (json.dumps(list(entries), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def with_project(entries: Sequence[dict[str, Any]], name: str, path: str, stamp: str) -> tuple[list[dict[str, Any]], bool]:
    """`entries` with the project `name` at `path`, opened at `stamp`: an entry for the same
    folder is renamed and refreshed (its other keys kept), else a new entry is added. Returns
    (entries, created).

    Raises Conflict ALREADY_EXISTS when another folder is registered under `name`."""
    taken = next((entry for entry in entries if entry.get("name") == name and entry.get("path") != path), None)
    if taken is not None:
        raise Conflict(
            f"a project named {name!r} is registered already, at {taken.get('path')}",
            code="ALREADY_EXISTS",
            details={"name": name, "path": taken.get("path")},
            hint="choose another name with --name, or `moss projects remove` the other one first",
        )
    out: list[dict[str, Any]] = []
    created = True
    for entry in entries:
        if entry.get("path") == path:
            if not created:
                continue  # a folder registered twice (a hand edit): one entry is enough
            created = False
            entry = {**entry, "name": name, "lastOpenedAt": stamp}
        out.append(entry)
    if created:
        out.append({"path": path, "name": name, "lastOpenedAt": stamp})
    return newest_first(out), created


def without_project(entries: Sequence[dict[str, Any]], key: str, path: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`entries` without the project named `key` (or, when none is, at folder `path`):
    (kept, removed)."""
    removed = [entry for entry in entries if entry.get("name") == key]
    if not removed and path is not None:
        removed = [entry for entry in entries if entry.get("path") == path]
    return [entry for entry in entries if entry not in removed], removed


# --------------------------------------------------------------------------- the files


def _read_text(path: Path) -> str | None:
    snapshot = fs.read_snapshot(path, max_bytes=MAX_BYTES)
    if snapshot.data is None:
        return None
    try:
        return snapshot.data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidDocument("the project registry is not valid UTF-8", code="INVALID_ENCODING", path=path) from None


def read_registry(home: Path) -> Registry:
    """Our registry and Moe's. Raises InvalidDocument (file and line) when ours cannot be
    read; Moe's problems are reported in `problems`, as Moe skips them."""
    ours_path = registry_path(home)
    text = _read_text(ours_path)
    ours = [project_of(entry, "moss") for entry in parse_entries(text, ours_path)] if text is not None else []
    moe_path = moe_registry_path(home)
    problems: list[dict[str, Any]] = []
    try:
        moe_text = _read_text(moe_path)
    except InvalidDocument as err:
        moe_text = None
        problems.append({"path": str(moe_path), "code": err.code, "message": f"{err.message}; Moe's registry skipped"})
    moe: list[Project] = []
    if moe_text is not None:
        moe, found = parse_moe(moe_text, moe_path)
        problems.extend(found)
    return Registry((*ours, *moe), tuple(problems))


def find(home: Path, name: str) -> Project | None:
    """The registered project called `name`, or None. Raises InvalidDocument when our
    registry cannot be read."""
    return read_registry(home).named(name)


def change(home: Path, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]) -> None:
    """Read-modify-write our registry under its lock: `edit` gets the entries as written and
    returns the new ones (None: leave the file alone). Raises InvalidDocument when the file
    cannot be read (it is then left as it is), Conflict LOCK_TIMEOUT or STALE_WRITE."""
    path = registry_path(home)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidRequest(f"cannot create {path.parent}: {exc.strerror}", path=path.parent) from None

    def transform(snapshot: fs.Snapshot) -> bytes | None:
        text = "" if snapshot.data is None else snapshot.data.decode("utf-8-sig", errors="strict")
        new = edit(parse_entries(text, path))
        return None if new is None else render(new)

    try:
        fs.modify(path, transform, max_bytes=MAX_BYTES)
    except UnicodeDecodeError:
        raise InvalidDocument("the project registry is not valid UTF-8", code="INVALID_ENCODING", path=path) from None


def touch(home: Path, path: str, stamp: str) -> bool:
    """Mark the project registered at folder `path` opened at `stamp` (our registry only).
    False when no entry has that folder: nothing is written then."""
    if not registry_path(home).exists():
        return False
    found: list[bool] = []

    def edit(entries: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        found[:] = [any(entry.get("path") == path for entry in entries)]
        if not found[0]:
            return None
        return newest_first([{**entry, "lastOpenedAt": stamp} if entry.get("path") == path else entry for entry in entries])

    change(home, edit)
    return bool(found and found[0])


def unknown_name(name: str, registry: Registry, home: Path) -> NotFound:
    """The error for a `--project` that names no folder and no registered project."""
    known = sorted({project.name for project in registry.projects})
    return NotFound(
        f"no folder {name!r} here and no project by that name in {registry_path(home)}" + (" or Moe's registry" if moe_registry_path(home).exists() else ""),
        code="PROJECT_NOT_FOUND",
        details={"name": name, "known": known},
        hint="`moss projects list` shows the registered projects; `moss projects add PATH --name NAME` registers one",
    )

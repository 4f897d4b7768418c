"""Settings: the workspace's `.moss/config.toml` merged over the user's `~/.moss/config.toml`,
itself merged over Moss's own `~/.moss/config.json` (a user coming from Moss keeps its settings).

Edge layer (reads three files: two TOML files through `datafiles`, and Moss's own JSON config); the
merge and validation are pure functions. Entry points load the config once and pass it down. Merge rules follow Moss: the workspace wins for a
scalar it sets, booleans are OR-ed (either file can switch an escape hatch on), arrays are the
union of both (user's first, duplicates dropped), tables merge key by key. Keys we do not know
are kept in `Config.data` for features that add settings later.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from moss_files.foundation.errors import InvalidDocument

WORKSPACE_CONFIG = Path(".moss") / "config.toml"
USER_CONFIG = Path(".moss") / "config.toml"  # under the home folder
MOSS_CONFIG = Path(".moss") / "config.json"  # Moss's own settings file, under the home folder
DEFAULT_CAPSULE_MAX_CHARS = 12000


class Config(NamedTuple):
    """The merged settings; `data` holds every key, typed fields the ones capsules use.

    A named tuple, not a frozen dataclass (about a millisecond of every command's start-up
    to build): the defaults are immutable, the empty `data` a read-only mapping."""

    capsule_max_chars: int = DEFAULT_CAPSULE_MAX_CHARS
    allowed_paths: tuple[Path, ...] = ()
    allow_unsafe_paths: bool = False
    disabled_tools: tuple[str, ...] = ()
    disabled_types: tuple[str, ...] = ()
    data: Mapping[str, Any] = MappingProxyType({})
    sources: tuple[Path, ...] = ()


def merge(user: Mapping[str, Any], workspace: Mapping[str, Any]) -> dict[str, Any]:
    """Merge two parsed config tables by the rules in the module docstring."""
    merged: dict[str, Any] = dict(user)
    for key, value in workspace.items():
        if key not in merged:
            merged[key] = value
            continue
        base = merged[key]
        if isinstance(base, Mapping) and isinstance(value, Mapping):
            merged[key] = merge(base, value)
        elif isinstance(base, bool) and isinstance(value, bool):
            merged[key] = base or value
        elif isinstance(base, list) and isinstance(value, list):
            merged[key] = _union(base, value)
        else:
            merged[key] = value
    return merged


def _union(first: list[Any], second: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in [*first, *second]:
        if item not in out:
            out.append(item)
    return out


def parse_config_text(text: str, path: Path | str) -> dict[str, Any]:
    """Parse one config file's text (a BOM is dropped). Raises InvalidDocument INVALID_DOCUMENT
    with the line, MERGE_CONFLICT at a conflict marker, FORMAT_TOO_NEW for a newer format."""
    from moss_files.foundation import datafiles  # here: every Context holds a Config, and most commands never read a file

    return datafiles.load_toml(text, path, what="config", kind="config")


def parse_moss_config_text(text: str, path: Path | str) -> dict[str, Any]:
    """Parse Moss's own `config.json` (a JSON object of the same keys). Raises InvalidDocument
    INVALID_DOCUMENT with the line for text that is not one (read as every JSON file is,
    `datafiles`: a BOM dropped, conflict markers and repeated keys reported)."""
    from moss_files.foundation import datafiles  # here, as in parse_config_text

    data = datafiles.load_json(text, path, what="Moss's config", unique_keys=True)
    if not isinstance(data, dict):
        raise InvalidDocument("Moss's config must be a JSON object of settings", code="INVALID_DOCUMENT", path=path)
    return data


def build_config(data: Mapping[str, Any], *, bases: Mapping[str, Path], sources: tuple[Path, ...] = ()) -> Config:
    """Validate merged settings into a Config.

    `bases` maps each allowed_paths entry (as written) to the folder a relative entry is
    resolved against (the home folder for the user file, the workspace root for the
    workspace file). Raises InvalidDocument SCHEMA_ERROR naming the key.
    """
    where = ", ".join(str(source) for source in sources) or "config"
    max_chars = data.get("capsule_max_chars", DEFAULT_CAPSULE_MAX_CHARS)
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 0:
        raise _schema(where, "capsule_max_chars must be a whole number of characters, 0 or more")
    if max_chars == 0:
        max_chars = DEFAULT_CAPSULE_MAX_CHARS  # Moss reads 0 as "not set"
    allowed = data.get("allowed_paths", [])
    if not isinstance(allowed, list) or not all(isinstance(item, str) and item for item in allowed):
        raise _schema(where, "allowed_paths must be a list of folder paths")
    unsafe = data.get("allow_unsafe_paths", False)
    if not isinstance(unsafe, bool):
        raise _schema(where, "allow_unsafe_paths must be true or false")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("disabled_tools", "disabled_types"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise _schema(where, f"{key} must be a list of strings")
        lists[key] = tuple(value)
    paths = []
    for item in allowed:
        candidate = Path(item).expanduser()
        if not candidate.is_absolute():
            candidate = bases.get(item, Path.home()) / candidate
        paths.append(candidate)
    return Config(
        capsule_max_chars=max_chars,
        allowed_paths=tuple(paths),
        allow_unsafe_paths=unsafe,
        disabled_tools=lists["disabled_tools"],
        disabled_types=lists["disabled_types"],
        data=dict(data),
        sources=sources,
    )


def _schema(where: str, message: str) -> InvalidDocument:
    return InvalidDocument(message, code="SCHEMA_ERROR", path=where)


def user_config_path(home: Path | None = None) -> Path:
    """Where the user-level config lives."""
    return (home or Path.home()) / USER_CONFIG


def load_config(root: Path | None, *, home: Path | None = None) -> Config:
    """Read and merge Moss's `~/.moss/config.json`, the user's and the workspace's config files
    (each may be missing), in that order.

    Raises InvalidDocument when a file is not valid TOML or a setting has the wrong type.
    """
    from moss_files.foundation import fs  # here, as datafiles: a Context's default Config reads nothing

    home = home or Path.home()
    layers: list[tuple[Path, dict[str, Any], Path]] = []
    candidates = (
        (home / MOSS_CONFIG, home, True),
        (user_config_path(home), home, True),
        ((root / WORKSPACE_CONFIG) if root else None, root, False),
    )
    for path, base, users_own in candidates:
        if path is None or base is None:
            continue
        try:
            # The user's own file may be a link (dotfile managers make them); the workspace's
            # comes with the repository, so it is read without following links.
            raw = fs.read_bytes(path, follow_links=users_own)
            text = raw.decode("utf-8")
        except FileNotFoundError:
            continue
        except UnicodeDecodeError as exc:
            raise InvalidDocument(f"config cannot be read: {exc}", code="INVALID_DOCUMENT", path=path) from None
        parsed = parse_moss_config_text(text, path) if path.suffix == ".json" else parse_config_text(text, path)
        layers.append((path, parsed, base))
    merged: dict[str, Any] = {}
    bases: dict[str, Path] = {}
    for _path, data, base in layers:
        for item in data.get("allowed_paths", []) if isinstance(data.get("allowed_paths"), list) else []:
            if isinstance(item, str):
                bases[item] = base
        merged = merge(merged, data)
    return build_config(merged, bases=bases, sources=tuple(path for path, _, _ in layers))

"""Capsule export and import: Moss's JSONL files, written and read outside the capsule folder.

Shell layer: checks the path a caller names (where the file may be, never through a link),
reads or writes the JSONL file, and leaves the records to the core: `records` parses the
lines and plans the import, the capsule model renders the export's lines;
the capsule files change only through `CapsuleStore`. Returns Moss's JSON shapes, the ones
`moss export|import --json` prints and the `moss.export` / `moss.import` tools return.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from moss_files.capsules import model as core
from moss_files.capsules.model import Capsule
from moss_files.capsules.records import IMPORT_MODES, ImportAction, RecordProblem, parse_record, plan_import
from moss_files.capsules.service import now_ms
from moss_files.capsules.store import MAX_FILE_BYTES, CapsuleStore, StoredCapsule, raise_first
from moss_files.foundation import collector, datafiles, document, fs
from moss_files.foundation.arguments import given_path, optional
from moss_files.foundation.batch import FileBatch
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound

MAX_IMPORT_BYTES = 25 * 1024 * 1024
MAX_IMPORT_LINE_BYTES = 1024 * 1024
EXPORTS_DIR = Path(".moss") / "exports"


def exports_dir(ctx: Context) -> Path:
    """The default export folder: `~/.moss/exports/` (of the context's home)."""
    return ctx.home_folder() / EXPORTS_DIR


def check_transfer_path(raw: str | None, ctx: Context, *, reading: bool) -> Path:
    """Check an export/import path: `.jsonl`, no `..`, no symlinked file or parent folder, and
    (unless `allow_unsafe_paths`) directly inside an allowed folder: `~/.moss/exports/`, the
    workspace's `.moss/exports/`, or an `allowed_paths` entry.

    Raises InvalidRequest (details.reason) before anything is read or written.
    """
    path = given_path(raw)
    text = str(raw)
    if path.suffix != ".jsonl" or path.name == ".jsonl":
        raise InvalidRequest("path must name a .jsonl file", details={"reason": "extension", "path": text})
    parent = path.parent
    if parent.is_symlink():
        raise InvalidRequest("the folder of path is a symbolic link", details={"reason": "symlink", "path": text})
    if path.is_symlink():
        raise InvalidRequest("path is a symbolic link", details={"reason": "symlink", "path": text})
    if not ctx.config.allow_unsafe_paths:
        allowed = [exports_dir(ctx), ctx.root / EXPORTS_DIR, *ctx.config.allowed_paths]
        real_parent = Path(os.path.realpath(parent))
        if not any(real_parent == Path(os.path.realpath(folder)) for folder in allowed):
            raise InvalidRequest(
                "path must be directly inside an allowed folder",
                details={"reason": "not_allowed", "path": text, "allowed": [str(folder) for folder in allowed]},
                hint="add the folder to allowed_paths in .moss/config.toml (or ~/.moss/config.toml)",
            )
    if reading and not path.exists():
        raise NotFound("no such import file", path=text)
    return path


# --------------------------------------------------------------------------- export


def export(ctx: Context, *, path: str | None = None, workspace: str | None = None, include_deleted: bool = False) -> dict[str, Any]:
    """Write capsules to a JSONL file: Moss's header line, then one record per capsule (by id).

    The file is written atomically with mode 0600; a file that is not an earlier export is
    never replaced. Returns `{path, count, exported_at}`. Raises InvalidRequest for a refused
    path, Conflict ALREADY_EXISTS, and any unreadable capsule file's error (an export is whole).
    """
    now = now_ms(ctx)
    ws_text = optional(workspace)
    ws = core.normalize(ws_text) if ws_text else None
    if path is None:
        folder = exports_dir(ctx)
        # Moss keeps ~/.moss/ and its exports private (0700): the parent made on the way too,
        # which mkdir(parents=True) would give the umask's mode.
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        stamp = core.ms_to_rfc3339(now - now % 1000).replace("-", "").replace(":", "")
        label = core.encode_component(ws) if ws else "all"
        path = str(folder / f"{label}-{stamp}.jsonl")
    target = check_transfer_path(path, ctx, reading=False)
    if not target.parent.is_dir() and target.parent == ctx.root / EXPORTS_DIR:
        # The workspace's own export folder is git-ignored and made on first use, like the
        # home one; any other folder must exist already.
        with fs.folder_fd(target.parent, create=True):
            pass
    if not target.parent.is_dir():
        raise NotFound("the export folder does not exist", path=str(target.parent))
    scan = CapsuleStore(ctx.root).scan(ws, include_deleted=include_deleted)
    raise_first(scan.problems)
    chosen = sorted((s.capsule for s in scan.capsules if include_deleted or not s.capsule.deleted), key=lambda c: c.id)
    exported_at = now // 1000
    lines = [core.render_record(core.export_header(exported_at))]
    lines.extend(core.render_record(core.capsule_to_record(c)) for c in chosen)
    if target.exists() and not _is_export(target):
        raise Conflict("path exists and is not a moss export; refusing to replace it", code="ALREADY_EXISTS", path=str(target))
    fs.write_atomic(target, ("\n".join(lines) + "\n").encode("utf-8"), mode=0o600)
    os.chmod(target, 0o600)
    return {"path": str(target), "count": len(chosen), "exported_at": exported_at}


def _is_export(path: Path) -> bool:
    try:
        # Never a plain open(): a FIFO at the path would wait for a writer forever.
        with os.fdopen(fs.open_regular(path), "rb") as handle:
            first = handle.readline(4096)
        return datafiles.load_json(first, str(path)).get("_moss_export") is True
    except (OSError, MossError, AttributeError):
        return False


# --------------------------------------------------------------------------- import


def import_capsules(ctx: Context, *, path: str | None, mode: str | None = None, batched: bool = True) -> dict[str, Any]:
    """Restore capsules from a Moss JSONL export, all or nothing.

    The files are written as one batch (`foundation.batch`): all staged, made durable together,
    then moved into place through a journal, so a crash leaves every capsule or none.
    `batched=False` writes them one by one, each durable on its own (slower; the reference the
    batch is checked against).

    Derived fields are recomputed. Returns `{imported, skipped, errors: [{line, id?, name?,
    code, message}]}`; any error means nothing was written. Raises InvalidRequest for a refused
    path or mode, InvalidDocument FILE_TOO_LARGE (413) past 25 MB.
    """
    import_mode = optional(mode) or "error"
    if import_mode not in IMPORT_MODES:
        raise InvalidRequest("mode must be one of: error, replace, rename", details={"field": "mode", "value": import_mode})
    source = check_transfer_path(path, ctx, reading=True)
    with collector.paused():
        return _import(ctx, source, import_mode, batched=batched)


def _import(ctx: Context, source: Path, import_mode: str, *, batched: bool) -> dict[str, Any]:
    """`import_capsules` of a checked path and mode."""
    data = datafiles.without_bom(fs.read_given_file(source, max_bytes=MAX_IMPORT_BYTES, what="import file"))
    now = now_ms(ctx)
    records: list[tuple[int, Capsule]] = []
    errors: list[dict[str, Any]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        if len(raw) > MAX_IMPORT_LINE_BYTES:
            errors.append({"line": number, "code": "PARSE_ERROR", "message": f"line is longer than {MAX_IMPORT_LINE_BYTES} bytes"})
            continue
        try:
            parsed = parse_record(raw.decode("utf-8"), now_ms=now)
        except UnicodeDecodeError:
            errors.append({"line": number, "code": "PARSE_ERROR", "message": "line is not valid UTF-8"})
            continue
        except RecordProblem as problem:
            item: dict[str, Any] = {"line": number}
            if problem.id:
                item["id"] = problem.id
            if problem.name:
                item["name"] = problem.name
            item.update(code=problem.code, message=problem.message)
            errors.append(item)
            continue
        if parsed is not None:
            records.append((number, parsed))
    if errors:
        return {"imported": 0, "skipped": 0, "errors": errors}
    store_ = CapsuleStore(ctx.root)
    with store_.writing():
        # The ids and name slots taken (through the key cache: not every capsule parsed).
        keys, problems = store_.keys()
        raise_first(problems)  # an unreadable capsule could be a collision we cannot see
        actions, errors = plan_import(keys, records, import_mode, ctx.new_ulid)
        if errors:
            return {"imported": 0, "skipped": 0, "errors": errors}
        _apply_import(store_, _replaced(store_, keys, actions), actions, batched=batched)
    return {"imported": len(actions), "skipped": 0, "errors": []}


def import_refusal(result: Mapping[str, Any]) -> MossError | None:
    """The error a refused import (`import_capsules` with per-line `errors`) is, for callers
    that answer with an error rather than a result (the MCP tool): Conflict CONFLICT (409)
    for collisions, InvalidDocument INVALID_DOCUMENT (422) for unreadable or invalid lines,
    the result in `details`; None for an import that went through."""
    errors = result.get("errors") or []
    if not errors:
        return None
    first = errors[0]
    where = f"line {first['line']}: {first['message']}"
    if any(str(error["code"]).endswith("COLLISION") for error in errors):
        return Conflict(
            f"import refused, nothing imported: {len(errors)} line(s) collide with capsules here ({where})",
            details=dict(result),
            hint='mode "replace" updates the capsules in place; mode "rename" imports them under new names',
        )
    return InvalidDocument(f"import refused, nothing imported: {len(errors)} line(s) cannot be imported ({where})", details=dict(result))


def _replaced(store_: CapsuleStore, keys: Sequence[core.CapsuleKey], actions: Sequence[ImportAction]) -> dict[str, StoredCapsule]:
    """The capsules the actions replace, read from their files (by id). Raises Conflict
    STALE_WRITE when such a file no longer holds the capsule its key was read from."""
    wanted = {action.replaces for action in actions if action.replaces is not None}
    found: dict[str, StoredCapsule] = {}
    for key in keys:
        if key.id not in wanted:
            continue
        path = store_.base / key.relpath
        stored = store_.read(path)
        if stored is None or stored.capsule.id != key.id:
            raise Conflict("file changed since it was read; nothing was written", code="STALE_WRITE", path=store_.display(path))
        found[key.id] = stored
    return found


def _apply_import(store_: CapsuleStore, existing: dict[str, StoredCapsule], actions: Sequence[ImportAction], *, batched: bool) -> None:
    if batched:
        _apply_batched(store_, existing, actions)
        return
    # File by file, each write durable on its own: the reference the batch is tested against.
    # Files that move (a replace that changes name or deleted state) leave their place first,
    # so a create or another move can take the slot they held.
    pending: list[tuple[Capsule, str | None]] = []
    in_place: list[tuple[StoredCapsule, Capsule]] = []
    for action in actions:
        if action.replaces is None:
            pending.append((action.capsule, None))
            continue
        old = existing[action.replaces]
        if core.capsule_relpath(action.capsule) == old.relpath:
            in_place.append((old, action.capsule))
            continue
        assert old.snapshot.data is not None
        old_text, _bom = document.decode(old.snapshot.data, str(old.path))
        pending.append((action.capsule, core.edit_capsule(old_text, action.capsule, str(old.path))))
        store_.remove(old)
    for old, capsule in in_place:
        store_.replace_file(old, capsule)
    for capsule, text in pending:
        store_.create(capsule, text=text)


def _apply_batched(store_: CapsuleStore, existing: dict[str, StoredCapsule], actions: Sequence[ImportAction]) -> None:
    # The same files as the file-by-file path, byte for byte, in the same order (moves leave
    # their slots, then rewrites in place, then new files), committed as one batch: staged,
    # made durable together, journaled, renamed into place.
    changes = FileBatch(store_.base)
    rewrites: list[tuple[PurePosixPath, bytes, str]] = []
    creates: list[tuple[PurePosixPath, bytes]] = []
    written: dict[PurePosixPath, core.CapsuleKey] = {}
    gone: list[PurePosixPath] = []
    for action in actions:
        capsule = action.capsule
        target = core.capsule_relpath(capsule)
        written[target] = core.CapsuleKey.of(capsule, target)
        if action.replaces is None:
            creates.append((target, document.encode(core.render_capsule(capsule))))
            continue
        old = existing[action.replaces]
        assert old.snapshot.data is not None
        if target == old.relpath:
            old_text, bom = document.decode(old.snapshot.data, store_.display(old.path), max_bytes=MAX_FILE_BYTES)
            rewrites.append((target, document.encode(core.edit_capsule(old_text, capsule, store_.display(old.path)), bom), old.snapshot.digest))
            continue
        old_text, _bom = document.decode(old.snapshot.data, str(old.path))
        creates.append((target, document.encode(core.edit_capsule(old_text, capsule, str(old.path)))))
        changes.remove(old.relpath, old.snapshot.digest)
        gone.append(old.relpath)
    for target, data, digest in rewrites:
        changes.replace(target, data, digest)
    for target, data in creates:
        changes.create(target, data)
    changes.commit()
    done = [(target, data) for target, data, _digest in rewrites] + creates
    store_.remember([(target, data, written[target]) for target, data in done], gone, proof=changes.written)

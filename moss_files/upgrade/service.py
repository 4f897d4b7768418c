"""`moss upgrade`: find every toolkit file of the workspace, plan its upgrade to its kind's
current format version, and write the plan all or nothing.

Shell layer. Gathers with the foundation's `fs` (no link followed, conflict markers found),
decides with the pure chain of `foundation.formats`, checks each file with its own kind's
reader before (a file its reader refuses is a problem, never touched) and after (the upgraded
text must read as the same kind at the new version), then applies: under the capsule store's
and the board's writer locks, each file under its own lock and only if it still holds the
bytes that were planned (STALE_WRITE otherwise), v1 mailbox files through needlecast's rewrite
(agents append to them without a lock). A failure takes back every file written before it,
each only if it still holds what this run wrote, and the error is raised: all or nothing. A
kill in the middle leaves some files upgraded and some not; both read, and a second run
finishes. A dry run reads and plans only: no lock file, no cache, no byte written.

Problems (a conflicted, linked, unreadable or newer file, or a move whose place is taken) are
reported and those files left as they are; the others are upgraded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from moss_files.foundation import conflicts, datafiles, document, formats, fs
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidRequest, MossError, error_body

TOOLKIT_FOLDERS = (".cstack", ".moss", ".needlecast")
# Per-machine and derived folders: nothing in them is a tracked artifact.
PER_MACHINE = frozenset({".moss/cache", ".moss/run", ".moss/exports", ".moss/migrations", ".needlecast/.state"})
MAILBOX_MAX_BYTES = 64 * 1024 * 1024
NOTE_FROM = 200  # files: from this many on, a run says on stderr what it is doing


@dataclass(frozen=True, slots=True)
class Planned:
    """One file's upgrade, with the snapshot it was planned from and its new bytes."""

    upgrade: formats.Upgrade
    path: Path
    snapshot: fs.Snapshot
    data: bytes


@dataclass(frozen=True, slots=True)
class Problem:
    """A file left as it is, and why."""

    relpath: str
    kind: str | None
    error: MossError


def upgrade(ctx: Context, *, dry_run: bool = False, kinds: Sequence[str] = ()) -> dict[str, Any]:
    """Upgrade every toolkit file (of `kinds`, default all) to its kind's current version.

    Returns `{root, dry_run, kinds: {kind: {current, files, at_current, upgraded: {"1 -> 2":
    n}, problems}}, files: [{path, kind, from, to, moved_to?}], problems: [...], upgraded,
    unchanged, message}`. Raises InvalidRequest for an unknown kind or one whose files are
    never rewritten; Conflict (STALE_WRITE, ALREADY_EXISTS, LOCK_TIMEOUT) or RepoError
    NOT_WRITABLE when a write fails, after taking back every file this run wrote.
    """
    wanted = _wanted(kinds)
    _load_owned_steps()
    root = Path(ctx.root)
    with ExitStack() as stack:
        if not dry_run:
            _hold_writer_locks(stack, root, wanted)
        found, problems = _scan(root, wanted)
        if ctx.notify is not None and len(found) >= NOTE_FROM:
            ctx.notify(f"upgrade: reading {len(found)} files")
        planned: list[Planned] = []
        at_current: dict[str, int] = {}
        for relpath, spec in found:
            try:
                outcome = _plan_file(root, relpath, spec)
            except MossError as err:
                problems.append(Problem(relpath, spec.name, err))
                continue
            if outcome is None:
                at_current[spec.name] = at_current.get(spec.name, 0) + 1
            else:
                planned.append(outcome)
        planned, clashes = _free_places(root, planned)
        problems.extend(clashes)
        if not dry_run and planned:
            _apply(root, planned, ctx.progress)
    return _report(root, dry_run, wanted, planned, at_current, problems)


def _wanted(kinds: Sequence[str]) -> tuple[formats.Kind, ...]:
    rewritable = [spec for spec in formats.KINDS.values() if spec.rewritable]
    if not kinds:
        return tuple(rewritable)
    chosen = []
    for name in kinds:
        spec = formats.KINDS.get(name)
        if spec is None:
            raise InvalidRequest(f"no file kind {name!r}", details={"kinds": [k.name for k in rewritable]}, hint="moss upgrade --help lists them")
        if not spec.rewritable:
            raise InvalidRequest(
                f"{spec.title}s are never rewritten: a log's lines are history (each carries its own version), a bundle is a file people pass around",
                details={"kind": name},
            )
        chosen.append(spec)
    return tuple(dict.fromkeys(chosen))


def _load_owned_steps() -> None:
    """Import the model modules that register their kinds' own steps."""
    import moss_files.capsules.model  # noqa: F401  (registers the capsule step)
    import needlecast

    needlecast.parse_message_document  # noqa: B018  (loads needlecast's message module, which registers the message-file step)


def _hold_writer_locks(stack: ExitStack, root: Path, wanted: tuple[formats.Kind, ...]) -> None:
    """The kinds' store-wide writer locks, so no multi-file write of theirs interleaves (the
    capsule store's also finishes an import a crash left half done)."""
    names = {spec.name for spec in wanted}
    if "capsule" in names and (root / ".moss" / "capsules").is_dir():
        from moss_files.capsules.store import CapsuleStore

        stack.enter_context(CapsuleStore(root).writing())
    if names & {"task", "epic", "worker", "team", "proposal", "project"} and (root / ".moss" / "board").is_dir():
        from moss_files.board.store import BoardStore

        stack.enter_context(BoardStore(root, persist=False).writing())


# --------------------------------------------------------------------------- finding the files


def _scan(root: Path, wanted: tuple[formats.Kind, ...]) -> tuple[list[tuple[str, formats.Kind]], list[Problem]]:
    """(relpath, kind) of every file of a wanted kind under the toolkit folders, in path order,
    and the links met on the way (never followed)."""
    names = {spec.name for spec in wanted}
    found: list[tuple[str, formats.Kind]] = []
    problems: list[Problem] = []
    for folder in TOOLKIT_FOLDERS:
        top = root / folder
        if top.is_symlink():
            problems.append(Problem(folder, None, fs.symlink_refused(folder)))
            continue
        for dirpath, dirnames, filenames in fs.walk(top):
            base = Path(dirpath).relative_to(root).as_posix()
            kept = []
            for name in sorted(dirnames):
                relpath = f"{base}/{name}"
                if name.startswith(".") or relpath in PER_MACHINE:
                    continue  # temporaries, a batch's staging, per-machine state
                if Path(dirpath, name).is_symlink():
                    problems.append(Problem(relpath, None, fs.symlink_refused(relpath)))
                    continue
                kept.append(name)
            dirnames[:] = kept
            for name in sorted(filenames):
                if name.startswith("."):
                    continue  # lock and temporary files, .gitkeep
                relpath = f"{base}/{name}"
                spec = formats.kind_of(relpath)
                if spec is None or spec.name not in names or formats.in_flight(spec, relpath):
                    continue
                if Path(dirpath, name).is_symlink():
                    problems.append(Problem(relpath, spec.name, fs.symlink_refused(relpath)))
                    continue
                found.append((relpath, spec))
    return found, problems


# --------------------------------------------------------------------------- planning


def _lenient(spec: formats.Kind) -> bool:
    """A v1 mailbox may hold blocks that are not UTF-8 (each is its own problem): its bytes
    are kept as they are, as needlecast itself keeps them."""
    return spec.marker == formats.HEAD_COMMENT


def _decode(data: bytes, spec: formats.Kind, relpath: str) -> tuple[str, bool]:
    if _lenient(spec):
        bom = data.startswith(b"\xef\xbb\xbf")
        return data[3 if bom else 0 :].decode("utf-8", "surrogateescape"), bom
    return document.decode(data, relpath, max_bytes=len(data) + 1)


def _encode(text: str, bom: bool, spec: formats.Kind) -> bytes:
    if _lenient(spec):
        return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogateescape")
    return document.encode(text, bom)


def _plan_file(root: Path, relpath: str, spec: formats.Kind) -> Planned | None:
    """The upgrade of one file, or None when it is at the current version already.

    Raises the problem that leaves it untouched: SYMLINK_REFUSED, MERGE_CONFLICT,
    FORMAT_TOO_NEW, or its kind's reader's error.
    """
    path = root / relpath
    snapshot = fs.read_snapshot(path, max_bytes=MAILBOX_MAX_BYTES if _lenient(spec) else document.DEFAULT_MAX_BYTES)
    if snapshot.data is None:
        return None  # gone since the scan
    text, bom = _decode(snapshot.data, spec, relpath)
    marker = conflicts.first_marker_line(text)
    if marker is not None:
        raise conflicts.conflict_error(relpath, marker)
    mtime_ms = snapshot.identity[3] // 1_000_000 if snapshot.identity is not None else 0
    _check_reads(spec.name, text, relpath, root, mtime_ms)
    planned = formats.plan(spec.name, text, formats.Facts(relpath, mtime_ms))
    if not planned.changes:
        return None
    try:
        _check_reads(spec.name, planned.text, planned.new_relpath, root, mtime_ms)
        if formats.version_of(spec.name, planned.text, planned.new_relpath) != spec.current:
            raise MossError("the upgraded text does not record the current version")
    except MossError as err:
        raise MossError(f"the upgrade of {relpath} would not read back ({err.code}: {err.message}); nothing was written", path=relpath) from None
    return Planned(planned, path, snapshot, _encode(planned.text, bom, spec))


def _check_reads(kind: str, text: str, relpath: str, root: Path, mtime_ms: int) -> None:
    """Read `text` as its kind's reader does; raise what that reader raises."""
    reader = _READERS.get(kind)
    if reader is not None:
        reader(text, relpath, root, mtime_ms)


def _stem(relpath: str) -> str:
    return PurePosixPath(relpath).stem


def _read_capsule(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
    from moss_files.capsules import model

    model.parse_capsule(document.parse(text, relpath), PurePosixPath(relpath).relative_to(model.CAPSULES_FOLDER), mtime_ms=mtime_ms, path=relpath)


def _board_reader(kind: str) -> Callable[[str, str, Path, int], None]:
    def read(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
        from moss_files.board import files

        doc = document.parse(text, relpath)
        if kind == "project":
            files.parse_project(doc, relpath, default_name=root.name)
            return
        parse = {"task": files.parse_task, "epic": files.parse_epic, "worker": files.parse_worker, "team": files.parse_team, "proposal": files.parse_proposal}[
            kind
        ]
        parse(doc, relpath, fallback_id=_stem(relpath))

    return read


def _loopflow_reader(kind: str) -> Callable[[str, str, Path, int], None]:
    def read(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
        from moss_files.loopflow import feedback, insights, sessions, summary

        doc = document.parse(text, relpath)
        if kind == "summary":
            summary.parse_summary(doc, relpath)
            return
        parse = {"insight": insights.parse_insight, "session": sessions.parse_session, "feedback": feedback.parse_feedback}[kind]
        parse(doc, relpath, fallback_id=_stem(relpath))

    return read


def _read_agent_session(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
    from moss_files.agent import model

    model.parse_session(document.parse(text, relpath), relpath, fallback_id=_stem(relpath))


def _read_message(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
    import needlecast

    needlecast.parse_message_document(text, path=relpath)


def _read_document(kind: str) -> Callable[[str, str, Path, int], None]:
    def read(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
        formats.check_document(kind, document.parse(text, relpath), relpath)

    return read


def _cstack_reader(kind: str) -> Callable[[str, str, Path, int], None]:
    def read(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
        import cstack

        {"current": cstack.parse_current, "plan": cstack.parse_plan, "memory": cstack.parse_memory}[kind](text, relpath)

    return read


def _read_mailbox(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
    formats.check_text("mailbox", text, relpath)  # its blocks are read, and reported, one by one


def _toml_reader(kind: str) -> Callable[[str, str, Path, int], None]:
    def read(text: str, relpath: str, root: Path, mtime_ms: int) -> None:
        if kind == "config":
            from moss_files.foundation import config

            config.parse_config_text(text, relpath)
            return
        if kind == "agent-policy":
            from moss_files.agent import settings

            settings.parse_settings(text, relpath)
            return
        datafiles.load_toml(text, relpath, code="REGISTRY_INVALID", kind=kind)

    return read


_READERS: dict[str, Callable[[str, str, Path, int], None]] = {
    "capsule": _read_capsule,
    **{kind: _board_reader(kind) for kind in ("task", "epic", "worker", "team", "proposal", "project")},
    **{kind: _loopflow_reader(kind) for kind in ("insight", "session", "feedback", "summary")},
    "agent-session": _read_agent_session,
    "message": _read_message,
    "dead-letter": _read_document("dead-letter"),
    "mailbox": _read_mailbox,
    **{kind: _cstack_reader(kind) for kind in ("current", "plan", "memory")},
    **{kind: _toml_reader(kind) for kind in ("config", "agent-policy", "sleeves")},
}


def _free_places(root: Path, planned: list[Planned]) -> tuple[list[Planned], list[Problem]]:
    """The plans whose new place (a move) is free, and a problem for each one whose is not."""
    kept: list[Planned] = []
    problems: list[Problem] = []
    taken = {item.upgrade.new_relpath for item in planned if item.upgrade.new_relpath == item.upgrade.relpath}
    for item in planned:
        target = item.upgrade.new_relpath
        if target != item.upgrade.relpath and (target in taken or os.path.lexists(root / target)):
            error = Conflict(
                f"{item.upgrade.relpath} moves to {target}, which exists already; both are left as they are",
                code="ALREADY_EXISTS",
                path=item.upgrade.relpath,
                hint="keep one of the two files (they name the same capsule), then run moss upgrade again",
            )
            problems.append(Problem(item.upgrade.relpath, item.upgrade.kind, error))
            continue
        taken.add(target)
        kept.append(item)
    return kept, problems


# --------------------------------------------------------------------------- applying

Undo = Callable[[], None]


def _apply(root: Path, planned: list[Planned], progress: Callable[[int, int], None] | None) -> None:
    """Write every planned file, or none (see the module docstring)."""
    undos: list[Undo] = []
    total = len(planned)
    try:
        for done, item in enumerate(planned, start=1):
            undos.append(_write(root, item))
            if progress is not None:
                progress(done, total)
    except BaseException as exc:
        rolled_back = _undo(undos)
        if isinstance(exc, MossError):
            exc.details.setdefault("rolled_back", rolled_back)
        raise


def _undo(undos: list[Undo]) -> int:
    """Take back what was written, newest first; a file changed since is left as it is."""
    count = 0
    for undo in reversed(undos):
        try:
            undo()
            count += 1
        except (MossError, OSError):
            continue
    return count


def _write(root: Path, item: Planned) -> Undo:
    """Write one planned file; return how to take the write back."""
    if _lenient(formats.KINDS[item.upgrade.kind]):
        return _rewrite_mailbox(item)
    path, original = item.path, item.snapshot.data
    assert original is not None
    relpath = item.upgrade.relpath
    with fs.locked(path):
        current = fs.read_snapshot(path, max_bytes=document.DEFAULT_MAX_BYTES)
        if current.digest != item.snapshot.digest:
            raise Conflict("the file changed since it was read; nothing was written", code="STALE_WRITE", path=relpath, hint="run moss upgrade again")
        if item.upgrade.new_relpath == relpath:
            fs.write_if_unchanged(current, item.data)
            return lambda: _restore(path, item.data, original)
        target = root / item.upgrade.new_relpath
        if not fs.create_exclusive(target, item.data):
            raise Conflict(f"{item.upgrade.new_relpath} appeared while the upgrade ran", code="ALREADY_EXISTS", path=item.upgrade.new_relpath)
        fs.remove(path)
    return lambda: _move_back(target, item.data, path, original)


def _restore(path: Path, written: bytes, original: bytes) -> None:
    with fs.locked(path):
        now = fs.read_snapshot(path, max_bytes=document.DEFAULT_MAX_BYTES)
        if now.data == written:
            fs.write_if_unchanged(now, original)


def _move_back(target: Path, written: bytes, path: Path, original: bytes) -> None:
    if fs.read_bytes(target, max_bytes=document.DEFAULT_MAX_BYTES) != written:
        return
    if fs.create_exclusive(path, original):
        fs.remove(target)


def _rewrite_mailbox(item: Planned) -> Undo:
    """Upgrade a v1 mailbox file through needlecast's rewrite, which loses no block an agent
    appends meanwhile; the upgrade is planned again on the bytes it finds (it only touches the
    first line)."""
    import needlecast

    spec = formats.KINDS[item.upgrade.kind]
    facts = formats.Facts(item.upgrade.relpath)
    original_version = item.upgrade.old_version
    had_marker = formats.without_marker(spec.marker, _decode(item.snapshot.data or b"", spec, facts.relpath)[0])[1] is not None

    def forward(data: bytes | None) -> bytes | None:
        if data is None:
            return None
        text, bom = _decode(data, spec, facts.relpath)
        return _encode(formats.upgrade_text(spec.name, text, facts), bom, spec)

    def backward(data: bytes | None) -> bytes | None:
        if data is None:
            return None
        text, bom = _decode(data, spec, facts.relpath)
        old = formats.set_marker(spec.marker, text, original_version) if had_marker else formats.without_marker(spec.marker, text)[0]
        return _encode(old, bom, spec)

    needlecast.rewrite_mailbox_file(item.path, forward)

    def undo() -> None:
        needlecast.rewrite_mailbox_file(item.path, backward)

    return undo


# --------------------------------------------------------------------------- the report


def _report(
    root: Path, dry_run: bool, wanted: tuple[formats.Kind, ...], planned: list[Planned], at_current: dict[str, int], problems: list[Problem]
) -> dict[str, Any]:
    kinds: dict[str, dict[str, Any]] = {}
    for spec in wanted:
        kinds[spec.name] = {"current": spec.current, "files": 0, "at_current": at_current.get(spec.name, 0), "upgraded": {}, "problems": 0}
        kinds[spec.name]["files"] = kinds[spec.name]["at_current"]
    files = []
    for item in planned:
        up = item.upgrade
        entry = kinds[up.kind]
        step = f"{up.old_version} -> {up.new_version}"
        entry["upgraded"][step] = entry["upgraded"].get(step, 0) + 1
        entry["files"] += 1
        record: dict[str, Any] = {"path": up.relpath, "kind": up.kind, "from": up.old_version, "to": up.new_version}
        if up.new_relpath != up.relpath:
            record["moved_to"] = up.new_relpath
        files.append(record)
    shown_problems = []
    for problem in problems:
        if problem.kind in kinds:
            kinds[problem.kind]["problems"] += 1
            kinds[problem.kind]["files"] += 1
        body = error_body(problem.error)["error"]
        body["path"] = problem.relpath
        shown_problems.append({"kind": problem.kind, **body})
    upgraded = len(files)
    unchanged = sum(at_current.values())
    verb = "Would upgrade" if dry_run else "Upgraded"
    message = f"{verb} {upgraded} file{'s' * (upgraded != 1)}; {unchanged} at the current version"
    if problems:
        message += f"; {len(problems)} left as they are (problems)"
    return {
        "root": str(root),
        "dry_run": dry_run,
        "kinds": {name: entry for name, entry in kinds.items() if entry["files"]},
        "files": files,
        "problems": shown_problems,
        "upgraded": upgraded,
        "unchanged": unchanged,
        "message": message,
    }

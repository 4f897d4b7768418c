"""The hooks' use cases: session start (the orientation), pre-compact (the checkpoint note),
stop (the reminder) and user-prompt-submit (new mail). Shell layer: gather with `gather` and
the packages' public readers, decide with `orientation`, write the per-session state and the
checkpoint note.

Each takes the Context (its `worker_id` is the board worker), the host's event (a dict), the
`[hooks]` settings and the moment the hook's process started, and returns an `Answer`: the text
for a person and the JSON object for the host, or neither when there is nothing to say. Every
part of the orientation is read on its own: a part that fails is left out and named (and the
failure logged), and past `deadline_ms` of the hook's time (1,000 by default) the optional parts
are left out, so a slow disk or a huge workspace makes the orientation shorter, never the
session slower.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moss_files.foundation.context import Context
from moss_files.hooks import gather, orientation
from moss_files.hooks.orientation import Facts, HookSettings

BOARD_COLD_LIMIT = 300  # task files the board may parse without its cache (about 100 ms)
CHECKPOINTS = Path(".moss") / "checkpoints"
MTIME_SLACK = 0.05  # seconds
CURRENT = Path(".cstack") / "CURRENT.md"


@dataclass(frozen=True, slots=True)
class Answer:
    """What a hook says: `text` for a person, `output` (JSON) for the agent's host."""

    text: str | None = None
    output: dict[str, Any] | None = None


NOTHING = Answer()


def _key_hash(key: str) -> str:
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _baseline(ctx: Context, session: Any) -> gather.SessionState:
    """A session's state as it starts: its time, HEAD and CURRENT.md's signature (the inbox is
    the caller's). No git process: a session start pays only for reading a few files."""
    root = ctx.root
    state = gather.SessionState(session=gather.session_name(session), started=ctx.now().timestamp())
    state.head = gather.head_commit(root)
    state.current = gather.signature(root / CURRENT)
    return state


def _inbox_keys(ctx: Context, glance: Mapping[str, Any] | None) -> list[str]:
    return sorted({_key_hash(key) for key in (glance or {}).get("keys", ())})


def _glance(ctx: Context, newest: int) -> dict[str, Any] | None:
    if not (ctx.root / ".needlecast").is_dir():
        return None
    import needlecast

    result: dict[str, Any] = needlecast.inbox_glance(ctx.root, newest=newest)
    return result


# --------------------------------------------------------------------------- session start


def session_start(ctx: Context, event: Mapping[str, Any], settings: HookSettings, *, started: float) -> Answer:
    """The orientation the session starts with, as the context the host adds; the session's
    baseline (work tree, CURRENT.md, inbox) for the later hooks."""
    source = str(event.get("source") or "startup")
    session = event.get("session_id")
    state = gather.load_state(ctx.root, session)
    stamp = gather.inbox_stamp(ctx.root)  # before the inbox is read: a message arriving meanwhile is news later
    facts, glance = gather_facts(ctx, source=source, state=state, started=started, deadline=settings.deadline_ms / 1000)
    text = orientation.render_orientation(facts, budget_tokens=settings.orientation_tokens)
    if state is None or source == "startup":
        state = _baseline(ctx, session)
        gather.prune_states(ctx.root, time.time())
    state.inbox_keys = _inbox_keys(ctx, glance)
    state.inbox_stamp = stamp if glance is not None else None
    gather.save_state(ctx.root, state)
    return Answer(text, {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}})


def gather_facts(
    ctx: Context,
    *,
    source: str,
    state: gather.SessionState | None,
    started: float,
    deadline: float = orientation.DEFAULT_DEADLINE_MS / 1000,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Facts, dict[str, Any] | None]:
    """The orientation's facts (and the inbox glance, which the session's baseline keeps)."""
    root = ctx.root
    skipped: list[str] = []
    values: dict[str, Any] = {"source": source}

    def part(name: str, read: Callable[[], None], *, optional: bool = True) -> None:
        if optional and clock() - started > deadline:
            skipped.append(f"{name} (out of time)")
            return
        try:
            read()
        except _Skip as why:
            skipped.append(f"{name} ({why})")
        except Exception as exc:  # one unreadable part must not take the others with it
            gather.log_failure(root, f"session-start: {name}", exc)
            skipped.append(f"{name} ({getattr(exc, 'code', type(exc).__name__)})")

    def current() -> None:
        import cstack

        values["current"] = cstack.show_status(ctx)

    def ready() -> None:
        import cstack

        tasks = cstack.list_ready(ctx)["tasks"]
        values["ready"], values["ready_total"] = tasks[:5], len(tasks)

    glance: dict[str, Any] | None = None

    def inbox() -> None:
        nonlocal glance
        glance = _glance(ctx, 3)
        values["inbox"] = glance

    def checkpoint() -> None:
        values["checkpoint"] = _checkpoint_facts(root, state.checkpoint if state else None)

    def board() -> None:
        values["worker"] = ctx.worker_id
        values["board"] = _held_tasks(root, str(ctx.worker_id))

    def decisions() -> None:
        values["decisions"] = _decisions(root)

    def capsule() -> None:
        values["capsule"] = _newest_capsule(root)

    if source in ("compact", "resume") and state is not None and state.checkpoint:
        part("checkpoint", checkpoint, optional=False)
    if (root / CURRENT).is_file():
        part("CURRENT.md", current, optional=False)
    if (root / ".cstack" / "PLAN.md").is_file():
        part("ready tasks", ready)
    if (root / ".needlecast").is_dir():
        part("inbox", inbox)
    if ctx.worker_id and (root / ".moss" / "board").is_dir():
        part("board", board)
    if (root / ".cstack" / "MEMORY.md").is_file():
        part("decisions", decisions)
    if (root / ".moss" / "capsules").is_dir():
        part("capsules", capsule)
    return Facts(skipped=tuple(skipped), **values), glance


def _checkpoint_facts(root: Path, relpath: str | None) -> dict[str, Any] | None:
    if not relpath:
        return None
    from moss_files.foundation import fs

    doc = fs.read_document(root / relpath)
    body = doc.body.split("## In flight", 1)[-1]
    return {"path": relpath, "created": doc.meta.get("created"), "trigger": doc.meta.get("trigger"), "body": body}


def _held_tasks(root: Path, worker: str) -> list[dict[str, Any]]:
    tasks = root / ".moss" / "board" / "tasks"
    if not (root / ".moss" / "cache" / "board.json").is_file():
        try:
            count = sum(1 for name in os.listdir(tasks) if name.endswith(".md"))
        except OSError:
            count = 0
        if count > BOARD_COLD_LIMIT:
            raise _Skip(f"{count} task files and no board cache yet: `moss task list` builds it")
    from moss_files.board.model import ACTIVE
    from moss_files.board.store import BoardStore

    board = BoardStore(root).outline(ACTIVE)
    held = [task for task in board.tasks.values() if task.assigned_worker == worker and task.status in ACTIVE]
    return [{"id": task.id, "title": task.title, "status": task.status} for task in sorted(held, key=lambda t: t.id)]


class _Skip(Exception):
    """A part left out on purpose; its message says why."""

    code = "skipped"


def _decisions(root: Path) -> list[dict[str, Any]]:
    import cstack

    entries = cstack.memory_to_dict(cstack.read_memory(root)).get("decisions") or []
    newest = sorted(entries, key=lambda entry: (entry.get("date") or "", entry.get("line") or 0), reverse=True)
    return [{"date": entry.get("date"), "text": entry.get("text")} for entry in newest[:3]]


def _newest_capsule(root: Path) -> dict[str, Any] | None:
    """The capsule file changed last (by its modification time), read for its title and time.

    Capsules come and go while a session starts (another sleeve archives, renames or rewrites
    one): a file or folder gone between its listing and its stat or read is left out, and the
    next newest is read instead."""
    from moss_files.foundation import fs
    from moss_files.foundation.errors import NotFound

    found: list[tuple[int, str]] = []
    try:
        workspaces = list(os.scandir(root / ".moss" / "capsules"))
    except FileNotFoundError:
        return None
    for workspace in workspaces:
        if workspace.name.startswith(".") or not workspace.is_dir():
            continue
        try:
            with os.scandir(workspace.path) as items:
                for item in items:
                    if item.name.endswith(".md") and not item.name.startswith(".") and item.is_file():
                        try:
                            found.append((item.stat().st_mtime_ns, item.path))
                        except FileNotFoundError:
                            continue
        except (FileNotFoundError, NotADirectoryError):
            continue
    for _mtime, name in sorted(found, reverse=True):
        path = Path(name)
        try:
            meta = fs.read_document(path).meta
        except NotFound:
            continue
        return {"workspace": path.parent.name, "name": path.stem, "title": meta.get("title"), "updated": meta.get("updated_at") or meta.get("updated")}
    return None


# --------------------------------------------------------------------------- pre-compact


def pre_compact(ctx: Context, event: Mapping[str, Any], settings: HookSettings, *, started: float) -> Answer:
    """Write a checkpoint note (`.moss/checkpoints/CHK-….md`) of what was in flight before the
    compaction: the active task and next steps, the last prompts, the files edited, the work
    tree's changes; the next session start shows it."""
    if not settings.checkpoint:
        return NOTHING
    from moss_files.foundation import document, formats, fs
    from moss_files.loopflow.sanitize import sanitize

    root = ctx.root
    session = event.get("session_id")
    current: Mapping[str, Any] = {}
    if (root / CURRENT).is_file():
        import cstack

        current = cstack.show_status(ctx)
    git = gather.git_state(root)
    said = orientation.parse_transcript(gather.transcript_tail(event.get("transcript_path")), root=str(root))
    home = str(Path.home())

    def clean(text: str) -> str:
        # Prompts and instructions go into a tracked file: no secrets, no machine paths.
        return sanitize(text, root=str(root), home=home).text

    instructions = str(event.get("custom_instructions") or "").strip()
    point = orientation.Checkpoint(
        id=ctx.id_source().prefixed("CHK"),
        created=ctx.stamp(),
        session=gather.session_name(session) if session else None,
        trigger=str(event.get("trigger") or "") or None,
        branch=git.branch if git else None,
        head=git.head if git else None,
        task=current.get("task"),
        next_steps=tuple(orientation.clip(step, 200) for step in current.get("next_steps") or ()),
        prompts=tuple(clean(prompt) for prompt in said.prompts),
        edited=tuple(clean(path) for path in said.files),
        dirty=tuple(path for path in (git.changed if git else ()) if orientation.is_code_path(path))[:40],
        instructions=clean(orientation.clip(instructions, 2000)) if instructions else None,
    )
    text = document.render(formats.stamp("checkpoint", orientation.checkpoint_meta(point)), orientation.checkpoint_body(point))
    relpath = (CHECKPOINTS / f"{point.id}.md").as_posix()
    (root / CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    fs.create_exclusive(root / relpath, text.encode("utf-8"))
    state = gather.load_state(root, session) or _baseline(ctx, session)
    state.checkpoint = relpath
    gather.save_state(root, state)
    message = f"moss: checkpoint saved to {relpath} before the compaction"
    return Answer(message, {"systemMessage": message})


# --------------------------------------------------------------------------- stop


def stop(ctx: Context, event: Mapping[str, Any], settings: HookSettings, *, started: float) -> Answer:
    """At a stop: when this session changed code (files, or commits) and CURRENT.md did not
    change, remind the person, or (`stop = "continue"`) ask the agent to update it; once for
    each state of the work, and never while the host is already continuing for a stop hook."""
    if event.get("stop_hook_active") or settings.stop == "off":
        return NOTHING
    root = ctx.root
    state = gather.load_state(root, event.get("session_id"))
    if state is None or not (root / CURRENT).is_file() or gather.signature(root / CURRENT) != state.current:
        return NOTHING  # no baseline, no CURRENT.md to keep, or it was updated
    git = gather.git_state(root)
    if git is None:
        return NOTHING
    # A file changed in this session is one modified since it started (a deleted one counts:
    # it is gone, which only this session's work can have done to a file git still lists).
    # The kernel stamps files from a coarse clock (a tick behind the one read at the start).
    since = int((state.started - MTIME_SLACK) * 1_000_000_000)
    changed = sorted(path for path in git.changed if orientation.is_code_path(path) and (gather.mtime_ns(root / path) or since) >= since)
    base = state.head or gather.EMPTY_TREE  # a first commit made in this session counts too
    committed = bool(git.head and git.head != state.head and any(orientation.is_code_path(p) for p in gather.committed_paths(root, base, git.head)))
    if not changed and not committed:
        return NOTHING
    work = json.dumps([git.head, [(path, gather.mtime_ns(root / path)) for path in changed]])
    fingerprint = hashlib.blake2b(work.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    if state.reminded == fingerprint:
        return NOTHING  # said already for this state of the work
    state.reminded = fingerprint
    gather.save_state(root, state)
    ask = settings.stop == "continue"
    text = orientation.stop_reminder(changed, committed=committed, ask=ask)
    return Answer(text, {"decision": "block", "reason": text} if ask else {"systemMessage": text})


# --------------------------------------------------------------------------- prompts


def user_prompt_submit(ctx: Context, event: Mapping[str, Any], settings: HookSettings, *, started: float) -> Answer:
    """One line of context when mail arrived since the last prompt (or the session's start)."""
    root = ctx.root
    if not settings.mail or not (root / ".needlecast").is_dir():
        return NOTHING
    session = event.get("session_id")
    state = gather.load_state(root, session)
    stamp = gather.inbox_stamp(root)
    if state is not None and state.inbox_stamp == stamp:
        return NOTHING  # nothing reached the inbox: no message need be read
    glance = _glance(ctx, 1)
    assert glance is not None
    keys = _inbox_keys(ctx, glance)
    if state is None:  # no session start seen: this prompt sets the baseline
        state = _baseline(ctx, session)
        state.inbox_keys, state.inbox_stamp = keys, stamp
        gather.save_state(root, state)
        return NOTHING
    arrived = len(set(keys) - set(state.inbox_keys))
    state.inbox_keys, state.inbox_stamp = keys, stamp
    gather.save_state(root, state)
    if not arrived:
        return NOTHING
    line = orientation.mail_line(arrived, glance)
    return Answer(line, {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": line}})


HANDLERS: dict[str, Callable[..., Answer]] = {
    "session-start": session_start,
    "pre-compact": pre_compact,
    "stop": stop,
    "user-prompt-submit": user_prompt_submit,
}

"""What the hooks say: the orientation a session starts with, the line about new mail, the
reminder at a stop, the checkpoint note before a compaction, and what the tail of a transcript
tells. Core layer: pure functions over values (no I/O, no clock; times come in).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOKEN_CHARS = 4  # about four characters to a token, for English prose and code
DEFAULT_BUDGET_TOKENS = 1500
LINE_CHARS = 200
PROMPT_CHARS = 400
TOOLKIT_PATHS = (".cstack/", ".needlecast/", ".moss/")
# Claude Code's file-changing tools and the argument naming the file.
EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path"}
POINTERS = (
    "More: `cstack status` / `cstack ready` (MCP cstack.status, cstack.ready), `needlecast inbox --unread` "
    "(needlecast.inbox), `moss task list` (the board), `moss search WORDS` (loop_scan), `moss latest` (moss.latest)."
)


@dataclass(frozen=True, slots=True)
class Facts:
    """What the orientation is made of; each part None (or empty) when the workspace lacks it.

    `current` is `cstack status --json`, `ready` the first ready tasks (`ready_total` of them;
    None when PLAN.md was not read),
    `inbox` `needlecast.inbox_glance`, `board` the tasks `worker` holds ({id, title, status}),
    `decisions` MEMORY.md's newest decisions ({date, text}), `capsule` the newest capsule
    ({workspace, name, title, updated}), `checkpoint` the note written before this session's
    last compaction ({path, created, trigger, body}), `skipped` parts left out and why.
    """

    source: str = "startup"
    current: Mapping[str, Any] | None = None
    ready: Sequence[Mapping[str, Any]] | None = None
    ready_total: int = 0
    inbox: Mapping[str, Any] | None = None
    worker: str | None = None
    board: Sequence[Mapping[str, Any]] = ()
    decisions: Sequence[Mapping[str, Any]] = ()
    capsule: Mapping[str, Any] | None = None
    checkpoint: Mapping[str, Any] | None = None
    skipped: Sequence[str] = ()


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` costs a model (TOKEN_CHARS characters to one)."""
    return (len(text) + TOKEN_CHARS - 1) // TOKEN_CHARS


def clip(text: str, limit: int = LINE_CHARS) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _first_line(body: str) -> str:
    for line in body.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _current_part(current: Mapping[str, Any]) -> list[str]:
    task = current.get("task")
    status = current.get("status") or current.get("state")
    head = f"Active task: {clip(task, 120)}" if task else "Active task: none"
    if status:
        head += f" ({status})"
    lines = [head + " — .cstack/CURRENT.md"]
    if current.get("focus"):
        lines.append(f"Focus: {clip(current['focus'])}")
    steps = [clip(step, 160) for step in current.get("next_steps") or ()]
    if steps:
        lines.append("Next steps:")
        lines += [f"  {number}. {step}" for number, step in enumerate(steps[:5], start=1)]
        if len(steps) > 5:
            lines.append(f"  … {len(steps) - 5} more in CURRENT.md")
    blockers = [clip(item, 160) for item in current.get("blockers") or ()]
    if blockers:
        lines.append(clip("Blockers: " + "; ".join(blockers[:3])))
    progress = current.get("progress") or {}
    if progress.get("total"):
        lines.append(f"Progress: {progress.get('completed', 0)} of {progress['total']} subtasks")
    return lines


def _ready_part(ready: Sequence[Mapping[str, Any]], total: int) -> list[str]:
    if not total:
        return ["Ready tasks: none (PLAN.md)"]
    lines = [f"Ready tasks (PLAN.md): {total}"]
    for task in ready[:5]:
        ident = f" (id: {task['id']})" if task.get("id") else ""
        priority = f"{task['priority']} " if task.get("priority") else ""
        lines.append(f"  - #{task.get('number', '?')} {priority}{clip(task.get('title', ''), 120)}{ident}")
    if total > 5:
        lines.append(f"  … {total - 5} more: `cstack ready`")
    return lines


def _inbox_part(inbox: Mapping[str, Any]) -> list[str]:
    unread, total = inbox.get("unread", 0), inbox.get("total", 0)
    if not unread:
        return [f"Inbox: no unread messages ({total} in all)"]
    lines = [f"Inbox: {unread} unread of {total}"]
    for entry in reversed(inbox.get("newest_unread") or ()):
        message = entry.get("message") or {}
        kind = f" [{message['type']}]" if message.get("type") else ""
        lines.append(f"  - {entry.get('key')} from {message.get('from') or '?'}{kind}: {clip(_first_line(message.get('body') or ''), 120)}")
    lines.append("  Read with `needlecast read ID` (needlecast.read); wait for more with `needlecast wait` (needlecast.wait).")
    return lines


def _board_part(worker: str, board: Sequence[Mapping[str, Any]]) -> list[str]:
    if not board:
        return [f"Board: {worker} holds no task (`moss task claim -w {worker}`, MCP moe.claim_next_task)"]
    lines = [f"Board: {worker} holds {len(board)} task{'s' if len(board) != 1 else ''}"]
    lines += [f"  - {task['id']} [{task.get('status', '?')}] {clip(task.get('title', ''), 120)}" for task in board[:5]]
    return lines


def _decision_part(decisions: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["Recent decisions (MEMORY.md):"]
    lines += [f"  - {item.get('date') or '-'}: {clip(item.get('text', ''), 160)}" for item in decisions[:3]]
    return lines


def _capsule_part(capsule: Mapping[str, Any]) -> list[str]:
    where = f"{capsule.get('workspace')}/{capsule.get('name')}"
    title = f" — {clip(capsule['title'], 100)}" if capsule.get("title") and capsule.get("title") != capsule.get("name") else ""
    when = f", updated {capsule['updated']}" if capsule.get("updated") else ""
    return [f"Newest handoff capsule: {where}{title}{when} (`moss fetch {capsule.get('name')} --workspace {capsule.get('workspace')}`)"]


def _checkpoint_part(checkpoint: Mapping[str, Any], budget: int) -> list[str]:
    lines = [f"Before the compaction ({checkpoint.get('trigger') or 'auto'}, {checkpoint.get('created') or '?'}) a checkpoint was saved: {checkpoint['path']}"]
    body = [line for line in str(checkpoint.get("body") or "").splitlines() if line.strip()]
    kept: list[str] = []
    used = 0
    for line in body:
        line = "  " + clip(line, 180)
        if used + len(line) > budget:
            kept.append("  … (read the file for the rest)")
            break
        kept.append(line)
        used += len(line) + 1
    return lines + kept


def render_orientation(facts: Facts, *, budget_tokens: int = DEFAULT_BUDGET_TOKENS) -> str:
    """The text a session starts with: where the work stands, in parts, most important first,
    within `budget_tokens` (parts that do not fit are named at the end instead)."""
    title = {"compact": "after a compaction", "resume": "resumed", "clear": "after /clear"}.get(facts.source, "starting")
    budget = budget_tokens * TOKEN_CHARS
    parts: list[tuple[str, list[str]]] = []
    if facts.checkpoint is not None:
        parts.append(("checkpoint", _checkpoint_part(facts.checkpoint, max(400, budget // 4))))
    if facts.current is not None and facts.current.get("exists", True):
        parts.append(("current", _current_part(facts.current)))
    if facts.ready is not None:
        parts.append(("ready", _ready_part(facts.ready, facts.ready_total)))
    if facts.inbox is not None:
        parts.append(("inbox", _inbox_part(facts.inbox)))
    if facts.worker:
        parts.append(("board", _board_part(facts.worker, facts.board)))
    if facts.decisions:
        parts.append(("decisions", _decision_part(facts.decisions)))
    if facts.capsule is not None:
        parts.append(("capsule", _capsule_part(facts.capsule)))
    lines = [f"moss-files workspace, session {title}. Where the work stands:"]
    used = len(lines[0]) + len(POINTERS) + 200
    left_out = list(facts.skipped)
    for name, part in parts:
        size = sum(len(line) + 1 for line in part)
        if used + size > budget:
            left_out.append(f"{name} (over the {budget_tokens}-token budget)")
            continue
        lines += part
        used += size
    if left_out:
        lines.append(clip("Not shown: " + "; ".join(left_out) + ".", LINE_CHARS * 2))
    lines.append(POINTERS)
    return "\n".join(lines)


def mail_line(arrived: int, inbox: Mapping[str, Any]) -> str:
    """The one line a prompt gets when mail arrived since the last one."""
    newest = (inbox.get("newest_unread") or [None])[-1]
    about = ""
    if newest is not None:
        message = newest.get("message") or {}
        kind = f" [{message['type']}]" if message.get("type") else ""
        about = f" Newest: {newest.get('key')} from {message.get('from') or '?'}{kind}: {clip(_first_line(message.get('body') or ''), 100)}."
    plural = "s" if arrived != 1 else ""
    return (
        f"moss: {arrived} new message{plural} in the inbox since the last prompt ({inbox.get('unread', 0)} unread).{about}"
        " Read: `needlecast inbox --unread` or needlecast.inbox."
    )


def is_code_path(path: str) -> bool:
    """Whether a changed path is the project's work rather than the toolkit's own files."""
    return not path.startswith(TOOLKIT_PATHS)


def stop_reminder(changed: Sequence[str], *, committed: bool, ask: bool) -> str:
    """The reminder at a stop when code changed but CURRENT.md did not: for the person
    (`ask` False) or, as the reason to continue, for the agent."""
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    what = f"changed {shown}" if changed else "made commits"
    if committed and changed:
        what += " and made commits"
    if ask:
        return (
            f"This session {what}, but .cstack/CURRENT.md was not updated. Before stopping, record where the work "
            "stands: the active task's status and next steps (`cstack start`/`cstack done`, or edit CURRENT.md; "
            "/cstack-checkpoint does both files), so the next session can pick up from there."
        )
    return f"moss: this session {what}, but .cstack/CURRENT.md was not updated; /cstack-checkpoint records where the work stands."


# --------------------------------------------------------------------------- transcripts


@dataclass(frozen=True, slots=True)
class TranscriptFacts:
    """What a transcript's tail tells: the last prompts of the person, the files edited."""

    prompts: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


def _prompt_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [block.get("text", "") for block in content if isinstance(block, Mapping) and block.get("type") == "text"]
        if texts and not any(isinstance(block, Mapping) and block.get("type") == "tool_result" for block in content):
            return "\n".join(texts)
    return None


def parse_transcript(lines: Iterable[str], *, root: str | None = None, prompts: int = 3, files: int = 30) -> TranscriptFacts:
    """The person's last `prompts` prompts and the files edited (newest last, made relative
    to `root`) in a Claude Code transcript's JSON lines; lines of other shapes (Codex's
    rollout, a line cut by the read) are skipped."""
    said: list[str] = []
    edited: dict[str, None] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, Mapping):
            continue
        message = record.get("message")
        if not isinstance(message, Mapping):
            continue
        if record.get("type") == "user" and message.get("role") == "user" and not record.get("isMeta"):
            text = _prompt_text(message.get("content"))
            if text and text.strip() and not text.lstrip().startswith("<"):
                said.append(clip(text, PROMPT_CHARS))
        elif record.get("type") == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, Mapping) and block.get("type") == "tool_use" and block.get("name") in EDIT_TOOLS:
                    arguments = block.get("input")
                    path = arguments.get(EDIT_TOOLS[block["name"]]) if isinstance(arguments, Mapping) else None
                    if isinstance(path, str) and path:
                        relative = path[len(root) + 1 :] if root and path.startswith(root.rstrip("/") + "/") else path
                        edited.pop(relative, None)
                        edited[relative] = None
    return TranscriptFacts(tuple(said[-prompts:]), tuple(list(edited)[-files:]))


# --------------------------------------------------------------------------- checkpoints


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a checkpoint note records before a compaction."""

    id: str
    created: str
    session: str | None = None
    trigger: str | None = None
    branch: str | None = None
    head: str | None = None
    task: str | None = None
    next_steps: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    edited: tuple[str, ...] = ()
    dirty: tuple[str, ...] = ()
    instructions: str | None = None


def checkpoint_meta(point: Checkpoint) -> dict[str, Any]:
    """The frontmatter of a checkpoint note, in its declared order (absent values left out)."""
    meta: dict[str, Any] = {"id": point.id, "kind": "checkpoint", "created": point.created}
    for key in ("session", "trigger", "branch", "head", "task"):
        value = getattr(point, key)
        if value:
            meta[key] = value
    if point.edited:
        meta["files"] = list(point.edited)
    return meta


def checkpoint_body(point: Checkpoint) -> str:
    """The body of a checkpoint note: what was in flight, in sections."""
    sections: list[str] = ["# Checkpoint before a compaction", ""]
    sections += ["## In flight", "", f"Active task: {point.task or 'none'}"]
    if point.next_steps:
        sections += ["", "Next steps (CURRENT.md):", *[f"{n}. {step}" for n, step in enumerate(point.next_steps, start=1)]]
    if point.prompts:
        sections += ["", "## The last prompts", "", *[f"- {prompt}" for prompt in point.prompts]]
    if point.edited:
        sections += ["", "## Files edited in this session", "", *[f"- {path}" for path in point.edited]]
    if point.dirty:
        sections += ["", "## Uncommitted changes", "", *[f"- {path}" for path in point.dirty]]
    if point.instructions:
        sections += ["", "## Instructions given for the compaction", "", point.instructions]
    return "\n".join(sections) + "\n"


# --------------------------------------------------------------------------- settings

STOP_MODES = ("remind", "continue", "off")
DEFAULT_DEADLINE_MS = 1000


@dataclass(frozen=True, slots=True)
class HookSettings:
    """The `[hooks]` table of `.moss/config.toml`.

    `stop`: at a stop after code changed without CURRENT.md, `remind` the person (default),
    ask the agent to `continue` and update it, or say nothing (`off`); `checkpoint`: write a
    checkpoint note before a compaction; `mail`: tell a prompt about new mail; `worker`: the
    board worker this agent is (else MOE_WORKER_ID); `orientation_tokens`: the orientation's
    budget; `deadline_ms`: the hook's own time after which the orientation's optional parts
    are left out (named as not shown).
    """

    stop: str = "remind"
    checkpoint: bool = True
    mail: bool = True
    worker: str | None = None
    orientation_tokens: int = DEFAULT_BUDGET_TOKENS
    deadline_ms: int = DEFAULT_DEADLINE_MS


def parse_settings(table: Any) -> tuple[HookSettings, list[str]]:
    """The settings of a `[hooks]` table, and what was wrong with it (each wrong value is left
    at its default: a hook never fails over its settings)."""
    if not isinstance(table, Mapping):
        return HookSettings(), ([] if table is None else ["[hooks] is not a table"])
    problems: list[str] = []
    values: dict[str, Any] = {}
    stop = table.get("stop", "remind")
    if stop in STOP_MODES:
        values["stop"] = stop
    else:
        problems.append(f"hooks.stop must be one of {', '.join(STOP_MODES)}, not {stop!r}")
    for key in ("checkpoint", "mail"):
        if key in table:
            if isinstance(table[key], bool):
                values[key] = table[key]
            else:
                problems.append(f"hooks.{key} must be true or false")
    worker = table.get("worker")
    if isinstance(worker, str) and worker.strip():
        values["worker"] = worker.strip()
    elif worker is not None:
        problems.append("hooks.worker must be a worker's name")
    tokens = table.get("orientation_tokens")
    if isinstance(tokens, int) and not isinstance(tokens, bool) and 200 <= tokens <= 20000:
        values["orientation_tokens"] = tokens
    elif tokens is not None:
        problems.append("hooks.orientation_tokens must be a number from 200 to 20000")
    deadline = table.get("deadline_ms")
    if isinstance(deadline, int) and not isinstance(deadline, bool) and 0 <= deadline <= 600_000:
        values["deadline_ms"] = deadline
    elif deadline is not None:
        problems.append("hooks.deadline_ms must be a number of milliseconds from 0 to 600000")
    unknown = sorted(set(table) - {"stop", "checkpoint", "mail", "worker", "orientation_tokens", "deadline_ms"})
    if unknown:
        problems.append(f"unknown keys in [hooks]: {', '.join(unknown)}")
    return HookSettings(**values), problems

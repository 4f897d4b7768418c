"""Agent sessions, runs and events, and their file forms. Core layer (pure; foundation only).

A session is a markdown file with frontmatter (`.moss/agent/sessions/<id>.md`); its events are
an append-only JSON Lines file beside it (`<id>.jsonl`), one event per line:

    {"id": ULID, "ts": "2026-01-21T10:00:00.123Z", "kind": "run.started",
     "session": ULID, "run": ULID | null, "data": {...}}

The events are the record; the session file is what a person reads (its frontmatter keeps the
totals, its body one section per finished run). Lines are read in file order, which is the
order they were written (one writer per session holds the run lock); a line that is not a
complete event (a torn last line after a crash, a line a merge mangled) is reported and
skipped, and an event id seen twice (a union merge of two clones) counts once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moss_files.foundation import document, formats, structured, summaries
from moss_files.foundation.document import Document
from moss_files.foundation.errors import InvalidDocument, InvalidRequest, NotFound
from moss_files.foundation.fields import FieldReader

# The spec's kinds (Bosun M0/M1 §5.2), then ours: what the runtime read to orient the model,
# a retried model call, and a session closed by `quit`.
SPEC_KINDS = (
    "session.created",
    "run.started",
    "prompt.built",
    "assistant.delta",
    "assistant.message",
    "tool.requested",
    "tool.invoked",
    "tool.succeeded",
    "tool.failed",
    "capability.granted",
    "capability.denied",
    "run.succeeded",
    "run.failed",
)
EXTRA_KINDS = ("session.oriented", "model.retried", "session.ended", "role.claimed", "role.released", "role.idle")
EVENT_KINDS = SPEC_KINDS + EXTRA_KINDS
RUN_END_KINDS = frozenset({"run.succeeded", "run.failed"})

SESSION_KIND = "agent-session"  # the `kind:` of a session file, which the search index reads
SESSION_STATUSES = ("idle", "running", "ended")
RUN_STATUSES = ("running", "succeeded", "failed", "interrupted")
MAX_ANSWER_CHARS = 4000  # of an answer shown in the session file; the event log has it whole


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Event:
    """One line of a session's event log."""

    id: str
    ts: str
    kind: str
    session: str | None
    run: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LogProblem:
    """A line of an event log that was skipped, and why."""

    line: int
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class EventLog:
    """The events of one file in order, and the lines skipped."""

    events: tuple[Event, ...] = ()
    problems: tuple[LogProblem, ...] = ()
    torn_tail: bool = False  # the file does not end with a newline: its last line is torn


def stamp_ms(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds and a `Z`: the time of an event."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def event_to_dict(event: Event) -> dict[str, Any]:
    """The JSON shape of an event (the file's line, and `moss agent logs --json`)."""
    return {"id": event.id, "ts": event.ts, "kind": event.kind, "session": event.session, "run": event.run, "data": dict(event.data)}


def event_to_line(event: Event) -> bytes:
    """One event as a line of the log (compact JSON, UTF-8, ending in a newline)."""
    return (json.dumps(event_to_dict(event), ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")


def parse_event(text: str) -> Event:
    """Parse one line. Raises ValueError when it is not a complete event."""
    raw = structured.loads_json(text)
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    formats.check_record("agent-events", raw)  # InvalidDocument FORMAT_TOO_NEW for a newer line
    ident, ts, kind = raw.get("id"), raw.get("ts"), raw.get("kind")
    if not (isinstance(ident, str) and ident and isinstance(ts, str) and isinstance(kind, str) and kind):
        raise ValueError("an event needs the texts id, ts and kind")
    session, run, data = raw.get("session"), raw.get("run"), raw.get("data", {})
    if session is not None and not isinstance(session, str) or run is not None and not isinstance(run, str):
        raise ValueError("session and run must be texts or null")
    if not isinstance(data, dict):
        raise ValueError("data must be an object")
    return Event(ident, ts, kind, session, run, data)


def parse_events(data: bytes) -> EventLog:
    """Every event of a log file's bytes, in order; bad lines are reported, never fatal."""
    events: list[Event] = []
    problems: list[LogProblem] = []
    seen: set[str] = set()
    lines = data.split(b"\n")
    torn = bool(lines) and lines[-1] != b""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = number == len(lines)
        try:
            event = parse_event(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            why = "the last line is incomplete (a write was cut off); it is skipped" if last and torn else f"not an event: {exc}"
            problems.append(LogProblem(number, "EVENT_LINE_INVALID", why))
            continue
        except InvalidDocument as err:  # a line of a newer format (or a malformed marker)
            problems.append(LogProblem(number, err.code, err.message))
            continue
        # A whole object without its newline (cut off just before it) counts: the event is
        # complete, and the store ends the line before its next append.
        if event.id in seen:
            continue  # the same event twice: a union merge of two clones kept both copies
        seen.add(event.id)
        events.append(event)
    return EventLog(tuple(events), tuple(problems), torn)


def filter_events(events: Iterable[Event], *, run: str | None = None, kinds: Sequence[str] = ()) -> list[Event]:
    """The events of one run (all when None) whose kind is one of `kinds` (all when empty);
    a kind ending in `.*` (or a bare family such as `tool`) takes the whole family."""
    families = tuple(kind[:-1] if kind.endswith(".*") else kind + "." for kind in kinds if kind.endswith(".*") or "." not in kind)
    exact = frozenset(kinds)
    return [event for event in events if (run is None or event.run == run) and (not kinds or event.kind in exact or event.kind.startswith(families))]


def check_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    """`kinds` as given, each a known kind or family. Raises InvalidRequest naming the others."""
    from moss_files.foundation.arguments import refuse

    families = {kind.split(".")[0] for kind in EVENT_KINDS}
    unknown = [kind for kind in kinds if kind not in EVENT_KINDS and kind.removesuffix(".*") not in families]
    if unknown:
        raise refuse("kind", f"has unknown kinds {', '.join(unknown)}", unknown=unknown, kinds=list(EVENT_KINDS))
    return tuple(kinds)


# --------------------------------------------------------------------------- usage and runs


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one model call or a sum of them, as the API's usage fields count them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


def usage_to_dict(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }


def usage_from(value: Any) -> Usage:
    """A Usage from its dict form (missing or malformed fields count 0)."""
    if not isinstance(value, Mapping):
        return Usage()

    def number(key: str) -> int:
        found = value.get(key)
        return found if isinstance(found, int) and not isinstance(found, bool) and found >= 0 else 0

    return Usage(number("input_tokens"), number("output_tokens"), number("cache_read_tokens"), number("cache_write_tokens"))


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One tool call of a run as its events tell it."""

    call_id: str
    tool: str
    time: str
    outcome: str = "requested"  # requested | succeeded | failed | denied
    code: str | None = None
    reason: str | None = None
    duration_ms: int | None = None
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run as its events tell it."""

    id: str
    session: str | None
    status: str
    started: str
    ended: str | None = None
    model: str | None = None
    prompt: str = ""
    answer: str = ""
    steps: int = 0
    tools: tuple[ToolStep, ...] = ()
    usage: Usage = Usage()
    cost_usd: float | None = None
    error: Mapping[str, Any] | None = None
    origin: str = "user"  # user | handoff | role


def summarize_runs(events: Iterable[Event]) -> list[RunSummary]:
    """Every run in `events`, in the order they started. A run with no end event is `running`
    (the caller tells a live one from an `interrupted` one: only it knows the lock)."""
    runs: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.run is None:
            continue
        data = event.data
        if event.kind == "run.started":
            runs[event.run] = {
                "id": event.run,
                "session": event.session,
                "status": "running",
                "started": event.ts,
                "model": _text(data.get("model")),
                "prompt": _text(data.get("prompt")) or "",
                "tools": {},
                "origin": _text(data.get("origin")) or "user",
            }
            continue
        run = runs.get(event.run)
        if run is None:
            continue
        tools: dict[str, ToolStep] = run["tools"]
        call_id = _text(data.get("call_id"))
        if event.kind == "assistant.message":
            run["steps"] = max(run.get("steps", 0), _int(data.get("step")))
            run["answer"] = content_text(data.get("content")) or run.get("answer", "")
            run["usage"] = run.get("usage", Usage()) + usage_from(data.get("usage"))
        elif event.kind == "tool.requested" and call_id:
            tools[call_id] = ToolStep(call_id, _text(data.get("tool")) or "?", event.ts)
        elif event.kind == "capability.denied" and call_id in tools:
            tools[call_id] = replace(tools[call_id], outcome="denied", code="CAPABILITY_DENIED", reason=_text(data.get("reason")))
        elif event.kind in ("tool.succeeded", "tool.failed") and call_id in tools:
            step = tools[call_id]
            outcome = step.outcome if step.outcome == "denied" else event.kind.split(".")[1]
            tools[call_id] = replace(
                step,
                outcome=outcome,
                code=_text(data.get("code")) or step.code,
                reason=step.reason or _text(data.get("message")),
                duration_ms=_int(data.get("duration_ms")) if "duration_ms" in data else None,
                truncated=bool(data.get("truncated")),
            )
        elif event.kind == "role.idle" and not run.get("answer"):
            run["answer"] = _text(data.get("message")) or ""  # a role run that found nothing to do ends with no model answer
        elif event.kind in RUN_END_KINDS:
            run["status"] = "succeeded" if event.kind == "run.succeeded" else "failed"
            run["ended"] = event.ts
            cost = data.get("cost_usd")
            run["cost_usd"] = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
            if event.kind == "run.failed":
                run["error"] = {"code": _text(data.get("code")) or "RUN_FAILED", "message": _text(data.get("message")) or ""}
    out = []
    for run in runs.values():
        steps: dict[str, ToolStep] = run.pop("tools")
        out.append(RunSummary(tools=tuple(steps.values()), **run))
    return out


def run_to_dict(run: RunSummary) -> dict[str, Any]:
    """The JSON shape of a run (`moss agent run --json`, `sessions`, `logs`)."""
    return {
        "id": run.id,
        "session": run.session,
        "status": run.status,
        "origin": run.origin,
        "started": run.started,
        "ended": run.ended,
        "model": run.model,
        "prompt": run.prompt,
        "answer": run.answer,
        "steps": run.steps,
        "tool_calls": [
            {
                "call_id": t.call_id,
                "tool": t.tool,
                "time": t.time,
                "outcome": t.outcome,
                "code": t.code,
                "reason": t.reason,
                "duration_ms": t.duration_ms,
                "truncated": t.truncated,
            }
            for t in run.tools
        ],
        **usage_to_dict(run.usage),
        "cost_usd": run.cost_usd,
        "error": dict(run.error) if run.error else None,
    }


def content_text(content: Any) -> str:
    """The text blocks of an assistant message's content, joined."""
    if not isinstance(content, list):
        return ""
    return "".join(str(block.get("text", "")) for block in content if isinstance(block, dict) and block.get("type") == "text")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --------------------------------------------------------------------------- session files


@dataclass(frozen=True, slots=True)
class Session:
    """A session file's frontmatter."""

    id: str
    title: str
    created: str
    updated: str
    model: str | None = None
    status: str = "idle"
    runs: int = 0
    usage: Usage = Usage()
    cost_usd: float | None = 0.0
    current_run: str | None = None
    path: str | None = None


def new_session_text(session: Session) -> str:
    """The text of a new session file."""
    meta = formats.stamp("agent-session", session_meta(session))
    body = (
        f"# {session.title}\n\n"
        f"Agent session. Its events are in `{session.id}.jsonl` beside this file "
        f"(`moss agent logs --session {session.id}`); each finished run adds a section below.\n"
    )
    return document.render(meta, body)


def session_meta(session: Session) -> dict[str, Any]:
    """The frontmatter keys of a session, in file order."""
    return {
        "id": session.id,
        "kind": SESSION_KIND,
        "title": session.title,
        "created": session.created,
        "updated": session.updated,
        "model": session.model,
        "status": session.status,
        "runs": session.runs,
        "input_tokens": session.usage.input_tokens,
        "output_tokens": session.usage.output_tokens,
        "cache_read_tokens": session.usage.cache_read_tokens,
        "cache_write_tokens": session.usage.cache_write_tokens,
        "cost_usd": session.cost_usd,
        "current_run": session.current_run,
    }


def parse_session(doc: Document, path: Path | str | None, *, fallback_id: str) -> Session:
    """A session from its file. Raises InvalidDocument SCHEMA_ERROR for a mistyped field,
    FORMAT_TOO_NEW for a file of a newer format."""
    formats.check_document("agent-session", doc, path)
    fields = FieldReader(doc, path)
    usage = Usage(
        int(fields.number("input_tokens", minimum=0, integer=True)),
        int(fields.number("output_tokens", minimum=0, integer=True)),
        int(fields.number("cache_read_tokens", minimum=0, integer=True)),
        int(fields.number("cache_write_tokens", minimum=0, integer=True)),
    )
    cost_key, cost = fields.raw("cost_usd")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)):
        raise fields.error(cost_key, "'cost_usd' must be a number")
    ident = fields.text("id", default=fallback_id) or fallback_id
    return Session(
        id=ident,
        title=fields.text("title", default=ident) or ident,
        created=fields.text("created", default="") or "",
        updated=fields.text("updated", default="") or "",
        model=fields.text("model"),
        status=fields.choice("status", SESSION_STATUSES, "idle"),
        runs=int(fields.number("runs", minimum=0, integer=True)),
        usage=usage,
        cost_usd=float(cost) if cost is not None else None,
        current_run=fields.text("current_run", blank_is_default=True),
        path=str(path) if path is not None else None,
    )


def session_to_dict(session: Session, *, status: str | None = None) -> dict[str, Any]:
    """The JSON shape of a session; `status` overrides the file's (a crashed run's session
    reads `interrupted` when its lock is free)."""
    return {
        "id": session.id,
        "title": session.title,
        "created": session.created,
        "updated": session.updated,
        "model": session.model,
        "status": status or session.status,
        "runs": session.runs,
        **usage_to_dict(session.usage),
        "cost_usd": session.cost_usd,
        "current_run": session.current_run,
        "path": session.path,
    }


def title_from(prompt: str) -> str:
    """A session's title: the first words of its first prompt, on one line."""
    line = " ".join(prompt.split())
    return summaries.truncate_at_word(line, 60) if line else "Agent session"


def add_cost(total: float | None, cost: float | None) -> float | None:
    """A running cost total; unknown (None) once any part of it is unknown."""
    if total is None or cost is None:
        return None
    return round(total + cost, 6)


# --------------------------------------------------------------------------- run sections

RUN_HEADING = re.compile(r"^## Run (?P<id>[0-9A-Za-z]+) · (?P<status>[a-z]+)\s*$", re.MULTILINE)
TOOL_LINE = re.compile(r"^- (?P<time>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z) `(?P<tool>[^`]+)` → (?P<outcome>[a-z]+)(?P<rest>.*)$", re.MULTILINE)


def render_run_section(run: RunSummary) -> str:
    """The section a finished run adds to its session file (prompt and answer quoted, so no
    line of theirs can read as a heading)."""
    lines = [f"## Run {run.id} · {run.status}", ""]
    when = f"- started: {run.started}" + (f" · ended: {run.ended}" if run.ended else "")
    lines.append(when)
    denied = sum(1 for step in run.tools if step.outcome == "denied")
    lines.append(f"- model: {run.model or '?'} · steps: {run.steps} · tool calls: {len(run.tools)} (denied {denied})")
    cost = "unknown" if run.cost_usd is None else f"${run.cost_usd:.4f}"
    lines.append(f"- tokens: {run.usage.input_tokens} in · {run.usage.output_tokens} out · cost {cost}")
    if run.origin != "user":
        lines.append(f"- origin: {run.origin}")
    if run.error:
        lines.append(f"- error: {run.error.get('code')}: {_one_line(str(run.error.get('message', '')))}")
    lines += ["", "**Prompt**", "", _quote(run.prompt)]
    if run.tools:
        lines += ["", "**Tools**", ""]
        for step in run.tools:
            detail = ""
            if step.outcome in ("failed", "denied"):
                detail = f": {step.code or ''} {_one_line(step.reason or '')}".rstrip()
            elif step.duration_ms is not None:
                detail = f" ({step.duration_ms} ms{', truncated' if step.truncated else ''})"
            lines.append(f"- {step.time} `{step.tool}` → {step.outcome}{detail}")
    if run.answer:
        answer = run.answer if len(run.answer) <= MAX_ANSWER_CHARS else run.answer[:MAX_ANSWER_CHARS] + " … (the event log has the rest)"
        lines += ["", "**Answer**", "", _quote(answer)]
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in (text or "(empty)").splitlines() or [""])


def _one_line(text: str) -> str:
    return summaries.truncate_at_word(" ".join(text.split()), 200)


def append_section(body: str, section: str) -> str:
    """`body` with `section` after it, separated by one blank line."""
    return body.rstrip("\n") + "\n\n" + section


def run_ids_in(body: str) -> list[str]:
    """The ids of the runs a session file's body has sections for."""
    return [match.group("id") for match in RUN_HEADING.finditer(body)]


# --------------------------------------------------------------------------- tool outputs and arguments

ARGUMENT_SUMMARY_CHARS = 200


def cap_text(text: str, max_bytes: int) -> tuple[str, bool, int]:
    """(`text` cut to at most `max_bytes` UTF-8 bytes at a character boundary, with a note
    saying so, whether it was cut, its full size in bytes)."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False, len(data)
    kept = data[:max_bytes].decode("utf-8", errors="ignore")
    return f"{kept}\n[output truncated: {len(kept.encode('utf-8'))} of {len(data)} bytes shown]", True, len(data)


def summarize_arguments(arguments: Any, limit: int = ARGUMENT_SUMMARY_CHARS) -> Any:
    """Arguments as a log shows them: long texts cut (with their length), nesting kept."""
    if isinstance(arguments, str):
        return arguments if len(arguments) <= limit else f"{arguments[:limit]}… ({len(arguments)} chars)"
    if isinstance(arguments, Mapping):
        return {str(key): summarize_arguments(value, limit) for key, value in list(arguments.items())[:50]}
    if isinstance(arguments, list):
        return [summarize_arguments(item, limit) for item in arguments[:20]] + ([f"… ({len(arguments)} items)"] if len(arguments) > 20 else [])
    return arguments


# --------------------------------------------------------------------------- showing events


def describe_event(event: Event) -> str:
    """One line about an event for people (`moss agent logs`)."""
    data = event.data
    time_of_day = event.ts[11:23] if len(event.ts) >= 23 else event.ts
    run = (event.run or "-")[-8:]
    kind = event.kind
    if kind == "run.started":
        detail = _one_line(str(data.get("prompt", "")))
    elif kind == "prompt.built":
        detail = f"step {data.get('step')}: {data.get('messages')} messages, ~{data.get('estimated_tokens')} tokens" + (
            f", {data.get('turns_dropped')} old turn(s) left out" if data.get("turns_dropped") else ""
        )
    elif kind == "assistant.delta":
        detail = _one_line(str(data.get("text", "")))
    elif kind == "assistant.message":
        found = data.get("content")
        content: list[Any] = found if isinstance(found, list) else []
        text = content_text(content)
        calls = [str(b.get("name")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        detail = _one_line(text) + (f" → {', '.join(calls)}" if calls else "")
    elif kind in ("capability.granted", "capability.denied"):
        detail = f"{data.get('capability') or 'tool'} {data.get('scope') or ''}: {data.get('reason', '')}"
    elif kind == "tool.requested":
        detail = f"{data.get('tool')} {json.dumps(data.get('arguments', {}), ensure_ascii=False)[:160]}"
    elif kind == "tool.invoked":
        detail = f"{data.get('tool')} (timeout {data.get('timeout_seconds')}s)"
    elif kind == "tool.succeeded":
        detail = f"{data.get('tool')} ({data.get('duration_ms')} ms, {data.get('bytes')} bytes{', truncated' if data.get('truncated') else ''})"
    elif kind in ("tool.failed", "run.failed"):
        detail = f"{data.get('tool', '')} {data.get('code')}: {_one_line(str(data.get('message', '')))}".strip()
    elif kind == "run.succeeded":
        cost = data.get("cost_usd")
        detail = f"{data.get('input_tokens')} in · {data.get('output_tokens')} out · " + ("cost unknown" if cost is None else f"${cost:.4f}")
    elif kind == "model.retried":
        detail = f"attempt {data.get('attempt')}: {data.get('reason')}; again in {data.get('delay_seconds')}s"
    else:
        detail = _one_line(json.dumps(dict(data), ensure_ascii=False))
    return f"{time_of_day}  {run:>8}  {kind:<18} {detail}".rstrip()


# --------------------------------------------------------------------------- ids


def resolve_prefix(prefix: str, candidates: Iterable[str], what: str) -> str:
    """The one candidate `prefix` starts (case-insensitively; an exact match wins).

    Raises NotFound when none does, InvalidRequest AMBIGUOUS_ADDRESSING listing them when several do.
    """
    from moss_files.foundation.arguments import required

    wanted = required(prefix, what).upper()
    pool = sorted(set(candidates))
    exact = [item for item in pool if item.upper() == wanted]
    if exact:
        return exact[0]
    found = [item for item in pool if item.upper().startswith(wanted)]
    if not found:
        raise NotFound(f"no {what} starts with {prefix!r}", details={what: prefix})
    if len(found) > 1:
        raise InvalidRequest(
            f"{prefix!r} matches {len(found)} {what}s; give more of the id",
            code="AMBIGUOUS_ADDRESSING",
            details={what: prefix, "candidates": found[:20]},
            hint="`moss agent sessions` lists the ids",
        )
    return found[0]

"""How the search index reads agent sessions: one row per session, per run and per tool step.
Core layer (pure), in the shape of moss_files/index/readers.py.

A session file (`.moss/agent/sessions/<id>.md`) holds its runs as sections, and each section
lists its tool calls with their times, so the index needs only the markdown file: sessions and
runs are findable (`kind:agent-session`, `kind:agent-run`, `session:<id>`), and `moss timeline
<run id>` shows the run's steps around it (`kind:agent-step`, dated to the millisecond in the
file, to the second in the index). Registered in moss_files/index/sources.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from moss_files.agent import model
from moss_files.foundation import summaries
from moss_files.index.model import Entry, Extracted, FileInput

FOLDER = ".moss/agent/sessions"
KINDS = ("agent-session", "agent-run", "agent-step")
WHOLE = ""

_STARTED = re.compile(r"^- started: (?P<started>\S+)(?: · ended: (?P<ended>\S+))?")
_MODEL = re.compile(r"^- model: (?P<model>\S+) · steps: (?P<steps>\d+)")
_TOKENS = re.compile(r"^- tokens: (?P<input>\d+) in · (?P<output>\d+) out · cost (?:\$(?P<cost>[0-9.]+)|unknown)")
_ERROR = re.compile(r"^- error: (?P<code>[A-Z_]+): ?(?P<message>.*)$")
_ORIGIN = re.compile(r"^- origin: (?P<origin>\S+)")


@dataclass
class Step:
    """One tool call of a session's log: its line, time, tool, outcome and detail."""

    line: int
    time: str
    tool: str
    outcome: str
    detail: str


@dataclass
class Section:
    """A run's section of a session file, as written by model.render_run_section."""

    id: str
    status: str
    line: int
    started: str | None = None
    ended: str | None = None
    model: str | None = None
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    origin: str = "user"
    error: dict[str, str] | None = None
    prompt: str = ""
    answer: str = ""
    tools: list[Step] = field(default_factory=list)


def sections(body: str, first_line: int) -> list[Section]:
    """The run sections of a session file's body (`first_line` is the body's line number)."""
    found: list[Section] = []
    current: Section | None = None
    part = ""
    quoted: list[str] = []

    def close_quote() -> None:
        if current is not None and part in ("prompt", "answer"):
            setattr(current, part, "\n".join(quoted).strip())
        quoted.clear()

    for offset, line in enumerate(body.splitlines()):
        number = first_line + offset
        heading = model.RUN_HEADING.match(line)
        if heading:
            close_quote()
            current = Section(heading.group("id"), heading.group("status"), number)
            found.append(current)
            part = ""
            continue
        if current is None:
            continue
        if line.startswith("## "):  # a heading a person added: the section ends
            close_quote()
            current, part = None, ""
            continue
        if line in ("**Prompt**", "**Tools**", "**Answer**"):
            close_quote()
            part = line.strip("*").lower()
            continue
        if part in ("prompt", "answer"):
            if line.startswith(">"):
                quoted.append(line[2:] if line.startswith("> ") else line[1:])
            continue
        if part == "tools":
            match = model.TOOL_LINE.match(line)
            if match:
                current.tools.append(Step(number, match.group("time"), match.group("tool"), match.group("outcome"), match.group("rest").strip(" :()")))
            continue
        _fact(current, line)
    close_quote()
    return found


def _fact(section: Section, line: str) -> None:
    if match := _STARTED.match(line):
        section.started, section.ended = match.group("started"), match.group("ended")
    elif match := _MODEL.match(line):
        section.model, section.steps = match.group("model"), int(match.group("steps"))
    elif match := _TOKENS.match(line):
        section.input_tokens, section.output_tokens = int(match.group("input")), int(match.group("output"))
        section.cost_usd = float(match.group("cost")) if match.group("cost") else None
    elif match := _ERROR.match(line):
        section.error = {"code": match.group("code"), "message": match.group("message")}
    elif match := _ORIGIN.match(line):
        section.origin = match.group("origin")


def _read(file: FileInput) -> tuple[model.Session, list[Section], Any]:
    from moss_files.foundation import document

    doc = document.parse_bytes(file.data, file.relpath)
    session = model.parse_session(doc, file.relpath, fallback_id=file.stem)
    return session, sections(doc.body, doc.body_line), doc


def extract(file: FileInput) -> Extracted:
    """The rows of one session file: the session, each run, each tool step."""
    session, runs, doc = _read(file)
    prompts = [run.prompt for run in runs]
    entries = [
        Entry(
            kind="agent-session",
            id=session.id,
            title=session.title,
            summary=summaries.summarize(f"{session.runs} run(s) with {session.model or 'a model'}; {session.status}. " + (prompts[-1] if prompts else "")),
            body="\n\n".join(part for run in runs for part in (run.prompt, run.answer) if part) or doc.body,
            line=1,
            status=session.status,
            date=session.created or None,
            updated=session.updated or None,
            facets=(("model", session.model or ""),),
            extra=" ".join(run.id for run in runs),
        )
    ]
    for run in runs:
        outcome = run.error["code"] if run.error else (summaries.summarize(run.answer) if run.answer else run.status)
        entries.append(
            Entry(
                kind="agent-run",
                id=run.id,
                title=summaries.truncate_at_word(" ".join(run.prompt.split()), 100) or f"Run {run.id}",
                summary=outcome or run.status,
                body="\n\n".join(filter(None, (run.prompt, run.answer))),
                anchor=f"L{run.line}",
                line=run.line,
                status=run.status,
                date=_second(run.started),
                updated=_second(run.ended),
                links=(session.id,),
                facets=(("session", session.id), ("model", run.model or ""), ("origin", run.origin)),
                extra=" ".join(step.tool for step in run.tools),
            )
        )
        for number, step in enumerate(run.tools, start=1):
            entries.append(
                Entry(
                    kind="agent-step",
                    id=f"{run.id}:{number}",
                    title=f"{step.tool} → {step.outcome}",
                    summary=summaries.truncate_at_word(f"{step.tool} → {step.outcome} {step.detail}".strip(), 100),
                    anchor=f"L{step.line}",
                    line=step.line,
                    status=step.outcome,
                    date=_second(step.time),
                    links=(run.id, session.id),
                    facets=(("session", session.id), ("run", run.id), ("tool", step.tool)),
                )
            )
    return Extracted(tuple(entries))


def record(file: FileInput, anchor: str) -> dict[str, Any] | None:
    """The full record `moss expand` shows: the session with its runs, one run, or one step."""
    session, runs, _doc = _read(file)
    if anchor == WHOLE:
        return {**model.session_to_dict(session), "run_list": [_run_dict(run) for run in runs], "path": file.relpath}
    line = int(anchor[1:]) if anchor.startswith("L") and anchor[1:].isdigit() else None
    for run in runs:
        if run.line == line:
            return {**_run_dict(run), "session": session.id, "path": file.relpath}
        for step in run.tools:
            if step.line == line:
                return {
                    "tool": step.tool,
                    "outcome": step.outcome,
                    "detail": step.detail,
                    "time": step.time,
                    "run": run.id,
                    "session": session.id,
                    "path": file.relpath,
                    "line": step.line,
                }
    return None


def _run_dict(run: Section) -> dict[str, Any]:
    return {
        "id": run.id,
        "status": run.status,
        "origin": run.origin,
        "started": run.started,
        "ended": run.ended,
        "model": run.model,
        "steps": run.steps,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "cost_usd": run.cost_usd,
        "error": run.error,
        "prompt": run.prompt,
        "answer": run.answer,
        "tool_calls": [{"tool": s.tool, "outcome": s.outcome, "detail": s.detail, "time": s.time} for s in run.tools],
    }


def _second(stamp: str | None) -> str | None:
    """An event time as the index stores moments: to the second, with a `Z`."""
    if not stamp or len(stamp) < 19:
        return None
    return stamp[:19] + "Z"

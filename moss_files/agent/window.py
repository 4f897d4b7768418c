"""Context assembly: the conversation a model call sends, under a token budget. Core layer (pure).

The history is rebuilt from the session's events at every run (another process may have run
in between): each earlier run is a turn (its prompt, with the task a role run was given, then
each step's assistant message and tool results). A step whose tool calls lack results (the run stopped there) is left out, with
everything after it, so every tool_use sent has its tool_result. Under `max_context_tokens`,
whole turns are dropped, oldest first; the system prompt, the tool schemas and the current
turn are never dropped (when they alone exceed the budget, the call goes out anyway and
`prompt.built` says `over_budget`). Tokens are estimated at one per three characters of JSON,
which errs on the high side for English and code; the API's usage fields give the real counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from moss_files.agent.model import Event

CHARS_PER_TOKEN = 3
RUNTIME_ORIGINS = frozenset({"orient", "role"})  # tool calls the runtime made itself, not the model: no turn of the history
Message = dict[str, Any]


def estimate_tokens(value: Any) -> int:
    """A generous estimate of the tokens `value` (text, or anything JSON) takes."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text) // CHARS_PER_TOKEN + 1


def user_text(text: str) -> Message:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def tool_result(call_id: str, output: str, *, is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    if is_error:
        block["is_error"] = True
    return block


def history_turns(events: Iterable[Event]) -> list[list[Message]]:
    """The finished part of every run in `events`, one list of messages per run."""
    runs: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.run is None:
            continue
        data = event.data
        if event.kind == "run.started":
            runs[event.run] = {"prompt": data.get("prompt") or "", "steps": [], "results": {}}
            continue
        run = runs.get(event.run)
        if run is None or data.get("origin") in RUNTIME_ORIGINS:
            continue
        if event.kind == "role.claimed" and data.get("text"):
            run["prompt"] = f"{run['prompt']}\n\n{data['text']}"  # the run's prompt as the model got it
            continue
        if event.kind == "assistant.message":
            content = data.get("content")
            if isinstance(content, list):
                run["steps"].append([block for block in content if isinstance(block, dict)])
        elif event.kind in ("tool.succeeded", "tool.failed") and isinstance(data.get("call_id"), str):
            run["results"][data["call_id"]] = (str(data.get("output") or ""), event.kind == "tool.failed")
    turns = []
    for run in runs.values():
        messages: list[Message] = [user_text(run["prompt"] or "(empty prompt)")]
        for content in run["steps"]:
            if not content:
                continue
            calls = [block for block in content if block.get("type") == "tool_use"]
            if any(str(call.get("id")) not in run["results"] for call in calls):
                break  # the run stopped inside this step
            messages.append({"role": "assistant", "content": content})
            if calls:
                results = []
                for call in calls:
                    output, failed = run["results"][str(call["id"])]
                    results.append(tool_result(str(call["id"]), output, is_error=failed))
                messages.append({"role": "user", "content": results})
        turns.append(messages)
    return turns


def merge_roles(messages: Iterable[Message]) -> list[Message]:
    """`messages` with consecutive messages of one role joined into one (the API wants roles
    to alternate; a run that ended on tool results is followed by the next prompt)."""
    out: list[Message] = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if out and out[-1]["role"] == message["role"]:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": message["role"], "content": blocks})
    return out


@dataclass(frozen=True, slots=True)
class Assembly:
    """The messages of one model call, and how they were chosen."""

    messages: list[Message]
    turns_kept: int
    turns_dropped: int
    estimated_tokens: int
    over_budget: bool


def assemble(
    *,
    system: str,
    tools: Sequence[Mapping[str, Any]],
    history: Sequence[Sequence[Message]],
    current: Sequence[Message],
    budget: int,
    tools_tokens: int | None = None,
) -> Assembly:
    """The newest turns of `history` that fit in `budget` beside the system prompt, the tools
    (`tools_tokens`: their estimate, when the caller keeps it) and the current turn, followed
    by the current turn."""
    tools_size = estimate_tokens(list(tools)) if tools_tokens is None else tools_tokens
    fixed = estimate_tokens(system) + tools_size + estimate_tokens(list(current))
    room = budget - fixed
    kept: list[Sequence[Message]] = []
    used = 0
    for turn in reversed(history):
        size = estimate_tokens(list(turn))
        if used + size > room:
            break
        kept.append(turn)
        used += size
    kept.reverse()
    flat = [message for turn in kept for message in turn] + list(current)
    return Assembly(
        messages=merge_roles(json.loads(json.dumps(flat))),  # copies: merging must not touch the turns
        turns_kept=len(kept),
        turns_dropped=len(history) - len(kept),
        estimated_tokens=fixed + used,
        over_budget=fixed > budget,
    )

"""The AI summary of a text for a use case: the `[summaries]` settings from the Context, one
Ollama summariser per Context (so a batch asks once whether the server is there, and a
long-lived MCP server asks again after a while).

Shell layer: decides with `ai` (core), asks with `ollama` (edge, loaded only when AI is on).
Used where insights and sessions are written (`loopflow.service`) and by `moss index rebuild
--summaries ai` (`index.service`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from moss_files.foundation.context import Context
from moss_files.loopflow import ai


def ai_summary(ctx: Context, text: str, what: str, *, force: bool = False) -> tuple[str | None, str | None]:
    """(the AI summariser's one-line summary of `text`, None) or (None, why not: one of
    `ai.REASONS`). `force` asks even when `[summaries] ai` is off (`--summaries ai`).

    Raises InvalidDocument SCHEMA_ERROR for bad `[summaries]` settings."""
    where = ", ".join(map(str, ctx.config.sources)) or "config"
    settings = ai.read_settings(ctx.config.data, where=where)
    if force:
        settings = replace(settings, enabled=True)
        ai.check_endpoint(settings, where=where)
    skip = ai.wants_ai(settings, text)
    if skip is not None:
        return None, skip

    def make() -> Any:
        from moss_files.loopflow import ollama  # here: the HTTP client loads only when AI is on

        return ollama.Summarizer(settings)

    found = ctx.resource(f"loopflow.ai:{settings!r}", make).summarize(text, what)
    return found.summary, found.reason

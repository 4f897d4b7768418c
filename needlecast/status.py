"""The sidecar's `/status` report: parts cached with their own time-to-live, degraded not fatal.

Core layer: no I/O of its own. Each part is produced by a callable the sidecar passes in; a
part whose source raises is reported as `{"degraded": true, "error": {...}}` and listed under
the report's `degraded` key, while the other parts are still served.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moss_files.foundation.errors import MossError, error_body

Clock = Callable[[], float]

# Seconds each part may be served from cache: the seed's TTLs for its parts (the agent CLI is
# read once, cstack 5 s, the process always fresh, credentials 30 s), and ours for the rest.
TTLS = {
    "dhf": math.inf,
    "cstack": 5.0,
    "process": 0.0,
    "auth": 30.0,
    "needlecast": 1.0,
    "router": 0.0,
    "conflicts": 5.0,
    "git_sync": 0.0,
    "terminal": 5.0,
}

# The agent CLIs the seed's sidecar tries, in its order: the first whose `--version` works is the
# sleeve's "DHF" (the agent it runs).
DHF_CANDIDATES = ("claude", "gemini", "codex", "aider", "opencode")

# Where each agent's credentials are looked for (files relative to $HOME, environment variables):
# the folder Protectorate's envoy mounts (`~/.creds/<agent>/credentials.json`), the file the
# agent's own CLI writes when you log in, and the API key variables it reads.
AUTH_SOURCES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "claude": ((".creds/claude/credentials.json", ".claude/.credentials.json"), ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")),
    "gemini": ((".creds/gemini/credentials.json", ".gemini/oauth_creds.json"), ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
}


def dhf_unknown() -> dict[str, Any]:
    """The `dhf` part when no agent CLI answers (the seed's sidecar says `unknown`)."""
    return {"name": "unknown", "version": None}


def parse_version_output(text: str) -> str:
    """The version an agent CLI prints: the first non-empty line of its `--version` output."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


@dataclass(frozen=True, slots=True)
class Part:
    """One cached reading of a status part."""

    value: Any
    degraded: bool
    taken_at: float


class PartCache:
    """Per-part TTL cache. Not thread-safe by itself: a threaded server serialises calls, so
    concurrent requests share one reading per part instead of each running the sources."""

    def __init__(self, clock: Clock, ttls: dict[str, float] | None = None) -> None:
        self.clock = clock
        self.ttls = dict(TTLS if ttls is None else ttls)
        self._parts: dict[str, Part] = {}

    def get(self, name: str, produce: Callable[[], Any]) -> Part:
        """The part's cached reading if still fresh, else a new one (degraded if `produce` fails)."""
        now = self.clock()
        cached = self._parts.get(name)
        if cached is not None and now - cached.taken_at < self.ttls.get(name, 0.0):
            return cached
        try:
            part = Part(produce(), False, now)
        except MossError as err:
            part = Part({"degraded": True, "error": error_body(err)["error"]}, True, now)
        except Exception as exc:  # a part's source is outside our control; report, don't fail
            part = Part({"degraded": True, "error": {"code": "INTERNAL", "message": f"{type(exc).__name__}: {exc}"}}, True, now)
        self._parts[name] = part
        return part

    def forget(self, name: str) -> None:
        """Drop the cached reading of a part whose source is known to have changed."""
        self._parts.pop(name, None)


# The body's keys in order: the seed's sleeve status first, then what the toolkit adds.
SEED_PARTS = ("dhf", "process", "auth")
OUR_PARTS = ("needlecast", "router", "conflicts", "git_sync", "terminal")


def build_status(sleeve_name: str, workspace_path: str, parts: dict[str, Part]) -> dict[str, Any]:
    """Assemble the `/status` body from cached parts: `sleeve_name`, `dhf`, `workspace` (with
    `cstack`), `process`, `auth` (the seed's contract), then `needlecast`, `router`,
    `conflicts`, `git_sync`, `terminal` and `degraded` (the names of the parts whose source failed)."""
    body: dict[str, Any] = {"sleeve_name": sleeve_name}
    if "dhf" in parts:
        body["dhf"] = parts["dhf"].value
    body["workspace"] = {"path": workspace_path, "cstack": parts["cstack"].value if "cstack" in parts else None}
    for name in SEED_PARTS[1:] + OUR_PARTS:
        if name in parts:
            body[name] = parts[name].value
    body["degraded"] = sorted(name for name, part in parts.items() if part.degraded)
    return body


def parse_vmrss(status_text: str) -> float | None:
    """Resident memory in MB from the text of /proc/<pid>/status (None if absent)."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return round(int(fields[1]) / 1024, 1)
    return None

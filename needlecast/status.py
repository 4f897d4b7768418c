"""The sidecar's `/status` report: parts cached with their own time-to-live, degraded not fatal.

Core layer: no I/O of its own. Each part is produced by a callable the sidecar passes in; a
part whose source raises is reported as `{"degraded": true, "error": {...}}` and listed under
the report's `degraded` key, while the other parts are still served.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moss_files.foundation.errors import MossError, error_body

Clock = Callable[[], float]

# Seconds each part may be served from cache (the process part is always fresh).
TTLS = {"cstack": 5.0, "needlecast": 1.0, "router": 0.0, "conflicts": 5.0, "process": 0.0}


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


def build_status(sleeve_name: str, workspace_path: str, parts: dict[str, Part]) -> dict[str, Any]:
    """Assemble the `/status` body from cached parts."""
    body: dict[str, Any] = {
        "sleeve_name": sleeve_name,
        "workspace": {"path": workspace_path, "cstack": parts["cstack"].value if "cstack" in parts else None},
    }
    for name in ("needlecast", "router", "conflicts", "process"):
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

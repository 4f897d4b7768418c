"""Other tools' spellings of our tools' arguments, brought to ours before a call is checked:
LoopFlow's (`next_session_should`, one text where we take a list), its spec's (`includeLinks`,
`depthBefore`, `filters: {types, statuses, tags, dateRange: {from, to}}`) and camelCase for
every `loop_*` argument. Entry layer (the MCP boundary), pure: no I/O, no SDK.

One table, read by the server for every call: `tools/list` advertises only our names (the
schemas stay small; docs/mcp.md lists every accepted spelling), and a call may use either.
When a call gives ours and another's for one argument, ours wins if they agree and the call
is refused (INVALID_REQUEST naming both) if they do not. A spelling with nothing to do here
(LoopFlow's `export_files`: the files are in git already) is accepted and named in the
result's `ignored_arguments` with the reason, never dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from moss_files.foundation.errors import InvalidRequest

# Tool families whose own argument names are snake_case and whose other spellers write camelCase
# (the LoopFlow spec's `includeLinks`). Moe's tools are camelCase already; Moss never was.
CAMEL_CASE_FAMILIES = ("loop_",)
_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _as_list(value: Any) -> Any:
    """LoopFlow's one text where we take a list of texts: a list of one."""
    return [value] if isinstance(value, str) else value


def _lines(value: Any) -> Any:
    """A text of one item a line (list markers dropped) as a list; a list as it is."""
    if not isinstance(value, str):
        return value
    items = [line.strip() for line in value.splitlines()]
    return [item.removeprefix("- ").removeprefix("* ").strip() for item in items if item]


def _joined(value: Any) -> Any:
    """LoopFlow's list of texts where we take one text: the items a line each."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "\n".join(value)
    return value


@dataclass(frozen=True, slots=True)
class Spelling:
    """How another tool spells one of our arguments.

    `name` is ours (None: accepted, with nothing to do here, for `reason`); `convert` brings
    the value to our shape (and leaves a value of another shape as it is, for the schema to
    refuse); `group` marks an object whose keys are arguments too, spelled as it says.
    """

    name: str | None
    convert: Callable[[Any], Any] | None = None
    group: Mapping[str, Spelling] = field(default_factory=dict)
    reason: str = ""


def _group(members: Mapping[str, Spelling]) -> Spelling:
    return Spelling(None, group=members)


_NOT_NEEDED_EXPORT = "LoopFlow's JSON export of its database: here the insights, sessions and tasks are files in git already"
_DATE_RANGE = _group({"from": Spelling("after"), "to": Spelling("through")})
_EXPORT_OPTIONS = {
    "includeLinks": Spelling("include_links"),
    "filterByTags": Spelling("tags"),
    "filterByType": Spelling("types"),
    "exportReason": Spelling("reason"),
}

SPELLINGS: Mapping[str, Mapping[str, Spelling]] = {
    # The spec's scan: `filters: {types, statuses, tags, dateRange: {from, to}}` (a day in `to` counts whole).
    "loop_scan": {
        "filters": _group({"types": Spelling("types"), "statuses": Spelling("statuses"), "tags": Spelling("tags"), "dateRange": _DATE_RANGE}),
    },
    # LoopFlow's scan takes one word for its scope ("insights", "all"); the spec's timeline, a list.
    "loop_timeline": {"scope": Spelling("scope", convert=_as_list)},
    # LoopFlow's handoff: one text for in_progress, blocked_on and next_session_should, a list for hot_context.
    "loop_handoff": {
        "next_session_should": Spelling("next_actions", convert=_lines),
        "in_progress": Spelling("in_progress", convert=_as_list),
        "blocked_on": Spelling("blocked_on", convert=_as_list),
        "hot_context": Spelling("hot_context", convert=_joined),
        "export_files": Spelling(None, reason=_NOT_NEEDED_EXPORT),
    },
    # The spec's TaskFilters.
    "loop_task_list": {"statuses": Spelling("status"), "priorities": Spelling("priority")},
    # The spec's ExportOptions (its sharing service), and LoopFlow 1.x's database export.
    "loop_export": {
        **_EXPORT_OPTIONS,
        "options": _group(_EXPORT_OPTIONS),
        "include_insights": Spelling(None, reason=_NOT_NEEDED_EXPORT),
        "include_backlog": Spelling(None, reason=_NOT_NEEDED_EXPORT),
        "project_name": Spelling(None, reason=_NOT_NEEDED_EXPORT),
        "project_notes": Spelling(None, reason=_NOT_NEEDED_EXPORT),
    },
    # LoopFlow 1.x's re-import over existing data: an import here never duplicates, so there is nothing to force.
    "loop_import": {"force": Spelling(None, reason="an import here skips what the workspace holds already; nothing to force")},
}


@dataclass(frozen=True, slots=True)
class Normalized:
    """A call's arguments in our spelling, and the ones accepted with nothing to do (name -> why)."""

    arguments: dict[str, Any]
    ignored: dict[str, str]


def snake_case(name: str) -> str:
    """`includeLinks` -> `include_links`; a name without capitals as it is."""
    return _HUMP.sub(r"_\1", name).lower() if any(char.isupper() for char in name) else name


def normalize(tool: str, arguments: Mapping[str, Any], known: Collection[str]) -> Normalized:
    """`arguments` of a call of `tool` (as served, dotted or underscored) in our spelling;
    `known` is the tool's own argument names. A name that is neither ours nor another tool's is
    left as it is, for the schema check to refuse.

    Raises InvalidRequest when two spellings of one argument disagree, or a group (`filters`)
    is not an object or holds a key no tool spells.
    """
    table = SPELLINGS.get(tool, {})
    camel = tool.startswith(CAMEL_CASE_FAMILIES)
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}  # our name -> the name the call gave it under
    ignored: dict[str, str] = {}

    def put(ours: str, value: Any, given: str) -> None:
        if ours in out:
            if out[ours] != value:
                raise InvalidRequest(
                    f"{tool}: {spelled[ours]!r} and {given!r} name the same argument with different values; give one",
                    details={"field": ours, "spellings": [spelled[ours], given]},
                )
            return
        out[ours] = value
        spelled[ours] = given

    def take(name: str, value: Any, spelling: Spelling, given: str) -> None:
        if spelling.group:
            if not isinstance(value, Mapping):
                raise InvalidRequest(f"{tool}: {given} must be an object", details={"field": given})
            for key, inner in value.items():
                member = spelling.group.get(key)
                if member is None:
                    raise InvalidRequest(
                        f"{tool}: {given} has no key {key!r}; it takes {', '.join(spelling.group)}",
                        details={"field": f"{given}.{key}", "allowed": list(spelling.group)},
                    )
                take(key, inner, member, f"{given}.{key}")
        elif spelling.name is None:
            ignored[given] = spelling.reason
        else:
            put(spelling.name, spelling.convert(value) if spelling.convert else value, given)

    # Ours first, so that a conflict names ours first and ours is what a repeat keeps.
    for name, value in arguments.items():
        if name in known and name not in table:
            put(name, value, name)
    for name, value in arguments.items():
        if name in known and name not in table:
            continue
        spelling = table.get(name)
        snake = snake_case(name) if camel else name
        if spelling is None and snake != name:
            spelling = table.get(snake) or (Spelling(snake) if snake in known else None)
        if spelling is None:
            out.setdefault(name, value)  # unknown to every tool: the schema check names it
        else:
            take(name, value, spelling, name)
    return Normalized(out, ignored)

"""The gate in front of `moss serve`: an optional policy on what MCP clients may call, and an
audit log of every tool call the server answers. Edge layer (appends the audit log); the
decisions are pure functions of the policy.

Settings, in `.moss/config.toml` (or `~/.moss/config.toml`; the two merge as every setting does:
lists join, and a `true` in either file wins, so neither file can loosen what the other locks):

    [serve]
    audit = true              # one line per tool call in .moss/audit/<YYYY-MM-DD>.jsonl (default on)
    read_only = false         # answer only the tools that change no file
    allow_tools = []          # when not empty, only these tools (`moss.*`, `cstack.status`, ...)
    deny_tools = []           # never these, for example ["moss.purge", "moe.*"]
    path_roots = []           # when not empty, the paths export and import tools take must resolve inside these

The policy is off by default: `moss serve` is started by the agent's own host with its user's
rights, and the tool sets already decide what is served, so the limits are what a workspace
opts into. The audit log is on by default, because "which agent did what" is only answerable
if it was written down when it happened. Each line has the event format of agent sessions:
`{id, ts, kind, session, run, data}`, with kind `tool.succeeded`, `tool.failed` or
`capability.denied`, and `data` = {client {name, version}, tool, arguments (summarized), code,
duration_ms}. A call made by `moss agent` carries its session and run in `_meta`, which fill
`session` and `run`, so the server's log and the agent's meet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moss_files.agent import model, paths, policy
from moss_files.agent.model import Event
from moss_files.foundation import fs
from moss_files.foundation.errors import Conflict, InvalidDocument, MossError

log = logging.getLogger("moss_files.mcp")

AUDIT_FOLDER = ".moss/audit"
META_KEY = "moss-files/agent"
# The tools that take a file's path, by canonical name (policy.canonical_tool), and its argument.
PATH_ARGUMENTS: Mapping[str, tuple[str, ...]] = {
    "moss.export": ("path",),
    "moss.import": ("path",),
    "loop_export": ("output_path",),
    "loop_import": ("bundle_path",),
    "loop_import_preview": ("bundle_path",),
}


@dataclass(frozen=True, slots=True)
class ServePolicy:
    """What `[serve]` says, paths resolved."""

    audit: bool = True
    read_only: bool = False
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    path_roots: tuple[str, ...] = ()

    @property
    def limits(self) -> bool:
        return bool(self.read_only or self.allow_tools or self.deny_tools or self.path_roots)


def serve_policy(data: Mapping[str, Any], *, root: Path, where: str = ".moss/config.toml") -> ServePolicy:
    """The `[serve]` table of the merged config. Raises InvalidDocument SCHEMA_ERROR naming the key."""
    table = data.get("serve", {})
    if not isinstance(table, Mapping):
        raise InvalidDocument("serve must be a table ([serve])", code="SCHEMA_ERROR", path=where)
    unknown = sorted(set(table) - {"audit", "read_only", "allow_tools", "deny_tools", "path_roots"})
    if unknown:
        raise InvalidDocument(f"serve has unknown keys {', '.join(unknown)}", code="SCHEMA_ERROR", path=where)
    flags = {}
    for key, default in (("audit", True), ("read_only", False)):
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise InvalidDocument(f"serve.{key} must be true or false", code="SCHEMA_ERROR", path=where)
        flags[key] = value
    lists = {}
    for key in ("allow_tools", "deny_tools", "path_roots"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
            raise InvalidDocument(f"serve.{key} must be a list of non-empty texts", code="SCHEMA_ERROR", path=where)
        lists[key] = tuple(item.strip() for item in value)
    return ServePolicy(
        audit=flags["audit"],
        read_only=flags["read_only"],
        allow_tools=lists["allow_tools"],
        deny_tools=lists["deny_tools"],
        path_roots=tuple(paths.resolve(item, str(root)) for item in lists["path_roots"]),
    )


def decide(
    rules: ServePolicy, name: str, arguments: Mapping[str, Any], *, read_only: bool, base: str, resolve: Callable[[str, str], str] = paths.resolve
) -> list[policy.Decision]:
    """The decisions for one call of tool `name` (as served); the call goes ahead only when all
    are granted. No limits configured: one grant. Patterns match every name of a tool (dots or
    underscores, `capsule_purge` for `moss.purge`; denies also in any case: policy.tool_denied)."""
    for pattern in rules.deny_tools:
        if policy.tool_denied(name, pattern, qualified=False):
            return [policy.Decision(False, None, name, "serve.deny_tools", f"{name} matches {pattern} in serve.deny_tools")]
    if rules.allow_tools and not any(policy.tool_matches(name, pattern, qualified=False) for pattern in rules.allow_tools):
        return [policy.Decision(False, None, name, "serve.allow_tools", f"{name} is not in serve.allow_tools")]
    if rules.read_only and not read_only:
        return [policy.Decision(False, "fs_write", name, "serve.read_only", f"{name} changes files, and serve.read_only is true")]
    decisions: list[policy.Decision] = []
    if rules.path_roots:
        for argument in PATH_ARGUMENTS.get(policy.canonical_tool(name), ()):
            value = arguments.get(argument)
            if not isinstance(value, str):
                continue
            try:
                resolved = resolve(value, base)
            except ValueError as exc:
                decisions.append(policy.Decision(False, "fs_write", value, "serve.path_roots", f"not a path: {exc}"))
                continue
            inside = next((root for root in rules.path_roots if policy.within(resolved, root)), None)
            if inside is None:
                decisions.append(
                    policy.Decision(False, "fs_write", resolved, "serve.path_roots", f"{resolved} is outside serve.path_roots ({', '.join(rules.path_roots)})")
                )
            else:
                decisions.append(policy.Decision(True, "fs_write", resolved, "serve.path_roots", f"{resolved} is inside {inside}"))
    return decisions or [policy.Decision(True, None, name, "serve", "allowed")]


class ServeGate:
    """The policy and the audit log of one `moss serve` process."""

    def __init__(self, rules: ServePolicy, root: Path, *, base: Path, now: Callable[[], Any], new_id: Callable[[], str]) -> None:
        self.rules = rules
        self.root = root
        self.base = str(base)
        self.now = now
        self.new_id = new_id

    def refusal(self, name: str, arguments: Mapping[str, Any], *, read_only: bool) -> tuple[MossError | None, list[policy.Decision]]:
        """(the CAPABILITY_DENIED error to answer with, or None; the decisions)."""
        if not self.rules.limits:
            return None, []
        decisions = decide(self.rules, name, arguments, read_only=read_only, base=self.base)
        denied = [decision for decision in decisions if not decision.granted]
        if not denied:
            return None, decisions
        return Conflict(
            f"{name} is not allowed by this workspace's serve policy: {'; '.join(d.reason for d in denied)}",
            code="CAPABILITY_DENIED",
            status=403,
            details={"decisions": [policy.decision_to_dict(d) for d in denied]},
            hint="the policy is the [serve] table of .moss/config.toml",
        ), decisions

    def record(
        self,
        *,
        client: Mapping[str, Any],
        name: str,
        arguments: Mapping[str, Any],
        meta: Mapping[str, Any] | None,
        code: str,
        duration_ms: int,
        decisions: Sequence[policy.Decision] = (),
    ) -> None:
        """Append the call's audit line (never raises: an audit failure is logged, the answer
        still goes out)."""
        if not self.rules.audit:
            return
        denied = code == "CAPABILITY_DENIED"
        kind = "capability.denied" if denied else "tool.succeeded" if code == "OK" else "tool.failed"
        found = meta.get(META_KEY) if isinstance(meta, Mapping) else None
        origin: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        data: dict[str, Any] = {
            "client": dict(client),
            "tool": name,
            "arguments": model.summarize_arguments(dict(arguments)),
            "code": code,
            "duration_ms": duration_ms,
        }
        if origin.get("call"):
            data["call_id"] = str(origin["call"])
        if decisions and (denied or self.rules.limits):
            data["decisions"] = [policy.decision_to_dict(d) for d in decisions]
        moment = self.now()
        event = Event(self.new_id(), model.stamp_ms(moment), kind, _text(origin.get("session")), _text(origin.get("run")), data)
        path = self.root / AUDIT_FOLDER / f"{model.stamp_ms(moment)[:10]}.jsonl"
        try:
            fs.append_line(path, model.event_to_line(event))
        except (OSError, MossError) as exc:
            log.warning("could not write the audit line of %s to %s: %s", name, path, exc)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def gate_for(config_data: Mapping[str, Any], root: Path, *, base: Path, now: Callable[[], Any], new_id: Callable[[], str]) -> ServeGate:
    """The gate of a `moss serve` started in `base` for the workspace at `root`."""
    return ServeGate(serve_policy(config_data, root=root), root, base=base, now=now, new_id=new_id)

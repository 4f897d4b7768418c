"""Project scaffolding: add the toolkit's folders, git settings and agent notes a project lacks.

Shell layer: pure planning (`plan_actions`) between two edges (`read_state`; `apply_scaffold`, which also runs `git config`), with a
thin entry point (`main`, run as `python3 -m moss_files.scaffold`). Stdlib only: of moss_files
it imports only the package version, `errors` and `datafiles` (itself stdlib only), because install.sh runs it on a bare python3
before any dependency is installed. Nothing is ever overwritten: files are created with link(2), which fails on an
existing name; other edits only add lines or replace the toolkit's own marked block.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from moss_files import __version__, integrations
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound, RepoError, describe, error_body

PARTS = ("cstack", "needlecast", "moss")
AGENT_FILES = {"claude": "CLAUDE.md", "codex": "AGENTS.md"}
KINDS = ("mkdir", "create", "append", "update", "config", "remove", "rmdir", "exists")

# Derived, per-machine state (and capsule exports, which are copies). Locks now live in `.locks/` folders that ignore
# themselves (fs.lock_path_for); the lock patterns also cover the ones earlier releases left beside each file. The lock and temp patterns mirror fs.lock_path_for and
# fs.temp_path_for (`.<name>.lock`, `.<name>.tmp-<pid>-<hex>`); tests/test_scaffold.py checks
# them with `git check-ignore` against paths fs.py really produces.
GITIGNORE_LINES: Mapping[str, tuple[str, ...]] = {
    "cstack": (".cstack/**/.*.lock", ".cstack/**/.*.tmp-*"),
    "needlecast": (".needlecast/.state/", ".needlecast/**/.*.lock", ".needlecast/**/.*.tmp-*"),
    "moss": (".moss/cache/", ".moss/run/", ".moss/exports/", ".moss/**/.*.lock", ".moss/**/.*.tmp-*"),
}
# How git merges the toolkit's files between clones. Append-only logs take git's union merge;
# the memory files, v1 mailboxes and every markdown artifact take the moss merge driver, which
# merges them by their structure (`moss merge driver`; each clone defines it once with
# `moss merge setup`, which install.sh and `moss init` run). `**/` also covers the sleeves'
# folders of an envoy's repository.
GITATTRIBUTES_LINES: Mapping[str, tuple[str, ...]] = {
    "cstack": ("**/.cstack/PLAN.md merge=moss", "**/.cstack/CURRENT.md merge=moss", "**/.cstack/MEMORY.md merge=moss"),
    "needlecast": ("**/.needlecast/read.log merge=union", "**/.needlecast/inbox.md merge=moss", "**/.needlecast/outbox.md merge=moss"),
    "moss": ("**/.moss/**/*.jsonl merge=union", "**/.moss/**/*.md merge=moss"),
}
# Lines an earlier version wrote into its block and that now say something else: taken out
# of the block (never out of the user's own lines) when the block is brought up to date.
RETIRED_LINES: frozenset[str] = frozenset(
    {
        ".cstack/MEMORY.md merge=union",  # the union merge fused entries; the driver merges them by entry
        ".needlecast/read.log merge=union",
        ".moss/**/*.jsonl merge=union",
    }
)
# The merge driver those lines name. `.gitattributes` reaches every clone, `.git/config` none:
# each clone defines the driver once, which this scaffold does wherever it runs in a git work
# tree (and `moss merge setup` does alone). Git is run directly here, not through GitPython,
# because install.sh runs this module on a bare python3.
MERGE_DRIVER = "moss"
MERGE_DRIVER_LABEL = "moss-files: merge artifacts by their structure"

LINES_BEGIN = "# >>> moss-files >>>"
LINES_END = "# <<< moss-files <<<"
BLOCK_BEGIN = '<!-- moss-files:begin version="{version}" -->'
BLOCK_BEGIN_PREFIX = "<!-- moss-files:begin"
BLOCK_BEGIN_RE = re.compile(r'<!-- moss-files:begin version="([^"]*)" -->')
BLOCK_END = "<!-- moss-files:end -->"
MAX_EDIT_BYTES = 4 * 1024 * 1024
_SKIPPED_TEMPLATE_NAMES = {"__init__.py", "__pycache__"}


@dataclass(frozen=True, slots=True)
class Action:
    """One step of a scaffold; `path` is relative to the project root, with `/` separators.

    kinds: `mkdir` a folder; `create` a file with `content`; `append` `content` to the end of a
    file; `update` a file to `content` (only the toolkit's own lines differ); `exists`: left as
    is; `config`: set the git settings in `settings` in this clone's own config (`.git/config`);
    `remove` a file (the toolkit's own, or one left with nothing of its own); `rmdir` a folder
    that is empty. `base` is the file's bytes the plan was made from: apply refuses to append
    to, update or remove a file that no longer has them.
    """

    kind: str
    path: str
    detail: str
    content: bytes | None = None
    base: bytes | None = field(default=None, repr=False, compare=False)
    settings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Entry:
    """What is at one project path: `missing`, `dir`, `file` (with its bytes when read) or `other`."""

    kind: str
    data: bytes | None = None
    real: str | None = None  # resolved path of a file we may edit (CLAUDE.md may link to AGENTS.md)


@dataclass(frozen=True, slots=True)
class McpServer:
    """One MCP server an agent should start for this project."""

    name: str
    command: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Templates:
    """Template files by part (`{"moss": {"README.md": b"..."}}`), agent block texts, and the
    agents' commands (`{"cstack-start.md": b"..."}`) and skills (`{"moss-handoff/SKILL.md": ...}`)."""

    parts: Mapping[str, Mapping[str, bytes]]
    agent_blocks: Mapping[str, str]
    commands: Mapping[str, bytes] = field(default_factory=dict)
    skills: Mapping[str, bytes] = field(default_factory=dict)


# Where each agent reads the toolkit's commands and skills (Codex has no project commands: its
# custom prompts live in the user's ~/.codex/prompts; the same workflows reach it as skills).
COMMAND_DIRS = {"claude": integrations.CLAUDE_COMMANDS}
SKILL_DIRS = {"claude": integrations.CLAUDE_SKILLS, "codex": integrations.CODEX_SKILLS}
SETTINGS_FILES = {"claude": integrations.SETTINGS_FILE}


def agent_files(templates: Templates, agents: Sequence[str]) -> dict[str, bytes]:
    """The command and skill files each agent gets, by project path."""
    files: dict[str, bytes] = {}
    for agent in agents:
        if agent in COMMAND_DIRS:
            files.update({f"{COMMAND_DIRS[agent]}/{name}": data for name, data in templates.commands.items()})
        if agent in SKILL_DIRS:
            files.update({f"{SKILL_DIRS[agent]}/{name}": data for name, data in templates.skills.items()})
    return dict(sorted(files.items()))


def mcp_servers(agent: str) -> tuple[McpServer, ...]:
    """The MCP servers to register for `agent` (`claude` or `codex`): `moss serve` over stdio.

    The agent starts it in the project, where it finds the workspace as the CLIs do. Codex gets
    `--names underscore` (`moss_store` rather than `moss.store`): the model API behind Codex
    refuses tool names with dots, while Claude Code maps them itself. The command is `moss` on
    the PATH (install.sh links it), never a path of this machine, so the file can be committed.
    """
    if agent == "codex":
        return (McpServer("moss", "moss", ("serve", "--names", "underscore")),)
    return (McpServer("moss", "moss", ("serve",)),)


MCP_FILES = {"claude": ".mcp.json", "codex": ".codex/config.toml"}


# --- planning (pure) -------------------------------------------------------------------------


def template_paths(templates: Templates, parts: Sequence[str]) -> list[str]:
    """Project-relative paths of every template file for `parts` (`.cstack/PLAN.md`, ...)."""
    return [f".{part}/{rel}" for part in parts for rel in sorted(templates.parts.get(part, {}))]


def candidate_paths(templates: Templates, parts: Sequence[str], agents: Sequence[str], servers: Mapping[str, Sequence[McpServer]]) -> list[str]:
    """Every project path the planner needs to know about, parents included, sorted."""
    files = [*template_paths(templates, parts), ".gitignore", ".gitattributes"]
    files += [AGENT_FILES[agent] for agent in agents]
    files += [MCP_FILES[agent] for agent in agents if servers.get(agent)]
    files += [SETTINGS_FILES[agent] for agent in agents if agent in SETTINGS_FILES]
    files += list(agent_files(templates, agents))
    paths = {f".{part}" for part in parts}
    for path in files:
        paths.add(path)
        parent = path.rpartition("/")[0]
        while parent:
            paths.add(parent)
            parent = parent.rpartition("/")[0]
    return sorted(paths)


def edited_paths(agents: Sequence[str], servers: Mapping[str, Sequence[McpServer]], templates: Templates | None = None) -> set[str]:
    """Paths whose bytes the planner reads (files it may append to, update or remove)."""
    paths = {".gitignore", ".gitattributes", *(AGENT_FILES[a] for a in agents)}
    paths |= {SETTINGS_FILES[a] for a in agents if a in SETTINGS_FILES}
    if templates is not None:
        paths |= set(agent_files(templates, agents))
    return paths | {MCP_FILES[a] for a in agents if servers.get(a)}


def plan_actions(
    state: Mapping[str, Entry],
    templates: Templates,
    *,
    parts: Sequence[str],
    agents: Sequence[str] = (),
    servers: Mapping[str, Sequence[McpServer]] | None = None,
    version: str = __version__,
) -> list[Action]:
    """Decide every step of the scaffold from what is on disk (`state`: path -> Entry).

    Folders come first, then files in a fixed order, so output and tests are stable.
    Raises Conflict ALREADY_EXISTS when a file stands where a folder is needed (or the reverse),
    InvalidDocument when a file we would edit has broken moss-files markers or bad encoding.
    """
    parts, agents = _check_choices(parts, agents)
    servers = servers or {}
    actions: list[Action] = []
    for path in template_paths(templates, parts):
        part, _, rel = path[1:].partition("/")
        actions.append(_plan_file(state, path, templates.parts[part][rel]))
    ignore = [line for part in parts for line in GITIGNORE_LINES[part]]
    attributes = [line for part in parts for line in GITATTRIBUTES_LINES[part]]
    if ignore:
        actions.append(plan_lines(".gitignore", _entry(state, ".gitignore"), ignore))
    if attributes:
        actions.append(plan_lines(".gitattributes", _entry(state, ".gitattributes"), attributes, RETIRED_LINES))
    seen_real: dict[str, str] = {}
    for agent in agents:
        path = AGENT_FILES[agent]
        entry = _entry(state, path)
        if entry.real is not None and entry.real in seen_real:
            # AGENTS.md is often a symlink to CLAUDE.md: one block serves both.
            actions.append(Action("exists", path, f"same file as {seen_real[entry.real]}; block handled there"))
            continue
        if entry.real is not None:
            seen_real[entry.real] = path
        actions.append(plan_block(path, entry, templates.agent_blocks[agent], version))
    for agent in agents:
        if servers.get(agent):
            actions.append(plan_mcp(agent, _entry(state, MCP_FILES[agent]), servers[agent]))
        if agent in SETTINGS_FILES:
            actions.append(plan_settings(SETTINGS_FILES[agent], _entry(state, SETTINGS_FILES[agent])))
    for path, content in agent_files(templates, agents).items():
        actions.append(_plan_file(state, path, content))
    return _with_folders(state, actions, parts)


def plan_removal(
    state: Mapping[str, Entry], templates: Templates, *, agents: Sequence[str], servers: Mapping[str, Sequence[McpServer]] | None = None
) -> list[Action]:
    """Plan taking the agents' integration out again: the marked block of the agent notes, our
    MCP server entries, our hooks, and the command and skill files still as the toolkit wrote
    them (one a person changed is left, and said so), then the folders that leaves empty.
    Nothing else of a user's file changes; a file left with nothing of its own is removed."""
    _parts, agents = _check_choices((), agents)
    servers = servers or {}
    actions: list[Action] = []
    seen_real: set[str] = set()
    for agent in agents:
        path = AGENT_FILES[agent]
        entry = _entry(state, path)
        if entry.real is not None and entry.real in seen_real:
            actions.append(Action("exists", path, "same file as the other agent's notes; block handled there"))
            continue
        if entry.real is not None:
            seen_real.add(entry.real)
        actions.append(plan_block_removal(path, entry))
    for agent in agents:
        if servers.get(agent):
            actions.append(plan_mcp(agent, _entry(state, MCP_FILES[agent]), servers[agent], remove=True))
        if agent in SETTINGS_FILES:
            actions.append(plan_settings(SETTINGS_FILES[agent], _entry(state, SETTINGS_FILES[agent]), remove=True))
    folders: set[str] = set()
    for path, content in agent_files(templates, agents).items():
        entry = _entry(state, path)
        if entry.kind == "missing":
            actions.append(Action("exists", path, "not there"))
        elif entry.kind == "file" and entry.data == content:
            actions.append(Action("remove", path, "the toolkit's own file, unchanged", base=entry.data))
        else:
            actions.append(Action("exists", path, "changed since the toolkit wrote it; left as is"))
        parent = path.rpartition("/")[0]
        while parent:
            folders.add(parent)
            parent = parent.rpartition("/")[0]
    for agent in agents:
        if servers.get(agent) and "/" in MCP_FILES[agent]:
            folders.add(MCP_FILES[agent].rpartition("/")[0])
    # Deepest first: a folder can only go once what is inside it is gone.
    for folder in sorted(folders, key=lambda f: (-f.count("/"), f)):
        if _entry(state, folder).kind == "dir":
            actions.append(Action("rmdir", folder, "if it is empty now"))
    return actions


def plan_settings(path: str, entry: Entry, *, remove: bool = False) -> Action:
    """Plan the toolkit's hooks in an agent's settings file (or, with `remove`, taking them
    out); see `integrations.plan_claude_settings`. Raises InvalidDocument SETTINGS_INVALID."""
    text = _editable(path, entry)
    new = integrations.plan_claude_settings(text, remove=remove, path=path)
    return _change(path, entry, text, new, "hooks: SessionStart, UserPromptSubmit, PreCompact, Stop", remove=remove)


def _change(path: str, entry: Entry, text: str | None, new: str | None, what: str, *, remove: bool = False) -> Action:
    """The action that takes a file from `text` to `new` (None: no change; DELETE: remove it)."""
    if new is None:
        return Action("exists", path, f"{what}: {'none of ours' if remove else 'present'}")
    if new == integrations.DELETE:
        return Action("remove", path, f"{what} taken out; nothing else was in it", base=entry.data)
    if text is None:
        return Action("create", path, what, new.encode("utf-8"))
    return Action("update", path, f"{what} {'taken out' if remove else 'added or brought up to date'}", new.encode("utf-8"), base=entry.data)


def _check_choices(parts: Sequence[str], agents: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if isinstance(parts, str) or isinstance(agents, str):
        raise InvalidRequest("parts and agents are sequences of names, not one string")
    unknown = [p for p in parts if p not in PARTS] + [a for a in agents if a not in AGENT_FILES]
    if unknown:
        raise InvalidRequest(
            f"unknown part or agent: {', '.join(map(str, unknown))}",
            details={"parts": list(PARTS), "agents": list(AGENT_FILES)},
        )
    return tuple(dict.fromkeys(parts)), tuple(dict.fromkeys(agents))


def _entry(state: Mapping[str, Entry], path: str) -> Entry:
    return state.get(path, Entry("missing"))


def _plan_file(state: Mapping[str, Entry], path: str, content: bytes) -> Action:
    entry = _entry(state, path)
    if entry.kind == "missing":
        return Action("create", path, "from template", content)
    if entry.kind == "file":
        return Action("exists", path, "present; never overwritten")
    return Action("exists", path, f"present as a {entry.kind}; left alone")


def _with_folders(state: Mapping[str, Entry], actions: list[Action], parts: Sequence[str]) -> list[Action]:
    """Prefix the `mkdir` steps: each part's folder (it marks the workspace even while empty)
    and every folder a created file needs, checking that no file stands in the way."""
    folders = {f".{part}" for part in parts}
    for action in actions:
        if action.kind == "create":
            parent = action.path.rpartition("/")[0]
            while parent:
                folders.add(parent)
                parent = parent.rpartition("/")[0]
    mkdirs = []
    for folder in sorted(folders):
        entry = _entry(state, folder)
        if entry.kind == "missing":
            mkdirs.append(Action("mkdir", folder, "new folder"))
        elif entry.kind != "dir":
            raise Conflict(
                f"{folder} is a {entry.kind}, but the toolkit needs a folder there",
                code="ALREADY_EXISTS",
                path=folder,
                hint="move it aside, then run again",
            )
    return mkdirs + actions


def _decode(path: str, data: bytes) -> str:
    if len(data) > MAX_EDIT_BYTES:
        raise InvalidDocument(f"{path} is over {MAX_EDIT_BYTES} bytes; not editing it", code="FILE_TOO_LARGE", path=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidDocument(f"{path} is not valid UTF-8; not editing it", code="INVALID_ENCODING", path=path, line=line) from None


def _newline(text: str) -> str:
    """The file's own line ending, so added lines match it."""
    return "\r\n" if "\r\n" in text else "\n"


def _separator(text: str, newline: str) -> str:
    """What goes between existing text and an appended block: end the last line, then one blank line."""
    if text == "" or text.strip() == "":
        return "" if text == "" or text.endswith("\n") else newline
    ending = "" if text.endswith("\n") else newline
    return ending if text.endswith(("\n\n", "\r\n\r\n")) else ending + newline


def _editable(path: str, entry: Entry) -> str | None:
    """The text of a file we may edit, None when it is missing. Raises for a non-file."""
    if entry.kind == "missing":
        return None
    if entry.kind != "file" or entry.data is None:
        raise Conflict(f"{path} is a {entry.kind}, not a file", code="ALREADY_EXISTS", path=path, hint="move it aside, then run again")
    return _decode(path, entry.data)


def plan_lines(path: str, entry: Entry, wanted: Sequence[str], retired: frozenset[str] = frozenset()) -> Action:
    """Plan adding the `wanted` lines a gitignore-style file lacks, inside the marked block.

    Lines already present anywhere in the file (surrounding spaces ignored) are not repeated;
    the user's lines are never moved. A new block is appended; missing lines join an existing
    block just above its end marker, and `retired` lines inside the block (ones an earlier
    version wrote) are taken out. Raises InvalidDocument on unbalanced markers.
    """
    text = _editable(path, entry)
    if text is None:
        body = "".join(f"{line}\n" for line in (LINES_BEGIN, *wanted, LINES_END))
        return Action("create", path, f"{len(wanted)} entries in a moss-files block", body.encode())
    lines = text.splitlines(keepends=True)
    present = {line.strip() for line in lines}
    missing = [line for line in dict.fromkeys(wanted) if line.strip() not in present]
    begin, end = _marker_lines(path, lines, lambda s: s == LINES_BEGIN, lambda s: s == LINES_END)
    stale = [] if begin is None or end is None else [i for i in range(begin + 1, end) if lines[i].strip() in retired]
    if not missing and not stale:
        return Action("exists", path, "all entries present")
    newline = _newline(text)
    added = "".join(f"{line}{newline}" for line in missing)
    detail = f"add {len(missing)} missing entr{'y' if len(missing) == 1 else 'ies'}: {', '.join(missing)}" if missing else ""
    if begin is None or end is None:
        block = f"{LINES_BEGIN}{newline}{added}{LINES_END}{newline}"
        return Action("append", path, detail, (_separator(text, newline) + block).encode(), base=entry.data)
    if stale:
        detail = "; ".join(
            filter(None, [detail, f"retire {len(stale)} outdated entr{'y' if len(stale) == 1 else 'ies'}: " + ", ".join(lines[i].strip() for i in stale)])
        )
    kept = [line for i, line in enumerate(lines[:end]) if i not in stale]
    new_text = "".join(kept) + added + "".join(lines[end:])
    return Action("update", path, detail + " (in the moss-files block)", new_text.encode(), base=entry.data)


def render_block(body: str, version: str) -> str:
    """The marked agent block: begin marker with `version`, `body`, end marker."""
    if BLOCK_BEGIN_PREFIX in body or BLOCK_END in body:
        raise MossError("an agent block template contains the moss-files markers itself")
    if not body.endswith("\n"):
        body += "\n"
    return f"{BLOCK_BEGIN.format(version=version)}\n{body}{BLOCK_END}\n"


def plan_block(path: str, entry: Entry, body: str, version: str) -> Action:
    """Plan putting the marked block in an agent notes file (CLAUDE.md, AGENTS.md).

    Missing file: create it with the block. No block: append it. A block of another version:
    replace the lines from marker to marker, nothing else. Same version: leave the file, even
    if someone edited inside the block. Raises InvalidDocument on unbalanced markers.
    """
    text = _editable(path, entry)
    if text is None:
        return Action("create", path, f"agent notes, block version {version}", render_block(body, version).encode())
    lines = text.splitlines(keepends=True)
    begin, end = _marker_lines(path, lines, lambda s: s.startswith(BLOCK_BEGIN_PREFIX), lambda s: s == BLOCK_END)
    newline = _newline(text)
    block = render_block(body, version).replace("\n", newline)
    if begin is None or end is None:
        appended = (_separator(text, newline) + block).encode()
        return Action("append", path, f"add the moss-files block, version {version}", appended, base=entry.data)
    match = BLOCK_BEGIN_RE.fullmatch(lines[begin].strip())
    current = match.group(1) if match else None
    if current == version:
        return Action("exists", path, f"moss-files block version {version} present")
    new_text = "".join(lines[:begin]) + block + "".join(lines[end + 1 :])
    detail = f"replace the moss-files block ({current or 'unversioned'} -> {version})"
    return Action("update", path, detail, new_text.encode(), base=entry.data)


def plan_block_removal(path: str, entry: Entry) -> Action:
    """Plan taking the marked block out of an agent notes file (and the blank line it was
    appended after); a file left empty is removed. Raises InvalidDocument on unbalanced markers."""
    text = _editable(path, entry)
    if text is None:
        return Action("exists", path, "not there")
    lines = text.splitlines(keepends=True)
    begin, end = _marker_lines(path, lines, lambda s: s.startswith(BLOCK_BEGIN_PREFIX), lambda s: s == BLOCK_END)
    if begin is None or end is None:
        return Action("exists", path, "no moss-files block")
    before = "".join(lines[:begin])
    if before.endswith(("\n\n", "\r\n\r\n")):
        before = before[: -2 if before.endswith("\r\n\r\n") else -1]  # the blank line it was appended after
    rest = before + "".join(lines[end + 1 :])
    if not rest.strip():
        return Action("remove", path, "the moss-files block was all it held", base=entry.data)
    return Action("update", path, "take out the moss-files block", rest.encode(), base=entry.data)


def _marker_lines(path: str, lines: Sequence[str], is_begin: Callable[[str], bool], is_end: Callable[[str], bool]) -> tuple[int | None, int | None]:
    """Indexes of the one begin and one end marker line, (None, None) when there are none."""
    begins = [i for i, line in enumerate(lines) if is_begin(line.strip())]
    ends = [i for i, line in enumerate(lines) if is_end(line.strip())]
    if not begins and not ends:
        return None, None
    if len(begins) == 1 and len(ends) == 1 and begins[0] < ends[0]:
        return begins[0], ends[0]
    first = (begins + ends)[0] + 1
    raise InvalidDocument(
        f"{path} has unbalanced moss-files markers ({len(begins)} begin, {len(ends)} end)",
        code="INVALID_DOCUMENT",
        path=path,
        line=first,
        hint="keep exactly one begin and one end marker line, or delete both, then run again",
    )


def plan_mcp(agent: str, entry: Entry, servers: Sequence[McpServer], *, remove: bool = False) -> Action:
    """Plan registering `servers` in the agent's project MCP config, adding only missing ones
    (or, with `remove`, taking out those that are exactly ours).

    Claude Code reads `.mcp.json` (`{"mcpServers": {name: {"command", "args"}}}`), edited in
    place (`integrations.plan_mcp_json`: the user's servers, keys and layout stay). Codex reads
    `[mcp_servers.<name>]` tables from `.codex/config.toml`; the missing ones go into the
    toolkit's marked block with its hooks (`integrations.plan_codex_config`). Raises
    InvalidDocument SETTINGS_INVALID for a file that is not valid JSON or TOML, or not in its
    agent's shape.
    """
    path = MCP_FILES[agent]
    text = _editable(path, entry)
    entries = {s.name: {"command": s.command, "args": list(s.args)} for s in servers}
    names = ", ".join(entries)
    if agent == "claude":
        new = integrations.plan_mcp_json(text, entries, remove=remove, path=path)
        return _change(path, entry, text, new, f"MCP servers: {names}", remove=remove)
    new = integrations.plan_codex_config(text, entries, remove=remove, path=path)
    if new is not None and new != integrations.DELETE and text is not None and new.startswith(text) and not remove:
        return Action("append", path, f"MCP servers ({names}) and hooks in a moss-files block", new[len(text) :].encode("utf-8"), base=entry.data)
    return _change(path, entry, text, new, f"MCP servers ({names}) and hooks", remove=remove)


def action_to_dict(action: Action) -> dict[str, Any]:
    """The JSON shape of an action (content is summarized by its size)."""
    row: dict[str, Any] = {"kind": action.kind, "path": action.path, "detail": action.detail}
    if action.content is not None:
        row["bytes"] = len(action.content)
    return row


def render_action(action: Action, *, dry_run: bool = False) -> str:
    """One human line: `create   .moss/README.md  (from template)`."""
    verb = f"would {action.kind}" if dry_run and action.kind != "exists" else action.kind
    return f"{verb:<13} {action.path}  ({action.detail})"


def summarize(actions: Iterable[Action]) -> dict[str, int]:
    """Count actions per kind, every kind listed."""
    counts = dict.fromkeys(KINDS, 0)
    for action in actions:
        counts[action.kind] = counts.get(action.kind, 0) + 1
    return counts


# --- edges: templates and the project's files -----------------------------------------------


def load_templates() -> Templates:
    """Read the template files: from the installed `moss_files.templates` package, else from the
    checkout's `templates/` folder next to the package (PYTHONPATH runs, as in install.sh)."""
    try:
        root: Any = resources.files("moss_files.templates")
    except ModuleNotFoundError:
        root = Path(__file__).resolve().parent.parent / "templates"
        if not root.is_dir():
            raise MossError(f"templates not found (no moss_files.templates package, no {root})") from None
    parts = {part: dict(_walk(root / part)) for part in PARTS}
    agents: dict[str, str] = {}
    for agent in AGENT_FILES:
        node = root / "agents" / f"{agent}.md"
        if not node.is_file():
            raise MossError(f"agent block template for {agent} is missing from the toolkit's templates")
        agents[agent] = node.read_text(encoding="utf-8")
    claude = root / "claude"
    return Templates(parts, agents, commands=dict(_walk(claude / "commands")), skills=dict(_walk(claude / "skills")))


def _walk(node: Any, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    if not node.is_dir():
        return
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name in _SKIPPED_TEMPLATE_NAMES or child.name.endswith(".pyc"):
            continue
        if child.is_dir():
            yield from _walk(child, f"{prefix}{child.name}/")
        elif child.is_file():
            yield f"{prefix}{child.name}", child.read_bytes()


def read_state(root: Path, paths: Iterable[str], edited: Iterable[str] = ()) -> dict[str, Entry]:
    """What is at each project path; the bytes of the `edited` ones that are files."""
    edited = set(edited)
    state: dict[str, Entry] = {}
    for rel in paths:
        target = root / rel
        try:
            if not os.path.lexists(target):
                state[rel] = Entry("missing")
            elif target.is_dir():
                state[rel] = Entry("dir")
            elif target.is_file():
                if rel in edited:
                    state[rel] = Entry("file", target.read_bytes(), os.path.realpath(target))
                else:
                    state[rel] = Entry("file")
            else:
                state[rel] = Entry("symlink" if target.is_symlink() else "special file")
        except OSError as exc:
            raise _translate(exc, rel) from None
    return state


def plan_scaffold(
    root: Path | str,
    *,
    parts: Sequence[str] = PARTS,
    agents: Sequence[str] = (),
    templates: Templates | None = None,
    version: str = __version__,
    moss_command: str | None = None,
    remove: bool = False,
) -> list[Action]:
    """Plan the scaffold of the project at `root` without writing anything; in a git work
    tree this includes defining the merge driver (`moss_command`: the `moss` it runs). With
    `remove`, plan taking the `agents`' integration out instead (`plan_removal`).

    Raises NotFound when `root` does not exist, InvalidRequest when it is not a folder or a part
    or agent is unknown, plus the planner's errors (see `plan_actions`).
    """
    root = Path(root)
    if not root.exists():
        raise NotFound(f"project folder {root} does not exist", path=root)
    if not root.is_dir():
        raise InvalidRequest(f"project path {root} is not a folder", path=root)
    parts, agents = _check_choices(parts, agents)
    templates = templates or load_templates()
    servers = {agent: mcp_servers(agent) for agent in agents}
    if remove:
        state = read_state(root, candidate_paths(templates, (), agents, servers), edited_paths(agents, servers, templates))
        return plan_removal(state, templates, agents=agents, servers=servers)
    state = read_state(root, candidate_paths(templates, parts, agents, servers), edited_paths(agents, servers, templates))
    actions = plan_actions(state, templates, parts=parts, agents=agents, servers=servers, version=version)
    if any("merge=moss" in line for part in parts for line in GITATTRIBUTES_LINES[part]):
        driver = plan_merge_driver(root, moss_command)
        if driver is not None:
            actions.append(driver)
    return actions


def default_moss_command() -> str:
    """The `moss` of this installation, by absolute path when it can be found (git runs the
    driver with whatever PATH it was started with), else `moss` from the PATH."""
    beside = Path(sys.executable).parent / "moss"
    if beside.is_file():
        return str(beside)
    found = shutil.which("moss")
    return str(Path(found).resolve()) if found else "moss"


def merge_driver_settings(moss_command: str | None = None) -> tuple[tuple[str, str], ...]:
    """The git settings that define the moss merge driver."""
    command = shlex.quote(moss_command or default_moss_command())
    return ((f"merge.{MERGE_DRIVER}.name", MERGE_DRIVER_LABEL), (f"merge.{MERGE_DRIVER}.driver", f"{command} merge driver %O %A %B %P"))


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None  # no git on this machine: nothing to configure


def plan_merge_driver(root: Path, moss_command: str | None = None) -> Action | None:
    """The `config` action that defines the merge driver in the clone holding `root` (an
    `exists` action when it is defined so already); None outside a git work tree."""
    inside = _git(root, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.returncode != 0 or inside.stdout.strip() != "true":
        return None
    wanted = merge_driver_settings(moss_command)
    missing = []
    for key, value in wanted:
        found = _git(root, "config", "--local", "--get", key)
        if found is None or found.returncode != 0 or found.stdout.rstrip("\n") != value:
            missing.append((key, value))
    if not missing:
        return Action("exists", ".git/config", "the merge driver is defined in this clone")
    return Action("config", ".git/config", f"define the merge driver: {wanted[1][1]}", settings=tuple(missing))


def apply_scaffold(root: Path | str, actions: Iterable[Action]) -> list[Action]:
    """Carry out planned actions; return what was done (a file that appeared since planning is
    reported as `exists`, never replaced).

    Raises Conflict STALE_WRITE when a file to append to or update changed since it was planned
    (nothing is written to it), RepoError NOT_WRITABLE when the project cannot be written.
    """
    root = Path(root)
    done: list[Action] = []
    for action in actions:
        target = root / action.path
        try:
            done.append(_set_config(root, action) if action.kind == "config" else _apply_one(target, action))
        except OSError as exc:
            raise _translate(exc, action.path) from None
    return done


def _set_config(root: Path, action: Action) -> Action:
    """Carry out a `config` action in the clone holding `root` (which may be below its top)."""
    for key, value in action.settings:
        done = _git(root, "config", "--local", key, value)
        if done is None or done.returncode != 0:
            reason = done.stderr.strip() if done is not None else "git could not be run"
            raise RepoError(f"cannot set {key} in the clone's git config: {reason}", path=action.path)
    return action


def _apply_one(target: Path, action: Action) -> Action:
    if action.kind == "exists":
        return action
    if action.kind == "rmdir":
        try:
            os.rmdir(target)
        except FileNotFoundError:
            return replace(action, kind="exists", detail="gone already")
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return replace(action, kind="exists", detail="not empty; left as is")
            raise
        _fsync_dir(target.parent)
        return action
    if action.kind == "remove":
        _check_unchanged(target, action)
        target.unlink()
        _fsync_dir(target.parent)
        return action

    if action.kind == "mkdir":
        try:
            os.mkdir(target)
        except FileExistsError:
            if target.is_dir():
                return replace(action, kind="exists", detail="folder appeared meanwhile")
            raise Conflict(f"{action.path} appeared as a file where a folder is needed", code="ALREADY_EXISTS", path=action.path) from None
        _fsync_dir(target.parent)
        return action
    if action.content is None:
        raise MossError(f"{action.kind} action for {action.path} carries no content")
    if action.kind == "create":
        if _create_exclusive(target, action.content):
            return action
        return replace(action, kind="exists", detail="appeared meanwhile; left as is", content=None)
    if action.kind not in ("append", "update"):
        raise MossError(f"unknown action kind {action.kind!r}")
    # Edit through symlinks (AGENTS.md -> CLAUDE.md) so the link itself stays a link.
    real = Path(os.path.realpath(target))
    _check_unchanged(real, action)
    if action.kind == "append":
        _append_once(real, action.content)
    else:
        _replace_checked(real, action)
    return action


def _check_unchanged(path: Path, action: Action) -> None:
    try:
        current = path.read_bytes()
    except FileNotFoundError:
        current = None
    if current != action.base:
        raise Conflict(
            f"{action.path} changed while the scaffold was being planned; nothing was written to it",
            code="STALE_WRITE",
            path=action.path,
            hint="run the same command again",
        )


def _temp_for(path: Path) -> Path:
    # Same shape as fs.temp_path_for, so the .gitignore patterns and watchers cover it.
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def _create_exclusive(path: Path, data: bytes) -> bool:
    """Create `path` durably unless something is already there; True when this call made it."""
    temp = _temp_for(path)
    with open(temp, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temp, path)  # fails with EEXIST instead of replacing, unlike rename
    except FileExistsError:
        return False
    finally:
        temp.unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return True


def _append_once(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        written = os.write(fd, data)  # one write on O_APPEND: never interleaved with another appender
        if written != len(data):
            raise MossError(f"short append to {path} ({written} of {len(data)} bytes)", path=path)
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_checked(path: Path, action: Action) -> None:
    assert action.content is not None
    temp = _temp_for(path)
    mode = path.stat().st_mode & 0o7777
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(action.content)
            handle.flush()
            os.fsync(handle.fileno())
        # A hand edit (which takes no lock) between the first check and now must win.
        _check_unchanged(path, action)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _translate(exc: OSError, rel: str) -> MossError:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return RepoError(f"cannot write {rel}: {exc.strerror}", code="NOT_WRITABLE", path=rel, hint="check the project's permissions")
    if exc.errno == errno.ENOSPC:
        return RepoError(f"no space left writing {rel}", code="NOT_WRITABLE", path=rel)
    return MossError(f"{rel}: {exc.strerror or exc}", path=rel)


# --- entry point -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m moss_files.scaffold",
        description="Add the moss-files folders, .gitignore/.gitattributes entries and agent notes a project lacks. "
        "Never overwrites a file; running it twice changes nothing the second time.",
    )
    parser.add_argument("dir", metavar="DIR", type=Path, help="the project folder")
    parser.add_argument("--dry-run", action="store_true", help="print what would be done; write nothing")
    parser.add_argument("--json", action="store_true", help="print the actions as one JSON list on stdout")
    parser.add_argument("--agent", action="append", default=[], choices=sorted(AGENT_FILES), help="add agent notes (repeatable)")
    parser.add_argument(
        "--moss", metavar="PATH", default=None, help="the moss command the git merge driver runs (default: the one beside this python, else on PATH)"
    )
    parser.add_argument("--parts", action="append", default=None, metavar="PART[,PART]", help=f"parts to scaffold (default: {','.join(PARTS)})")
    parser.add_argument("--remove", action="store_true", help="take the --agent integration out again (hooks, commands, skills, notes, MCP entries)")
    parser.add_argument("--plugin", action="store_true", help="write the Claude Code plugin into DIR (a folder of its own) instead of scaffolding")
    return parser


def run(root: Path, *, parts: Sequence[str], agents: Sequence[str], dry_run: bool, moss_command: str | None = None, remove: bool = False) -> list[Action]:
    """Plan, and unless `dry_run`, apply the scaffold (with `remove`, the removal of the
    agents' integration); return the actions (planned or done). Raises InvalidRequest for
    `remove` without an agent."""
    if remove and not agents:
        raise InvalidRequest("--remove takes out an agent's integration: name it with --agent claude or --agent codex")
    actions = plan_scaffold(root, parts=parts, agents=agents, moss_command=moss_command, remove=remove)
    return actions if dry_run else apply_scaffold(root, actions)


def write_plugin(folder: Path, templates: Templates | None = None) -> list[Action]:
    """Write the Claude Code plugin (`integrations.plugin_files`) into `folder`, a folder of
    its own: files that differ are replaced, files it no longer has are left. Returns the
    actions done."""
    templates = templates or load_templates()
    done: list[Action] = []
    for rel, data in integrations.plugin_files(templates.commands, templates.skills).items():
        target = folder / rel
        try:
            current = target.read_bytes()
        except FileNotFoundError:
            current = None
        if current == data:
            done.append(Action("exists", rel, "up to date"))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = _temp_for(target)
        temp.write_bytes(data)
        os.replace(temp, target)
        done.append(Action("create" if current is None else "update", rel, "plugin file", data))
    return done


def run_templates(root: Path, *, parts: Sequence[str], templates: Templates) -> list[Action]:
    """Plan and apply the scaffold of `parts` with the given templates (a part's own command
    that makes its files itself passes none, to get only the git settings)."""
    return apply_scaffold(root, plan_scaffold(root, parts=parts, templates=templates))


def summary_line(root: Path, actions: Sequence[Action], *, dry_run: bool) -> str:
    """The closing human line: what changed (or would) and what was left as it was."""
    counts = summarize(actions)
    changed = len(actions) - counts["exists"]
    verb = "would change" if dry_run else "changed"
    kinds = ", ".join(f"{counts[k]} {k}" for k in KINDS if counts[k] and k != "exists")
    return f"moss-files scaffold of {root}: {verb} {changed} path(s){f' ({kinds})' if kinds else ''}, {counts['exists']} left as they were"


def report_to_dict(root: Path, actions: Sequence[Action], *, dry_run: bool) -> dict[str, object]:
    """The JSON shape `moss init`, `cstack init` and this module print with --json."""
    return {"root": str(root), "dry_run": dry_run, "actions": [action_to_dict(a) for a in actions]}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the exit status (errors map to the error tree's codes)."""
    args = _parser().parse_args(argv)
    parts = PARTS if args.parts is None else tuple(p for item in args.parts for p in item.split(",") if p)
    try:
        if args.plugin:
            args.dir.mkdir(parents=True, exist_ok=True)
            actions = write_plugin(args.dir)
        else:
            actions = run(args.dir, parts=parts, agents=args.agent, dry_run=args.dry_run, moss_command=args.moss, remove=args.remove)
    except MossError as err:
        print(json.dumps(error_body(err)) if args.json else describe(err), file=sys.stderr)
        return err.exit_code
    for action in actions:
        print(render_action(action, dry_run=args.dry_run), file=sys.stderr)
    print(summary_line(args.dir, actions, dry_run=args.dry_run), file=sys.stderr)
    if args.json:
        print(json.dumps(report_to_dict(args.dir, actions, dry_run=args.dry_run), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the agent hosts read from a project, and how it is merged into their files: Claude
Code's hooks (`.claude/settings.json`) and MCP servers (`.mcp.json`), Codex's hooks and MCP
servers (`.codex/config.toml`), and the Claude Code plugin that carries the hooks, commands,
skills and server for every project at once.

Core layer: pure functions from a file's text to its new text (the scaffold reads and writes
the files). Standard library only, like `moss_files.scaffold`, which install.sh runs on a bare
python3. A user's file keeps everything it had: JSON is edited in place (`foundation.jsonedit`:
only the span of what is added or removed changes; key order, spacing and line ends stay), and
TOML gets one marked block. Our entries are known by their command, `moss hook EVENT`, so a
second install changes nothing and `--remove` takes out exactly them.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from moss_files import __version__
from moss_files.foundation import jsonedit
from moss_files.foundation.errors import InvalidDocument

SETTINGS_FILE = ".claude/settings.json"
CLAUDE_COMMANDS = ".claude/commands"
CLAUDE_SKILLS = ".claude/skills"
CODEX_SKILLS = ".agents/skills"
HOOK_TIMEOUT = 10  # seconds; a hook takes well under one
# (host event, `moss hook` event, Claude Code matcher, Codex matcher). PreCompact's matcher
# (manual, auto) and the others' are left out: they match every occurrence.
HOOKS = (
    ("SessionStart", "session-start", "startup|resume|clear|compact", "startup|resume|clear"),
    ("UserPromptSubmit", "user-prompt-submit", None, None),
    ("PreCompact", "pre-compact", None, None),
    ("Stop", "stop", None, None),
)
OURS = re.compile(r"\bmoss hook (session-start|pre-compact|stop|user-prompt-submit)\b")
DELETE = "\0delete"  # what a plan returns for a file that is left with nothing of its own
LINES_BEGIN = "# >>> moss-files >>>"
LINES_END = "# <<< moss-files <<<"


BOM = "\ufeff"


def _keeping_bom(plan: Callable[..., str | None]) -> Callable[..., str | None]:
    """A file's plan made on its text without a UTF-8 byte order mark, which goes back in front
    of the new text: an editor that writes one (Notepad) keeps it, and the parsers never see it."""

    @functools.wraps(plan)
    def planned(text: str | None, *args: Any, **kwargs: Any) -> str | None:
        if text is None or not text.startswith(BOM):
            return plan(text, *args, **kwargs)
        new = plan(text[len(BOM) :], *args, **kwargs)
        return new if new is None or new == DELETE else BOM + new

    return planned


def hook_command(event: str) -> str:
    """The shell line a host runs for `event`: silent, and status 0, where `moss` is not on
    the PATH the host gives its hooks (so a project's settings never break a session)."""
    return f"if command -v moss >/dev/null 2>&1; then moss hook {event} --json; fi"


def hook_group(event: str, matcher: str | None) -> dict[str, Any]:
    """One matcher group of the hooks settings: {matcher?, hooks: [{type, command, timeout}]}."""
    group: dict[str, Any] = {"matcher": matcher} if matcher else {}
    group["hooks"] = [{"type": "command", "command": hook_command(event), "timeout": HOOK_TIMEOUT}]
    return group


def claude_hooks() -> dict[str, list[dict[str, Any]]]:
    """The `hooks` table of Claude Code's settings, as this toolkit sets it."""
    return {host: [hook_group(event, matcher)] for host, event, matcher, _codex in HOOKS}


def _invalid(path: str, message: str, *, line: int | None = None) -> InvalidDocument:
    return InvalidDocument(
        f"{path}: {message}; nothing was written to it",
        code="SETTINGS_INVALID",
        path=path,
        line=line,
        hint="fix the file by hand (or move it aside), then run again",
    )


def _parse(path: str, text: str) -> jsonedit.Node:
    try:
        node = jsonedit.parse(text)
    except jsonedit.JsonTextError as exc:
        raise _invalid(path, f"not valid JSON ({exc})", line=exc.line) from None
    if node.kind != "object":
        raise _invalid(path, "not a JSON object")
    return node


def _child(path: str, node: jsonedit.Node, key: str, kind: str) -> jsonedit.Node | None:
    """The value of `key` in `node`, which must be of `kind` when present (and once only)."""
    if node.keys().count(key) > 1:
        raise _invalid(path, f"{key!r} appears twice in one object")
    found = node.member(key)
    if found is not None and found.kind != kind:
        raise _invalid(path, f"{key!r} is not a JSON {kind}")
    return found


def _our_hooks(event: jsonedit.Node) -> list[tuple[int, int]]:
    """(group, hook) positions of this toolkit's hooks in one event's array of groups."""
    found: list[tuple[int, int]] = []
    for group_index, group in enumerate(event.items):
        hooks = group.member("hooks") if group.kind == "object" else None
        if hooks is None or hooks.kind != "array":
            continue
        for hook_index, hook in enumerate(hooks.items):
            command = hook.member("command") if hook.kind == "object" else None
            if command is not None and command.kind == "string" and OURS.search(str(command.value)):
                found.append((group_index, hook_index))
    return found


def _value(text: str, node: jsonedit.Node) -> Any:
    return json.loads(text[node.start : node.end])


class _Settings:
    """Claude Code's settings text being edited, re-read after every edit (offsets move)."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text

    def root(self) -> jsonedit.Node:
        return _parse(self.path, self.text)

    def hooks(self) -> jsonedit.Node | None:
        return _child(self.path, self.root(), "hooks", "object")

    def event(self, host: str) -> jsonedit.Node | None:
        hooks = self.hooks()
        return None if hooks is None else _child(self.path, hooks, host, "array")

    def drop_hook(self, host: str, group_index: int, hook_index: int) -> None:
        """Take out one hook; its group too when nothing else is left in it."""
        event = self.event(host)
        assert event is not None
        group = event.items[group_index]
        hooks = group.member("hooks")
        assert hooks is not None
        if len(hooks.items) == 1:
            self.text = jsonedit.remove_entry(self.text, event, group_index)
        else:
            self.text = jsonedit.remove_entry(self.text, hooks, hook_index)


@_keeping_bom
def plan_claude_settings(text: str | None, *, remove: bool = False, path: str = SETTINGS_FILE) -> str | None:
    """The new text of Claude Code's settings file with this toolkit's hooks (or, with
    `remove`, without them); None when nothing changes, DELETE when the file would be left
    holding nothing (an empty object).

    A hook is ours by its command (`moss hook EVENT`). Ours is brought up to date in place: its
    whole group when the group holds nothing else, else the hook alone (a person's hook added
    to our group stays, and so does the group's matcher). `remove` takes out our hooks, then
    a group, event list or `hooks` table left empty by that. Raises InvalidDocument
    SETTINGS_INVALID for a file that is not a JSON object, or whose `hooks` are not in the
    settings' shape (an object of arrays)."""
    wanted = claude_hooks()
    if text is None or not text.strip():
        return None if remove else json.dumps({"hooks": wanted}, indent=2, ensure_ascii=False) + "\n"
    doc = _Settings(path, text)
    if doc.hooks() is None:
        return None if remove else jsonedit.add_member(text, doc.root(), "hooks", wanted)
    for host, groups in wanted.items():
        event = doc.event(host)
        mine = _our_hooks(event) if event is not None else []
        keep = 0 if remove else 1
        for group_index, hook_index in reversed(mine[keep:]):  # extra copies, or all of them
            doc.drop_hook(host, group_index, hook_index)
        event = doc.event(host)
        if remove:
            hooks = doc.hooks()
            if mine and event is not None and not event.items and hooks is not None:
                doc.text = jsonedit.remove_entry(doc.text, hooks, hooks.keys().index(host))
            continue
        if event is None:
            hooks = doc.hooks()
            assert hooks is not None
            doc.text = jsonedit.add_member(doc.text, hooks, host, groups)
        elif not mine:
            doc.text = jsonedit.add_item(doc.text, event, groups[0])
        else:
            group_index, hook_index = mine[0]
            group = event.items[group_index]
            group_hooks = group.member("hooks")
            assert group_hooks is not None
            if len(group_hooks.items) == 1:
                if _value(doc.text, group) != groups[0]:
                    doc.text = jsonedit.replace_value(doc.text, group, groups[0])
            elif _value(doc.text, group_hooks.items[hook_index]) != groups[0]["hooks"][0]:
                doc.text = jsonedit.replace_value(doc.text, group_hooks.items[hook_index], groups[0]["hooks"][0])
    if remove and doc.text != text:
        hooks, root = doc.hooks(), doc.root()
        if hooks is not None and not hooks.members:
            doc.text = jsonedit.remove_entry(doc.text, root, root.keys().index("hooks"))
        if not doc.root().members:
            return DELETE
    return None if doc.text == text else doc.text


@_keeping_bom
def plan_mcp_json(text: str | None, servers: Mapping[str, Mapping[str, Any]], *, remove: bool = False, path: str = ".mcp.json") -> str | None:
    """The new text of `.mcp.json` with `servers` ({name: {command, args}}) registered where a
    server of that name is missing (or, with `remove`, without those of them that are exactly
    ours); None when nothing changes, DELETE when nothing of the file's own would be left."""
    if text is None or not text.strip():
        if remove:
            return None
        return json.dumps({"mcpServers": dict(servers)}, indent=2, ensure_ascii=False) + "\n"
    current = text
    root = _parse(path, current)
    registered = _child(path, root, "mcpServers", "object")
    if registered is None:
        if remove:
            return None
        return jsonedit.add_member(current, root, "mcpServers", dict(servers))
    for name, entry in servers.items():
        root = _parse(path, current)
        registered = _child(path, root, "mcpServers", "object")
        assert registered is not None
        found = registered.member(name)
        if remove:
            if found is not None and _value(current, found) == dict(entry):
                current = jsonedit.remove_entry(current, registered, registered.keys().index(name))
        elif found is None:
            current = jsonedit.add_member(current, registered, name, dict(entry))
    if remove and current != text:
        root = _parse(path, current)
        registered = _child(path, root, "mcpServers", "object")
        if registered is not None and not registered.members:
            current = jsonedit.remove_entry(current, root, root.keys().index("mcpServers"))
            root = _parse(path, current)
        if not root.members:
            return DELETE
    return None if current == text else current


# --------------------------------------------------------------------------- Codex


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string is a JSON string


def codex_tables(servers: Mapping[str, Mapping[str, Any]]) -> str:
    """The TOML of Codex's MCP servers `servers` and this toolkit's hooks."""
    lines = ["# moss-files: the MCP server and the hooks (Codex asks you to trust a project's hooks once: /hooks)."]
    for name, entry in servers.items():
        args = ", ".join(_toml_string(arg) for arg in entry.get("args", ()))
        lines += [f"[mcp_servers.{name}]", f"command = {_toml_string(str(entry['command']))}", f"args = [{args}]", ""]
    for host, event, _claude, matcher in HOOKS:
        lines.append(f"[[hooks.{host}]]")
        if matcher:
            lines.append(f"matcher = {_toml_string(matcher)}")
        lines += [f"[[hooks.{host}.hooks]]", 'type = "command"', f"command = {_toml_string(hook_command(event))}", f"timeout = {HOOK_TIMEOUT}", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _marked(lines: Sequence[str], path: str) -> tuple[int, int] | None:
    begins = [i for i, line in enumerate(lines) if line.strip() == LINES_BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == LINES_END]
    if not begins and not ends:
        return None
    if len(begins) == 1 and len(ends) == 1 and begins[0] < ends[0]:
        return begins[0], ends[0]
    raise _invalid(path, f"unbalanced moss-files markers ({len(begins)} begin, {len(ends)} end)", line=(begins + ends)[0] + 1)


_SERVER_TABLE = re.compile(r"(?m)^\s*\[mcp_servers\.\"?([A-Za-z0-9_-]+)\"?\]\s*$")


@_keeping_bom
def plan_codex_config(text: str | None, servers: Mapping[str, Mapping[str, Any]], *, remove: bool = False, path: str = ".codex/config.toml") -> str | None:
    """The new text of `.codex/config.toml`: a block between `# >>> moss-files >>>` and
    `# <<< moss-files <<<` holding the MCP servers the file lacks and the hooks (replaced when
    it says something else, taken out with `remove`); None when nothing changes, DELETE when
    nothing of the file's own would be left. Raises InvalidDocument SETTINGS_INVALID for a file
    that is not valid TOML, before or after."""
    existing = text or ""
    if existing.strip():
        try:
            tomllib.loads(existing)
        except tomllib.TOMLDecodeError as exc:
            raise _invalid(path, f"not valid TOML ({exc})") from None
    lines = existing.splitlines(keepends=True)
    span = _marked(lines, path)
    outside = existing if span is None else "".join(lines[: span[0]] + lines[span[1] + 1 :])
    if remove:
        if span is None:
            return None
        before = "".join(lines[: span[0]])
        if before.endswith("\n\n"):
            before = before[:-1]  # the blank line the block was added after
        after = "".join(lines[span[1] + 1 :])
        result = before + after
        return DELETE if not result.strip() else result
    mine = {name: entry for name, entry in servers.items() if name not in set(_SERVER_TABLE.findall(outside))}
    newline = "\r\n" if "\r\n" in existing else "\n"
    block = f"{LINES_BEGIN}\n{codex_tables(mine)}{LINES_END}\n".replace("\n", newline)
    if span is not None:
        result = "".join(lines[: span[0]]) + block + "".join(lines[span[1] + 1 :])
    elif not existing.strip():
        result = existing + block if existing.endswith("\n") or not existing else existing + newline + block
    else:
        ending = "" if existing.endswith("\n") else newline
        separator = ending if existing.endswith(("\n\n", "\r\n\r\n")) else ending + newline
        result = existing + separator + block
    try:
        tomllib.loads(result)
    except tomllib.TOMLDecodeError as exc:
        raise _invalid(path, f"would not be valid TOML with the toolkit's hooks ({exc}); is `hooks` defined another way?") from None
    return None if result == existing else result


# --------------------------------------------------------------------------- the plugin


PLUGIN_NAME = "moss-files"
PLUGIN_DESCRIPTION = (
    "moss-files for Claude Code: a session starts oriented (active task, next steps, ready tasks, unread mail, board, "
    "decisions), a checkpoint before each compaction, a reminder to update CURRENT.md, new-mail lines, the cstack and "
    "moss commands and skills, and the moss MCP server."
)


def plugin_files(commands: Mapping[str, bytes], skills: Mapping[str, bytes], *, version: str = __version__) -> dict[str, bytes]:
    """The Claude Code plugin's files by path inside the plugin: its manifest, hooks, MCP
    server, commands (`commands/NAME.md`) and skills (`skills/NAME/SKILL.md`)."""
    manifest = {
        "name": PLUGIN_NAME,
        "version": version,
        "description": PLUGIN_DESCRIPTION,
        "author": {"name": "moss-files"},
        "keywords": ["memory", "handoff", "tasks", "messages", "mcp", "hooks"],
    }
    files = {
        ".claude-plugin/plugin.json": json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
        "hooks/hooks.json": json.dumps({"description": "moss-files: orientation, checkpoints, reminders, mail", "hooks": claude_hooks()}, indent=2) + "\n",
        ".mcp.json": json.dumps({"mcpServers": {"moss": {"command": "moss", "args": ["serve"]}}}, indent=2) + "\n",
    }
    out = {path: text.encode("utf-8") for path, text in files.items()}
    out.update({f"commands/{name}": data for name, data in commands.items()})
    out.update({f"skills/{name}": data for name, data in skills.items()})
    return dict(sorted(out.items()))


def marketplace(plugin_source: str) -> bytes:
    """A Claude Code marketplace file listing the plugin at `plugin_source` (relative path)."""
    data = {
        "name": PLUGIN_NAME,
        "owner": {"name": "moss-files"},
        "plugins": [{"name": PLUGIN_NAME, "source": plugin_source, "description": PLUGIN_DESCRIPTION}],
    }
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")

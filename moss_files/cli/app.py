"""The `moss` command's typer app: the group, its own commands (version, codes, doc, init) and
the feature commands, each built only when it runs or is listed. Entry layer: parse input,
call the library, render output. The console script is `cli.main.main`, which runs the common
search invocations without loading this module (see `cli.quick`).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from moss_files import __version__
from moss_files.cli.support import HELP_OPTIONS, HelpGroup, JsonOpt, VersionOpt, emit, new_app, reporting
from moss_files.foundation.errors import ERROR_CODES, InvalidRequest, MossError, NotFound, error_body

__all__ = ["LAZY_COMMANDS", "LazyGroup", "app", "feature_command", "feature_commands"]

# Commands that live in feature modules, by the module whose `register(app)` adds them. typer
# turns every registered command into a click command on each run (about 0.5 ms per command,
# reading its signature); loading only the module of the command being run keeps start-up
# flat as features are added. tests/test_meta.py checks this table against the modules.
LAZY_COMMANDS: dict[str, tuple[str, ...]] = {
    "moss_files.cli.capsules": (
        "store",
        "fetch",
        "fetch-many",
        "update",
        "append",
        "delete",
        "latest",
        "list",
        "inventory",
        "capsule-search",
        "compose",
        "export",
        "import",
        "purge",
        "bulk-update",
        "bulk-delete",
        "history",
    ),
    "moss_files.cli.search": ("search", "expand", "timeline", "index"),
    "moss_files.cli.loopflow": ("insight", "session", "backlog", "feedback", "observe"),
    "moss_files.cli.serve": ("serve",),
    "moss_files.cli.board": ("task", "epic", "worker", "team", "board"),
    "moss_files.cli.merge": ("merge",),
    "moss_files.cli.agent": ("agent",),
    "moss_files.cli.migrate": ("migrate",),
    "moss_files.cli.upgrade": ("upgrade",),
    "moss_files.cli.ui": ("ui",),
    "moss_files.cli.hooks": ("hook",),
    "moss_files.cli.projects": ("projects",),
}


class LazyGroup(HelpGroup):
    """The `moss` group: every command built only when it is asked for (run, or listed by
    `--help`), the feature ones from modules loaded on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        lazy = [name for names in LAZY_COMMANDS.values() for name in names]
        return [*_registered_names(builtins), *lazy]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        for module_name, names in LAZY_COMMANDS.items():
            if cmd_name in names:
                return feature_command(module_name, cmd_name)
        return _built(builtins, "", cmd_name) or super().get_command(ctx, cmd_name)


# typer turns a Typer app into click commands all at once, reading every command's signature;
# a process runs one command, so each is built alone, from its own registration, when needed.
_built_commands: dict[tuple[str, str], Any] = {}
_holders: dict[str, typer.Typer] = {}


def _registered_names(holder: typer.Typer) -> list[str]:
    names: list[Any] = [info.name or typer.main.get_command_name(info.callback.__name__) for info in holder.registered_commands if info.callback]
    names += [info.name or info.typer_instance.info.name for info in holder.registered_groups if info.typer_instance]
    return [name for name in names if isinstance(name, str)]


def _built(holder: typer.Typer, key: str, name: str) -> Any:
    """The click command `name` of `holder`, built alone (once per process); None if absent."""
    if (key, name) in _built_commands:
        return _built_commands[key, name]
    single = new_app("")
    for info in holder.registered_commands:
        if info.callback and (info.name or typer.main.get_command_name(info.callback.__name__)) == name:
            single.registered_commands = [info]
            command = typer.main.get_command(single)
            break
    else:
        groups = [info for info in holder.registered_groups if info.typer_instance and (info.name or info.typer_instance.info.name) == name]
        if not groups:
            return None
        single.registered_groups = groups
        command = typer.main.get_command(single).commands[name]  # type: ignore[attr-defined]
    _with_help_options(command)
    _built_commands[key, name] = command
    return command


def _with_help_options(command: Any) -> None:
    """Give `command` and every command under it `-h` of their own. A command built alone has
    no app's settings, and click caches a command's help option from the first context made
    for it: one made without the `moss` group above it (a test, a library caller) would lose
    `-h` for the rest of the process."""
    command.context_settings = {**HELP_OPTIONS, **command.context_settings}
    for sub in getattr(command, "commands", {}).values():
        _with_help_options(sub)


def feature_command(module_name: str, name: str) -> Any:
    """One click command of a feature module, built alone (its module imported once)."""
    if module_name not in _holders:
        holder = new_app("")
        importlib.import_module(module_name).register(holder)
        _holders[module_name] = holder
    return _built(_holders[module_name], module_name, name)


def feature_commands(module_name: str) -> dict[str, Any]:
    """Every click command one feature module registers, by name."""
    feature_command(module_name, "")
    return {name: feature_command(module_name, name) for name in _registered_names(_holders[module_name])}


app = new_app("moss-files: capsules, memory, messages, tasks and search for agent teams, as markdown files in git.", cls=LazyGroup)
# The group's own commands live on `builtins`, so that running one builds none of the others.
builtins = new_app("")
doc_app = new_app("Inspect and edit markdown documents with YAML frontmatter, faithfully.")
builtins.add_typer(doc_app, name="doc")


@app.callback()
def _moss(version: VersionOpt = False) -> None:
    """moss-files: capsules, memory, messages, tasks and search for agent teams, as markdown files in git."""


@builtins.command("version")
def version(as_json: JsonOpt = False) -> None:
    """Print the toolkit's version."""
    emit({"version": __version__}, as_json, text=f"moss-files {__version__}")


@builtins.command("codes")
def codes(as_json: JsonOpt = False) -> None:
    """List every stable error code with what it means."""
    rows = [{"code": code, "meaning": meaning} for code, meaning in ERROR_CODES.items()]
    emit(rows, as_json, text="\n".join(f"{row['code']:<28} {row['meaning']}" for row in rows))


@doc_app.command("check")
def doc_check(
    paths: Annotated[list[Path], typer.Argument(help="Documents to validate.", show_default=False)],
    as_json: JsonOpt = False,
) -> None:
    """Validate documents; report each problem with its code, file and line (exit 4 if any)."""
    from moss_files.foundation import fs

    results: list[dict[str, Any]] = []
    exit_codes: list[int] = []
    with reporting(as_json):
        for path in paths:
            try:
                fs.read_document(path)
                results.append({"path": str(path), "ok": True})
            except MossError as err:
                results.append({"path": str(path), **error_body(err)})
                exit_codes.append(err.exit_code)
    failed = [row for row in results if not row["ok"]]
    lines = [
        f"ok     {row['path']}" if row["ok"] else f"error  {row['path']}:{row['error'].get('line') or ''} [{row['error']['code']}] {row['error']['message']}"
        for row in results
    ]
    emit({"ok": not failed, "results": results}, as_json, text="\n".join(lines))
    if exit_codes:
        raise typer.Exit(max(exit_codes))


@doc_app.command("get")
def doc_get(
    path: Annotated[Path, typer.Argument(help="The document.", show_default=False)],
    key: Annotated[str | None, typer.Argument(help="One frontmatter key (default: all); a dotted path names a nested key.", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a document's frontmatter, or one key's value."""
    from moss_files.foundation import document, fs

    with reporting(as_json):
        doc = fs.read_document(path)
        if key is None:
            value: Any = doc.meta
        else:
            found = document.find_path(doc.meta, key)
            if found is None:
                raise NotFound(f"no key {key!r} in the frontmatter", path=path)
            value = doc.meta
            for step in found:
                value = value[step]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    emit(value, as_json, text=text)


@doc_app.command("set")
def doc_set(
    path: Annotated[Path, typer.Argument(help="The document to edit.", show_default=False)],
    assignments: Annotated[
        list[str],
        typer.Argument(
            help="KEY=VALUE pairs; VALUE is read as YAML (so `x=[a, b]` is a list); KEY= with no value deletes; a dotted KEY "
            "(settings.approval_mode) names a nested key.",
            show_default=False,
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Set or delete frontmatter keys, changing only those keys' lines (a toolkit file of an
    older format is written at its current one; one of a newer format is refused)."""
    from moss_files.foundation import document, formats, fs

    with reporting(as_json):
        changes = dict(_parse_assignment(item) for item in assignments)
        found = formats.locate(path.absolute())
        kind, relpath = (found[0].name, found[1]) if found is not None and found[0].marker == formats.FRONTMATTER else (None, None)
        written = fs.modify_document(
            path, lambda doc: document.edit_frontmatter(doc.text, document.nested_changes(doc.meta, changes), path), kind=kind, relpath=relpath
        )
    emit({"path": str(path), "meta": written.meta}, as_json, text="")


def _parse_assignment(item: str) -> tuple[str, Any]:
    from moss_files.foundation import document

    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise InvalidRequest(f"expected KEY=VALUE, got {item!r}")
    if raw == "":
        return key, document.DELETE
    try:
        return key, document.parse(f"---\nv: {raw}\n---\n").meta["v"]
    except MossError:
        return key, raw


@builtins.command("init")
def init(
    directory: Annotated[
        Path | None,
        typer.Argument(
            metavar="DIR",
            help="Project folder (default: the workspace or git work tree around the current directory).",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be done; write nothing.")] = False,
    agents: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            metavar="claude|codex",
            help="Add an agent's integration: notes (CLAUDE.md, AGENTS.md), the MCP server, hooks, commands and skills. Repeatable.",
            show_default=False,
        ),
    ] = None,
    remove: Annotated[bool, typer.Option("--remove", help="Take the --agent integration out again; the user's own entries stay.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Scaffold .cstack/, .needlecast/, .moss/ and git settings in a project; never overwrites a file."""
    # Imported here so the other commands don't load the scaffold at start-up.
    from moss_files import scaffold
    from moss_files.cli.support import note
    from moss_files.foundation import workspace

    with reporting(as_json):
        root = workspace.init_root(explicit=directory)
        actions = scaffold.run(root, parts=scaffold.PARTS, agents=agents or (), dry_run=dry_run, remove=remove)
    for action in actions:
        note(scaffold.render_action(action, dry_run=dry_run))
    note(scaffold.summary_line(root, actions, dry_run=dry_run))
    emit(scaffold.report_to_dict(root, actions, dry_run=dry_run), as_json, text="")

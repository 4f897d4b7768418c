"""The capsule tool sets: Moss's sixteen operations (store, fetch, fetch_many, update, append,
delete, latest, list, inventory, search, compose, export, import, purge, bulk_update,
bulk_delete) under the v1 design's names (`moss.store`, the `moss` set) and under Moss's newest
names (`capsule_store`, the opt-in `capsule` set). Entry layer: each tool is one call of the
capsule use case (`capsules.service`, `search`, `bulk`, `transfer`) that `moss store|fetch|…`
calls, so both spellings and the CLI return the same shapes and errors. The use cases load on
a tool's first call, not when the tool set is declared: imported here they would add about
15 ms to every `moss serve` start, also for clients that never call a capsule tool.

An operation switched off in `disabled_tools` under either name is off under both, and
`disabled_types = ["capsule"]` switches off every capsule tool, as in Moss (types name the
`<type>_*` families of Moss's tools; "capsule" is the one Moss knows, and an unknown type is a
warning in the server's log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from moss_files.foundation import config
from moss_files.foundation.config import Config
from moss_files.foundation.context import Context
from moss_files.mcp.server import ToolRegistry

log = logging.getLogger("moss_files.mcp")

CAPSULE_TYPE = "capsule"
KNOWN_TYPES = frozenset({CAPSULE_TYPE})
_warned: set[str] = set()

Id = Annotated[str | None, Field(description="Capsule id (ULID). Give an id or a name, not both.")]
Workspace = Annotated[str | None, Field(description='Workspace (default "default").')]
Name = Annotated[str | None, Field(description="Capsule name, unique among live capsules of its workspace.")]
Text = Annotated[str, Field(description="Markdown with six sections: Objective, Current status, Decisions, Next actions, Key locations, Open questions.")]
Tags = Annotated[list[str] | None, Field(description="Tags.")]
IncludeDeleted = Annotated[bool, Field(description="Also find soft-deleted capsules.")]
RunId = Annotated[str | None, Field(description="Orchestration run id.")]
Phase = Annotated[str | None, Field(description="Workflow phase.")]
Role = Annotated[str | None, Field(description="Agent role.")]
Limit = Annotated[int | None, Field(description="Page size.")]
Offset = Annotated[int | None, Field(description="Items to skip.")]


class Ref(TypedDict, total=False):
    """One capsule: by id, or by workspace and name."""

    id: str
    workspace: str
    name: str


class StoreAs(TypedDict):
    """Where compose stores its bundle."""

    name: str
    workspace: NotRequired[str]
    mode: NotRequired[str]


def register(tools: ToolRegistry) -> None:
    """Declare the capsule tools under the v1 design's names (`moss.store`, …)."""
    _declare(tools, lambda op: f"moss.{op}")


def register_capsule_names(tools: ToolRegistry) -> None:
    """Declare the capsule tools under Moss's newest names (`capsule_store`, …)."""
    _declare(tools, lambda op: f"capsule_{op}")


def type_disabled(settings: Config) -> bool:
    """Whether the workspace's `disabled_types` switches the capsule tools off; an unknown
    type is logged once as a warning, as Moss does."""
    types = {item.strip().lower() for item in settings.disabled_types if item.strip()}
    for unknown in sorted(types - KNOWN_TYPES - _warned):
        _warned.add(unknown)
        log.warning("disabled_types: unknown type %r (known: %s)", unknown, ", ".join(sorted(KNOWN_TYPES)))
    return CAPSULE_TYPE in types


def _declare(tools: ToolRegistry, name_of: Callable[[str], str]) -> None:
    ws = tools.context
    if type_disabled(ws.config):
        return

    def operation(op: str, description: str, **hints: bool) -> Callable[[Any], Any]:
        # One operation, two names: switching either name off switches the operation off.
        if {f"moss.{op}", f"moss_{op}", f"capsule_{op}"} & tools.disabled:
            return lambda fn: fn
        return tools.tool(name_of(op), description.replace("{names}", name_of("")), **hints)

    def ctx() -> Context:
        # The config is read per call, so a long-running server sees edits of .moss/config.toml.
        return ws.replace(config=config.load_config(ws.root, home=ws.home))

    @operation(
        "store",
        'Store a context capsule (lint: the six sections, unless allow_thin). mode "replace" overwrites the live capsule '
        'of that name, keeping its id; "error" (default) refuses with NAME_ALREADY_EXISTS. Returns {id, task_link, fetch_key}.',
        destructive=True,
    )
    def store(
        capsule_text: Text,
        workspace: Workspace = None,
        name: Name = None,
        title: Annotated[str | None, Field(description="Title (default: the name).")] = None,
        tags: Tags = None,
        source: Annotated[str | None, Field(description="Where it came from (claude-code, codex, ...).")] = None,
        mode: Annotated[str | None, Field(description='"error" (default) or "replace".')] = None,
        allow_thin: Annotated[bool, Field(description="Skip the six-section lint.")] = False,
        run_id: RunId = None,
        phase: Phase = None,
        role: Role = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.store(
            ctx(),
            capsule_text=capsule_text,
            workspace=workspace,
            name=name,
            title=title,
            tags=tags,
            source=source,
            mode=mode,
            allow_thin=allow_thin,
            run_id=run_id,
            phase=phase,
            role=role,
        )

    @operation(
        "fetch",
        "One capsule by id or by workspace+name, with capsule_text (include_text false: metadata only).",
        read_only=True,
    )
    def fetch(
        id: Id = None,
        workspace: Workspace = None,
        name: Name = None,
        include_text: Annotated[bool, Field(description="Include capsule_text.")] = True,
        include_deleted: IncludeDeleted = False,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.fetch(ctx(), id=id, workspace=workspace, name=name, include_text=include_text, include_deleted=include_deleted)

    @operation(
        "fetch_many",
        "Up to 50 capsules at once; missing ones go to errors [{ref, code, message}], the rest to items.",
        read_only=True,
    )
    def fetch_many(
        items: Annotated[list[Ref], Field(description="Refs: {id} or {workspace, name}.")],
        include_text: Annotated[bool, Field(description="Include capsule_text.")] = True,
        include_deleted: IncludeDeleted = False,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.fetch_many(ctx(), items=items, include_text=include_text, include_deleted=include_deleted)

    @operation(
        "update",
        'Change a live capsule\'s text or fields ("" clears an optional field; text is linted). Returns {id, task_link, fetch_key}.',
        destructive=True,
    )
    def update(
        id: Id = None,
        workspace: Workspace = None,
        name: Name = None,
        capsule_text: Annotated[str | None, Field(description="New text (six sections unless allow_thin).")] = None,
        title: Annotated[str | None, Field(description="New title.")] = None,
        tags: Tags = None,
        source: Annotated[str | None, Field(description="New source.")] = None,
        run_id: RunId = None,
        phase: Phase = None,
        role: Role = None,
        allow_thin: Annotated[bool, Field(description="Skip the six-section lint.")] = False,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.update(
            ctx(),
            id=id,
            workspace=workspace,
            name=name,
            capsule_text=capsule_text,
            title=title,
            tags=tags,
            source=source,
            run_id=run_id,
            phase=phase,
            role=role,
            allow_thin=allow_thin,
        )

    @operation(
        "append",
        "Add content to one section of a live capsule (exact header name, any case); a placeholder body such as "
        "(none) or TBD is replaced. Returns {id, section_hit, replaced}.",
    )
    def append(
        section: Annotated[str, Field(description="Section header, e.g. Decisions.")],
        content: Annotated[str, Field(description="Markdown to add.")],
        id: Id = None,
        workspace: Workspace = None,
        name: Name = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.append(ctx(), section=section, content=content, id=id, workspace=workspace, name=name)

    @operation(
        "delete",
        "Soft-delete a capsule (recoverable with include_deleted, purged later); frees its name. Returns {deleted, id}.",
        destructive=True,
        idempotent=True,
    )
    def delete(id: Id = None, workspace: Workspace = None, name: Name = None) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.delete(ctx(), id=id, workspace=workspace, name=name)

    @operation(
        "latest",
        "The most recently updated capsule of a workspace: {item}, a summary unless include_text; {item: null} if none.",
        read_only=True,
    )
    def latest(
        workspace: Workspace = None,
        include_text: Annotated[bool, Field(description="Include capsule_text.")] = False,
        include_deleted: IncludeDeleted = False,
        run_id: RunId = None,
        phase: Phase = None,
        role: Role = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.latest(ctx(), workspace=workspace, include_text=include_text, include_deleted=include_deleted, run_id=run_id, phase=phase, role=role)

    @operation(
        "list",
        "Capsule summaries of one workspace, newest first, never their text (limit 20, max 100). Returns {items, pagination, sort}.",
        read_only=True,
    )
    def list_(
        workspace: Workspace = None,
        limit: Limit = None,
        offset: Offset = None,
        include_deleted: IncludeDeleted = False,
        run_id: RunId = None,
        phase: Phase = None,
        role: Role = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.list_capsules(
            ctx(), workspace=workspace, limit=limit, offset=offset, include_deleted=include_deleted, run_id=run_id, phase=phase, role=role
        )

    @operation(
        "inventory",
        "Capsule summaries across all workspaces, filtered, newest first, never their text (limit 100, max 500).",
        read_only=True,
    )
    def inventory(
        workspace: Annotated[str | None, Field(description="Only this workspace.")] = None,
        tag: Annotated[str | None, Field(description="Only capsules with this tag.")] = None,
        name_prefix: Annotated[str | None, Field(description="Only names starting with this.")] = None,
        run_id: RunId = None,
        phase: Phase = None,
        role: Role = None,
        include_deleted: IncludeDeleted = False,
        limit: Limit = None,
        offset: Offset = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.inventory(
            ctx(),
            workspace=workspace,
            tag=tag,
            name_prefix=name_prefix,
            run_id=run_id,
            phase=phase,
            role=role,
            include_deleted=include_deleted,
            limit=limit,
            offset=offset,
        )

    @operation(
        "compose",
        "Join capsules into one bundle in the order given (all or nothing); sections keeps only those sections; "
        "store_as {name, workspace?, mode?} stores the bundle. Returns {bundle_text, bundle_chars, parts_count, stored?}.",
        destructive=True,
    )
    def compose(
        items: Annotated[list[Ref], Field(description="Refs: {id} or {workspace, name}.")],
        format: Annotated[str | None, Field(description='"markdown" (default) or "json".')] = None,
        sections: Annotated[list[str] | None, Field(description="Only these sections, in this order.")] = None,
        store_as: Annotated[StoreAs | None, Field(description="Store the bundle as this capsule.")] = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.compose(ctx(), items=items, format=format, sections=sections, store_as=store_as)

    @operation(
        "export",
        "Write capsules to a JSONL file (default ~/.moss/exports/<workspace>-<time>.jsonl; an earlier export at path "
        "is replaced, any other file refused). Returns {path, count, exported_at}.",
        destructive=True,
    )
    def export(
        path: Annotated[str | None, Field(description="A .jsonl path in an allowed folder.")] = None,
        workspace: Annotated[str | None, Field(description="Only this workspace.")] = None,
        include_deleted: IncludeDeleted = False,
    ) -> dict[str, Any]:
        from moss_files.capsules import transfer

        return transfer.export(ctx(), path=path, workspace=workspace, include_deleted=include_deleted)

    @operation(
        "import",
        "Restore capsules from a Moss JSONL export, all or nothing. mode: error (default: refuse collisions), replace, "
        "rename. Returns {imported, skipped, errors}; a refused import is an error (CONFLICT for collisions, INVALID_DOCUMENT "
        "for bad lines) with that result, its per-line errors included, in details.",
        destructive=True,
    )
    def import_(
        path: Annotated[str, Field(description="The .jsonl file, in an allowed folder.")],
        mode: Annotated[str | None, Field(description="error, replace or rename.")] = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import transfer

        result = transfer.import_capsules(ctx(), path=path, mode=mode)
        refused = transfer.import_refusal(result)
        if refused is not None:
            raise refused
        return result

    @operation(
        "purge",
        "Permanently delete soft-deleted capsules (of one workspace, or deleted more than N days ago). Returns {purged, message, items}.",
        destructive=True,
        idempotent=True,
    )
    def purge(
        workspace: Annotated[str | None, Field(description="Only this workspace.")] = None,
        older_than_days: Annotated[int | None, Field(description="Only those deleted more than this many days ago.")] = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import service as capsules

        return capsules.purge(ctx(), workspace=workspace, older_than_days=older_than_days)

    @operation(
        "search",
        "Full-text search over capsules, best first, with a snippet per hit (HTML-escaped, matches in <b>); every word "
        'must match (match "any": one). Filters as inventory. Returns {items, pagination, sort: "relevance"}.',
        read_only=True,
    )
    def search(
        query: Annotated[str, Field(description='Words, "phrases", -exclusions (at most 1000 characters).')],
        workspace: Annotated[str | None, Field(description="Only this workspace.")] = None,
        tag: Annotated[str | None, Field(description="Only capsules with this tag.")] = None,
        run_id: RunId = None,
        phase: Phase = None,
        role: Role = None,
        include_deleted: IncludeDeleted = False,
        limit: Annotated[int | None, Field(description="Page size (default 20, max 100).")] = None,
        offset: Offset = None,
        match: Annotated[str | None, Field(description='"all" words (default) or "any".')] = None,
    ) -> dict[str, Any]:
        from moss_files.capsules import search as capsule_search

        return capsule_search.search(
            ctx(),
            query=query,
            workspace=workspace,
            tag=tag,
            run_id=run_id,
            phase=phase,
            role=role,
            include_deleted=include_deleted,
            limit=limit,
            offset=offset,
            match=match,
        )

    @operation(
        "bulk_update",
        'Set phase, role or tags on every live capsule the filters match (at least one filter; all must match; "" '
        "or [] clears), all or nothing; dry_run writes nothing. Returns {updated, changed, message, dry_run, items}.",
        destructive=True,
        idempotent=True,
    )
    def bulk_update(
        workspace: Annotated[str | None, Field(description="Filter: this workspace.")] = None,
        tag: Annotated[str | None, Field(description="Filter: capsules with this tag.")] = None,
        name_prefix: Annotated[str | None, Field(description="Filter: names starting with this.")] = None,
        run_id: Annotated[str | None, Field(description="Filter: this orchestration run.")] = None,
        phase: Annotated[str | None, Field(description="Filter: this phase.")] = None,
        role: Annotated[str | None, Field(description="Filter: this role.")] = None,
        set_phase: Annotated[str | None, Field(description='New phase ("" clears).')] = None,
        set_role: Annotated[str | None, Field(description='New role ("" clears).')] = None,
        set_tags: Annotated[list[str] | None, Field(description="New tags, replacing the old ([] clears).")] = None,
        dry_run: Annotated[bool, Field(description="Only say what would change.")] = False,
    ) -> dict[str, Any]:
        from moss_files.capsules import bulk

        return bulk.bulk_update(
            ctx(),
            workspace=workspace,
            tag=tag,
            name_prefix=name_prefix,
            run_id=run_id,
            phase=phase,
            role=role,
            set_phase=set_phase,
            set_role=set_role,
            set_tags=set_tags,
            dry_run=dry_run,
        )

    @operation(
        "bulk_delete",
        "Soft-delete every live capsule the filters match (at least one filter; all must match), all or nothing; "
        "dry_run writes nothing. Returns {deleted, message, dry_run, items}.",
        destructive=True,
        idempotent=True,
    )
    def bulk_delete(
        workspace: Annotated[str | None, Field(description="Filter: this workspace.")] = None,
        tag: Annotated[str | None, Field(description="Filter: capsules with this tag.")] = None,
        name_prefix: Annotated[str | None, Field(description="Filter: names starting with this.")] = None,
        run_id: Annotated[str | None, Field(description="Filter: this orchestration run.")] = None,
        phase: Annotated[str | None, Field(description="Filter: this phase.")] = None,
        role: Annotated[str | None, Field(description="Filter: this role.")] = None,
        dry_run: Annotated[bool, Field(description="Only say what would be deleted.")] = False,
    ) -> dict[str, Any]:
        from moss_files.capsules import bulk

        return bulk.bulk_delete(ctx(), workspace=workspace, tag=tag, name_prefix=name_prefix, run_id=run_id, phase=phase, role=role, dry_run=dry_run)

"""`moss store|fetch|fetch-many|update|append|delete|latest|list|inventory|capsule-search|compose|export|import|purge|
bulk-update|bulk-delete|history`.

Entry layer: parse options, call `capsules`, render. `--json` prints the operation's result
exactly as the MCP tool returns it; errors go to stderr (the JSON error body with --json) with
the exit code of their class: 2 bad request, 3 not found, 4 invalid content (too large, too
thin, unreadable file), 5 conflict (name taken, stale write), 6 git/workspace problem.
The modules that read git load only in the commands that read it (`history`, `fetch --at`),
so `moss fetch` never pays for git; `fetch --at` never pays for GitPython either.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.capsules import service as capsules
from moss_files.capsules.model import ms_to_rfc3339
from moss_files.cli import quick
from moss_files.cli.support import JsonOpt, RootOpt, confirm, emit, note, report, reporting
from moss_files.foundation import document, structured
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError

WorkspaceOpt = Annotated[str, typer.Option("--workspace", "-w", help="Workspace (default: 'default').")]
IdOpt = Annotated[str | None, typer.Option("--id", help="Address the capsule by id instead of name.", show_default=False)]
NameArg = Annotated[
    str | None, typer.Argument(help="Capsule name (in --workspace); an id, as Moss's CLI takes it, when no capsule has that name.", show_default=False)
]
NameOpt = Annotated[str | None, typer.Option("--name", "-n", help="Capsule name, as Moss's CLI spells it (the same as the argument).", show_default=False)]
RunIdOpt = Annotated[str | None, typer.Option("--run-id", help="Only capsules of this orchestration run.", show_default=False)]
PhaseOpt = Annotated[str | None, typer.Option("--phase", help="Only capsules of this workflow phase.", show_default=False)]
RoleOpt = Annotated[str | None, typer.Option("--role", help="Only capsules of this agent role.", show_default=False)]
DeletedOpt = Annotated[bool, typer.Option("--include-deleted", help="Include soft-deleted capsules.")]


# One rendering with the typer-free `moss list|inventory|latest` (cli.quick).
_row = quick.capsule_row
_listing = quick.capsule_listing


def _context(root: Path | None) -> Context:
    return quick.capsule_context(root)


def _read_text(value: str | None, what: str) -> str | None:
    """`value`, or stdin for '-' (without the BOM of the file piped in)."""
    if value != "-":
        return value
    if sys.stdin is None or sys.stdin.isatty():
        raise InvalidRequest(f"no {what} given: pipe it on stdin (or pass it as an option)")
    data = sys.stdin.buffer.read()
    try:
        return document.strip_bom(data.decode("utf-8"))[0]
    except UnicodeDecodeError:
        raise InvalidRequest(f"{what} on stdin is not valid UTF-8") from None


def _split_tags(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [tag.strip() for tag in value.split(",") if tag.strip()]


def _out(text: str) -> None:
    """Write text to stdout as is (a capsule's bytes must not gain a newline)."""
    sys.stdout.write(text)
    sys.stdout.flush()


def _warn_problems(result: dict[str, Any]) -> None:
    for line in quick.problem_lines(result):
        note(line)


def register(app: typer.Typer) -> None:
    """Add the capsule commands to the `moss` app."""

    @app.command("store")
    def store_cmd(
        name: Annotated[str | None, typer.Option("--name", "-n", help="Name handle, unique among live capsules of the workspace.", show_default=False)] = None,
        workspace: WorkspaceOpt = "default",
        title: Annotated[str | None, typer.Option("--title", "-t", help="Title (default: the name).", show_default=False)] = None,
        tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags.", show_default=False)] = None,
        source: Annotated[str | None, typer.Option("--source", help="Where it came from (claude-code, codex, ...).", show_default=False)] = None,
        mode: Annotated[str, typer.Option("--mode", "-m", help="On a name collision: 'error' or 'replace' (keeps the id).")] = "error",
        allow_thin: Annotated[bool, typer.Option("--allow-thin", help="Skip the six-section check.")] = False,
        text: Annotated[str | None, typer.Option("--text", help="Capsule text (default: read stdin).", show_default=False)] = None,
        run_id: Annotated[str | None, typer.Option("--run-id", help="Orchestration run id.", show_default=False)] = None,
        phase: Annotated[str | None, typer.Option("--phase", help="Workflow phase.", show_default=False)] = None,
        role: Annotated[str | None, typer.Option("--role", help="Agent role.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Store a capsule read from stdin: `moss store --name auth < capsule.md`."""
        with reporting(as_json):
            body = _read_text("-" if text is None else text, "capsule text")
            result = capsules.store(
                _context(root),
                capsule_text=body,
                workspace=workspace,
                name=name,
                title=title,
                tags=_split_tags(tags),
                source=source,
                mode=mode,
                allow_thin=allow_thin,
                run_id=run_id,
                phase=phase,
                role=role,
            )
        emit(result, as_json, text=result["id"])

    @app.command("fetch")
    def fetch_cmd(
        name: NameArg = None,
        capsule_id: IdOpt = None,
        name_option: NameOpt = None,
        workspace: WorkspaceOpt = "default",
        include_deleted: DeletedOpt = False,
        no_text: Annotated[bool, typer.Option("--no-text", help="Metadata only (a peek without the text).")] = False,
        at: Annotated[str | None, typer.Option("--at", help="The capsule as it was at this git revision.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Print a capsule's text (or, with --json, the whole record)."""
        with reporting(as_json):
            ctx = _context(root)
            if at is not None:
                # Loaded here only: it reads git, which plain fetches never pay for.
                from moss_files.capsules import revision

                result = quick.addressed(
                    functools.partial(revision.fetch_at, ctx, rev=at, include_text=not no_text, include_deleted=include_deleted),
                    name,
                    name_option,
                    capsule_id,
                    workspace,
                )
            else:
                result = quick.addressed(
                    functools.partial(capsules.fetch, ctx, include_text=not no_text, include_deleted=include_deleted), name, name_option, capsule_id, workspace
                )
        quick.show_fetched(result, as_json, no_text)

    @app.command("fetch-many")
    def fetch_many_cmd(
        names: Annotated[list[str] | None, typer.Argument(help="Capsule names (in --workspace).", show_default=False)] = None,
        ids: Annotated[list[str] | None, typer.Option("--id", help="A capsule id (repeatable).", show_default=False)] = None,
        items: Annotated[
            str | None,
            typer.Option(
                "--items", help='JSON list of refs, e.g. \'[{"id": "01..."}, {"workspace": "w", "name": "n"}]\'; "-" reads stdin.', show_default=False
            ),
        ] = None,
        workspace: WorkspaceOpt = "default",
        include_deleted: DeletedOpt = False,
        no_text: Annotated[bool, typer.Option("--no-text", help="Metadata only.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Fetch up to 50 capsules at once; missing ones are reported, the rest returned (exit 3 if any failed)."""
        with reporting(as_json):
            refs = _refs(items, ids, names, workspace)
            result = capsules.fetch_many(_context(root), items=refs, include_text=not no_text, include_deleted=include_deleted)
        if as_json:
            emit(result, True)
        else:
            blocks = []
            for item in result["items"]:
                blocks.append(_row(item) if no_text else f"==> {_row(item)}\n{item.get('capsule_text', '')}")
            emit(result, False, text="\n".join(blocks))
            for error in result["errors"]:
                note(f"error[{error['code']}] {json.dumps(error['ref'], ensure_ascii=False)}: {error['message']}")
        if result["errors"]:
            raise typer.Exit(3)

    @app.command("update")
    def update_cmd(
        name: NameArg = None,
        capsule_id: IdOpt = None,
        name_option: NameOpt = None,
        workspace: WorkspaceOpt = "default",
        text: Annotated[str | None, typer.Option("--text", help="New capsule text; '-' reads stdin.", show_default=False)] = None,
        title: Annotated[str | None, typer.Option("--title", "-t", help="New title ('' clears).", show_default=False)] = None,
        tags: Annotated[str | None, typer.Option("--tags", help="New comma-separated tags ('' clears).", show_default=False)] = None,
        source: Annotated[str | None, typer.Option("--source", help="New source ('' clears).", show_default=False)] = None,
        run_id: Annotated[str | None, typer.Option("--run-id", help="New run id ('' clears).", show_default=False)] = None,
        phase: Annotated[str | None, typer.Option("--phase", help="New phase ('' clears).", show_default=False)] = None,
        role: Annotated[str | None, typer.Option("--role", help="New role ('' clears).", show_default=False)] = None,
        allow_thin: Annotated[bool, typer.Option("--allow-thin", help="Skip the six-section check.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Change a capsule's text or metadata (name and workspace are fixed)."""
        with reporting(as_json):
            body = _read_text(text, "capsule text")
            update = functools.partial(
                capsules.update,
                _context(root),
                capsule_text=body,
                title=title,
                tags=_split_tags(tags),
                source=source,
                run_id=run_id,
                phase=phase,
                role=role,
                allow_thin=allow_thin,
            )
            result = quick.addressed(update, name, name_option, capsule_id, workspace)
        emit(result, as_json, text=result["id"])

    @app.command("append")
    def append_cmd(
        name: NameArg = None,
        section: Annotated[str, typer.Option("--section", "-s", help="Header of the section to add to (exact, any case).", show_default=False)] = "",
        content: Annotated[str, typer.Option("--content", "-c", help="Text to add; '-' reads stdin.", show_default=False)] = "",
        capsule_id: IdOpt = None,
        name_option: NameOpt = None,
        workspace: WorkspaceOpt = "default",
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Add text to one section; a placeholder such as '(none)' is replaced."""
        with reporting(as_json):
            append = functools.partial(capsules.append, _context(root), section=section, content=_read_text(content, "content"))
            result = quick.addressed(append, name, name_option, capsule_id, workspace)
        verb = "replaced placeholder in" if result["replaced"] else "appended to"
        emit(result, as_json, text=f"{verb} {result['section_hit']}")

    @app.command("delete")
    def delete_cmd(
        name: NameArg = None,
        capsule_id: IdOpt = None,
        name_option: NameOpt = None,
        workspace: WorkspaceOpt = "default",
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Soft-delete a capsule (recoverable until purged); its name becomes free."""
        with reporting(as_json):
            result = quick.addressed(functools.partial(capsules.delete, _context(root)), name, name_option, capsule_id, workspace)
        emit(result, as_json, text=f"deleted {result['id']}")

    @app.command("latest")
    def latest_cmd(
        workspace: WorkspaceOpt = "default",
        include_text: Annotated[bool, typer.Option("--include-text", help="Print the text, not just the summary.")] = False,
        include_deleted: DeletedOpt = False,
        run_id: RunIdOpt = None,
        phase: PhaseOpt = None,
        role: RoleOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """The most recently updated capsule of a workspace (exit 3 when there is none)."""
        with reporting(as_json):
            result = capsules.latest(
                _context(root), workspace=workspace, include_text=include_text, include_deleted=include_deleted, run_id=run_id, phase=phase, role=role
            )
        _warn_problems(result)
        item = result["item"]
        if as_json:
            emit(result, True)
        elif item is None:
            report(quick.no_latest_error(workspace, run_id, phase, role))
        elif include_text:
            _out(item["capsule_text"])
        else:
            emit(item, False, text=_row(item))
        if item is None:
            raise typer.Exit(3)

    @app.command("list")
    def list_cmd(
        workspace: WorkspaceOpt = "default",
        limit: Annotated[int, typer.Option("--limit", "-l", help="Page size (max 100).")] = 20,
        offset: Annotated[int, typer.Option("--offset", "-o", help="Items to skip.")] = 0,
        include_deleted: DeletedOpt = False,
        run_id: RunIdOpt = None,
        phase: PhaseOpt = None,
        role: RoleOpt = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """List a workspace's capsules, newest first (never their text)."""
        with reporting(as_json):
            result = capsules.list_capsules(
                _context(root), workspace=workspace, limit=limit, offset=offset, include_deleted=include_deleted, run_id=run_id, phase=phase, role=role
            )
        _warn_problems(result)
        emit(result, as_json, text=_listing(result))

    @app.command("inventory")
    def inventory_cmd(
        workspace: Annotated[str | None, typer.Option("--workspace", "-w", help="Only this workspace.", show_default=False)] = None,
        tag: Annotated[str | None, typer.Option("--tag", help="Only capsules with this tag.", show_default=False)] = None,
        name_prefix: Annotated[str | None, typer.Option("--name-prefix", help="Only names starting with this.", show_default=False)] = None,
        run_id: RunIdOpt = None,
        phase: PhaseOpt = None,
        role: RoleOpt = None,
        include_deleted: DeletedOpt = False,
        limit: Annotated[int, typer.Option("--limit", "-l", help="Page size (max 500).")] = 100,
        offset: Annotated[int, typer.Option("--offset", "-o", help="Items to skip.")] = 0,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """List capsules of every workspace, newest first (never their text)."""
        with reporting(as_json):
            result = capsules.inventory(
                _context(root),
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
        _warn_problems(result)
        emit(result, as_json, text=_listing(result))

    @app.command("capsule-search")
    def capsule_search_cmd(
        query: Annotated[str, typer.Argument(help='Words, "phrases", -exclusions; every word must match (see --any).', show_default=False)],
        workspace: Annotated[str | None, typer.Option("--workspace", "-w", help="Only this workspace.", show_default=False)] = None,
        tag: Annotated[str | None, typer.Option("--tag", help="Only capsules with this tag.", show_default=False)] = None,
        run_id: RunIdOpt = None,
        phase: PhaseOpt = None,
        role: RoleOpt = None,
        include_deleted: DeletedOpt = False,
        any_word: Annotated[bool, typer.Option("--any", help="Match capsules holding any of the words, not all.")] = False,
        limit: Annotated[int, typer.Option("--limit", "-l", help="Page size (max 100).")] = 20,
        offset: Annotated[int, typer.Option("--offset", "-o", help="Matches to skip.")] = 0,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Full-text search over capsules, best first, each with a snippet (Moss's search)."""
        from moss_files.capsules import search

        with reporting(as_json):
            result = search.search(
                _context(root),
                query=query,
                workspace=workspace,
                tag=tag,
                run_id=run_id,
                phase=phase,
                role=role,
                include_deleted=include_deleted,
                limit=limit,
                offset=offset,
                match="any" if any_word else "all",
            )
        lines: list[str] = []
        for item in result["items"]:
            lines.append(_row(item))
            lines.append("    " + _plain_snippet(item["snippet"]))
        page = result["pagination"]
        lines.append(f"({len(result['items'])} of {page['total']}{', more with --offset' if page['has_more'] else ''})")
        emit(result, as_json, text="\n".join(lines))

    @app.command("bulk-update")
    def bulk_update_cmd(
        workspace: Annotated[str | None, typer.Option("--workspace", "-w", help="Filter: this workspace.", show_default=False)] = None,
        tag: Annotated[str | None, typer.Option("--tag", help="Filter: capsules with this tag.", show_default=False)] = None,
        name_prefix: Annotated[str | None, typer.Option("--name-prefix", help="Filter: names starting with this.", show_default=False)] = None,
        run_id: Annotated[str | None, typer.Option("--run-id", help="Filter: this orchestration run.", show_default=False)] = None,
        phase: Annotated[str | None, typer.Option("--phase", help="Filter: this phase.", show_default=False)] = None,
        role: Annotated[str | None, typer.Option("--role", help="Filter: this role.", show_default=False)] = None,
        set_phase: Annotated[str | None, typer.Option("--set-phase", help="New phase ('' clears).", show_default=False)] = None,
        set_role: Annotated[str | None, typer.Option("--set-role", help="New role ('' clears).", show_default=False)] = None,
        set_tags: Annotated[
            str | None, typer.Option("--set-tags", help="New tags, comma-separated, replacing the old ('' clears).", show_default=False)
        ] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change; write nothing.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Set phase, role or tags on every live capsule the filters match, all or nothing."""
        from moss_files.capsules import bulk

        with reporting(as_json):
            result = bulk.bulk_update(
                _context(root),
                workspace=workspace,
                tag=tag,
                name_prefix=name_prefix,
                run_id=run_id,
                phase=phase,
                role=role,
                set_phase=set_phase,
                set_role=set_role,
                set_tags=_split_tags(set_tags),
                dry_run=dry_run,
            )
        emit(result, as_json, text=_bulk_lines(result))

    @app.command("bulk-delete")
    def bulk_delete_cmd(
        workspace: Annotated[str | None, typer.Option("--workspace", "-w", help="Filter: this workspace.", show_default=False)] = None,
        tag: Annotated[str | None, typer.Option("--tag", help="Filter: capsules with this tag.", show_default=False)] = None,
        name_prefix: Annotated[str | None, typer.Option("--name-prefix", help="Filter: names starting with this.", show_default=False)] = None,
        run_id: Annotated[str | None, typer.Option("--run-id", help="Filter: this orchestration run.", show_default=False)] = None,
        phase: Annotated[str | None, typer.Option("--phase", help="Filter: this phase.", show_default=False)] = None,
        role: Annotated[str | None, typer.Option("--role", help="Filter: this role.", show_default=False)] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be deleted; write nothing.")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Soft-delete every live capsule the filters match, all or nothing."""
        from moss_files.capsules import bulk

        with reporting(as_json):
            result = bulk.bulk_delete(
                _context(root), workspace=workspace, tag=tag, name_prefix=name_prefix, run_id=run_id, phase=phase, role=role, dry_run=dry_run
            )
        emit(result, as_json, text=_bulk_lines(result))

    @app.command("compose")
    def compose_cmd(
        names: Annotated[list[str] | None, typer.Argument(help="Capsule names (in --workspace), in bundle order.", show_default=False)] = None,
        ids: Annotated[list[str] | None, typer.Option("--id", help="A capsule id (repeatable).", show_default=False)] = None,
        items: Annotated[str | None, typer.Option("--items", help="JSON list of refs; '-' reads stdin.", show_default=False)] = None,
        workspace: WorkspaceOpt = "default",
        bundle_format: Annotated[str, typer.Option("--format", help="'markdown' or 'json'.")] = "markdown",
        sections: Annotated[str | None, typer.Option("--sections", help="Comma-separated sections to keep, in order.", show_default=False)] = None,
        store_as: Annotated[str | None, typer.Option("--store-as", help="Also store the bundle under this name.", show_default=False)] = None,
        store_workspace: Annotated[
            str | None, typer.Option("--store-workspace", help="Workspace for --store-as (default: 'default').", show_default=False)
        ] = None,
        store_mode: Annotated[str, typer.Option("--store-mode", help="'error' or 'replace' for --store-as.")] = "error",
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Assemble several capsules into one bundle, all or nothing."""
        with reporting(as_json):
            refs = _refs(items, ids, names, workspace)
            target = {"name": store_as, "workspace": store_workspace, "mode": store_mode} if store_as else None
            result = capsules.compose(_context(root), items=refs, format=bundle_format, sections=_split_tags(sections), store_as=target)
        if as_json:
            emit(result, True)
        else:
            _out(result["bundle_text"] + ("\n" if not result["bundle_text"].endswith("\n") else ""))
            if "stored" in result:
                note(f"stored as {result['stored']['id']}")

    @app.command("export")
    def export_cmd(
        path: Annotated[
            str | None,
            typer.Option(
                "--path",
                "-p",
                help="Target .jsonl file (default: ~/.moss/exports/<workspace>-<time>.jsonl); with --format loopflow, the folder that receives .loop-flow/.",
                show_default=False,
            ),
        ] = None,
        workspace: Annotated[str | None, typer.Option("--workspace", "-w", help="Only this workspace.", show_default=False)] = None,
        include_deleted: DeletedOpt = False,
        export_format: Annotated[
            str, typer.Option("--format", help="moss (capsules as Moss's JSONL) or loopflow (insights, tasks, sessions as LoopFlow's files).")
        ] = "moss",
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Export capsules to a Moss-compatible JSONL file (mode 0600), or LoopFlow's items to its own files."""
        if export_format == "loopflow":
            from moss_files.loopflow import export as loopflow_export

            with reporting(as_json):
                if workspace is not None or include_deleted:
                    raise InvalidRequest("--workspace and --include-deleted are options of the capsule export", details={"field": "format"})
                result = loopflow_export.export_loopflow(_context(root), path=path)
            emit(result, as_json, text=result["message"])
            if not as_json:
                for left in result["not_exported"]:
                    note(f"not exported: {left['count']} {left['kind']}: {left['reason']}")
            return
        with reporting(as_json):
            if export_format != "moss":
                raise InvalidRequest(f"--format must be moss or loopflow, not {export_format!r}", details={"field": "format"})
            from moss_files.capsules import transfer

            result = transfer.export(_context(root), path=path, workspace=workspace, include_deleted=include_deleted)
        emit(result, as_json, text=f"exported {result['count']} capsule(s) to {result['path']}")

    @app.command("import")
    def import_cmd(
        path: Annotated[str, typer.Option("--path", "-p", help="The .jsonl export to read.", show_default=False)] = "",
        mode: Annotated[str, typer.Option("--mode", "-m", help="On collisions: 'error', 'replace' or 'rename'.")] = "error",
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Import a JSONL export, all or nothing (exit 4 for bad lines, 5 for collisions)."""
        with reporting(as_json):
            from moss_files.capsules import transfer

            result = transfer.import_capsules(_context(root), path=path, mode=mode)
        lines = [f"imported {result['imported']} capsule(s)"] if not result["errors"] else []
        emit(result, as_json, text="\n".join(lines))
        if result["errors"]:
            for error in result["errors"]:
                note(f"error[{error['code']}] line {error['line']}: {error['message']}")
            collisions = any(error["code"].endswith("COLLISION") for error in result["errors"])
            raise typer.Exit(5 if collisions else 4)

    @app.command("purge")
    def purge_cmd(
        workspace: Annotated[str | None, typer.Option("--workspace", "-w", help="Only this workspace.", show_default=False)] = None,
        older_than: Annotated[
            str | None, typer.Option("--older-than", help="Only capsules deleted more than this long ago: days, e.g. '7d' or '7'.", show_default=False)
        ] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", "-n", help="List what would be purged; delete nothing.")] = False,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first (needed when no terminal is attached).")] = False,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Permanently remove soft-deleted capsules; asks first at a terminal (--yes otherwise), --dry-run lists them."""
        with reporting(as_json):
            ctx, days = _context(root), _days(older_than)
            if yes and not dry_run:
                result = capsules.purge(ctx, workspace=workspace, older_than_days=days)
            else:
                result = capsules.purge(ctx, workspace=workspace, older_than_days=days, dry_run=True)
                if not dry_run and result["items"]:
                    count = len(result["items"])
                    question = f"Delete {'this capsule' if count == 1 else f'these {count} capsules'} for good?"
                    if confirm(question, yes=False, shown=[f"  {_purge_line(item)}" for item in result["items"]]):
                        ids = [item["id"] for item in result["items"]]
                        result = capsules.purge(ctx, workspace=workspace, older_than_days=days, only_ids=ids)
                    else:
                        result = {**result, "purged": 0, "message": "Purged nothing (not confirmed)", "dry_run": False, "items": []}
        _warn_problems(result)
        lines = [_purge_line(item) for item in result["items"]] if result["dry_run"] else []
        emit(result, as_json, text="\n".join([*lines, result["message"]]))

    @app.command("history")
    def history_cmd(
        name: NameArg = None,
        capsule_id: IdOpt = None,
        name_option: NameOpt = None,
        workspace: WorkspaceOpt = "default",
        limit: Annotated[int | None, typer.Option("--limit", "-l", help="At most this many versions.", show_default=False)] = None,
        root: RootOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """List the committed versions of a capsule from git (see `moss fetch --at <commit>`)."""
        with reporting(as_json):
            # Loaded here only: history reads git (GitPython), which no other command needs.
            from moss_files.capsules import history

            result = quick.addressed(functools.partial(history.history, _context(root), limit=limit), name, name_option, capsule_id, workspace)
        emit(result, as_json, text=quick.history_text(result))


def _purge_line(item: dict[str, Any]) -> str:
    """One soft-deleted capsule as `moss purge` lists it: id, workspace/name, when deleted."""
    where = f"{item['workspace']}/{item['name']}" if "name" in item else item["workspace"]
    return f"{item['id']}  {where}  deleted {ms_to_rfc3339(item['deleted_at'] * 1000)}"


def _refs(items: str | None, ids: list[str] | None, names: list[str] | None, workspace: str) -> list[Any]:
    refs: list[Any] = []
    if items is not None:
        raw = _read_text(items, "items")
        try:
            parsed = structured.loads_json(raw or "")
        except (ValueError, MossError) as exc:  # MossError: JSON_TOO_DEEP
            raise InvalidRequest(f"--items is not valid JSON: {exc}") from None
        if not isinstance(parsed, list):
            raise InvalidRequest("--items must be a JSON list")
        refs.extend(parsed)
    refs.extend({"id": capsule_id} for capsule_id in ids or [])
    refs.extend({"workspace": workspace, "name": name} for name in names or [])
    return refs


def _plain_snippet(snippet: str) -> str:
    """A search snippet for a terminal: the <b> marks as *, the HTML escapes undone."""
    import html

    return html.unescape(snippet.replace("<b>", "*").replace("</b>", "*"))


def _bulk_lines(result: dict[str, Any]) -> str:
    handles = [f"  {item['workspace']}/{item.get('name') or '@' + item['id']}" for item in result["items"]]
    return "\n".join([result["message"], *handles])


def _days(text: str | None) -> int | None:
    if text is None:
        return None
    value = text.strip().lower().removesuffix("d")
    try:
        return int(value)
    except ValueError:
        raise InvalidRequest(f"--older-than takes days, such as 7d; got {text!r}") from None

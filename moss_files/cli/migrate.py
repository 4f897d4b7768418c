"""`moss migrate moss|moe|loopflow|backlog|beads|cortical|needlecast`: bring an existing workspace over.

Entry layer: parse options, call `migrate.service`, render. Without --json, stdout carries the
report (one line per source item: created, changed or skipped and why; then the totals), and
progress of large sources goes to stderr. Exit statuses: 0 done (or, with --dry-run, nothing
stood in the way), 2 bad arguments, 3 no such source, 4 a source file that is not its format
(SOURCE_INVALID, with file and line or JSON path) or a workspace file with merge conflicts
(MERGE_CONFLICT), 5 a collision with the workspace's files (ALREADY_EXISTS,
NAME_ALREADY_EXISTS, STALE_WRITE), 6 no workspace, or --move refused (MOVE_REFUSED).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from moss_files.cli.support import JsonOpt, RootOnlyOpt, emit, new_app, note, reporting
from moss_files.foundation import workspace
from moss_files.foundation.context import Context

DryRunOpt = Annotated[bool, typer.Option("--dry-run", "-n", help="Print what would be created, changed and skipped; write nothing.")]
FromOpt = Annotated[str | None, typer.Option("--from", help="Where the source is (default: its usual place in the workspace).", show_default=False)]
ProjectOpt = Annotated[
    str | None,
    typer.Option("--project", help="A name for the source, when several of one system come into this workspace (kept in imported_from).", show_default=False),
]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="Fail (MIGRATION_WOULD_DROP, exit 4, nothing written) if the run would skip an item or drop a field.")
]
DeletedOpt = Annotated[bool, typer.Option("--include-deleted", help="Bring deleted items too (Moss soft-deleted capsules, Beads tombstones).")]
PROGRESS_EVERY_SECONDS = 0.5


def _context(root: Path | None) -> Context:
    top = workspace.find_workspace(explicit=root)
    return Context(top, notify=note, progress=_progress_printer())


def _progress_printer() -> Any:
    """A `progress(done, total)` that reports on stderr at most twice a second."""
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if total < 500 or (done < total and now - last[0] < PROGRESS_EVERY_SECONDS):
            return
        last[0] = now
        note(f"migrate: {done}/{total}")

    return show


def _emit(result: dict[str, Any], as_json: bool) -> None:
    from moss_files.migrate.model import CHANGE, CREATE, SKIP

    if as_json:
        emit(result, True)
        return
    verbs = {CREATE: "would create" if result["dry_run"] else "created", CHANGE: "would change" if result["dry_run"] else "changed", SKIP: "skipped"}
    lines = []
    for item in result["items"]:
        line = f"{verbs[item['action']]:<12} {item['kind']:<9} {item['old_id']}  ({item['from']})"
        if item.get("path"):
            line += f" -> {item['path']}"
        if item.get("reason"):
            line += f"  [{item['reason']}]"
        lines.append(line)
    for check in result["checks"]:
        state = "ok" if check["ok"] else f"{check['code']} at line {check.get('line')}: {check['message']}"
        lines.append(f"{'checked':<12} {check['path']}  {state}" + (f" (warnings: {'; '.join(check['warnings'])})" if check.get("warnings") else ""))
    for path in result["files"]["removed"]:
        lines.append(f"{'would remove' if result['dry_run'] else 'removed':<12} {path}")
    for text in result["notes"]:
        lines.append(f"note: {text}")
    lines.extend(_ledger_lines(result["ledger"]))
    verb = "would be" if result["dry_run"] else "were"
    version = f" ({result['version']})" if result.get("version") else ""
    lines.append(
        f"{result['source']} from {result['from']}{version}: {result['created']} {verb} created, {result['changed']} {verb} changed, {result['skipped']} skipped"
    )
    if result.get("report"):
        lines.append(f"report: {result['report']}")
    elif not result["dry_run"] and not result["created"] and not result["changed"]:
        lines.append("nothing to do: everything is imported already (no report written)")
    emit(result, False, text="\n".join(lines))


def _ledger_lines(ledger: dict[str, Any]) -> list[str]:
    """The ledger as a table: items in = out + skipped, then each field's fates and homes."""
    items = ledger["items"]
    lines = [
        f"ledger: {items['in']} in = {items['out']} out + {items['skipped']} skipped ({len(items['lost'])} with a loss)"
        + (f"; {items['added']} made here to hold the others" if items["added"] else "")
    ]
    lines += [f"  lost: {lost['kind']} {lost['old_id']} ({lost['from']}): {lost['reason']}" for lost in items["lost"]]
    fields = ledger.get("fields")
    if fields is None:
        return [*lines, "  fields: not accounted by this source's reader"]
    if fields:
        width = max(len(name) for name in fields)
        lines.append(f"  {'field':<{width}}  mapped    kept dropped changed  home or reason")
        for name, entry in fields.items():
            where = ", ".join(entry["homes"]) or "; ".join(entry["reasons"])
            lines.append(f"  {name:<{width}}  {entry['mapped']:>6} {entry['kept']:>7} {entry['dropped']:>7} {entry['changed']:>7}  {where}")
    return lines


def register(app: typer.Typer) -> None:
    """Add `moss migrate` and its sources to the `moss` app."""
    migrate_app = new_app(
        "Bring work kept in older systems over: Moss, Moe, LoopFlow, Backlog.md, Beads, cortical-stack, needlecast v1/v2. "
        "Sources are only read; --dry-run writes nothing; a run writes a report under .moss/migrations/."
    )
    app.add_typer(migrate_app, name="migrate")

    @migrate_app.command("moss")
    def migrate_moss(
        db: Annotated[str | None, typer.Option("--db", help="Moss's SQLite store (default ~/.moss/moss.db), opened read-only.", show_default=False)] = None,
        jsonl: Annotated[str | None, typer.Option("--jsonl", help="A Moss JSONL export instead of the store.", show_default=False)] = None,
        ws: Annotated[str | None, typer.Option("--workspace", "-w", help="Only this Moss workspace (default: all).", show_default=False)] = None,
        include_deleted: DeletedOpt = False,
        rename: Annotated[bool, typer.Option("--rename", help="Import a capsule whose name is taken as name-1, name-2, … (else the run stops).")] = False,
        dry_run: DryRunOpt = False,
        root: RootOnlyOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Moss capsules, from ~/.moss/moss.db (read-only) or a JSONL export; ids are kept."""
        from moss_files.migrate import service

        with reporting(as_json):
            result = service.migrate_moss(_context(root), db=db, jsonl=jsonl, workspace=ws, include_deleted=include_deleted, rename=rename, dry_run=dry_run)
        _emit(result, as_json)

    @migrate_app.command("moe")
    def migrate_moe(
        source: FromOpt = None,
        project: ProjectOpt = None,
        strict: StrictOpt = False,
        dry_run: DryRunOpt = False,
        root: RootOnlyOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Moe's .moe/ folder: project, epics, tasks, comments, workers, teams, proposals, chat, activity log."""
        from moss_files.migrate import service

        with reporting(as_json):
            result = service.migrate_moe(_context(root), path=source, project=project, strict=strict, dry_run=dry_run)
        _emit(result, as_json)

    @migrate_app.command("loopflow")
    def migrate_loopflow(
        source: FromOpt = None,
        tasks: Annotated[
            str, typer.Option("--tasks", help="Where LoopFlow's tasks go: board (tasks with their descriptions) or plan (PLAN.md lines).")
        ] = "board",
        project: ProjectOpt = None,
        strict: StrictOpt = False,
        dry_run: DryRunOpt = False,
        root: RootOnlyOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """LoopFlow's insights, sessions, tasks, repository summary and feedback, from its database, JSON files or progress.txt."""
        from moss_files.migrate import service

        with reporting(as_json):
            result = service.migrate_loopflow(_context(root), path=source, tasks_to=tasks, project=project, strict=strict, dry_run=dry_run)
        _emit(result, as_json)

    @migrate_app.command("backlog")
    def migrate_backlog(
        source: FromOpt = None,
        project: ProjectOpt = None,
        strict: StrictOpt = False,
        dry_run: DryRunOpt = False,
        root: RootOnlyOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Backlog.md's backlog/ (tasks, drafts, completed, archive, milestones) as board tasks and epics."""
        from moss_files.migrate import service

        with reporting(as_json):
            result = service.migrate_backlog(_context(root), path=source, project=project, strict=strict, dry_run=dry_run)
        _emit(result, as_json)

    @migrate_app.command("beads")
    def migrate_beads(
        source: FromOpt = None,
        project: ProjectOpt = None,
        include_deleted: DeletedOpt = False,
        strict: StrictOpt = False,
        dry_run: DryRunOpt = False,
        root: RootOnlyOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Beads' .beads/issues.jsonl as board epics, tasks and comments."""
        from moss_files.migrate import service

        with reporting(as_json):
            result = service.migrate_beads(_context(root), path=source, project=project, include_deleted=include_deleted, strict=strict, dry_run=dry_run)
        _emit(result, as_json)

    @migrate_app.command("cortical")
    def migrate_cortical(
        source: FromOpt = None,
        move: Annotated[bool, typer.Option("--move", help="Remove INBOX.md and OUTBOX.md once migrated (only when committed in git).")] = False,
        dry_run: DryRunOpt = False,
        root: RootOnlyOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Cortical-stack's .cstack/INBOX.md and OUTBOX.md into needlecast; checks CURRENT, PLAN, MEMORY."""
        from moss_files.migrate import service

        with reporting(as_json):
            result = service.migrate_cortical(_context(root), path=source, move=move, dry_run=dry_run)
        _emit(result, as_json)

    @migrate_app.command("needlecast")
    def migrate_needlecast(
        layout: Annotated[str, typer.Option("--to", help="The layout to switch to: v1 (a file per mailbox) or v2 (a file per message).")],
        source: Annotated[str | None, typer.Option("--from", help="The sleeve's folder (default: the workspace).", show_default=False)] = None,
        dry_run: DryRunOpt = False,
        root: RootOnlyOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Switch a sleeve's mailbox between layout v1 and v2, losing nothing (commit it first)."""
        from moss_files.migrate import service

        with reporting(as_json):
            result = service.migrate_needlecast(_context(root), layout=layout, path=source, dry_run=dry_run)
        _emit(result, as_json)

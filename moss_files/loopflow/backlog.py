"""LoopFlow's task tools over PLAN.md: `loop_task_create`, `loop_task_update`, `loop_task_list`
(`moss backlog add|update|list`).

Shell layer. LoopFlow's backlog is the workspace's PLAN.md (see `tasks` for the mapping): a
task is created with cstack's `add_task` and changes status with cstack's `transition` (both
through the `cstack` package's public names), so it moves between PLAN.md's sections exactly as
`cstack done` moves it; the fields cstack has no command for (title, priority, dependencies,
test file, and the detail lines with description, acceptance criteria and notes) are edited
here, in one guarded read-modify-write of PLAN.md under the same per-file lock cstack takes.
Every edit is checked by reading the new text back with `cstack.parse_plan` before it is
written. One call may make several such writes (fields, then each transition); each is atomic,
and the order keeps the task whole if a call stops between two.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moss_files.foundation import document, fs
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, NotFound
from moss_files.loopflow import tasks as core
from moss_files.loopflow.tasks import Details

__all__ = ["Context", "create_task", "list_tasks", "update_task"]

PLAN_PATH = ".cstack/PLAN.md"
LIST_DEFAULT_LIMIT = 20
DEFAULT_REASONS = {"block": "set BLOCKED (loop_task_update)", "close": "set CANCELLED (loop_task_update)"}


def _plan_file(ctx: Context) -> Path:
    return Path(ctx.root) / PLAN_PATH


def _read(ctx: Context) -> Any:
    import cstack

    return cstack.read_plan(ctx.root)


def _find(plan: Any, task_id: str) -> Any:
    """The task whose `id:` is `task_id` (exact, else ignoring case). Raises NotFound."""
    wanted = task_id.strip()
    exact = [task for task in plan.tasks if task.id == wanted]
    loose = [task for task in plan.tasks if task.id and task.id.casefold() == wanted.casefold()]
    found = exact or loose
    if not found:
        raise NotFound(f"no task {task_id!r} in {PLAN_PATH}", details={"id": task_id}, hint="loop_task_list (or `cstack plan`) lists the tasks")
    return found[0]


def _details(plan: Any, task: Any) -> Details:
    lines = plan.text.splitlines(keepends=True)
    start, end = core.detail_range(lines, task.line, {t.line for t in plan.tasks})
    return core.parse_details(lines[start:end])


def _record(plan: Any, task: Any) -> dict[str, Any]:
    return core.task_to_dict(task, _details(plan, task), path=PLAN_PATH)


def _edit(ctx: Context, task_id: str, line_changes: dict[str, Any], details: Details | None, today: str) -> bool:
    """Rewrite one task's line and (when `details` is given) its detail lines, in one guarded
    write of PLAN.md; True when the file changed. Raises InvalidRequest when the result would
    not read back as intended (nothing is written)."""
    import cstack

    path = _plan_file(ctx)
    changed: list[bool] = [False]

    def step(snapshot: fs.Snapshot) -> bytes | None:
        if snapshot.data is None:
            raise NotFound(f"no {PLAN_PATH}", path=PLAN_PATH)
        text, bom = document.decode(snapshot.data, PLAN_PATH)
        plan = cstack.parse_plan(text, PLAN_PATH)
        task = _find(plan, task_id)
        lines = text.splitlines(keepends=True)
        ending = lines[task.line - 1][len(lines[task.line - 1].rstrip("\r\n")) :] or "\n"
        start, end = core.detail_range(lines, task.line, {t.line for t in plan.tasks})
        new_line = core.edit_line(task, **line_changes, modified=today)
        new_details = lines[start:end]
        if details is not None:
            indent = lines[task.line - 1][: len(lines[task.line - 1]) - len(lines[task.line - 1].lstrip())] + core.DETAIL_INDENT
            new_details = [item + ending for item in core.render_details(details, indent)]
        if new_line == task.text and new_details == lines[start:end]:
            return None
        if not lines[-1].endswith(("\n", "\r")) and end == len(lines):
            lines[-1] += ending
        new_text = "".join([*lines[: task.line - 1], new_line + ending, *new_details, *lines[end:]])
        _check(cstack.parse_plan(new_text, PLAN_PATH), task_id, line_changes, details)
        changed[0] = True
        return document.encode(new_text, bom)

    fs.modify(path, step, kind="plan", relpath=PLAN_PATH)  # an older PLAN.md is written at the current version
    return changed[0]


def _check(plan: Any, task_id: str, line_changes: dict[str, Any], details: Details | None) -> None:
    """Refuse an edit that PLAN.md would read differently (a title that looks like labels or an
    id group, say)."""
    try:
        task = _find(plan, task_id)
    except NotFound:
        raise InvalidRequest("the edit would hide the task's id from PLAN.md", details={"id": task_id}, hint="avoid '(id: ...)' in titles") from None
    title = line_changes.get("title")
    if title is not None and task.title != title:
        raise InvalidRequest(
            f"the title would read back as {task.title!r} in PLAN.md",
            details={"field": "title", "title": title},
            hint="avoid ' #word' and '(id: ...)' in titles",
        )
    depends = line_changes.get("depends")
    if depends is not None and list(task.depends) != list(depends):
        raise InvalidRequest("the dependencies would not read back as given", details={"field": "depends_on"})
    if details is not None:
        got = _details(plan, task)
        if got.acceptance != details.acceptance:
            raise InvalidRequest("the acceptance criteria would not read back as given", details={"field": "acceptance_criteria"})


def _title_reads_back(name: str, task_id: str) -> str:
    """`name`, when PLAN.md reads it back as the same title of the same task. Raises
    InvalidRequest for a title that would read as labels (` #word`) or an id group."""
    import cstack

    probe = cstack.parse_plan(f"- [ ] P2: {name} (id: {task_id})\n")
    if not probe.tasks or probe.tasks[0].title != name or probe.tasks[0].id != task_id:
        read = probe.tasks[0].title if probe.tasks else ""
        raise InvalidRequest(
            f"the title would read back as {read!r} in PLAN.md", details={"field": "title", "title": name}, hint="avoid ' #word' and '(id: ...)' in titles"
        )
    return name


def _transition(ctx: Context, task_id: str, current: str, wanted: str, reason: str | None) -> None:
    import cstack

    for action in core.transitions(current, wanted):
        cstack.transition(ctx, action=action, task=task_id, reason=(reason or DEFAULT_REASONS.get(action)) if action in ("block", "close", "done") else None)


def _dependencies(plan: Any, task_id: str, depends: Sequence[str] | None) -> list[str] | None:
    if depends is None:
        return None
    wanted = [item.strip() for item in depends if item.strip()]
    if any(item.casefold() == task_id.casefold() for item in wanted):
        raise InvalidRequest("a task cannot depend on itself", details={"field": "depends_on"})
    known = {task.id.casefold(): task.id for task in plan.tasks if task.id}
    missing = [item for item in wanted if item.casefold() not in known]
    if missing:
        raise NotFound(f"no task has the id {', '.join(map(repr, missing))}", details={"missing": missing}, hint="dependencies are named by a task's id")
    return list(dict.fromkeys(known[item.casefold()] for item in wanted))


def create_task(
    ctx: Context,
    *,
    id: str | None,
    title: str | None,
    description: str | None = None,
    priority: str | None = None,
    status: str | None = None,
    depends_on: Sequence[str] | None = None,
    acceptance_criteria: Sequence[str] | None = None,
    notes: str | None = None,
    test_file: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Add a task to PLAN.md's Tasks section (`loop_task_create`), with LoopFlow's caller-given id.

    Returns `{created: true, task, message}`. Raises InvalidRequest (bad id, title, priority or
    status), Conflict ALREADY_EXISTS (the id is taken), NotFound (no `.cstack/`, or an unknown
    dependency).
    """
    import cstack

    task_id = core.check_id(id)
    name = core.check_title(title)
    rank = core.check_priority(priority) if priority is not None else "medium"
    wanted = core.check_status(status) if status is not None else "TODO"
    criteria = core.check_lines(acceptance_criteria, "acceptance_criteria") or ()
    test = " ".join((test_file or "").split())
    if "|" in test:
        raise InvalidRequest("test_file cannot hold '|'", details={"field": "test_file"})
    _title_reads_back(name, task_id)
    spec = f"{core.PRIORITY_MARK[rank]}: {name}" + (f" | {core.TEST_KEY}: {test}" if test else "")
    cstack.add_task(ctx, task=spec, ident=task_id, depends=list(depends_on or ()))
    details = Details(description if description and description.strip() else None, criteria, notes if notes and notes.strip() else None)
    if details != Details():
        _edit(ctx, task_id, {}, details, ctx.today())
    if wanted != "TODO":
        _transition(ctx, task_id, "TODO", wanted, reason)
    plan = _read(ctx)
    return {"created": True, "task": _record(plan, _find(plan, task_id)), "message": f"Task {task_id} created"}


def update_task(
    ctx: Context,
    *,
    id: str | None,
    status: str | None = None,
    priority: str | None = None,
    title: str | None = None,
    description: str | None = None,
    notes: str | None = None,
    depends_on: Sequence[str] | None = None,
    acceptance_criteria: Sequence[str] | None = None,
    test_file: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Change a PLAN.md task by its id (`loop_task_update`): status (any to any, through
    cstack's transitions; `reason` goes with BLOCKED, CANCELLED and DONE), priority, title,
    description, notes, dependencies, acceptance criteria, test file ('' clears a text).

    Returns `{updated: true, task, changes: [fields], message}`. Raises NotFound (task or
    dependency), InvalidRequest (bad value, no change given), Conflict STALE_WRITE.
    """
    task_id = core.check_id(id)
    fields: dict[str, object] = {"status": status, "priority": priority, "title": title, "description": description, "notes": notes}
    fields.update(depends_on=depends_on, acceptance_criteria=acceptance_criteria, test_file=test_file)
    given = [name for name, value in fields.items() if value is not None]
    if not given:
        raise InvalidRequest(
            "no changes specified: give status, priority, title, description, notes, depends_on, acceptance_criteria or test_file",
            details={"fields": list(fields)},
        )
    wanted = core.check_status(status) if status is not None else None
    plan = _read(ctx)
    task = _find(plan, task_id)
    task_id = task.id
    line_changes: dict[str, Any] = {}
    if title is not None:
        line_changes["title"] = _title_reads_back(core.check_title(title), task_id)
    if priority is not None:
        line_changes["priority"] = core.check_priority(priority)
    dependencies = _dependencies(plan, task_id, depends_on)
    if dependencies is not None:
        line_changes["depends"] = dependencies
    if test_file is not None:
        test = " ".join(test_file.split())
        if "|" in test:
            raise InvalidRequest("test_file cannot hold '|'", details={"field": "test_file"})
        line_changes["test_file"] = test
    details: Details | None = None
    if description is not None or notes is not None or acceptance_criteria is not None:
        old = _details(plan, task)
        details = Details(
            (description.strip() or None) if description is not None else old.description,
            core.check_lines(acceptance_criteria, "acceptance_criteria") if acceptance_criteria is not None else old.acceptance,  # type: ignore[arg-type]
            (notes.strip() or None) if notes is not None else old.notes,
        )
    if line_changes or details is not None:
        _edit(ctx, task_id, line_changes, details, ctx.today())
    if wanted is not None:
        _transition(ctx, task_id, core.FROM_PLAN.get(task.status, "TODO"), wanted, reason)
    after = _read(ctx)
    return {"updated": True, "task": _record(after, _find(after, task_id)), "changes": given, "message": f"Task {task_id} updated"}


def list_tasks(
    ctx: Context,
    *,
    statuses: Sequence[str] | None = None,
    priorities: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
    limit: int = LIST_DEFAULT_LIMIT,
) -> dict[str, Any]:
    """PLAN.md's tasks with ids, in file order (`loop_task_list`): `{tasks: [{id, title, status,
    priority, depends_on}], count, total, truncated}`; with `ids`, those tasks' full records
    (description, acceptance criteria, notes, ...) and `not_found`.
    """
    if limit < 1 or limit > 10_000:
        raise InvalidRequest("limit must be between 1 and 10000", details={"limit": limit})
    plan = _read(ctx)
    if ids:
        found: list[dict[str, Any]] = []
        missing: list[str] = []
        for wanted in ids:
            try:
                found.append(_record(plan, _find(plan, wanted)))
            except NotFound:
                missing.append(wanted)
        return {"tasks": found, "count": len(found), "total": len(found), "truncated": False, "not_found": missing}
    wanted_status = {core.check_status(item) for item in statuses or ()}
    wanted_rank = {core.check_priority(item) for item in priorities or ()}
    chosen = [
        task
        for task in plan.tasks
        if task.id
        and (not wanted_status or core.FROM_PLAN.get(task.status) in wanted_status)
        and (not wanted_rank or core.priority_of(task.priority) in wanted_rank)
    ]
    page = chosen[:limit]
    return {"tasks": [core.task_brief(task) for task in page], "count": len(page), "total": len(chosen), "truncated": len(chosen) > len(page)}

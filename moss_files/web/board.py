"""The board's pages: columns by status, a task with its plan, rails and activity, and the human
steps of the workflow (approve or reject a plan, QA approve or reject).

Shell layer: every page is gathered through the board's public use cases (`queries`, `plans`,
`claims`), the same calls `moss task|board … --json` and the `moe.*` tools make, and rendered
with the pure helpers of `moss_files.web.html`. The buttons call `plans.approve_plan`,
`plans.reject_plan`, `claims.qa_approve` and `claims.qa_reject` with the web view's context
(a person: actor HUMAN, no worker), exactly as `moss task approve|reject-plan|qa-approve|qa-reject`
does, so a click changes the task file as the command would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from moss_files.board import claims, plans, queries
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest
from moss_files.web.html import (
    Html,
    Page,
    badge,
    button,
    definition_list,
    empty,
    error_notice,
    esc,
    join,
    link,
    notice,
    post_form,
    problem_list,
    section,
    table,
    task_link,
    text_area,
    url,
    when,
)
from moss_files.web.markdown import render_inline, render_markdown

# The columns of the board, in the order work flows; ARCHIVED is shown on request.
COLUMNS = ("BACKLOG", "PLANNING", "AWAITING_APPROVAL", "WORKING", "REVIEW", "DONE")
ALL_STATUSES = (*COLUMNS, "ARCHIVED")
COLUMN_TITLES = {
    "BACKLOG": "Backlog",
    "PLANNING": "Planning",
    "AWAITING_APPROVAL": "Awaiting approval",
    "WORKING": "Working",
    "REVIEW": "Review",
    "DONE": "Done",
    "ARCHIVED": "Archived",
}
DEFAULT_CARDS = 100  # per column; `?limit=` shows up to MAX_CARDS
MAX_CARDS = queries.MAX_SEARCH_LIMIT
ACTIVITY_SHOWN = 100
LIVE = ("board",)
# What each button does: the use case, and the banner shown after it.
ACTIONS = {
    "approve": "Plan approved: the task is WORKING and can be claimed.",
    "reject-plan": "Plan rejected: the task is back in PLANNING with your reason.",
    "qa-approve": "QA approved: the task is DONE.",
    "qa-reject": "QA rejected: the task goes back for more work.",
}


def card_limit(value: str | None) -> int:
    """The cards per column a `?limit=` asks for (DEFAULT_CARDS when absent). Raises InvalidRequest."""
    if value is None or value == "":
        return DEFAULT_CARDS
    if not value.isdigit() or not 1 <= int(value) <= MAX_CARDS:
        raise InvalidRequest(f"limit must be a whole number from 1 to {MAX_CARDS}", details={"limit": value})
    return int(value)


# --------------------------------------------------------------------------- the board


def board_page(ctx: Context, *, epic: str | None = None, status: str | None = None, limit: int = DEFAULT_CARDS) -> Page:
    """The board: one column per status (or only `status`), each with its first `limit` cards
    in queue order (priority, then order), for every epic or one."""
    if status is not None and status not in ALL_STATUSES:
        raise InvalidRequest(f"status must be one of {', '.join(ALL_STATUSES)}", details={"status": status})
    overview = queries.board_status(ctx)
    epics = queries.list_epics(ctx)
    chosen = next((row for row in epics["epics"] if row["id"] == epic), None) if epic else None
    if epic and chosen is None:
        queries.show_epic(ctx, epic_id=epic)  # raises the epic's own error: not found, or unreadable
    counts: Mapping[str, int] = (chosen or overview)["counts"]["byStatus"]
    shown = (status,) if status else COLUMNS
    columns = []
    for column in shown:
        total = counts.get(column, 0)
        cards = queries.search_tasks(ctx, status=column, epic_id=epic, limit=limit)["tasks"] if total else []
        columns.append(render_column(column, cards, total, epic=epic, limit=limit))
    title = overview["project"].get("name") or "Board"
    body = join(
        [
            Html(f'<div class="page-head"><h1>{esc(title)}</h1>{render_epic_filter(epics["epics"], epic, status)}</div>'),
            problem_list(overview.get("problems", [])),
            render_counts(counts, epic=epic),
            Html(f'<div class="board{" single" if status else ""}">{"".join(columns)}</div>'),
            render_workers(overview["workers"]),
        ]
    )
    return Page(COLUMN_TITLES[status] if status else "Board", body, live=LIVE)


def render_card(task: Mapping[str, Any]) -> Html:
    """One task's card: title, priority, owner, reopen count, dependencies."""
    owner = task.get("assignedWorkerId") or ""
    reopens = int(task.get("reopenCount") or 0)
    meta = [badge(task.get("priority") or "medium", "priority")]
    meta.append(Html(f'<span class="owner" title="held by">{esc("@" + owner) if owner else ""}</span>'))
    if reopens:
        meta.append(Html(f'<span class="reopens" title="reopened {reopens} times">↺ {reopens}</span>'))
    if task.get("dependsOn"):
        meta.append(Html(f'<span class="depends" title="waits for {esc(", ".join(task["dependsOn"]))}">⧗ {len(task["dependsOn"])}</span>'))
    title = link(url("/tasks/" + task["id"]), task.get("title") or task["id"], cls="title")
    return Html(
        f'<li class="card" data-task="{esc(task["id"])}" data-status="{esc(task["status"])}" data-owner="{esc(owner)}">'
        f"{title}"
        f'<div class="meta">{join(meta, " ")}<span class="id">{esc(task["id"])}</span></div></li>'
    )


def render_column(status: str, cards: Sequence[Mapping[str, Any]], total: int, *, epic: str | None, limit: int) -> Html:
    """A status column with its cards and, when it holds more, a link to see more."""
    items = "".join(render_card(task) for task in cards) if cards else ""
    more = ""
    if total > len(cards):
        if len(cards) < MAX_CARDS:
            wider = url("/board", {"status": status, "epic": epic, "limit": min(MAX_CARDS, max(total, limit))})
            more = f'<p class="more">{total - len(cards):,} more · {link(wider, "show more")}</p>'
        else:
            more = f'<p class="more">{total - len(cards):,} more: narrow by epic, or {link(url("/search", {"q": "kind:task status:" + status.lower()}), "search")}</p>'
    heading = link(url("/board", {"status": status, "epic": epic}), COLUMN_TITLES[status])
    return Html(
        f'<section class="column" data-status="{esc(status)}"><h2>{heading} <span class="count">{total:,}</span></h2>'
        f'<ol class="cards">{items}</ol>{more}</section>'
    )


def render_counts(counts: Mapping[str, int], *, epic: str | None) -> Html:
    """The count of every status, ARCHIVED included (its column is shown on request)."""
    parts = [f"{link(url('/board', {'status': s, 'epic': epic}), COLUMN_TITLES[s])} <b>{counts.get(s, 0):,}</b>" for s in ALL_STATUSES]
    return Html(f'<p class="counts">{" · ".join(parts)}</p>')


def render_epic_filter(epics: Sequence[Mapping[str, Any]], chosen: str | None, status: str | None) -> Html:
    """A form choosing the epic the board shows (works without JavaScript)."""
    if not epics:
        return Html("")
    options = ['<option value="">every epic</option>']
    for row in epics:
        selected = " selected" if row["id"] == chosen else ""
        options.append(f'<option value="{esc(row["id"])}"{selected}>{esc(row.get("title") or row["id"])} ({row["counts"]["total"]:,})</option>')
    keep = f'<input type="hidden" name="status" value="{esc(status)}">' if status else ""
    return Html(
        f'<form method="get" action="/board" class="filter">{keep}<label>Epic <select name="epic">{"".join(options)}</select></label>'
        f'<button type="submit">Show</button></form>'
    )


def render_workers(workers: Sequence[Mapping[str, Any]]) -> Html:
    if not workers:
        return Html("")
    rows = [
        (
            esc(w["id"]),
            badge(w.get("type") or "", "role"),
            badge(w.get("status") or "", "worker"),
            task_link(w["currentTaskId"]) if w.get("currentTaskId") else "",
        )
        for w in workers
    ]
    return section("Workers", table(("worker", "role", "status", "task"), rows, cls="workers"), count=len(workers))


# --------------------------------------------------------------------------- one task


def task_page(ctx: Context, task_id: str, *, csrf: str, done: str | None = None, error: Mapping[str, Any] | None = None) -> Page:
    """A task: its fields, description, plan steps, rails, activity, and the buttons its status
    offers a person. `done` names the action just taken; `error` is the body of one that failed."""
    task = queries.show_task(ctx, task_id=task_id)
    context = plans.get_context(ctx, task_id=task_id)
    activity = queries.get_activity_log(ctx, task_id=task_id, limit=ACTIVITY_SHOWN)
    banners = []
    if done in ACTIONS:
        banners.append(notice(ACTIONS[done], "done"))
    if error is not None:
        banners.append(error_notice(error))
    epic = context.get("epic") or {}
    fields = definition_list(
        [
            ("status", badge(task["status"], "status")),
            ("priority", badge(task.get("priority") or "medium", "priority")),
            ("type", task.get("type")),
            ("held by", Html(f'<span class="owner">{esc(task.get("assignedWorkerId") or "")}</span>') if task.get("assignedWorkerId") else None),
            ("epic", link(url("/board", {"epic": task["epicId"]}), epic.get("title") or task["epicId"]) if task.get("epicId") else None),
            ("reopened", Html(f'<span class="reopens">{task["reopenCount"]}</span> times') if task.get("reopenCount") else None),
            ("last reopened because", task.get("reopenReason")),
            ("depends on", join([task_link(dep) for dep in task.get("dependsOn") or []], ", ") or None),
            ("pull request", Html(f"<code>{esc(task['prLink'])}</code>") if task.get("prLink") else None),
            ("file", Html(f"<code>{esc(task.get('path'))}</code>") if task.get("path") else None),
            ("created", when(task.get("createdAt"))),
            ("updated", when(task.get("updatedAt"))),
            ("imported from", render_origin(task.get("source"))),
        ]
    )
    # The plan and its rails come before the buttons: a person reads them, then decides.
    body = [
        Html(f'<p class="crumbs">{link(url("/board"), "Board")} › {esc(task_id)}</p>'),
        Html(f'<h1 data-task="{esc(task_id)}" data-status="{esc(task["status"])}">{esc(task.get("title") or task_id)}</h1>'),
        *banners,
        fields,
        section("Plan", render_plan(task.get("implementationPlan") or []), anchor="plan"),
        section("Rails", render_rails(context.get("allRails") or {}, (context.get("project") or {}).get("globalRails") or {}), anchor="rails"),
        render_actions(task, csrf),
    ]
    if task.get("definitionOfDone"):
        body.append(section("Definition of done", Html("<ul>" + "".join(f"<li>{render_inline(item)}</li>" for item in task["definitionOfDone"]) + "</ul>")))
    if task.get("description"):
        body.append(section("Description", render_markdown(task["description"])))
    for label, key in (("Work summary", "workSummary"), ("Review summary", "reviewSummary")):
        if task.get(key):
            body.append(section(label, render_markdown(task[key])))
    if (task.get("source") or {}).get("fields"):
        body.append(section("Kept from the source", render_kept(task["source"]["fields"]), anchor="source"))
    body.append(section("Activity", render_activity(activity["events"]), anchor="activity", count=activity["count"]))
    return Page(task.get("title") or task_id, join(body), live=LIVE)


def render_origin(source: Mapping[str, Any] | None) -> Html | None:
    """Where an imported task came from: the system and the id it had there."""
    if not source:
        return None
    return Html(f"<code>{esc(source.get('system'))}</code> {esc(source.get('id'))}")


def render_kept(fields: Mapping[str, Any]) -> Html:
    """The source's fields this toolkit has no key for, each as the source held it."""
    rows = [
        (str(key), Html(f"<code>{esc(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))}</code>")) for key, value in fields.items()
    ]
    return definition_list(rows)


def render_actions(task: Mapping[str, Any], csrf: str) -> Html:
    """The buttons a person has for the task in its status: approve or reject a waiting plan,
    QA approve or reject a task in review."""
    action = f"/tasks/{task['id']}"
    if task["status"] == "AWAITING_APPROVAL":
        approve = post_form(url(action + "/approve"), csrf, button("Approve plan", kind="primary"), cls="action approve")
        reject = post_form(
            url(action + "/reject-plan"),
            csrf,
            join([text_area("reason", "Why reject the plan", required=True, placeholder="what the plan must change"), button("Reject plan", kind="danger")]),
            cls="action reject",
        )
        return Html(f'<div class="actions" aria-label="plan approval">{approve}{reject}</div>')
    if task["status"] == "REVIEW":
        approve = post_form(
            url(action + "/qa-approve"),
            csrf,
            join([text_area("summary", "Review summary (optional)"), button("QA approve", kind="primary")]),
            cls="action approve",
        )
        reject = post_form(
            url(action + "/qa-reject"),
            csrf,
            join([text_area("reason", "Which items of the definition of done failed", required=True), button("QA reject", kind="danger")]),
            cls="action reject",
        )
        return Html(f'<div class="actions" aria-label="QA">{approve}{reject}</div>')
    return Html("")


def render_plan(steps: Sequence[Mapping[str, Any]]) -> Html:
    """The plan's steps with their status, files and notes."""
    if not steps:
        return empty("No plan submitted yet.")
    marks = {"PENDING": "○", "IN_PROGRESS": "◐", "COMPLETED": "●"}
    items = []
    for step in steps:
        files = step.get("modifiedFiles") or step.get("affectedFiles") or []
        extra = f'<div class="files">{join([Html(f"<code>{esc(f)}</code>") for f in files], " ")}</div>' if files else ""
        note = f'<div class="note">{esc(step["note"])}</div>' if step.get("note") else ""
        items.append(
            f'<li class="step" data-step="{esc(step["stepId"])}" data-status="{esc(step["status"])}">'
            f'<span class="mark" title="{esc(step["status"])}">{marks.get(step["status"], "?")}</span> '
            f'<span class="step-id">{esc(step["stepId"])}</span> {render_inline(step.get("description"))}{extra}{note}</li>'
        )
    return Html(f'<ol class="plan">{"".join(items)}</ol>')


def render_rails(all_rails: Mapping[str, Sequence[str]], global_rails: Mapping[str, Any]) -> Html:
    """The rails a plan is held to: the project's forbidden and required patterns, and the
    epic's and the task's guidance."""
    rows = [
        ("forbidden (project)", global_rails.get("forbiddenPatterns") or []),
        ("required (project)", all_rails.get("global") or []),
        ("epic", all_rails.get("epic") or []),
        ("task", all_rails.get("task") or []),
    ]
    shown = [(label, join([Html(f"<code>{esc(item)}</code>") for item in items], " · ")) for label, items in rows if items]
    return definition_list(shown) if shown else empty("No rails.")


def render_activity(events: Sequence[Mapping[str, Any]]) -> Html:
    """The task's activity log, newest first."""
    if not events:
        return empty("No activity yet.")
    rows = []
    for event in events:
        payload = event.get("payload") or {}
        detail = ", ".join(f"{key}: {value}" for key, value in payload.items() if value not in (None, "", [], {}))
        rows.append((when(event.get("timestamp")), badge(event.get("event", ""), "event"), esc(event.get("workerId") or ""), esc(detail)))
    return table(("when", "event", "worker", "details"), rows, cls="activity")


# --------------------------------------------------------------------------- the buttons


def act(ctx: Context, task_id: str, action: str, form: Mapping[str, str]) -> dict[str, Any]:
    """Run one of the task page's buttons through its use case; returns the use case's result.

    Raises what the use case raises (INVALID_TRANSITION, NOT_ALLOWED, INVALID_REQUEST, ...).
    """
    if action == "approve":
        return plans.approve_plan(ctx, task_id=task_id)
    if action == "reject-plan":
        return plans.reject_plan(ctx, task_id=task_id, reason=form.get("reason", ""))
    if action == "qa-approve":
        return claims.qa_approve(ctx, task_id=task_id, summary=form.get("summary") or None)
    if action == "qa-reject":
        return claims.qa_reject(ctx, task_id=task_id, reason=form.get("reason", ""))
    raise InvalidRequest(f"no action {action!r}; the task page offers {', '.join(ACTIONS)}")

"""The board's pages: columns by status with filters and paging, a task with everything a person
needs to decide, and the actions of a board: create a task, move it (buttons, drag and drop,
keys), claim and release it, comment, archive, approve or reject a plan, QA approve or reject.

Shell layer: every page is gathered through the board's public use cases (`queries`, `plans`,
`conversation`), the same calls `moss task|board … --json` and the `moe.*` tools make, and
rendered with the pure helpers of `moss_files.web.html`. Every action calls the use case its
command calls, with the web view's context (a person: actor HUMAN, no worker unless the form
names one), so a click or a key changes the task file exactly as the command would:

| action | use case | command |
|---|---|---|
| new | `editing.create_task` (`editing.create_epic` first, on a board without epics) | `moss task new` (`moss epic new`) |
| move | `claims.set_task_status` | `moss task status ID STATUS [--reason]` |
| claim | `claims.claim_next_task` with the task | `moss task claim -w W -s STATUS --task ID` |
| release | `claims.release_task` | `moss task release ID` |
| comment | `conversation.add_comment` | `moss task comment ID TEXT` |
| archive | `editing.archive_task` | `moss task archive ID [--reason]` |
| approve, reject-plan | `plans.approve_plan`, `plans.reject_plan` | `moss task approve`, `reject-plan` |
| qa-approve, qa-reject | `claims.qa_approve`, `claims.qa_reject` | `moss task qa-approve`, `qa-reject [--failed-dod N]` |
"""

from __future__ import annotations

import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moss_files.board import claims, conversation, editing, plans, queries, rules
from moss_files.board.model import Board
from moss_files.board.usecase import board_store
from moss_files.foundation.context import Context
from moss_files.foundation.errors import Conflict, InvalidRequest
from moss_files.web.html import (
    Html,
    Live,
    Page,
    badge,
    button,
    chip,
    definition_list,
    empty,
    error_notice,
    esc,
    hidden,
    join,
    link,
    notice,
    post_form,
    problem_list,
    section,
    select,
    table,
    task_link,
    text_area,
    text_input,
    url,
    when,
)
from moss_files.web.markdown import render_inline, render_markdown

# The columns of the board, in the order work flows; ARCHIVED is shown on request.
COLUMNS = queries.BOARD_COLUMNS
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
DEFAULT_CARDS = queries.DEFAULT_CARDS  # per column; `?limit=` (or `?done=200`, per column) up to MAX_CARDS
MAX_CARDS = queries.MAX_CARDS
MORE_CARDS = 100  # what a column's "show more" adds
LONG_TITLE = 60  # characters of a card's title that surely show whole (three lines of a narrow column)
ACTIVITY_SHOWN = 100
LIVE = ("board",)
PAGES_KEY = "web.board-pages"
CACHED_PAGES = 16  # board pages kept per board read: the queries people have open at once
PRIORITY_CHOICES = ("CRITICAL", "HIGH", "MEDIUM", "LOW")
NEW_STATUSES = ("BACKLOG", "PLANNING", "WORKING")  # what `moss task new --status` takes
# What each action does: the banner shown after it.
ACTIONS = {
    "approve": "Plan approved: the task is WORKING and can be claimed.",
    "reject-plan": "Plan rejected: the task is back in PLANNING with your reason.",
    "qa-approve": "QA approved: the task is DONE.",
    "qa-reject": "QA rejected: the task goes back for more work.",
    "move": "Moved.",
    "claim": "Claimed.",
    "release": "Released: the task can be claimed again.",
    "comment": "Comment added.",
    "archive": "Archived.",
}


def card_limit(value: str | None) -> int:
    """The cards per column a `?limit=` asks for: DEFAULT_CARDS when absent, MAX_CARDS when it
    asks for more. Raises InvalidRequest for anything but a whole number of at least 1."""
    if value is None or value == "":
        return DEFAULT_CARDS
    if not value.isdigit() or int(value) < 1:
        raise InvalidRequest(f"limit must be a whole number from 1 to {MAX_CARDS}", details={"limit": value})
    return min(int(value), MAX_CARDS)


def whole(value: str | None, what: str) -> int:
    """A `?offset=`-like whole number (0 when absent). Raises InvalidRequest."""
    if not value:
        return 0
    if not value.isdigit():
        raise InvalidRequest(f"{what} must be a whole number", details={what: value})
    return int(value)


@dataclass(frozen=True, slots=True)
class BoardQuery:
    """What the board's URL asks for: filters, one column or all, paging."""

    epic: str | None = None
    owner: str | None = None
    priority: str | None = None
    label: str | None = None
    status: str | None = None
    offset: int = 0
    limit: int = DEFAULT_CARDS
    limits: Mapping[str, int] = field(default_factory=dict)  # per column: `?done=200`
    created: str | None = None  # a task just made here, named in a banner

    @staticmethod
    def of(query: Mapping[str, str]) -> BoardQuery:
        """The board query of a request's query values. Raises InvalidRequest."""
        status = (query.get("status") or "").upper() or None
        if status is not None and status not in ALL_STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(ALL_STATUSES)}", details={"status": query.get("status")})
        limit = card_limit(query.get("limit"))
        limits = {column: card_limit(query[column.lower()]) for column in ALL_STATUSES if query.get(column.lower())}
        return BoardQuery(
            epic=query.get("epic") or None,
            owner=query.get("owner") or None,
            priority=(query.get("priority") or "").upper() or None,
            label=query.get("label") or None,
            status=status,
            offset=whole(query.get("offset"), "offset"),
            limit=limit,
            limits=limits,
            created=query.get("created") or None,
        )

    def params(self, **changes: Any) -> dict[str, Any]:
        """The query values of this view, with `changes` (None drops a value)."""
        values: dict[str, Any] = {"epic": self.epic, "owner": self.owner, "priority": self.priority, "label": self.label, "status": self.status}
        if self.offset:
            values["offset"] = self.offset
        if self.limit != DEFAULT_CARDS:
            values["limit"] = self.limit
        for column, size in self.limits.items():
            values[column.lower()] = size
        values.update(changes)
        return {key: value for key, value in values.items() if value not in (None, "")}

    def href(self, **changes: Any) -> str:
        return url("/board", self.params(**changes))

    def size(self, status: str) -> int:
        return self.limits.get(status, self.limit)


# --------------------------------------------------------------------------- the board


class BoardPages:
    """The board pages built from one read of the board, by query: the read model a long-lived
    server keeps, so that a page asked for again costs a load of the board (which checks
    every file, or, in a server, only those its file events name: `BoardStore`) and a
    comparison, not a rebuild of every column, count and choice.

    Files are the truth: every request loads the board first, and a page is reused only when
    that load equals the one the page was built from (`Board` compares its project, epics,
    tasks, workers, teams and problems by value; an unchanged file gives the very object it
    gave before, so the comparison is one look per task). Any difference drops every page.
    Pages are kept with a stand-in for the CSRF token, put in per request (`with_csrf`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._board: Board | None = None
        self._pages: OrderedDict[tuple[Any, ...], tuple[Page, frozenset[str]]] = OrderedDict()
        # Random per process: no file holds it; it is as long as a real token (`app._csrf_token`).
        self.stand_in = secrets.token_hex(20)

    def get(self, board: Board, key: tuple[Any, ...]) -> tuple[Page, frozenset[str]] | None:
        """The page kept for `key` when it was built from a board equal to `board`."""
        with self._lock:
            if self._board is None or not (self._board is board or self._board == board):
                return None
            found = self._pages.get(key)
            if found is not None:
                self._pages.move_to_end(key)
            return found

    def put(self, board: Board, key: tuple[Any, ...], page: Page) -> tuple[Page, frozenset[str]]:
        """Keep `page`, built from `board`, under `key` (dropping the pages of another board);
        it with the keys of its parts that hold the CSRF stand-in."""
        marked = frozenset(name for name, markup in page.parts.items() if self.stand_in in markup)
        with self._lock:
            if self._board is None or not (self._board is board or self._board == board):
                self._pages.clear()
                self._board = board
            self._pages[key] = (page, marked)
            while len(self._pages) > CACHED_PAGES:
                self._pages.popitem(last=False)
        return page, marked

    def with_csrf(self, kept: tuple[Page, frozenset[str]], csrf: str) -> Page:
        """A kept page with the request's CSRF token in place of the stand-in."""
        page, marked = kept
        body = Html(page.body.replace(self.stand_in, csrf)) if self.stand_in in page.body else page.body
        if not marked and body is page.body:
            return page
        parts = dict(page.parts)
        for name in marked:
            parts[name] = Html(parts[name].replace(self.stand_in, csrf))
        return Page(page.title, body, page.live, page.status, page.headers, parts, page.lists)


def board_pages(ctx: Context) -> BoardPages:
    """The board pages kept for the context's life (a server's)."""
    return ctx.resource(PAGES_KEY, BoardPages)


def board_page(ctx: Context, query: BoardQuery, *, csrf: str = "") -> Page:
    """The board: one column per status (or only `query.status`, paged), each with its cards in
    the column's order (Done: the last completed first), filtered by epic, holder, priority and
    label; a form to create a task; the workers. Built once per board read and query
    (`BoardPages`): the board is loaded, and the page kept for an equal board is reused."""
    pages = board_pages(ctx)
    board = board_store(ctx).load()
    key = (query.epic, query.owner, query.priority, query.label, query.status, query.offset, query.limit, tuple(sorted(query.limits.items())), query.created)
    kept = pages.get(board, key)
    if kept is None:
        kept = pages.put(board, key, build_board_page(ctx, board, query, csrf=pages.stand_in))
    return pages.with_csrf(kept, csrf)


def build_board_page(ctx: Context, board: Board, query: BoardQuery, *, csrf: str) -> Page:
    """`board_page` built from `board`, a load of the board."""
    shown = (query.status,) if query.status else COLUMNS
    view = queries.board_view(
        ctx,
        epic_id=query.epic,
        assigned_worker_id=query.owner,
        priority=query.priority,
        label=query.label,
        statuses=shown,
        limits={status: query.size(status) for status in shown},
        offset=query.offset if query.status else 0,
        board=board,
    )
    live = Live()
    title = view["project"].get("name") or "Board"
    epics = view["choices"]["epics"]
    total = sum(view["counts"].values())
    head = Html(
        f'<div class="page-head"><h1>{esc(title)}</h1>'
        f'<span class="muted total">{total:,} of {view["total"]:,} tasks</span>'
        f"{live.part('new-task', render_new_task(epics, query, csrf))}</div>"
    )
    body = [head, problem_list(view.get("problems", []))]
    if query.created:
        body.append(Html(f'<div class="notice done" role="status">Created {task_link(query.created)}.</div>'))
    body.append(live.part("filters", render_filters(view["choices"], query)))
    body.append(live.part("counts", render_counts(view["counts"], query)))
    if view["workers"]:
        body.append(live.part("workers", render_workers(view["workers"])))
    if view["total"] == 0:
        body.append(
            live.part(
                "empty",
                Html(
                    '<div class="notice info first-task" data-key="empty"><b>No tasks yet.</b> Add the first one with <b>New task</b> above, '
                    'or at the command line: <code>moss epic new "Checkout"</code>, then <code>moss task new "Card form" -e EPIC-ID</code>.</div>'
                ),
            )
        )
    columns = [render_column(live, column, query) for column in view["columns"]]
    body.append(Html(f'<div class="board{" single" if query.status else ""}" data-board>{"".join(columns)}</div>'))
    body.append(
        Html(
            '<p class="keys muted">Keys: <kbd>n</kbd> new task · <kbd>/</kbd> search · arrows move between cards · '
            "<kbd>Space</kbd> picks a card up, <kbd>←</kbd> <kbd>→</kbd> choose its column, <kbd>Space</kbd> puts it there, "
            "<kbd>Esc</kbd> puts it back · <kbd>Enter</kbd> opens it. Cards can be dragged too.</p>"
        )
    )
    body.append(render_reason_dialog())
    page_title = COLUMN_TITLES[query.status] if query.status else "Board"
    return Page(page_title, join(body), live=LIVE, parts=live.parts, lists=live.lists)


def render_new_task(epics: Sequence[Mapping[str, Any]], query: BoardQuery, csrf: str) -> Html:
    """The New task form (`moss task new`): title, epic (a new epic's title on a board without
    one), priority, column, description."""
    if epics:
        choices = [(row["id"], str(row.get("title") or row["id"])) for row in epics if row.get("status") != "ARCHIVED"] or [
            (row["id"], str(row.get("title") or row["id"])) for row in epics
        ]
        epic_field = select("epic", "Epic", choices, chosen=query.epic or choices[0][0], required=True)
    else:
        epic_field = text_input("epic_title", "New epic", required=True, placeholder="the epic this task belongs to")
    fields = join(
        [
            hidden("next", query.href()),
            text_input("title", "Title", required=True, placeholder="what needs doing", maxlength=300),
            epic_field,
            select("priority", "Priority", [(p, p.capitalize()) for p in PRIORITY_CHOICES], chosen="MEDIUM"),
            select("status", "Column", [(s, COLUMN_TITLES[s]) for s in NEW_STATUSES], chosen="BACKLOG"),
            text_area("description", "Description (markdown, optional)", rows=3),
            button("Create task", kind="primary"),
        ]
    )
    form = post_form("/tasks/new", csrf, fields, cls="new-task-form")
    return Html(f'<details class="new-task" data-key="new-task"><summary class="button primary">New task</summary>{form}</details>')


def render_filters(choices: Mapping[str, Any], query: BoardQuery) -> Html:
    """The filter form (epic, holder, priority, label; works without JavaScript) and the
    chosen filters as chips, each with a ✕ that takes it away."""
    epics = [("", "every epic")] + [(row["id"], f"{row.get('title') or row['id']} ({row['count']:,})") for row in choices["epics"]]
    owners = [("", "anyone")] + [(row["id"], f"{row['id']} ({row['count']:,})") for row in choices["owners"]]
    priorities = [("", "any")] + [(row["id"], f"{row['id'].capitalize()} ({row['count']:,})") for row in choices["priorities"]]
    labels = [("", "any")] + [(row["id"], f"{row['id']} ({row['count']:,})") for row in choices["labels"]]
    keep = join([hidden("status", query.status)] if query.status else [])
    chips = []
    titles = {row["id"]: row.get("title") or row["id"] for row in choices["epics"]}
    for name, value, shown in (
        ("epic", query.epic, titles.get(query.epic or "", query.epic)),
        ("owner", query.owner, f"@{query.owner}"),
        ("priority", query.priority, (query.priority or "").capitalize()),
        ("label", query.label, query.label),
    ):
        if value:
            chips.append(chip(Html(f"<span class='muted'>{esc(name)}:</span> {esc(shown)}"), kind="filter", remove=query.href(**{name: None, "offset": None})))
    if chips:
        chips.append(link(query.href(epic=None, owner=None, priority=None, label=None, offset=None), "clear filters", cls="clear"))
    return Html(
        f'<form method="get" action="/board" class="filters" data-key="filters" aria-label="filters">{keep}'
        f"{select('epic', 'Epic', epics, chosen=query.epic or '')}"
        f"{select('owner', 'Owner', owners, chosen=query.owner or '')}"
        f"{select('priority', 'Priority', priorities, chosen=query.priority or '')}"
        f"{select('label', 'Label', labels, chosen=query.label or '')}"
        f'<button type="submit">Filter</button>'
        f'<div class="chips" aria-label="chosen filters">{join(chips, " ")}</div></form>'
    )


def render_counts(counts: Mapping[str, int], query: BoardQuery) -> Html:
    """The count of every status, Archived included (its column is shown on request)."""
    parts = [
        f'<a href="{esc(query.href(status=s, offset=None))}"{" aria-current=page" if query.status == s else ""}>{esc(COLUMN_TITLES[s])} <b>{counts.get(s, 0):,}</b></a>'
        for s in ALL_STATUSES
    ]
    every = f'<a href="{esc(query.href(status=None, offset=None))}"{"" if query.status else " aria-current=page"}>All columns</a>'
    return Html(f'<nav class="counts" data-key="counts" aria-label="columns">{every} {" ".join(parts)}</nav>')


def render_card(task: Mapping[str, Any], *, created: str | None = None) -> Html:
    """One task's card: title (long ones shortened, whole on hover), priority, labels, holder,
    reopen count, dependencies, and for a finished task when it was finished; the task just
    created here (`created`) stands out."""
    owner = task.get("assignedWorkerId") or ""
    reopens = int(task.get("reopenCount") or 0)
    meta = [badge(task.get("priority") or "medium", "priority")]
    for label in (task.get("labels") or [])[:3]:
        meta.append(chip(label, kind="label"))
    meta.append(Html(f'<span class="owner" title="held by">{esc("@" + owner) if owner else ""}</span>'))
    if reopens:
        meta.append(Html(f'<span class="reopens" title="reopened {reopens} times">↺ {reopens}</span>'))
    if task.get("dependsOn"):
        meta.append(Html(f'<span class="depends" title="waits for {esc(", ".join(task["dependsOn"]))}">waits on {len(task["dependsOn"])}</span>'))
    if task.get("needsHumanReview"):
        meta.append(Html('<span class="parked" title="parked for a person">needs you</span>'))
    if task["status"] in ("DONE", "ARCHIVED") and (task.get("completedAt") or task.get("updatedAt")):
        meta.append(Html(f'<span class="finished">{when(task.get("completedAt") or task.get("updatedAt"))}</span>'))
    text = task.get("title") or task["id"]
    whole = f' title="{esc(text)}"' if len(text) > LONG_TITLE else ""  # shortened on the card: whole on hover
    title = Html(f'<a class="title" href="{esc(url("/tasks/" + task["id"]))}"{whole}>{esc(text)}</a>')
    return Html(
        f'<li class="card{" created" if task["id"] == created else ""}" data-task="{esc(task["id"])}" data-status="{esc(task["status"])}" data-owner="{esc(owner)}" data-key="card:{esc(task["id"])}" draggable="true">'
        f"{title}"
        f'<div class="meta">{join(meta, " ")}<span class="id">{esc(task["id"])}</span></div></li>'
    )


def render_column(live: Live, column: Mapping[str, Any], query: BoardQuery) -> Html:
    """A status column: its heading with the count, its cards (scrolling on their own), and
    the way to the cards beyond them."""
    status, total, first, cards = column["status"], column["total"], column["offset"], column["tasks"]
    heading = live.part(
        f"head:{status}",
        Html(
            f'<h2 id="col-{esc(status)}" data-key="head:{esc(status)}"><a href="{esc(query.href(status=status, offset=None))}">{esc(COLUMN_TITLES[status])}</a> '
            f'<span class="count">{total:,}</span></h2>'
        ),
    )
    items = live.items(f"col:{status}", ((f"card:{task['id']}", render_card(task, created=query.created)) for task in cards))
    more = live.part(f"more:{status}", render_more(status, total, first, len(cards), query))
    hint = "the last completed first" if status == "DONE" else "the last archived first" if status == "ARCHIVED" else "in queue order"
    return Html(
        f'<section class="column" data-status="{esc(status)}" aria-labelledby="col-{esc(status)}">{heading}'
        f'<ol class="cards" data-list="col:{esc(status)}" data-status="{esc(status)}" aria-label="{esc(COLUMN_TITLES[status])}, {esc(hint)}">{items}</ol>'
        f"{more}</section>"
    )


def render_more(status: str, total: int, first: int, shown: int, query: BoardQuery) -> Html:
    """Where the column's other cards are: more of them here (up to MAX_CARDS), then pages of
    the column alone, so that every card can be reached."""
    parts = []
    if query.status:
        if total:
            parts.append(f"{first + 1:,}–{first + shown:,} of {total:,}")
        if first:
            parts.append(link(query.href(offset=max(0, first - query.size(status)) or None), "previous", cls="page-prev"))
        if first + shown < total:
            parts.append(link(query.href(offset=first + shown), "next", cls="page-next"))
    elif total > shown:
        parts.append(f"{shown:,} of {total:,}")
        if shown < MAX_CARDS:
            parts.append(link(query.href(**{status.lower(): min(MAX_CARDS, shown + MORE_CARDS)}), "show more", cls="show-more"))
        else:
            parts.append(link(query.href(status=status, offset=shown), "the rest, page by page", cls="page-next"))
    return Html(f'<p class="more" data-key="more:{esc(status)}">{" · ".join(parts)}</p>')


def render_workers(workers: Sequence[Mapping[str, Any]]) -> Html:
    """The workers, one chip each: name, status, the task it holds."""
    items = []
    for worker in workers:
        task = f" · {task_link(worker['currentTaskId'])}" if worker.get("currentTaskId") else ""
        items.append(
            f'<li class="worker" data-worker="{esc(worker["id"])}"><b>{esc(worker["id"])}</b> {badge(worker.get("status") or "", "worker")}'
            f'<span class="muted"> {esc(worker.get("type") or "")}</span>{task}</li>'
        )
    return Html(
        f'<details class="workers" data-key="workers"><summary>Workers <span class="count">{len(workers)}</span></summary><ul>{"".join(items)}</ul></details>'
    )


def render_reason_dialog() -> Html:
    """The dialog the page's script opens when a move back needs a reason."""
    return Html(
        '<dialog class="reason-dialog" aria-labelledby="reason-title"><form method="dialog">'
        '<h2 id="reason-title">Why move it back?</h2>'
        '<label>Reason<textarea name="reason" rows="3" maxlength="10000" required></textarea></label>'
        '<div class="buttons"><button value="ok" class="primary">Move</button> <button value="cancel" formnovalidate>Cancel</button></div>'
        "</form></dialog>"
    )


# --------------------------------------------------------------------------- one task


def task_page(ctx: Context, task_id: str, *, csrf: str, done: str | None = None, error: Mapping[str, Any] | None = None, worker: str = "") -> Page:
    """A task: its fields; what it is and what done means (description, definition of done,
    work and review summaries, plan, rails); then what a person can do with it; its comments and
    activity. `done` names the action just taken; `error` is the body of one that failed;
    `worker` is the name a claim offers."""
    task = queries.show_task(ctx, task_id=task_id)
    context = plans.get_context(ctx, task_id=task_id)
    activity = queries.get_activity_log(ctx, task_id=task_id, limit=ACTIVITY_SHOWN)
    comments = conversation.list_comments(ctx, task_id=task_id)
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
            ("completed", when(task.get("completedAt")) if task.get("completedAt") else None),
            ("imported from", render_origin(task.get("source"))),
        ]
    )
    # What the task is and what done means come first; the buttons after them: a person
    # reads, then decides.
    body = [
        Html(
            f'<p class="crumbs">{link(url("/board"), "Board")} › {link(url("/board", {"status": task["status"]}), COLUMN_TITLES.get(task["status"], task["status"]))} › {esc(task_id)}</p>'
        ),
        Html(f'<h1 data-task="{esc(task_id)}" data-status="{esc(task["status"])}">{esc(task.get("title") or task_id)}</h1>'),
        *banners,
        fields,
    ]
    if task.get("description"):
        body.append(section("Description", render_markdown(task["description"]), anchor="description"))
    if task.get("definitionOfDone"):
        body.append(section("Definition of done", render_done_items(task), anchor="definition-of-done"))
    for label, key in (("Work summary", "workSummary"), ("Review summary", "reviewSummary")):
        if task.get(key):
            body.append(section(label, render_markdown(task[key]), anchor=key))
    body.append(section("Plan", render_plan(task.get("implementationPlan") or []), anchor="plan"))
    body.append(section("Rails", render_rails(context.get("allRails") or {}, (context.get("project") or {}).get("globalRails") or {}), anchor="rails"))
    body.append(render_actions(task, csrf, worker=worker))
    body.append(section("Comments", render_comments(comments, task_id, csrf), anchor="comments", count=len(comments["comments"])))
    if (task.get("source") or {}).get("fields"):
        body.append(section("Kept from the source", render_kept(task["source"]["fields"]), anchor="source"))
    body.append(section("Activity", render_activity(activity["events"]), anchor="activity", count=activity["count"]))
    return Page(task.get("title") or task_id, join(body), live=LIVE)


def render_done_items(task: Mapping[str, Any]) -> Html:
    """The definition of done, numbered as `--failed-dod N` counts them; the items QA found
    failing are marked."""
    failed = {str(entry.get("item")) for entry in task.get("failedDodItems") or [] if isinstance(entry, Mapping)}
    items = []
    for number, item in enumerate(task["definitionOfDone"], start=1):
        mark = ' <span class="badge status-rejected">failed before</span>' if item in failed else ""
        items.append(f'<li value="{number}">{render_inline(item)}{mark}</li>')
    return Html(f'<ol class="done-items">{"".join(items)}</ol>')


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


def render_actions(task: Mapping[str, Any], csrf: str, *, worker: str = "") -> Html:
    """What a person can do with the task in its status: approve or reject a waiting plan, QA
    approve or reject a task in review (ticking the items of the definition of done that
    failed), claim or release it, move it to another column, archive it."""
    action = f"/tasks/{task['id']}"
    status = task["status"]
    main: list[Html] = []
    if status == "AWAITING_APPROVAL":
        main.append(post_form(url(action + "/approve"), csrf, button("Approve plan", kind="primary"), cls="action approve"))
        main.append(
            post_form(
                url(action + "/reject-plan"),
                csrf,
                join(
                    [text_area("reason", "Why reject the plan", required=True, placeholder="what the plan must change"), button("Reject plan", kind="danger")]
                ),
                cls="action reject",
            )
        )
    if status == "REVIEW":
        main.append(
            post_form(
                url(action + "/qa-approve"),
                csrf,
                join([text_area("summary", "Review summary (optional)"), button("QA approve", kind="primary")]),
                cls="action approve",
            )
        )
        items = task.get("definitionOfDone") or []
        boxes = "".join(
            f'<label class="check"><input type="checkbox" name="failed" value="{number}"> {render_inline(item)}</label>'
            for number, item in enumerate(items, start=1)
        )
        checklist = (
            Html(f'<fieldset class="failed-items"><legend>Which items of the definition of done failed</legend>{boxes}</fieldset>') if items else Html("")
        )
        main.append(
            post_form(
                url(action + "/qa-reject"),
                csrf,
                join([checklist, text_area("reason", "What is wrong", required=True, placeholder="what to fix"), button("QA reject", kind="danger")]),
                cls="action reject",
            )
        )
    more: list[Html] = []
    if task.get("assignedWorkerId"):
        more.append(
            post_form(
                url(action + "/release"),
                csrf,
                join([Html(f"<p>Held by <b>{esc(task['assignedWorkerId'])}</b>.</p>"), button("Release")]),
                cls="action release",
            )
        )
    elif status in ("PLANNING", "WORKING", "REVIEW"):
        more.append(
            post_form(
                url(action + "/claim"),
                csrf,
                join(
                    [
                        hidden("status", status),
                        text_input("worker", "Claim as worker", value=worker, required=True, placeholder="worker name", maxlength=64),
                        button("Claim"),
                    ]
                ),
                cls="action claim",
            )
        )
    targets = [(target, COLUMN_TITLES[target]) for target in ALL_STATUSES if target in rules.TRANSITIONS.get(status, ()) and target != "ARCHIVED"]
    if targets:
        more.append(
            post_form(
                url(action + "/move"),
                csrf,
                join(
                    [
                        select("status", "Move to", targets),
                        text_area("reason", "Reason (a move back needs one)"),
                        button("Move"),
                    ]
                ),
                cls="action move",
            )
        )
    if status in ("BACKLOG", "REVIEW", "DONE"):
        more.append(
            post_form(
                url(action + "/archive"), csrf, join([text_area("reason", "Why archive it (optional)"), button("Archive", kind="danger")]), cls="action archive"
            )
        )
    parts = []
    if main:
        parts.append(Html(f'<div class="actions primary-actions" aria-label="decide">{"".join(main)}</div>'))
    if more:
        parts.append(Html(f'<div class="actions" aria-label="task actions">{"".join(more)}</div>'))
    return section("Actions", join(parts), anchor="actions") if parts else Html("")


def render_comments(found: Mapping[str, Any], task_id: str, csrf: str) -> Html:
    """The task's comments, oldest first (open questions marked), and the form to add one."""
    waiting = set(found.get("openQuestions") or [])
    items = []
    for comment in found.get("comments") or []:
        question = ' <span class="badge status-review">question</span>' if comment.get("id") in waiting else ""
        items.append(
            f'<li class="comment" data-comment="{esc(comment.get("id"))}"><div class="comment-head"><b>{esc(comment.get("author"))}</b> '
            f"{when(comment.get('timestamp'))}{question}</div>{render_markdown(comment.get('content'))}</li>"
        )
    listing = Html(f'<ol class="comments">{"".join(items)}</ol>') if items else empty("No comments yet.")
    form = post_form(
        url(f"/tasks/{task_id}/comment"),
        csrf,
        join([text_area("text", "Add a comment", required=True, rows=3), button("Comment", kind="primary")]),
        cls="comment-form",
    )
    return join([listing, form])


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


# --------------------------------------------------------------------------- the actions


def act(ctx: Context, task_id: str, action: str, form: Mapping[str, str], lists: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Run one action on a task through its use case (the table in this module's docstring);
    returns the use case's result. A claim the board does not give is a Conflict saying why.

    Raises what the use case raises (INVALID_TRANSITION, NOT_ALLOWED, INVALID_REQUEST, ...).
    """
    lists = lists or {}
    reason = form.get("reason") or None
    if action == "approve":
        return plans.approve_plan(ctx, task_id=task_id)
    if action == "reject-plan":
        return plans.reject_plan(ctx, task_id=task_id, reason=form.get("reason", ""))
    if action == "qa-approve":
        return claims.qa_approve(ctx, task_id=task_id, summary=form.get("summary") or None)
    if action == "qa-reject":
        return claims.qa_reject(ctx, task_id=task_id, reason=form.get("reason", ""), failed_dod_items=list(lists.get("failed") or []) or None)
    if action == "move":
        return claims.set_task_status(ctx, task_id=task_id, status=form.get("status", ""), reason=reason)
    if action == "claim":
        status = form.get("status") or queries.show_task(ctx, task_id=task_id)["status"]
        result = claims.claim_next_task(ctx, statuses=[status], worker_id=form.get("worker", "").strip() or None, task_id=task_id)
        if not result.get("hasNext"):
            why = (result.get("notClaimable") or {}).get("reason")
            held = result.get("alreadyAssigned")
            message = f"{form.get('worker')} already holds {held['taskId']}" if held else f"cannot claim {task_id}: {why or 'the board does not offer it'}"
            raise Conflict(message, code="CONFLICT", details={"taskId": task_id, **({"alreadyAssigned": held} if held else {})})
        return result
    if action == "release":
        return claims.release_task(ctx, task_id=task_id, reason=reason)
    if action == "comment":
        return conversation.add_comment(ctx, task_id=task_id, content=form.get("text", ""))
    if action == "archive":
        return editing.archive_task(ctx, task_id=task_id, reason=reason)
    raise InvalidRequest(f"no action {action!r}; a task offers {', '.join(ACTIONS)}")


def create(ctx: Context, form: Mapping[str, str]) -> dict[str, Any]:
    """The New task form through `editing.create_task` (as `moss task new`); on a board without
    epics, its epic first through `editing.create_epic` (as `moss epic new`). Returns the new
    task's result. Raises what the use cases raise."""
    epic = (form.get("epic") or "").strip()
    if not epic:
        title = (form.get("epic_title") or "").strip()
        if not title:
            raise InvalidRequest("name the task's epic (or a new epic's title)", details={"field": "epic"})
        epic = editing.create_epic(ctx, title=title)["epic"]["id"]
    return editing.create_task(
        ctx,
        epic_id=epic,
        title=form.get("title", ""),
        description=form.get("description") or None,
        priority=form.get("priority") or None,
        status=form.get("status") or None,
    )

"""The capsules' pages: every capsule by workspace, one capsule rendered as markdown, its
versions in git and the differences between two of them.

Shell layer: gathered through the capsule use cases (`capsules.service.inventory` and `fetch`,
`capsules.history.history` and `capsules.revision.fetch_at`, as `moss inventory|fetch|history` call them) and
rendered with `moss_files.web.html`; the difference between two versions is computed here,
from the texts `fetch_at` returns, with difflib.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from moss_files.capsules import history as capsule_history
from moss_files.capsules import revision, service
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError, error_body
from moss_files.web.html import (
    Html,
    Page,
    badge,
    definition_list,
    empty,
    error_notice,
    esc,
    join,
    link,
    problem_list,
    seconds_time,
    section,
    table,
    url,
    when,
)
from moss_files.web.markdown import render_markdown

PAGE_SIZE = 500  # capsule summaries per page (inventory's maximum)
LIVE = ("capsules",)
CURRENT = "current"  # the `to` of a diff that compares with the file as it is now
DIFF_CONTEXT = 3


def offset_of(value: str | None) -> int:
    """The `?offset=` of a page of summaries. Raises InvalidRequest."""
    if not value:
        return 0
    if not value.isdigit():
        raise InvalidRequest("offset must be a whole number", details={"offset": value})
    return int(value)


# --------------------------------------------------------------------------- the list


def capsules_page(ctx: Context, *, workspace: str | None = None, offset: int = 0, deleted: bool = False) -> Page:
    """Every capsule (or one workspace's), newest first, grouped by workspace."""
    listing = service.inventory(ctx, workspace=workspace, limit=PAGE_SIZE, offset=offset, include_deleted=deleted)
    items = listing["items"]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        groups.setdefault(item["workspace"], []).append(item)
    page = listing["pagination"]
    head = [
        Html('<div class="page-head"><h1>Capsules</h1>'),
        Html(
            f'<form method="get" action="/capsules" class="filter"><label>Workspace <input name="workspace" value="{esc(workspace)}"></label>'
            f'<label><input type="checkbox" name="deleted" value="1"{" checked" if deleted else ""}> deleted too</label>'
            '<button type="submit">Show</button></form></div>'
        ),
        problem_list(listing.get("problems", [])),
    ]
    if not items:
        return Page("Capsules", join([*head, empty("No capsules yet. Agents store them with moss.store; people with `moss store`.")]), live=LIVE)
    index = join([link(url("/capsules", {"workspace": name}), f"{name} ({len(rows)})") for name, rows in groups.items()], " · ")
    body = [*head, Html(f'<p class="counts">{index}</p>')]
    for name, rows in groups.items():
        body.append(section(name, render_capsule_table(rows), anchor=f"ws-{name}", count=len(rows)))
    if page["has_more"] or page["offset"]:
        nav = []
        if page["offset"]:
            nav.append(link(url("/capsules", {"workspace": workspace, "offset": max(0, page["offset"] - PAGE_SIZE)}), "newer"))
        if page["has_more"]:
            nav.append(link(url("/capsules", {"workspace": workspace, "offset": page["offset"] + PAGE_SIZE}), "older"))
        body.append(Html(f'<p class="more">{page["offset"] + 1:,}–{page["offset"] + len(items):,} of {page["total"]:,} · {join(nav, " · ")}</p>'))
    return Page("Capsules", join(body), live=LIVE)


def render_capsule_table(rows: Sequence[Mapping[str, Any]]) -> Html:
    table_rows = []
    for row in rows:
        label = row.get("name") or row.get("title") or row["id"]
        tags = join([badge(tag, "tag") for tag in row.get("tags") or []], " ")
        state = badge("deleted", "status") if row.get("deleted_at") else ""
        table_rows.append(
            (
                join([link(url(f"/capsules/{row['id']}"), label), state], " "),
                esc(row.get("title") or ""),
                tags,
                f"{row.get('capsule_chars', 0):,}",
                when(seconds_time(row.get("updated_at"))),
            )
        )
    return table(("name", "title", "tags", "characters", "updated"), table_rows, cls="capsules")


# --------------------------------------------------------------------------- one capsule


def capsule_page(ctx: Context, capsule_id: str) -> Page:
    """One capsule: its fields and its text rendered as markdown."""
    capsule = service.fetch(ctx, id=capsule_id, include_deleted=True)
    fields = definition_list(
        [
            ("workspace", link(url("/capsules", {"workspace": capsule["workspace"]}), capsule["workspace"])),
            ("name", capsule.get("name")),
            ("id", Html(f"<code>{esc(capsule['id'])}</code>")),
            ("tags", join([badge(tag, "tag") for tag in capsule.get("tags") or []], " ") or None),
            ("characters", f"{capsule.get('capsule_chars', 0):,} (about {capsule.get('tokens_estimate', 0):,} tokens)"),
            ("run, phase, role", " / ".join(str(capsule[key]) for key in ("run_id", "phase", "role") if capsule.get(key)) or None),
            ("source", capsule.get("source")),
            ("created", when(seconds_time(capsule.get("created_at")))),
            ("updated", when(seconds_time(capsule.get("updated_at")))),
            ("deleted", when(seconds_time(capsule.get("deleted_at"))) if capsule.get("deleted_at") else None),
        ]
    )
    title = capsule.get("title") or capsule.get("name") or capsule["id"]
    body = join(
        [
            Html(
                f'<p class="crumbs">{link("/capsules", "Capsules")} › {link(url("/capsules", {"workspace": capsule["workspace"]}), capsule["workspace"])}</p>'
            ),
            Html(f"<h1>{esc(title)}</h1>"),
            Html(f'<p class="tools">{link(url(f"/capsules/{capsule_id}/history"), "History and differences")}</p>'),
            fields,
            section("Text", render_markdown(capsule.get("capsule_text"))),
        ]
    )
    return Page(str(title), body, live=LIVE)


def history_page(ctx: Context, capsule_id: str, *, at: str | None = None, base: str | None = None, to: str | None = None) -> Page:
    """A capsule's versions in git, newest first; with `at` one version rendered, with `base`
    and `to` the difference between two versions (`to` may be `current`, the file now)."""
    found = capsule_history.history(ctx, id=capsule_id)
    versions = found["versions"]
    crumbs = Html(f'<p class="crumbs">{link("/capsules", "Capsules")} › {link(url(f"/capsules/{capsule_id}"), found.get("name") or capsule_id)} › history</p>')
    body = [crumbs, Html(f"<h1>History of {esc(found.get('name') or capsule_id)}</h1>")]
    if found.get("dirty"):
        body.append(
            Html(
                f'<p class="notice info">The file has changes not yet committed: {link(url(f"/capsules/{capsule_id}/history", {"base": versions[0]["commit"] if versions else None, "to": CURRENT}), "see them")}.</p>'
            )
        )
    if at:
        body.append(section(f"At {at[:12]}", _version_text(ctx, capsule_id, at)))
    if base and to:
        body.append(section(f"From {base[:12]} to {to[:12]}", render_diff_between(ctx, capsule_id, base, to), anchor="diff"))
    body.append(section("Versions", render_versions(capsule_id, versions), count=len(versions)))
    return Page(f"History of {found.get('name') or capsule_id}", join(body), live=LIVE)


def render_versions(capsule_id: str, versions: Sequence[Mapping[str, Any]]) -> Html:
    if not versions:
        return empty("No committed version yet: commit the capsule's file to start its history.")
    rows = []
    for index, version in enumerate(versions):
        commit = version["commit"]
        older = versions[index + 1]["commit"] if index + 1 < len(versions) else None
        actions = []
        if not version.get("removed"):
            actions.append(link(url(f"/capsules/{capsule_id}/history", {"at": commit}), "view"))
        if older and not version.get("removed") and not versions[index + 1].get("removed"):
            actions.append(link(url(f"/capsules/{capsule_id}/history", {"base": older, "to": commit}) + "#diff", "changes"))
        rows.append(
            (
                Html(f"<code>{esc(commit[:12])}</code>"),
                when(version.get("date")),
                esc(version.get("author") or ""),
                join([esc(version.get("summary") or ""), badge("removed", "status") if version.get("removed") else ""], " "),
                join(actions, " · "),
            )
        )
    return table(("commit", "date", "author", "summary", ""), rows, cls="versions")


def _text_at(ctx: Context, capsule_id: str, rev: str) -> str:
    if rev == CURRENT:
        return str(service.fetch(ctx, id=capsule_id, include_deleted=True).get("capsule_text") or "")
    return str(revision.fetch_at(ctx, rev=rev, id=capsule_id, include_deleted=True).get("capsule_text") or "")


def _version_text(ctx: Context, capsule_id: str, rev: str) -> Html:
    try:
        return render_markdown(_text_at(ctx, capsule_id, rev))
    except MossError as err:
        return error_notice(error_body(err)["error"])


def render_diff_between(ctx: Context, capsule_id: str, base: str, to: str) -> Html:
    """The unified difference between the capsule's text at two revisions."""
    try:
        before, after = _text_at(ctx, capsule_id, base), _text_at(ctx, capsule_id, to)
    except MossError as err:
        return error_notice(error_body(err)["error"])
    return render_diff(before, after, base[:12], to[:12])


def render_diff(before: str, after: str, base_label: str, to_label: str) -> Html:
    """A unified diff of two texts, each line escaped and marked as added, removed or context."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), base_label, to_label, n=DIFF_CONTEXT, lineterm=""))
    if not lines:
        return empty("No difference in the text.")
    shown = []
    for line in lines:
        kind = "meta" if line.startswith(("---", "+++", "@@")) else "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        shown.append(f'<span class="{kind}">{esc(line)}</span>')
    return Html(f'<pre class="diff">{chr(10).join(shown)}</pre>')

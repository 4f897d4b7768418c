"""The web view as people would look at it (issue 28): a realistic workspace (Moe's board
imported, Backlog.md's tasks beside it, capsules, two sleeves with mail, memory with decisions,
an agent session) and a 5,000-task board, served by real daemons, read over HTTP and in headless
Chromium at 1366x900 and 390x844. No page scrolls sideways, no table cell is narrower than its
longest word (measured on the rendered boxes), the Done column starts with the task completed
last, every card of a column can be reached, search results lead somewhere, and a live page is
sent only what changed. Screenshots are saved (the folder is printed), with each page's height."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from web_support import (
    Realistic,
    Served,
    big_board,
    browser_page,
    git,
    make_workspace,
    realistic_workspace,
    request,
    require_browser,
    serve,
    shots,  # noqa: F401  (a fixture)
)

from moss_files.board import editing, queries
from moss_files.foundation.context import Context

pytestmark = pytest.mark.slow

VIEWPORTS = ((1366, 900), (390, 844))
# Measured in the page: the document wider than the window, and every table cell's words
# against the cell's own width (a word wider than its cell was broken or overflows it).
LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1) problems.push(`the page is ${doc.scrollWidth} px wide in a ${window.innerWidth} px window`);
  for (const cell of document.querySelectorAll("main td, main th")) {
    if (!cell.getClientRects().length) continue;
    const style = getComputedStyle(cell);
    const inner = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      for (const found of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, found.index);
        range.setEnd(node, found.index + found[0].length);
        const width = [...range.getClientRects()].reduce((sum, rect) => sum + rect.width, 0);
        if (width > inner + 1) problems.push(`"${found[0].slice(0, 40)}" (${Math.round(width)} px) in a ${Math.round(inner)} px cell`);
      }
    }
  }
  return problems;
}"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Realistic, Served, Served]]:
    """The realistic workspace and the 5,000-task board, each with its daemon, shared by the
    tests of this module (which only read, but the live test's one title edit)."""
    home = tmp_path_factory.mktemp("home")
    (home / "gitconfig").write_text("[user]\n\tname = Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(home))
        env.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
        env.setenv("GIT_CONFIG_NOSYSTEM", "1")
        base = tmp_path_factory.mktemp("views")
        made = realistic_workspace(base / "real")
        big = make_workspace(base / "big")
        big_board(big, 5000)
        git(big, "add", "-A")
        git(big, "commit", "-q", "-m", "5,000 tasks")
        with serve(made.root) as real, serve(big) as large:
            yield made, real, large


def cards_of(page: str, status: str) -> list[str]:
    """The task ids of a column's cards, in the page's order."""
    column = page.split(f'data-list="col:{status}"', 1)[1].split("</ol>", 1)[0]
    return re.findall(r'<li class="card[^"]*" data-task="([^"]+)"', column)


def done_order(root: Path) -> list[str]:
    """Every DONE task of a board, the last completed first, read from the task files."""
    ctx = Context(root)
    done = [queries.show_task(ctx, task_id=row["id"]) for row in queries.list_tasks(ctx, statuses=["DONE"])["tasks"]]
    return [task["id"] for task in sorted(done, key=lambda task: (task.get("completedAt") or task.get("updatedAt") or "", task["id"]), reverse=True)]


def test_the_done_column_starts_with_the_task_completed_last(served: tuple[Realistic, Served, Served]) -> None:
    made, real, large = served
    for server, root in ((real, made.root), (large, large.root)):
        board = request(server.base, "/board").text
        shown = cards_of(board, "DONE")
        expected = done_order(root)
        assert shown[0] == expected[0] and shown == expected[: len(shown)], root
    assert cards_of(request(real.base, "/board").text, "DONE")[0] == made.latest_done


def test_every_card_of_a_column_can_be_reached(served: tuple[Realistic, Served, Served]) -> None:
    """On the 5,000-task board: a column shows 100 cards, "show more" up to 500, then the rest
    page by page; following the links reaches every card once, in order."""
    _made, _real, large = served
    total = queries.list_tasks(Context(large.root), statuses=["DONE"])["counts"]["byStatus"]["DONE"]
    assert total > 1000
    page = request(large.base, "/board").text
    seen = cards_of(page, "DONE")
    assert len(seen) == 100 and f"100 of {total:,}" in page
    more = re.search(r'<p class="more" data-key="more:DONE">.*?href="([^"]+)" class="show-more"', page)
    assert more
    wider = request(large.base, more.group(1).replace("&amp;", "&")).text
    seen = cards_of(wider, "DONE")
    assert len(seen) == 200
    page = request(large.base, "/board?done=500").text
    seen = cards_of(page, "DONE")
    assert len(seen) == 500
    link = re.search(r'<p class="more" data-key="more:DONE">.*?href="([^"]+)" class="page-next"', page)
    while link:
        page = request(large.base, link.group(1).replace("&amp;", "&")).text
        seen += cards_of(page, "DONE")
        link = re.search(r'<p class="more" data-key="more:DONE">.*?href="([^"]+)" class="page-next"', page)
    assert len(seen) == len(set(seen)) == total and seen == done_order(large.root)


def test_filters_narrow_every_column_and_show_as_chips(served: tuple[Realistic, Served, Served]) -> None:
    made, real, _large = served
    ctx = Context(made.root)
    labelled = next(task for task in queries.list_tasks(ctx)["tasks"] if queries.show_task(ctx, task_id=task["id"]).get("type"))
    label = queries.show_task(ctx, task_id=labelled["id"])["type"]
    page = request(real.base, f"/board?label={label}&priority=HIGH").text
    assert 'class="chip filter"' in page and f"label:</span> {label}" in page and "priority:</span> High" in page
    for status in queries.BOARD_COLUMNS:
        for task_id in cards_of(page, status):
            task = queries.show_task(ctx, task_id=task_id)
            assert task["priority"] == "HIGH" and (task.get("type") == label or label in (task.get("source") or {}).get("fields", {}).get("labels", []))
    # The chip's ✕ takes its filter away and keeps the other.
    remove = re.search(r'<a class="remove" href="([^"]+)" aria-label="remove [^"]*priority', page)
    assert remove and remove.group(1).replace("&amp;", "&") == f"/board?label={label}"


def test_search_results_have_kind_title_snippet_and_link(served: tuple[Realistic, Served, Served]) -> None:
    made, real, _large = served
    ctx = Context(made.root)
    task = queries.show_task(ctx, task_id=made.latest_done)
    page = request(real.base, "/search?" + urlencode({"q": f'kind:task "{task["title"]}"'})).text
    result = re.search(rf'<li class="result" data-id="{made.latest_done}" data-kind="task">(.*?)</li>', page, re.S)
    assert result, page[:3000]
    shown = result.group(1)
    assert '<span class="chip kind">board task</span>' in shown
    assert f'<a class="result-title" href="/tasks/{made.latest_done}">' in shown and task["title"].replace("'", "&#x27;") in shown
    assert '<p class="snippet">' in shown and "<b>" in shown
    plan = request(real.base, "/search?q=rounding").text
    assert '<span class="chip kind">plan item</span>' in plan and 'href="/memory#plan"' in plan
    record = request(real.base, f"/expand?id={made.capsules[0]}").text
    assert "created_at" in record and not re.search(r"created_at.{0,40}\b1[0-9]{9}\b", record)  # a time, not seconds
    assert "<dt>path</dt>" not in record and "name_norm" not in record and '"moss_capsule"' not in record


def test_memory_messages_and_agents_read_as_people_read_them(served: tuple[Realistic, Served, Served]) -> None:
    made, real, _large = served
    memory = request(real.base, "/memory").text
    assert "<th>why</th>" in memory and "per-line rounding drifts from the ledger by a cent on long invoices" in memory
    messages = request(real.base, "/messages").text
    # The envoy root's own mailbox is empty: the page opens on a sleeve with mail.
    assert re.search(r'<h2 class="sleeve" data-sleeve="(alice|bob)"', messages)
    assert re.findall(r'<a href="/messages\?sleeve=(\w+)"[^>]*>\w+ <span class="unread" aria-label="(\d+) unread">', messages) == [("alice", "2"), ("bob", "3")]
    assert 'class="thread" href="/messages?sleeve=' in messages and "Can you take the rounding task?" in messages
    thread = request(real.base, "/messages?sleeve=bob&thread=rounding").text
    assert "Thread: Can you take the rounding task?" in thread and thread.count('<li class="message') == 3
    session = request(real.base, f"/agents/{made.sessions[0]}").text
    events = re.findall(r'<li class="event', session)
    assert len(events) > 20 and session.count("<details>") == len(events)  # one line each, the record on demand
    assert "demo.echo → echo: look at part 1" in session


def test_a_live_change_sends_the_card_not_the_board(served: tuple[Realistic, Served, Served]) -> None:
    """On the 5,000-task board: after one task's title changes, the open board asks what
    changed and is sent that card (a few hundred bytes), not the 100-card columns."""
    _made, _real, large = served
    first = request(large.base, "/board")
    render = re.search(r'<main id="main" data-render="([^"]+)"', first.text)
    assert render
    cookie = {"Cookie": f"moss_csrf={first.cookies['moss_csrf']}"}  # as a browser keeps it: the forms' token stays the same
    same = request(large.base, "/board", headers={**cookie, "X-Moss-Live": render.group(1)})
    assert same.json() == {"render": render.group(1), "title": "Board"}
    task = cards_of(first.text, "BACKLOG")[0]
    editing.update_task(Context(large.root), task_id=task, title="Renamed while the board is open")
    diff = request(large.base, "/board", headers={**cookie, "X-Moss-Live": render.group(1)})
    changed = diff.json()
    assert set(changed) == {"render", "title", "parts"} and list(changed["parts"]) == [f"card:{task}"]
    assert "Renamed while the board is open" in changed["parts"][f"card:{task}"]
    assert len(diff.body) < 2000 < len(first.body) / 100, (len(diff.body), len(first.body))


def test_no_page_scrolls_sideways_and_no_cell_is_narrower_than_its_longest_word(
    served: tuple[Realistic, Served, Served], shots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_browser()
    made, real, large = served
    ctx = Context(made.root)
    review = queries.list_tasks(ctx, statuses=["REVIEW"])["tasks"][0]["id"]
    label = next(task["type"] for task in (queries.show_task(ctx, task_id=row["id"]) for row in queries.list_tasks(ctx)["tasks"]) if task.get("type"))
    pages: list[tuple[Served, str]] = [
        (real, "/board"),
        (real, "/board?status=DONE"),
        (real, f"/board?label={label}"),
        (real, f"/tasks/{review}"),
        (real, f"/tasks/{made.latest_done}"),
        (real, "/capsules"),
        (real, f"/capsules/{made.long_capsule}"),
        (real, "/messages"),
        (real, "/messages?sleeve=alice&thread=rounding"),
        (real, "/memory"),
        (real, "/search?q=rounding"),
        (real, "/search?q=claim+endpoint"),
        (real, f"/expand?id={made.latest_done}"),
        (real, "/agents"),
        (real, f"/agents/{made.sessions[0]}"),
        (large, "/board"),
        (large, "/board?status=DONE"),
    ]
    problems: dict[str, list[str]] = {}
    heights: dict[str, int] = {}
    errors: list[str] = []
    firsts: dict[int, str | None] = {}
    with browser_page(shots) as page:
        page.on("pageerror", lambda error: errors.append(str(error)))
        for width, height in VIEWPORTS:
            page.set_viewport_size({"width": width, "height": height})
            for server, path in pages:
                page.goto(server.base + path)
                page.wait_for_load_state("load")
                found: list[str] = page.evaluate(LAYOUT_PROBLEMS)
                where = f"{width}x{height} {'5000 ' if server is large else ''}{path}"
                if found:
                    problems[where] = found[:5]
                tall = heights[where] = page.evaluate("document.documentElement.scrollHeight")
                name = re.sub(r"[^A-Za-z0-9]+", "-", f"{width}-{'big' if server is large else 'real'}-{path}").strip("-")
                page.screenshot(path=str(shots / f"{name}.png"), full_page=tall <= 4000)
            page.goto(real.base + "/board")
            firsts[width] = page.evaluate("document.querySelector('.column[data-status=\"DONE\"] .card')?.dataset.task")
    with capsys.disabled():
        print("\n[web] page heights:\n  " + "\n  ".join(f"{where}: {tall:,} px" for where, tall in heights.items()))
    assert problems == {} and errors == []
    assert firsts == {1366: made.latest_done, 390: made.latest_done}  # the Done column as a person sees it
    boards = {where: tall for where, tall in heights.items() if where.endswith(" /board")}
    assert len(boards) == 4 and max(boards.values()) < 2500, boards  # about a screen: the columns scroll, not the page

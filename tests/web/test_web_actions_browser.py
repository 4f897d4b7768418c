"""Every action of the board, by click and by keyboard, in headless Chromium, changes the files
exactly as the command line changes a twin workspace: creating a task (the New task form, by
mouse and by keys), moving one by drag and drop and by keys (a move back asks for its reason),
claiming, releasing, commenting, archiving, QA rejecting by the items of the definition of done.
After each action the twin gets the equivalent `moss task …` command; at the end every board
file of the two clones matches, times and new ids aside, and so does the activity log."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from helpers import wait_for
from web_support import (
    board_task,
    browser_page,
    git,
    make_workspace,
    mask_times,
    require_browser,
    serve,
    shots,  # noqa: F401  (a fixture)
)

from moss_files.board import conversation, editing, queries
from moss_files.foundation.context import Context

pytestmark = pytest.mark.slow


def status_of(root: Path, task_id: str) -> str:
    return str(queries.show_task(Context(root), task_id=task_id)["status"])


def cli(root: Path, *args: str) -> dict[str, Any]:
    done = run_cli("moss", *args, "--json", cwd=root)
    assert done.returncode == 0, (args, done.stderr)
    return dict(json.loads(done.stdout))


def board_files(root: Path, renames: dict[str, str]) -> dict[str, str]:
    """Every board file (path -> text), times masked and the ids in `renames` replaced."""
    found = {}
    for path in sorted((root / ".moss" / "board").rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        text = mask_times(path.read_text())
        relpath = path.relative_to(root).as_posix()
        for old, new in renames.items():
            text, relpath = text.replace(old, new), relpath.replace(old, new)
        if path.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
            for row in rows:
                for key in ("id", "timestamp", "ts"):
                    row.pop(key, None)
            text = "\n".join(json.dumps(row, sort_keys=True) for row in rows)
        found[relpath] = text
    return found


def test_every_board_action_by_click_and_by_keyboard_changes_the_files_as_the_command_line_does(tmp_path: Path, shots: Path) -> None:
    require_browser()
    web = make_workspace(tmp_path / "web")
    ctx = Context(web)
    editing.init_board(ctx, name="shop")
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    tasks = {
        "drag": editing.create_task(ctx, epic_id=epic, title="Drag me to planning", priority="high")["task"]["id"],
        "keys": editing.create_task(ctx, epic_id=epic, title="Move me by keys")["task"]["id"],
        "back": editing.create_task(ctx, epic_id=epic, title="Send me back", status="working")["task"]["id"],
        "claim": editing.create_task(ctx, epic_id=epic, title="Claim me", status="planning")["task"]["id"],
        "archive": editing.create_task(ctx, epic_id=epic, title="Shelve me", priority="low")["task"]["id"],
        "review": board_task(ctx, epic, "Review me", to="REVIEW"),
    }
    git(web, "add", "-A")
    git(web, "commit", "-q", "-m", "a board to act on")
    twin = tmp_path / "cli"
    subprocess.run(["git", "clone", "-q", str(web), str(twin)], check=True)
    renames: dict[str, str] = {}  # the web's new ids -> the twin's

    def created_by_web(before: set[str]) -> str:
        return wait_for(lambda: next(iter({t["id"] for t in queries.list_tasks(Context(web))["tasks"]} - before), None), timeout=15, message="the new task")

    with serve(web) as served, browser_page(shots) as page:
        page.set_viewport_size({"width": 1366, "height": 900})
        base = served.base

        # 1. A new task by mouse: the New task form.
        page.goto(f"{base}/board")
        page.wait_for_selector("body[data-stream=open]")
        before = {t["id"] for t in queries.list_tasks(ctx)["tasks"]}
        page.get_by_text("New task", exact=True).click()
        form = page.locator("form.new-task-form")
        form.get_by_label("Title").fill("Card form")
        form.get_by_label("Priority").select_option("HIGH")
        form.get_by_label("Description (markdown, optional)").fill("The **card** form.\n\nWith a second paragraph.")
        page.screenshot(path=str(shots / "1-new-task-form.png"))
        form.get_by_role("button", name="Create task").click()
        made = created_by_web(before)
        page.wait_for_selector(f'.notice.done a[href="/tasks/{made}"]')
        renames[made] = cli(
            twin, "task", "new", "Card form", "-e", epic, "-p", "HIGH", "-s", "BACKLOG", "-d", "The **card** form.\n\nWith a second paragraph."
        )["task"]["id"]

        # 2. A new task by keys: n opens the form, Enter sends it.
        before = {t["id"] for t in queries.list_tasks(ctx)["tasks"]}
        page.locator("h1").click()  # nothing focused that takes keys
        page.keyboard.press("n")
        page.keyboard.type("Receipt email")
        page.keyboard.press("Enter")
        made = created_by_web(before)
        page.wait_for_selector(f'.notice.done a[href="/tasks/{made}"]')
        renames[made] = cli(twin, "task", "new", "Receipt email", "-e", epic, "-p", "MEDIUM", "-s", "BACKLOG")["task"]["id"]

        # 3. Drag and drop: Backlog -> Planning.
        page.goto(f"{base}/board")
        page.wait_for_selector("body[data-stream=open]")
        page.locator(f'[data-task="{tasks["drag"]}"]').drag_to(page.locator('.column[data-status="PLANNING"]'))
        wait_for(lambda: status_of(web, tasks["drag"]) == "PLANNING", timeout=15, message="the dragged task in PLANNING")
        page.wait_for_selector(f'[data-list="col:PLANNING"] [data-task="{tasks["drag"]}"]')
        page.screenshot(path=str(shots / "2-dragged-to-planning.png"))
        cli(twin, "task", "status", tasks["drag"], "PLANNING")

        # 4. Keys: Space picks the card up, three steps right (Planning, Awaiting approval,
        # Working), Space puts it there.
        page.locator(f'[data-task="{tasks["keys"]}"] a.title').focus()
        page.keyboard.press("Space")
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        page.keyboard.press("Space")
        wait_for(lambda: status_of(web, tasks["keys"]) == "WORKING", timeout=15, message="the task moved by keys in WORKING")
        page.wait_for_selector(f'[data-list="col:WORKING"] [data-task="{tasks["keys"]}"]')
        assert page.evaluate("document.activeElement.closest('.card')?.dataset.task") == tasks["keys"]  # focus stays on the card
        cli(twin, "task", "status", tasks["keys"], "WORKING")

        # 5. A move back needs a reason: the dialog asks for it.
        page.locator(f'[data-task="{tasks["back"]}"]').drag_to(page.locator('.column[data-status="PLANNING"]'))
        page.wait_for_selector("dialog.reason-dialog[open]")
        page.get_by_label("Reason").fill("the plan missed the refunds")
        page.screenshot(path=str(shots / "3-reason-for-a-move-back.png"))
        page.get_by_role("button", name="Move").click()
        wait_for(lambda: status_of(web, tasks["back"]) == "PLANNING", timeout=15, message="the task moved back")
        cli(twin, "task", "status", tasks["back"], "PLANNING", "--reason", "the plan missed the refunds")
        # A move the board refuses is put back, and the page says why.
        page.locator(f'[data-task="{tasks["archive"]}"]').drag_to(page.locator('.column[data-status="REVIEW"]'))
        page.wait_for_selector(".toast.error")
        assert "INVALID_TRANSITION" in page.locator(".toast").inner_text()
        page.wait_for_selector(f'[data-list="col:BACKLOG"] [data-task="{tasks["archive"]}"]')
        assert status_of(web, tasks["archive"]) == "BACKLOG"

        # 6. Claim by mouse, 7. release by keys, 8. comment by mouse.
        page.goto(f"{base}/tasks/{tasks['claim']}")
        page.get_by_label("Claim as worker").fill("arch-2")
        page.get_by_role("button", name="Claim").click()
        page.wait_for_selector(".notice.done")
        assert page.locator(".owner").first.inner_text() == "arch-2"
        cli(twin, "task", "claim", "-w", "arch-2", "-s", "PLANNING", "--task", tasks["claim"])
        page.get_by_role("button", name="Release").focus()
        page.keyboard.press("Enter")
        page.wait_for_selector("text=Released: the task can be claimed again.")
        cli(twin, "task", "release", tasks["claim"])
        page.get_by_label("Add a comment").fill("Please split the refunds out.")
        page.get_by_role("button", name="Comment", exact=True).click()
        page.wait_for_selector("li.comment")
        commented = cli(twin, "task", "comment", tasks["claim"], "Please split the refunds out.")
        renames[conversation.list_comments(ctx, task_id=tasks["claim"])["comments"][-1]["id"]] = commented["commentId"]

        # 9. Archive by keys.
        page.goto(f"{base}/tasks/{tasks['archive']}")
        page.get_by_label("Why archive it (optional)").fill("not this quarter")
        page.get_by_role("button", name="Archive").focus()
        page.keyboard.press("Enter")
        page.wait_for_selector('h1[data-status="ARCHIVED"]')
        cli(twin, "task", "archive", tasks["archive"], "--reason", "not this quarter")

        # 10. QA reject by the items of the definition of done.
        page.goto(f"{base}/tasks/{tasks['review']}")
        page.get_by_label("tests pass").check()
        page.get_by_label("What is wrong").fill("the expiry check is missing")
        page.screenshot(path=str(shots / "4-qa-reject-by-items.png"), full_page=True)
        page.get_by_role("button", name="QA reject").click()
        page.wait_for_selector('h1[data-status="WORKING"]')
        cli(twin, "task", "qa-reject", tasks["review"], "--reason", "the expiry check is missing", "--failed-dod", "1")
        page.screenshot(path=str(shots / "5-after-qa-reject.png"), full_page=True)

    shown = queries.show_task(ctx, task_id=tasks["review"])
    assert [entry["item"] for entry in shown["failedDodItems"]] == ["tests pass"]
    by_web, by_cli = board_files(web, renames), board_files(twin, {})
    assert sorted(by_web) == sorted(by_cli)
    for relpath in by_web:
        assert by_web[relpath] == by_cli[relpath], relpath
    status = [re.sub(r"\s+", " ", line) for line in git(web, "status", "--porcelain").splitlines()]
    for old, new in renames.items():
        status = [line.replace(old, new) for line in status]
    assert sorted(status) == sorted(re.sub(r"\s+", " ", line) for line in git(twin, "status", "--porcelain").splitlines())


def test_a_live_refresh_keeps_focus_and_an_unsent_filter(repo: Path, shots: Path) -> None:
    """Another process edits a task while a person has chosen an epic (not yet applied) and has
    the keyboard on a card: the card's new title shows, the choice and the focus stay, and
    the page was sent that card only."""
    require_browser()
    make_workspace(repo)
    ctx = Context(repo)
    checkout = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    editing.create_epic(ctx, title="Refunds", status="ACTIVE")
    first = editing.create_task(ctx, epic_id=checkout, title="Card form", priority="high")["task"]["id"]
    other = editing.create_task(ctx, epic_id=checkout, title="Receipt email")["task"]["id"]
    for number in range(40):
        editing.create_task(ctx, epic_id=checkout, title=f"Filler task {number}", priority="low")
    with serve(repo) as served, browser_page(shots) as page:
        answers: list[Any] = []
        page.on("response", lambda answer: answers.append(answer) if answer.request.headers.get("x-moss-live") else None)
        page.goto(f"{served.base}/board")
        page.wait_for_selector("body[data-stream=open]")
        filters = page.locator("form.filters")
        filters.get_by_label("Epic").select_option(label="Refunds (0)")
        page.locator(f'[data-task="{first}"] a.title').focus()
        editing.update_task(ctx, task_id=other, title="Receipt email, with the VAT line")
        page.wait_for_selector(f'[data-task="{other}"] a.title:text("Receipt email, with the VAT line")', timeout=10_000)
        page.screenshot(path=str(shots / "1-after-a-live-change.png"))
        assert filters.get_by_label("Epic").input_value() != ""  # the unsent choice stays
        assert page.evaluate("document.activeElement.closest('.card')?.dataset.task") == first
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # never reloaded
        sizes = [len(answer.body()) for answer in answers]
    assert sizes and max(sizes) < 2000, sizes

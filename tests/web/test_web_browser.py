"""The web view in a real headless browser (Chromium from the system packages, driven by
Playwright with an explicit executable path): approving a plan by clicking changes the task
file exactly as `moss task approve` does; a claim by another process shows on the open board
within a second, without a reload; hostile content runs nothing. Each test saves screenshots
under its tmp_path, or under $MOSS_TEST_ARTIFACTS/web/ when set (the folder is printed), for a
person to look at."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from web_support import (
    Full,
    board_task,
    browser_page,
    fill_workspace,
    git,
    make_workspace,
    mask_times,
    require_browser,
    serve,
    shots,  # noqa: F401  (a fixture)
)

from moss_files.board import editing
from moss_files.foundation.context import Context

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def browser() -> None:
    require_browser()


def changed_lines(diff: str) -> list[str]:
    """The added and removed lines of a diff, times masked (the blob hashes differ with them)."""
    return [mask_times(line) for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def activity_lines(root: Path) -> list[str]:
    """Every line of the board's activity log (a file per day), oldest file first."""
    return [line for path in sorted((root / ".moss" / "board" / "activity").glob("*.jsonl")) for line in path.read_text().splitlines()]


def activity_tail(root: Path, count: int) -> list[dict[str, Any]]:
    """The last `count` activity events, without the fields that differ between two runs."""
    lines = activity_lines(root)[-count:]
    events = [json.loads(line) for line in lines]
    for event in events:
        event.pop("id", None)
        event.pop("timestamp", None)
    return events


def test_approving_a_plan_by_clicking_changes_the_file_as_moss_task_approve_does(tmp_path: Path, shots: Path) -> None:
    web = make_workspace(tmp_path / "web")
    ctx = Context(web)
    editing.init_board(ctx, name="shop")
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE", epic_rails=["no secrets in logs"])["epic"]["id"]
    task = board_task(ctx, epic, "Card form", to="AWAITING_APPROVAL", description="The **card** form.")
    git(web, "add", "-A")
    git(web, "commit", "-q", "-m", "a plan waits for approval")
    cli = tmp_path / "cli"  # the twin: the same commit, driven by the command line
    subprocess.run(["git", "clone", "-q", str(web), str(cli)], check=True)
    relpath = f".moss/board/tasks/{task}.md"
    log_lines = len(activity_lines(web))

    with serve(web) as served, browser_page(shots) as page:
        page.goto(f"{served.base}/tasks/{task}")
        page.wait_for_selector("body[data-stream=open]")
        assert page.locator("h1").get_attribute("data-status") == "AWAITING_APPROVAL"
        page.screenshot(path=str(shots / "1-plan-awaiting-approval.png"), full_page=True)
        page.get_by_role("button", name="Approve plan").click()
        page.wait_for_selector(".notice.done")
        assert page.locator("h1").get_attribute("data-status") == "WORKING"
        assert "Approve plan" not in page.content()
        page.screenshot(path=str(shots / "2-plan-approved.png"), full_page=True)

    approved = run_cli("moss", "task", "approve", task, cwd=cli)
    assert approved.returncode == 0, approved.stderr
    by_click, by_cli = ((root / relpath).read_text() for root in (web, cli))
    assert by_click != git(web, "show", f"HEAD:{relpath}")  # it did change
    assert mask_times(by_click) == mask_times(by_cli)
    changed_by_click, changed_by_cli = (changed_lines(git(root, "diff", "-U0", "--", relpath)) for root in (web, cli))
    assert changed_by_click == changed_by_cli and changed_by_click  # the same lines, changed the same way
    added = len(activity_lines(web)) - log_lines
    assert added >= 1 and activity_tail(web, added) == activity_tail(cli, added)
    assert git(web, "status", "--porcelain") == git(cli, "status", "--porcelain")  # no other file touched


def test_a_claim_by_another_process_appears_on_the_open_board_within_a_second(repo: Path, shots: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_workspace(repo)
    ctx = Context(repo)
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    task = editing.create_task(ctx, epic_id=epic, title="Card form", status="working", priority="high")["task"]["id"]
    editing.create_task(ctx, epic_id=epic, title="Receipt email", priority="low")
    with serve(repo) as served, browser_page(shots) as page:
        page.goto(f"{served.base}/board")
        page.wait_for_selector("body[data-stream=open]")
        card = page.locator(f'[data-task="{task}"]')
        assert card.get_attribute("data-owner") == ""
        page.screenshot(path=str(shots / "1-board-before-the-claim.png"), full_page=True)
        claimed = run_cli("moss", "task", "claim", "-w", "dev-7", "--json", cwd=repo)  # another process
        written = time.monotonic()
        assert claimed.returncode == 0 and json.loads(claimed.stdout)["task"]["id"] == task, claimed.stderr
        page.wait_for_selector(f'[data-task="{task}"][data-owner="dev-7"]', timeout=1000)
        seen = time.monotonic() - written
        page.screenshot(path=str(shots / "2-board-after-the-claim.png"), full_page=True)
        assert page.locator(f'[data-task="{task}"] .owner').inner_text() == "@dev-7"
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # never reloaded
        with capsys.disabled():
            print(f"[web] the claim showed on the board {seen * 1000:.0f} ms after the claiming process returned")


def test_typing_a_reason_and_rejecting_in_qa(repo: Path, shots: Path) -> None:
    make_workspace(repo)
    ctx = Context(repo)
    epic = editing.create_epic(ctx, title="Checkout", status="ACTIVE")["epic"]["id"]
    task = board_task(ctx, epic, "Card form", to="REVIEW")
    with serve(repo) as served, browser_page(shots) as page:
        page.goto(f"{served.base}/tasks/{task}")
        page.get_by_label("tests pass").check()  # an item of the definition of done, not free text
        page.get_by_label("What is wrong").fill("the expiry check is missing")
        page.screenshot(path=str(shots / "1-qa-reject-reason.png"), full_page=True)
        page.get_by_role("button", name="QA reject").click()
        page.wait_for_selector(".notice.done")
        assert page.locator("h1").get_attribute("data-status") == "WORKING"
        page.screenshot(path=str(shots / "2-qa-rejected.png"), full_page=True)
    shown = json.loads(run_cli("moss", "task", "show", task, "--json", cwd=repo).stdout)
    assert shown["reopenCount"] == 1 and shown["reopenReason"] == "the expiry check is missing"
    assert [entry["item"] for entry in shown["failedDodItems"]] == ["tests pass"]


def test_hostile_content_runs_nothing_in_a_real_browser(tmp_path: Path, shots: Path) -> None:
    made: Full = fill_workspace(tmp_path / "project")
    dialogs: list[str] = []
    problems: list[str] = []
    with serve(made.root) as served, browser_page(shots) as page:
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.on("pageerror", lambda error: problems.append(str(error)))
        pages = ["/", f"/tasks/{made.tasks['REVIEW']}", f"/capsules/{made.hostile_capsule}", "/messages", "/memory", "/search?q=hostile", "/agents"]
        pages.append(f"/agents/{made.session}")
        for number, path in enumerate(pages, start=1):
            page.goto(served.base + path)
            page.wait_for_load_state("load")
            page.screenshot(path=str(shots / f"{number}-{path.strip('/').replace('/', '-').split('?')[0] or 'board'}.png"))
        page.goto(served.base + "/search?q=hostile")
        page.locator("li.result summary").first.click()  # expand in place
        page.wait_for_selector("li.result article.record")
        page.screenshot(path=str(shots / "9-expanded-in-place.png"), full_page=True)
        assert page.locator("a[href^='javascript:' i]").count() == 0
    assert dialogs == [] and problems == []

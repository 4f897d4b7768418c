"""Moe's newest board behaviour on real files, through the use cases, the CLI and a real MCP
client: the get_context guard and where its record lives, the plan gates, QA's bounded
escalation and the park for a person, the adjacent-epic claim order, the branch policy on a
real git checkout, and disk-state signatures on handoff notes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from board_support import Calls, Clock, board, connect, moss
from conftest import run_cli
from mcp_support import anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)

from moss_files.board import claims, editing, plans, queries, waiting
from moss_files.foundation import document, fs
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import MossError


def agent(root: Path, clock: Clock | None = None) -> Context:
    return Context(root, actor=AGENT, **({"clock": clock} if clock else {}))


def refused(call: Any) -> MossError:
    with pytest.raises(MossError) as caught:
        call()
    return caught.value


def task_file(root: Path, task: str) -> Path:
    return root / ".moss" / "board" / "tasks" / f"{task}.md"


def meta(root: Path, task: str) -> dict[str, Any]:
    return dict(document.parse(task_file(root, task).read_text()).meta)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def git_board(root: Path, **settings: str) -> Path:
    """A board in a git repository with one commit (a tracked src/app.py), the settings given."""
    board(root, approval="TURBO")
    git(root, "init", "-q", "-b", "main")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    if settings:
        project = root / ".moss" / "board" / "project.md"
        text = project.read_text()
        for key, value in settings.items():
            text = text.replace(f"  {key}: ''", f"  {key}: {value}")
        project.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


def working_task(root: Path, title: str = "Card form", *, dod: list[str] | None = None, steps: list[Any] | None = None, epic: str | None = None) -> str:
    """A WORKING task with a plan (TURBO approves it), held by nobody."""
    human = Context(root)
    epic_id = epic or editing.create_epic(human, title="Checkout")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic_id, title=title, status="PLANNING", definition_of_done=dod or [])["task"]["id"]
    assert claims.claim_next_task(agent(root), statuses=["PLANNING"], worker_id="arch")["task"]["id"] == task
    plans.submit_plan(agent(root), task_id=task, worker_id="arch", steps=steps or ["Build the form", "Write a test"])
    assert queries.show_task(human, task_id=task)["status"] == "WORKING"
    return task


def finish(root: Path, task: str, worker: str = "dev") -> None:
    """`worker` claims the task and completes every step and the task: it goes to REVIEW."""
    ctx = agent(root)
    assert claims.claim_next_task(ctx, statuses=["WORKING"], worker_id=worker)["task"]["id"] == task
    for step in queries.show_task(ctx, task_id=task)["implementationPlan"]:
        plans.complete_step(ctx, task_id=task, step_id=step["stepId"], worker_id=worker)
    assert plans.complete_task(ctx, task_id=task, worker_id=worker)["status"] == "REVIEW"


def qa_rejects(root: Path, task: str, *failed: str | int, qa: str = "qa", reason: str = "not yet") -> dict[str, Any]:
    ctx = agent(root)
    assert claims.claim_next_task(ctx, statuses=["REVIEW"], worker_id=qa)["task"]["id"] == task
    plans.get_context(ctx, task_id=task, worker_id=qa)
    return claims.qa_reject(ctx, task_id=task, reason=reason, failed_dod_items=list(failed) or None, worker_id=qa)


def replan(root: Path, task: str) -> None:
    ctx = agent(root)
    assert claims.claim_next_task(ctx, statuses=["PLANNING"], worker_id="arch")["task"]["id"] == task
    plans.submit_plan(ctx, task_id=task, worker_id="arch", steps=["Build the form again", "Write a better test"])


def chat(root: Path, channel: str) -> list[str]:
    return [m["content"] for m in moss(root, "board", "chat", "read", channel, "--limit", "50")["messages"]]


# --------------------------------------------------------------------------- get_context before start_step and QA


def test_the_holders_get_context_is_recorded_once_and_required_before_start_step(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root)
    ctx = agent(root)
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev")
    before = task_file(root, task).read_bytes()
    error = refused(lambda: plans.start_step(ctx, task_id=task, step_id="step-1", worker_id="dev"))
    assert (error.code, error.status, error.exit_code) == ("NOT_ALLOWED", 403, 5)
    assert error.message == f"Call moe.get_context for task {task} before moe.start_step"
    assert error.details == {"taskId": task, "workerId": "dev", "tool": "moe.start_step", "contextFetched": False}
    assert f"moss task context {task} -w dev" in (error.hint or "")
    plans.get_context(ctx, task_id=task, worker_id="bystander")  # a worker that does not hold it records nothing
    assert task_file(root, task).read_bytes() == before

    plans.get_context(ctx, worker_id="dev")  # the worker's own task, found without its id
    after = task_file(root, task).read_text().splitlines()
    assert [line for line in after if line not in before.decode().splitlines()] == ["context_fetched_by:", "  - dev"]
    recorded = task_file(root, task).read_bytes()
    plans.get_context(ctx, task_id=task, worker_id="dev")
    assert task_file(root, task).read_bytes() == recorded  # the second read writes nothing
    assert plans.start_step(ctx, task_id=task, step_id="step-1", worker_id="dev")["success"] is True
    assert queries.show_task(ctx, task_id=task)["contextFetchedBy"] == ["dev"]


def test_a_change_of_hands_resets_the_record(tmp_path: Path) -> None:
    clock = Clock()
    root = board(tmp_path / "p", approval="TURBO", lease_ms=60_000)
    task = working_task(root)
    ctx = agent(root, clock)
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev")
    plans.get_context(ctx, task_id=task, worker_id="dev")
    claims.release_task(ctx, task_id=task, worker_id="dev")
    assert "context_fetched_by" not in meta(root, task)
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev")  # the same worker, again: it reads again
    assert refused(lambda: plans.start_step(ctx, task_id=task, step_id="step-1", worker_id="dev")).code == "NOT_ALLOWED"
    plans.get_context(ctx, task_id=task, worker_id="dev")
    clock.tick(minutes=2)  # dev's lease runs out: its task goes to the next worker, who has read nothing
    assert claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev2")["task"]["id"] == task
    assert "context_fetched_by" not in meta(root, task)
    assert refused(lambda: plans.start_step(ctx, task_id=task, step_id="step-1", worker_id="dev2")).code == "NOT_ALLOWED"


def test_the_human_path_is_not_guarded(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root)
    human = Context(root)
    claims.claim_next_task(agent(root), statuses=["WORKING"], worker_id="dev")
    assert plans.start_step(human, task_id=task, step_id="step-1")["success"] is True  # a person, naming no worker
    claims.release_task(human, task_id=task)
    # Nobody holds it: a worker that names itself is not guarded either (Moe: null owner = human path).
    assert plans.start_step(agent(root), task_id=task, step_id="step-2", worker_id="dev")["success"] is True
    for step in ("step-1", "step-2"):
        plans.complete_step(human, task_id=task, step_id=step)
    plans.complete_task(human, task_id=task)
    claims.claim_next_task(agent(root), statuses=["REVIEW"], worker_id="qa")
    assert refused(lambda: claims.qa_approve(agent(root), task_id=task, worker_id="qa")).code == "NOT_ALLOWED"
    assert refused(lambda: claims.qa_reject(agent(root), task_id=task, reason="x", worker_id="qa")).code == "NOT_ALLOWED"
    assert claims.qa_approve(human, task_id=task, summary="a person looked")["status"] == "DONE"


# --------------------------------------------------------------------------- plan gates


def test_the_size_gate_warns_refuses_and_remembers_its_warnings(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    human = Context(root)
    epic = editing.create_epic(human, title="E")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="Big", status="PLANNING")["task"]["id"]
    ctx = agent(root)
    claims.claim_next_task(ctx, statuses=["PLANNING"], worker_id="arch")
    before = task_file(root, task).read_bytes()
    too_large = refused(lambda: plans.submit_plan(ctx, task_id=task, worker_id="arch", steps=[f"step {n}" for n in range(13)]))
    assert (too_large.code, too_large.exit_code) == ("PLAN_TOO_LARGE", 4)
    assert (too_large.details["stepCount"], too_large.details["thresholds"]["maxSteps"]) == (13, 12)
    assert task_file(root, task).read_bytes() == before
    submitted = plans.submit_plan(ctx, task_id=task, worker_id="arch", steps=[f"step {n}" for n in range(12)])
    assert submitted["status"] == "AWAITING_APPROVAL" and submitted["warnings"] == [
        "Plan has 12 steps (target <=8); plans over 12 are refused. Consider splitting the task before it grows."
    ]
    assert meta(root, task)["plan_size_warnings"] == submitted["warnings"]
    again = plans.submit_plan(ctx, task_id=task, worker_id="arch", steps=[f"step {n}" for n in range(8)])  # a re-submission
    assert "warnings" not in again and "plan_size_warnings" not in meta(root, task)


def test_affected_files_must_exist_unless_a_step_creates_them(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("")
    (root / "src" / "link.py").symlink_to("gone.py")  # a link is there, even when its target is not
    human = Context(root)
    epic = editing.create_epic(human, title="E")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="T", status="PLANNING")["task"]["id"]
    ctx = agent(root)
    claims.claim_next_task(ctx, statuses=["PLANNING"], worker_id="arch")
    before = task_file(root, task).read_bytes()
    plan = [
        {"description": "Use the API", "affectedFiles": ["src/app.py", "src/api.py", "src/app.py/inner", "docs/"]},
        {"description": "Add the API", "newFiles": ["src/api.py"]},
    ]
    missing = refused(lambda: plans.submit_plan(ctx, task_id=task, worker_id="arch", steps=plan))
    assert (missing.code, missing.exit_code) == ("INVALID_REQUEST", 2)
    assert missing.details["missingPaths"] == ["src/app.py/inner", "docs"] and missing.details["projectRoot"] == str(root)
    assert task_file(root, task).read_bytes() == before
    plan[0]["affectedFiles"] = ["src/app.py", "src/api.py", "src/link.py", "src"]
    done = plans.submit_plan(ctx, task_id=task, worker_id="arch", steps=plan)
    assert (done["distinctFileCount"], done["newFileCount"]) == (4, 1)
    assert meta(root, task)["plan"][1]["new_files"] == ["src/api.py"]
    assert queries.show_task(human, task_id=task)["implementationPlan"][1]["newFiles"] == ["src/api.py"]


def test_the_existence_check_fails_open_when_the_root_cannot_be_read(tmp_path: Path) -> None:
    assert fs.missing_paths(tmp_path / "not-there", ["a.py"]) is None
    assert fs.missing_paths(tmp_path, ["a.py", "."]) == ["a.py"]


# --------------------------------------------------------------------------- QA's bounded escalation


def test_the_same_definition_of_done_item_failing_twice_sends_the_task_to_planning(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root, dod=["validates expiry", "has a test"])
    finish(root, task)
    first = qa_rejects(root, task, 1)
    assert (first["status"], first["escalated"], first["failedDodItems"][0]["item"]) == ("WORKING", False, "validates expiry")
    finish(root, task)
    second = qa_rejects(root, task, "Validates Expiry", "has a test")
    assert (second["status"], second["escalated"], second["repeatedFailedDodItem"]) == ("PLANNING", True, "validates expiry")
    assert second["reopenCount"] == 2 and second["exceededReopenCap"] is False
    assert [entry["reopenCount"] for entry in second["rejectionHistory"]] == [2, 1]
    stored = meta(root, task)
    assert [entry["item"] for entry in stored["failed_dod_items"]] == ["validates expiry", "validates expiry", "has a test"]
    assert [entry["reason"] for entry in stored["rejection_history"]] == ["not yet", "not yet"]
    escalated = queries.get_activity_log(Context(root), task_id=task, event_types=["QA_ESCALATED"])["events"]
    assert escalated[0]["payload"]["repeatedFailedDodItem"] == "validates expiry" and escalated[0]["payload"]["to"] == "PLANNING"
    assert any("failed twice" in text and task in text for text in chat(root, "architects"))
    replan(root, task)  # a new plan is a new attempt: the log starts over, the history stays
    assert "failed_dod_items" not in meta(root, task) and len(meta(root, task)["rejection_history"]) == 2


def test_past_the_cap_the_task_parks_in_review_until_a_person_acts(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root, dod=["validates expiry"])
    for count, expected in ((1, "WORKING"), (2, "WORKING"), (3, "PLANNING")):
        finish(root, task)
        assert qa_rejects(root, task, reason=f"round {count}")["status"] == expected
    replan(root, task)
    finish(root, task)
    parked = qa_rejects(root, task, reason="the re-plan did not help")
    assert (parked["status"], parked["parkedForHuman"], parked["needsHumanReview"], parked["reopenCount"]) == ("REVIEW", True, True, 4)
    stored = meta(root, task)
    assert stored["status"] == "REVIEW" and stored["needs_human_review"] is True and "assigned_worker" not in stored
    assert any("HUMAN REVIEW NEEDED" in text for text in chat(root, "governors"))
    # No agent is offered it, nor may act on it.
    ctx = agent(root)
    assert claims.claim_next_task(ctx, statuses=["REVIEW"], worker_id="qa2") == {"hasNext": False}
    assert waiting.wait_for_task(ctx, statuses=["REVIEW"], worker_id="qa2", timeout_ms=0)["hasNext"] is False
    for call in (
        lambda: claims.qa_approve(ctx, task_id=task, worker_id="qa2"),
        lambda: claims.qa_reject(ctx, task_id=task, reason="again", worker_id="qa2"),
        lambda: claims.set_task_status(ctx, task_id=task, status="WORKING", reason="retry", worker_id="qa2"),
    ):
        assert refused(call).code == "NOT_ALLOWED"
    # A person returns it to QA (release), which may reject again: the loop stays bounded.
    released = claims.release_task(Context(root), task_id=task, reason="looked at it; QA again")
    assert released["unparked"] is True and "needs_human_review" not in meta(root, task)
    again = qa_rejects(root, task, reason="still broken")
    assert (again["status"], again["parkedForHuman"], again["reopenCount"]) == ("REVIEW", True, 5)
    # A person reopens it: a fresh attempt; or approves it.
    moss(root, "task", "status", task, "WORKING", "-r", "a person will pair on it")
    assert "needs_human_review" not in meta(root, task) and "failed_dod_items" not in meta(root, task)
    finish(root, task)
    qa_rejects(root, task, reason="one more")  # count 6: parked again
    assert moss(root, "task", "qa-approve", task, "--summary", "good enough")["status"] == "DONE"
    assert "needs_human_review" not in meta(root, task)


def test_qa_reject_from_the_cli_names_items_and_issues(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root, dod=["validates expiry", "has a test"])
    finish(root, task)
    moss(root, "task", "claim", "-w", "qa", "-s", "REVIEW")
    moss(root, "task", "context", task, "-w", "qa")
    issues = json.dumps([{"type": "test_failure", "description": "test_expiry fails", "file": "tests/test_card.py", "line": 12}])
    bad = moss(root, "task", "qa-reject", task, "-r", "x", "--failed-dod", "9", "-w", "qa", code=2)
    assert bad["error"]["details"]["field"] == "failedDodItems"
    rejected = moss(root, "task", "qa-reject", task, "-r", "expiry untested", "--failed-dod", "2", "--issues-json", "-", "-w", "qa", input=issues)
    assert rejected["rejectionDetails"] == {"failedDodItems": ["has a test"], "issues": json.loads(issues)}
    shown = moss(root, "task", "show", task)
    assert shown["rejectionHistory"][0]["issues"][0]["line"] == 12 and shown["failedDodItems"][0]["rejectedBy"] == "qa"


# --------------------------------------------------------------------------- the adjacent epic


def test_a_worker_keeps_to_the_epic_of_its_last_claim(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    human = Context(root)
    first = editing.create_epic(human, title="A")["epic"]["id"]
    second = editing.create_epic(human, title="B")["epic"]["id"]
    a1 = editing.create_task(human, epic_id=first, title="a1", status="WORKING")["task"]["id"]
    a2 = editing.create_task(human, epic_id=first, title="a2", status="WORKING", priority="LOW")["task"]["id"]
    b1 = editing.create_task(human, epic_id=second, title="b1", status="WORKING", priority="HIGH")["task"]["id"]
    ctx = agent(root)
    assert claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev", epic_id=first)["task"]["id"] == a1
    worker_file = root / ".moss" / "board" / "workers" / "dev.md"
    assert document.parse(worker_file.read_text()).meta["last_epic"] == first
    plans.complete_task(ctx, task_id=a1, worker_id="dev")
    # a2 is LOW and b1 HIGH, but a2 is next to what dev just finished.
    assert claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev")["task"]["id"] == a2
    assert moss(root, "worker", "show", "dev")["epicId"] == first
    plans.complete_task(ctx, task_id=a2, worker_id="dev")
    a3 = editing.create_task(human, epic_id=first, title="a3", status="WORKING", priority="LOW")["task"]["id"]
    assert moss(root, "task", "claim", "-w", "dev", "--no-adjacent")["task"]["id"] == b1  # priority first, as asked
    assert document.parse(worker_file.read_text()).meta["last_epic"] == second
    assert claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev2")["task"]["id"] == a3  # dev2 has no last epic


# --------------------------------------------------------------------------- an explicit task, a task's own reopen budget


def test_a_claim_may_name_its_task_and_is_told_why_not(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    human = Context(root)
    epic = editing.create_epic(human, title="Checkout")["epic"]["id"]
    urgent = editing.create_task(human, epic_id=epic, title="Urgent", status="WORKING", priority="CRITICAL")["task"]["id"]
    low = editing.create_task(human, epic_id=epic, title="Low", status="WORKING", priority="LOW")["task"]["id"]
    later = editing.create_task(human, epic_id=epic, title="Later", status="WORKING", depends_on=[low])["task"]["id"]
    idea = editing.create_task(human, epic_id=epic, title="Idea")["task"]["id"]  # BACKLOG
    ctx = agent(root)
    # Named, the LOW task is claimed though a CRITICAL one is first in the queue.
    assert claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev", task_id=low)["task"]["id"] == low
    assert meta(root, low)["assigned_worker"] == "dev" and "assigned_worker" not in meta(root, urgent)
    for task_id, reason in (
        (low, "dev holds it"),
        (later, f"it waits on {low}"),
        (idea, "it is BACKLOG, not WORKING"),
    ):
        answer = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev2", task_id=task_id)
        assert answer == {"hasNext": False, "notClaimable": {"taskId": task_id, "reason": reason}}
    assert refused(lambda: claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev2", task_id="task-nope")).code == "NOT_FOUND"
    # The CLI says the same; a worker that holds a task is told so first, as without a name.
    said = run_cli("moss", "task", "claim", "-w", "dev2", "--task", idea, "--root", str(root))
    assert said.returncode == 0 and f"cannot claim {idea}: it is BACKLOG, not WORKING" in said.stdout
    assert moss(root, "task", "claim", "-w", "dev", "--task", urgent)["alreadyAssigned"]["taskId"] == low


def test_a_tasks_own_reopen_budget_comes_before_the_projects(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root)
    human = Context(root)
    assert editing.update_task(human, task_id=task, max_reopens=1)["task"]["maxReopens"] == 1
    assert meta(root, task)["max_reopens"] == 1
    finish(root, task)
    first = qa_rejects(root, task)  # the project allows 3; this task 1: re-plan at once
    assert (first["status"], first["maxReopens"]) == ("PLANNING", 1)
    replan(root, task)
    finish(root, task)
    assert qa_rejects(root, task)["status"] == "REVIEW"  # past its budget: parked for a person
    # Written by hand in Moe's spelling, the budget reads the same; 0 clears it.
    text = task_file(root, task).read_text().replace("max_reopens: 1", "maxReopens: 2")
    task_file(root, task).write_text(text)
    assert queries.show_task(human, task_id=task)["maxReopens"] == 2
    editing.update_task(human, task_id=task, max_reopens=0)
    assert "maxReopens" not in meta(root, task) and "max_reopens" not in meta(root, task)
    assert refused(lambda: editing.update_task(human, task_id=task, max_reopens=-1)).code == "INVALID_REQUEST"


@pytest.mark.anyio
async def test_a_named_claim_and_a_tasks_reopen_budget_through_a_real_mcp_client(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    human = Context(root)
    epic = editing.create_epic(human, title="Checkout")["epic"]["id"]
    first = editing.create_task(human, epic_id=epic, title="First", status="WORKING", priority="HIGH")["task"]["id"]
    second = editing.create_task(human, epic_id=epic, title="Second", status="WORKING")["task"]["id"]
    async with connect(root) as client:
        calls = Calls(client)
        claimed = await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev", taskId=second)
        assert claimed["task"]["id"] == second
        refused_claim = await calls.ok("moe.claim_next_task", statuses=["REVIEW"], workerId="qa", taskId=first)
        assert refused_claim == {"hasNext": False, "notClaimable": {"taskId": first, "reason": "it is WORKING, not REVIEW"}}
        await calls.error("moe.claim_next_task", "NOT_FOUND", statuses=["WORKING"], workerId="qa", taskId="task-none")
        updated = await calls.ok("moe.update_task", taskId=first, maxReopens=2)
        assert updated["task"]["maxReopens"] == 2
        await calls.error("moe.update_task", "INVALID_REQUEST", taskId=first, maxReopens=-2)


# --------------------------------------------------------------------------- branch policy on a real checkout


def test_the_branch_policy_on_a_real_checkout(tmp_path: Path) -> None:
    root = git_board(tmp_path / "p", consolidation_branch="'moe/work-*'")
    tasks = [working_task(root, title=f"t{n}") for n in range(4)]
    ctx = agent(root)

    def complete(task: str, *extra: str, code: int = 0) -> Any:
        claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev")
        for step in ("step-1", "step-2"):
            plans.complete_step(ctx, task_id=task, step_id=step, worker_id="dev")
        return moss(root, "task", "complete", task, "-w", "dev", *extra, code=code)

    before = task_file(root, tasks[0]).read_bytes()
    wrong = complete(tasks[0], code=5)["error"]  # the checkout is on main
    assert wrong["code"] == "BRANCH_POLICY_FAILED" and wrong["status"] == 422
    assert wrong["details"] == {"taskId": tasks[0], "currentBranch": "main", "expectedPattern": "moe/work-*", "source": "checkout"}
    assert meta(root, tasks[0])["status"] == "WORKING" and meta(root, tasks[0])["assigned_worker"] == "dev"
    assert task_file(root, tasks[0]).read_bytes() != before  # the steps were written; the move was not
    reported = moss(root, "task", "complete", tasks[0], "-w", "dev", "--branch", "moe/work-7")
    assert reported["branchPolicy"] == {"pattern": "moe/work-*", "currentBranch": "moe/work-7", "source": "reported", "matched": True}

    git(root, "checkout", "-q", "-b", "moe/work-2026-01-21")
    assert complete(tasks[1])["branchPolicy"]["source"] == "checkout"

    git(root, "checkout", "-q", "--detach")
    unknown = complete(tasks[2])["branchPolicy"]
    assert (unknown["matched"], unknown["currentBranch"]) == (None, None) and "not enforced" in unknown["warning"]
    assert any(tasks[2] in text and "not enforced" in text for text in chat(root, "governors"))

    project = root / ".moss" / "board" / "project.md"
    project.write_text(project.read_text().replace("consolidation_branch: 'moe/work-*'", "consolidation_branch: ''"))
    assert "branchPolicy" not in complete(tasks[3])


# --------------------------------------------------------------------------- disk-state signatures


def test_a_handoff_note_tells_the_next_claimer_when_the_tree_changed(tmp_path: Path) -> None:
    root = git_board(tmp_path / "p")
    task = working_task(root)
    ctx = agent(root)
    head = git(root, "rev-parse", "HEAD").strip()
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w1")
    claims.release_task(ctx, task_id=task, handoff_note={"whatIsDone": "the form", "whatRemains": "the test"}, worker_id="w1")
    signature = meta(root, task)["handoffs"][0]["disk_state"]
    assert signature.startswith(f"v1:{head}:0:")  # the board's own files are not the tree
    same = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w2")
    assert "handoff note" in same["handoffHint"] and "staleHandoffDiskState" not in same
    assert queries.show_task(ctx, task_id=task)["priorHandoffs"][0]["diskState"] == signature
    claims.release_task(ctx, task_id=task, handoff_note={"whatIsDone": "nothing new", "whatRemains": "the test"}, worker_id="w2")
    (root / "src" / "app.py").write_text("print('changed')\n")
    changed = claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w3")
    assert changed["staleHandoffDiskState"] is True and "has changed since" in changed["handoffHint"]


def test_outside_git_a_note_has_no_signature_and_nothing_fails(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root)
    ctx = agent(root)
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w1")
    claims.release_task(ctx, task_id=task, handoff_note={"whatIsDone": "a", "whatRemains": "b"}, worker_id="w1")
    assert "disk_state" not in meta(root, task)["handoffs"][0]
    assert "staleHandoffDiskState" not in claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="w2")


def test_a_claim_runs_git_only_for_a_note_with_a_signature(tmp_path: Path) -> None:
    root = git_board(tmp_path / "p")
    task = working_task(root)
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from moss_files.board import claims
        from moss_files.foundation.context import AGENT, Context
        claims.claim_next_task(Context(Path(sys.argv[1]), actor=AGENT), statuses=["WORKING"], worker_id=sys.argv[2])
        print("git" in sys.modules)
        """
    )

    def claim_loads_git(worker: str) -> bool:
        done = subprocess.run([sys.executable, "-c", script, str(root), worker], capture_output=True, text=True, check=True)
        return done.stdout.strip() == "True"

    assert claim_loads_git("w1") is False  # no handoff note
    claims.release_task(Context(root), task_id=task)  # released without a note
    assert claim_loads_git("w2") is False
    claims.release_task(Context(root), task_id=task, handoff_note={"whatIsDone": "a", "whatRemains": "b"})
    assert claim_loads_git("w3") is True  # the newest note has a signature to compare


# --------------------------------------------------------------------------- a real MCP client and the CLI as a process


@pytest.mark.anyio
async def test_the_new_rules_through_a_real_mcp_client(tmp_path: Path) -> None:
    root = git_board(tmp_path / "p", consolidation_branch="main")
    human = Context(root)
    epic = editing.create_epic(human, title="Checkout")["epic"]["id"]
    big = editing.create_task(human, epic_id=epic, title="Big", status="PLANNING", definition_of_done=["works"])["task"]["id"]
    async with connect(root) as client:
        calls = Calls(client)
        await calls.ok("moe.claim_next_task", statuses=["PLANNING"], workerId="arch")
        too_large = await calls.error("moe.submit_plan", "PLAN_TOO_LARGE", taskId=big, workerId="arch", steps=[{"description": f"s{n}"} for n in range(13)])
        assert too_large["status"] == 422 and too_large["details"]["stepCount"] == 13
        missing = await calls.error(
            "moe.submit_plan", "INVALID_REQUEST", taskId=big, workerId="arch", steps=[{"description": "x", "affectedFiles": ["nope.py"]}]
        )
        assert missing["details"]["missingPaths"] == ["nope.py"]
        plan = [{"description": f"s{n}", "affectedFiles": ["src/app.py"]} for n in range(9)]
        plan[0]["newFiles"] = ["src/card.py"]
        planned = await calls.ok("moe.submit_plan", taskId=big, workerId="arch", steps=plan)
        assert planned["status"] == "WORKING" and len(planned["warnings"]) == 1 and planned["distinctFileCount"] == 2

        claimed = await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev", preferAdjacentInEpic=False)
        assert claimed["nextAction"]["tool"] == "moe.get_context"
        await calls.error("moe.start_step", "NOT_ALLOWED", taskId=big, stepId="step-1", workerId="dev")
        await calls.ok("moe.get_context", taskId=big, workerId="dev")
        await calls.ok("moe.start_step", taskId=big, stepId="step-1", workerId="dev")
        for n in range(9):
            await calls.ok("moe.complete_step", taskId=big, stepId=f"step-{n + 1}", workerId="dev")
        branch = await calls.error("moe.complete_task", "BRANCH_POLICY_FAILED", taskId=big, workerId="dev", currentBranch="feature/x")
        assert branch["details"]["expectedPattern"] == "main"
        done = await calls.ok("moe.complete_task", taskId=big, workerId="dev")  # the checkout is on main
        assert done["branchPolicy"]["source"] == "checkout" and done["branchPolicy"]["matched"] is True

        for count in range(1, 5):
            await calls.ok("moe.claim_next_task", statuses=["REVIEW"], workerId="qa")
            await calls.ok("moe.get_context", taskId=big, workerId="qa")
            rejected = await calls.ok("moe.qa_reject", taskId=big, reason=f"round {count}", failedDodItems=[f"finding {count}"], workerId="qa")
            if rejected["status"] == "PLANNING":
                await calls.ok("moe.claim_next_task", statuses=["PLANNING"], workerId="arch")
                await calls.ok("moe.submit_plan", taskId=big, workerId="arch", steps=[{"description": "smaller"}])
            if rejected["status"] != "REVIEW":
                await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev")
                await calls.ok("moe.complete_step", taskId=big, stepId="step-1", workerId="dev")
                await calls.ok("moe.complete_task", taskId=big, workerId="dev")
        assert (rejected["status"], rejected["parkedForHuman"], rejected["needsHumanReview"], rejected["maxReopens"]) == ("REVIEW", True, True, 3)
        assert (await calls.ok("moe.claim_next_task", statuses=["REVIEW"], workerId="qa")) == {"hasNext": False}
        await calls.error("moe.qa_approve", "NOT_ALLOWED", taskId=big, workerId="qa")
        shown = await calls.ok("moe.search_tasks", query="Big")
        assert shown["tasks"][0]["needsHumanReview"] is True and len(shown["tasks"][0]["rejectionHistory"]) == 4

        await calls.ok("moe.release_task", taskId=big, workerId="qa")  # an agent's release does not unpark
        assert (await calls.ok("moe.claim_next_task", statuses=["REVIEW"], workerId="qa")) == {"hasNext": False}

        spare = editing.create_task(human, epic_id=epic, title="Spare", status="WORKING")["task"]["id"]
        assert (await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="w1"))["task"]["id"] == spare
        note = {"whatIsDone": "half of it", "whatRemains": "the rest", "pitfalls": "app.py does not compile"}
        await calls.ok("moe.release_task", taskId=spare, handoffNote=note, workerId="w1")
        (root / "src" / "app.py").write_text("print('fixed')\n")
        stale = await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="w2")
        assert stale["staleHandoffDiskState"] is True and "moe.get_handoff_history" in stale["handoffHint"]
        history = await calls.ok("moe.get_handoff_history", taskId=spare)
        assert history["priorHandoffs"][0]["diskState"].startswith("v1:")
        await calls.ok("moe.release_task", taskId=spare, handoffNote=note, workerId="w2")
    (root / "src" / "app.py").write_text("print('changed again')\n")  # a path already listed as changed: the same signature
    quiet = run_cli("moss", "task", "claim", "-w", "w3", cwd=root)
    assert quiet.returncode == 0 and quiet.stdout.startswith(spare)
    assert "\nPrevious worker(s) left 2 handoff note(s)" in quiet.stderr and "has changed since" not in quiet.stderr
    claims.release_task(Context(root), task_id=spare, handoff_note={"whatIsDone": "a", "whatRemains": "b"})
    (root / "src" / "new.py").write_text("")  # a new path: another tree
    flagged = run_cli("moss", "task", "claim", "-w", "w4", cwd=root)
    assert "warning: Previous worker(s) left 3 handoff note(s)" in flagged.stderr and "has changed since" in flagged.stderr


def test_the_cli_warns_on_stderr_and_keeps_stdout_for_data(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    human = Context(root)
    epic = editing.create_epic(human, title="E")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="T", status="PLANNING")["task"]["id"]
    claims.claim_next_task(agent(root), statuses=["PLANNING"], worker_id="arch")
    steps = [f"--step=s{n}" for n in range(9)]
    done = run_cli("moss", "task", "plan", task, *steps, "-w", "arch", cwd=root)
    assert done.returncode == 0 and done.stdout.startswith("Plan submitted")
    assert "warning: Plan has 9 steps (target <=8)" in done.stderr
    big = run_cli("moss", "task", "plan", task, *[f"--step=s{n}" for n in range(13)], "-w", "arch", cwd=root)
    assert big.returncode == 4 and big.stderr.startswith("error[PLAN_TOO_LARGE]")

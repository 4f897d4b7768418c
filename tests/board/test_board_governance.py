"""Plan governance: step amendments (with a reason; a human re-approves an agent's amendment in
CONTROL mode), verification evidence on complete_step/complete_task checked against the task's
definition of done, approved rail proposals applied to the rails with an activity entry, and
archive and project init. Through the CLI and a real MCP client."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from board_support import Calls, board, connect, moss
from mcp_support import anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)

from moss_files.board import claims, editing, governance, plans, teams
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import MossError


def agent(root: Path) -> Context:
    return Context(root, actor=AGENT)


def code_of(call: object) -> str:
    with pytest.raises(MossError) as caught:
        call()  # type: ignore[operator]
    return caught.value.code


def working_task(root: Path, *, dod: list[str] | None = None) -> str:
    """A task with an approved two-step plan, held by `dev` (WORKING)."""
    human = Context(root)
    epic = editing.create_epic(human, title="Checkout")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="Card form", status="PLANNING", definition_of_done=dod or [])["task"]["id"]
    claims.claim_next_task(agent(root), statuses=["PLANNING"], worker_id="arch")
    plans.submit_plan(agent(root), task_id=task, worker_id="arch", steps=["Build the form with error handling", "Write a test"])
    if plans.check_approval(agent(root), task_id=task)["status"] == "AWAITING_APPROVAL":
        plans.approve_plan(human, task_id=task)
    assert claims.claim_next_task(agent(root), statuses=["WORKING"], worker_id="dev")["task"]["id"] == task
    plans.get_context(agent(root), task_id=task, worker_id="dev")  # start_step needs it
    return task


def events(root: Path, task: str) -> list[str]:
    return [e["event"] for e in moss(root, "board", "log", "--task", task, "-n", "100")["events"]]


# --------------------------------------------------------------------------- amendments


def test_an_agents_amendment_waits_for_a_human_in_control_mode(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    task = working_task(root)
    # An agent's amendment (the CLI acts as a human, whose amendments need no approval).
    amended = governance.amend_plan_step(
        agent(root), task_id=task, step_id="step-1", description="Build the form; reuse the shared validator", reason="a validator exists", worker_id="dev"
    )
    assert (amended["needsApproval"], amended["status"]) == (True, "PENDING")
    assert amended["previousDescription"] == "Build the form with error handling"
    refused = moss(root, "task", "step-start", task, "step-1", "-w", "dev", code=5)["error"]
    assert refused["code"] == "AMENDMENT_PENDING"
    approved = moss(root, "task", "approve", task)
    assert [a["status"] for a in approved["amendments"]] == ["APPROVED"]
    assert moss(root, "task", "step-start", task, "step-1", "-w", "dev")["success"] is True
    log = events(root, task)
    assert "STEP_AMENDED" in log and "AMENDMENT_APPROVED" in log
    # The original instructions stay in the file for the record, beside the amendment.
    text = next((root / ".moss/board/tasks").glob(f"{task}*.md")).read_text()
    assert "Build the form with error handling" in text and "reuse the shared validator" in text and "a validator exists" in text
    # The holder hears of it in the task's channel.
    assert any("amended" in m["content"] for m in moss(root, "board", "chat", "read", task)["messages"])


def test_amendments_in_turbo_mode_and_who_may_amend(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root)
    teams.register_worker(Context(root), worker_id="bystander", role="worker")
    assert moss(root, "task", "amend", task, "step-2", "-d", "x", "-r", "y", "-w", "bystander", code=5)["error"]["code"] == "NOT_ALLOWED"
    assert moss(root, "task", "amend", task, "step-9", "-d", "x", "-r", "y", "-w", "dev", code=3)["error"]["code"] == "NOT_FOUND"
    assert moss(root, "task", "amend", task, "step-2", "-d", "x", "-r", " ", "-w", "dev", code=2)["error"]["code"] == "INVALID_REQUEST"
    amended = moss(root, "task", "amend", task, "step-2", "-d", "Write a test for expiry dates", "-r", "expiry was missed", "-w", "dev")
    assert (amended["needsApproval"], amended["effectiveDescription"]) == (False, "Write a test for expiry dates")
    assert moss(root, "task", "context", task, "-w", "dev")["task"]["implementationPlan"][1]["description"] == "Write a test for expiry dates"


# --------------------------------------------------------------------------- verification evidence


def test_evidence_is_checked_against_the_definition_of_done(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root, dod=["validates expiry", "shows errors inline"])
    failed = moss(root, "task", "step-done", task, "step-1", "-w", "dev", "--tests", "3/1", code=5)["error"]
    assert failed["code"] == "VERIFICATION_FAILED" and failed["details"]["failures"] == ["1 test(s) failed"]
    moss(root, "task", "step-done", task, "step-1", "-w", "dev", "--ran", "pytest -q", "--tests", "4/0", "--dod", "1=test_expiry passes")
    moss(root, "task", "step-done", task, "step-2", "-w", "dev", "--touched", "web/card.tsx")
    short = moss(root, "task", "complete", task, "-w", "dev", "--ran", "npm test", code=5)["error"]
    assert short["code"] == "VERIFICATION_FAILED" and short["details"]["missingDod"] == ["shows errors inline"]
    assert "Build" not in short["message"] and "shows errors inline" in short["message"]
    bad = moss(root, "task", "complete", task, "-w", "dev", "--tests", "four", code=2)["error"]
    assert bad["code"] == "INVALID_REQUEST"
    done = moss(root, "task", "complete", task, "-w", "dev", "--dod", "Shows  errors INLINE=screenshot in the PR")
    assert (done["status"], done["verified"]) == ("REVIEW", True)
    shown = moss(root, "task", "show", task)
    assert shown["verification"]["dod"][0]["evidence"] == "screenshot in the PR"


def test_a_project_that_requires_evidence_refuses_a_bare_completion(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    project = root / ".moss/board/project.md"
    project.write_text(project.read_text().replace("require_verification: false", "require_verification: true"))
    task = working_task(root)
    moss(root, "task", "step-done", task, "step-1", "-w", "dev")
    moss(root, "task", "step-done", task, "step-2", "-w", "dev")
    refused = moss(root, "task", "complete", task, "-w", "dev", code=5)["error"]
    assert refused["code"] == "VERIFICATION_FAILED" and "missing" in refused["details"]
    assert moss(root, "task", "complete", task, "-w", "dev", "--ran", "pytest -q")["status"] == "REVIEW"


# --------------------------------------------------------------------------- rail proposals applied


def test_an_approved_proposal_changes_the_rails_and_says_so_in_the_log(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root)
    local = moss(root, "task", "propose-rail", task, "--value", "no inline styles", "-r", "theming", "-w", "dev")["proposalId"]
    wide = moss(root, "task", "propose-rail", task, "--value", "no eval", "-r", "safety", "--scope", "GLOBAL", "-w", "dev")["proposalId"]
    applied = moss(root, "board", "resolve", local, "approved")["applied"]
    assert (applied["scope"], applied["after"]) == ("TASK", ["no inline styles"])
    assert moss(root, "task", "show", task)["taskRails"] == ["no inline styles"]
    before = (root / ".moss/board/project.md").read_text()
    assert moss(root, "board", "resolve", wide, "approved")["applied"]["list"] == "custom_rules"
    after = (root / ".moss/board/project.md").read_text()
    assert "no eval" in after and "no eval" not in before
    assert events(root, task).count("RAILS_UPDATED") == 2
    assert moss(root, "board", "resolve", wide, "rejected", code=5)["error"]["code"] == "INVALID_TRANSITION"
    # Removing a rail that is not there writes nothing.
    gone = moss(root, "task", "propose-rail", task, "--type", "REMOVE_RAIL", "--current", "no such rail", "--value", "-", "-r", "r", "-w", "dev")
    assert moss(root, "board", "resolve", gone["proposalId"], "approved", code=5)["error"]["code"] == "RAIL_NOT_FOUND"
    assert moss(root, "task", "show", task)["taskRails"] == ["no inline styles"]


# --------------------------------------------------------------------------- archive and init


def test_archive_shelves_what_is_not_in_flight(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    task = working_task(root)
    epic = moss(root, "task", "show", task)["epicId"]
    spare = moss(root, "task", "new", "Spare", "-e", epic)["task"]["id"]
    assert moss(root, "task", "archive", task, code=5)["error"]["code"] == "NOT_ALLOWED"
    refused = moss(root, "epic", "archive", epic, code=5)["error"]
    assert refused["code"] == "NOT_ALLOWED" and refused["details"]["inFlight"] == [task]
    assert moss(root, "task", "show", spare)["status"] == "BACKLOG"  # nothing archived
    assert moss(root, "task", "archive", spare, "-r", "not needed")["status"] == "ARCHIVED"
    assert moss(root, "task", "archive", spare)["alreadyArchived"] is True
    claims.release_task(agent(root), task_id=task, worker_id="dev")
    moss(root, "task", "status", task, "BACKLOG", "-r", "parked")
    archived = moss(root, "epic", "archive", epic)
    assert (archived["epicStatus"], archived["archivedTaskCount"]) == ("ARCHIVED", 1)
    assert claims.claim_next_task(agent(root), statuses=["WORKING", "PLANNING", "REVIEW"], worker_id="dev2")["hasNext"] is False


def test_init_project_makes_a_board_and_replaces_nothing(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    made = moss(root, "board", "init-project", "--name", "shop")
    assert (root / ".moss/board/project.md").exists() and "shop" in (root / ".moss/board/project.md").read_text()
    (root / ".moss/board/project.md").write_text((root / ".moss/board/project.md").read_text() + "\nHand-written notes.\n")
    again = moss(root, "board", "init-project", "--name", "other")
    assert made != again and "Hand-written notes." in (root / ".moss/board/project.md").read_text()


# --------------------------------------------------------------------------- through a real MCP client


@pytest.mark.anyio
async def test_governance_through_the_client(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root, dod=["validates expiry"])
    spare = editing.create_task(Context(root), epic_id=moss(root, "task", "show", task)["epicId"], title="Spare")["task"]["id"]
    async with connect(root) as client:
        calls = Calls(client)
        amended = await calls.ok("moe.amend_plan_step", taskId=task, stepId="step-1", description="Build it", reason="simpler", workerId="dev")
        assert amended["needsApproval"] is False
        await calls.error("moe.amend_plan_step", "INVALID_REQUEST", taskId=task, stepId="step-1", description="x", reason="", workerId="dev")
        await calls.ok("moe.start_step", taskId=task, stepId="step-1", workerId="dev")
        failed = await calls.error(
            "moe.complete_step", "VERIFICATION_FAILED", taskId=task, stepId="step-1", workerId="dev", verification={"command": "pytest", "exitCode": 1}
        )
        assert failed["details"]["failures"] == ["'pytest' exited 1"]
        evidence = {"commands": [{"command": "pytest -q", "exitCode": 0}], "tests": {"passed": 5, "failed": 0}, "dod": [{"item": 1, "evidence": "test_expiry"}]}
        await calls.ok("moe.complete_step", taskId=task, stepId="step-1", workerId="dev", verification=evidence)
        await calls.ok("moe.complete_step", taskId=task, stepId="step-2", workerId="dev")
        assert (await calls.ok("moe.complete_task", taskId=task, workerId="dev", summary="done"))["status"] == "REVIEW"
        assert (await calls.ok("moe.archive_task", taskId=spare, reason="dropped"))["status"] == "ARCHIVED"
        await calls.error("moe.archive_task", "NOT_FOUND", taskId="TASK-20260101-nothere")
        assert (await calls.ok("moe.init_project"))["success"] is True


# --------------------------------------------------------------------------- re-plans, critiques, budgets, metrics, handoffs


def test_replan_critique_budget_metrics_and_handoffs_through_the_cli(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root)
    moss(root, "task", "step-done", task, "step-1", "-w", "dev")
    replanned = moss(root, "task", "replan", task, "-r", "the form library is gone", "--step", "step-2", "-w", "dev")
    assert replanned["status"] == "PLANNING" and replanned["priorAttempt"]["reason"] == "the form library is gone"
    assert moss(root, "task", "replan", task, "-r", "again", code=5)["error"]["code"] == "INVALID_TRANSITION"
    assert moss(root, "task", "handoffs", task)["priorAttempt"]["reason"] == "the form library is gone"
    assert "REPLAN_REQUESTED" in events(root, task)
    # A governor's block sends a plan back; an agent that is not a governor may not critique.
    teams.register_worker(Context(root), worker_id="gov", role="governor")
    claims.claim_next_task(agent(root), statuses=["PLANNING"], worker_id="arch")
    plans.submit_plan(agent(root), task_id=task, worker_id="arch", steps=["Build the form by hand", "Write a test"])
    assert code_of(lambda: governance.submit_plan_critique(agent(root), task_id=task, verdict="pass", worker_id="dev")) == "NOT_ALLOWED"
    assert moss(root, "task", "critique", task, "block", code=2)["error"]["code"] == "INVALID_REQUEST"  # a block names its concerns
    blocked = governance.submit_plan_critique(agent(root), task_id=task, verdict="block", concerns=["no accessibility step"], worker_id="gov")
    assert (blocked["status"], blocked["concerns"]) == ("PLANNING", ["no accessibility step"])
    governing = governance.enter_governance(agent(root), worker_id="gov")
    assert governing["status"] == "GOVERNING" and "governors" in [c["id"] for c in governing["channels"]]
    assert code_of(lambda: governance.enter_governance(agent(root), worker_id="dev")) == "NOT_ALLOWED"
    # Budgets and metrics.
    assert moss(root, "task", "budget", task, "90")["budget"]["wallClockMs"] == 5_400_000
    rows = moss(root, "board", "metrics")
    assert rows["totalMatched"] == 1 and rows["tasks"][0]["taskId"] == task
    assert moss(root, "task", "budget", task, "0")["budget"] is None


@pytest.mark.anyio
async def test_replan_critique_budget_metrics_and_handoffs_through_the_client(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    task = working_task(root)
    teams.register_worker(Context(root), worker_id="gov", role="governor")
    async with connect(root) as client:
        calls = Calls(client)
        note = {"whatIsDone": "the form renders", "whatRemains": "expiry validation"}
        await calls.ok("moe.release_task", taskId=task, workerId="dev", handoffNote=note)
        history = await calls.ok("moe.get_handoff_history", taskId=task)
        assert [(h["releasedBy"], h["whatRemains"]) for h in history["priorHandoffs"]] == [("dev", "expiry validation")]
        await calls.ok("moe.claim_next_task", statuses=["WORKING"], workerId="dev2")
        assert (await calls.ok("moe.request_replan", taskId=task, reason="wrong approach", workerId="dev2"))["status"] == "PLANNING"
        await calls.error("moe.submit_plan_critique", "NOT_ALLOWED", taskId=task, verdict="pass", workerId="dev2")
        critique = await calls.ok("moe.submit_plan_critique", taskId=task, verdict="pass", workerId="gov")
        assert critique["verdict"] == "pass" and critique["status"] == "PLANNING"
        assert (await calls.ok("moe.enter_governance", workerId="gov"))["alreadyGoverning"] is False
        assert (await calls.ok("moe.set_task_budget", taskId=task, wallClockMs=60_000))["budget"]["wallClockMs"] == 60_000
        await calls.error("moe.set_task_budget", "INVALID_REQUEST", taskId=task, wallClockMs=-1)
        metrics = await calls.ok("moe.list_metrics")
        assert metrics["totalMatched"] == 1 and "aggregate" in metrics
        await calls.error("moe.list_metrics", "INVALID_REQUEST", sinceIso="yesterday")

"""Board use cases on real files in a git repository: workflow, QA loops, approval modes,
guards, teams, blocking, rail proposals, hand edits, unreadable files and the activity log."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from moss_files.board import service as svc
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 21, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def tick(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def human(repo: Path, clock: Clock) -> svc.Context:
    return svc.Context.for_root(repo, clock=clock)


@pytest.fixture
def agent(repo: Path, clock: Clock) -> svc.Context:
    return svc.Context.for_root(repo, clock=clock, actor=svc.AGENT)


def events(ctx: svc.Context, **filters: Any) -> list[dict[str, Any]]:
    return list(reversed(svc.get_activity_log(ctx, limit=1000, **filters)["events"]))  # oldest first


def kinds(ctx: svc.Context, **filters: Any) -> list[str]:
    return [e["event"] for e in events(ctx, **filters)]


def task_file(repo: Path, task_id: str) -> Path:
    return repo / ".moss" / "board" / "tasks" / f"{task_id}.md"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def set_mode(repo: Path, human: svc.Context, mode: str, **extra: Any) -> None:
    svc.init_board(human)
    path = repo / ".moss" / "board" / "project.md"
    text = path.read_text().replace("approval_mode: CONTROL", f"approval_mode: {mode}")
    for key, value in extra.items():
        text = text.replace(f"  {key}: ", f"  {key}: {value}  # was: ")
    path.write_text(text)


def planned_task(human: svc.Context, agent: svc.Context, *, steps: list[Any] | None = None, epic: str | None = None) -> str:
    """A task claimed by architect `arch` and planned, waiting for approval."""
    epic_id = epic or svc.create_epic(human, title="Epic")["epic"]["id"]
    task_id = svc.create_task(human, epicId=epic_id, title="Feature", status="PLANNING")["task"]["id"]
    assert svc.claim_next_task(agent, statuses=["PLANNING"], workerId="arch", epicId=epic_id)["task"]["id"] == task_id
    svc.submit_plan(agent, taskId=task_id, steps=steps or ["Build it with error handling", "Test it"], workerId="arch")
    return task_id


def to_review(human: svc.Context, agent: svc.Context, task_id: str, worker: str = "dev") -> None:
    if svc.show_task(human, taskId=task_id)["status"] == "AWAITING_APPROVAL":
        svc.approve_plan(human, taskId=task_id)
    claimed = svc.claim_next_task(agent, statuses=["WORKING"], workerId=worker)
    assert claimed["hasNext"] and claimed["task"]["id"] == task_id
    for step in claimed["task"]["implementationPlan"]:
        if step["status"] != "COMPLETED":
            svc.complete_step(agent, taskId=task_id, stepId=step["stepId"], workerId=worker)
    svc.complete_task(agent, taskId=task_id, workerId=worker)


# --------------------------------------------------------------------------- the whole workflow


def test_epic_to_done_through_every_role_with_files_and_log(repo: Path, human: svc.Context, agent: svc.Context, clock: Clock) -> None:
    epic = svc.create_epic(human, title="Auth", description="Sign-in for users.", architectureNotes="Sessions in redis", epicRails=["use bcrypt"])
    assert epic["success"] and epic["epic"]["status"] == "PLANNED"
    epic_id = epic["epic"]["id"]
    created = svc.create_task(human, epicId=epic_id, title="Login form", description="A form.\n\nWith validation.",
                              definitionOfDone=["renders", "validates"], priority="high")
    task_id = created["task"]["id"]
    assert created["task"]["path"] == f".moss/board/tasks/{task_id}.md"
    assert task_file(repo, task_id).read_text().endswith("---\nA form.\n\nWith validation.\n")

    assert svc.get_next_task(agent, epicId=epic_id)["task"]["id"] == task_id
    svc.set_task_status(human, taskId=task_id, status="PLANNING")
    claim = svc.claim_next_task(agent, statuses=["PLANNING"], workerId="arch")
    assert claim["hasNext"] and claim["task"]["assignedWorkerId"] == "arch"
    assert claim["epic"]["architectureNotes"] == "Sessions in redis"
    assert claim["allRails"] == {"global": [], "epic": ["use bcrypt"], "task": []}
    clock.tick(minutes=5)
    plan = svc.submit_plan(agent, taskId=task_id, workerId="arch",
                           steps=[{"description": "Form component", "affectedFiles": ["src/form.py"]}, {"description": "Tests"}])
    assert (plan["status"], plan["stepCount"]) == ("AWAITING_APPROVAL", 2)
    assert svc.check_approval(agent, taskId=task_id) == {"taskId": task_id, "approved": False, "status": "AWAITING_APPROVAL"}
    assert svc.approve_plan(human, taskId=task_id)["status"] == "WORKING"
    assert svc.check_approval(agent, taskId=task_id)["approved"] is True

    work = svc.claim_next_task(agent, statuses=["WORKING"], workerId="dev")
    assert work["task"]["id"] == task_id
    assert svc.start_step(agent, taskId=task_id, stepId="step-1", workerId="dev") == {
        "success": True, "taskId": task_id, "stepId": "step-1", "stepNumber": 1, "totalSteps": 2}
    clock.tick(minutes=10)
    progress = svc.complete_step(agent, taskId=task_id, stepId="step-1", modifiedFiles=["src/form.py"], note="done", workerId="dev")
    assert progress["progress"] == {"completed": 1, "total": 2, "percentage": 50}
    assert progress["nextStep"] == {"stepId": "step-2", "description": "Tests"}
    last = svc.complete_step(agent, taskId=task_id, stepId="step-2", workerId="dev")
    assert last["nextStep"] is None and last["progress"]["percentage"] == 100
    done = svc.complete_task(agent, taskId=task_id, prLink="https://example.invalid/pr/1", summary="Form and tests", workerId="dev")
    assert done["status"] == "REVIEW"
    assert done["stats"] == {"stepsCompleted": 2, "filesModified": 1, "duration": 600_000}

    qa = svc.claim_next_task(agent, statuses=["REVIEW"], workerId="qa")
    assert qa["task"]["id"] == task_id
    approved = svc.qa_approve(agent, taskId=task_id, summary="All DoD items hold", workerId="qa")
    assert (approved["status"], approved["summary"]) == ("DONE", "All DoD items hold")

    final = svc.show_task(human, taskId=task_id)
    assert final["status"] == "DONE" and final["assignedWorkerId"] is None
    assert final["prLink"] == "https://example.invalid/pr/1" and final["reviewSummary"] == "All DoD items hold"
    assert final["implementationPlan"][0]["modifiedFiles"] == ["src/form.py"]
    assert final["metrics"]["firstClaimAt"] == "2026-01-21T10:00:00Z"
    assert kinds(human, taskId=task_id) == [
        "TASK_CREATED", "TASK_STATUS_CHANGED", "TASK_CLAIMED",
        "TASK_STATUS_CHANGED", "PLAN_SUBMITTED",
        "TASK_STATUS_CHANGED", "PLAN_APPROVED", "WORKER_RELEASED",
        "TASK_CLAIMED", "STEP_STARTED", "STEP_COMPLETED", "STEP_COMPLETED",
        "TASK_STATUS_CHANGED", "TASK_COMPLETED", "WORKER_RELEASED", "PR_OPENED",
        "TASK_CLAIMED", "TASK_STATUS_CHANGED", "QA_APPROVED", "WORKER_RELEASED",
    ]
    log = events(human, taskId=task_id)
    assert all(e["epicId"] == epic_id and e["projectId"] for e in log)
    assert {e["workerId"] for e in log if e["event"] == "TASK_CLAIMED"} == {"arch", "dev", "qa"}
    assert next(e for e in log if e["event"] == "PLAN_SUBMITTED")["payload"] == {"stepCount": 2}
    assert [e["event"] for e in events(human, workerId="dev", eventTypes=["STEP_COMPLETED"])] == ["STEP_COMPLETED"] * 2


def test_the_log_is_valid_jsonl_with_one_record_per_line(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    task_id = planned_task(human, agent)
    to_review(human, agent, task_id)
    lines = (repo / ".moss" / "board" / "activity.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len({r["id"] for r in records}) == len(records)
    assert all(r["id"].startswith("EVT-") and r["timestamp"].endswith("Z") for r in records)


# --------------------------------------------------------------------------- rails


def test_rail_violation_refuses_the_plan_and_changes_nothing(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    svc.init_board(human)
    project = repo / ".moss" / "board" / "project.md"
    project.write_text(project.read_text().replace("forbidden_patterns: []", "forbidden_patterns: ['eval(', innerHTML]")
                       .replace("required_patterns: []", "required_patterns: [error handling]"))
    epic_id = svc.create_epic(human, title="E", epicRails=["guidance only"])["epic"]["id"]
    task_id = svc.create_task(human, epicId=epic_id, title="T", status="PLANNING", taskRails=["also guidance"])["task"]["id"]
    svc.claim_next_task(agent, statuses=["PLANNING"], workerId="arch")
    before = task_file(repo, task_id).read_bytes()
    with pytest.raises(MossError) as caught:
        svc.submit_plan(agent, taskId=task_id, workerId="arch", steps=["Parse with EVAL(", {"description": "Render", "affectedFiles": ["innerhtml.js"]}])
    err = caught.value
    assert (err.code, err.status, err.exit_code) == ("RAIL_VIOLATION", 422, 4)
    assert [v["kind"] for v in err.details["violations"]] == ["FORBIDDEN_PATTERN", "FORBIDDEN_PATTERN", "REQUIRED_PATTERN_MISSING"]
    assert task_file(repo, task_id).read_bytes() == before
    assert "RAIL_VIOLATION" in kinds(human, taskId=task_id)
    # Guidance rails are not matched against the plan text.
    ok = svc.submit_plan(agent, taskId=task_id, workerId="arch", steps=["Parse safely, with Error Handling"])
    assert ok["status"] == "AWAITING_APPROVAL"


# --------------------------------------------------------------------------- QA loops and plan rejection


def test_qa_rejections_count_reopens_and_escalate_to_planning(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    task_id = planned_task(human, agent)
    to_review(human, agent, task_id)
    for count in (1, 2):
        svc.claim_next_task(agent, statuses=["REVIEW"], workerId="qa")
        rejected = svc.qa_reject(agent, taskId=task_id, reason=f"DoD item {count} fails", workerId="qa")
        assert (rejected["status"], rejected["reopenCount"], rejected["escalated"]) == ("WORKING", count, False)
        claimed = svc.claim_next_task(agent, statuses=["WORKING"], workerId="dev")
        assert claimed["task"]["reopenReason"] == f"DoD item {count} fails"
        svc.complete_task(agent, taskId=task_id, workerId="dev")
        assert svc.show_task(human, taskId=task_id)["reopenReason"] is None
    svc.claim_next_task(agent, statuses=["REVIEW"], workerId="qa")
    third = svc.qa_reject(agent, taskId=task_id, reason="design is wrong", workerId="qa")
    assert (third["status"], third["reopenCount"], third["escalated"]) == ("PLANNING", 3, True)
    assert svc.check_approval(agent, taskId=task_id)["rejected"] is True
    assert kinds(human, taskId=task_id, eventTypes=["TASK_REOPENED"]) == ["TASK_REOPENED"] * 3


def test_qa_errors_follow_the_seed(human: svc.Context, agent: svc.Context) -> None:
    task_id = planned_task(human, agent)
    with pytest.raises(Conflict) as caught:
        svc.qa_approve(agent, taskId=task_id)
    assert caught.value.message == "Task must be in REVIEW status to approve"
    with pytest.raises(InvalidRequest) as bad:
        svc.qa_reject(agent, taskId=task_id, reason=" ")
    assert bad.value.message == "reason is required - explain which DoD items failed and why"
    with pytest.raises(InvalidRequest) as missing:
        svc.qa_approve(agent)
    assert missing.value.message == "taskId is required"
    with pytest.raises(NotFound) as unknown:
        svc.qa_approve(agent, taskId="TASK-20260101-00000000")
    assert unknown.value.message == "Task not found: TASK-20260101-00000000"


def test_a_rejected_plan_goes_back_to_its_architect(human: svc.Context, agent: svc.Context) -> None:
    task_id = planned_task(human, agent)
    with pytest.raises(InvalidRequest):
        svc.reject_plan(human, taskId=task_id)
    svc.reject_plan(human, taskId=task_id, reason="split step 1")
    assert svc.check_approval(agent, taskId=task_id) == {
        "taskId": task_id, "approved": False, "status": "PLANNING", "rejected": True, "rejectionReason": "split step 1"}
    again = svc.claim_next_task(agent, statuses=["PLANNING"], workerId="arch")
    assert again["alreadyAssigned"]["taskId"] == task_id  # still the architect's
    svc.submit_plan(agent, taskId=task_id, workerId="arch", steps=["a", "b", "c"])
    assert "rejected" not in svc.check_approval(agent, taskId=task_id)


# --------------------------------------------------------------------------- approval modes


def test_turbo_approves_on_submission(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    set_mode(repo, human, "TURBO")
    task_id = planned_task(human, agent)
    assert svc.show_task(human, taskId=task_id)["status"] == "WORKING"
    assert "PLAN_AUTO_APPROVED" in kinds(human, taskId=task_id)


def test_speed_approves_after_its_delay_whenever_someone_looks(repo: Path, human: svc.Context, agent: svc.Context, clock: Clock) -> None:
    set_mode(repo, human, "SPEED")
    task_id = planned_task(human, agent)
    assert svc.check_approval(agent, taskId=task_id)["approved"] is False
    clock.tick(seconds=1)
    assert svc.claim_next_task(agent, statuses=["WORKING"], workerId="dev")["hasNext"] is False
    clock.tick(seconds=1)
    # A fresh context (a restarted server) still approves: the timer is the file's submission time.
    restarted = svc.Context.for_root(repo, clock=clock, actor=svc.AGENT)
    assert svc.claim_next_task(restarted, statuses=["WORKING"], workerId="dev")["task"]["id"] == task_id


def test_agents_do_not_approve_plans_in_control_mode(human: svc.Context, agent: svc.Context) -> None:
    task_id = planned_task(human, agent)
    for attempt in (lambda: svc.approve_plan(agent, taskId=task_id),
                    lambda: svc.set_task_status(agent, taskId=task_id, status="WORKING", workerId="arch")):
        with pytest.raises(Conflict) as caught:
            attempt()
        assert (caught.value.code, caught.value.status) == ("NOT_ALLOWED", 403)
    assert svc.set_task_status(human, taskId=task_id, status="WORKING")["status"] == "WORKING"


# --------------------------------------------------------------------------- guards and steps


def test_only_the_holder_acts_on_a_held_task(human: svc.Context, agent: svc.Context) -> None:
    task_id = planned_task(human, agent)
    svc.approve_plan(human, taskId=task_id)
    svc.claim_next_task(agent, statuses=["WORKING"], workerId="dev")
    for call in (lambda: svc.start_step(agent, taskId=task_id, stepId="step-1", workerId="intruder"),
                 lambda: svc.complete_step(agent, taskId=task_id, stepId="step-1", workerId="intruder"),
                 lambda: svc.complete_task(agent, taskId=task_id, workerId="intruder"),
                 lambda: svc.set_task_status(agent, taskId=task_id, status="BACKLOG", workerId="intruder")):
        with pytest.raises(Conflict) as caught:
            call()
        assert caught.value.code == "NOT_ALLOWED"
    # A human (no worker id) is not guarded.
    assert svc.start_step(human, taskId=task_id, stepId="step-1")["stepNumber"] == 1


def test_step_rules(human: svc.Context, agent: svc.Context) -> None:
    task_id = planned_task(human, agent)
    with pytest.raises(Conflict) as early:
        svc.start_step(agent, taskId=task_id, stepId="step-1", workerId="arch")
    assert early.value.code == "INVALID_TRANSITION" and "check_approval" in (early.value.hint or "")
    svc.approve_plan(human, taskId=task_id)
    with pytest.raises(NotFound):
        svc.start_step(human, taskId=task_id, stepId="step-9")
    svc.complete_step(human, taskId=task_id, stepId="step-2", modifiedFiles=["./b.py"])  # straight from PENDING
    again = svc.complete_step(human, taskId=task_id, stepId="step-2")
    assert again["progress"]["completed"] == 1  # idempotent
    with pytest.raises(Conflict):
        svc.start_step(human, taskId=task_id, stepId="step-2")
    with pytest.raises(Conflict) as pending:
        svc.complete_task(human, taskId=task_id)
    assert pending.value.details["pendingSteps"] == ["step-1"]
    with pytest.raises(InvalidRequest):
        svc.complete_step(human, taskId=task_id, stepId="step-1", modifiedFiles=["../outside.py"])


def test_set_task_status_enforces_the_table(human: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    task_id = svc.create_task(human, epicId=epic_id, title="T")["task"]["id"]
    with pytest.raises(Conflict) as caught:
        svc.set_task_status(human, taskId=task_id, status="DONE")
    assert caught.value.code == "INVALID_TRANSITION" and caught.value.exit_code == 5
    with pytest.raises(InvalidRequest) as bad:
        svc.set_task_status(human, taskId=task_id, status="SHIPPED")
    assert bad.value.code == "SCHEMA_ERROR"
    assert svc.set_task_status(human, taskId=task_id, status="in progress")["status"] == "WORKING"
    assert svc.set_task_status(human, taskId=task_id, status="WORKING")["status"] == "WORKING"  # a no-op


# --------------------------------------------------------------------------- claims (single process)


def test_claim_shapes_and_constraints(human: svc.Context, agent: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    first = svc.create_task(human, epicId=epic_id, title="first", status="WORKING")["task"]["id"]
    second = svc.create_task(human, epicId=epic_id, title="second", status="WORKING")["task"]["id"]
    peek = svc.claim_next_task(agent, statuses=["WORKING"])
    assert peek["task"]["id"] == first and peek["task"]["assignedWorkerId"] is None
    got = svc.claim_next_task(agent, statuses=["WORKING"], workerId="w1")
    assert set(got) == {"hasNext", "project", "epic", "task", "allRails"} and got["task"]["id"] == first
    with pytest.raises(Conflict) as caught:
        svc.claim_next_task(agent, statuses=["WORKING"], workerId="w2")
    assert caught.value.message == "Epic already has an active worker on WORKING tasks: w1"
    taken = svc.claim_next_task(agent, statuses=["WORKING"], workerId="w2", replaceExisting=True)
    assert (taken["task"]["id"], taken["takenOverFrom"]) == (first, "w1")
    assert svc.show_worker(human, workerId="w1")["status"] == "IDLE"
    assert kinds(human, taskId=first)[-2:] == ["WORKER_RELEASED", "TASK_CLAIMED"]
    assert svc.claim_next_task(agent, statuses=["REVIEW"], workerId="w3") == {"hasNext": False}
    with pytest.raises(InvalidRequest):
        svc.claim_next_task(agent, statuses=[], workerId="w3")
    with pytest.raises(InvalidRequest):
        svc.claim_next_task(agent, statuses=["DONE"], workerId="w3")
    with pytest.raises(InvalidRequest):
        svc.claim_next_task(agent, statuses=["WORKING"], workerId="../evil")
    assert second in {t["id"] for t in svc.list_tasks(human, epicId=epic_id)["tasks"]}


def test_release_task_keeps_the_status_and_frees_the_task(human: svc.Context, agent: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    task_id = svc.create_task(human, epicId=epic_id, title="t", status="WORKING")["task"]["id"]
    svc.claim_next_task(agent, statuses=["WORKING"], workerId="w1")
    released = svc.release_task(agent, taskId=task_id, reason="end of session", workerId="w1")
    assert (released["status"], released["releasedWorkerId"]) == ("WORKING", "w1")
    assert svc.claim_next_task(agent, statuses=["WORKING"], workerId="w2")["task"]["id"] == task_id


# --------------------------------------------------------------------------- teams


def test_teams_create_join_leave_list_and_share_an_epic(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    made = svc.create_team(agent, name="Coders", role="worker", maxSize=2)
    assert made["created"] is True and made["team"]["maxSize"] == 2
    again = svc.create_team(agent, name="coders", role="WORKER")
    assert again == {"team": made["team"], "created": False}
    assert svc.create_team(agent, name="Coders", role="qa")["created"] is True  # another role, another team
    team_id = made["team"]["id"]
    assert svc.join_team(agent, teamId=team_id, workerId="w1")["team"]["memberIds"] == ["w1"]
    assert (repo / ".moss" / "board" / "workers" / "w1.md").exists()  # auto-registered
    assert svc.join_team(agent, teamId=team_id, workerId="w1")["team"]["memberIds"] == ["w1"]
    svc.join_team(agent, teamId=team_id, workerId="w2")
    with pytest.raises(Conflict) as full:
        svc.join_team(agent, teamId=team_id, workerId="w3")
    assert (full.value.code, full.value.message) == ("TEAM_FULL", "Team is full (max 2 members)")
    with pytest.raises(NotFound) as missing:
        svc.join_team(agent, teamId="TEAM-nope", workerId="w1")
    assert missing.value.message == "Team not found: TEAM-nope"

    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    for title in ("a", "b", "c"):
        svc.create_task(human, epicId=epic_id, title=title, status="WORKING")
    assert svc.claim_next_task(agent, statuses=["WORKING"], workerId="w1")["hasNext"]
    assert svc.claim_next_task(agent, statuses=["WORKING"], workerId="w2")["hasNext"]  # teammates share the epic
    with pytest.raises(Conflict):
        svc.claim_next_task(agent, statuses=["WORKING"], workerId="outsider")
    listed = svc.list_teams(agent, role="worker")["teams"]
    assert [(m["id"], m["type"], m["status"]) for m in listed[0]["members"]] == [("w1", "worker", "CODING"), ("w2", "worker", "CODING")]
    assert svc.leave_team(agent, teamId=team_id, workerId="w2")["team"]["memberIds"] == ["w1"]
    assert svc.leave_team(agent, teamId=team_id, workerId="w2")["team"]["memberIds"] == ["w1"]
    assert "TEAM_JOINED" in kinds(human, workerId="w1") and "TEAM_LEFT" in kinds(human, workerId="w2")


# --------------------------------------------------------------------------- blocked workers


@pytest.mark.parametrize("retry", [False, True])
def test_report_blocked_and_unblock(human: svc.Context, agent: svc.Context, retry: bool) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    task_id = svc.create_task(human, epicId=epic_id, title="t", status="WORKING")["task"]["id"]
    svc.claim_next_task(agent, statuses=["WORKING"], workerId="w1")
    with pytest.raises(Conflict) as not_blocked:
        svc.unblock_worker(human, workerId="w1", resolution="nothing")
    assert not_blocked.value.message == "Worker must be in BLOCKED status"
    blocked = svc.report_blocked(agent, taskId=task_id, reason="no database", needsFrom="ops", workerId="w1")
    assert (blocked["status"], blocked["taskId"]) == ("BLOCKED", task_id)
    worker = svc.show_worker(human, workerId="w1")
    assert (worker["status"], worker["blockedReason"], worker["needsFrom"], worker["currentTaskId"]) == ("BLOCKED", "no database", "ops", task_id)
    assert svc.show_task(human, taskId=task_id)["status"] == "WORKING"  # the task's status is untouched
    result = svc.unblock_worker(human, workerId="w1", resolution="db is up", retryTask=retry)
    assert (result["retryTask"], result["resolution"]) == (retry, "db is up")
    assert result["currentTaskId"] == (task_id if retry else None)
    assert svc.show_task(human, taskId=task_id)["assignedWorkerId"] == ("w1" if retry else None)
    assert kinds(human, workerId="w1")[-1] == "WORKER_UNBLOCKED"
    with pytest.raises(NotFound):
        svc.unblock_worker(human, workerId="ghost", resolution="x")


# --------------------------------------------------------------------------- epics, tasks, proposals


def test_epic_crud_and_cascading_delete(repo: Path, human: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E", order=5)["epic"]["id"]
    with pytest.raises(InvalidRequest) as no_id:
        svc.update_epic(human, title="x")
    assert no_id.value.message == "epicId is required"
    with pytest.raises(NotFound) as missing:
        svc.update_epic(human, epicId="EPIC-20260101-00000000", title="x")
    assert missing.value.message == "Epic not found: EPIC-20260101-00000000"
    updated = svc.update_epic(human, epicId=epic_id, status="active", epicRails=["r1"])["epic"]
    assert (updated["status"], updated["epicRails"], updated["order"]) == ("ACTIVE", ["r1"], 5)
    ids = [svc.create_task(human, epicId=epic_id, title=f"t{i}")["task"]["id"] for i in range(3)]
    with pytest.raises(Conflict) as has_tasks:
        svc.delete_epic(human, epicId=epic_id)
    assert has_tasks.value.message.startswith(f'Epic "{epic_id}" has 3 task(s)')
    gone = svc.delete_epic(human, epicId=epic_id, cascadeDelete=True)
    assert gone["deletedTaskCount"] == 3 and gone["deletedEpic"]["id"] == epic_id
    assert not any(task_file(repo, i).exists() for i in ids)
    assert kinds(human, epicId=epic_id)[-4:] == ["TASK_DELETED"] * 3 + ["EPIC_DELETED"]


def test_create_task_checks_and_dependencies(human: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    with pytest.raises(NotFound):
        svc.create_task(human, epicId="EPIC-none", title="t")
    with pytest.raises(InvalidRequest):
        svc.create_task(human, epicId=epic_id, title="  ")
    with pytest.raises(InvalidRequest):
        svc.create_task(human, epicId=epic_id, title="t", status="DONE")
    a = svc.create_task(human, epicId=epic_id, title="a")["task"]
    b = svc.create_task(human, epicId=epic_id, title="b", dependsOn=[a["id"]], priority="P0", testFile="tests/test_b.py")["task"]
    assert (b["order"], b["priority"], b["dependsOn"], b["testFile"]) == (2, "CRITICAL", [a["id"]], "tests/test_b.py")
    with pytest.raises(NotFound):
        svc.create_task(human, epicId=epic_id, title="c", dependsOn=["TASK-missing"])
    with pytest.raises(Conflict) as cycle:
        svc.update_task(human, taskId=a["id"], dependsOn=[b["id"]])
    assert cycle.value.code == "DEPENDENCY_CYCLE"
    ready = svc.ready_tasks(human)
    assert [t["id"] for t in ready["ready"]] == [a["id"]] and ready["blocked"][0]["waitingOn"] == [a["id"]]
    deleted = svc.delete_task(human, taskId=a["id"])
    assert deleted["task"]["id"] == a["id"]
    with pytest.raises(NotFound):
        svc.delete_task(human, taskId=a["id"])


def test_rail_proposals_are_files_for_review(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    task_id = planned_task(human, agent)
    made = svc.propose_rail(agent, taskId=task_id, proposalType="add_rail", targetScope="GLOBAL", proposedValue="no print(",
                            reason="debug output leaked twice", workerId="arch")
    assert made["success"] and made["status"] == "PENDING"
    path = repo / ".moss" / "board" / "proposals" / f"{made['proposalId']}.md"
    assert path.read_text().endswith("---\ndebug output leaked twice\n")
    listed = svc.list_proposals(human)["proposals"]
    assert [(p["proposalType"], p["targetScope"], p["workerId"]) for p in listed] == [("ADD_RAIL", "GLOBAL", "arch")]
    with pytest.raises(InvalidRequest):
        svc.propose_rail(agent, taskId=task_id, proposalType="NEW_RAIL", targetScope="GLOBAL", proposedValue="x", reason="y")
    with pytest.raises(Conflict):
        svc.resolve_proposal(agent, proposalId=made["proposalId"], decision="APPROVED")
    svc.resolve_proposal(human, proposalId=made["proposalId"], decision="approved")
    assert svc.list_proposals(human, status="APPROVED")["count"] == 1 and svc.list_proposals(human, status="PENDING")["count"] == 0


def test_search_and_list_shapes(human: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    svc.create_task(human, epicId=epic_id, title="Login page", description="the form")
    svc.create_task(human, epicId=epic_id, title="Logout", description="login state is cleared on login page exit")
    found = svc.search_tasks(human, query="login page", filters={"epicId": epic_id}, limit=5)
    assert found["query"] == "login page" and found["filters"] == {"epicId": epic_id}
    assert [t["title"] for t in found["tasks"]] == ["Login page", "Logout"] and found["totalMatches"] == 2
    assert found["tasks"][0]["definitionOfDone"] == [] and "implementationPlan" in found["tasks"][0]
    with pytest.raises(InvalidRequest):
        svc.search_tasks(human, query="x", filters={"owner": "me"})
    listed = svc.list_tasks(human, epicId=epic_id, status=["BACKLOG"])
    assert listed["epicTitle"] == "E" and [t["hasWorker"] for t in listed["tasks"]] == [False, False]
    assert set(listed["counts"]) >= {"backlog", "inProgress", "review", "done"}
    with pytest.raises(NotFound):
        svc.list_tasks(human, epicId="EPIC-none")


# --------------------------------------------------------------------------- files the human touched


def test_hand_edits_survive_every_tool_write(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    task_id = svc.create_task(human, epicId=epic_id, title="Typo titel", description="Original.")["task"]["id"]
    path = task_file(repo, task_id)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "board")
    # A human fixes the title, moves the task to PLANNING, adds a note key, a comment and body text.
    text = path.read_text()
    text = text.replace("title: Typo titel", "title: Typo title  # fixed by hand")
    text = text.replace("status: BACKLOG", "status: planning")
    text = text.replace("---\nOriginal.", "reviewer: alice\n---\nOriginal.\n\n<!-- keep this -->")
    path.write_text(text)
    claim = svc.claim_next_task(agent, statuses=["PLANNING"], workerId="arch")
    assert claim["task"]["title"] == "Typo title" and claim["task"]["status"] == "PLANNING"
    svc.submit_plan(agent, taskId=task_id, steps=["one"], workerId="arch")
    after = path.read_text()
    assert "title: Typo title  # fixed by hand\n" in after
    assert "reviewer: alice\n" in after
    assert after.endswith("Original.\n\n<!-- keep this -->\n")
    diff = git(repo, "diff", "--", str(path.relative_to(repo)))
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == ["-title: Typo titel", "-status: BACKLOG"]  # the human's two lines; nothing else was rewritten
    assert "+status: AWAITING_APPROVAL" in diff


def test_unreadable_board_files_are_reported_never_skipped(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    good = svc.create_task(human, epicId=epic_id, title="good", status="WORKING")["task"]["id"]
    bad = svc.create_task(human, epicId=epic_id, title="bad")["task"]["id"]
    broken = task_file(repo, bad)
    broken.write_text(broken.read_text().replace("status: BACKLOG", "status: SHIPPED"))
    stray = repo / ".moss" / "board" / "tasks" / "my task.md"
    stray.write_text("---\ntitle: x\n---\n")
    listed = svc.list_tasks(human)
    assert [t["id"] for t in listed["tasks"]] == [good]
    problems = {p["path"]: p for p in listed["problems"]}
    assert problems[f".moss/board/tasks/{bad}.md"]["code"] == "SCHEMA_ERROR"
    assert problems[f".moss/board/tasks/{bad}.md"]["line"] == 5
    assert problems[".moss/board/tasks/my task.md"]["code"] == "SCHEMA_ERROR"
    with pytest.raises(InvalidDocument) as caught:
        svc.show_task(human, taskId=bad)
    assert caught.value.path == f".moss/board/tasks/{bad}.md" and caught.value.line == 5
    with pytest.raises(InvalidDocument):
        svc.set_task_status(human, taskId=bad, status="PLANNING")
    before = broken.read_bytes()
    claim = svc.claim_next_task(agent, statuses=["WORKING"], workerId="w1")
    assert claim["task"]["id"] == good and claim["problems"]
    assert broken.read_bytes() == before


def test_a_bad_activity_line_is_reported_and_the_rest_read(repo: Path, human: svc.Context) -> None:
    svc.create_epic(human, title="E")
    log = repo / ".moss" / "board" / "activity.jsonl"
    with log.open("a") as handle:
        handle.write("{not json\n")
    svc.create_epic(human, title="F")
    result = svc.get_activity_log(human)
    assert [e["event"] for e in result["events"]] == ["EPIC_CREATED", "EPIC_CREATED"]
    assert result["problems"][0]["line"] == 2


def test_two_clones_work_offline_and_merge_cleanly(repo: Path, tmp_path: Path, clock: Clock) -> None:
    (repo / ".gitattributes").write_text(".moss/**/*.jsonl merge=union\n")
    human = svc.Context.for_root(repo, clock=clock)
    epic_id = svc.create_epic(human, title="Shared")["epic"]["id"]
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(repo), str(other)], check=True)
    mine = svc.create_task(human, epicId=epic_id, title="from here", status="WORKING")["task"]["id"]
    svc.claim_next_task(svc.Context.for_root(repo, clock=clock, actor=svc.AGENT), statuses=["WORKING"], workerId="here")
    there = svc.Context.for_root(other, clock=clock)
    theirs = svc.create_task(there, epicId=epic_id, title="from there")["task"]["id"]
    svc.create_team(there, name="Remote", role="worker")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "here")
    git(other, "add", "-A")
    git(other, "commit", "-qm", "there")
    git(repo, "pull", "-q", "--no-rebase", str(other), "main")
    assert git(repo, "status", "--porcelain") == ""
    merged = svc.Context.for_root(repo, clock=clock)
    assert {t["id"] for t in svc.list_tasks(merged)["tasks"]} == {mine, theirs}
    log = svc.get_activity_log(merged, limit=100)
    assert "problems" not in log
    assert {"TASK_CLAIMED", "TEAM_CREATED"} <= {e["event"] for e in log["events"]}


def test_a_task_written_by_hand_is_a_task(repo: Path, human: svc.Context, agent: svc.Context) -> None:
    epic_id = svc.create_epic(human, title="E")["epic"]["id"]
    path = repo / ".moss" / "board" / "tasks" / "fix-login.md"
    path.parent.mkdir()
    path.write_text(f"---\ntitle: Fix the login redirect\nepic: {epic_id}\nstatus: working  # ready to go\n---\nIt loops.\n")
    claimed = svc.claim_next_task(agent, statuses=["WORKING"], workerId="dev")
    assert claimed["task"]["id"] == "fix-login" and claimed["task"]["description"] == "It loops."
    text = path.read_text()
    assert text.startswith(f"---\ntitle: Fix the login redirect\nepic: {epic_id}\nstatus: working  # ready to go\n")
    assert "assigned_worker: dev\n" in text and text.endswith("---\nIt loops.\n")
    assert "id:" not in text  # the file name is the id; nothing derivable is added

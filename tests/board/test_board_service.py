"""Board use cases on real files in a git repository: workflow, QA loops, approval modes,
guards, teams, blocking, rail proposals, hand edits, unreadable files and the activity log."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from board_support import activity_files, activity_lines

from moss_files.board import claims, editing, plans, queries, teams
from moss_files.foundation.context import AGENT, Context
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
def human(repo: Path, clock: Clock) -> Context:
    return Context(repo, clock=clock)


@pytest.fixture
def agent(repo: Path, clock: Clock) -> Context:
    return Context(repo, clock=clock, actor=AGENT)


def events(ctx: Context, **filters: Any) -> list[dict[str, Any]]:
    return list(reversed(queries.get_activity_log(ctx, limit=1000, **filters)["events"]))  # oldest first


def kinds(ctx: Context, **filters: Any) -> list[str]:
    return [e["event"] for e in events(ctx, **filters)]


def task_file(repo: Path, task_id: str) -> Path:
    return repo / ".moss" / "board" / "tasks" / f"{task_id}.md"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def set_mode(repo: Path, human: Context, mode: str, **extra: Any) -> None:
    editing.init_board(human)
    path = repo / ".moss" / "board" / "project.md"
    text = path.read_text().replace("approval_mode: CONTROL", f"approval_mode: {mode}")
    for key, value in extra.items():
        text = text.replace(f"  {key}: ", f"  {key}: {value}  # was: ")
    path.write_text(text)


def planned_task(human: Context, agent: Context, *, steps: list[Any] | None = None, epic: str | None = None) -> str:
    """A task claimed by architect `arch` and planned, waiting for approval."""
    epic_id = epic or editing.create_epic(human, title="Epic")["epic"]["id"]
    task_id = editing.create_task(human, epic_id=epic_id, title="Feature", status="PLANNING")["task"]["id"]
    assert claims.claim_next_task(agent, statuses=["PLANNING"], worker_id="arch", epic_id=epic_id)["task"]["id"] == task_id
    plans.submit_plan(agent, task_id=task_id, steps=steps or ["Build it with error handling", "Test it"], worker_id="arch")
    return task_id


def to_review(human: Context, agent: Context, task_id: str, worker: str = "dev") -> None:
    if queries.show_task(human, task_id=task_id)["status"] == "AWAITING_APPROVAL":
        plans.approve_plan(human, task_id=task_id)
    claimed = claims.claim_next_task(agent, statuses=["WORKING"], worker_id=worker)
    assert claimed["hasNext"] and claimed["task"]["id"] == task_id
    for step in claimed["task"]["implementationPlan"]:
        if step["status"] != "COMPLETED":
            plans.complete_step(agent, task_id=task_id, step_id=step["stepId"], worker_id=worker)
    plans.complete_task(agent, task_id=task_id, worker_id=worker)


# --------------------------------------------------------------------------- the whole workflow


def test_epic_to_done_through_every_role_with_files_and_log(repo: Path, human: Context, agent: Context, clock: Clock) -> None:
    epic = editing.create_epic(human, title="Auth", description="Sign-in for users.", architecture_notes="Sessions in redis", epic_rails=["use bcrypt"])
    assert epic["success"] and epic["epic"]["status"] == "PLANNED"
    epic_id = epic["epic"]["id"]
    created = editing.create_task(
        human, epic_id=epic_id, title="Login form", description="A form.\n\nWith validation.", definition_of_done=["renders", "validates"], priority="high"
    )
    task_id = created["task"]["id"]
    assert created["task"]["path"] == f".moss/board/tasks/{task_id}.md"
    assert task_file(repo, task_id).read_text().endswith("---\nA form.\n\nWith validation.\n")

    assert queries.get_next_task(agent, epic_id=epic_id)["task"]["id"] == task_id
    claims.set_task_status(human, task_id=task_id, status="PLANNING")
    claim = claims.claim_next_task(agent, statuses=["PLANNING"], worker_id="arch")
    assert claim["hasNext"] and claim["task"]["assignedWorkerId"] == "arch"
    assert claim["epic"]["architectureNotes"] == "Sessions in redis"
    assert claim["allRails"] == {"global": [], "epic": ["use bcrypt"], "task": []}
    clock.tick(minutes=5)
    (repo / "src").mkdir()
    (repo / "src" / "form.py").write_text("")  # an affected file exists (submit_plan checks)
    plan = plans.submit_plan(
        agent, task_id=task_id, worker_id="arch", steps=[{"description": "Form component", "affectedFiles": ["src/form.py"]}, {"description": "Tests"}]
    )
    assert (plan["status"], plan["stepCount"]) == ("AWAITING_APPROVAL", 2)
    assert plans.check_approval(agent, task_id=task_id) == {"taskId": task_id, "approved": False, "status": "AWAITING_APPROVAL"}
    assert plans.approve_plan(human, task_id=task_id)["status"] == "WORKING"
    assert plans.check_approval(agent, task_id=task_id)["approved"] is True

    work = claims.claim_next_task(agent, statuses=["WORKING"], worker_id="dev")
    assert work["task"]["id"] == task_id
    assert work["nextAction"] == {"tool": "moe.get_context", "args": {"taskId": task_id}, "reason": "read the task's context before acting on it"}
    plans.get_context(agent, task_id=task_id, worker_id="dev")
    assert plans.start_step(agent, task_id=task_id, step_id="step-1", worker_id="dev") == {
        "success": True,
        "taskId": task_id,
        "stepId": "step-1",
        "stepNumber": 1,
        "totalSteps": 2,
        "description": "Form component",
    }
    clock.tick(minutes=10)
    progress = plans.complete_step(agent, task_id=task_id, step_id="step-1", modified_files=["src/form.py"], note="done", worker_id="dev")
    assert progress["progress"] == {"completed": 1, "total": 2, "percentage": 50}
    assert progress["nextStep"] == {"stepId": "step-2", "description": "Tests"}
    last = plans.complete_step(agent, task_id=task_id, step_id="step-2", worker_id="dev")
    assert last["nextStep"] is None and last["progress"]["percentage"] == 100
    done = plans.complete_task(agent, task_id=task_id, pr_link="https://example.invalid/pr/1", summary="Form and tests", worker_id="dev")
    assert done["status"] == "REVIEW"
    assert done["stats"] == {"stepsCompleted": 2, "filesModified": 1, "duration": 600_000}

    qa = claims.claim_next_task(agent, statuses=["REVIEW"], worker_id="qa")
    assert qa["task"]["id"] == task_id
    plans.get_context(agent, task_id=task_id, worker_id="qa")
    approved = claims.qa_approve(agent, task_id=task_id, summary="All DoD items hold", worker_id="qa")
    assert (approved["status"], approved["summary"]) == ("DONE", "All DoD items hold")

    final = queries.show_task(human, task_id=task_id)
    assert final["status"] == "DONE" and final["assignedWorkerId"] is None
    assert final["prLink"] == "https://example.invalid/pr/1" and final["reviewSummary"] == "All DoD items hold"
    assert final["implementationPlan"][0]["modifiedFiles"] == ["src/form.py"]
    assert final["metrics"]["firstClaimAt"] == "2026-01-21T10:00:00Z"
    assert kinds(human, task_id=task_id) == [
        "TASK_CREATED",
        "TASK_STATUS_CHANGED",
        "TASK_CLAIMED",
        "TASK_STATUS_CHANGED",
        "PLAN_SUBMITTED",
        "TASK_STATUS_CHANGED",
        "PLAN_APPROVED",
        "WORKER_RELEASED",
        "TASK_CLAIMED",
        "STEP_STARTED",
        "STEP_COMPLETED",
        "STEP_COMPLETED",
        "TASK_STATUS_CHANGED",
        "TASK_COMPLETED",
        "WORKER_RELEASED",
        "PR_OPENED",
        "TASK_CLAIMED",
        "TASK_STATUS_CHANGED",
        "QA_APPROVED",
        "WORKER_RELEASED",
    ]
    log = events(human, task_id=task_id)
    assert all(e["epicId"] == epic_id and e["projectId"] for e in log)
    assert {e["workerId"] for e in log if e["event"] == "TASK_CLAIMED"} == {"arch", "dev", "qa"}
    assert next(e for e in log if e["event"] == "PLAN_SUBMITTED")["payload"] == {"stepCount": 2}
    assert [e["event"] for e in events(human, worker_id="dev", event_types=["STEP_COMPLETED"])] == ["STEP_COMPLETED"] * 2


def test_the_log_is_valid_jsonl_with_one_record_per_line(repo: Path, human: Context, agent: Context) -> None:
    task_id = planned_task(human, agent)
    to_review(human, agent, task_id)
    lines = activity_lines(repo)
    records = [json.loads(line) for line in lines]
    assert len({r["id"] for r in records}) == len(records)
    assert all(r["id"].startswith("EVT-") and r["timestamp"].endswith("Z") for r in records)


# --------------------------------------------------------------------------- rails


def test_rail_violation_refuses_the_plan_and_changes_nothing(repo: Path, human: Context, agent: Context) -> None:
    editing.init_board(human)
    project = repo / ".moss" / "board" / "project.md"
    project.write_text(
        project.read_text()
        .replace("forbidden_patterns: []", "forbidden_patterns: ['eval(', innerHTML]")
        .replace("required_patterns: []", "required_patterns: [error handling]")
    )
    epic_id = editing.create_epic(human, title="E", epic_rails=["guidance only"])["epic"]["id"]
    task_id = editing.create_task(human, epic_id=epic_id, title="T", status="PLANNING", task_rails=["also guidance"])["task"]["id"]
    claims.claim_next_task(agent, statuses=["PLANNING"], worker_id="arch")
    before = task_file(repo, task_id).read_bytes()
    with pytest.raises(MossError) as caught:
        plans.submit_plan(agent, task_id=task_id, worker_id="arch", steps=["Parse with EVAL(", {"description": "Render", "affectedFiles": ["innerhtml.js"]}])
    err = caught.value
    assert (err.code, err.status, err.exit_code) == ("RAIL_VIOLATION", 422, 4)
    assert [v["kind"] for v in err.details["violations"]] == ["FORBIDDEN_PATTERN", "FORBIDDEN_PATTERN", "REQUIRED_PATTERN_MISSING"]
    assert task_file(repo, task_id).read_bytes() == before
    assert "RAIL_VIOLATION" in kinds(human, task_id=task_id)
    # Guidance rails are not matched against the plan text.
    ok = plans.submit_plan(agent, task_id=task_id, worker_id="arch", steps=["Parse safely, with Error Handling"])
    assert ok["status"] == "AWAITING_APPROVAL"


# --------------------------------------------------------------------------- QA loops and plan rejection


def test_qa_rejections_count_reopens_and_escalate_to_planning(repo: Path, human: Context, agent: Context) -> None:
    task_id = planned_task(human, agent)
    to_review(human, agent, task_id)
    for count in (1, 2):
        claims.claim_next_task(agent, statuses=["REVIEW"], worker_id="qa")
        plans.get_context(agent, task_id=task_id, worker_id="qa")
        rejected = claims.qa_reject(agent, task_id=task_id, reason=f"DoD item {count} fails", worker_id="qa")
        assert (rejected["status"], rejected["reopenCount"], rejected["escalated"]) == ("WORKING", count, False)
        claimed = claims.claim_next_task(agent, statuses=["WORKING"], worker_id="dev")
        assert claimed["task"]["reopenReason"] == f"DoD item {count} fails"
        plans.complete_task(agent, task_id=task_id, worker_id="dev")
        assert queries.show_task(human, task_id=task_id)["reopenReason"] is None
    claims.claim_next_task(agent, statuses=["REVIEW"], worker_id="qa")
    plans.get_context(agent, task_id=task_id, worker_id="qa")
    third = claims.qa_reject(agent, task_id=task_id, reason="design is wrong", worker_id="qa")
    assert (third["status"], third["reopenCount"], third["escalated"]) == ("PLANNING", 3, True)
    assert (third["exceededReopenCap"], third["parkedForHuman"], third["maxReopens"]) == (True, False, 3)
    assert plans.check_approval(agent, task_id=task_id)["rejected"] is True
    assert kinds(human, task_id=task_id, event_types=["TASK_REOPENED"]) == ["TASK_REOPENED"] * 3
    assert [e["payload"]["why"] for e in events(human, task_id=task_id, event_types=["QA_ESCALATED"])] == ["reopen cap reached"]


def test_qa_errors_follow_the_seed(human: Context, agent: Context) -> None:
    task_id = planned_task(human, agent)
    with pytest.raises(Conflict) as caught:
        claims.qa_approve(agent, task_id=task_id)
    assert caught.value.message == "Task must be in REVIEW status to approve"
    with pytest.raises(InvalidRequest) as bad:
        claims.qa_reject(agent, task_id=task_id, reason=" ")
    assert bad.value.message == "reason is required - explain which DoD items failed and why"
    with pytest.raises(InvalidRequest) as missing:
        claims.qa_approve(agent, task_id="")
    assert missing.value.message == "taskId is required"
    with pytest.raises(NotFound) as unknown:
        claims.qa_approve(agent, task_id="TASK-20260101-00000000")
    assert unknown.value.message == "Task not found: TASK-20260101-00000000"


def test_a_rejected_plan_goes_back_to_its_architect(human: Context, agent: Context) -> None:
    task_id = planned_task(human, agent)
    with pytest.raises(InvalidRequest):
        plans.reject_plan(human, task_id=task_id, reason=" ")
    plans.reject_plan(human, task_id=task_id, reason="split step 1")
    assert plans.check_approval(agent, task_id=task_id) == {
        "taskId": task_id,
        "approved": False,
        "status": "PLANNING",
        "rejected": True,
        "rejectionReason": "split step 1",
    }
    again = claims.claim_next_task(agent, statuses=["PLANNING"], worker_id="arch")
    assert again["alreadyAssigned"]["taskId"] == task_id  # still the architect's
    plans.submit_plan(agent, task_id=task_id, worker_id="arch", steps=["a", "b", "c"])
    assert "rejected" not in plans.check_approval(agent, task_id=task_id)


# --------------------------------------------------------------------------- approval modes


def test_turbo_approves_on_submission(repo: Path, human: Context, agent: Context) -> None:
    set_mode(repo, human, "TURBO")
    task_id = planned_task(human, agent)
    assert queries.show_task(human, task_id=task_id)["status"] == "WORKING"
    assert "PLAN_AUTO_APPROVED" in kinds(human, task_id=task_id)


def test_speed_approves_after_its_delay_whenever_someone_looks(repo: Path, human: Context, agent: Context, clock: Clock) -> None:
    set_mode(repo, human, "SPEED")
    task_id = planned_task(human, agent)
    assert plans.check_approval(agent, task_id=task_id)["approved"] is False
    clock.tick(seconds=1)
    assert claims.claim_next_task(agent, statuses=["WORKING"], worker_id="dev")["hasNext"] is False
    clock.tick(seconds=1)
    # A fresh context (a restarted server) still approves: the timer is the file's submission time.
    restarted = Context(repo, clock=clock, actor=AGENT)
    assert claims.claim_next_task(restarted, statuses=["WORKING"], worker_id="dev")["task"]["id"] == task_id


def test_speed_waits_its_whole_delay_from_a_submission_late_in_a_second(repo: Path, human: Context, agent: Context, clock: Clock) -> None:
    """Issue 27 item 6: with speed_mode_delay_ms 1000, a plan submitted at 10:00:00.990 was
    approved at 10:00:01.016, 26 ms later: the submission was stored to the second."""
    set_mode(repo, human, "SPEED", speed_mode_delay_ms=1000)
    clock.tick(milliseconds=990)
    task_id = planned_task(human, agent)
    assert queries.show_task(human, task_id=task_id)["planSubmittedAt"] == "2026-01-21T10:00:00.990Z"
    clock.tick(milliseconds=26)
    assert plans.check_approval(agent, task_id=task_id)["approved"] is False
    assert claims.claim_next_task(agent, statuses=["WORKING"], worker_id="dev")["hasNext"] is False
    clock.tick(milliseconds=973)  # 999 ms after the submission
    assert plans.check_approval(agent, task_id=task_id)["approved"] is False
    clock.tick(milliseconds=1)
    assert plans.check_approval(agent, task_id=task_id)["approved"] is True


def test_a_time_without_milliseconds_counts_from_the_end_of_its_second(repo: Path, human: Context, agent: Context, clock: Clock) -> None:
    """A submission time written to the second (by hand, an older moss-files or Moe's
    migration) never makes SPEED approve early."""
    set_mode(repo, human, "SPEED", speed_mode_delay_ms=1000)
    task_id = planned_task(human, agent)
    path = task_file(repo, task_id)
    path.write_text(re.sub(r"plan_submitted: .*", "plan_submitted: '2026-01-21T10:00:00Z'", path.read_text()))
    clock.tick(milliseconds=1998)
    assert plans.check_approval(agent, task_id=task_id)["approved"] is False
    clock.tick(milliseconds=1)
    assert plans.check_approval(agent, task_id=task_id)["approved"] is True


def test_an_approval_at_submission_names_the_mode_that_gave_it(repo: Path, human: Context, agent: Context) -> None:
    set_mode(repo, human, "SPEED", speed_mode_delay_ms=0)
    epic_id = editing.create_epic(human, title="Epic")["epic"]["id"]
    task_id = editing.create_task(human, epic_id=epic_id, title="Feature", status="PLANNING")["task"]["id"]
    claims.claim_next_task(agent, statuses=["PLANNING"], worker_id="arch", epic_id=epic_id)
    answer = plans.submit_plan(agent, task_id=task_id, steps=["Build it with error handling", "Test it"], worker_id="arch")
    assert answer["status"] == "WORKING" and answer["message"] == "Plan approved automatically (SPEED mode)."


def test_agents_do_not_approve_plans_in_control_mode(human: Context, agent: Context) -> None:
    task_id = planned_task(human, agent)
    for attempt in (
        lambda: plans.approve_plan(agent, task_id=task_id),
        lambda: claims.set_task_status(agent, task_id=task_id, status="WORKING", worker_id="arch"),
    ):
        with pytest.raises(Conflict) as caught:
            attempt()
        assert (caught.value.code, caught.value.status) == ("NOT_ALLOWED", 403)
    assert claims.set_task_status(human, task_id=task_id, status="WORKING")["status"] == "WORKING"


# --------------------------------------------------------------------------- guards and steps


def test_only_the_holder_acts_on_a_held_task(human: Context, agent: Context) -> None:
    task_id = planned_task(human, agent)
    plans.approve_plan(human, task_id=task_id)
    claims.claim_next_task(agent, statuses=["WORKING"], worker_id="dev")
    plans.get_context(agent, task_id=task_id, worker_id="intruder")  # a bystander's read records nothing
    for call in (
        lambda: plans.start_step(agent, task_id=task_id, step_id="step-1", worker_id="intruder"),
        lambda: plans.complete_step(agent, task_id=task_id, step_id="step-1", worker_id="intruder"),
        lambda: plans.complete_task(agent, task_id=task_id, worker_id="intruder"),
        lambda: claims.set_task_status(agent, task_id=task_id, status="BACKLOG", worker_id="intruder"),
    ):
        with pytest.raises(Conflict) as caught:
            call()
        assert caught.value.code == "NOT_ALLOWED"
    # A human (no worker id) is not guarded.
    assert plans.start_step(human, task_id=task_id, step_id="step-1")["stepNumber"] == 1


def test_step_rules(human: Context, agent: Context) -> None:
    task_id = planned_task(human, agent)
    with pytest.raises(Conflict) as early:
        plans.start_step(agent, task_id=task_id, step_id="step-1", worker_id="arch")
    assert early.value.code == "INVALID_TRANSITION" and "check_approval" in (early.value.hint or "")
    plans.approve_plan(human, task_id=task_id)
    with pytest.raises(NotFound):
        plans.start_step(human, task_id=task_id, step_id="step-9")
    plans.complete_step(human, task_id=task_id, step_id="step-2", modified_files=["./b.py"])  # straight from PENDING
    again = plans.complete_step(human, task_id=task_id, step_id="step-2")
    assert again["progress"]["completed"] == 1  # idempotent
    with pytest.raises(Conflict):
        plans.start_step(human, task_id=task_id, step_id="step-2")
    with pytest.raises(Conflict) as pending:
        plans.complete_task(human, task_id=task_id)
    assert pending.value.details["pendingSteps"] == ["step-1"]
    with pytest.raises(InvalidRequest):
        plans.complete_step(human, task_id=task_id, step_id="step-1", modified_files=["../outside.py"])


def test_set_task_status_enforces_the_table(human: Context) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    task_id = editing.create_task(human, epic_id=epic_id, title="T")["task"]["id"]
    with pytest.raises(Conflict) as caught:
        claims.set_task_status(human, task_id=task_id, status="DONE")
    assert caught.value.code == "INVALID_TRANSITION" and caught.value.exit_code == 5
    with pytest.raises(InvalidRequest) as bad:
        claims.set_task_status(human, task_id=task_id, status="SHIPPED")
    assert bad.value.code == "SCHEMA_ERROR"
    assert claims.set_task_status(human, task_id=task_id, status="in progress")["status"] == "WORKING"
    assert claims.set_task_status(human, task_id=task_id, status="WORKING")["status"] == "WORKING"  # a no-op


# --------------------------------------------------------------------------- claims (single process)


def test_claim_shapes_and_constraints(human: Context, agent: Context) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    first = editing.create_task(human, epic_id=epic_id, title="first", status="WORKING")["task"]["id"]
    second = editing.create_task(human, epic_id=epic_id, title="second", status="WORKING")["task"]["id"]
    peek = claims.claim_next_task(agent, statuses=["WORKING"])
    assert peek["task"]["id"] == first and peek["task"]["assignedWorkerId"] is None
    got = claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w1")
    assert set(got) == {"hasNext", "project", "epic", "task", "allRails", "nextAction"} and got["task"]["id"] == first
    with pytest.raises(Conflict) as caught:
        claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w2")
    assert caught.value.message == "Epic already has an active worker on WORKING tasks: w1"
    taken = claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w2", replace_existing=True)
    assert (taken["task"]["id"], taken["takenOverFrom"]) == (first, "w1")
    assert teams.show_worker(human, worker_id="w1")["status"] == "IDLE"
    assert kinds(human, task_id=first)[-2:] == ["WORKER_RELEASED", "TASK_CLAIMED"]
    assert claims.claim_next_task(agent, statuses=["REVIEW"], worker_id="w3") == {"hasNext": False}
    with pytest.raises(InvalidRequest):
        claims.claim_next_task(agent, statuses=[], worker_id="w3")
    with pytest.raises(InvalidRequest):
        claims.claim_next_task(agent, statuses=["DONE"], worker_id="w3")
    with pytest.raises(InvalidRequest):
        claims.claim_next_task(agent, statuses=["WORKING"], worker_id="../evil")
    assert second in {t["id"] for t in queries.list_tasks(human, epic_id=epic_id)["tasks"]}


def test_release_task_keeps_the_status_and_frees_the_task(human: Context, agent: Context) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    task_id = editing.create_task(human, epic_id=epic_id, title="t", status="WORKING")["task"]["id"]
    claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w1")
    released = claims.release_task(agent, task_id=task_id, reason="end of session", worker_id="w1")
    assert (released["status"], released["releasedWorkerId"]) == ("WORKING", "w1")
    assert claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w2")["task"]["id"] == task_id


# --------------------------------------------------------------------------- teams


def test_teams_create_join_leave_list_and_share_an_epic(repo: Path, human: Context, agent: Context) -> None:
    made = teams.create_team(agent, name="Coders", role="worker", max_size=2)
    assert made["created"] is True and made["team"]["maxSize"] == 2
    again = teams.create_team(agent, name="coders", role="WORKER")
    assert again == {"team": made["team"], "created": False}
    assert teams.create_team(agent, name="Coders", role="qa")["created"] is True  # another role, another team
    team_id = made["team"]["id"]
    assert teams.join_team(agent, team_id=team_id, worker_id="w1")["team"]["memberIds"] == ["w1"]
    assert (repo / ".moss" / "board" / "workers" / "w1.md").exists()  # auto-registered
    assert teams.join_team(agent, team_id=team_id, worker_id="w1")["team"]["memberIds"] == ["w1"]
    teams.join_team(agent, team_id=team_id, worker_id="w2")
    with pytest.raises(Conflict) as full:
        teams.join_team(agent, team_id=team_id, worker_id="w3")
    assert (full.value.code, full.value.message) == ("TEAM_FULL", "Team is full (max 2 members)")
    with pytest.raises(NotFound) as missing:
        teams.join_team(agent, team_id="TEAM-nope", worker_id="w1")
    assert missing.value.message == "Team not found: TEAM-nope"

    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    for title in ("a", "b", "c"):
        editing.create_task(human, epic_id=epic_id, title=title, status="WORKING")
    assert claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w1")["hasNext"]
    assert claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w2")["hasNext"]  # teammates share the epic
    with pytest.raises(Conflict):
        claims.claim_next_task(agent, statuses=["WORKING"], worker_id="outsider")
    listed = teams.list_teams(agent, role="worker")["teams"]
    assert [(m["id"], m["type"], m["status"]) for m in listed[0]["members"]] == [("w1", "worker", "CODING"), ("w2", "worker", "CODING")]
    assert teams.leave_team(agent, team_id=team_id, worker_id="w2")["team"]["memberIds"] == ["w1"]
    assert teams.leave_team(agent, team_id=team_id, worker_id="w2")["team"]["memberIds"] == ["w1"]
    assert "TEAM_JOINED" in kinds(human, worker_id="w1") and "TEAM_LEFT" in kinds(human, worker_id="w2")


# --------------------------------------------------------------------------- blocked workers


@pytest.mark.parametrize("retry", [False, True])
def test_report_blocked_and_unblock(human: Context, agent: Context, retry: bool) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    task_id = editing.create_task(human, epic_id=epic_id, title="t", status="WORKING")["task"]["id"]
    claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w1")
    with pytest.raises(Conflict) as not_blocked:
        plans.unblock_worker(human, worker_id="w1", resolution="nothing")
    assert not_blocked.value.message == "Worker must be in BLOCKED status"
    blocked = plans.report_blocked(agent, task_id=task_id, reason="no database", needs_from="ops", worker_id="w1")
    assert (blocked["status"], blocked["taskId"]) == ("BLOCKED", task_id)
    worker = teams.show_worker(human, worker_id="w1")
    assert (worker["status"], worker["blockedReason"], worker["needsFrom"], worker["currentTaskId"]) == ("BLOCKED", "no database", "ops", task_id)
    assert queries.show_task(human, task_id=task_id)["status"] == "WORKING"  # the task's status is untouched
    result = plans.unblock_worker(human, worker_id="w1", resolution="db is up", retry_task=retry)
    assert (result["retryTask"], result["resolution"]) == (retry, "db is up")
    assert result["currentTaskId"] == (task_id if retry else None)
    assert queries.show_task(human, task_id=task_id)["assignedWorkerId"] == ("w1" if retry else None)
    assert kinds(human, worker_id="w1")[-1] == "WORKER_UNBLOCKED"
    with pytest.raises(NotFound):
        plans.unblock_worker(human, worker_id="ghost", resolution="x")


# --------------------------------------------------------------------------- epics, tasks, proposals


def test_epic_crud_and_cascading_delete(repo: Path, human: Context) -> None:
    epic_id = editing.create_epic(human, title="E", order=5)["epic"]["id"]
    with pytest.raises(InvalidRequest) as no_id:
        editing.update_epic(human, epic_id="", title="x")
    assert no_id.value.message == "epicId is required"
    with pytest.raises(NotFound) as missing:
        editing.update_epic(human, epic_id="EPIC-20260101-00000000", title="x")
    assert missing.value.message == "Epic not found: EPIC-20260101-00000000"
    updated = editing.update_epic(human, epic_id=epic_id, status="active", epic_rails=["r1"])["epic"]
    assert (updated["status"], updated["epicRails"], updated["order"]) == ("ACTIVE", ["r1"], 5)
    ids = [editing.create_task(human, epic_id=epic_id, title=f"t{i}")["task"]["id"] for i in range(3)]
    with pytest.raises(Conflict) as has_tasks:
        editing.delete_epic(human, epic_id=epic_id)
    assert has_tasks.value.message.startswith(f'Epic "{epic_id}" has 3 task(s)')
    gone = editing.delete_epic(human, epic_id=epic_id, cascade_delete=True)
    assert gone["deletedTaskCount"] == 3 and gone["deletedEpic"]["id"] == epic_id
    assert not any(task_file(repo, i).exists() for i in ids)
    assert kinds(human, epic_id=epic_id)[-4:] == ["TASK_DELETED"] * 3 + ["EPIC_DELETED"]


def test_create_task_checks_and_dependencies(human: Context) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    with pytest.raises(NotFound):
        editing.create_task(human, epic_id="EPIC-none", title="t")
    with pytest.raises(InvalidRequest):
        editing.create_task(human, epic_id=epic_id, title="  ")
    with pytest.raises(InvalidRequest):
        editing.create_task(human, epic_id=epic_id, title="t", status="DONE")
    a = editing.create_task(human, epic_id=epic_id, title="a")["task"]
    b = editing.create_task(human, epic_id=epic_id, title="b", depends_on=[a["id"]], priority="P0", test_file="tests/test_b.py")["task"]
    assert (b["order"], b["priority"], b["dependsOn"], b["testFile"]) == (2, "CRITICAL", [a["id"]], "tests/test_b.py")
    with pytest.raises(NotFound):
        editing.create_task(human, epic_id=epic_id, title="c", depends_on=["TASK-missing"])
    with pytest.raises(Conflict) as cycle:
        editing.update_task(human, task_id=a["id"], depends_on=[b["id"]])
    assert cycle.value.code == "DEPENDENCY_CYCLE"
    ready = queries.ready_tasks(human)
    assert [t["id"] for t in ready["ready"]] == [a["id"]] and ready["blocked"][0]["waitingOn"] == [a["id"]]
    deleted = editing.delete_task(human, task_id=a["id"])
    assert deleted["task"]["id"] == a["id"]
    with pytest.raises(NotFound):
        editing.delete_task(human, task_id=a["id"])


def test_a_task_may_depend_on_an_epic_and_waits_until_it_is_completed(human: Context) -> None:
    first = editing.create_epic(human, title="First")["epic"]["id"]
    second = editing.create_epic(human, title="Second")["epic"]["id"]
    waiting = editing.create_task(human, epic_id=second, title="after the first epic", depends_on=[first])["task"]
    assert queries.ready_tasks(human)["blocked"][0]["waitingOn"] == [first]
    editing.update_epic(human, epic_id=first, status="COMPLETED")
    assert [t["id"] for t in queries.ready_tasks(human)["ready"]] == [waiting["id"]]


def test_rail_proposals_are_files_for_review(repo: Path, human: Context, agent: Context) -> None:
    task_id = planned_task(human, agent)
    made = plans.propose_rail(
        agent,
        task_id=task_id,
        proposal_type="add_rail",
        target_scope="GLOBAL",
        proposed_value="no print(",
        reason="debug output leaked twice",
        worker_id="arch",
    )
    assert made["success"] and made["status"] == "PENDING"
    path = repo / ".moss" / "board" / "proposals" / f"{made['proposalId']}.md"
    assert path.read_text().endswith("---\ndebug output leaked twice\n")
    listed = plans.list_proposals(human)["proposals"]
    assert [(p["proposalType"], p["targetScope"], p["workerId"]) for p in listed] == [("ADD_RAIL", "GLOBAL", "arch")]
    with pytest.raises(InvalidRequest):
        plans.propose_rail(agent, task_id=task_id, proposal_type="NEW_RAIL", target_scope="GLOBAL", proposed_value="x", reason="y")
    with pytest.raises(Conflict):
        plans.resolve_proposal(agent, proposal_id=made["proposalId"], decision="APPROVED")
    plans.resolve_proposal(human, proposal_id=made["proposalId"], decision="approved")
    assert plans.list_proposals(human, status="APPROVED")["count"] == 1 and plans.list_proposals(human, status="PENDING")["count"] == 0


def test_search_and_list_shapes(human: Context) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    editing.create_task(human, epic_id=epic_id, title="Login page", description="the form")
    editing.create_task(human, epic_id=epic_id, title="Logout", description="login state is cleared on login page exit")
    found = queries.search_tasks(human, query="login page", epic_id=epic_id, limit=5)
    assert found["query"] == "login page" and found["filters"] == {"epicId": epic_id}
    assert [t["title"] for t in found["tasks"]] == ["Login page", "Logout"] and found["totalMatches"] == 2
    assert found["tasks"][0]["definitionOfDone"] == [] and "implementationPlan" in found["tasks"][0]
    with pytest.raises(TypeError):  # filters are typed parameters: an unknown one is refused by the signature
        queries.search_tasks(human, query="x", owner="me")  # type: ignore[call-arg]
    listed = queries.list_tasks(human, epic_id=epic_id, statuses=["BACKLOG"])
    assert listed["epicTitle"] == "E" and [t["hasWorker"] for t in listed["tasks"]] == [False, False]
    assert set(listed["counts"]) >= {"backlog", "inProgress", "review", "done"}
    with pytest.raises(NotFound):
        queries.list_tasks(human, epic_id="EPIC-none")


# --------------------------------------------------------------------------- files the human touched


def test_hand_edits_survive_every_tool_write(repo: Path, human: Context, agent: Context) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    task_id = editing.create_task(human, epic_id=epic_id, title="Typo titel", description="Original.")["task"]["id"]
    path = task_file(repo, task_id)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "board")
    # A human fixes the title, moves the task to PLANNING, adds a note key, a comment and body text.
    text = path.read_text()
    text = text.replace("title: Typo titel", "title: Typo title  # fixed by hand")
    text = text.replace("status: BACKLOG", "status: planning")
    text = text.replace("---\nOriginal.", "reviewer: alice\n---\nOriginal.\n\n<!-- keep this -->")
    path.write_text(text)
    claim = claims.claim_next_task(agent, statuses=["PLANNING"], worker_id="arch")
    assert claim["task"]["title"] == "Typo title" and claim["task"]["status"] == "PLANNING"
    plans.submit_plan(agent, task_id=task_id, steps=["one"], worker_id="arch")
    after = path.read_text()
    assert "title: Typo title  # fixed by hand\n" in after
    assert "reviewer: alice\n" in after
    assert after.endswith("Original.\n\n<!-- keep this -->\n")
    diff = git(repo, "diff", "--", str(path.relative_to(repo)))
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == ["-title: Typo titel", "-status: BACKLOG"]  # the human's two lines; nothing else was rewritten
    assert "+status: AWAITING_APPROVAL" in diff


def test_unreadable_board_files_are_reported_never_skipped(repo: Path, human: Context, agent: Context) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    good = editing.create_task(human, epic_id=epic_id, title="good", status="WORKING")["task"]["id"]
    bad = editing.create_task(human, epic_id=epic_id, title="bad")["task"]["id"]
    broken = task_file(repo, bad)
    broken.write_text(broken.read_text().replace("status: BACKLOG", "status: SHIPPED"))
    stray = repo / ".moss" / "board" / "tasks" / "my task.md"
    stray.write_text("---\ntitle: x\n---\n")
    listed = queries.list_tasks(human)
    assert [t["id"] for t in listed["tasks"]] == [good]
    problems = {p["path"]: p for p in listed["problems"]}
    assert problems[f".moss/board/tasks/{bad}.md"]["code"] == "SCHEMA_ERROR"
    assert problems[f".moss/board/tasks/{bad}.md"]["line"] == 5
    assert problems[".moss/board/tasks/my task.md"]["code"] == "SCHEMA_ERROR"
    with pytest.raises(InvalidDocument) as caught:
        queries.show_task(human, task_id=bad)
    assert caught.value.path == f".moss/board/tasks/{bad}.md" and caught.value.line == 5
    with pytest.raises(InvalidDocument):
        claims.set_task_status(human, task_id=bad, status="PLANNING")
    before = broken.read_bytes()
    claim = claims.claim_next_task(agent, statuses=["WORKING"], worker_id="w1")
    assert claim["task"]["id"] == good and claim["problems"]
    assert broken.read_bytes() == before


def test_a_bad_activity_line_is_reported_and_the_rest_read(repo: Path, human: Context) -> None:
    editing.create_epic(human, title="E")
    (log,) = activity_files(repo)
    with log.open("a") as handle:
        handle.write("{not json\n")
    editing.create_epic(human, title="F")
    result = queries.get_activity_log(human)
    assert [e["event"] for e in result["events"]] == ["EPIC_CREATED", "EPIC_CREATED"]
    assert result["problems"][0]["line"] == 2


def test_two_clones_work_offline_and_merge_cleanly(repo: Path, tmp_path: Path, clock: Clock) -> None:
    (repo / ".gitattributes").write_text(".moss/**/*.jsonl merge=union\n")
    human = Context(repo, clock=clock)
    epic_id = editing.create_epic(human, title="Shared")["epic"]["id"]
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(repo), str(other)], check=True)
    mine = editing.create_task(human, epic_id=epic_id, title="from here", status="WORKING")["task"]["id"]
    claims.claim_next_task(Context(repo, clock=clock, actor=AGENT), statuses=["WORKING"], worker_id="here")
    there = Context(other, clock=clock)
    theirs = editing.create_task(there, epic_id=epic_id, title="from there")["task"]["id"]
    teams.create_team(there, name="Remote", role="worker")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "here")
    git(other, "add", "-A")
    git(other, "commit", "-qm", "there")
    git(repo, "pull", "-q", "--no-rebase", str(other), "main")
    assert git(repo, "status", "--porcelain") == ""
    merged = Context(repo, clock=clock)
    assert {t["id"] for t in queries.list_tasks(merged)["tasks"]} == {mine, theirs}
    log = queries.get_activity_log(merged, limit=100)
    assert "problems" not in log
    assert {"TASK_CLAIMED", "TEAM_CREATED"} <= {e["event"] for e in log["events"]}


def test_a_task_written_by_hand_is_a_task(repo: Path, human: Context, agent: Context) -> None:
    epic_id = editing.create_epic(human, title="E")["epic"]["id"]
    path = repo / ".moss" / "board" / "tasks" / "fix-login.md"
    path.parent.mkdir()
    path.write_text(f"---\ntitle: Fix the login redirect\nepic: {epic_id}\nstatus: working  # ready to go\n---\nIt loops.\n")
    claimed = claims.claim_next_task(agent, statuses=["WORKING"], worker_id="dev")
    assert claimed["task"]["id"] == "fix-login" and claimed["task"]["description"] == "It loops."
    text = path.read_text()
    assert text.startswith(f"---\ntitle: Fix the login redirect\nepic: {epic_id}\nstatus: working  # ready to go\n")
    assert "assigned_worker: dev\n" in text and text.endswith("---\nIt loops.\n")
    assert "id:" not in text  # the file name is the id; nothing derivable is added

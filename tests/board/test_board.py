"""The board's pure core: state machine, rails, plans, file forms, claim planning and queries."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from moss_files.board import files, model, rules, shapes
from moss_files.board.model import Board, Epic, Rails, Settings, Step, Task, Team, Worker
from moss_files.foundation import document
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest

NOW = "2026-01-21T10:00:00Z"

# The table the module docstring and the README promise, written out independently.
LEGAL = {
    ("BACKLOG", "PLANNING"),
    ("BACKLOG", "WORKING"),
    ("BACKLOG", "ARCHIVED"),
    ("PLANNING", "AWAITING_APPROVAL"),
    ("PLANNING", "BACKLOG"),
    ("PLANNING", "ARCHIVED"),
    ("AWAITING_APPROVAL", "WORKING"),
    ("AWAITING_APPROVAL", "PLANNING"),
    ("AWAITING_APPROVAL", "BACKLOG"),
    ("AWAITING_APPROVAL", "ARCHIVED"),
    ("WORKING", "REVIEW"),
    ("WORKING", "PLANNING"),
    ("WORKING", "BACKLOG"),
    ("WORKING", "ARCHIVED"),
    ("REVIEW", "DONE"),
    ("REVIEW", "WORKING"),
    ("REVIEW", "PLANNING"),
    ("REVIEW", "ARCHIVED"),
    ("DONE", "WORKING"),
    ("DONE", "PLANNING"),
    ("DONE", "ARCHIVED"),
    ("ARCHIVED", "BACKLOG"),
}


def task(status: str = "BACKLOG", **fields: object) -> Task:
    base = Task(
        id=fields.pop("id", "TASK-1"),
        epic=fields.pop("epic", "EPIC-1"),
        title=fields.pop("title", "A task"),
        status=status,
        created="2026-01-01T00:00:00Z",
        updated="2026-01-01T00:00:00Z",
    )
    return replace(base, **fields)


def done_plan() -> tuple[Step, ...]:
    return (Step("step-1", "one", status="COMPLETED"), Step("step-2", "two", status="COMPLETED"))


# --------------------------------------------------------------------------- state machine


@pytest.mark.parametrize(("source", "target"), list(itertools.product(model.STATUSES, model.STATUSES)))
def test_every_pair_of_statuses_is_legal_exactly_when_the_table_says(source: str, target: str) -> None:
    # Give every move its best chance: a completed plan and a reason; only the table decides.
    start = task(source, plan=done_plan(), assigned_worker="w1")
    if source == target:
        assert rules.apply_transition(start, target, NOW, reason="r") is start
        return
    if (source, target) in LEGAL:
        moved = rules.apply_transition(start, target, NOW, reason="because")
        assert moved.status == target
        assert moved.updated == NOW
    else:
        with pytest.raises(Conflict) as caught:
            rules.apply_transition(start, target, NOW, reason="because")
        assert caught.value.code == "INVALID_TRANSITION"
        assert caught.value.details["allowed"] == sorted(t for s, t in LEGAL if s == source)


def test_the_table_in_the_code_is_the_documented_one() -> None:
    assert {(s, t) for s, targets in rules.TRANSITIONS.items() for t in targets} == LEGAL


def test_awaiting_approval_needs_a_plan() -> None:
    with pytest.raises(Conflict) as caught:
        rules.apply_transition(task("PLANNING"), "AWAITING_APPROVAL", NOW)
    assert caught.value.code == "INVALID_TRANSITION"


def test_review_needs_every_step_completed() -> None:
    half = (Step("step-1", "one", status="COMPLETED"), Step("step-2", "two", status="IN_PROGRESS"))
    with pytest.raises(Conflict) as caught:
        rules.apply_transition(task("WORKING", plan=half), "REVIEW", NOW)
    assert caught.value.details["pendingSteps"] == ["step-2"]
    assert rules.apply_transition(task("WORKING"), "REVIEW", NOW).status == "REVIEW"  # no plan: the human path


@pytest.mark.parametrize(
    ("source", "target"),
    [("AWAITING_APPROVAL", "PLANNING"), ("WORKING", "PLANNING"), ("REVIEW", "WORKING"), ("REVIEW", "PLANNING"), ("DONE", "WORKING"), ("DONE", "PLANNING")],
)
def test_moving_back_needs_a_reason_and_records_it(source: str, target: str) -> None:
    start = task(source, plan=done_plan())
    with pytest.raises(InvalidRequest):
        rules.apply_transition(start, target, NOW)
    with pytest.raises(InvalidRequest):
        rules.apply_transition(start, target, NOW, reason="  ")
    moved = rules.apply_transition(start, target, NOW, reason=" missing tests ")
    assert moved.reopen_reason == "missing tests"
    assert moved.reopen_count == (1 if source in ("REVIEW", "DONE") else 0)


def test_holder_is_kept_only_while_the_architect_waits_or_revises() -> None:
    planning = task("PLANNING", plan=done_plan(), assigned_worker="arch")
    waiting = rules.apply_transition(planning, "AWAITING_APPROVAL", NOW)
    assert waiting.assigned_worker == "arch" and waiting.plan_submitted == NOW
    rejected = rules.apply_transition(waiting, "PLANNING", NOW, reason="too big")
    assert rejected.assigned_worker == "arch"
    approved = rules.apply_transition(waiting, "WORKING", NOW)
    assert approved.assigned_worker is None
    assert approved.plan_approved == NOW and approved.work_started == NOW
    working = replace(approved, assigned_worker="w1")
    review = rules.apply_transition(working, "REVIEW", "2026-01-21T11:00:00Z")
    assert review.assigned_worker is None and review.review_started == "2026-01-21T11:00:00Z"


def test_timestamps_follow_the_moves() -> None:
    t = rules.apply_transition(task("BACKLOG"), "WORKING", "2026-01-01T01:00:00Z")
    assert t.work_started == "2026-01-01T01:00:00Z"
    t = rules.apply_transition(replace(t, plan=done_plan()), "REVIEW", "2026-01-01T02:00:00Z")
    t = rules.apply_transition(t, "WORKING", "2026-01-01T03:00:00Z", reason="again")
    assert t.work_started == "2026-01-01T01:00:00Z"  # the first start is kept
    t = rules.apply_transition(t, "REVIEW", "2026-01-01T04:00:00Z")
    assert t.reopen_reason is None  # the fix is in: the reason is spent
    done = rules.apply_transition(t, "DONE", "2026-01-01T05:00:00Z")
    assert done.completed == "2026-01-01T05:00:00Z"
    reopened = rules.apply_transition(done, "WORKING", "2026-01-01T06:00:00Z", reason="regression")
    assert reopened.completed is None and reopened.reopen_count == 2


def test_approval_modes() -> None:
    submitted = datetime(2026, 1, 21, 10, 0, tzinfo=UTC)
    waiting = task("AWAITING_APPROVAL", plan=done_plan(), plan_submitted="2026-01-21T10:00:00.000Z")
    assert not rules.approval_due(waiting, Settings(approval_mode="CONTROL"), submitted + timedelta(days=1))
    assert rules.approval_due(waiting, Settings(approval_mode="TURBO"), submitted)
    speed = Settings(approval_mode="SPEED", speed_mode_delay_ms=2000)
    assert not rules.approval_due(waiting, speed, submitted + timedelta(milliseconds=1999))
    assert rules.approval_due(waiting, speed, submitted + timedelta(milliseconds=2000))
    assert not rules.approval_due(replace(waiting, status="PLANNING"), speed, submitted + timedelta(days=1))
    # A time stored to the second only counts from the end of that second: never early.
    to_the_second = replace(waiting, plan_submitted="2026-01-21T10:00:00Z")
    assert not rules.approval_due(to_the_second, speed, submitted + timedelta(milliseconds=2998))
    assert rules.approval_due(to_the_second, speed, submitted + timedelta(milliseconds=2999))


# --------------------------------------------------------------------------- plans and rails


def test_steps_are_numbered_and_paths_normalized() -> None:
    steps = rules.parse_steps(["Write it", {"description": " Test it ", "affectedFiles": ["./src//a.py", "src/a.py", "b\\c.py"]}])
    assert [s.id for s in steps] == ["step-1", "step-2"]
    assert steps[1].description == "Test it"
    assert steps[1].affected_files == ("src/a.py", "b/c.py")


@pytest.mark.parametrize(
    "steps",
    [
        None,
        [],
        "one",
        [{"affectedFiles": ["a"]}],
        [{"description": ""}],
        [42],
        [{"description": "x", "affectedFiles": "a.py"}],
        [{"description": "x" * 10_001}],
        [{"description": f"s{i}"} for i in range(101)],
        [{"description": "x", "affectedFiles": [f"f{i}" for i in range(51)]}],
    ],
)
def test_bad_plans_are_refused(steps: object) -> None:
    with pytest.raises(InvalidRequest):
        rules.parse_steps(steps)


@pytest.mark.parametrize("path", ["/etc/passwd", "../up.py", "a/../../b", "C:/x.py", "", "./"])
def test_affected_files_stay_inside_the_project(path: str) -> None:
    with pytest.raises(InvalidRequest):
        rules.check_project_path(path)


def test_rails_forbidden_anywhere_required_somewhere_case_insensitive() -> None:
    rails = Rails(forbidden_patterns=("eval(", "innerHTML"), required_patterns=("error handling", "test"))
    good = rules.parse_steps(["Add ERROR HANDLING to the parser", {"description": "Write a Test", "affectedFiles": ["t.py"]}])
    assert rules.check_rails(rails, good) == []
    bad = rules.parse_steps(["Call EVAL( on input", {"description": "set innerhtml", "affectedFiles": ["x.py"]}])
    found = rules.check_rails(rails, bad)
    assert [(v.kind, v.pattern, v.step_id) for v in found] == [
        ("FORBIDDEN_PATTERN", "eval(", "step-1"),
        ("FORBIDDEN_PATTERN", "innerHTML", "step-2"),
        ("REQUIRED_PATTERN_MISSING", "error handling", None),
        ("REQUIRED_PATTERN_MISSING", "test", None),
    ]
    err = rules.rail_error(found)
    assert err.code == "RAIL_VIOLATION" and err.status == 422
    assert err.details["violations"][0] == {"kind": "FORBIDDEN_PATTERN", "pattern": "eval(", "stepId": "step-1"}


def test_forbidden_patterns_are_matched_in_file_names_too() -> None:
    rails = Rails(forbidden_patterns=("secrets/",))
    assert rules.check_rails(rails, rules.parse_steps([{"description": "read config", "affectedFiles": ["secrets/key.pem"]}]))


def test_epic_and_task_rails_are_guidance_in_all_rails() -> None:
    project = model.default_project("p")
    project = replace(project, global_rails=Rails(required_patterns=("test",), forbidden_patterns=("eval(",)))
    epic = Epic(id="E", title="e", epic_rails=("use bcrypt",))
    assert rules.all_rails(project, epic, task(task_rails=("no globals",))) == {"global": ["test"], "epic": ["use bcrypt"], "task": ["no globals"]}
    assert rules.all_rails(project, None, None) == {"global": ["test"], "epic": [], "task": []}


# --------------------------------------------------------------------------- files


def test_a_task_renders_and_reads_back_the_same() -> None:
    original = task(
        "WORKING",
        description="Line one\n\nLine two",
        priority="HIGH",
        order=3,
        assigned_worker="w1",
        depends_on=("TASK-0",),
        definition_of_done=("works", "tested"),
        task_rails=("no eval",),
        plan=(Step("step-1", "do", "COMPLETED", ("a.py",), ("a.py",), "done", NOW, NOW),),
        reopen_count=2,
        reopen_reason="flaky",
        test_file="tests/test_a.py",
        first_claimed=NOW,
    )
    text = files.render_task(original)
    assert files.parse_task(document.parse(text), "t.md", fallback_id="TASK-1") == original
    assert text.endswith("---\nLine one\n\nLine two\n")
    assert "reopen_count: 2" in text and "pr_link" not in text  # empty optional keys stay out


def test_moe_and_loopflow_spellings_are_read() -> None:
    text = (
        "---\nid: TASK-1\nepicId: EPIC-9\ntitle: From Moe\nstatus: in progress\npriority: p1\n"
        "assignedWorkerId: w7\nacceptance_criteria: [a, b]\ndependsOn: TASK-2, TASK-3\n"
        "implementationPlan:\n  - stepId: s1\n    description: first\n    status: completed\n    affectedFiles: [x.py]\n"
        "reopenCount: 1\ncreatedAt: 2026-01-01T00:00:00Z\n---\n"
    )
    found = files.parse_task(document.parse(text), "t.md", fallback_id="TASK-1")
    assert (found.epic, found.status, found.priority, found.assigned_worker) == ("EPIC-9", "WORKING", "HIGH", "w7")
    assert found.definition_of_done == ("a", "b") and found.depends_on == ("TASK-2", "TASK-3")
    assert found.plan == (Step("s1", "first", "COMPLETED", ("x.py",)),)
    assert found.reopen_count == 1 and found.created == "2026-01-01T00:00:00Z"


def test_an_edit_writes_to_the_key_the_file_uses_and_keeps_everything_else() -> None:
    text = (
        "---\n# owned by the platform team\nid: TASK-1\nepicId: EPIC-9\ntitle: 'Quoted title'\n"
        "status: WORKING   # moved by hand\ndefinitionOfDone: [a]\ncustom: keep me\n---\nBody\n\n  indented\n"
    )
    doc = document.parse(text)
    old = files.parse_task(doc, "t.md", fallback_id="TASK-1")
    new = replace(old, status="REVIEW", definition_of_done=("a", "b"), updated=NOW)
    edited = files.edit_text(doc, old, new, "task", "t.md")
    assert edited is not None
    assert "status: REVIEW   # moved by hand\n" in edited
    assert "definitionOfDone:" in edited and "definition_of_done" not in edited
    assert "# owned by the platform team\n" in edited and "custom: keep me\n" in edited
    assert "title: 'Quoted title'\n" in edited
    assert edited.endswith("---\nBody\n\n  indented\n")
    assert files.edit_text(doc, old, old, "task", "t.md") is None


def test_a_description_edit_replaces_only_the_body() -> None:
    text = "---\nid: TASK-1\nepic: E\ntitle: t\n---\nold words\n"
    doc = document.parse(text)
    old = files.parse_task(doc, fallback_id="TASK-1")
    edited = files.edit_text(doc, old, replace(old, description="new words"), "task")
    assert edited == "---\nid: TASK-1\nepic: E\ntitle: t\n---\nnew words\n"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("---\nid: TASK-1\ntitle: t\nstatus: SHIPPED\n---\n", 4),
        ("---\nid: TASK-1\ntitle: t\norder: first\n---\n", 4),
        ("---\nid: TASK-1\ntitle: [a, b]\n---\n", 3),
        ("---\nid: TASK-1\ntitle: t\nplan: do it\n---\n", 4),
        ("---\nid: TASK-1\ntitle: t\nplan:\n  - status: PENDING\n---\n", 4),
        ("---\nid: TASK-1\ntitle: t\nplan:\n  - {id: a, description: x}\n  - {id: a, description: y}\n---\n", 4),
        ("---\nid: TASK-2\ntitle: copied file\n---\n", 2),
        ("---\nid: TASK-1\ntitle: t\nreopen_count: -1\n---\n", 4),
        ("---\nid: TASK-1\nstatus: BACKLOG\n---\n", None),
    ],
)
def test_bad_task_files_name_their_line(text: str, line: int | None) -> None:
    with pytest.raises(InvalidDocument) as caught:
        files.parse_task(document.parse(text), "t.md", fallback_id="TASK-1")
    assert caught.value.code == "SCHEMA_ERROR"
    assert caught.value.line == line
    assert caught.value.path == "t.md"


def test_project_settings_with_defaults_and_unknown_keys() -> None:
    text = (
        "---\nname: moes\nglobalRails:\n  forbiddenPatterns: ['eval(']\n  requiredPatterns: [test]\n"
        "settings:\n  approvalMode: turbo\n  chatEnabled: true\n---\n"
    )
    project = files.parse_project(document.parse(text), "p.md", default_name="x")
    assert project.global_rails.forbidden_patterns == ("eval(",)
    assert project.settings.approval_mode == "TURBO" and project.settings.max_reopens == 3
    assert shapes.project_to_dict(project)["settings"]["chatEnabled"] is True
    rendered = files.render_project(replace(project, id="PROJ-1"))
    assert files.parse_project(document.parse(rendered), "p.md", default_name="x").global_rails == project.global_rails
    with pytest.raises(InvalidDocument) as caught:
        files.parse_project(document.parse("---\nsettings:\n  approval_mode: FAST\n---\n"), "p.md", default_name="x")
    assert caught.value.line == 2


def test_worker_files_store_only_what_tasks_cannot_tell() -> None:
    worker = files.parse_worker(document.parse("---\nid: w1\nstatus: CODING\n---\n"), fallback_id="w1")
    assert worker.status is None  # a derived status written by hand says nothing new
    blocked = files.parse_worker(document.parse("---\nstatus: blocked\nblocked_reason: no db\n---\n"), fallback_id="w1")
    assert blocked.status == "BLOCKED" and blocked.blocked_reason == "no db"


def test_events_round_trip_and_bad_records_are_refused() -> None:
    event = model.Event(id="EVT-1", timestamp=NOW, event="TASK_CREATED", project="P", task="T", payload={"title": "x"})
    assert files.parse_event(files.event_to_dict(event)) == event
    for record in ([], {"id": "x"}, {"id": 1, "timestamp": NOW, "event": "E"}, {"id": "x", "timestamp": NOW, "event": "E", "payload": []}):
        with pytest.raises(InvalidDocument):
            files.parse_event(record, "log", 3)


# --------------------------------------------------------------------------- claims


def make_board(*tasks: Task, workers: tuple[Worker, ...] = (), teams: tuple[Team, ...] = (), epics: tuple[Epic, ...] = ()) -> Board:
    epic_map = {e.id: e for e in epics} or {"EPIC-1": Epic("EPIC-1", "one", order=1), "EPIC-2": Epic("EPIC-2", "two", order=2)}
    return Board(model.default_project("p"), epic_map, {t.id: t for t in tasks}, {w.id: w for w in workers}, {t.id: t for t in teams})


def test_claim_order_is_priority_then_epic_order_then_task_order() -> None:
    board = make_board(
        task("WORKING", id="T-low", priority="LOW", order=0),
        task("WORKING", id="T-e2", epic="EPIC-2", order=0),
        task("WORKING", id="T-e1-second", order=2),
        task("WORKING", id="T-e1-first", order=1),
        task("WORKING", id="T-critical", epic="EPIC-2", priority="CRITICAL", order=9),
    )
    order = []
    while True:
        plan = rules.plan_claim(board, ["WORKING"], None)
        if plan.task is None:
            break
        order.append(plan.task.id)
        board = replace(board, tasks={k: v for k, v in board.tasks.items() if k != plan.task.id})
    assert order == ["T-critical", "T-e1-first", "T-e1-second", "T-e2", "T-low"]


def test_a_worker_holding_a_task_gets_it_back() -> None:
    board = make_board(task("AWAITING_APPROVAL", id="mine", assigned_worker="w1", plan=done_plan()), task("PLANNING", id="free"))
    plan = rules.plan_claim(board, ["PLANNING"], "w1")
    assert plan.task is None and plan.already is not None and plan.already.id == "mine"


def test_solo_worker_rule_per_epic_and_status() -> None:
    board = make_board(
        task("WORKING", id="held", assigned_worker="w1"),
        task("WORKING", id="free-1", order=2),
        task("WORKING", id="free-2", epic="EPIC-2"),
        task("PLANNING", id="plan-1"),
    )
    # Another epic is fine; so is another status in the same epic.
    assert rules.plan_claim(board, ["WORKING"], "w2").task.id == "free-2"
    assert rules.plan_claim(board, ["PLANNING"], "arch").task.id == "plan-1"
    with pytest.raises(Conflict) as caught:
        rules.plan_claim(board, ["WORKING"], "w2", epic_id="EPIC-1")
    assert caught.value.code == "WORKER_CONFLICT"
    assert caught.value.message == "Epic already has an active worker on WORKING tasks: w1"
    assert caught.value.details["workerId"] == "w1"


def test_team_members_share_an_epic_but_not_with_outsiders() -> None:
    team = Team("TEAM-1", "coders", "worker", members=("w1", "w2"))
    board = make_board(task("WORKING", id="held", assigned_worker="w1"), task("WORKING", id="free", order=2), teams=(team,))
    assert rules.plan_claim(board, ["WORKING"], "w2").task.id == "free"
    with pytest.raises(Conflict):
        rules.plan_claim(board, ["WORKING"], "outsider")


def test_replace_existing_takes_over_the_blocking_workers_task_only_when_nothing_is_free() -> None:
    board = make_board(task("WORKING", id="held", assigned_worker="w1"), task("WORKING", id="free", order=2), task("WORKING", id="other", epic="EPIC-2"))
    plan = rules.plan_claim(board, ["WORKING"], "w2", replace_existing=True)
    assert plan.task.id == "other" and plan.takeover_from is None  # no one evicted needlessly
    plan = rules.plan_claim(board, ["WORKING"], "w2", epic_id="EPIC-1", replace_existing=True)
    assert plan.task.id == "held" and plan.takeover_from == "w1"


def test_dead_workers_tasks_are_offered_again() -> None:
    board = make_board(task("WORKING", id="orphan", assigned_worker="ghost"), workers=(Worker("ghost", status="DEAD"),))
    plan = rules.plan_claim(board, ["WORKING"], "w2")
    assert plan.task.id == "orphan" and plan.takeover_from == "ghost"


def test_working_claims_wait_for_dependencies_planning_does_not() -> None:
    board = make_board(
        task("BACKLOG", id="base"), task("WORKING", id="needs-base", depends_on=("base",)), task("PLANNING", id="plan-ahead", depends_on=("base",))
    )
    assert rules.plan_claim(board, ["WORKING"], "w1").task is None
    assert rules.plan_claim(board, ["PLANNING"], "a1").task.id == "plan-ahead"
    board = replace(board, tasks={**board.tasks, "base": task("DONE", id="base")})
    assert rules.plan_claim(board, ["WORKING"], "w1").task.id == "needs-base"


def test_archived_epics_offer_nothing_and_human_gated_statuses_are_refused() -> None:
    board = make_board(task("WORKING", id="t"), epics=(Epic("EPIC-1", "gone", status="ARCHIVED"),))
    assert rules.plan_claim(board, ["WORKING"], "w1").task is None
    for statuses in ([], ["BACKLOG"], ["DONE", "WORKING"]):
        with pytest.raises(InvalidRequest):
            rules.plan_claim(board, statuses, "w1")


# --------------------------------------------------------------------------- queries


def test_search_weighs_title_twice_and_filters_first() -> None:
    tasks = [
        task(id="A", title="login page", description="nothing"),
        task(id="B", title="other", description="login login login"),
        task(id="C", title="login", description="login", status="DONE"),
        task(id="D", title="unrelated"),
    ]
    found = rules.search_tasks(tasks, {}, "LOGIN", limit=10)
    assert [t.id for t in found] == ["B", "C", "A"]  # 3, 3 (2+1), 2
    assert [t.id for t in rules.search_tasks(tasks, {}, "login", status="BACKLOG")] == ["B", "A"]
    assert [t.id for t in rules.search_tasks(tasks, {}, None, status="DONE")] == ["C"]
    assert len(rules.search_tasks(tasks, {}, "login", limit=1)) == 1


def test_counts_follow_moe_and_add_every_status() -> None:
    counts = shapes.list_counts([task("BACKLOG"), task("PLANNING"), task("WORKING"), task("WORKING"), task("REVIEW"), task("DONE")])
    assert (counts["backlog"], counts["inProgress"], counts["review"], counts["done"], counts["total"]) == (1, 2, 1, 1, 6)
    assert counts["byStatus"]["PLANNING"] == 1


def test_ready_and_blocked_by_dependencies() -> None:
    board = make_board(task("DONE", id="a"), task("BACKLOG", id="b", depends_on=("a",)), task("BACKLOG", id="c", depends_on=("b", "missing")))
    ready, blocked = rules.ready_and_blocked(board)
    assert [t.id for t in ready] == ["b"]
    assert [(t.id, waits) for t, waits in blocked] == [("c", ["b", "missing"])]


def test_a_dependency_on_an_epic_is_met_once_the_epic_is_completed_or_archived() -> None:
    epics = (Epic("EPIC-1", "one", status="ACTIVE"), Epic("EPIC-2", "two", status="COMPLETED"), Epic("EPIC-3", "three", status="ARCHIVED"))
    board = make_board(task(id="a", depends_on=("EPIC-2", "EPIC-3")), task(id="b", depends_on=("EPIC-1", "EPIC-2")), epics=epics)
    ready, blocked = rules.ready_and_blocked(board)
    assert [t.id for t in ready] == ["a"]
    assert [(t.id, waits) for t, waits in blocked] == [("b", ["EPIC-1"])]


def test_an_imported_items_provenance_and_type_read_back_and_never_refuse_the_file() -> None:
    text = (
        "---\nid: TASK-1\nepic: EPIC-1\ntitle: t\ntype: bug\nimported_from: beads\nsource_id: bd-1\n"
        "source_fields:\n  labels: [a, b]\n  priority: 4\n---\nbody\n"
    )
    parsed = files.parse_task(document.parse(text), fallback_id="TASK-1")
    assert parsed.type == "bug"
    assert parsed.source == {"system": "beads", "id": "bd-1", "fields": {"labels": ["a", "b"], "priority": 4}}
    assert shapes.task_to_dict(parsed)["source"]["fields"]["priority"] == 4
    odd = files.parse_task(document.parse("---\nid: TASK-2\ntitle: t\nsource_fields: [x]\n---\n"), fallback_id="TASK-2")
    assert odd.source == {"system": None, "id": None, "fields": {"source_fields": ["x"]}}
    assert files.parse_task(document.parse("---\nid: TASK-3\ntitle: t\n---\n"), fallback_id="TASK-3").source is None


def test_dependency_cycles_are_found() -> None:
    tasks = {"a": task(id="a", depends_on=("b",)), "b": task(id="b", depends_on=("c",)), "c": task(id="c")}
    assert rules.dependency_cycle(tasks, "c", ["a"]) == ["c", "a", "b", "c"]
    assert rules.dependency_cycle(tasks, "c", []) is None


def test_events_filtered_newest_first_by_time_then_position() -> None:
    events = [
        model.Event("EVT-1", "2026-01-01T00:00:02.000Z", "STEP_STARTED", task="T1", worker="w1"),
        model.Event("EVT-2", "2026-01-01T00:00:01.000Z", "TASK_CREATED", task="T2"),  # merged in from another clone
        model.Event("EVT-3", "2026-01-01T00:00:02.000Z", "STEP_COMPLETED", task="T1", worker="w1"),
    ]
    assert [e.id for e in rules.filter_events(events)] == ["EVT-3", "EVT-1", "EVT-2"]
    assert [e.id for e in rules.filter_events(events, task_id="T1", event_types=["step_completed"])] == ["EVT-3"]
    assert [e.id for e in rules.filter_events(events, worker_id="w1", limit=1)] == ["EVT-3"]


def test_a_hand_written_description_key_moves_into_the_body_when_edited() -> None:
    doc = document.parse("---\nid: TASK-1\nepic: E\ntitle: t\ndescription: in the frontmatter\n---\n")
    old = files.parse_task(doc, fallback_id="TASK-1")
    assert old.description == "in the frontmatter"
    edited = files.edit_text(doc, old, replace(old, description="now in the body"), "task")
    assert edited == "---\nid: TASK-1\nepic: E\ntitle: t\n---\nnow in the body\n"

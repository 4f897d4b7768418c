"""The pure rules of Moe's newest board behaviour: QA's bounded escalation and the same-item
rule, the plan gates at exactly their limits, the context record following the task's holder,
the adjacent-epic claim order, branch patterns, disk-state signatures, and the merge of two
clones' plans and amendments."""

from __future__ import annotations

from dataclasses import replace

import pytest

from moss_files.board import files, oversight, review, rules, worktree
from moss_files.board.model import Board, Epic, Settings, Step, Task, TaskSizing, Worker, default_project
from moss_files.foundation import document
from moss_files.foundation.docmerge import CONFLICT, MISSING, merge_document
from moss_files.foundation.errors import InvalidDocument, InvalidRequest

NOW = "2026-01-21T10:00:00Z"
DOD = ("renders the form", "validates expiry", "has a test")


def in_review(reopen_count: int = 0, **fields: object) -> Task:
    task = Task(
        id="TASK-1",
        epic="EPIC-1",
        title="Card form",
        status="REVIEW",
        assigned_worker="qa",
        definition_of_done=DOD,
        plan=(Step("step-1", "build", status="COMPLETED"),),
        reopen_count=reopen_count,
        context_fetched_by=("qa",),
        created=NOW,
        updated=NOW,
    )
    return replace(task, **fields)


DEFAULTS = Settings()


def reject(task: Task, settings: Settings = DEFAULTS, *, failed: tuple[str, ...] = (), reason: str = "fails") -> tuple[review.Rejection, Task]:
    decision = review.decide(task, settings, reason=reason, failed=failed, issues=(), now=NOW)
    return decision, review.rejected(task, decision, failed, by="qa", now=NOW)


# --------------------------------------------------------------------------- QA escalation


@pytest.mark.parametrize(
    ("before", "target", "soft", "parked"),
    [(0, "WORKING", False, False), (1, "WORKING", False, False), (2, "PLANNING", True, False), (3, "REVIEW", False, True), (7, "REVIEW", False, True)],
)
def test_a_rejection_goes_by_its_reopen_count_against_max_reopens(before: int, target: str, soft: bool, parked: bool) -> None:
    decision, after = reject(in_review(before))
    assert (decision.target, decision.soft_cap, decision.parked, decision.reopen_count) == (target, soft, parked, before + 1)
    assert after.status == target and after.reopen_count == before + 1 and after.reopen_reason == "fails"
    assert after.assigned_worker is None and after.context_fetched_by == ()  # nobody holds it, whoever takes it reads again
    assert after.needs_human_review is parked


def test_the_caps_follow_the_setting() -> None:
    settings = Settings(max_reopens=1)
    assert reject(in_review(0), settings)[0].target == "PLANNING"  # the first rejection reaches a cap of 1
    assert reject(in_review(1), settings)[0].target == "REVIEW"


def test_the_same_item_failing_in_two_rejections_sends_the_task_back_to_planning() -> None:
    first, after = reject(in_review(0), failed=("validates expiry",))
    assert first.target == "WORKING" and [e["item"] for e in after.failed_dod_items] == ["validates expiry"]
    back = replace(after, status="REVIEW", assigned_worker="qa")
    second, again = reject(back, failed=("has a test", "validates expiry"))
    assert (second.target, second.repeated_item, second.escalation) == (
        "PLANNING",
        "validates expiry",
        "definition-of-done item failed twice: 'validates expiry'",
    )
    assert again.status == "PLANNING" and [e["item"] for e in again.failed_dod_items] == ["validates expiry", "has a test", "validates expiry"]


def test_an_item_named_twice_in_one_rejection_counts_once_and_a_different_item_does_not_escalate() -> None:
    failed = review.failed_items(["validates expiry", " Validates  EXPIRY ", 2], DOD)
    assert failed == ("validates expiry",)
    assert reject(in_review(0), failed=failed)[0].target == "WORKING"
    prior = in_review(0, failed_dod_items=({"item": "validates expiry", "rejected": NOW, "rejected_by": "qa"},))
    assert reject(prior, failed=("has a test",))[0].target == "WORKING"


def test_at_the_caps_the_reopen_count_decides_and_names_no_repeated_item() -> None:
    prior = in_review(2, failed_dod_items=({"item": "has a test", "rejected": NOW, "rejected_by": "qa"},))
    decision, _ = reject(prior, failed=("has a test",))
    assert (decision.target, decision.repeated_item, decision.escalation) == ("PLANNING", None, "reopen cap reached")
    parked, _ = reject(replace(prior, reopen_count=3), failed=("has a test",))
    assert (parked.target, parked.repeated_item, parked.escalation) == ("REVIEW", None, "hard reopen cap")


def test_failed_items_are_texts_or_numbers_and_bounded() -> None:
    assert review.failed_items([1, "3", "something else"], DOD) == ("renders the form", "has a test", "something else")
    assert review.failed_items(None, DOD) == ()
    for bad in ([4], [0], [""], [None], [f"item {n}" for n in range(21)]):
        with pytest.raises(InvalidRequest):
            review.failed_items(bad, DOD)


def test_issues_are_checked() -> None:
    issues = review.read_issues([{"type": "lint", "description": " unused import ", "file": "a.py", "line": 3}])
    assert issues == ({"type": "lint", "description": "unused import", "file": "a.py", "line": 3},)
    for bad in (
        [{"type": "style", "description": "x"}],
        [{"type": "lint", "description": " "}],
        [{"type": "lint", "description": "x" * 501}],
        [{"type": "lint", "description": "x", "line": 0}],
        [{"type": "lint", "description": "x"}] * 21,
    ):
        with pytest.raises(InvalidRequest):
            review.read_issues(bad)
    with pytest.raises(InvalidRequest):
        review.reason_text("x" * 2001)


def test_the_history_and_the_failed_item_log_are_bounded() -> None:
    task = in_review(0)
    settings = Settings(max_reopens=100)
    for n in range(30):
        _, task = reject(replace(task, status="REVIEW"), settings, failed=tuple(f"item {n}.{k}" for k in range(5)), reason=f"round {n}")
    assert len(task.rejection_history) == review.MAX_REJECTION_HISTORY and task.rejection_history[0]["reason"] == "round 29"
    assert len(task.failed_dod_items) == review.MAX_FAILED_DOD_ITEMS and task.failed_dod_items[-1]["item"] == "item 29.4"
    assert review.rejection_details(task) == {"failedDodItems": [f"item 29.{k}" for k in range(5)]}
    assert review.history_to_dict(task.rejection_history[0])["reopenCount"] == 30


def test_leaving_review_ends_a_park_and_a_reopen_starts_a_fresh_attempt() -> None:
    parked = in_review(4, assigned_worker=None, needs_human_review=True, failed_dod_items=({"item": "x", "rejected": NOW, "rejected_by": "qa"},))
    moved = rules.apply_transition(parked, "WORKING", NOW, reason="a person looked")
    assert moved.needs_human_review is False and moved.failed_dod_items  # the move alone keeps the log (qa_reject adds to it)
    fresh = rules.reopened_afresh(moved)
    assert fresh.failed_dod_items == () and fresh.needs_human_review is False
    assert rules.apply_transition(parked, "DONE", NOW).needs_human_review is False


def test_the_context_record_is_cleared_when_the_task_changes_hands() -> None:
    held = in_review(0, status="WORKING", assigned_worker="dev", context_fetched_by=("dev",))
    assert rules.with_holder_context(held, replace(held, updated="later")).context_fetched_by == ("dev",)
    for new_holder in (None, "dev2"):
        assert rules.with_holder_context(held, replace(held, assigned_worker=new_holder)).context_fetched_by == ()


# --------------------------------------------------------------------------- plan gates


def steps(count: int, files_per_step: int = 0, *, new: int = 0) -> list[dict[str, object]]:
    return [
        {
            "description": f"step {n}",
            "affectedFiles": [f"src/f{n}_{k}.py" for k in range(files_per_step)],
            "newFiles": [f"src/new{n}_{k}.py" for k in range(new)],
        }
        for n in range(count)
    ]


@pytest.mark.parametrize(("count", "warned", "refused"), [(8, False, False), (9, True, False), (12, True, False), (13, False, True)])
def test_the_size_gate_counts_steps_past_its_thresholds(count: int, warned: bool, refused: bool) -> None:
    size = rules.assess_plan_size(rules.parse_steps(steps(count)), TaskSizing())
    assert (bool(size.warnings), size.too_large is not None) == (warned, refused)
    if refused:
        assert size.too_large == f"Plan too large: {count} steps (max 12)"


@pytest.mark.parametrize(("distinct", "warned", "refused"), [(5, False, False), (6, True, False), (10, True, False), (11, False, True)])
def test_the_size_gate_counts_distinct_files_across_the_plan_new_ones_included(distinct: int, warned: bool, refused: bool) -> None:
    affected = [f"src/f{n}.py" for n in range(distinct - 1)]
    plan = rules.parse_steps(
        [
            {"description": "one", "affectedFiles": affected},
            {"description": "two", "affectedFiles": affected[:2], "newFiles": ["src/created.py"]},  # repeats count once
        ]
    )
    size = rules.assess_plan_size(plan, TaskSizing())
    assert (size.distinct_files, size.new_files) == (distinct, 1)
    assert (bool(size.warnings), size.too_large is not None) == (warned, refused)


def test_the_size_gate_reads_its_thresholds_from_project_md() -> None:
    text = "---\nsettings:\n  taskSizing: {warnSteps: 2, maxSteps: 1, max_distinct_files: 3}\n---\n"
    project = files.parse_project(document.parse(text), "project.md", default_name="shop")
    assert project.settings.task_sizing == TaskSizing(warn_steps=2, max_steps=2, warn_distinct_files=5, max_distinct_files=5)  # maxes lifted to warns
    size = rules.assess_plan_size(rules.parse_steps(steps(3)), project.settings.task_sizing)
    assert size.too_large == "Plan too large: 3 steps (max 2)"
    error = rules.plan_too_large("TASK-1", size)
    assert (error.code, error.status, error.exit_code) == ("PLAN_TOO_LARGE", 422, 4)
    assert error.details["thresholds"] == {"warnSteps": 2, "maxSteps": 2, "warnDistinctFiles": 5, "maxDistinctFiles": 5}
    with pytest.raises(InvalidDocument) as bad:
        files.parse_project(document.parse("---\nsettings:\n  task_sizing: {warn_steps: 0}\n---\n"), "project.md", default_name="shop")
    assert bad.value.code == "SCHEMA_ERROR" and bad.value.line == 2


def test_the_shape_gates_hold_at_exactly_their_limits() -> None:
    assert len(rules.parse_steps(steps(100))) == 100
    with pytest.raises(InvalidRequest):
        rules.parse_steps(steps(101))
    assert rules.parse_steps([{"description": "x" * 10_000}])[0].description == "x" * 10_000
    with pytest.raises(InvalidRequest):
        rules.parse_steps([{"description": "x" * 10_001}])
    for field in ("affectedFiles", "newFiles"):
        assert (
            len(
                getattr(
                    rules.parse_steps([{"description": "d", field: [f"f{n}" for n in range(50)]}])[0],
                    "affected_files" if field == "affectedFiles" else "new_files",
                )
            )
            == 50
        )
        with pytest.raises(InvalidRequest):
            rules.parse_steps([{"description": "d", field: [f"f{n}" for n in range(51)]}])
        for bad in ("/etc/passwd", "C:/x", "a/../../b", "..", ""):
            with pytest.raises(InvalidRequest) as caught:
                rules.parse_steps([{"description": "d", field: [bad]}])
            assert caught.value.details["field"] == field
    step = rules.parse_steps([{"description": "d", "newFiles": ["./src//new.py", "src/new.py"]}])[0]
    assert step.new_files == ("src/new.py",)


def test_files_declared_new_anywhere_are_not_checked_on_disk_and_rails_see_them() -> None:
    plan = rules.parse_steps(
        [{"description": "create", "newFiles": ["src/api.py"]}, {"description": "use", "affectedFiles": ["src/api.py", "src/main.py", "src/main.py"]}]
    )
    assert rules.paths_to_check(plan) == ["src/main.py"]
    rails = default_project("x").global_rails
    assert rules.check_rails(replace(rails, forbidden_patterns=("secrets/",)), rules.parse_steps([{"description": "d", "newFiles": ["secrets/key"]}]))


# --------------------------------------------------------------------------- claims prefer the adjacent epic


def claim_board(last_epic: str | None) -> Board:
    epics = {"EPIC-A": Epic("EPIC-A", "A", order=1), "EPIC-B": Epic("EPIC-B", "B", order=2)}
    tasks = {
        "TASK-a": Task("TASK-a", "EPIC-A", "urgent elsewhere", status="WORKING", priority="CRITICAL"),
        "TASK-b": Task("TASK-b", "EPIC-B", "next to the last one", status="WORKING", priority="LOW"),
        "TASK-r": Task("TASK-r", "EPIC-B", "parked", status="REVIEW", needs_human_review=True),
    }
    workers = {"dev": Worker("dev", last_epic=last_epic)}
    return Board(default_project("x"), epics, tasks, workers, {})


def test_a_claim_prefers_the_epic_of_the_workers_last_claim_then_priority() -> None:
    assert rules.plan_claim(claim_board("EPIC-B"), ["WORKING"], "dev").task.id == "TASK-b"  # type: ignore[union-attr]
    assert rules.plan_claim(claim_board("EPIC-B"), ["WORKING"], "dev", prefer_adjacent=False).task.id == "TASK-a"  # type: ignore[union-attr]
    assert rules.plan_claim(claim_board(None), ["WORKING"], "dev").task.id == "TASK-a"  # type: ignore[union-attr]
    assert rules.plan_claim(claim_board("EPIC-B"), ["WORKING"], "dev", epic_id="EPIC-A").task.id == "TASK-a"  # type: ignore[union-attr]
    assert rules.plan_claim(claim_board("EPIC-B"), ["WORKING"], "other").task.id == "TASK-a"  # type: ignore[union-attr]
    assert rules.wait_answer(claim_board("EPIC-B"), ["WORKING"], "dev").id == "TASK-b"  # type: ignore[union-attr]


def test_a_task_parked_for_a_person_is_offered_to_no_agent() -> None:
    assert rules.plan_claim(claim_board(None), ["REVIEW"], "qa").task is None
    assert rules.wait_answer(claim_board(None), ["REVIEW"], "qa") is None


# --------------------------------------------------------------------------- branches and disk state


@pytest.mark.parametrize(
    ("branch", "pattern", "matches"),
    [
        ("main", "main", True),
        ("mainline", "main", False),
        ("Main", "main", False),
        ("moe/work-2026-07-31", "moe/work-*", True),
        ("moe/work-", "moe/work-*", True),
        ("moe/work", "moe/work-*", False),
        ("release/v1X0-a", "release/v1.0-*", False),
        ("release/v1.0-a", "release/v1.0-*", True),
        ("feat(x)", "feat(*)", True),
        ("a/b/c", "a/**/c", True),
        ("", "main", False),
        ("main", "", False),
        ("x" * 256, "x*", False),
        ("a" * 20, "*" * 11, False),
        ("a" * 20, "*a" * 10, True),
    ],
)
def test_branch_patterns(branch: str, pattern: str, matches: bool) -> None:
    assert worktree.branch_matches(branch, pattern) is matches


def test_the_reported_branch_wins_and_an_unknown_branch_is_let_through_with_a_warning() -> None:
    assert worktree.check_branch(None, "main", "main") is None
    assert worktree.check_branch("  ", "main", "main") is None
    reported = worktree.check_branch("moe/*", "moe/a", "main")
    assert (reported.branch, reported.source, reported.matched, reported.warning) == ("moe/a", "reported", True, None)  # type: ignore[union-attr]
    checkout = worktree.check_branch("moe/*", None, "main")
    assert (checkout.branch, checkout.source, checkout.matched) == ("main", "checkout", False)  # type: ignore[union-attr]
    unknown = worktree.check_branch("moe/*", " ", None)
    assert (unknown.matched, unknown.source) == (None, None) and unknown.warning  # type: ignore[union-attr]
    error = worktree.branch_error("TASK-1", checkout)  # type: ignore[arg-type]
    assert (error.code, error.status, error.exit_code) == ("BRANCH_POLICY_FAILED", 422, 5)
    assert error.details == {"taskId": "TASK-1", "currentBranch": "main", "expectedPattern": "moe/*", "source": "checkout"}


def test_the_disk_state_signature() -> None:
    clean = "# branch.oid 1234abcd\n# branch.head main\n"
    dirty = clean + "1 .M N... 100644 100644 100644 aa bb src/x.py\n? notes.txt\n"
    assert worktree.disk_state_signature(clean) == "v1:1234abcd:0:e3b0c44298fc"
    signed = worktree.disk_state_signature(dirty)
    assert signed is not None and signed.startswith("v1:1234abcd:2:") and signed != worktree.disk_state_signature(clean)
    assert worktree.disk_state_signature(dirty.replace("\n", "\r\n")) == signed
    assert worktree.disk_state_signature("") is None  # unknown, never "unchanged"
    assert worktree.disk_state_signature("? a.txt\n") is None


# --------------------------------------------------------------------------- two clones' plans


def task_text(amendments: list[dict[str, object]], *, status: str = "PENDING", plan_key: str = "plan") -> str:
    step_one: dict[str, object] = {"id": "step-1", "description": "Build it", "status": status}
    if amendments:
        step_one["amendments"] = amendments
    meta = {"id": "TASK-1", "title": "T", "status": "WORKING", plan_key: [step_one, {"id": "step-2", "description": "Test it", "status": "PENDING"}]}
    return document.render(meta, "")


def amendment(amendment_id: str, at: str, text: str, status: str = "APPROVED") -> dict[str, object]:
    return {"id": amendment_id, "description": text, "reason": "why", "amended_by": "human", "amended": at, "status": status}


def merged_plan(base: str, ours: str, theirs: str) -> tuple[object, tuple[str, ...]]:
    """The merged plan (None when it conflicted, the markers left for a person) and the conflicted keys."""
    result = merge_document(base, ours, theirs, rules=dict.fromkeys(files.PLAN_KEYS, files.merge_plans))
    if result.conflicted_keys:
        return None, result.conflicted_keys
    meta = document.parse(result.text).meta
    return meta.get("plan", meta.get("implementationPlan")), result.conflicted_keys


def test_two_clones_amendments_of_one_step_are_both_kept_in_time_order() -> None:
    old = amendment("amend-1", "2026-01-20T09:00:00Z", "Build it with the old validator")  # an older file's id is read as it is
    base = task_text([old])
    a = task_text([old, amendment("AMEND-20260121-aaaaaaaa", "2026-01-21T10:00:05Z", "from a")])
    b = task_text([old, amendment("AMEND-20260121-bbbbbbbb", "2026-01-21T10:00:01Z", "from b")])
    for ours, theirs in ((a, b), (b, a)):
        plan, conflicted = merged_plan(base, ours, theirs)
        assert conflicted == ()
        assert [x["id"] for x in plan[0]["amendments"]] == ["amend-1", "AMEND-20260121-bbbbbbbb", "AMEND-20260121-aaaaaaaa"]  # type: ignore[index]
    text = merge_document(base, a, b, rules=dict.fromkeys(files.PLAN_KEYS, files.merge_plans)).text
    task = files.parse_task(document.parse(text), fallback_id="TASK-1")
    assert oversight.effective_description(task.plan[0]) == "from a"  # the newest approved amendment is in force


def test_one_side_resolving_an_amendment_while_the_other_adds_one_merges() -> None:
    waiting = amendment("AMEND-20260121-aaaaaaaa", "2026-01-21T10:00:00Z", "first", status="PENDING")
    base = task_text([waiting])
    approved = task_text([{**waiting, "status": "APPROVED", "resolved_by": "HUMAN", "resolved": "2026-01-21T11:00:00Z"}])
    added = task_text([waiting, amendment("AMEND-20260121-bbbbbbbb", "2026-01-21T12:00:00Z", "second", status="PENDING")], plan_key="plan")
    plan, conflicted = merged_plan(base, approved, added)
    assert conflicted == ()
    assert [(x["id"], x["status"]) for x in plan[0]["amendments"]] == [  # type: ignore[index]
        ("AMEND-20260121-aaaaaaaa", "APPROVED"),
        ("AMEND-20260121-bbbbbbbb", "PENDING"),
    ]


def test_plans_that_truly_disagree_stay_a_conflict_for_a_person() -> None:
    base = task_text([])
    assert files.merge_plans([], [{"id": "step-1"}], [{"id": "step-9"}]) is CONFLICT  # one side re-planned
    assert files.merge_plans([], "not a list", []) is CONFLICT
    _plan, conflicted = merged_plan(base, task_text([], status="COMPLETED"), task_text([], status="IN_PROGRESS"))
    assert conflicted == ("plan",)
    same_id = amendment("amend-2", "2026-01-21T10:00:00Z", "a")
    _plan, conflicted = merged_plan(base, task_text([same_id]), task_text([{**same_id, "description": "b"}]))  # two clones' amend-N
    assert conflicted == ("plan",)
    assert files.merge_amendments(MISSING, [{"description": "no id"}], []) is CONFLICT


def test_the_merge_rule_covers_moes_spelling_of_the_plan() -> None:
    base = task_text([], plan_key="implementationPlan")
    ours = task_text([amendment("AMEND-20260121-aaaaaaaa", "2026-01-21T10:00:00Z", "a")], plan_key="implementationPlan")
    theirs = task_text([amendment("AMEND-20260121-bbbbbbbb", "2026-01-21T10:00:01Z", "b")], plan_key="implementationPlan")
    plan, conflicted = merged_plan(base, ours, theirs)
    assert conflicted == () and len(plan[0]["amendments"]) == 2  # type: ignore[index]


def test_moes_own_spellings_of_the_rejection_records_are_read() -> None:
    text = (
        "---\ntitle: T\nstatus: REVIEW\ndefinitionOfDone: [works]\nneedsHumanReview: true\ncontextFetchedBy: [qa]\n"
        "rejectionHistory:\n  - {reason: broken, rejectedAt: '2026-01-21T10:00:00Z', reopenCount: 1, failedDodItems: [works]}\n"
        "failedDodItems:\n  - {item: works, rejectedAt: '2026-01-21T10:00:00Z', rejectedBy: qa}\n---\n"
    )
    task = files.parse_task(document.parse(text), fallback_id="TASK-1")
    assert task.needs_human_review and task.context_fetched_by == ("qa",)
    assert review.history_to_dict(task.rejection_history[0]) == {
        "reason": "broken",
        "rejectedAt": "2026-01-21T10:00:00Z",
        "reopenCount": 1,
        "failedDodItems": ["works"],
    }
    assert review.failed_item_to_dict(task.failed_dod_items[0]) == {"item": "works", "rejectedAt": "2026-01-21T10:00:00Z", "rejectedBy": "qa"}
    assert review.rejection_details(task) == {"failedDodItems": ["works"]}
    decision, _ = reject(replace(task, reopen_count=0), failed=("works",))
    assert decision.repeated_item == "works"  # Moe's log counts toward the same-item rule

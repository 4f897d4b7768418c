"""PLAN.md core: transitions and their exact diffs, adding, addressing, dependencies, stale."""

from __future__ import annotations

import difflib
from datetime import date
from importlib import resources
from pathlib import Path

import pytest

from cstack import plan
from moss_files.foundation.errors import Conflict, InvalidDocument, InvalidRequest, MossError, NotFound

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cstack"
TODAY = date(2026, 1, 21)
V2 = (FIXTURES / "plan_v2_example.md").read_text(encoding="utf-8")
V3 = (FIXTURES / "plan_v3_deps.md").read_text(encoding="utf-8")
TEMPLATE = resources.files("moss_files.templates").joinpath("cstack", "PLAN.md").read_text(encoding="utf-8")


def changes(old: str, new: str) -> tuple[list[str], list[str]]:
    """The lines removed from `old` and added in `new` (a line-level diff, endings included)."""
    removed: list[str] = []
    added: list[str] = []
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed += a[i1:i2]
        if tag in ("replace", "insert"):
            added += b[j1:j2]
    return removed, added


def error_of(call) -> MossError:  # type: ignore[no-untyped-def]
    with pytest.raises(MossError) as caught:
        call()
    return caught.value


# --------------------------------------------------------------------------- transitions


def test_start_changes_only_the_marker_and_modified_date() -> None:
    change = plan.transition(V2, "start", "Fix login", TODAY)
    assert changes(V2, change.text) == (
        ["- [ ] P2: Fix login bug #bug #auth | modified: 2026-01-14\n"],
        ["- [>] P2: Fix login bug #bug #auth | modified: 2026-01-21\n"],
    )
    assert change.task.status == "in_progress" and change.before is not None and change.before.status == "pending"
    assert change.moved_from is None


def test_done_moves_the_line_to_the_end_of_completed() -> None:
    change = plan.transition(V2, "done", "2", TODAY, reason="Fixed the cookie path")
    new_line = "- [x] P2: Fix login bug #bug #auth | modified: 2026-01-21 | closed: 2026-01-21 | reason: Fixed the cookie path\n"
    expected = V2.replace("- [ ] P2: Fix login bug #bug #auth | modified: 2026-01-14\n", "").replace(
        "- [x] P2: Database migrations #backend | closed: 2026-01-10 | reason: Done\n",
        "- [x] P2: Database migrations #backend | closed: 2026-01-10 | reason: Done\n" + new_line,
    )
    assert change.text == expected
    assert change.moved_from == ("Tasks",) and change.task.section == ("Completed",)
    assert (change.task.closed, change.task.reason) == ("2026-01-21", "Fixed the cookie path")


def test_done_without_a_reason_records_only_the_date() -> None:
    change = plan.transition(V2, "done", "User dashboard", TODAY)
    assert change.task.text == "- [x] P1: User dashboard #feature #frontend | modified: 2026-01-21 | closed: 2026-01-21"


def test_close_moves_to_closed_and_needs_a_reason() -> None:
    assert error_of(lambda: plan.transition(V2, "close", "2", TODAY)).code == "INVALID_REQUEST"
    change = plan.transition(V2, "close", "2", TODAY, reason="cannot reproduce")
    removed, added = changes(V2, change.text)
    assert removed == ["- [ ] P2: Fix login bug #bug #auth | modified: 2026-01-14\n"]
    assert added == ["- [~] P2: Fix login bug #bug #auth | modified: 2026-01-21 | closed: 2026-01-21 | reason: cannot reproduce\n"]
    assert change.text.endswith("reason: Out of scope for MVP\n" + added[0])


def test_block_sets_the_reason_and_start_clears_it() -> None:
    blocked = plan.transition(V2, "block", "2", TODAY, reason="needs a test account")
    assert changes(V2, blocked.text)[1] == ["- [!] P2: Fix login bug #bug #auth | modified: 2026-01-21 | blocked: needs a test account\n"]
    again = plan.transition(blocked.text, "block", "2", TODAY, reason="still no account")
    assert again.task.blocked == "still no account"
    started = plan.transition(V2, "start", "Payment", TODAY)
    assert started.task.text == "- [>] P1: Payment integration #feature #payment | modified: 2026-01-21"


def test_ready_puts_a_blocked_task_back_to_pending() -> None:
    change = plan.transition(V2, "ready", "Payment", TODAY)
    assert changes(V2, change.text) == (
        ["- [!] P1: Payment integration #feature #payment | blocked: waiting on Stripe keys | modified: 2026-01-10\n"],
        ["- [ ] P1: Payment integration #feature #payment | modified: 2026-01-21\n"],
    )


def test_reopen_moves_back_to_tasks_and_drops_the_closing_fields() -> None:
    change = plan.transition(V2, "reopen", "GraphQL", TODAY)
    removed, added = changes(V2, change.text)
    assert removed == ["- [~] P3: GraphQL API #api | closed: 2026-01-08 | reason: Out of scope for MVP\n"]
    assert added == ["- [ ] P3: GraphQL API #api | modified: 2026-01-21\n"]
    assert change.task.section == ("Tasks",) and change.task.line == 6


def test_the_first_task_moved_into_a_section_goes_after_its_placeholder_which_stays() -> None:
    text = plan.add_task(TEMPLATE, "P1: First #x", TODAY).text
    change = plan.transition(text, "done", "First", TODAY, reason="ok")
    removed, added = changes(text, change.text)
    assert removed == ["- [ ] P1: First #x | modified: 2026-01-21\n"]
    assert added == ["- [x] P1: First #x | modified: 2026-01-21 | closed: 2026-01-21 | reason: ok\n"]
    assert change.text.count("_None._") == TEMPLATE.count("_None._")  # placeholders are the person's lines: never removed
    assert "## Completed\n\n<!-- Finished" in change.text and "_None._\n- [x] P1: First" in change.text
    # Tasks is as the template had it: no stray blank line, its placeholder in place.
    assert change.text.split("## Notes")[0] == TEMPLATE.split("## Notes")[0]


def test_a_missing_section_is_created_at_the_end() -> None:
    text = "# Plan\n\n## Tasks\n\n- [>] Only task | modified: 2026-01-01\n"
    change = plan.transition(text, "done", "1", TODAY)
    assert change.text == ("# Plan\n\n## Tasks\n\n## Completed\n\n- [x] Only task | modified: 2026-01-21 | closed: 2026-01-21\n")
    assert change.task.section == ("Completed",)


def test_tasks_before_any_heading_and_a_file_without_final_newline() -> None:
    text = "- [ ] one\n- [ ] two"
    change = plan.transition(text, "start", "two", TODAY)
    assert change.text == "- [ ] one\n- [>] two | modified: 2026-01-21"
    done = plan.transition(change.text, "done", "two", TODAY)
    assert done.text == "- [ ] one\n\n## Completed\n\n- [x] two | modified: 2026-01-21 | closed: 2026-01-21\n"


def test_starting_a_backlog_item_promotes_it_to_tasks() -> None:
    change = plan.transition(V3, "start", "Dark mode", TODAY)
    removed, added = changes(V3, change.text)
    assert removed == ["- [ ] Dark mode #feature | users keep asking\n"]
    assert added == ["- [>] Dark mode #feature | users keep asking | modified: 2026-01-21\n"]
    assert change.task.section == ("Tasks",)
    # It lands after the last task of Tasks: the Announce line.
    lines = change.text.splitlines()
    assert lines[change.task.line - 2].startswith("- [ ] P2: Announce the release")


def test_detail_lines_move_with_their_task() -> None:
    change = plan.transition(V3, "done", "keys", TODAY, reason="rotated")
    lines = change.text.splitlines()
    at = change.task.line - 1
    assert lines[at].startswith("- [x] P0: Rotate keys") and lines[at + 1] == "  - staging first, then production"
    assert change.text.count("staging first") == 1
    assert change.task.section == ("Completed",)
    assert change.text.endswith("rotated\n  - staging first, then production\n")


def test_frontmatter_comments_notes_and_fences_survive_every_transition() -> None:
    text = V3
    for action, ref, reason in (
        ("start", "review-001", None),
        ("done", "review-001", "looks good"),
        ("block", "deploy-001", "change freeze"),
        ("ready", "deploy-001", None),
        ("close", "Announce", "merged into the blog post"),
        ("reopen", "Announce", None),
    ):
        new = plan.transition(text, action, ref, TODAY, reason=reason).text
        removed, added = changes(text, new)
        # Only task lines change; V3 has no Completed or Closed section, so those are created.
        assert all(plan.parse_task_line(line.rstrip("\n")) for line in removed), (action, removed)
        others = [line for line in added if not plan.parse_task_line(line.rstrip("\n"))]
        assert set(others) <= {"\n", "## Completed\n", "## Closed\n"}, (action, added)
        text = new
    for kept in ("project: moss   # frontmatter is allowed and kept", "- [ ] this looks like a task", "- [ ] inside a code fence"):
        assert kept in text


def test_crlf_files_keep_crlf_on_changed_and_moved_lines() -> None:
    crlf = V2.replace("\n", "\r\n")
    change = plan.transition(crlf, "done", "2", TODAY, reason="ok")
    assert "\n" not in change.text.replace("\r\n", "")
    assert change.text.replace("\r\n", "\n") == plan.transition(V2, "done", "2", TODAY, reason="ok").text


@pytest.mark.parametrize(
    ("action", "ref", "status"),
    [
        ("done", "JWT", "done"),
        ("start", "User dashboard", "in_progress"),
        ("start", "GraphQL", "closed"),
        ("reopen", "Fix login", "pending"),
        ("ready", "Fix login", "pending"),
        ("block", "GraphQL", "closed"),
    ],
)
def test_disallowed_transitions_are_refused(action: str, ref: str, status: str) -> None:
    err = error_of(lambda: plan.transition(V2, action, ref, TODAY, reason="r"))
    assert isinstance(err, Conflict) and err.code == "INVALID_TRANSITION"
    assert err.details["status"] == status and err.details["action"] == action
    assert err.line == plan.find_task(plan.parse_plan(V2), ref).line


@pytest.mark.parametrize("reason", ["two\nlines", "a | b", "   "])
def test_bad_reasons_are_refused(reason: str) -> None:
    assert error_of(lambda: plan.transition(V2, "block", "2", TODAY, reason=reason)).code == "INVALID_REQUEST"


def test_done_without_a_task_takes_the_one_in_progress() -> None:
    assert plan.transition(V2, "done", None, TODAY).task.title == "User dashboard"
    two = plan.transition(V2, "start", "Fix login", TODAY).text
    err = error_of(lambda: plan.transition(two, "done", None, TODAY))
    assert err.code == "AMBIGUOUS_ADDRESSING" and len(err.details["candidates"]) == 2
    none = plan.transition(V2, "done", None, TODAY).text
    assert isinstance(error_of(lambda: plan.transition(none, "done", None, TODAY)), NotFound)


# --------------------------------------------------------------------------- field edits


def test_field_edits_keep_the_authors_spacing() -> None:
    line = "- [ ] Task  #a |  modified:   2026-01-01  |   free text | reason: x"
    assert plan.set_field(line, "modified", "2026-02-02") == "- [ ] Task  #a |  modified:   2026-02-02  |   free text | reason: x"
    assert plan.remove_field(line, "reason") == "- [ ] Task  #a |  modified:   2026-01-01  |   free text"
    assert plan.set_field(line, "closed", "2026-02-02").endswith("| reason: x | closed: 2026-02-02")
    assert plan.set_marker(line, "x").startswith("- [x] Task")


# --------------------------------------------------------------------------- adding


def test_add_keeps_the_placeholder_then_appends_after_the_last_task() -> None:
    first = plan.add_task(TEMPLATE, "P1: Login flow #feature #auth", TODAY)
    removed, added = changes(TEMPLATE, first.text)
    assert removed == []
    assert '_No tasks yet. Add one with `cstack add "P1: Title #label"`._\n- [ ] P1: Login flow' in first.text
    assert added == ["- [ ] P1: Login flow #feature #auth | modified: 2026-01-21\n"]
    second = plan.add_task(first.text, "Throttle requests", TODAY, ident="throttle")
    removed, added = changes(first.text, second.text)
    assert removed == [] and added == ["- [ ] Throttle requests (id: throttle) | modified: 2026-01-21\n"]
    assert second.task.line == first.task.line + 1 and second.task.number == 2


def test_add_with_id_depends_parent_and_free_segments() -> None:
    change = plan.add_task(V3, "P1: Smoke test #qa | run against staging", TODAY, ident="smoke", depends=["deploy-001", "test-001"], parent="deploy-001")
    assert change.task.text == (
        "- [ ] P1: Smoke test #qa (id: smoke, depends: deploy-001, test-001, parent: deploy-001) | run against staging | modified: 2026-01-21"
    )
    assert change.task.depends == ("deploy-001", "test-001") and change.task.parent == "deploy-001"


@pytest.mark.parametrize(
    ("section", "path"),
    [("backlog-bugs", ("Backlog", "Bugs")), ("backlog-debt", ("Backlog", "Debt")), ("backlog-ideas", ("Backlog", "Ideas")), ("backlog", ("Backlog",))],
)
def test_add_to_backlog_sections(section: str, path: tuple[str, ...]) -> None:
    change = plan.add_task(TEMPLATE, "P2: Something #debt", TODAY, section=section)
    assert change.task.section == path
    removed, added = changes(TEMPLATE, change.text)
    assert [line for line in added if line.strip()] == ["- [ ] P2: Something #debt | modified: 2026-01-21\n"]
    assert removed in ([], ["_None._\n"])


def test_add_creates_missing_backlog_sections() -> None:
    change = plan.add_task("# Plan\n\n## Tasks\n", "Idea", TODAY, section="backlog-ideas")
    assert change.text == "# Plan\n\n## Tasks\n\n## Backlog\n\n### Ideas\n\n- [ ] Idea | modified: 2026-01-21\n"


@pytest.mark.parametrize(
    ("spec", "options", "code"),
    [
        ("", {}, "INVALID_REQUEST"),
        ("P1:", {}, "INVALID_REQUEST"),
        ("P7: Too urgent", {}, "INVALID_REQUEST"),
        ("two\nlines", {}, "INVALID_REQUEST"),
        ("- [ ] marked", {}, "INVALID_REQUEST"),
        ("Dup", {"ident": "TEST-001"}, "ALREADY_EXISTS"),
        ("Bad id", {"ident": "has space"}, "INVALID_REQUEST"),
        ("Orphan", {"depends": ["nope"]}, "NOT_FOUND"),
        ("Orphan", {"parent": "nope"}, "NOT_FOUND"),
        ("Done already", {"section": "completed"}, "INVALID_REQUEST"),
        ("Twice (id: a)", {"ident": "b"}, "AMBIGUOUS_ADDRESSING"),
    ],
)
def test_bad_adds_are_refused(spec: str, options: dict, code: str) -> None:
    assert error_of(lambda: plan.add_task(V3, spec, TODAY, **options)).code == code


def test_example_lines_inside_comments_are_never_tasks() -> None:
    text = plan.add_task(TEMPLATE, "Real", TODAY).text
    assert [t.title for t in plan.parse_plan(text).tasks] == ["Real"]
    assert "- [>] P1: Login flow #feature #auth | modified: 2026-01-15" in text


# --------------------------------------------------------------------------- addressing


def test_addressing_by_number_id_title_and_prefix() -> None:
    parsed = plan.parse_plan(V3)
    assert plan.find_task(parsed, "3").id == "deploy-001"
    assert plan.find_task(parsed, "DEPLOY-001").number == 3
    assert plan.find_task(parsed, "code review").id == "review-001"
    assert plan.find_task(parsed, "  rotate ").id == "keys"


def test_an_exact_title_beats_a_longer_one_with_the_same_prefix() -> None:
    parsed = plan.parse_plan("- [ ] Auth\n- [ ] Auth refresh\n")
    assert plan.find_task(parsed, "auth").number == 1
    err = error_of(lambda: plan.find_task(parsed, "au"))
    assert err.code == "AMBIGUOUS_ADDRESSING"
    assert [c["number"] for c in err.details["candidates"]] == [1, 2]


def test_a_number_that_is_also_another_tasks_id_is_ambiguous() -> None:
    parsed = plan.parse_plan("- [ ] A (id: 2)\n- [ ] B\n")
    err = error_of(lambda: plan.find_task(parsed, "2"))
    assert err.code == "AMBIGUOUS_ADDRESSING" and {c["title"] for c in err.details["candidates"]} == {"A", "B"}


@pytest.mark.parametrize("ref", ["9", "zzz", "0"])
def test_no_match_is_not_found(ref: str) -> None:
    err = error_of(lambda: plan.find_task(plan.parse_plan(V3), ref))
    assert isinstance(err, NotFound) and err.details["ref"] == ref


# --------------------------------------------------------------------------- dependencies


def test_ready_and_blocked_follow_dependencies() -> None:
    parsed = plan.parse_plan(V3)
    assert [t.id for t in plan.ready_tasks(parsed)] == ["review-001"]
    blocked = {item.task.title: item for item in plan.blocked_tasks(parsed)}
    assert set(blocked) == {"Deploy to production", "Announce the release", "Crash on empty config"}
    deploy = blocked["Deploy to production"]
    assert deploy.reason is None and [(d.id, d.status, d.met) for d in deploy.waiting_on] == [("review-001", "pending", False)]
    announce = blocked["Announce the release"]
    assert [(d.id, d.status) for d in announce.waiting_on] == [("deploy-001", "pending"), ("docs-404", "unknown")]


def test_finishing_a_dependency_makes_its_dependent_ready() -> None:
    text = plan.transition(V3, "done", "review-001", TODAY).text
    assert [t.id for t in plan.ready_tasks(plan.parse_plan(text))] == ["deploy-001"]
    closed = plan.transition(V3, "close", "review-001", TODAY, reason="skipped").text
    assert [t.id for t in plan.ready_tasks(plan.parse_plan(closed))] == ["deploy-001"]


def test_stats_shape_and_definitions() -> None:
    assert plan.plan_stats(plan.parse_plan(V3)) == {"open": 6, "ready": 1, "in_progress": 1, "blocked": 3, "closed": 2, "total": 8}
    assert plan.plan_stats(plan.parse_plan("")) == {"open": 0, "ready": 0, "in_progress": 0, "blocked": 0, "closed": 0, "total": 0}


def test_graph_draws_each_root_with_its_dependencies() -> None:
    parsed = plan.parse_plan(V3)
    graph = plan.dependency_graph(parsed)
    assert [plan.task_key(t) for t in graph.roots] == ["#6"]
    assert graph.missing == ("docs-404",)
    assert plan.render_graph(parsed, graph) == "\n".join(
        [
            "[ ] Announce the release (#6)",
            "├── [X] Write the changelog (changelog)",
            "├── [ ] Deploy to production (deploy-001)",
            "│   ├── [x] Run the test suite (test-001)",
            "│   └── [ ] Code review (review-001)",
            "│       └── [x] Run the test suite (test-001)",
            "└── [?] docs-404 (no such id)",
        ]
    )
    one = plan.dependency_graph(parsed, "review-001")
    assert plan.render_graph(parsed, one) == "[ ] Code review (review-001)\n└── [x] Run the test suite (test-001)"


def test_a_shared_subtree_is_drawn_once() -> None:
    text = "- [ ] base (id: b)\n- [ ] mid (id: m, depends: b)\n- [ ] one (depends: m)\n- [ ] two (depends: m)\n"
    parsed = plan.parse_plan(text)
    drawn = plan.render_graph(parsed, plan.dependency_graph(parsed))
    assert drawn.count("(see above)") == 1 and drawn.count("[ ] base") == 1


def test_a_cycle_is_an_error_naming_the_cycle() -> None:
    text = "- [ ] a (id: a, depends: c)\n- [ ] b (id: b, depends: a)\n- [ ] c (id: c, depends: b)\n- [ ] d (id: d, depends: a)\n"
    err = error_of(lambda: plan.dependency_graph(plan.parse_plan(text), path="PLAN.md"))
    assert isinstance(err, InvalidDocument) and err.code == "DEPENDENCY_CYCLE"
    cycle = err.details["cycle"]
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"} and len(cycle) == 4
    assert err.path == "PLAN.md" and err.line in (1, 2, 3)
    self_loop = error_of(lambda: plan.dependency_graph(plan.parse_plan("- [ ] s (id: s, depends: s)\n")))
    assert self_loop.details["cycle"] == ["s", "s"]


# --------------------------------------------------------------------------- stale


def test_stale_uses_modified_dates_against_today() -> None:
    parsed = plan.parse_plan(V3)
    report = plan.stale_tasks(parsed, date(2026, 1, 20), days=7)
    assert [(t.id, age) for t, age in report.stale] == [("keys", 18)]  # 7 days old is not *more* than 7
    assert [t.id for t in report.undated] == ["deploy-001"]
    later = plan.stale_tasks(parsed, date(2026, 1, 23), days=7)
    assert [(t.id or t.title, age) for t, age in later.stale] == [("keys", 21), ("review-001", 10), ("Announce the release", 8)]
    assert plan.stale_tasks(parsed, date(2026, 1, 3), days=0).stale[0][0].id == "keys"
    assert error_of(lambda: plan.stale_tasks(parsed, TODAY, days=-1)).code == "INVALID_REQUEST"


# --------------------------------------------------------------------------- filters


def test_filters_by_status_label_and_priority() -> None:
    parsed = plan.parse_plan(V3)
    titles = lambda tasks: [t.title for t in tasks]  # noqa: E731
    assert titles(plan.filter_tasks(parsed, statuses=["done"])) == ["Run the test suite", "Write the changelog"]
    assert titles(plan.filter_tasks(parsed, statuses=["ready"])) == ["Code review"]
    assert len(plan.filter_tasks(parsed, statuses=["open"])) == 6
    assert titles(plan.filter_tasks(parsed, labels=["#security"])) == ["Rotate keys"]
    assert titles(plan.filter_tasks(parsed, priorities=["p0", "3"])) == ["Rotate keys", "Write the changelog"]
    with pytest.raises(InvalidRequest):
        plan.filter_tasks(parsed, statuses=["sleeping"])
    with pytest.raises(InvalidRequest):
        plan.filter_tasks(parsed, priorities=["P9"])


def test_malformed_frontmatter_is_reported_with_its_line() -> None:
    err = error_of(lambda: plan.parse_plan("---\nkey: [unclosed\n---\n- [ ] t\n", "PLAN.md"))
    assert isinstance(err, InvalidDocument) and err.code.startswith("FRONTMATTER") and err.path == "PLAN.md" and err.line


@pytest.mark.parametrize(
    ("heading", "kind"),
    [("Tasks", "tasks"), ("✅ Completed", "completed"), ("Tasks (this week)", "tasks"), ("Done", "completed"), ("Backlog:", "backlog"),
     ("In Progress", "tasks"), ("Sprint 3", "other"), ("Notes", "notes"), ("Taskforce", "other")],
)  # fmt: skip
def test_section_kinds_by_heading(heading: str, kind: str) -> None:
    assert plan.section_kind((heading,)) == kind


def test_comments_hide_lines_but_not_text_before_them() -> None:
    text = "## Tasks <!-- sorted by priority -->\n- [ ] Visible <!-- an aside -->\n<!-- - [ ] hidden example\n- [ ] still hidden -->\n- [ ] After the comment\n"
    parsed = plan.parse_plan(text)
    assert [(t.title, t.section) for t in parsed.tasks] == [
        ("Visible <!-- an aside -->", ("Tasks <!-- sorted by priority -->",)),
        ("After the comment", ("Tasks <!-- sorted by priority -->",)),
    ]
    assert [t.kind for t in parsed.tasks] == ["tasks", "tasks"]


# --------------------------------------------------------------------------- remembered parses


def test_a_remembered_parse_equals_a_fresh_one() -> None:
    """parse_plan remembers recent texts and task lines; every answer equals a parse from
    nothing, and what one caller changes in its task fields never reaches another."""
    text = (
        "## Tasks\n\n- [ ] (Add your first task here)\n- [ ] Parent one (id: p1)\n  - [ ] Same child line\n- [ ] Parent two (id: p2)\n  - [ ] Same child line\n"
    )
    first = plan.parse_plan(text, "PLAN.md")
    again = plan.parse_plan(text, "PLAN.md")
    assert [t.parent for t in again.tasks] == [None, "p1", None, "p2"]  # one remembered line, two parents; no placeholder
    plan._parse_plan_once.cache_clear()
    plan._task_line_once.cache_clear()
    fresh = plan.parse_plan(text, "PLAN.md")
    assert first == again == fresh
    fields = plan._task_line_fields("- [ ] Same child line")
    assert fields is not None
    fields["parent"] = "changed"
    assert plan._task_line_fields("- [ ] Same child line")["parent"] is None  # type: ignore[index]
    for action, ref in (("start", "review-001"), ("done", "keys"), ("reopen", "test-001"), ("block", "deploy-001")):
        remembered = plan.transition(V3, action, ref, TODAY, reason="r").text
        plan._parse_plan_once.cache_clear()
        plan._task_line_once.cache_clear()
        assert plan.transition(V3, action, ref, TODAY, reason="r").text == remembered


def test_parsed_records_are_immutable_values() -> None:
    """The parsed records (NamedTuples since issue 29, frozen dataclasses
    before) cannot be changed in place and compare by value: two parses of one text are equal,
    a parse of another text is not."""
    from cstack import markdown

    first, second = plan.parse_plan(V2), plan.parse_plan(V2 + "\n")
    again = plan.parse_plan("".join(first.outline.lines))
    assert plan._parse_plan_once.cache_clear() is None and plan.parse_plan(V2) == first
    assert again.tasks == first.tasks and again == first
    assert second.outline != first.outline
    task = first.tasks[0]
    for record, name in ((task, "title"), (task.segments[0], "value"), (first, "tasks"), (first.outline, "lines"), (first.outline.sections[0], "end")):
        with pytest.raises(AttributeError):
            setattr(record, name, None)
    place = markdown.Placement(3, blank_before=True)
    assert place == markdown.Placement(3, False, True) and place != markdown.Placement(3) and hash(place) == hash(markdown.Placement(3, False, True))
    with pytest.raises(AttributeError):
        place.line = 4  # type: ignore[misc]
    assert repr(place) == "Placement(line=3, replace=False, blank_before=True)"

"""Three-way merges by item: PLAN.md tasks, CURRENT.md sections, MEMORY.md entries and v1
mailbox blocks (cstack.merge, needlecast.merge over foundation.itemmerge). Pure: texts in,
text out; the git runs are in test_git_transport.py."""

from __future__ import annotations

from datetime import date

from hypothesis import given
from hypothesis import strategies as st

import cstack
import needlecast
from cstack.plan import add_task, parse_plan, transition
from moss_files.foundation import conflicts
from needlecast.message import parse_block, split_blocks

PLAN = """# Plan

## Tasks

- [ ] P1: Write the parser (id: parser)
- [>] Build the index | modified: 2026-01-01
  Detail line of the index task.

## Completed

- [x] Set up the repo | closed: 2026-01-01

## Notes

Some notes.
"""


def tasks(text: str) -> dict[str, str]:
    return {task.title: task.status for task in parse_plan(text).tasks}


def test_tasks_both_sides_appended_to_one_list_are_all_kept_in_order() -> None:
    ours = PLAN.replace("  Detail line of the index task.\n", "  Detail line of the index task.\n- [ ] Ours one\n- [ ] Ours two\n")
    theirs = PLAN.replace("  Detail line of the index task.\n", "  Detail line of the index task.\n- [ ] Theirs one\n")
    merged = cstack.merge_plan(PLAN, ours, theirs)
    assert merged.conflicts == 0
    titles = [task.title for task in parse_plan(merged.text).tasks]
    assert titles == ["Write the parser", "Build the index", "Ours one", "Ours two", "Theirs one", "Set up the repo"]
    assert "  Detail line of the index task.\n- [ ] Ours one" in merged.text  # details stay with their task


def test_a_field_changed_on_one_side_wins_and_later_modified_dates_win() -> None:
    ours = PLAN.replace("- [ ] P1: Write the parser (id: parser)", "- [ ] P0: Write the parser (id: parser)")
    theirs = PLAN.replace("modified: 2026-01-01", "modified: 2026-01-05")
    merged = cstack.merge_plan(PLAN, ours, theirs)
    assert merged.conflicts == 0
    assert "- [ ] P0: Write the parser (id: parser)" in merged.text and "modified: 2026-01-05" in merged.text


def test_both_changing_a_status_the_one_further_along_wins_and_the_other_is_noted() -> None:
    done = PLAN.replace("- [ ] P1: Write the parser (id: parser)\n", "").replace(
        "- [x] Set up the repo | closed: 2026-01-01\n",
        "- [x] Set up the repo | closed: 2026-01-01\n- [x] P1: Write the parser (id: parser) | closed: 2026-01-03\n",
    )
    started = PLAN.replace("- [ ] P1: Write the parser (id: parser)", "- [>] P1: Write the parser (id: parser) | modified: 2026-01-02")
    for ours, theirs in ((done, started), (started, done)):
        merged = cstack.merge_plan(PLAN, ours, theirs)
        assert merged.conflicts == 0
        parsed = [task for task in parse_plan(merged.text).tasks if task.id == "parser"]
        assert len(parsed) == 1 and parsed[0].status == "done" and parsed[0].kind == "completed"
        assert "<!-- merge: the other side's line was: - [>] P1: Write the parser" in merged.text


def test_a_task_both_sides_added_merges_like_one_both_changed_whichever_side_is_ours() -> None:
    """Issue 24: with no base version, our line was taken for the base, so their pending copy
    looked like the only change and undid our finished one (in one merge direction only)."""
    today = date(2026, 1, 4)
    added = add_task(PLAN, "P2: Write docs", today, ident="docs").text
    finished = transition(transition(added, "start", "docs", today).text, "done", "docs", today).text
    noted = add_task(PLAN, "P2: Write docs", date(2026, 1, 2), ident="docs").text.replace(
        "(id: docs) | modified: 2026-01-02\n", "(id: docs) | modified: 2026-01-02\n  Their detail.\n"
    )
    for ours, theirs in ((finished, noted), (noted, finished)):
        merged = cstack.merge_plan(PLAN, ours, theirs)
        found = [task for task in parse_plan(merged.text).tasks if task.id == "docs"]
        assert merged.conflicts == 0 and len(found) == 1
        assert (found[0].status, found[0].kind, found[0].closed) == ("done", "completed", "2026-01-04")
        assert "<!-- merge: the other side's line was: - [ ] P2: Write docs (id: docs) | modified: 2026-01-02" in merged.text
        assert "  Their detail.\n" in merged.text  # a detail only one copy had is kept
    started = transition(added, "start", "docs", today).text
    blocked = transition(added, "block", "docs", today, reason="waiting for the API").text
    for ours, theirs in ((started, blocked), (blocked, started)):  # one stage: a fixed order, not ours
        found = [task for task in parse_plan(cstack.merge_plan(PLAN, ours, theirs).text).tasks if task.id == "docs"]
        assert [(task.status, task.blocked) for task in found] == [("blocked", "waiting for the API")]


def test_an_id_less_task_is_not_matched_by_a_title_the_two_sides_gave_different_ids() -> None:
    base = PLAN.replace("- [>] Build the index | modified", "- [ ] Task zero\n- [>] Build the index | modified")
    one, other = base.replace("Task zero", "Task zero (id: a)"), base.replace("Task zero", "Task zero (id: b)")
    merged = [cstack.merge_plan(base, ours, theirs).text for ours, theirs in ((one, other), (other, one))]
    assert [sorted(task.id or "" for task in parse_plan(text).tasks if task.title == "Task zero") for text in merged] == [["a", "b"], ["a", "b"]]
    assert not any("deleted on" in text for text in merged)  # the id-less base copy matched neither side's


def test_a_task_deleted_on_one_side_and_edited_on_the_other_stays_marked() -> None:
    deleted = PLAN.replace("- [>] Build the index | modified: 2026-01-01\n  Detail line of the index task.\n", "")
    edited = PLAN.replace("modified: 2026-01-01", "modified: 2026-01-09")
    for ours, theirs in ((deleted, edited), (edited, deleted)):
        merged = cstack.merge_plan(PLAN, ours, theirs)
        assert merged.conflicts == 0 and tasks(merged.text)["Build the index"] == "in_progress"
        assert "modified: 2026-01-09" in merged.text and "deleted on" in merged.text
    untouched = cstack.merge_plan(PLAN, deleted, PLAN)
    assert "Build the index" not in tasks(untouched.text)  # deleted, and nobody edited it


def test_a_task_that_gained_an_id_on_one_side_is_still_the_same_task() -> None:
    with_id = PLAN.replace("- [>] Build the index | modified", "- [>] Build the index (id: index) | modified")
    edited = PLAN.replace("modified: 2026-01-01", "modified: 2026-01-07")
    merged = cstack.merge_plan(PLAN, with_id, edited)
    found = [task for task in parse_plan(merged.text).tasks if task.title == "Build the index"]
    assert merged.conflicts == 0 and len(found) == 1 and found[0].id == "index" and found[0].modified == "2026-01-07"


def test_prose_both_sides_changed_in_one_place_is_a_real_conflict() -> None:
    ours, theirs = PLAN.replace("Some notes.", "Our notes."), PLAN.replace("Some notes.", "Their notes.")
    merged = cstack.merge_plan(PLAN, ours, theirs)
    assert merged.conflicts == 1 and conflicts.first_marker_line(merged.text) is not None


def test_current_md_merges_section_by_section_and_one_section_changed_twice_conflicts() -> None:
    current = "# Current\n\n## Now\n\nNothing.\n\n## Next Steps\n\n1. Wait\n"
    now = current.replace("Nothing.", "Writing the parser.")
    steps = current.replace("1. Wait", "1. Ship it")
    merged = cstack.merge_current(current, now, steps)
    assert merged.conflicts == 0 and "Writing the parser." in merged.text and "1. Ship it" in merged.text
    clash = cstack.merge_current(current, now, current.replace("Nothing.", "Reviewing."))
    assert clash.conflicts == 1 and "<<<<<<< ours\n## Now\n" in clash.text


MEMORY = "# Memory\n\n## Facts\n\n- The API is REST.\n\n## Gotchas\n\n- Tabs break YAML.\n"


def test_memory_entries_of_both_sides_are_kept_once_each() -> None:
    ours = MEMORY.replace("- The API is REST.\n", "- The API is REST.\n- Deploys go through CI.\n- Shared fact.\n")
    theirs = MEMORY.replace("- The API is REST.\n", "- The API is REST.\n- Shared fact.\n- Logs live in /var/log/app.\n")
    merged = cstack.merge_memory(MEMORY, ours, theirs)
    facts = merged.text.split("## Gotchas")[0].splitlines()
    assert merged.conflicts == 0
    assert merged.text.count("- Shared fact.") == 1
    assert {"- Deploys go through CI.", "- Logs live in /var/log/app.", "- The API is REST."} <= set(facts)
    removed = cstack.merge_memory(MEMORY, MEMORY.replace("- Tabs break YAML.\n", ""), theirs)
    assert "Tabs break YAML" not in removed.text and "Logs live in" in removed.text


def block(ident: str, sender: str, to: str, time: str, body: str) -> str:
    return f"---\nid: {ident}\nfrom: {sender}\nto: {to}\ntime: {time}\n---\n{body}\n\n"


OUTBOX = "# Outbox\n\n" + block("m1", "alice", "bob", "2026-01-01T09:00:00Z", "first")


def ids(text: str) -> list[str | None]:
    return [parse_block(b).id for b in split_blocks(text).blocks]


def test_messages_both_clones_appended_are_kept_in_time_order() -> None:
    ours = OUTBOX + block("m3", "alice", "bob", "2026-01-01T09:03:00Z", "third")
    theirs = OUTBOX + block("m2", "alice", "carol", "2026-01-01T09:02:00Z", "second")
    merged = needlecast.merge_mailbox(OUTBOX, ours, theirs)
    assert merged.conflicts == 0 and ids(merged.text) == ["m1", "m2", "m3"]


def test_a_routed_message_is_not_brought_back_and_a_reused_id_keeps_both_versions() -> None:
    routed = "# Outbox\n\n"  # the router archived m1 on one clone
    added = OUTBOX + block("m2", "alice", "bob", "2026-01-01T09:02:00Z", "second")
    assert ids(needlecast.merge_mailbox(OUTBOX, routed, added).text) == ["m2"]
    one = OUTBOX + block("m9", "alice", "bob", "2026-01-01T09:09:00Z", "one text")
    other = OUTBOX + block("m9", "alice", "bob", "2026-01-01T09:09:00Z", "another text")
    merged = needlecast.merge_mailbox(OUTBOX, one, other)
    # Both kept: the router delivers one and dead-letters the other as DUPLICATE_MESSAGE_ID.
    assert ids(merged.text) == ["m1", "m9", "m9"] and "one text" in merged.text and "another text" in merged.text


def test_messages_without_ids_are_matched_by_their_bytes() -> None:
    hand = "---\nfrom: alice\nto: bob\n---\nno id here\n\n"
    merged = needlecast.merge_mailbox(OUTBOX, OUTBOX + hand, OUTBOX + hand)
    assert merged.text.count("no id here") == 1


# --------------------------------------------------------------------------- properties

titles = st.sampled_from([f"task {n}" for n in range(12)])
plan_edit = st.one_of(
    st.tuples(st.just("add"), titles),
    st.tuples(st.just("start"), st.integers(0, 20)),
    st.tuples(st.just("done"), st.integers(0, 20)),
    st.tuples(st.just("delete"), st.integers(0, 20)),
)


def edit_plan(text: str, edits: list[tuple[str, object]], side: str) -> str:
    lines = text.splitlines(keepends=True)
    for number, (kind, arg) in enumerate(edits):
        task_lines = [i for i, line in enumerate(lines) if line.startswith("- [")]
        if kind == "add":  # a title no other task of either side has
            at = max(task_lines[-1] + 1 if task_lines else 4, 4)
            lines.insert(min(at, len(lines)), f"- [ ] {arg} {side} {number}\n")
        elif task_lines:
            at = task_lines[int(arg) % len(task_lines)]  # type: ignore[call-overload]
            if kind == "delete":
                del lines[at]
            else:
                lines[at] = lines[at].replace("[ ]", "[>]" if kind == "start" else "[x]", 1)
    return "".join(lines)


@given(ours=st.lists(plan_edit, max_size=5), theirs=st.lists(plan_edit, max_size=5))
def test_random_edits_to_plan_md_lose_no_task_and_parse(ours: list, theirs: list) -> None:
    base = "# Plan\n\n## Tasks\n\n- [ ] alpha\n- [ ] beta\n- [ ] gamma\n\n## Notes\n\nx\n"
    mine, other = edit_plan(base, ours, "(ours)"), edit_plan(base, theirs, "(theirs)")
    merged = cstack.merge_plan(base, mine, other)
    assert merged.conflicts == 0
    result = set(tasks(merged.text))
    old, a, b = set(tasks(base)), set(tasks(mine)), set(tasks(other))
    assert (a - old) | (b - old) <= result  # every task a side added is there
    assert (a & b) <= result  # every task both sides kept is there
    assert result <= a | b  # nothing invented
    for title in result:  # once each
        assert [task.title for task in parse_plan(merged.text).tasks].count(title) == 1


message_edit = st.one_of(st.tuples(st.just("send"), st.integers(0, 50)), st.tuples(st.just("route"), st.integers(0, 10)))


def edit_outbox(text: str, edits: list[tuple[str, int]], side: str) -> str:
    for number, (kind, value) in enumerate(edits):
        if kind == "send":  # ids are unique per side, as a sender makes them
            text += block(f"{side}-{number}", "alice", "bob", f"2026-01-01T09:{value:02d}:00Z", f"body {side} {value}")
        else:
            mail = split_blocks(text)
            if mail.blocks:
                dropped = mail.blocks[value % len(mail.blocks)]
                text = mail.preamble + "".join(b.raw for b in mail.blocks if b is not dropped)
    return text


@given(ours=st.lists(message_edit, max_size=6), theirs=st.lists(message_edit, max_size=6))
def test_random_sends_and_routes_on_a_v1_outbox_lose_no_message(ours: list, theirs: list) -> None:
    base = OUTBOX + block("m2", "alice", "bob", "2026-01-01T08:00:00Z", "second")
    mine, other = edit_outbox(base, ours, "a"), edit_outbox(base, theirs, "b")
    merged = needlecast.merge_mailbox(base, mine, other)
    assert merged.conflicts == 0
    result, old, a, b = (set(ids(text)) for text in (merged.text, base, mine, other))
    assert (a - old) | (b - old) <= result and (a & b) <= result and result <= a | b
    assert len(ids(merged.text)) == len(result)  # once each
    for parsed in split_blocks(merged.text).blocks:
        parse_block(parsed)  # every block still reads

"""The merge driver gives the same result whichever side merges: merge(base, a, b) and
merge(base, b, a) keep the same items with the same statuses, for every kind the driver
merges, over random histories in which both sides add the same item (as a rebase or a
cherry-pick leaves them) and replay each other's steps. Issue 24: an add on both sides was
merged as if our copy were the base, so a task one side finished went back to pending in one
direction. Pure: each history is built with the kinds' own functions, and merged through the
driver's choice of merge (`merge_for`)."""

from __future__ import annotations

from collections import Counter
from datetime import date
from importlib import resources

from hypothesis import event, given
from hypothesis import strategies as st

from cstack.memory import parse_memory, remember
from cstack.plan import add_task, parse_plan, transition
from moss_files.foundation import document
from moss_files.foundation.errors import MossError
from moss_files.foundation.textmerge import Labels
from moss_files.merge.driver import merge_for
from needlecast.message import Message, parse_block, render_block, split_blocks

TEMPLATES = resources.files("moss_files.templates").joinpath("cstack")


def both_ways(path: str, base: str, one: str, other: str) -> tuple[tuple[str, int], tuple[str, int]]:
    """The driver's merge of `path` with `one` as ours, then with `other` as ours."""
    _, merge = merge_for(path)
    return merge(base, one, other, Labels()), merge(base, other, one, Labels())


def history(start: str, steps: list, apply: object, picked_from: list | None = None) -> str:
    """`start` with each step applied; a ("pick", i) step replays the other side's i-th step,
    as a cherry-pick (or a rebase) of that commit does."""
    text = start
    for step in steps:
        if step[0] == "pick":
            if not picked_from:
                continue
            step = picked_from[step[1] % len(picked_from)]
        text = apply(text, step)  # type: ignore[operator]
    return text


def picks(count: int) -> st.SearchStrategy:
    return st.tuples(st.just("pick"), st.integers(0, count))


# --------------------------------------------------------------------------- PLAN.md

TASKS = st.integers(0, 2)
DAYS = st.integers(1, 9)
plan_add = st.tuples(st.just("add"), TASKS, st.integers(0, 3), DAYS, st.sampled_from(["t", "u", ""]))  # "u": another id, same title
plan_step = st.one_of(
    plan_add,
    st.tuples(st.sampled_from(["start", "done", "close", "block", "ready", "reopen"]), TASKS, DAYS),
    st.tuples(st.just("detail"), TASKS, st.integers(0, 2)),
    st.tuples(st.just("delete"), TASKS),
)


def work(step: st.SearchStrategy) -> st.SearchStrategy:
    """A side's history: a few tasks added first (often the same ones on both sides), then anything."""
    return st.tuples(st.lists(plan_add, max_size=3), st.lists(step, max_size=6)).map(lambda parts: parts[0] + parts[1])


def step_plan(text: str, step: tuple) -> str:
    """One step of an agent or a person on PLAN.md; a step the file does not allow is skipped."""
    kind, number = step[0], step[1]
    title = f"Task {number}"
    found = [task for task in parse_plan(text).tasks if task.title == title]
    try:
        if kind == "add":
            if found:
                return text
            ident = f"{step[4]}{number}" if step[4] else None
            return add_task(text, f"P{step[2]}: {title}", date(2026, 1, step[3]), ident=ident).text
        if not found:
            return text
        task = found[0]
        lines = text.splitlines(keepends=True)
        if kind == "detail":  # a hand-written line under the task
            lines.insert(task.line, f"  note {step[2]}\n")
            return "".join(lines)
        if kind == "delete":  # by hand: the task line and its detail lines
            end = task.line
            while end < len(lines) and lines[end].startswith("  "):
                end += 1
            return "".join(lines[: task.line - 1] + lines[end:])
        reason = f"reason {step[2]}" if kind in ("block", "close") else None
        return transition(text, kind, task.id or title, date(2026, 1, step[2]), reason=reason).text
    except MossError:
        return text


def plan_items(text: str) -> Counter:
    return Counter((task.id, task.title, task.status, task.kind) for task in parse_plan(text).tasks)


@given(
    shared=st.lists(plan_step, max_size=3),
    ours=work(plan_step),
    theirs=work(st.one_of(plan_step, picks(8))),
)
def test_plan_md_merges_the_same_both_ways(shared: list, ours: list, theirs: list) -> None:
    base = history(TEMPLATES.joinpath("PLAN.md").read_text(encoding="utf-8"), shared, step_plan)
    mine = history(base, ours, step_plan)
    other = history(base, theirs, step_plan, picked_from=ours)
    (one, one_conflicts), (two, two_conflicts) = both_ways(".cstack/PLAN.md", base, mine, other)
    both_added = {t.title: t.status for t in parse_plan(mine).tasks}.keys() & {t.title for t in parse_plan(other).tasks}
    both_added -= {task.title for task in parse_plan(base).tasks}
    event("both sides added a task" if both_added else "no task added on both sides")
    if any(t.title in both_added and t.status != u.status for t in parse_plan(mine).tasks for u in parse_plan(other).tasks if u.title == t.title):
        event("both sides added a task and its copies differ in status")
    assert one_conflicts == two_conflicts == 0
    assert plan_items(one) == plan_items(two)  # the same tasks, statuses and sections
    keys = [task.id or task.title for task in parse_plan(one).tasks]
    assert len(keys) == len(set(keys))  # each task once
    for part in ("id", "title"):  # a task either side added is there (an id-less copy matches by title)
        added = {getattr(task, part) for text in (mine, other) for task in parse_plan(text).tasks} - {None}
        assert added - {getattr(task, part) for task in parse_plan(base).tasks} <= {getattr(task, part) for task in parse_plan(one).tasks}
    for task in parse_plan(one).tasks:  # a task both sides finished stays finished
        sides = [t.status for text in (mine, other) for t in parse_plan(text).tasks if (t.id or t.title) == (task.id or task.title)]
        if len(sides) == 2 and all(status in ("done", "closed") for status in sides):
            assert task.status in sides


# --------------------------------------------------------------------------- MEMORY.md

memory_step = st.one_of(
    st.tuples(st.just("remember"), st.sampled_from(["facts", "gotchas", "decisions", "preferences"]), st.integers(0, 4), DAYS),
    st.tuples(st.just("detail"), st.integers(0, 4), st.integers(0, 2)),
    st.tuples(st.just("forget"), st.integers(0, 4)),
)


def step_memory(text: str, step: tuple) -> str:
    memory = parse_memory(text)
    if step[0] == "remember":
        if any(f"Entry {step[2]}" in entry.text for entry in memory.entries):
            return text
        return remember(text, f"Entry {step[2]} | learnt", date(2026, 1, step[3]), category=step[1]).text
    found = [entry for entry in memory.entries if f"Entry {step[1]} " in entry.text and entry.category != "decisions"]
    if not found:
        return text
    lines = text.splitlines(keepends=True)
    if step[0] == "detail":
        lines.insert(found[0].line, f"  more {step[2]}\n")
    else:  # by hand: the entry and its detail lines
        end = found[0].line
        while end < len(lines) and lines[end].startswith("  "):
            end += 1
        del lines[found[0].line - 1 : end]
    return "".join(lines)


def memory_items(text: str) -> Counter:
    return Counter((entry.category, entry.text) for entry in parse_memory(text).entries)


@given(
    shared=st.lists(memory_step, max_size=4),
    ours=st.lists(memory_step, max_size=5),
    theirs=st.lists(st.one_of(memory_step, picks(5)), max_size=5),
)
def test_memory_md_merges_the_same_both_ways(shared: list, ours: list, theirs: list) -> None:
    base = history(TEMPLATES.joinpath("MEMORY.md").read_text(encoding="utf-8"), shared, step_memory)
    mine, other = history(base, ours, step_memory), history(base, theirs, step_memory, picked_from=ours)
    (one, one_conflicts), (two, two_conflicts) = both_ways(".cstack/MEMORY.md", base, mine, other)
    assert one_conflicts == two_conflicts == 0
    assert memory_items(one) == memory_items(two)
    assert sorted(line for line in one.splitlines() if line.startswith("  more")) == sorted(line for line in two.splitlines() if line.startswith("  more"))


# --------------------------------------------------------------------------- CURRENT.md

current_step = st.tuples(st.sampled_from(["Now", "Next Steps", "Blockers", "Found"]), st.integers(0, 2))


def step_current(text: str, step: tuple) -> str:
    """Rewrite (or add) one `##` section, as an agent saving its state does."""
    head, _, _ = text.partition(f"## {step[0]}\n")
    rest = text[len(head) :]
    if not rest:
        return f"{text.rstrip()}\n\n## {step[0]}\n\nversion {step[1]}\n"
    following = rest.find("\n## ", 1)
    tail = rest[following + 1 :] if following != -1 else ""
    return f"{head}## {step[0]}\n\nversion {step[1]}\n\n{tail}"


def sections(text: str) -> dict[str, str]:
    parts = text.split("\n## ")
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1].strip() if "\n" in part else "" for part in parts[1:]}


@given(
    shared=st.lists(current_step, max_size=3),
    ours=st.lists(current_step, max_size=4),
    theirs=st.lists(st.one_of(current_step, picks(4)), max_size=4),
)
def test_current_md_merges_the_same_both_ways(shared: list, ours: list, theirs: list) -> None:
    base = history("# Current\n\n## Now\n\nnothing yet\n", shared, step_current)
    mine, other = history(base, ours, step_current), history(base, theirs, step_current, picked_from=ours)
    (one, one_conflicts), (two, two_conflicts) = both_ways(".cstack/CURRENT.md", base, mine, other)
    assert one_conflicts == two_conflicts  # a section both sides wrote differently conflicts either way
    if not one_conflicts:
        assert sections(one) == sections(two)


# --------------------------------------------------------------------------- v1 mailboxes

message_step = st.one_of(
    st.tuples(st.just("send"), st.integers(0, 5), st.integers(0, 2), st.integers(0, 59)),
    st.tuples(st.just("route"), st.integers(0, 5)),
)


def step_outbox(text: str, step: tuple) -> str:
    mail = split_blocks(text)
    ident = f"m{step[1]}"
    present = [block for block in mail.blocks if parse_block(block).id == ident]
    if step[0] == "send":
        if present:
            return text
        sent = Message(id=ident, sender="alice", to=("bob",), time=f"2026-01-01T09:{step[3]:02d}:00Z", body=f"text {step[2]}\n")
        return text + render_block(sent) + "\n"
    return mail.preamble + "".join(block.raw for block in mail.blocks if block not in present)


def messages(text: str) -> Counter:
    return Counter((message.id, message.body) for message in map(parse_block, split_blocks(text).blocks))


@given(
    shared=st.lists(message_step, max_size=4),
    ours=st.lists(message_step, max_size=5),
    theirs=st.lists(st.one_of(message_step, picks(5)), max_size=5),
)
def test_a_v1_outbox_merges_the_same_both_ways(shared: list, ours: list, theirs: list) -> None:
    base = history("# Outbox\n\n", shared, step_outbox)
    mine, other = history(base, ours, step_outbox), history(base, theirs, step_outbox, picked_from=ours)
    (one, one_conflicts), (two, two_conflicts) = both_ways(".needlecast/outbox.md", base, mine, other)
    assert one_conflicts == two_conflicts == 0
    assert messages(one) == messages(two)


# --------------------------------------------------------------------------- one file per item

STATUSES = ["BACKLOG", "PLANNING", "WORKING", "REVIEW", "DONE", "ARCHIVED"]
document_step = st.one_of(
    st.tuples(st.just("status"), st.sampled_from(STATUSES)),
    st.tuples(st.just("assigned_worker"), st.sampled_from(["alice", "bob", None])),
    st.tuples(st.just("updated_at"), st.integers(1, 9)),
    st.tuples(st.just("body"), st.integers(0, 2)),
)


def step_document(text: str, step: tuple) -> str:
    if not text:  # the file is created by this step (both sides creating it is an add on both)
        text = "---\nid: task-1\ntitle: One task\nstatus: BACKLOG\n---\nStarted.\n"
    if step[0] == "body":
        return text[: text.index("---\n", 4) + 4] + f"Body version {step[1]}.\n"
    value = f"2026-01-0{step[1]}T00:00:00Z" if step[0] == "updated_at" else step[1]
    return document.edit_frontmatter(text, {step[0]: document.DELETE if value is None else value})


@given(
    created=st.booleans(),
    shared=st.lists(document_step, max_size=3),
    ours=st.lists(document_step, min_size=1, max_size=4),
    theirs=st.lists(st.one_of(document_step, picks(4)), min_size=1, max_size=4),
    path=st.sampled_from([".moss/board/tasks/task-1.md", ".moss/capsules/main/one.md"]),
)
def test_board_items_and_capsules_merge_the_same_both_ways(created: bool, shared: list, ours: list, theirs: list, path: str) -> None:
    base = history("", shared, step_document) if created else ""
    mine, other = history(base, ours, step_document), history(base, theirs, step_document, picked_from=ours)
    (one, one_conflicts), (two, two_conflicts) = both_ways(path, base, mine, other)
    assert one_conflicts == two_conflicts
    if not one_conflicts:
        first, second = document.parse(one), document.parse(two)
        assert (dict(first.meta), first.body) == (dict(second.meta), second.body)

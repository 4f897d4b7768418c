"""Transitions and additions plan on a condensed PLAN.md (runs of finished tasks they cannot
touch replaced by one stand-in line). Their answer must be the full plan's, byte for byte: for
many generated plans (every dialect fixture, with finished tasks, hand text, comments, code
fences, placeholders, subtasks, odd spacing, CRLF and a missing final newline inserted at random
places), each transition and addition returns the same change (text, task, numbers, lines), or
raises the same error, as planning on the whole parsed file."""

from __future__ import annotations

import random
import re
from bisect import bisect_left
from collections.abc import Callable
from datetime import date
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cstack import markdown, plan
from moss_files.foundation.errors import MossError

TODAY = date(2026, 1, 21)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "cstack"
BASES = sorted([*FIXTURES.glob("plan_*.md"), *(FIXTURES / "history").glob("plan_*.md")])
PLAIN_BASE = (
    "# Plan\n\n## Tasks\n\n- [ ] P1: Open one (id: o1)\n- [>] Open two (id: o2)\n\n## Completed\n\n_None._\n\n## Closed\n\n## Backlog\n\n### Bugs\n_None._\n"
)


def finished_line(rng: random.Random, n: int) -> str:
    bullet = rng.choice("-*+")
    marker = rng.choice("xxxX~")
    gap = rng.choice([" ", " ", "  ", "\t"])
    odd = ["Open two", "Auth", "Design auth flow", "none", "_done_", "(nothing)", "—"]
    title = rng.choice(odd) if rng.random() < 0.06 else rng.choice(["Finished item", "Rounding fix"])
    parts = [f"{bullet}{gap}[{marker}]{gap}"]
    if rng.random() < 0.5:
        parts.append(f"P{rng.choice('01239')}: ")
    parts.append(f"{title} {n}" if rng.random() < 0.9 else title)
    if rng.random() < 0.3:
        parts.append(f" #area{n % 3}")
    roll = rng.random()
    if roll < 0.6:
        ident = rng.choice([*[f"c{n}"] * 12, "o1", "task-001", str(n), f"C{n}"])
        extra = rng.choice(["", "", "", "", "", "", "", "", ", depends: o1", ", parent: o1", f", parent: c{n - 1}"])
        parts.append(f" (id: {ident}{extra})")
    elif roll < 0.7:
        parts.append(f" | id: c{n}")
    if rng.random() < 0.04:
        parts.append(" | parent: o2")
    parts.append(f" | closed: 2025-0{1 + n % 9}-1{n % 9}")
    if rng.random() < 0.3:
        parts.append(rng.choice([" | reason: shipped", " | free text", "   "]))
    return "".join(parts)


def chunk(rng: random.Random, counter: list[int]) -> list[str]:
    """A few lines a person or the tool could have put into a plan."""
    kind = rng.random()
    counter[0] += 1
    n = counter[0]
    if kind < 0.45:
        lines = []
        for _ in range(rng.choice([rng.randint(1, 12), rng.randint(40, 90)])):
            counter[0] += 1
            lines.append(finished_line(rng, counter[0]))
            if rng.random() < 0.03:
                lines.append(rng.choice(["  detail of the task", "\tmore detail", "  - [ ] open subtask", "  - [x] done subtask", ""]))
        return lines
    return rng.choice(
        [
            [f"- [ ] Open item {n} (id: o{n})"],
            [f"- [>] Working on {n}"],
            [f"- [!] Stuck {n} | blocked: vendor"],
            [f"- [ ] Depends {n} (depends: c{n - 2})"],
            [f"  - [ ] Nested open {n}"],
            ["", f"A paragraph about item {n}.", ""],
            ["- a plain item", f"  - [ ] under a plain item {n}"],
            ["1. numbered"],
            ["<!--", f"- [x] hidden {n} (id: h{n})", "-->"],
            [f"text <!-- opens here {n}", "- [x] in comment", "- [x] still in comment", "still -->"],
            ["```", f"- [x] in code {n}", "- [x] more code", "```"],
            ["~~~md", "- [~] in tilde code", "~~~"],
            ["<!-- old tasks", *(f"- [x] Old {n + i} (id: c{n + i})" for i in range(8)), "-->"],
            ["```", *(f"- [x] Code {n + i}" for i in range(8)), "```"],
            ["_None._"],
            ["- [x] none", "- [x] (empty)"],
            ["## Completed"],
            ["## Closed"],
            ["## Tasks"],
            ["## Notes", "- [x] a note that looks like a task", "- [x] another"],
            ["## Backlog", "### Bugs"],
            ["---"],
            [""],
            ["- [x] P1: Open two (id: o2)"],
        ]
    )


def generated(seed: int) -> str:
    rng = random.Random(seed)
    base = BASES[seed % len(BASES)].read_text(encoding="utf-8") if seed % 7 else PLAIN_BASE
    lines = markdown.split_lines(base)
    counter = [seed * 1000]
    for _ in range(rng.randint(2, 8)):
        at = rng.randint(0, len(lines))
        lines[at:at] = [line + "\n" for line in chunk(rng, counter)]
    text = "".join(lines)
    if rng.random() < 0.25:
        text = text.replace("\n", "\r\n")
    if rng.random() < 0.2:
        text = text.rstrip("\r\n")
    return text


def outcome(call: Callable[[], plan.Change]) -> tuple[Any, ...]:
    try:
        return ("ok", call())
    except MossError as err:
        return ("error", type(err).__name__, err.code, err.message, err.path, err.line, err.details, err.hint)


def refs_for(text: str, rng: random.Random) -> list[str | None]:
    try:
        tasks = plan.parse_plan(text).tasks
    except MossError:
        return ["o1", "1", None]
    refs: list[str | None] = [None, "o1", "o2", "c3", "missing", "1", str(len(tasks)), str(len(tasks) + 1), "Open", "finished item"]
    for task in rng.sample(tasks, min(6, len(tasks))):
        refs += [task.id, str(task.number), task.title, task.title[:4]]
    return refs


SEEDS = range(160)


@pytest.mark.parametrize("seed", SEEDS)
def test_transition_on_condensed_plan_equals_the_full_plan(seed: int) -> None:
    text = generated(seed)
    rng = random.Random(seed)
    for ref in refs_for(text, rng):
        for action in plan.ACTIONS:
            reason = rng.choice([None, "shipped", "waiting | on"])
            fast = outcome(lambda: plan.transition(text, action, ref, TODAY, reason=reason, path="PLAN.md"))
            full = outcome(lambda: plan._transition_full(text, action, ref, TODAY, reason=reason, path="PLAN.md"))
            assert fast == full, (seed, action, ref, reason)


@pytest.mark.parametrize("seed", SEEDS)
def test_addition_on_condensed_plan_equals_the_full_plan(seed: int) -> None:
    text = generated(seed)
    rng = random.Random(seed)
    specs = ["P1: New work #billing", "P2: New (id: n1, depends: o1)", "Child (parent: o2)", "P9: too low", "- [ ] marked", "x (id: c5)"]
    for spec in specs:
        for options in (
            {},
            {"ident": "o1"},
            {"ident": "fresh"},
            {"depends": ["c4"]},
            {"parent": "o1"},
            {"section": rng.choice(["backlog-bugs", "backlog", "tasks"])},
        ):
            fast = outcome(lambda: plan.add_task(text, spec, TODAY, path="PLAN.md", **options))
            full = outcome(lambda: plan._add_task_full(text, spec, TODAY, path="PLAN.md", **options))
            assert fast == full, (seed, spec, options)


def full_start_notes(made: plan.Change) -> tuple[list[str], list[dict[str, Any]]]:
    """What `start_notes` must answer: asked of the whole parsed plan the start wrote."""
    whole = plan.parse_plan(made.text, "PLAN.md")
    return [dep.id for dep in plan.dependencies(whole, made.task) if not dep.met], plan.also_in_progress(whole, made.task)


@pytest.mark.parametrize("seed", SEEDS)
def test_start_notes_on_condensed_plan_equal_the_full_plan(seed: int) -> None:
    text = generated(seed)
    rng = random.Random(seed)
    for ref in refs_for(text, rng):
        try:
            made = plan.transition(text, "start", ref, TODAY, path="PLAN.md")
        except MossError:
            continue
        assert plan.start_notes(made.text, made.task, "PLAN.md") == full_start_notes(made), (seed, ref)


def test_start_notes_of_a_long_plan_find_dependencies_and_other_work_behind_condensed_runs() -> None:
    """Dependencies on finished, open and unknown ids, and tasks in progress after thousands of
    closed ones (their numbers and lines those of the whole file)."""
    closed = "".join(f"- [x] Finished {n} (id: c{n}) | closed: 2025-01-01\n" for n in range(3000))
    text = (
        "# Plan\n\n## Tasks\n\n- [ ] Next (id: next, depends: c10, c2999, ghost, open1)\n- [ ] Open one (id: open1)\n- [>] Early\n"
        f"\n## Completed\n\n{closed}\n## Backlog\n\n- [>] Late one\n  - [>] Late subtask\n"
    )
    made = plan.transition(text, "start", "next", TODAY, path="PLAN.md")
    assert plan._condense(made.text, made.task.depends, "PLAN.md") is not None
    unmet, others = plan.start_notes(made.text, made.task, "PLAN.md")
    assert (unmet, others) == full_start_notes(made)
    assert unmet == ["ghost", "open1"]
    assert [(other["title"], other["number"]) for other in others] == [("Early", 3), ("Late one", 3004), ("Late subtask", 3005)]


def test_generated_plans_are_condensed() -> None:
    """The comparisons above test the condensed path, not only its fallback: many generated
    plans do condense for a transition by id."""
    condensed = sum(1 for seed in SEEDS if _condensed(generated(seed)))
    assert condensed >= len(SEEDS) // 4


def _condensed(text: str) -> bool:
    try:
        return plan._condense(text, ("o1",), None) is not None
    except MossError:
        return False


def test_condensed_long_plan_done_keeps_every_other_byte() -> None:
    """A year of closed tasks: `done` moves one line and changes nothing else, as the full run."""
    closed = "".join(f"- [x] Finished {n} (id: c{n}) | closed: 2025-01-01\n" for n in range(3000))
    text = f"# Plan\n\n## Tasks\n\n- [ ] Now (id: now)\n\n## Completed\n\n{closed}\n## Closed\n\n- [~] Dropped | closed: 2025-01-01\n"
    assert plan._condense(text, ("now",), None) is not None
    made = plan.transition(text, "done", "now", TODAY)
    assert made == plan._transition_full(text, "done", "now", TODAY)
    assert made.task.number == 3001 and made.task.line == 3008
    assert made.text == text.replace("- [ ] Now (id: now)\n", "").replace(closed, closed + "- [x] Now (id: now) | closed: 2026-01-21 | modified: 2026-01-21\n")


@pytest.mark.parametrize(
    "hazard",
    [
        "<<<<<<< ours\n- [ ] Ours (id: ours)\n=======\n- [ ] Theirs (id: theirs)\n>>>>>>> theirs\n",
        "```\n<<<<<<< not a marker in code\n```\n",
    ],
)
def test_a_long_plan_with_conflict_markers_errs_or_edits_as_the_full_plan(hazard: str) -> None:
    """_condense finds the frontmatter by splitting alone; the markers are the edit's parse's
    to find, as the full plan's parse finds them."""
    closed = "".join(f"- [x] Finished {n} (id: c{n}) | closed: 2025-01-01\n" for n in range(300))
    for front in ("", "---\nowner: me\n---\n"):
        text = f"{front}# Plan\n\n## Tasks\n\n- [ ] Now (id: now)\n{hazard}\n## Completed\n\n{closed}\n## Closed\n"
        assert plan._condense(text, ("now",), "PLAN.md") is not None
        for action in ("start", "done"):
            fast = outcome(lambda: plan.transition(text, action, "now", TODAY, path="PLAN.md"))
            assert fast == outcome(lambda: plan._transition_full(text, action, "now", TODAY, path="PLAN.md"))
        added = outcome(lambda: plan.add_task(text, "P1: New", TODAY, path="PLAN.md"))
        assert added == outcome(lambda: plan._add_task_full(text, "P1: New", TODAY, path="PLAN.md"))
        assert (added[0] == "error") == hazard.startswith("<<<")


def reference_hidden(lines: list[str], first: int) -> list[bool]:
    """Which lines are hidden, line by line: the plain reading `markdown.hidden_lines` must equal."""
    hidden: list[bool] = []
    in_comment = in_fence = False
    for index, line in enumerate(lines):
        content = markdown.strip_ending(line)
        fence = re.match(markdown._FENCE, content) is not None
        if index < first:
            hidden.append(True)
        elif in_fence:
            hidden.append(True)
            in_fence = not fence
        elif in_comment:
            hidden.append(True)
            in_comment = markdown._still_in_comment(content, 0)
        elif fence:
            hidden.append(True)
            in_fence = True
        else:
            opening = content.find("<!--")
            if opening >= 0:
                in_comment = markdown._still_in_comment(content, opening + 4)
            hidden.append(opening >= 0 and content.lstrip().startswith("<!--"))
    return hidden


TRICKY = [
    "a <!-- b\nc\nd --> e <!-- f\ng -->\n- [x] after\n",
    "<!-->\nx\n-->\n",
    "```\n<!--\n```\nvisible\n~~~\n```\n~~~\n",
    "   ```py\ncode\n    ```\nstill code\n```\n",
    "<!-- one --> <!-- two\nhidden\n--> after\n",
    "no end <!--\n" + "x\n" * 5,
    "---\ntitle: x\n---\n<!-- c -->\nbody\n",
    "<!---->\n-->\n>\n->\n--\n>--> ~~ ~~~~\n`` ```\n",
    "~" * 400 + "\n<!--\n" + "`" * 300 + "\n-->\nafter\n",  # marks' characters everywhere: the regular expression's search
]


@pytest.mark.parametrize("seed", range(60))
def test_hidden_lines_equal_the_line_by_line_reading(seed: int) -> None:
    for text in [generated(seed), *TRICKY]:
        lines = markdown.split_lines(text)
        for first in (0, 1, 3):
            assert markdown.hidden_lines(lines, first) == reference_hidden(lines, first), (seed, first)
            marks = [index for index, line in enumerate(lines) if index >= first and any(mark in line for mark in ("<!--", "-->", "```", "~~~"))]
            assert markdown.hiding(lines, first) == (reference_hidden(lines, first), marks), (seed, first)
            starts = [0, *accumulate(map(len, lines))]
            assert markdown.hiding(lines, first, joined=(text, starts)) == (reference_hidden(lines, first), marks), (seed, first)


# The reference for plan._candidate_blocks: the one regular expression for whole blocks that
# _condense ran over the text before issue 29's round (every character of the text stepped through).
REFERENCE_BLOCK = re.compile(r"^(?:[-*+][ \t]+\[[xX~]\][ \t]+[^\s(_*\-\u2014\u2013][^\n]{6,}\n)+", re.MULTILINE)


def reference_blocks(text: str, begin: int) -> list[tuple[int, int]]:
    lines = markdown.split_lines(text)
    starts = [0, *accumulate(map(len, lines))]
    found = []
    for block in REFERENCE_BLOCK.finditer(text, starts[begin] if begin < len(starts) else len(text)):
        first = bisect_left(starts, block.start())
        found.append((first, first + text.count("\n", block.start(), block.end()) - 1))
    return found


BLOCK_EDGES = [
    "- [x] Seven!\n- [x] Sixsix\n- [X] Done item\n* [~] Dropped item\n+ [x]\tTabbed item\n",
    "- [x] Finished work\r\n- [x] Finished more\r\n- [x] Last without end",
    "- [x] Finished work\n- [x] Finished more\n- [x] Last with end\n",
    "  - [x] Indented work\n- [x] (parenthesised)\n- [x] _italic placeholder_\n- [x] — dash\n- [x] *bold*\n",
    "- [x]  Two spaces here\n- [x] \u00e9l\u00e8ve fini\n- [ ] Open one here\n- [>] Started one\n- [x] Again done\n",
    "- [x] \u2013 en dash\n-[x] No space\n- [xx] Odd marker\n- [x]Nospace\n\n- [x] After blank\n",
]


@pytest.mark.parametrize("seed", range(40))
def test_candidate_blocks_equal_the_block_regex(seed: int) -> None:
    """plan._candidate_blocks (each line's start tested, runs found in the flags) finds the blocks
    the regular expression over the whole text found, from any first line."""
    for text in [generated(seed), *BLOCK_EDGES, *TRICKY]:
        lines = markdown.split_lines(text)
        for begin in (0, 1, 2, len(lines) // 2, len(lines), len(lines) + 3):
            assert plan._candidate_blocks(lines, begin) == reference_blocks(text, begin), (seed, begin, text[:80])


def test_done_and_add_through_the_files_write_what_the_full_plan_writes(tmp_path: Path) -> None:
    """End to end on a real `.cstack/`: the bytes `cstack done` and `cstack add` leave in a long
    PLAN.md (CRLF, hand text, a comment) are those of the full parse's edit."""
    from datetime import UTC, datetime

    import cstack
    from moss_files.foundation.context import Context
    from moss_files.foundation.ids import fixed_clock

    closed = "".join(f"- [x] P2: Finished {n} #old (id: c{n}) | closed: 2025-01-01\r\n" for n in range(400))
    text = (
        "# Plan\r\n\r\n## Tasks\r\n\r\n<!-- - [ ] an example -->\r\n- [ ] Now (id: now)\r\n- [>] Other (id: other)\r\n"
        f"\r\nHand text.\r\n\r\n## Completed\r\n\r\n{closed}\r\n## Closed\r\n"
    )
    root = tmp_path / "project"
    (root / ".cstack").mkdir(parents=True)
    (root / ".cstack" / "PLAN.md").write_bytes(text.encode())
    ctx = Context(root, clock=fixed_clock(datetime(2026, 1, 21, 12, tzinfo=UTC)))
    done = cstack.transition(ctx, action="done", task="now", reason="shipped")
    expected = plan._transition_full(text, "done", "now", TODAY, reason="shipped")
    assert (root / ".cstack" / "PLAN.md").read_bytes() == expected.text.encode()
    assert done["task"] == plan.task_to_dict(expected.task) and done["task"]["number"] == 402
    added = cstack.add_task(ctx, task="P1: Next #billing", ident="next")
    expected_add = plan._add_task_full(expected.text, "P1: Next #billing", TODAY, ident="next")
    assert (root / ".cstack" / "PLAN.md").read_bytes() == expected_add.text.encode()
    assert added["task"] == plan.task_to_dict(expected_add.task)


def _split_on_newlines(text: str) -> list[str]:
    """The reference for `markdown.split_lines`: split at each `\\n` alone, endings kept."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


_BREAKS_AND_TEXT = ["a", " ", "é", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "語"]


@given(st.lists(st.sampled_from(_BREAKS_AND_TEXT), max_size=60).map("".join))
@settings(max_examples=400, deadline=None)
def test_split_lines_breaks_at_newlines_alone(text: str) -> None:
    """`split_lines` takes `str.splitlines` only where it gives the same lines: a lone `\\r`,
    a form feed, U+2028 or any other break it knows leaves the split at `\\n` alone."""
    assert markdown.split_lines(text) == _split_on_newlines(text)
    assert "".join(markdown.split_lines(text)) == text


@pytest.mark.parametrize("text", ["", "\n", "a", "a\r\nb\r\n", "a\rb\n", "a\n\x0cb\n", "a\u2028b", "a\r", "\r\n\r\n\n"])
def test_split_lines_on_edge_texts(text: str) -> None:
    assert markdown.split_lines(text) == _split_on_newlines(text)

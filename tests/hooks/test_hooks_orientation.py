"""The hooks' pure core: the orientation within its budget, transcripts read as Claude Code
writes them, the `[hooks]` settings, the reminder, the mail line and the checkpoint note."""

from __future__ import annotations

import json

from moss_files.hooks import orientation
from moss_files.hooks.orientation import Checkpoint, Facts, HookSettings

CURRENT = {"exists": True, "task": "Card form", "status": "WIP", "focus": "validation", "next_steps": ["Write the checks", "Wire the API"], "blockers": []}


def test_parts_come_in_order_and_absent_parts_are_not_invented() -> None:
    text = orientation.render_orientation(Facts(current=CURRENT, ready=[], ready_total=0))
    lines = text.splitlines()
    assert lines[0] == "moss-files workspace, session starting. Where the work stands:"
    assert lines[1] == "Active task: Card form (WIP) — .cstack/CURRENT.md"
    assert "Next steps:" in lines and "  1. Write the checks" in lines and "Ready tasks: none (PLAN.md)" in lines
    assert not any(line.startswith(("Inbox", "Board", "Recent decisions", "Newest handoff")) for line in lines)
    assert lines[-1] == orientation.POINTERS
    bare = orientation.render_orientation(Facts())
    assert bare.splitlines() == ["moss-files workspace, session starting. Where the work stands:", orientation.POINTERS]


def test_the_budget_holds_for_any_amount_of_work() -> None:
    ready = [{"number": n, "priority": "P2", "title": "x" * 500, "id": f"t{n}"} for n in range(200)]
    inbox = {
        "unread": 90,
        "total": 100,
        "newest_unread": [{"key": f"m{n}", "message": {"from": "bob", "type": "task", "body": "word " * 400}} for n in range(3)],
    }
    facts = Facts(
        current={**CURRENT, "next_steps": ["step " * 100] * 40, "blockers": ["b " * 200] * 10},
        ready=ready[:5],
        ready_total=200,
        inbox=inbox,
        worker="dev",
        board=[{"id": f"TASK-{n}", "title": "t " * 200, "status": "WORKING"} for n in range(20)],
        decisions=[{"date": "2026-11-21", "text": "d " * 300}] * 3,
        capsule={"workspace": "default", "name": "auth", "title": "Auth", "updated": "2026-11-21T09:00:00Z"},
        checkpoint={"path": ".moss/checkpoints/CHK-1.md", "created": "2026-11-21T09:00:00Z", "trigger": "auto", "body": "line\n" * 500},
    )
    for tokens in (200, 800, 1500):
        text = orientation.render_orientation(facts, budget_tokens=tokens)
        assert orientation.estimate_tokens(text) <= tokens, tokens
        assert all(len(line) <= orientation.LINE_CHARS + 60 for line in text.splitlines() if line != orientation.POINTERS)
    small = orientation.render_orientation(facts, budget_tokens=200)
    assert "over the 200-token budget" in small and small.splitlines()[-1] == orientation.POINTERS


def test_a_compaction_brings_the_checkpoint_first() -> None:
    facts = Facts(
        source="compact",
        current=CURRENT,
        checkpoint={"path": ".moss/checkpoints/CHK-1.md", "created": "t", "trigger": "manual", "body": "Active task: X\n\n- src/a.py\n"},
    )
    lines = orientation.render_orientation(facts).splitlines()
    assert lines[0] == "moss-files workspace, session after a compaction. Where the work stands:"
    assert lines[1].startswith("Before the compaction (manual, t) a checkpoint was saved: .moss/checkpoints/CHK-1.md")
    assert lines[2:4] == ["  Active task: X", "  - src/a.py"]


def test_a_transcript_gives_the_last_prompts_and_the_files_edited() -> None:
    records = [
        {"type": "user", "message": {"role": "user", "content": "first"}},
        {"type": "user", "isMeta": True, "message": {"role": "user", "content": "a caveat the host adds"}},
        {"type": "user", "message": {"role": "user", "content": "<command-name>/clear</command-name>"}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "second, as blocks"}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "out"}]}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "name": "Edit", "input": {"file_path": "/p/src/a.py"}},
                    {"type": "tool_use", "name": "Bash", "input": {"command": "rm -rf /"}},
                    {"type": "tool_use", "name": "NotebookEdit", "input": {"notebook_path": "/p/nb.ipynb"}},
                    {"type": "tool_use", "name": "Edit", "input": {"file_path": "/p/src/a.py"}},
                    {"type": "tool_use", "name": "Write", "input": {"file_path": "/elsewhere/b.py"}},
                ],
            },
        },
        {"type": "user", "message": {"role": "user", "content": "third " * 200}},
    ]
    lines = [json.dumps(record) for record in records] + ["not json", "[1, 2]", '{"type": "user"}']
    found = orientation.parse_transcript(lines, root="/p", prompts=3)
    assert found.prompts[:2] == ("first", "second, as blocks") and found.prompts[2].startswith("third third")
    assert len(found.prompts[2]) <= orientation.PROMPT_CHARS
    assert found.files == ("nb.ipynb", "src/a.py", "/elsewhere/b.py")  # newest last, relative to the project
    assert orientation.parse_transcript([], root="/p") == orientation.TranscriptFacts()


def test_settings_take_what_is_valid_and_say_what_is_not() -> None:
    assert orientation.parse_settings(None) == (HookSettings(), [])
    settings, problems = orientation.parse_settings({"stop": "continue", "worker": " dev ", "orientation_tokens": 900, "deadline_ms": 50, "mail": False})
    assert settings == HookSettings(stop="continue", worker="dev", orientation_tokens=900, deadline_ms=50, mail=False) and problems == []
    settings, problems = orientation.parse_settings({"stop": "shout", "checkpoint": "yes", "orientation_tokens": 5, "deadline_ms": True, "colour": 1})
    assert settings == HookSettings()
    assert len(problems) == 5 and problems[-1] == "unknown keys in [hooks]: colour"
    assert orientation.parse_settings(["x"]) == (HookSettings(), ["[hooks] is not a table"])


def test_the_reminder_and_the_mail_line() -> None:
    told = orientation.stop_reminder(["a.py", "b.py", "c.py", "d.py"], committed=True, ask=False)
    assert told.startswith("moss: this session changed a.py, b.py, c.py and 1 more and made commits, but .cstack/CURRENT.md")
    asked = orientation.stop_reminder([], committed=True, ask=True)
    assert asked.startswith("This session made commits, but .cstack/CURRENT.md was not updated.")
    assert orientation.is_code_path("src/x.py") and not orientation.is_code_path(".cstack/PLAN.md") and not orientation.is_code_path(".moss/x.md")
    line = orientation.mail_line(2, {"unread": 3, "newest_unread": [{"key": "m9", "message": {"from": "bob", "type": "task", "body": "\n\nDo it\nnow"}}]})
    assert (
        line
        == "moss: 2 new messages in the inbox since the last prompt (3 unread). Newest: m9 from bob [task]: Do it. Read: `needlecast inbox --unread` or needlecast.inbox."
    )


def test_a_checkpoint_note_lists_what_it_knows() -> None:
    point = Checkpoint(id="CHK-20261121-abcdefgh", created="2026-11-21T09:00:00Z", session="s1", trigger="auto", task="Card form", edited=("src/a.py",))
    meta = orientation.checkpoint_meta(point)
    assert list(meta) == ["id", "kind", "created", "session", "trigger", "task", "files"] and meta["files"] == ["src/a.py"]
    body = orientation.checkpoint_body(point)
    assert body.startswith("# Checkpoint before a compaction\n\n## In flight\n\nActive task: Card form\n")
    assert "## Files edited in this session\n\n- src/a.py\n" in body and "## The last prompts" not in body

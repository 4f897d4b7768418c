"""The hooks as Claude Code runs them: the command written into `.claude/settings.json`, run by a
shell in the project with the event's JSON on stdin and CLAUDE_PROJECT_DIR set; their stdout
checked against the shape each event's output takes (Codex reads the same shapes, with no
extra keys allowed)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli

from moss_files import scaffold
from moss_files.hooks.orientation import TOKEN_CHARS
from needlecast import mailbox
from needlecast.message import Message

NOW_MESSAGE = "2026-11-21T09:00:00Z"
# What each event's JSON output may hold (Codex's schemas allow nothing else; Claude Code's
# common fields are continue, stopReason, suppressOutput, systemMessage).
ALLOWED = {
    "SessionStart": {"continue", "stopReason", "suppressOutput", "systemMessage", "hookSpecificOutput"},
    "UserPromptSubmit": {"continue", "stopReason", "suppressOutput", "systemMessage", "hookSpecificOutput", "decision", "reason"},
    "PreCompact": {"continue", "stopReason", "suppressOutput", "systemMessage"},
    "Stop": {"continue", "stopReason", "suppressOutput", "systemMessage", "decision", "reason"},
}


def sh(root: Path, *args: str, input: str | None = None) -> str:
    done = run_cli(*args, cwd=root, input=input)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def project(repo: Path) -> Path:
    """A project set up for Claude Code, with a task in progress, ready tasks, a decision, a
    board task held by worker `dev`, and a handoff capsule."""
    scaffold.run(repo, parts=scaffold.PARTS, agents=("claude",), dry_run=False)
    (repo / ".moss" / "config.toml").write_text("[hooks]\ndeadline_ms = 600000\n")  # every part, however loaded the machine
    sh(repo, "cstack", "add", "P1: Card form #checkout")
    sh(repo, "cstack", "add", "P2: Refund flow", "--id", "refund")
    sh(repo, "cstack", "start", "1")
    sh(repo, "cstack", "remember", "Sessions live in cookies, not local storage", "--category", "decisions")
    epic = json.loads(sh(repo, "moss", "epic", "new", "Checkout", "--json"))["epic"]["id"]
    task = json.loads(sh(repo, "moss", "task", "new", "Build the card form", "--epic", epic, "--json"))["task"]["id"]
    sh(repo, "moss", "task", "status", task, "PLANNING")
    sh(repo, "moss", "task", "claim", "-w", "dev", "-s", "PLANNING")
    capsule = "## Objective\nA.\n\n## Current status\nB.\n\n## Decisions\n- C\n\n## Next actions\n- D\n\n## Key locations\n- E\n\n## Open questions\n- F\n"
    sh(repo, "moss", "store", "--name", "card-form", input=capsule)
    return repo


def deliver(root: Path, ident: str, body: str, sender: str = "bob") -> None:
    message = Message(id=ident, sender=sender, to=(root.name,), thread=None, type="question", time=NOW_MESSAGE, body=body)
    mailbox.deliver(mailbox.Mailbox(root), [message], __import__("datetime").datetime(2026, 11, 21, 9, 0, tzinfo=__import__("datetime").UTC))


def command_for(root: Path, host_event: str) -> str:
    settings = json.loads((root / ".claude" / "settings.json").read_text())
    (group,) = settings["hooks"][host_event]
    (hook,) = group["hooks"]
    assert hook["type"] == "command" and isinstance(hook["timeout"], int)
    return str(hook["command"])


def run_hook(
    root: Path, host_event: str, event: dict[str, Any], *, env: dict[str, str] | None = None, cwd: Path | None = None, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the settings' command for `host_event` as Claude Code does: `sh -c`, in the project,
    the event's JSON on stdin, CLAUDE_PROJECT_DIR set."""
    full = {"session_id": "session-1", "transcript_path": str(root / "transcript.jsonl"), "cwd": str(cwd or root), "hook_event_name": host_event, **event}
    environment = {**os.environ, "CLAUDE_PROJECT_DIR": str(root), "PATH": path if path is not None else f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    return subprocess.run(
        ["sh", "-c", command_for(root, host_event)],
        input=json.dumps(full),
        cwd=cwd or root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def output_of(done: subprocess.CompletedProcess[str], host_event: str) -> dict[str, Any] | None:
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return None
    data = json.loads(done.stdout)
    assert isinstance(data, dict) and set(data) <= ALLOWED[host_event], data
    specific = data.get("hookSpecificOutput")
    if specific is not None:
        assert set(specific) == {"hookEventName", "additionalContext"} and specific["hookEventName"] == host_event
        assert isinstance(specific["additionalContext"], str)
    return data


def context_of(data: dict[str, Any] | None) -> str:
    assert data is not None
    return str(data["hookSpecificOutput"]["additionalContext"])


@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact"])
def test_session_start_puts_the_orientation_in_front_of_the_agent(project: Path, source: str) -> None:
    deliver(project, "m-1", "Which endpoint does the form post to?\n\nSecond paragraph.\n")
    done = run_hook(project, "SessionStart", {"source": source, "model": "claude-sonnet"}, env={"MOE_WORKER_ID": "dev"}, cwd=project / ".cstack")
    text = context_of(output_of(done, "SessionStart"))
    assert "Active task: Card form (WIP)" in text
    assert "Ready tasks (PLAN.md): 1" in text and "Refund flow (id: refund)" in text
    assert "Inbox: 1 unread of 1" in text and "m-1 from bob [question]: Which endpoint does the form post to?" in text
    assert "Board: dev holds 1 task" in text and "[PLANNING] Build the card form" in text
    assert "Sessions live in cookies, not local storage" in text
    assert "Newest handoff capsule: default/card-form" in text
    assert "Not shown" not in text and len(text) <= 1500 * TOKEN_CHARS
    assert "moss search" in text  # pointers to expand


def test_the_orientation_stays_within_its_budget_and_names_what_it_left_out(project: Path) -> None:
    for number in range(60):
        sh(project, "cstack", "add", f"P2: Task number {number} with a long enough title to take room in the orientation #bulk")
    (project / ".moss" / "config.toml").write_text("[hooks]\ndeadline_ms = 600000\norientation_tokens = 200\n")
    text = context_of(output_of(run_hook(project, "SessionStart", {"source": "startup"}, env={"MOE_WORKER_ID": "dev"}), "SessionStart"))
    assert len(text) <= 200 * TOKEN_CHARS + 400  # the budget, and the pointers line
    assert "Active task: Card form" in text and "over the 200-token budget" in text
    # Past its deadline the orientation gives only the essentials, and says so.
    (project / ".moss" / "config.toml").write_text("[hooks]\ndeadline_ms = 0\n")
    quick = context_of(output_of(run_hook(project, "SessionStart", {"source": "startup"}, env={"MOE_WORKER_ID": "dev"}), "SessionStart"))
    assert "Active task: Card form" in quick and "ready tasks (out of time)" in quick and "Inbox" not in quick


def test_a_prompt_hears_of_mail_that_arrived_since_the_last_one(project: Path) -> None:
    assert output_of(run_hook(project, "SessionStart", {"source": "startup"}), "SessionStart") is not None
    assert output_of(run_hook(project, "UserPromptSubmit", {"prompt": "go on"}), "UserPromptSubmit") is None
    deliver(project, "m-2", "The API moved to /v2.\n")
    line = context_of(output_of(run_hook(project, "UserPromptSubmit", {"prompt": "and now?"}), "UserPromptSubmit"))
    assert line.startswith("moss: 1 new message in the inbox since the last prompt (1 unread).") and "m-2 from bob" in line
    assert "\n" not in line
    assert output_of(run_hook(project, "UserPromptSubmit", {"prompt": "again"}), "UserPromptSubmit") is None  # told once


def write_transcript(root: Path) -> None:
    """A transcript's lines as Claude Code writes them: the person's prompts, the assistant's
    tool uses (an edit of a file), tool results, and a line cut short."""
    lines = [
        {"type": "user", "message": {"role": "user", "content": "Build the card form with validation"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Editing the form."},
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Edit",
                        "input": {"file_path": str(root / "src" / "form.py"), "old_string": "a", "new_string": "b"},
                    },
                    {"type": "tool_use", "id": "t2", "name": "Write", "input": {"file_path": str(root / "src" / "checks.py"), "content": "x"}},
                ],
            },
        },
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}},
        {"type": "user", "message": {"role": "user", "content": "Now add the tests; token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 is the key"}},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + '\n{"type": "user", "message": {"role": "us'
    (root / "transcript.jsonl").write_text(text)


def test_pre_compact_writes_a_checkpoint_the_next_start_shows(project: Path) -> None:
    run_hook(project, "SessionStart", {"source": "startup"})
    write_transcript(project)
    (project / "src").mkdir()
    (project / "src" / "form.py").write_text("form\n")
    done = run_hook(project, "PreCompact", {"trigger": "auto", "custom_instructions": ""})
    data = output_of(done, "PreCompact")
    assert data is not None and data["systemMessage"].startswith("moss: checkpoint saved to .moss/checkpoints/CHK-")
    (note,) = (project / ".moss" / "checkpoints").glob("CHK-*.md")
    text = note.read_text()
    assert "moss_format: 2" in text and "kind: checkpoint" in text and "session: session-1" in text and "trigger: auto" in text
    assert "Active task: Card form" in text
    assert "- Build the card form with validation" in text and "- src/form.py" in text and "- src/checks.py" in text
    assert "sk-ant-api03" not in text and str(project) not in text  # no secrets, no machine paths in a tracked file
    assert "src/form.py" in text.split("## Uncommitted changes", 1)[1]
    after = context_of(output_of(run_hook(project, "SessionStart", {"source": "compact"}), "SessionStart"))
    assert after.startswith("moss-files workspace, session after a compaction.")
    assert f"a checkpoint was saved: .moss/checkpoints/{note.name}" in after and "Build the card form with validation" in after
    fresh = context_of(output_of(run_hook(project, "SessionStart", {"source": "startup", "session_id": "session-2"}), "SessionStart"))
    assert "checkpoint" not in fresh  # another session: not its checkpoint


def test_stop_reminds_once_when_code_changed_and_current_md_did_not(project: Path) -> None:
    run_hook(project, "SessionStart", {"source": "startup"})
    assert output_of(run_hook(project, "Stop", {"stop_hook_active": False}), "Stop") is None  # nothing changed yet
    (project / "app.py").write_text("print('hi')\n")
    reminded = output_of(run_hook(project, "Stop", {"stop_hook_active": False}), "Stop")
    assert reminded is not None and set(reminded) == {"systemMessage"} and "app.py" in reminded["systemMessage"]
    assert output_of(run_hook(project, "Stop", {"stop_hook_active": False}), "Stop") is None  # once for this state
    (project / "lib.py").write_text("x = 1\n")
    assert output_of(run_hook(project, "Stop", {"stop_hook_active": False}), "Stop") is not None  # more work since
    sh(project, "cstack", "done", "--reason", "form built")  # CURRENT.md follows
    (project / "lib.py").write_text("x = 2\n")
    assert output_of(run_hook(project, "Stop", {"stop_hook_active": False}), "Stop") is None


def commit(root: Path, message: str) -> None:
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", message], check=True)


def test_stop_can_ask_the_agent_to_continue_but_never_loops(project: Path) -> None:
    (project / ".moss" / "config.toml").write_text('[hooks]\ndeadline_ms = 600000\nstop = "continue"\n')
    commit(project, "the project as it was")
    run_hook(project, "SessionStart", {"source": "startup"})
    (project / "app.py").write_text("print('hi')\n")
    commit(project, "work")  # the session's work is committed: the tree is clean again
    asked = output_of(run_hook(project, "Stop", {"stop_hook_active": False}), "Stop")
    assert asked is not None and asked["decision"] == "block" and "CURRENT.md" in asked["reason"] and "made commits" in asked["reason"]
    (project / "more.py").write_text("y = 1\n")
    assert output_of(run_hook(project, "Stop", {"stop_hook_active": True}), "Stop") is None  # the host continues for us already
    (project / ".moss" / "config.toml").write_text('[hooks]\nstop = "off"\n')
    assert output_of(run_hook(project, "Stop", {"stop_hook_active": False}), "Stop") is None


def test_a_hook_never_fails_the_session(project: Path, tmp_path: Path) -> None:
    # No moss on the PATH the host gives its hooks: the settings' command is silent, status 0.
    bare = subprocess.run(["sh", "-c", command_for(project, "SessionStart")], input="{}", env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert bare.returncode == 0 and bare.stdout == "" and bare.stderr == ""
    # An event that is not JSON: nothing printed, status 0, the failure in the log.
    broken = subprocess.run(
        [str(BIN / "moss"), "hook", "session-start", "--json"], input="{not json", cwd=project, capture_output=True, text=True, env={**os.environ}
    )
    assert broken.returncode == 0 and broken.stdout == ""
    logged = [json.loads(line) for line in (project / ".moss" / "run" / "hooks.log").read_text().splitlines()]
    assert logged[-1]["hook"] == "session-start" and logged[-1]["error"] == "JSONDecodeError"
    # A broken CURRENT.md: that part is left out (and named), the rest still comes.
    (project / ".cstack" / "CURRENT.md").write_bytes(b"---\nstatus: [unclosed\n---\n# Current\n")
    text = context_of(output_of(run_hook(project, "SessionStart", {"source": "startup"}), "SessionStart"))
    assert "CURRENT.md (FRONTMATTER_SYNTAX)" in text and "Ready tasks" in text
    # Outside any workspace: nothing, status 0.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    lone = subprocess.run(
        [str(BIN / "moss"), "hook", "stop", "--json"], input="{}", cwd=outside, capture_output=True, text=True, env={**os.environ, "HOME": str(tmp_path)}
    )
    assert lone.returncode == 0 and lone.stdout == ""
    usage = run_cli("moss", "hook", "no-such-event", cwd=project)
    assert usage.returncode == 2


def test_without_json_a_person_reads_the_text(project: Path) -> None:
    done = run_cli("moss", "hook", "session-start", cwd=project, input=json.dumps({"source": "startup"}))
    assert done.returncode == 0 and done.stdout.startswith("moss-files workspace, session starting.")
    assert run_cli("moss", "hook", "session-start", "--help", cwd=project).returncode == 0


def test_a_workspace_without_moss_gets_no_new_folder(repo: Path, tmp_path: Path) -> None:
    assert run_cli("cstack", "init", cwd=repo).returncode == 0
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    first = subprocess.run(
        [str(BIN / "moss"), "hook", "session-start", "--json"], input='{"session_id": "s"}', cwd=repo, capture_output=True, text=True, env=env
    )
    assert first.returncode == 0 and "Active task: none" in json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"]
    assert not (repo / ".moss").exists()
    assert list((state / "moss-files" / "hooks").glob("*/s.json"))  # the session's state is the user's

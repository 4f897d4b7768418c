"""Agents launched by role (`moss agent run --role architect|worker|qa`): the roles' prompts and
claims (pure), and whole launches as real processes against the loopback Messages API and a
real `moss serve`: a board worked end to end (an architect plans, a person approves, a worker
does the steps, QA approves), nothing to claim, waiting for a task, a task left unfinished,
the gate in the way, and a server without the board's tools."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import (  # noqa: F401  (fixtures)
    FakeMessagesAPI,
    agent_env,
    anyio_workers_finish,
    api,
    make_workspace,
    read_events,
    text,
    tool,
    write_settings,
)
from conftest import BIN, run_cli

from moss_files.agent import launcher, roles, window
from moss_files.agent.model import Event
from moss_files.agent.settings import AgentSettings, LlmSettings, ServerSettings
from moss_files.foundation.errors import InvalidRequest

# --------------------------------------------------------------------------- pure parts


def test_roles_claim_their_own_column_and_a_bad_role_is_refused() -> None:
    assert [(name, role.column) for name, role in roles.ROLES.items()] == [("architect", "PLANNING"), ("worker", "WORKING"), ("qa", "REVIEW")]
    assert roles.role_named(" QA ").name == "qa"
    with pytest.raises(InvalidRequest) as caught:
        roles.role_named("governor")
    assert caught.value.details["roles"] == ["architect", "worker", "qa"]
    worker = roles.role_named("worker")
    assert roles.claim_arguments(worker, "worker-1a2b3c4d") == {"statuses": ["WORKING"], "workerId": "worker-1a2b3c4d"}
    assert roles.worker_id(worker, "1a2b3c4d") == "worker-1a2b3c4d"  # Moe's launcher: ROLE-<8 hex>
    assert roles.run_prompt(worker, "w", " mind the tests ").endswith("\n\nmind the tests")
    assert '"w"' in roles.system_prompt(worker, "w", auto_claim=True) and "moe.complete_task" in roles.system_prompt(worker, "w", auto_claim=True)
    assert "moe.claim_next_task" in roles.system_prompt(worker, "w", auto_claim=False)


def test_a_claims_answer_says_claimed_held_or_nothing() -> None:
    assert roles.read_claim({"hasNext": True, "task": {"id": "T1", "title": "a", "status": "WORKING"}}) == roles.Claim("claimed", "T1", "a", "WORKING")
    held = {"hasNext": False, "alreadyAssigned": {"taskId": "T2", "title": "b", "status": "AWAITING_APPROVAL"}}
    assert roles.read_claim(held) == roles.Claim("held", "T2", "b", "AWAITING_APPROVAL")
    assert roles.read_claim({"hasNext": False}).kind == "none" and roles.read_claim({"hasNext": True}).kind == "none"
    assert roles.parse_answer("[1]") is None and roles.parse_answer("not json") is None


def test_the_task_text_carries_the_context_capped() -> None:
    claim = roles.Claim("claimed", "T1", "Card form", "PLANNING")
    context = json.dumps({"task": {"id": "T1", "description": "x" * 20000}})
    shown = roles.task_text(roles.ROLES["architect"], "a-1", claim, {"nextAction": {"tool": "moe.submit_plan", "reason": "plan it"}}, context, resumed=False)
    assert "T1 \u201cCard form\u201d, PLANNING, held by a-1." in shown and "moe.submit_plan (plan it)" in shown
    assert len(shown) < roles.CONTEXT_CHARS + 1000 and "call moe.get_context for the rest" in shown
    assert "carry on" in roles.task_text(roles.ROLES["architect"], "a-1", claim, {}, "{}", resumed=True)


def test_a_role_run_serves_the_board_to_its_moss_servers_and_acts_for_its_worker() -> None:
    settings = AgentSettings(
        llm=LlmSettings(system_prompt="House rules."),
        servers=(
            ServerSettings("moss", command="moss", args=("serve",), tool_map="moss"),
            ServerSettings("chosen", command="moss", args=("serve", "--tools", "moss,moe"), tool_map="moss"),
            ServerSettings("shared", url="http://127.0.0.1:8765/mcp", tool_map="moss"),
            ServerSettings("files", command="files-server"),
        ),
    )
    adjusted = launcher.board_settings(settings, roles.ROLES["qa"], "qa-1", auto_claim=True)
    env = {server.name: dict(server.env) for server in adjusted.servers}
    assert env["moss"] == {"MOSS_MCP_TOOLS": "moe", "MOE_WORKER_ID": "qa-1"}
    assert env["chosen"] == {"MOE_WORKER_ID": "qa-1"}  # its own --tools stand
    assert env["shared"] == {} and env["files"] == {}  # a URL gets no environment; another server is not ours to change
    assert adjusted.llm.system_prompt.startswith("You work on this project's task board as the qa qa-1") and adjusted.llm.system_prompt.endswith("House rules.")


def test_the_history_gives_a_role_run_its_task_and_leaves_out_the_runtimes_calls() -> None:
    events = [
        Event("e1", "t", "run.started", "S", "R1", {"prompt": "[worker w] Take the next WORKING task"}),
        Event("e2", "t", "tool.requested", "S", "R1", {"call_id": "role-R1-1", "origin": "role", "name": "moss__moe_claim_next_task"}),
        Event("e3", "t", "tool.succeeded", "S", "R1", {"call_id": "role-R1-1", "origin": "role", "output": "{}"}),
        Event("e4", "t", "role.claimed", "S", "R1", {"task": "T1", "text": "## Your task"}),
        Event("e5", "t", "assistant.message", "S", "R1", {"content": [{"type": "text", "text": "Done."}]}),
    ]
    (turn,) = window.history_turns(events)
    assert turn == [
        window.user_text("[worker w] Take the next WORKING task\n\n## Your task"),
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]


# --------------------------------------------------------------------------- launches, as processes


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A project with this venv's `moss serve` as the agent's only server, registered as `shop`."""
    root = make_workspace(tmp_path / "shop")
    write_settings(root, demo=False)
    assert run_cli("moss", "projects", "add", str(root), "--name", "shop").returncode == 0
    return root


def moss(root: Path, *args: str) -> str:
    result = run_cli("moss", *args, cwd=root)
    assert result.returncode == 0, (args, result.stderr)
    return result.stdout.strip()


def new_task(root: Path, title: str, status: str = "planning") -> str:
    epic = moss(root, "epic", "new", "Checkout")
    return moss(root, "task", "new", title, "-e", epic, "--dod", "validates expiry", "-s", status)


def task_of(root: Path, task: str) -> dict[str, Any]:
    return json.loads(moss(root, "task", "show", task, "--json"))


def launch(api: FakeMessagesAPI, role: str, worker: str, *more: str, cwd: Path) -> tuple[int, dict[str, Any], str]:
    """`moss agent run --role ROLE --project shop --json` from `cwd`: (exit status, the JSON on
    stdout or the error body on stderr, stderr)."""
    result = run_cli("moss", "agent", "run", "--role", role, "--worker", worker, "--project", "shop", "--json", *more, cwd=cwd, env=agent_env(api))
    body = json.loads(result.stdout) if result.returncode == 0 else json.loads(result.stderr.strip().splitlines()[-1])
    return result.returncode, body, result.stderr


def role_calls(root: Path, session: str) -> list[tuple[str, str]]:
    """(tool, outcome) of the calls the runtime made itself in a session, in order."""
    events = [e for e in read_events(root) if e["session"] == session and e["data"].get("origin") == "role"]
    return [(e["data"]["tool"], e["kind"]) for e in events if e["kind"] in ("tool.succeeded", "tool.failed")]


@pytest.mark.slow
@pytest.mark.usefixtures("anyio_workers_finish")
def test_a_board_worked_end_to_end_by_agents_launched_by_role(shop: Path, tmp_path: Path, api: FakeMessagesAPI) -> None:
    task = new_task(shop, "Card form")
    elsewhere = tmp_path / "elsewhere"  # the project is named, not walked up to
    elsewhere.mkdir()
    steps = [{"description": "Build the card form with error handling"}, {"description": "Write a test for the expiry check"}]

    api.add(tool("moss__moe_submit_plan", {"taskId": task, "steps": steps}), text("Plan submitted: two steps."))
    code, architect, _err = launch(api, "architect", "architect-1", cwd=elsewhere)
    assert code == 0, architect
    assert architect["stopped"] == "idle" and [t["task"] for t in architect["tasks"]] == [task]
    assert [run["answer"] for run in architect["runs"]] == [
        "Plan submitted: two steps.",
        "No PLANNING task for architect-1 to claim; architect-1 left the board.",
    ]
    assert task_of(shop, task)["status"] == "AWAITING_APPROVAL"
    first = api.requests[0]["body"]
    assert "as the architect architect-1" in first["system"]
    prompt = first["messages"][0]["content"][0]["text"]
    assert prompt.startswith("[architect architect-1] Take the next PLANNING task") and f"{task} \u201cCard form\u201d, PLANNING" in prompt
    assert '"definitionOfDone"' in prompt  # moe.get_context's answer, read for the model
    assert {t["name"] for t in first["tools"]} >= {"moss__moe_submit_plan", "moss__moe_start_step"} and not any(
        t["name"].startswith("moss__moss_") for t in first["tools"]
    )  # the board's tool set only
    assert role_calls(shop, architect["session"]["id"]) == [
        ("moss.moe.claim_next_task", "tool.succeeded"),
        ("moss.moe.get_context", "tool.succeeded"),
        ("moss.moe.claim_next_task", "tool.succeeded"),  # holds its plan, waiting for approval
        ("moss.moe.release_task", "tool.succeeded"),
        ("moss.moe.claim_next_task", "tool.succeeded"),
        ("moss.moe.deregister_worker", "tool.succeeded"),
    ]

    assert moss(shop, "task", "approve", task)  # a person approves the plan
    assert task_of(shop, task)["status"] == "WORKING"

    verification = {"commands": [{"command": "pytest -q", "exitCode": 0}], "dod": [{"item": 1, "evidence": "test_expiry passes"}]}
    api.add(
        tool(
            "moss__moe_start_step",
            {"taskId": task, "stepId": "step-1"},
            more=[
                ("moss__moe_complete_step", {"taskId": task, "stepId": "step-1", "note": "form built"}),
                ("moss__moe_start_step", {"taskId": task, "stepId": "step-2"}),
                ("moss__moe_complete_step", {"taskId": task, "stepId": "step-2", "note": "test written"}),
                ("moss__moe_complete_task", {"taskId": task, "summary": "card form with an expiry check", "verification": verification}),
            ],
        ),
        text("Both steps done; the task is in REVIEW."),
    )
    code, worker, _err = launch(api, "worker", "worker-1", cwd=elsewhere)
    assert code == 0, worker
    assert worker["runs"][0]["status"] == "succeeded" and [c["outcome"] for c in worker["runs"][0]["tool_calls"]] == ["succeeded"] * 7
    after_work = task_of(shop, task)
    assert after_work["status"] == "REVIEW" and [step["status"] for step in after_work["implementationPlan"]] == ["COMPLETED", "COMPLETED"]

    api.add(tool("moss__moe_qa_approve", {"taskId": task, "summary": "expiry check shown by its test"}), text("Approved."))
    code, qa, _err = launch(api, "qa", "qa-1", cwd=elsewhere)
    assert code == 0, qa
    assert task_of(shop, task)["status"] == "DONE" and qa["tasks"][0]["status"] == "REVIEW"

    log = json.loads(moss(shop, "board", "log", "--task", task, "-n", "50", "--json"))["events"]
    claimed = [(e.get("workerId"), e.get("payload", {}).get("status")) for e in log if e["event"] == "TASK_CLAIMED"]
    assert sorted(claimed) == sorted([("architect-1", "PLANNING"), ("worker-1", "WORKING"), ("qa-1", "REVIEW")])
    workers = {w["id"]: w["status"] for w in json.loads(moss(shop, "worker", "list", "--json"))["workers"]}
    assert workers == {"architect-1": "DEAD", "worker-1": "DEAD", "qa-1": "DEAD"}  # each left the board
    sessions = json.loads(moss(shop, "agent", "sessions", "--json"))["sessions"]
    assert len(sessions) == 3 and all(s["runs"] == 2 for s in sessions)
    granted = [e for e in read_events(shop) if e["kind"] == "capability.granted" and e["data"].get("origin") == "role"]
    assert granted and all(e["data"]["scope"].endswith(".moss/board") for e in granted if e["data"]["capability"] == "fs_write")


@pytest.mark.slow
@pytest.mark.usefixtures("anyio_workers_finish")
def test_with_nothing_to_claim_the_agent_leaves_without_calling_the_model(shop: Path, api: FakeMessagesAPI) -> None:
    code, qa, _err = launch(api, "qa", "qa-7", cwd=shop)
    assert code == 0 and qa["stopped"] == "idle" and qa["tasks"] == [] and len(qa["runs"]) == 1
    assert qa["runs"][0]["steps"] == 0 and qa["runs"][0]["answer"].startswith("No REVIEW task for qa-7")
    assert api.requests == []
    idle = [e for e in read_events(shop) if e["kind"] == "role.idle"]
    assert idle[0]["data"]["statuses"] == ["REVIEW"] and idle[0]["data"]["waited_ms"] == 0


@pytest.mark.slow
@pytest.mark.usefixtures("anyio_workers_finish")
def test_waiting_for_a_task_then_stopping_after_max_tasks(shop: Path, api: FakeMessagesAPI) -> None:
    api.add(lambda body: tool("moss__moe_submit_plan", {"taskId": _task_in(body), "steps": [{"description": "Do it with error handling and a test"}]}))
    api.add(text("Planned."))
    child = subprocess.Popen(
        [str(BIN / "moss"), "agent", "run", "--role", "architect", "--worker", "architect-2", "--wait-for-task", "30", "--max-tasks", "1", "--json"],
        cwd=shop,
        env={**os.environ, **agent_env(api)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(e["kind"] == "tool.invoked" and e["data"]["tool"] == "moss.moe.wait_for_task" for e in events_so_far(shop)):
            assert child.poll() is None and time.monotonic() < deadline, child.stderr.read() if child.stderr else ""
            time.sleep(0.05)  # polling a condition, within the deadline above
        task = new_task(shop, "Late task")
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    result = json.loads(out)
    assert result["stopped"] == "max_tasks" and [t["task"] for t in result["tasks"]] == [task]
    assert [run["answer"] for run in result["runs"]][-1].startswith("architect-2 left the board")
    assert task_of(shop, task)["status"] == "AWAITING_APPROVAL"


def events_so_far(root: Path) -> list[dict[str, Any]]:
    """The events written so far while a run goes on (a line being written is left for the next look)."""
    events = []
    for path in sorted((root / ".moss" / "agent" / "sessions").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def _task_in(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"][0]["text"]
    return next(word for word in prompt.split() if word.startswith("TASK-"))


@pytest.mark.slow
@pytest.mark.usefixtures("anyio_workers_finish")
def test_a_task_left_unfinished_is_resumed_once_then_let_go(shop: Path, api: FakeMessagesAPI) -> None:
    task = new_task(shop, "Stubborn", status="working")
    api.add(text("I had a look."), text("Still looking."))
    code, error, _err = launch(api, "worker", "worker-9", cwd=shop)
    assert code == 9 and error["error"]["code"] == "TASK_UNFINISHED" and error["error"]["details"]["task"] == task
    assert len(api.requests) == 2
    second = api.requests[1]["body"]["messages"]
    assert "carry on" in second[-1]["content"][0]["text"] and second[0]["content"][0]["text"].startswith("[worker worker-9]")  # the first run is history
    shown = task_of(shop, task)
    assert shown["status"] == "WORKING" and shown["assignedWorkerId"] is None  # claimable by another agent
    claims = [e["data"]["resumed"] for e in read_events(shop) if e["kind"] == "role.claimed"]
    assert claims == [False, True]


@pytest.mark.slow
@pytest.mark.usefixtures("anyio_workers_finish")
def test_the_gate_stands_between_a_role_and_the_board(shop: Path, api: FakeMessagesAPI) -> None:
    write_settings(shop, '[policy]\ndeny_tools = ["*.moe.claim_next_task"]\n', demo=False)
    task = new_task(shop, "Guarded")
    code, error, _err = launch(api, "architect", "architect-3", cwd=shop)
    assert code == 9 and error["error"]["code"] == "TOOL_FAILED" and "CAPABILITY_DENIED" in error["error"]["message"]
    assert api.requests == [] and task_of(shop, task)["assignedWorkerId"] is None
    denied = [e for e in read_events(shop) if e["kind"] == "capability.denied"]
    assert denied and denied[0]["data"]["origin"] == "role" and denied[0]["data"]["rule"] == "policy.deny_tools"


@pytest.mark.slow
@pytest.mark.usefixtures("anyio_workers_finish")
def test_a_server_without_the_board_and_bad_options_are_refused(shop: Path, api: FakeMessagesAPI) -> None:
    settings = (shop / ".moss" / "agent.toml").read_text().replace('args = ["serve"]', 'args = ["serve", "--tools", "cstack"]')
    (shop / ".moss" / "agent.toml").write_text(settings)
    code, error, _err = launch(api, "worker", "worker-4", cwd=shop)
    assert code == 3 and error["error"]["code"] == "NOT_FOUND" and "moe.claim_next_task" in error["error"]["details"]["needed"]
    for args, status in ((("--role", "governor"), 2), (("--role", "qa", "--no-auto-claim"), 2), ((), 2)):
        result = run_cli("moss", "agent", "run", *args, "--json", cwd=shop, env=agent_env(api))
        assert result.returncode == status, (args, result.stderr)
        assert json.loads(result.stderr)["error"]["code"] == "INVALID_REQUEST"
    assert api.requests == []


@pytest.mark.slow
@pytest.mark.usefixtures("anyio_workers_finish")
def test_without_auto_claim_the_prompt_is_one_run_with_the_role(shop: Path, api: FakeMessagesAPI) -> None:
    new_task(shop, "Look at me")
    api.add(tool("moss__moe_list_tasks", {}), text("One task waits for planning."))
    code, result, _err = launch(api, "architect", "architect-5", "--no-auto-claim", "What waits for planning?", cwd=shop)
    assert code == 0 and result["stopped"] == "prompt" and result["tasks"] == [] and len(result["runs"]) == 1
    assert result["runs"][0]["prompt"] == "[architect architect-5] What waits for planning?"
    system = api.requests[0]["body"]["system"]
    assert "moe.claim_next_task" in json.dumps(system)  # told how to claim, not claimed for
    assert not [e for e in read_events(shop) if e["kind"].startswith(("tool.", "role.")) and e["data"].get("origin") == "role"]


@pytest.mark.slow
@pytest.mark.usefixtures("anyio_workers_finish")
def test_a_context_past_the_output_cap_reaches_the_model_cut(shop: Path, api: FakeMessagesAPI) -> None:
    write_settings(shop, demo=False, max_output_bytes=8000)
    task = new_task(shop, "Much discussed")
    for number in range(30):
        moss(shop, "task", "comment", task, f"comment {number}: " + "a long remark " * 12)
    api.add(text("Read it."))
    code, result, _err = launch(api, "architect", "architect-6", "--max-tasks", "1", cwd=shop)
    assert code == 0, result
    prompt = api.requests[0]["body"]["messages"][0]["content"][0]["text"]
    assert f"{task} \u201cMuch discussed\u201d" in prompt and "truncated" in prompt.lower()

"""Runs against a loopback Messages API and real MCP server processes: a plain answer, allowed
and denied tool calls, a hanging tool, a 1 MB output, the step limit, retries on 429/529/5xx and
a broken stream, history and the context budget, orientation and handoff, crash recovery, and
the API key that never reaches a file, an event or an error text."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import (  # noqa: F401  (fixtures)
    API_KEY,
    FakeMessagesAPI,
    agent_env,
    anyio_workers_finish,
    api,
    cut,
    error,
    files_under,
    make_workspace,
    read_events,
    text,
    tool,
    write_settings,
)
from conftest import BIN, run_cli

from moss_files.agent import service
from moss_files.foundation.context import Context
from moss_files.foundation.errors import AgentFailure, Conflict, InvalidRequest, MossError

pytestmark = pytest.mark.usefixtures("anyio_workers_finish")


def run(root: Path, prompt: str, fake: FakeMessagesAPI, **options: Any) -> dict[str, Any]:
    return service.run(Context(root), prompt, environ=agent_env(fake), **options)


def kinds(events: list[dict[str, Any]], run_id: str | None = None) -> list[str]:
    return [event["kind"] for event in events if run_id is None or event["run"] == run_id]


def of_kind(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["kind"] == kind]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "project")
    write_settings(
        root,
        '[policy]\nallow_tools = ["demo.echo", "demo.hang", "demo.big", "demo.count", "demo.fail"]\n\n'
        '[[policy.tools]]\ntool = "demo.fetch"\nneeds = ["net_http"]\nnet_http = ["url"]\n',
        moss=False,
    )
    return root


# --------------------------------------------------------------------------- answers and tools


def test_a_plain_answer(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(text("Hello there, the answer is 42."))
    result = run(ws, "What is the answer?", api)
    session, answer = result["session"], result["run"]
    assert answer["status"] == "succeeded" and answer["answer"] == "Hello there, the answer is 42."
    assert (answer["input_tokens"], answer["output_tokens"], answer["steps"]) == (100, 20, 1)
    assert answer["cost_usd"] == pytest.approx((100 * 2.0 + 20 * 10.0) / 1e6)  # claude-sonnet-5-5's list price
    assert session["runs"] == 1 and session["cost_usd"] == answer["cost_usd"] and session["status"] == "idle"
    events = read_events(ws)
    assert kinds(events) == ["session.created", "run.started", "capability.granted", "prompt.built", "assistant.message", "run.succeeded"]
    assert len({event["id"] for event in events}) == len(events) and all(event["session"] == session["id"] for event in events)
    assert all(event["run"] == answer["id"] for event in events[1:])
    granted = events[2]["data"]
    assert (granted["capability"], granted["scope"]) == ("secrets_read", "ANTHROPIC_API_KEY")  # reading the key is a decision too
    built = events[3]["data"]
    assert "prompt" not in built and "messages" in built and built["estimated_tokens"] > 0  # metadata only
    (request,) = api.requests
    assert request["path"] == "/v1/messages" and request["body"]["stream"] is True
    assert request["body"]["model"] == "claude-sonnet-5-5" and request["body"]["max_tokens"] == 4096
    assert request["body"]["messages"] == [{"role": "user", "content": [{"type": "text", "text": "What is the answer?"}]}]
    assert {t["name"] for t in request["body"]["tools"]} >= {"demo__echo", "demo__fetch"}
    assert request["headers"]["authorization"] == f"Bearer {API_KEY}" and API_KEY not in json.dumps(request["body"])
    text_of_file = (ws / session["path"]).read_text()
    assert f"## Run {answer['id']} · succeeded" in text_of_file and "> Hello there, the answer is 42." in text_of_file


def test_stream_deltas_are_logged_in_batches_not_per_token(ws: Path, api: FakeMessagesAPI) -> None:
    answer = " ".join(f"word{n}" for n in range(1200))  # about 8,000 characters in 1,200 stream events
    api.add(text(answer))
    run(ws, "talk a lot", api)
    events = read_events(ws)
    deltas = [e["data"]["text"] for e in of_kind(events, "assistant.delta")]
    assert 1 <= len(deltas) <= 20  # batches of about 2,000 characters (or one second), never one per token
    message = of_kind(events, "assistant.message")[0]["data"]["content"][0]["text"]
    assert message == answer and answer.startswith("".join(deltas))


def test_an_allowed_tool_call(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(tool("demo__echo", {"text": "hi"}, say="Let me check."), text("It said hi."))
    result = run(ws, "echo hi", api)
    events = read_events(ws)
    assert kinds(events)[-8:] == [
        "assistant.message",
        "tool.requested",
        "capability.granted",
        "tool.invoked",
        "tool.succeeded",
        "prompt.built",
        "assistant.message",
        "run.succeeded",
    ]
    call = of_kind(events, "tool.succeeded")[0]["data"]
    assert call["output"] == "echo: hi" and call["tool"] == "demo.echo" and not call["truncated"]
    assert of_kind(events, "capability.granted")[-1]["data"]["rule"] == "policy.allow_tools"
    second = api.requests[1]["body"]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[2]["content"][0]["type"] == "tool_result" and second[2]["content"][0]["content"] == "echo: hi"
    assert result["run"]["tool_calls"][0]["outcome"] == "succeeded" and result["run"]["steps"] == 2


def test_a_denied_tool_call_is_a_result_the_model_reads(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(tool("demo__fetch", {"url": "https://evilgithub.com/x"}), tool("demo__write_file", {"path": "a.txt"}), text("Understood."))
    result = run(ws, "fetch it", api)
    events = read_events(ws)
    denied = of_kind(events, "capability.denied")
    assert [d["data"]["rule"] for d in denied] == ["policy.allow_network", "policy.tools"]
    assert not of_kind(events, "tool.invoked")  # nothing reached the server
    failed = of_kind(events, "tool.failed")
    assert [f["data"]["code"] for f in failed] == ["CAPABILITY_DENIED", "CAPABILITY_DENIED"]
    seen = api.requests[1]["body"]["messages"][-1]["content"][0]
    assert seen["is_error"] is True and seen["content"].startswith("CAPABILITY_DENIED: demo.fetch is not allowed")
    assert result["run"]["status"] == "succeeded" and [t["outcome"] for t in result["run"]["tool_calls"]] == ["denied", "denied"]
    assert "denied 2" in (ws / result["session"]["path"]).read_text()


def test_a_hanging_tool_times_out_and_the_run_goes_on(ws: Path, api: FakeMessagesAPI) -> None:
    write_settings(ws, '[policy]\nallow_tools = ["demo.*"]\n', moss=False, timeout=1)
    api.add(tool("demo__hang", {}), text("It hung."))
    started = time.monotonic()
    result = run(ws, "wait for it", api)
    assert time.monotonic() - started < 20
    failed = of_kind(read_events(ws), "tool.failed")[0]["data"]
    assert failed["code"] == "TOOL_TIMEOUT" and failed["duration_ms"] >= 1000
    assert api.requests[1]["body"]["messages"][-1]["content"][0]["content"].startswith("TOOL_TIMEOUT")
    assert result["run"]["status"] == "succeeded"


def test_a_megabyte_of_output_is_cut_and_the_cut_is_logged(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(tool("demo__big", {"size": 1024 * 1024}), text("Big."))
    run(ws, "big", api)
    done = of_kind(read_events(ws), "tool.succeeded")[0]["data"]
    assert done["truncated"] is True and done["bytes"] == 1024 * 1024
    assert len(done["output"].encode()) <= 262144 + 100 and done["output"].endswith("[output truncated: 262144 of 1048576 bytes shown]")
    sent = api.requests[1]["body"]["messages"][-1]["content"][0]["content"]
    assert len(sent.encode()) <= 262144 + 100


def test_nine_tool_steps_fail_the_run_at_the_limit_and_the_session_stays_usable(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(*[tool("demo__echo", {"text": str(n)}) for n in range(9)])
    with pytest.raises(AgentFailure) as caught:
        run(ws, "loop forever", api)
    err = caught.value
    assert err.code == "STEP_LIMIT" and err.exit_code == 9 and {"session", "run"} <= set(err.details)
    events = read_events(ws)
    assert len(api.requests) == 9 and len(of_kind(events, "tool.succeeded")) == 8
    assert of_kind(events, "run.failed")[0]["data"]["code"] == "STEP_LIMIT"
    api.add(text("Still here."))
    again = run(ws, "are you there?", api, session=err.details["session"][:10])
    assert again["run"]["status"] == "succeeded" and again["session"]["runs"] == 2


@pytest.mark.parametrize(
    "failures",
    [
        [error(429, "rate_limit_error", headers={"retry-after": "0"})],
        [error(529, "overloaded_error"), error(500, "api_error"), error(503, "api_error")],
        [cut()],
    ],
)
def test_retries_on_429_529_5xx_and_a_broken_stream(ws: Path, api: FakeMessagesAPI, failures: list[Any]) -> None:
    api.add(*failures, text("Made it."))
    result = run(ws, "try hard", api)
    assert result["run"]["answer"] == "Made it." and len(api.requests) == len(failures) + 1
    retried = of_kind(read_events(ws), "model.retried")
    assert [r["data"]["attempt"] for r in retried] == list(range(1, len(failures) + 1))
    if failures[0].kind == "error":
        assert retried[0]["data"]["status"] == failures[0].status
    else:
        assert "broke off" in retried[0]["data"]["reason"]
    message = of_kind(read_events(ws), "assistant.message")[0]["data"]
    assert message["attempt"] == len(failures) + 1


def test_a_refused_request_fails_at_once_and_retries_run_out(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(error(400, "invalid_request_error"))
    with pytest.raises(AgentFailure) as refused:
        run(ws, "bad", api)
    assert refused.value.code == "MODEL_ERROR" and refused.value.details["status"] == 400 and len(api.requests) == 1
    api.add(*[error(529, "overloaded_error")] * 4)
    with pytest.raises(AgentFailure) as exhausted:
        run(ws, "busy", api)
    assert exhausted.value.code == "MODEL_ERROR" and len(api.requests) == 1 + 4  # retries = 3
    assert [e["data"]["code"] for e in of_kind(read_events(ws), "run.failed")] == ["MODEL_ERROR", "MODEL_ERROR"]


# --------------------------------------------------------------------------- sessions


def test_a_session_remembers_its_turns_and_drops_the_oldest_under_the_budget(tmp_path: Path, api: FakeMessagesAPI) -> None:
    root = make_workspace(tmp_path / "project")
    write_settings(root, "", moss=False, demo=False)
    api.add(text("first answer"))
    first = run(root, "first question", api)
    sid = first["session"]["id"]
    api.add(text("second answer"))
    run(root, "second question", api, session=sid)
    texts = [block.get("text") for m in api.requests[1]["body"]["messages"] for block in m["content"]]
    assert texts == ["first question", "first answer", "second question"]
    # A budget that holds only the newest turn: the first one is left out, the prompt never.
    config = (root / ".moss" / "agent.toml").read_text().replace("[llm]", "[llm]\nmax_context_tokens = 300")
    (root / ".moss" / "agent.toml").write_text(config)
    api.add(text("third answer"))
    run(root, "third question " + "z" * 300, api, session=sid)
    sent = [block.get("text") for m in api.requests[2]["body"]["messages"] for block in m["content"]]
    assert sent[0] != "first question" and sent[-1].startswith("third question")
    assert of_kind(read_events(root), "prompt.built")[-1]["data"]["turns_dropped"] >= 1


def test_the_api_key_never_reaches_a_file_an_event_or_an_error(ws: Path, api: FakeMessagesAPI) -> None:
    # The model echoes the key through a tool, and the API echoes it in an error body.
    api.add(tool("demo__echo", {"text": f"my key is {API_KEY}"}), text(f"The key was {API_KEY}."))
    run(ws, f"remember {API_KEY}", api)
    api.add(error(401, "authentication_error", message=f"invalid x-api-key {API_KEY}"))
    with pytest.raises(AgentFailure) as caught:
        run(ws, "again", api)
    assert API_KEY not in str(caught.value) and API_KEY not in json.dumps(caught.value.details)
    assert caught.value.hint and API_KEY not in caught.value.hint
    secret = API_KEY.encode()
    leaks = [path for path in files_under(ws) if secret in path.read_bytes()]
    assert leaks == []
    assert "[redacted]" in json.dumps(read_events(ws))
    assert all(API_KEY not in json.dumps(event) for event in read_events(ws))


def test_without_the_key_nothing_starts(ws: Path, api: FakeMessagesAPI) -> None:
    with pytest.raises(InvalidRequest) as missing:
        service.run(Context(ws), "hi", environ={"ANTHROPIC_BASE_URL": api.url})
    assert missing.value.code == "API_KEY_MISSING"
    (ws / ".moss" / "agent.toml").write_text((ws / ".moss" / "agent.toml").read_text() + "\n[secrets]\nkeys = []\n")
    with pytest.raises(Conflict) as denied:
        run(ws, "hi", api)
    assert denied.value.code == "CAPABILITY_DENIED"
    assert not (ws / ".moss" / "agent").exists() and api.requests == []


def test_a_crashed_run_is_recorded_by_the_next_one_and_a_torn_line_is_skipped(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(text("one"))
    first = run(ws, "first", api)
    sid = first["session"]["id"]
    log = ws / ".moss" / "agent" / "sessions" / f"{sid}.jsonl"
    # What a process killed in the middle of a run leaves: a started run and half a line.
    dead = {
        "id": "01JDEAD0000000000000000000",
        "ts": "2026-01-21T10:00:00.000Z",
        "kind": "run.started",
        "session": sid,
        "run": "01JDEADRUN0000000000000000",
        "data": {"prompt": "lost", "model": "m"},
    }
    with log.open("a") as handle:
        handle.write(json.dumps(dead) + "\n" + '{"id": "01JTORN", "ts": "2026-01-')
    listed = service.sessions(Context(ws))
    assert listed["sessions"][0]["id"] == sid
    logs = service.logs(Context(ws), session=sid)
    assert [p["code"] for p in logs["problems"]] == ["EVENT_LINE_INVALID"] and logs["problems"][0]["line"] > 1
    api.add(text("two"))
    run(ws, "second", api, session=sid)
    events = read_events_tolerant(log)
    interrupted = [e for e in events if e["kind"] == "run.failed" and e["run"] == dead["run"]]
    assert interrupted and interrupted[0]["data"]["code"] == "RUN_INTERRUPTED"
    assert service.logs(Context(ws), session=sid)["problems"][0]["code"] == "EVENT_LINE_INVALID"  # still reported, still skipped
    text_of_file = (ws / ".moss" / "agent" / "sessions" / f"{sid}.md").read_text()
    assert "## Run 01JDEADRUN0000000000000000 · failed" in text_of_file and "RUN_INTERRUPTED" in text_of_file
    assert service.sessions(Context(ws))["sessions"][0]["runs"] == 3


def read_events_tolerant(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def test_logs_by_session_run_prefix_and_kind(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(tool("demo__fetch", {"url": "https://x.org"}), text("a"), text("b"))
    first = run(ws, "one", api)
    sid, rid = first["session"]["id"], first["run"]["id"]
    run(ws, "two", api, session=sid)
    by_run = service.logs(Context(ws), run=rid[:12])
    assert by_run["run"] == rid and {e["run"] for e in by_run["events"]} == {rid}
    denied = service.logs(Context(ws), session=sid[:12], kinds=["capability.denied", "tool.failed"])
    assert [e["kind"] for e in denied["events"]] == ["capability.denied", "tool.failed"]
    assert [e["kind"] for e in service.logs(Context(ws), session=sid, kinds=["run"])["events"]].count("run.succeeded") == 2
    with pytest.raises(InvalidRequest):
        service.logs(Context(ws), session=sid, run=rid)
    with pytest.raises(InvalidRequest):
        service.logs(Context(ws), session=sid, kinds=["nonsense"])
    # Two sessions whose ids share a prefix: the prefix is refused with both listed.
    api.add(text("c"))
    other = run(ws, "three", api)["session"]["id"]
    common = os.path.commonprefix([sid, other])
    with pytest.raises(InvalidRequest) as ambiguous:
        service.logs(Context(ws), session=common)
    assert ambiguous.value.code == "AMBIGUOUS_ADDRESSING" and set(ambiguous.value.details["candidates"]) == {sid, other}
    with pytest.raises(MossError) as missing:
        service.logs(Context(ws), session="ZZZZ")
    assert missing.value.code == "NOT_FOUND"


# --------------------------------------------------------------------------- this toolkit's own server


def test_orientation_at_the_start_and_a_handoff_at_the_end(tmp_path: Path, api: FakeMessagesAPI) -> None:
    root = make_workspace(tmp_path / "project")
    write_settings(root, "", orient=True, demo=False)
    capsule = "## Objective\nShip login.\n\n## Current status\nForm done.\n\n## Decisions\n- cookies\n\n## Next actions\n- tests\n\n## Key locations\n- src/\n\n## Open questions\n- none\n"
    stored = run_cli("moss", "store", "--name", "handoff", "--text", capsule, cwd=root)
    assert stored.returncode == 0, stored.stderr
    handoff_capsule = capsule.replace("Form done.", "Login shipped.")
    api.add(
        text("I see the login work."),
        tool("moss__moss_store", {"name": "handoff-2", "capsule_text": handoff_capsule}),
        tool("moss__cstack_remember", {"text": "Sessions live in cookies.", "category": "decisions"}),
        text("Stored the handoff and a memory entry."),
    )
    result = run(root, "where are we?", api, handoff=True)
    system = api.requests[0]["body"]["system"]
    assert "Where things stand" in system and "Ship login." in system and "cstack status" in system
    events = read_events(root)
    oriented = of_kind(events, "session.oriented")[0]["data"]
    assert [s["ok"] for s in oriented["sources"]] == [True, True, True]
    assert {e["data"]["tool"] for e in of_kind(events, "tool.succeeded") if e["data"].get("origin") == "orient"} == {
        "moss.moss.latest",
        "moss.cstack.status",
        "moss.needlecast.inbox",
    }
    handoff = result["handoff_run"]
    assert handoff["origin"] == "handoff" and handoff["status"] == "succeeded" and "moss.store" in api.requests[1]["body"]["messages"][-1]["content"][0]["text"]
    assert len(of_kind(events, "session.oriented")) == 1  # a session is oriented once; later runs reuse it
    assert "Sessions live in cookies." in (root / ".cstack" / "MEMORY.md").read_text()
    listed = json.loads(run_cli("moss", "list", "--json", cwd=root).stdout)
    assert {item["name"] for item in listed["items"]} >= {"handoff", "handoff-2"}
    # The server's audit log names the same session and runs.
    audit = [json.loads(line) for path in (root / ".moss" / "audit").glob("*.jsonl") for line in path.read_text().splitlines()]
    assert {line["session"] for line in audit} == {result["session"]["id"]}
    assert {line["run"] for line in audit} == {result["run"]["id"], handoff["id"]}
    assert all(line["data"]["client"]["name"] == "moss-agent" for line in audit)


def test_the_purge_tool_is_denied_by_default(tmp_path: Path, api: FakeMessagesAPI) -> None:
    root = make_workspace(tmp_path / "project")
    write_settings(root, "", demo=False)
    api.add(tool("moss__moss_purge", {}), text("ok"))
    run(root, "purge", api)
    denied = of_kind(read_events(root), "capability.denied")[0]["data"]
    assert denied["rule"] == "policy.deny_tools" and denied["tool"] == "moss.moss.purge"


# --------------------------------------------------------------------------- the command


def test_moss_agent_run_from_the_command_line(ws: Path, api: FakeMessagesAPI) -> None:
    api.add(text("Streaming words to you."))
    shown = run_cli("moss", "agent", "run", "talk", cwd=ws, env=agent_env(api))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("Streaming words to you.") and "succeeded" in shown.stderr and "$0.0004" in shown.stderr
    api.add(text("JSON now."))
    as_json = run_cli("moss", "agent", "run", "talk", "--json", cwd=ws, env=agent_env(api))
    data = json.loads(as_json.stdout)
    assert set(data) == {"session", "run", "handoff_run"} and data["run"]["answer"] == "JSON now."
    api.add(error(400, "invalid_request_error"))
    failed = run_cli("moss", "agent", "run", "fail", "--json", "--session", data["session"]["id"], cwd=ws, env=agent_env(api))
    assert failed.returncode == 9 and failed.stdout == ""
    body = json.loads(failed.stderr.strip().splitlines()[-1])
    assert body["error"]["code"] == "MODEL_ERROR" and body["error"]["details"]["session"] == data["session"]["id"]
    missing = run_cli("moss", "agent", "run", "x", cwd=ws, env={"ANTHROPIC_API_KEY": ""})
    assert missing.returncode == 2 and "API_KEY_MISSING" in missing.stderr


def test_ctrl_c_during_a_run_records_it_as_cancelled(ws: Path) -> None:
    from agent_support import hang
    from helpers import wait_for

    with (
        FakeMessagesAPI([hang()]) as fake,
        subprocess.Popen(
            [str(BIN / "moss"), "agent", "run", "wait", "--json"],
            cwd=ws,
            env={**os.environ, **agent_env(fake)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as process,
    ):
        try:
            fake.wait_requests(1)
            process.send_signal(2)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 130, err
    failed = wait_for(lambda: of_kind(read_events(ws), "run.failed"), message="run.failed")
    assert failed[0]["data"]["code"] == "RUN_CANCELLED"
    assert service.sessions(Context(ws))["sessions"][0]["status"] == "idle"

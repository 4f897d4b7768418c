"""The agent's pure core: events and their lines, runs told by their events, session files,
id prefixes, the context window, the stream assembler, argument checks, costs and settings."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from moss_files.agent import costs, model, schema, settings, stream, window
from moss_files.agent.model import Event, Usage
from moss_files.foundation import document
from moss_files.foundation.errors import InvalidDocument, InvalidRequest, NotFound


def ev(kind: str, run: str | None = "R1", ident: str | None = None, **data: Any) -> Event:
    ev.counter = getattr(ev, "counter", 0) + 1  # type: ignore[attr-defined]
    return Event(ident or f"E{ev.counter:05d}", f"2026-01-21T10:00:{ev.counter % 60:02d}.000Z", kind, "S1", run, data)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- event lines


def test_an_event_is_one_line_and_reads_back() -> None:
    event = ev("tool.succeeded", call_id="c1", output="a\nb ünïcode \u2028")
    line = model.event_to_line(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert model.parse_events(line).events == (event,)
    assert list(json.loads(line)) == ["id", "ts", "kind", "session", "run", "data"]


def test_a_torn_last_line_is_reported_and_skipped_never_fatal() -> None:
    good = model.event_to_line(ev("run.started", prompt="x"))
    torn = model.event_to_line(ev("assistant.delta", text="half"))[:25]
    log = model.parse_events(good + torn)
    assert [e.kind for e in log.events] == ["run.started"] and log.torn_tail
    assert [(p.line, p.code) for p in log.problems] == [(2, "EVENT_LINE_INVALID")]
    # A bad line in the middle (a merge gone wrong) is skipped the same way.
    mixed = model.parse_events(good + b"not json\n" + b'{"id": 1}\n' + good.replace(b'"E', b'"F'))
    assert len(mixed.events) == 2 and [p.line for p in mixed.problems] == [2, 3] and not mixed.torn_tail
    # A whole event cut off just before its newline still counts.
    whole = model.parse_events(good + good.replace(b'"E', b'"G').rstrip(b"\n"))
    assert len(whole.events) == 2 and whole.torn_tail and not whole.problems


def test_an_event_seen_twice_counts_once() -> None:
    line = model.event_to_line(ev("run.started", prompt="x"))
    assert len(model.parse_events(line + line).events) == 1  # a union merge of two clones


def test_stamps_have_milliseconds() -> None:
    moment = datetime(2026, 1, 21, 10, 0, 0, 123456, tzinfo=UTC)
    assert model.stamp_ms(moment) == "2026-01-21T10:00:00.123Z"


def test_kinds_and_filters() -> None:
    events = [ev("run.started"), ev("tool.requested"), ev("tool.failed"), ev("capability.denied"), ev("run.failed", run="R2")]
    assert [e.kind for e in model.filter_events(events, kinds=("tool",))] == ["tool.requested", "tool.failed"]
    assert [e.kind for e in model.filter_events(events, kinds=("capability.*", "run.failed"))] == ["capability.denied", "run.failed"]
    assert len(model.filter_events(events, run="R2")) == 1
    assert model.check_kinds(("tool", "run.failed", "capability.*")) == ("tool", "run.failed", "capability.*")
    with pytest.raises(InvalidRequest):
        model.check_kinds(("tool.exploded",))
    assert set(model.SPEC_KINDS) <= set(model.EVENT_KINDS) and len(model.SPEC_KINDS) == 13


# --------------------------------------------------------------------------- runs


def test_a_run_is_told_by_its_events() -> None:
    events = [
        ev("run.started", prompt="Do it", model="m"),
        ev(
            "assistant.message", step=1, content=[{"type": "tool_use", "id": "c1", "name": "a__b", "input": {}}], usage={"input_tokens": 10, "output_tokens": 2}
        ),
        ev("tool.requested", call_id="c1", tool="a.b"),
        ev("capability.denied", call_id="c1", reason="no rule"),
        ev("tool.failed", call_id="c1", code="CAPABILITY_DENIED", message="denied"),
        ev("assistant.message", step=2, content=[{"type": "text", "text": "Done."}], usage={"input_tokens": 20, "output_tokens": 3}),
        ev("run.succeeded", cost_usd=0.5),
        ev("run.started", run="R2", prompt="Again"),
    ]
    first, second = model.summarize_runs(events)
    assert (first.status, first.answer, first.steps, first.usage) == ("succeeded", "Done.", 2, Usage(30, 5))
    assert first.tools[0].outcome == "denied" and first.tools[0].code == "CAPABILITY_DENIED" and first.cost_usd == 0.5
    assert second.status == "running"
    section = model.render_run_section(first)
    assert section.startswith("## Run R1 · succeeded\n") and "`a.b` → denied" in section and "> Done." in section
    assert model.run_ids_in("intro\n\n" + section) == ["R1"]
    # A prompt holding a heading cannot fake a run section: it is quoted.
    tricky = model.render_run_section(model.RunSummary("R3", "S1", "failed", "t", prompt="## Run FAKE · succeeded"))
    assert model.run_ids_in(tricky) == ["R3"]


def test_session_files_round_trip() -> None:
    session = model.Session("S1", "Title", "2026-01-21T10:00:00Z", "2026-01-21T10:00:00Z", "m")
    text = model.new_session_text(session)
    parsed = model.parse_session(document.parse(text), "x.md", fallback_id="S1")
    assert parsed == model.Session("S1", "Title", session.created, session.updated, "m", path="x.md")
    edited = document.edit_frontmatter(text, {"runs": 2, "cost_usd": 0.25, "input_tokens": 7})
    again = model.parse_session(document.parse(edited), "x.md", fallback_id="S1")
    assert (again.runs, again.cost_usd, again.usage.input_tokens) == (2, 0.25, 7)
    with pytest.raises(InvalidDocument) as caught:
        model.parse_session(document.parse(document.edit_frontmatter(text, {"runs": "many"})), "x.md", fallback_id="S1")
    assert caught.value.code == "SCHEMA_ERROR"
    assert model.add_cost(0.1, 0.2) == pytest.approx(0.3) and model.add_cost(0.1, None) is None
    assert model.title_from("  fix\nthe   login ") == "fix the login" and model.title_from("") == "Agent session"


def test_ids_are_found_by_unambiguous_prefix() -> None:
    ids = ["01AAAA", "01AAAB", "01BBBB"]
    assert model.resolve_prefix("01b", ids, "session") == "01BBBB"
    assert model.resolve_prefix("01AAAA", ids + ["01AAAAX"], "session") == "01AAAA"  # exact wins
    with pytest.raises(InvalidRequest) as ambiguous:
        model.resolve_prefix("01AA", ids, "session")
    assert ambiguous.value.code == "AMBIGUOUS_ADDRESSING" and ambiguous.value.details["candidates"] == ["01AAAA", "01AAAB"]
    with pytest.raises(NotFound):
        model.resolve_prefix("02", ids, "session")


def test_outputs_are_capped_at_a_character_boundary() -> None:
    text, cut, size = model.cap_text("é" * 10, 5)
    assert cut and size == 20 and text.startswith("éé") and "truncated" in text and "\ufffd" not in text
    assert model.cap_text("short", 100) == ("short", False, 5)
    summary = model.summarize_arguments({"capsule_text": "x" * 500, "items": list(range(30))})
    assert summary["capsule_text"].endswith("(500 chars)") and len(summary["items"]) == 21


# --------------------------------------------------------------------------- the context window


def turn_events(run: str, prompt: str, answer: str) -> list[Event]:
    return [ev("run.started", run=run, prompt=prompt), ev("assistant.message", run=run, step=1, content=[{"type": "text", "text": answer}])]


def test_history_is_rebuilt_from_the_events() -> None:
    events = [
        *turn_events("R1", "first", "one"),
        ev("run.started", run="R2", prompt="second"),
        ev("assistant.message", run="R2", step=1, content=[{"type": "tool_use", "id": "c1", "name": "a__b", "input": {}}]),
        ev("tool.succeeded", run="R2", call_id="c1", output="result"),
        ev("assistant.message", run="R2", step=2, content=[{"type": "tool_use", "id": "c2", "name": "a__b", "input": {}}]),
        # the run died here: c2 has no result, so that step and what follows are left out
    ]
    first, second = window.history_turns(events)
    assert [m["role"] for m in first] == ["user", "assistant"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[2]["content"][0] == {"type": "tool_result", "tool_use_id": "c1", "content": "result"}
    merged = window.merge_roles([*second, window.user_text("third")])
    assert [m["role"] for m in merged] == ["user", "assistant", "user"] and merged[-1]["content"][-1]["text"] == "third"


def test_the_oldest_turns_are_dropped_first_never_the_current_one() -> None:
    history = [window.history_turns(turn_events(f"R{n}", f"prompt {n} " + "x" * 300, "ok"))[0] for n in range(10)]
    current = [window.user_text("now " + "y" * 3000)]
    built = window.assemble(system="sys", tools=[], history=history, current=current, budget=1500)
    assert built.turns_dropped > 0 and built.turns_kept + built.turns_dropped == 10
    texts = [block.get("text", "") for message in built.messages for block in message["content"]]
    assert texts[-1].startswith("now ") and texts[0].startswith(f"prompt {built.turns_dropped} ")  # newest kept, in order
    assert built.estimated_tokens <= 1500 and not built.over_budget
    tiny = window.assemble(system="s" * 3000, tools=[], history=history, current=current, budget=100)
    assert tiny.over_budget and tiny.turns_kept == 0 and tiny.messages[-1]["content"][0]["text"].startswith("now ")
    assert built.messages[0]["role"] == "user"


# --------------------------------------------------------------------------- the stream


def test_a_streamed_reply_is_assembled() -> None:
    builder = stream.ReplyBuilder()
    deltas = []
    for event in [
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 4}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "x__y", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a": '}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "[1, 2]}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    ]:
        found = builder.feed(event)
        if found:
            deltas.append(found)
    with pytest.raises(stream.IncompleteStream):
        builder.reply()  # no message_stop yet: a broken stream
    builder.feed({"type": "message_stop"})
    reply = builder.reply()
    assert deltas == ["Hel", "lo"] and reply.text == "Hello" and reply.stop_reason == "tool_use"
    assert reply.tool_calls == (stream.ToolCall("t1", "x__y", {"a": [1, 2]}),)
    assert reply.usage == Usage(12, 9, 4, 0)


def test_retry_delays() -> None:
    assert stream.retry_delay(1, 1.0, None) == 1.0 and stream.retry_delay(3, 1.0, None) == 4.0
    assert stream.retry_delay(10, 1.0, None) == 30.0 and stream.retry_delay(1, 1.0, 7.0) == 7.0
    assert stream.parse_retry_after({"retry-after": "2"}) == 2.0 and stream.parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert stream.parse_retry_after({"retry-after": "soon"}) is None


# --------------------------------------------------------------------------- arguments


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 5},
        "count": {"type": "integer", "minimum": 1},
        "flag": {"type": "boolean"},
        "mode": {"enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "nested": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
    },
    "required": ["name"],
    "additionalProperties": False,
}


def test_arguments_are_checked_against_the_schema() -> None:
    assert schema.check_arguments({"name": "ab", "count": 2, "tags": ["x"], "maybe": None, "nested": {"x": 1.5}}, SCHEMA) == []
    problems = schema.check_arguments({"count": 0, "flag": "yes", "mode": "c", "tags": [1], "nested": {}, "extra": 1, "name": "toolong"}, SCHEMA)
    fields = {p["field"] for p in problems}
    assert {"count", "flag", "mode", "tags[0]", "nested.x", "extra", "name"} <= fields
    assert schema.check_arguments({}, SCHEMA) == [{"field": "name", "message": "is required"}]
    assert schema.check_arguments("nope", SCHEMA)[0]["field"] == "(arguments)"
    assert schema.check_arguments({"count": True, "name": "a"}, SCHEMA)[0]["field"] == "count"  # a bool is not an integer


def test_an_undeclared_argument_is_refused_unless_the_schema_allows_others() -> None:
    """Issue 27 item 9: most servers' schemas (moss serve's among them) leave
    `additionalProperties` unsaid; an argument they do not declare is a mistake the server
    would ignore or fail on, so it is refused before the call."""
    open_schema = {key: value for key, value in SCHEMA.items() if key != "additionalProperties"}
    assert [p["field"] for p in schema.check_arguments({"name": "a", "bogus": 1}, open_schema)] == ["bogus"]
    assert schema.check_arguments({"name": "a", "bogus": 1}, {**open_schema, "additionalProperties": True}) == []
    assert schema.check_arguments({"name": "a", "bogus": 1}, {**open_schema, "additionalProperties": {"type": "integer"}}) == []
    assert schema.check_arguments({"anything": 1}, {"type": "object"}) == []  # no properties declared: nothing to hold it to
    assert [p["field"] for p in schema.check_arguments({"nested": {"x": 1, "y": 2}, "name": "a"}, open_schema)] == ["nested.y"]


def test_key_value_arguments_are_read_by_their_declared_type() -> None:
    parsed = schema.parse_assignments(["name=42", "count=3", "flag=true", 'tags=["a"]', "maybe=x", 'other={"k": 1}'], SCHEMA)
    assert parsed == {"name": "42", "count": 3, "flag": True, "tags": ["a"], "maybe": "x", "other": {"k": 1}}
    with pytest.raises(ValueError):
        schema.parse_assignments(["count=many"], SCHEMA)
    with pytest.raises(ValueError):
        schema.parse_assignments(["novalue"], SCHEMA)


# --------------------------------------------------------------------------- costs and settings


def test_costs_come_from_the_price_table() -> None:
    table = costs.DEFAULT_PRICES
    assert costs.price_for("claude-sonnet-4-5-20250929", table) == costs.Price(3.0, 15.0)
    assert costs.price_for("claude-sonnet-4-20250514", table) == costs.Price(3.0, 15.0)
    assert costs.price_for("claude-sonnet-4-6", table) == costs.Price(3.0, 15.0)
    assert costs.price_for("gpt-9", table) is None
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=1_000_000, cache_write_tokens=1_000_000)
    assert costs.cost_usd(usage, costs.Price(3.0, 15.0)) == pytest.approx(3.0 + 1.5 + 0.3 + 3.75)
    assert costs.cost_usd(usage, None) is None
    custom = costs.parse_prices({"my-model": {"input": 1, "output": 2, "cache_read": 0}}, "llm.prices")
    assert costs.cost_usd(Usage(cache_read_tokens=10**6), custom["my-model"]) == 0.0
    for bad in ({"m": 3}, {"m": {"input": -1, "output": 1}}, {"m": {"input": 1}}, {"m": {"input": 1, "output": 1, "extra": 2}}):
        with pytest.raises(ValueError):
            costs.parse_prices(bad, "llm.prices")


def test_the_template_holds_every_key_of_the_spec_and_reads_as_the_defaults() -> None:
    import tomllib

    data = tomllib.loads(settings.AGENT_TOML_TEMPLATE)
    spec_keys = {
        ("storage", "path"),
        ("workspace", "root"),
        ("llm", "provider"),
        ("llm", "model"),
        ("llm", "max_context_tokens"),
        ("llm", "max_response_tokens"),
        ("policy", "allow_exec"),
        ("policy", "allow_network"),
        ("secrets", "keys"),
    }
    assert all(key in data[table] for table, key in spec_keys)
    assert {"read_roots", "write_roots"} <= set(data["policy"]["fs"]) and "allow_domains" in data["policy"]["net_http"]
    assert {"name", "command", "args"} <= set(data["mcp_servers"][0])
    parsed = settings.parse_settings(settings.AGENT_TOML_TEMPLATE, ".moss/agent.toml")
    defaults = settings.AgentSettings()
    assert parsed.llm == defaults.llm and parsed.servers == defaults.servers
    assert (parsed.tool_timeout_seconds, parsed.max_output_bytes) == (15, 262144)
    assert data["policy"]["allow_exec"] is False and data["policy"]["allow_network"] is False


@pytest.mark.parametrize(
    "text",
    [
        '[llm]\nprovider = "openai"\n',
        "[llm]\nmax_steps = 0\n",
        "[llm]\nmodel = 3\n",
        "[mcp]\ntimeout_seconds = -1\n",
        '[[mcp_servers]]\nname = "a.b"\ncommand = "x"\n',
        '[[mcp_servers]]\nname = "a"\n',
        '[[mcp_servers]]\nname = "a"\ncommand = "x"\nurl = "http://h/mcp"\n',
        '[[mcp_servers]]\nname = "a"\ncommand = "x"\n[[mcp_servers]]\nname = "a"\ncommand = "y"\n',
        '[[mcp_servers]]\nname = "a"\ncommand = "x"\ntool_map = "other"\n',
        "[nonsense]\n",
    ],
)
def test_bad_settings_name_the_key(text: str) -> None:
    with pytest.raises(InvalidDocument) as caught:
        settings.parse_settings(text, ".moss/agent.toml")
    assert caught.value.code == "SCHEMA_ERROR" and caught.value.path == ".moss/agent.toml"


@pytest.mark.parametrize("value", ["./agent.db", "agent.sqlite", "/var/lib/bosun/agent.sqlite3"])
def test_the_spec_s_database_path_for_storage_is_refused_with_a_hint(value: str) -> None:
    """Issue 27 item 16: Bosun's agent.toml names a SQLite file (`path = "./agent.db"`); the
    runtime keeps sessions as files in a folder, so a database file name is refused, not made
    into a folder of that name."""
    with pytest.raises(InvalidDocument) as caught:
        settings.parse_settings(f'[storage]\npath = "{value}"\n', ".moss/agent.toml")
    assert caught.value.code == "SCHEMA_ERROR" and "storage.path" in caught.value.message
    assert ".moss/agent" in caught.value.message  # says what to write instead
    assert settings.parse_settings('[storage]\npath = "var/agent-sessions"\n', ".moss/agent.toml").storage == "var/agent-sessions"


def test_bad_toml_names_the_line() -> None:
    with pytest.raises(InvalidDocument) as caught:
        settings.parse_settings("[llm]\nmodel = \n", ".moss/agent.toml")
    assert caught.value.code == "INVALID_DOCUMENT" and caught.value.line == 2

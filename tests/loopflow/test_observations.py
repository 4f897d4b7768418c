"""Observations (LoopFlow's record of what happened in a session) as files: the model, `observe`
through the use case and the CLI, and their place in search, expand and the timeline."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import run_cli
from mcp_support import make_workspace

from moss_files.foundation import document
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidDocument, InvalidRequest
from moss_files.foundation.ids import IdSource, seeded_random
from moss_files.index import service as search
from moss_files.loopflow import service
from moss_files.loopflow.observations import new_observation, observation_to_dict, parse_observation, render_observation


def clock() -> datetime:
    return datetime(2026, 1, 21, 10, 0, tzinfo=UTC)


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    return Context(make_workspace(tmp_path / "ws"), clock=clock, ids=IdSource(clock, seeded_random(5)))


def test_a_new_observation_renders_its_keys_in_order_and_reads_back() -> None:
    made = new_observation(
        "OBS-20260121-aaaaaaaa",
        "Ran the suite: 2 failures.",
        time="2026-01-21T11:00:00+01:00",
        kind="Shell-Command",
        session="SES-20260121-bbbbbbbb",
        context={"command": "pytest -x", "exit": 1, "files": ["a.py", "b.py"]},
    )
    text = render_observation(made)
    assert text == (
        "---\nid: OBS-20260121-aaaaaaaa\ntime: 2026-01-21T10:00:00Z\nsession: SES-20260121-bbbbbbbb\nkind: shell_command\n"
        "context:\n  command: pytest -x\n  exit: 1\n  files:\n    - a.py\n    - b.py\nmoss_format: 2\n---\nRan the suite: 2 failures.\n"
    )
    back = parse_observation(document.parse(text), "x.md")
    assert back == made
    assert observation_to_dict(back)["summary"] == "Ran the suite: 2 failures."


def test_a_hand_written_observation_keeps_unknown_keys_and_bad_values_name_their_line() -> None:
    found = parse_observation(document.parse("---\ntime: 2026-01-21T10:00:00Z\nreviewer: ann\n---\nA note.\n"), "o.md", fallback_id="OBS-1")
    assert (found.id, found.kind, found.session) == ("OBS-1", "note", None)
    for text, line in (("---\nkind: dream\n---\nx\n", 2), ("---\nid: x\ncontext: [a]\n---\nx\n", 3), ("---\nsummary: [a]\n---\nx\n", 2)):
        with pytest.raises(InvalidDocument) as caught:
            parse_observation(document.parse(text), "o.md", fallback_id="OBS-1")
        assert (caught.value.code, caught.value.line) == ("SCHEMA_ERROR", line)


@pytest.mark.parametrize(
    "change",
    [
        {"text": "  "},
        {"kind": "dream"},
        {"time": "yesterday"},
        {"time": "2026-01-21T10:00:00"},  # no offset: which moment is it?
        {"context": {"nested": {"a": 1}}},
        {"context": {f"k{n}": n for n in range(40)}},
        {"summary": "two\nlines"},
        {"session": "../x"},
    ],
)
def test_bad_observations_are_refused(change: dict) -> None:
    args = {"text": "x", "time": "2026-01-21T10:00:00Z", **change}
    with pytest.raises(InvalidRequest):
        new_observation("OBS-1", args.pop("text"), **args)


def test_observe_writes_a_file_in_the_active_session_that_search_expand_and_timeline_show(ctx: Context) -> None:
    session = service.orient(ctx, task="login")["session"]["id"]
    insight = service.remember(ctx, "Cookies need SameSite=Lax.")["id"]
    seen = service.observe(ctx, "Edited the cookie middleware.", kind="file_edit", context={"file": "auth/cookies.py"})
    path = ctx.root / seen["path"]
    assert seen["path"] == f".moss/observations/{seen['id']}.md" and path.is_file()
    meta = document.parse(path.read_text()).meta
    assert (meta["session"], meta["kind"], meta["time"]) == (session, "file_edit", "2026-01-21T10:00:00Z")

    hits = search.scan(ctx, "middleware")["matches"]
    assert [(hit["id"], hit["kind"]) for hit in hits] == [(seen["id"], "observation")]
    assert [m["id"] for m in search.scan(ctx, f"kind:observation session:{session}")["matches"]] == [seen["id"]]
    assert [m["id"] for m in search.scan(ctx, "type:file_edit")["matches"]] == [seen["id"]]
    assert search.scan(ctx, "cookies.py")["matches"][0]["id"] == seen["id"]  # the context is searched too
    record = search.expand(ctx, [seen["id"]])["items"][0]["record"]
    assert record["type"] == "file_edit" and record["context"] == {"file": "auth/cookies.py"} and record["session_id"] == session
    around = search.timeline(ctx, insight, before=5, after=5)
    assert seen["id"] in [item["id"] for item in around["before"] + around["after"]]

    earlier = service.observe(ctx, "Read the bug report.", kind="user_prompt", session="SES-other", time="2026-01-20T09:00:00Z")
    assert document.parse((ctx.root / earlier["path"]).read_text()).meta["session"] == "SES-other"
    assert search.timeline(ctx, "2026-01-20", before=0, after=1)["after"][0]["id"] == earlier["id"]


def test_moss_observe_on_the_command_line(ctx: Context) -> None:
    done = run_cli("moss", "observe", "Ran pytest.", "--kind", "shell_command", "--context", '{"command": "pytest", "exit": 1}', "--json", cwd=ctx.root)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert made["observation"]["context"] == {"command": "pytest", "exit": 1} and made["observation"]["type"] == "shell_command"
    piped = run_cli("moss", "observe", "--json", cwd=ctx.root, input="From stdin.\n")
    assert piped.returncode == 0 and json.loads(piped.stdout)["observation"]["text"] == "From stdin.\n"
    for args in (["x", "--context", "[1]"], ["x", "--context", "{bad"], ["x", "--kind", "dream"], ["x", "--time", "soon"]):
        refused = run_cli("moss", "observe", *args, "--json", cwd=ctx.root)
        assert refused.returncode == 2, (args, refused.stderr)
        assert json.loads(refused.stderr)["error"]["code"] in ("INVALID_REQUEST", "SCHEMA_ERROR")
    assert len(list((ctx.root / ".moss" / "observations").glob("*.md"))) == 2

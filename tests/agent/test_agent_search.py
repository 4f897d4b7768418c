"""Agent sessions in the search index: the reader's rows (session, runs, tool steps) and records,
from a session file written by real runs; and sessions, runs and a run's steps found by `moss
search` and `moss timeline` through the registered reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import FakeMessagesAPI, agent_env, anyio_workers_finish, make_workspace, text, tool, write_settings  # noqa: F401
from conftest import run_cli

from moss_files.agent import search, service
from moss_files.foundation.context import Context
from moss_files.index.model import FileInput

pytestmark = pytest.mark.usefixtures("anyio_workers_finish")


@pytest.fixture
def session_file(tmp_path: Path) -> tuple[Path, dict]:
    root = make_workspace(tmp_path / "project")
    write_settings(root, '[policy]\nallow_tools = ["demo.echo"]\n', moss=False)
    with FakeMessagesAPI(
        [tool("demo__echo", {"text": "x"}), tool("demo__fetch", {"url": "https://a.b"}), text("Deployed the login page."), text("Second answer.")]
    ) as fake:
        first = service.run(Context(root), "Deploy the login page", environ=agent_env(fake))
        service.run(Context(root), "And then?", session=first["session"]["id"], environ=agent_env(fake))
    return root, first


def test_a_session_file_gives_rows_for_the_session_its_runs_and_their_steps(session_file: tuple[Path, dict]) -> None:
    root, first = session_file
    relpath = first["session"]["path"]
    data = (root / relpath).read_bytes()
    extracted = search.extract(FileInput(relpath, data))
    assert extracted.problems == ()
    by_kind: dict[str, list] = {}
    for entry in extracted.entries:
        by_kind.setdefault(entry.kind, []).append(entry)
    (session,) = by_kind["agent-session"]
    assert session.id == first["session"]["id"] and session.title == "Deploy the login page" and session.status == "idle"
    runs = by_kind["agent-run"]
    assert [r.id for r in runs][0] == first["run"]["id"] and len(runs) == 2
    assert runs[0].title == "Deploy the login page" and runs[0].summary.startswith("Deployed the login page")
    assert runs[0].date and runs[0].date.endswith("Z") and len(runs[0].date) == 20 and runs[0].links == (session.id,)
    steps = by_kind["agent-step"]
    assert [(s.title, s.status) for s in steps] == [("demo.echo → succeeded", "succeeded"), ("demo.fetch → denied", "denied")]
    assert all(s.date and s.links == (first["run"]["id"], session.id) for s in steps)
    # `moss expand` records.
    whole = search.record(FileInput(relpath, data), "")
    assert whole["id"] == session.id and len(whole["run_list"]) == 2 and whole["run_list"][0]["answer"] == "Deployed the login page."
    assert whole["run_list"][0]["cost_usd"] == pytest.approx(first["run"]["cost_usd"], abs=1e-4)
    one = search.record(FileInput(relpath, data), runs[0].anchor)
    assert one["id"] == runs[0].id and one["prompt"] == "Deploy the login page" and one["tool_calls"][1]["outcome"] == "denied"
    step = search.record(FileInput(relpath, data), steps[1].anchor)
    assert step["tool"] == "demo.fetch" and "CAPABILITY_DENIED" in step["detail"]
    assert search.record(FileInput(relpath, data), "L99999") is None


def test_hand_edits_and_odd_prompts_do_not_confuse_the_reader(session_file: tuple[Path, dict]) -> None:
    root, first = session_file
    path = root / first["session"]["path"]
    path.write_text(path.read_text() + "\n## My notes\n\n- started: never\n")
    extracted = search.extract(FileInput(first["session"]["path"], path.read_bytes()))
    assert len([e for e in extracted.entries if e.kind == "agent-run"]) == 2


def test_sessions_runs_and_steps_through_search_and_timeline(session_file: tuple[Path, dict]) -> None:
    root, first = session_file
    found = run_cli("moss", "search", "kind:agent-session", "login", "--json", cwd=root)
    assert found.returncode == 0, found.stderr
    assert [m["id"] for m in json.loads(found.stdout)["matches"]] == [first["session"]["id"]]
    runs = run_cli("moss", "search", "kind:agent-run", "login", "--json", cwd=root)
    assert [m["id"] for m in json.loads(runs.stdout)["matches"]] == [first["run"]["id"]]
    around = run_cli("moss", "timeline", first["run"]["id"], "--json", cwd=root)
    assert around.returncode == 0, around.stderr
    assert {"agent-step"} <= {item["kind"] for item in json.loads(around.stdout)["after"] + json.loads(around.stdout)["before"]}

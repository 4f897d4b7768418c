"""Chat and questions: channels (built-in, per task and epic, custom), messages with mentions,
read positions that skip nothing, joins, pins, decisions; comments on tasks, Moe's pending
questions and an agent's question to a human that blocks its task until answered; concurrent
senders keep the JSONL whole; two clones that both chatted merge by union. Through the CLI
(`moss board chat …`, `moss task comment`) and a real MCP client."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from board_support import Calls, board, connect, moss
from conftest import run_cli
from mcp_support import anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)

from moss_files.board import claims, conversation, editing, plans, teams
from moss_files.board.store import BoardStore
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import MossError


def agent(root: Path) -> Context:
    return Context(root, actor=AGENT)


def code_of(call: object) -> str:
    with pytest.raises(MossError) as caught:
        call()  # type: ignore[operator]
    return caught.value.code


# --------------------------------------------------------------------------- channels and messages


def test_a_conversation_through_the_cli(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    teams.register_worker(Context(root), worker_id="dev", role="worker")
    teams.register_worker(Context(root), worker_id="dev2", role="worker")
    sent = moss(root, "board", "chat", "send", "#general", "@workers the API moved to /v2, @dev2 please check")
    assert sent["routingTargets"] == ["dev", "dev2"] and sent["channel"] == "general"
    reply = moss(root, "board", "chat", "send", "general", "on it", "-w", "dev2", "--reply-to", sent["messageId"])
    assert reply["routingTargets"] == []
    read = moss(root, "board", "chat", "read", "general")
    assert [(m["sender"], m["replyTo"]) for m in read["messages"]] == [("human", None), ("dev2", sent["messageId"])]
    assert moss(root, "board", "chat", "send", "nowhere", "hi", code=3)["error"]["code"] == "NOT_FOUND"
    assert moss(root, "board", "chat", "create", "Design")["created"] is True
    assert moss(root, "board", "chat", "create", "#design")["created"] is False
    assert moss(root, "board", "chat", "create", "general", code=2)["error"]["code"] == "INVALID_REQUEST"
    moss(root, "board", "chat", "send", "design", "sketches are in figma")
    channels = {c["id"]: c for c in moss(root, "board", "chat", "channels")["channels"]}
    assert {"general", "architects", "workers", "qa", "governors", "design"} <= set(channels)
    assert (channels["general"]["messageCount"], channels["design"]["type"]) == (2, "custom")
    # The file is readable and greppable: one JSON object per line, Moe's message fields.
    lines = (root / ".moss/board/chat/general.jsonl").read_text().splitlines()
    assert set(json.loads(lines[0])) == {"id", "channel", "sender", "content", "replyTo", "mentions", "timestamp"}


def test_task_and_epic_channels_exist_with_their_items(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    epic = editing.create_epic(Context(root), title="Checkout")["epic"]["id"]
    task = editing.create_task(Context(root), epic_id=epic, title="Card form")["task"]["id"]
    moss(root, "board", "chat", "send", task, "starting on the form", "-w", "dev")
    moss(root, "board", "chat", "send", epic, "epic kickoff")
    assert [m["content"] for m in moss(root, "board", "chat", "read", task)["messages"]] == ["starting on the form"]
    assert moss(root, "board", "chat", "send", "TASK-20260101-nothere", "x", code=3)["error"]["code"] == "NOT_FOUND"
    row = {c["id"]: c for c in moss(root, "board", "chat", "channels")["channels"]}[task]
    assert (row["type"], row["linkedEntityId"]) == ("task", task)


def test_chat_and_comments_rest_on_the_task_file_they_name_not_on_the_whole_board(tmp_path: Path) -> None:
    # Chat and comments read the task a channel or comment names from its own file (issue 29:
    # they loaded every task of the board): a task file that does not parse gives its own
    # error, with its path and line, as it did; another task's broken file stands in nothing's way.
    root = board(tmp_path / "p")
    epic = editing.create_epic(Context(root), title="Checkout")["epic"]["id"]
    broken, fine = (editing.create_task(Context(root), epic_id=epic, title=title)["task"]["id"] for title in ("Card form", "Receipt"))
    (root / f".moss/board/tasks/{broken}.md").write_text("---\nid: [unclosed\n---\nbody\n")
    for args in (
        ("board", "chat", "send", broken, "hello"),
        ("board", "chat", "read", broken),
        ("task", "comment", broken, "a note"),
        ("task", "comments", broken),
    ):
        error = moss(root, *args, code=4)["error"]
        assert (error["code"], error["path"], error["line"]) == ("FRONTMATTER_SYNTAX", f".moss/board/tasks/{broken}.md", 3), args
    assert moss(root, "board", "chat", "send", fine, "on it", "-w", "dev")["channel"] == fine
    assert moss(root, "task", "comment", fine, "looks good")["totalComments"] == 1
    assert [m["content"] for m in moss(root, "board", "chat", "read", fine)["messages"]] == ["on it"]
    assert moss(root, "task", "comment", "TASK-20260101-nothere", "x", code=3)["error"]["details"] == {"taskId": "TASK-20260101-nothere"}
    # The worker the first message registered is known to what follows: a mention of it routes.
    assert moss(root, "board", "chat", "send", "general", "@dev standup")["routingTargets"] == ["dev"]
    # get_context too: the task it shows in full, from its file; every unreadable file in problems.
    assert moss(root, "task", "context", broken, code=4)["error"]["code"] == "FRONTMATTER_SYNTAX"
    shown = plans.get_context(agent(root), task_id=fine)
    assert (shown["task"]["id"], shown["task"]["title"], shown["totalComments"]) == (fine, "Receipt", 1)
    assert [problem["path"] for problem in shown["problems"]] == [f".moss/board/tasks/{broken}.md"]


def test_read_positions_give_every_message_once_across_channels(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    ctx = agent(root)
    start = datetime.now(UTC)
    for n in range(5):
        # One millisecond apart: messages of two channels stamped in the same millisecond have no
        # order between them (their stamps are equal), and this test is about read positions.
        sent_at = start + timedelta(milliseconds=n)
        conversation.chat_send(Context(root, clock=lambda sent_at=sent_at: sent_at), channel="general" if n % 2 else "workers", content=f"m{n}")
    first = conversation.chat_read(ctx, worker_id="dev", limit=3)
    assert [m["content"] for m in first["messages"]] == ["m0", "m1", "m2"] and first["hasMore"] is True
    second = conversation.chat_read(ctx, worker_id="dev", limit=10)
    assert [m["content"] for m in second["messages"]] == ["m3", "m4"] and second["hasMore"] is False
    assert conversation.chat_read(ctx, worker_id="dev")["messages"] == []
    # Positions are per machine and git-ignored: never in the board's tracked files.
    assert (root / ".moss/run/board/cursors/dev.json").exists()
    resync = conversation.chat_resync(ctx, worker_id="dev", limit=2)
    assert [m["content"] for m in resync["messages"]] == ["m3", "m4"] and resync["cursorsReset"] is True
    assert [m["content"] for m in conversation.chat_read(ctx, channel="general", since_id=None, limit=1)["messages"]] == ["m3"]


def test_agents_mentioning_each_other_pause_until_a_human_speaks(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    for worker in ("a1", "a2"):
        teams.register_worker(Context(root), worker_id=worker, role="worker")
    targets = [
        conversation.chat_send(agent(root), channel="general", content=f"@{to} your turn", worker_id=by)["routingTargets"]
        for by, to in [("a1", "a2"), ("a2", "a1")] * 3
    ]
    assert targets[:4] == [["a2"], ["a1"], ["a2"], ["a1"]] and targets[4:] == [[], []]
    conversation.chat_send(Context(root), channel="general", content="carry on")
    assert conversation.chat_send(agent(root), channel="general", content="@a2 next", worker_id="a1")["routingTargets"] == ["a2"]


def test_joins_pins_and_decisions(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    assert moss(root, "board", "chat", "join", "general", "-w", "dev")["joined"] is True
    assert moss(root, "board", "chat", "join", "general", "-w", "dev")["joined"] is False
    message = moss(root, "board", "chat", "send", "general", "release on friday")["messageId"]
    assert moss(root, "board", "chat", "pin", "general", message)["alreadyPinned"] is False
    assert moss(root, "board", "chat", "pin", "general", message)["alreadyPinned"] is True
    assert [p["messageId"] for p in moss(root, "board", "chat", "pins", "general")["pins"]] == [message]
    assert moss(root, "board", "chat", "unpin", "general", message)["unpinned"] is True
    assert moss(root, "board", "chat", "pins", "general")["pins"] == []
    assert moss(root, "board", "chat", "pin", "general", "MSG-nothere", code=3)["error"]["code"] == "NOT_FOUND"
    decision = moss(root, "board", "chat", "decision", "Use Postgres 16", "-w", "dev")["decision"]
    assert (decision["status"], decision["proposedBy"], decision["channel"]) == ("proposed", "dev", "general")
    assert moss(root, "board", "chat", "decide", decision["id"], "approved")["decision"]["status"] == "approved"
    assert moss(root, "board", "chat", "decide", decision["id"], "rejected", code=5)["error"]["code"] == "INVALID_TRANSITION"
    assert code_of(lambda: conversation.resolve_decision(agent(root), decision_id=decision["id"], verdict="approved")) == "NOT_ALLOWED"
    assert [d["status"] for d in moss(root, "board", "chat", "decisions")["decisions"]] == ["approved"]
    assert code_of(lambda: conversation.chat_send(agent(root), channel="general", content="hi", worker_id="system")) == "NOT_ALLOWED"


SENDER = r"""
import sys
from pathlib import Path
from moss_files.board import conversation
from moss_files.foundation.context import Context
ctx = Context(Path(sys.argv[1]), actor="agent")
for n in range(40):
    conversation.chat_send(ctx, channel="general", content=f"{sys.argv[2]} {n} " + "x" * 3000, worker_id=sys.argv[2])
"""


@pytest.mark.slow
def test_concurrent_senders_keep_every_line_whole(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    procs = [subprocess.Popen([sys.executable, "-c", SENDER, str(root), f"w{n}"], stderr=subprocess.PIPE, text=True) for n in range(6)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.communicate()[1]
        proc.communicate()
    posts, problems = BoardStore(root).read_channel("general")
    assert problems == [] and len(posts) == 240 and len({p.id for p in posts}) == 240


# --------------------------------------------------------------------------- comments and questions


def test_an_agents_question_blocks_its_task_until_a_human_answers(tmp_path: Path) -> None:
    root = board(tmp_path / "p", approval="TURBO")
    human = Context(root)
    epic = editing.create_epic(human, title="Checkout")["epic"]["id"]
    task = editing.create_task(human, epic_id=epic, title="Card form", status="PLANNING")["task"]["id"]
    ctx = agent(root)
    claims.claim_next_task(ctx, statuses=["PLANNING"], worker_id="arch")
    plans.submit_plan(ctx, task_id=task, worker_id="arch", steps=["Build the form", "Write a test"])  # TURBO: approved
    claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev")
    asked = conversation.add_comment(ctx, task_id=task, content="Which card brands?", worker_id="dev", question=True)
    assert (asked["question"], asked["openQuestions"]) == (True, 1)
    refused = moss(root, "task", "step-start", task, "step-1", "-w", "dev", code=5)["error"]
    assert refused["code"] == "QUESTION_PENDING" and refused["details"]["questions"][0]["content"] == "Which card brands?"
    waiting_for_humans = moss(root, "board", "questions")
    assert [(t["taskId"], t["questions"][0]["author"]) for t in waiting_for_humans["tasks"]] == [(task, "dev")]
    # Released while the question is open, the task is not offered to anyone.
    claims.release_task(ctx, task_id=task, worker_id="dev")
    assert claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev2")["hasNext"] is False
    answer = moss(root, "task", "comment", task, "Visa and Mastercard only", "--reply-to", asked["commentId"])
    assert (answer["answered"], answer["openQuestions"]) == ([asked["commentId"]], 0)
    assert moss(root, "board", "questions")["tasks"] == []
    # The human's answer is a pending question for the agents (Moe's get_pending_questions).
    for_agents = moss(root, "board", "questions", "--awaiting", "agent")["tasks"]
    assert for_agents[0]["questions"][0]["content"] == "Visa and Mastercard only"
    assert claims.claim_next_task(ctx, statuses=["WORKING"], worker_id="dev2")["task"]["id"] == task
    context = plans.get_context(ctx, worker_id="dev2")
    assert [c["content"] for c in context["comments"]] == ["Which card brands?", "Visa and Mastercard only"]
    assert context["pendingQuestions"][0]["author"] == "human" and context["openQuestions"] == []
    conversation.add_comment(ctx, task_id=task, content="Thanks, doing both", worker_id="dev2")
    assert moss(root, "board", "questions", "--awaiting", "agent")["tasks"] == []
    plans.start_step(ctx, task_id=task, step_id="step-1", worker_id="dev2")
    assert moss(root, "task", "comment", task, "?", "--question", code=2)["error"]["code"] == "INVALID_REQUEST"  # humans ask plainly


# --------------------------------------------------------------------------- clones


@pytest.mark.slow
def test_two_clones_that_both_chatted_and_commented_merge_by_union(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    subprocess.run(["git", "init", "-q", "-b", "main", str(origin)], check=True)
    assert run_cli("moss", "init", cwd=origin).returncode == 0
    board(origin)
    epic = editing.create_epic(Context(origin), title="Checkout")["epic"]["id"]
    task = editing.create_task(Context(origin), epic_id=epic, title="Card form")["task"]["id"]
    conversation.chat_send(Context(origin), channel="general", content="kickoff")

    def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done

    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "start")
    sides = []
    for name in ("a", "b"):
        git(tmp_path, "clone", "-q", str(origin), name)
        run_cli("moss", "merge", "setup", cwd=tmp_path / name)
        conversation.chat_send(Context(tmp_path / name), channel="general", content=f"from {name}")
        conversation.add_comment(agent(tmp_path / name), task_id=task, content=f"question from {name}", worker_id=f"dev-{name}", question=True)
        git(tmp_path / name, "add", "-A")
        git(tmp_path / name, "commit", "-qm", name)
        sides.append(tmp_path / name)
    a, b = sides
    git(a, "pull", "-q", "--no-rebase", str(b), "main")
    read = moss(a, "board", "chat", "read", "general")
    assert sorted(m["content"] for m in read["messages"]) == ["from a", "from b", "kickoff"]
    assert len(moss(a, "board", "questions")["tasks"][0]["questions"]) == 2


# --------------------------------------------------------------------------- through a real MCP client


@pytest.mark.anyio
async def test_chat_and_questions_through_the_client(tmp_path: Path) -> None:
    root = board(tmp_path / "p")
    epic = editing.create_epic(Context(root), title="Checkout")["epic"]["id"]
    task = editing.create_task(Context(root), epic_id=epic, title="Card form", status="WORKING")["task"]["id"]
    teams.register_worker(Context(root), worker_id="dev", role="worker")
    conversation.chat_send(Context(root), channel="general", content="welcome @dev")
    async with connect(root) as client:
        calls = Calls(client)
        assert (await calls.ok("moe.chat_create_channel", name="ops"))["created"] is True
        joined = await calls.ok("moe.chat_join", channel="#ops", workerId="dev")
        assert joined["channel"] == "ops" and joined["joined"] is True
        sent = await calls.ok("moe.chat_send", channel="ops", content="@all deploy at 5", workerId="dev")
        assert sent["routingTargets"] == []  # the sender itself is the only worker
        read = await calls.ok("moe.chat_read", workerId="dev", limit=10)
        assert [m["content"] for m in read["messages"]] == ["welcome @dev", "@all deploy at 5"]
        assert (await calls.ok("moe.chat_pin", channel="ops", messageId=sent["messageId"], workerId="dev"))["pin"]["messageId"] == sent["messageId"]
        assert (await calls.ok("moe.chat_unpin", channel="ops", messageId=sent["messageId"], workerId="dev"))["unpinned"] is True
        assert (await calls.ok("moe.chat_decision", content="Freeze on Friday", workerId="dev"))["decision"]["status"] == "proposed"
        assert {c["id"] for c in (await calls.ok("moe.chat_channels"))["channels"]} >= {"general", "ops"}
        who = await calls.ok("moe.chat_who", channel="ops")
        assert [w["workerId"] for w in who["online"]] == ["dev"]
        assert (await calls.ok("moe.chat_resync", workerId="dev", channel="ops"))["cursorsReset"] is True
        await calls.error("moe.chat_send", "NOT_FOUND", channel="nowhere", content="x")
        await calls.error("moe.chat_send", "INVALID_REQUEST", channel="general", content="x" * 10_001)

        asked = await calls.ok("moe.add_comment", taskId=task, content="May I drop IE11?", workerId="dev", question=True)
        pending = await calls.ok("moe.get_pending_questions", awaiting="human")
        assert pending["tasks"][0]["questions"][0]["commentId"] == asked["commentId"]
        conversation.add_comment(Context(root), task_id=task, content="Yes")
        mine = await calls.ok("moe.get_pending_questions")
        assert mine["tasks"][0]["questions"][0]["content"] == "Yes" and mine["pagination"]["hasMore"] is False

"""The `needlecast` CLI as a real process: JSON shapes, exit codes, read state, registry errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from needlecast import mailbox


def nc(*args: str, cwd: Path, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("needlecast", *args, cwd=cwd, input=input)


def ok_json(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def error_of(result: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(result.stderr.strip().splitlines()[-1])["error"]


@pytest.fixture
def team(tmp_path: Path) -> Path:
    root = tmp_path / "team"
    for name in ("alice", "bob"):
        (root / name).mkdir(parents=True)
        assert nc("init", cwd=root / name).returncode == 0
    return root


def test_init_creates_templates_and_never_overwrites(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    data = ok_json(nc("init", "--json", cwd=work))
    assert data["layout"] == "v1"
    inbox = work / ".needlecast" / "inbox.md"
    assert mailbox.read_inbox(mailbox.Mailbox(work)) == []  # the template is an empty mailbox
    inbox.write_text("# mine\n")
    assert nc("init", cwd=work).returncode == 0
    assert inbox.read_text() == "# mine\n"
    other = tmp_path / "v2"
    other.mkdir()
    assert ok_json(nc("init", "--layout", "v2", "--json", cwd=other))["layout"] == "v2"
    assert nc("init", "--layout", "v9", cwd=other).returncode == 2
    # The router's journal and locks are per machine: never committed.
    assert ".needlecast/.state/" in (work / ".gitignore").read_text().splitlines()
    assert "**/.needlecast/outbox.md merge=moss" in (work / ".gitattributes").read_text().splitlines()


def test_send_route_inbox_read_round_trip(team: Path) -> None:
    sent = ok_json(nc("send", "--to", "bob", "--type", "question", "--thread", "auth", "--json", cwd=team / "alice", input="Two paragraphs.\n\nSecond one.\n"))
    message = sent["message"]
    assert set(message) == {"id", "from", "to", "thread", "type", "time", "body", "extra"}
    assert message["from"] == "alice" and message["to"] == ["bob"] and message["id"].startswith("msg-")
    pending = ok_json(nc("outbox", "--json", cwd=team / "alice"))
    assert [row["key"] for row in pending["messages"]] == [message["id"]] and pending["problems"] == []

    report = ok_json(nc("route", "--once", "--json", cwd=team))
    assert report["delivered"] == 1 and report["removed"] == 1
    assert ok_json(nc("outbox", "--json", cwd=team / "alice"))["messages"] == []

    listing = ok_json(nc("inbox", "--json", cwd=team / "bob"))
    (row,) = listing["messages"]
    assert row["key"] == message["id"] and row["read"] is False
    assert row["message"]["body"] == "Two paragraphs.\n\nSecond one.\n"
    assert ok_json(nc("inbox", "--thread", "other", "--json", cwd=team / "bob"))["messages"] == []
    assert len(ok_json(nc("inbox", "--from", "alice", "--json", cwd=team / "bob"))["messages"]) == 1

    shown = ok_json(nc("read", message["id"], "--json", cwd=team / "bob"))
    assert shown["read"] is True and shown["message"]["thread"] == "auth"
    assert ok_json(nc("inbox", "--unread", "--json", cwd=team / "bob"))["messages"] == []
    assert nc("read", message["id"], cwd=team / "bob").returncode == 0  # reading twice is fine
    assert (team / "bob" / ".needlecast" / "read.log").read_text().count(message["id"]) == 1

    reply = ok_json(nc("send", "--reply-to", message["id"], "--json", "Answer.", cwd=team / "bob"))["message"]
    assert reply["to"] == ["alice"] and reply["thread"] == "auth" and reply["type"] == "response"
    assert reply["extra"] == {"reply_to": message["id"]}


def test_errors_have_codes_and_exit_codes(team: Path, tmp_path: Path) -> None:
    result = nc("send", "no recipient", "--json", cwd=team / "alice")
    assert result.returncode == 2 and error_of(result)["code"] == "INVALID_REQUEST"
    result = nc("send", "--to", "bob", "--json", cwd=team / "alice", input="nul\x00byte")
    assert result.returncode == 2 and error_of(result)["code"] == "MESSAGE_INVALID"
    outbox = (team / "alice/.needlecast/outbox.md").read_bytes()
    result = nc("send", "--to", "bob", "--json", cwd=team / "alice", input="x" * (2 * 1024 * 1024))
    assert result.returncode == 2 and error_of(result)["code"] == "MESSAGE_TOO_LARGE" and error_of(result)["status"] == 413
    assert (team / "alice/.needlecast/outbox.md").read_bytes() == outbox
    result = nc("read", "msg-nope", "--json", cwd=team / "bob")
    assert result.returncode == 3 and error_of(result)["code"] == "NOT_FOUND"
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    result = nc("inbox", "--json", cwd=nowhere)
    assert result.returncode == 6 and error_of(result)["code"] == "WORKSPACE_NOT_FOUND"


def test_send_refuses_an_empty_message_as_cstack_remember_does(team: Path) -> None:
    """Issue 27 item 4: an empty body (argument or stdin), or one of blanks only, is refused
    before anything reaches the outbox."""
    outbox = (team / "alice/.needlecast/outbox.md").read_bytes()
    for args, stdin in ((("",), None), ((), ""), (("-",), ""), (("  \n\t",), None), ((), "\n\n")):
        result = nc("send", "--to", "bob", *args, "--json", cwd=team / "alice", input=stdin)
        assert result.returncode == 2, (args, stdin, result.stdout)
        assert error_of(result)["code"] == "INVALID_REQUEST"
    assert (team / "alice/.needlecast/outbox.md").read_bytes() == outbox
    assert ok_json(nc("outbox", "--json", cwd=team / "alice"))["messages"] == []


def test_dead_letters_and_bounces_from_the_cli(team: Path) -> None:
    assert nc("send", "--to", "bob,zed", "hello", cwd=team / "alice").returncode == 0
    assert ok_json(nc("route", "--once", "--json", cwd=team))["dead_letters"] == 1
    letters = ok_json(nc("dead-letters", "--json", cwd=team / "alice"))["dead_letters"]
    assert [(d["code"], d["recipients"]) for d in letters] == [("UNKNOWN_RECIPIENT", ["zed"])]
    inbox = ok_json(nc("inbox", "--json", cwd=team / "alice"))["messages"]
    assert [m["message"]["type"] for m in inbox] == ["bounce"]


def test_a_hand_written_block_without_its_closing_fence_is_reported_and_dead_lettered(team: Path) -> None:
    """Issue 24: such a block was never listed, routed nor dead-lettered (it read as the
    preamble, or as the end of the message before it), and nothing reported it."""
    import os

    outbox = team / "alice" / ".needlecast" / "outbox.md"
    unclosed = "---\nto: bob\nfrom: alice\nHello bob, the header above was never closed.\n\n"
    noted = "---\n# urgent\nto: bob\n---\nThe first header line is a comment.\n\n"
    good = "---\nid: m-good\nto: bob\n---\nThis one is fine.\n\n"
    with open(outbox, "a") as handle:
        handle.write(unclosed + good + noted)
    old = outbox.stat().st_mtime - 10  # written a while ago: not a write still in progress
    os.utime(outbox, (old, old))
    listed = ok_json(nc("outbox", "--json", cwd=team / "alice"))
    preamble_lines = len(outbox.read_text().split(unclosed)[0].splitlines())
    problems = [(p["problem"]["code"], p["source"], p["line"]) for p in listed["problems"]]
    assert problems == [("FRONTMATTER_UNCLOSED", "outbox.md", preamble_lines + 1), ("MESSAGE_INVALID", "outbox.md", preamble_lines + 12)]
    assert [m["key"] for m in listed["messages"]] == ["m-good"]
    assert all(p["problem"]["line"] == line for p, (_code, _source, line) in zip(listed["problems"], problems, strict=True))
    text = nc("outbox", cwd=team / "alice").stdout
    assert "[FRONTMATTER_UNCLOSED]" in text and "[MESSAGE_INVALID]" in text
    report = ok_json(nc("route", "--once", "--json", cwd=team))
    assert (report["delivered"], report["dead_letters"], report["bounces"]) == (1, 2, 2)
    letters = ok_json(nc("dead-letters", "--json", cwd=team / "alice"))["dead_letters"]
    assert sorted((d["code"], d["line"]) for d in letters) == sorted((code, line) for code, _source, line in problems)
    kept = {letter.meta["code"]: letter.raw for letter in mailbox.read_dead_letters(mailbox.Mailbox(team / "alice"))}
    assert kept == {"FRONTMATTER_UNCLOSED": unclosed.encode(), "MESSAGE_INVALID": noted.encode()}  # byte for byte
    assert [m["message"]["body"] for m in ok_json(nc("inbox", "--json", cwd=team / "bob"))["messages"]] == ["This one is fine.\n"]
    bounces = ok_json(nc("inbox", "--json", cwd=team / "alice"))["messages"]
    assert sorted(m["message"]["extra"]["code"] for m in bounces) == ["FRONTMATTER_UNCLOSED", "MESSAGE_INVALID"]
    assert ok_json(nc("outbox", "--json", cwd=team / "alice"))["problems"] == []


def test_registry_pointing_at_a_missing_workspace(team: Path) -> None:
    (team / ".needlecast").mkdir()
    (team / ".needlecast" / "sleeves.toml").write_text('ghost = "no/such/place"\n')
    result = nc("sleeves", "--json", cwd=team)
    assert result.returncode == 3
    rows = {row["name"]: row for row in json.loads(result.stdout)["sleeves"]}
    assert rows["ghost"]["problem"]["code"] == "SLEEVE_UNAVAILABLE" and rows["alice"]["ok"]
    assert nc("send", "--to", "ghost", "waits", cwd=team / "alice").returncode == 0
    assert nc("send", "--to", "bob", "goes", cwd=team / "alice").returncode == 0
    result = nc("route", "--once", "--json", cwd=team)
    assert result.returncode == 3
    report = json.loads(result.stdout)
    assert report["delivered"] == 1 and report["pending"] == 1
    assert report["held"][0]["code"] == "SLEEVE_UNAVAILABLE" and report["held"][0]["recipient"] == "ghost"
    # The message to the missing sleeve waits in the outbox; it is not dead-lettered.
    assert [m["message"]["to"] for m in ok_json(nc("outbox", "--json", cwd=team / "alice"))["messages"]] == [["ghost"]]


def test_broken_registry_names_file_and_line(team: Path) -> None:
    (team / ".needlecast").mkdir()
    (team / ".needlecast" / "sleeves.toml").write_text('ok = "alice"\nbroken = \n')
    for command in (["sleeves"], ["route", "--once"]):
        result = nc(*command, "--json", cwd=team)
        assert result.returncode == 4
        error = error_of(result)
        assert error["code"] == "REGISTRY_INVALID" and error["line"] == 2 and error["path"].endswith("sleeves.toml")


def test_read_state_merges_without_conflicts(team: Path, tmp_path: Path) -> None:
    """Two clones mark different messages read; git merges read.log with the union driver."""
    bob = team / "bob"
    assert nc("send", "--to", "bob", "one", cwd=team / "alice").returncode == 0
    assert nc("send", "--to", "bob", "two", cwd=team / "alice").returncode == 0
    assert nc("route", "--once", cwd=team).returncode == 0
    keys = [row["key"] for row in ok_json(nc("inbox", "--json", cwd=bob))["messages"]]

    def git(*args: str, cwd: Path = bob) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (bob / ".gitattributes").write_text(".needlecast/read.log merge=union\n")
    assert nc("read", keys[0], cwd=bob).returncode == 0  # the log exists in the base commit
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    clone = tmp_path / "clone"
    git("clone", "-q", str(bob), str(clone), cwd=tmp_path)
    assert nc("read", keys[1], cwd=clone).returncode == 0
    git("commit", "-q", "-am", "read two", cwd=clone)
    assert nc("send", "--to", "alice", "busy", cwd=bob).returncode == 0
    with (bob / ".needlecast" / "read.log").open("a") as handle:
        handle.write('{"at": "2026-01-21T10:00:00Z", "from": "alice", "id": "x"}\n')
    git("commit", "-q", "-am", "read on the other side")
    git("pull", "-q", "--no-rebase", str(clone), "main")
    assert ok_json(nc("inbox", "--unread", "--json", cwd=bob))["messages"] == []


@pytest.mark.parametrize("command", ["init", "send", "inbox", "read", "outbox", "route", "sidecar", "sleeves", "dead-letters"])
def test_every_command_has_help_and_json(command: str, tmp_path: Path) -> None:
    result = nc(command, "--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "--json" in result.stdout
    assert len(result.stdout.split("Options:")[0].strip().splitlines()) >= 2  # a usage line and a description


def test_public_api_for_other_packages(team: Path) -> None:
    import needlecast
    from moss_files.foundation.context import Context

    sent = needlecast.send(Context(team / "alice"), body="indexed words", to=["bob"], type_="task")
    assert Path(sent["path"]).name == "outbox.md" and sent["message"]["from"] == "alice"
    assert [where for where, _ in needlecast.iter_messages(team / "alice")] == ["outbox"]
    report = needlecast.route_once(Context(team))
    assert report["delivered"] == 1
    found = {where: needlecast.message_text(entry) for where, entry in needlecast.iter_messages(team / "alice")}
    assert set(found) == {"archive"} and "indexed words" in found["archive"]
    (row,) = needlecast.list_inbox(Context(team / "bob"))["messages"]
    assert not row["read"] and needlecast.read_message(Context(team / "bob"), key=row["key"])["key"] == sent["message"]["id"]
    assert needlecast.list_inbox(Context(team / "bob"), unread=True)["messages"] == []


def test_a_sleeves_commands_load_neither_the_router_nor_http() -> None:
    """The use cases of one sleeve start without the envoy's router, HTTP server and client."""
    names = "init_workspace send list_inbox read_message list_outbox list_dead_letters".split()
    code = (
        f"import sys, needlecast.cli, needlecast; [getattr(needlecast, n) for n in {names!r}]; "
        "print(sorted(m for m in sys.modules if m.startswith(('needlecast.', 'http', 'urllib.request', 'watchdog'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(
        ["needlecast.cli", "needlecast.mailbox", "needlecast.message", "needlecast.routing", "needlecast.service", "needlecast.shared_file"]
    )


def test_file_per_message_inboxes_written_on_two_clones_merge_cleanly(tmp_path: Path) -> None:
    """Two routers on two machines each deliver into their clone of a sleeve's v2 inbox; git
    merges the new files without a conflict. (A union merge of v1 block files is not safe: git's
    line diff can fuse two appended blocks' fence lines, so v1 mailboxes written on several
    machines get an ordinary, visible merge conflict instead.)"""
    from datetime import UTC, datetime

    from needlecast.message import Message

    bob = tmp_path / "bob"
    mailbox.init_mailbox(bob, "v2")

    def git(*args: str, cwd: Path = bob) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    now = datetime(2026, 1, 21, tzinfo=UTC)
    mailbox.deliver(mailbox.Mailbox(bob), [Message(id="base", sender="x", to=("bob",), body="before\n")], now)
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    clone = tmp_path / "clone"
    git("clone", "-q", str(bob), str(clone), cwd=tmp_path)
    mailbox.deliver(mailbox.Mailbox(clone), [Message(id="there", sender="y", to=("bob",), body="two\n\n---\nparagraphs\n")], now)
    git("add", "-A", cwd=clone)
    git("commit", "-q", "-m", "delivered there", cwd=clone)
    mailbox.deliver(mailbox.Mailbox(bob), [Message(id="here", sender="z", to=("bob",), body="here\n")], now)
    git("add", "-A")
    git("commit", "-q", "-m", "delivered here")
    git("pull", "-q", "--no-rebase", str(clone), "main")
    entries = mailbox.read_inbox(mailbox.Mailbox(bob))
    assert [e.problem for e in entries] == [None, None, None]
    assert sorted(e.key for e in entries) == ["base", "here", "there"]

"""`moss upgrade` and the versions every reader and writer checks, on a workspace of real
files the previous release's tools wrote (tests/fixtures/formats/v1), in tmp_path git repos,
through real `moss`, `cstack` and `needlecast` processes where the command line is the
subject. Expected files (tests/fixtures/formats/v2) are compared byte for byte."""

from __future__ import annotations

import difflib
import json
import os
import random
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from helpers import wait_for

from moss_files.foundation import formats
from moss_files.foundation.context import Context
from moss_files.foundation.errors import InvalidRequest, MossError
from moss_files.upgrade import service

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "formats"
V1, V2 = FIXTURES / "v1", FIXTURES / "v2"
MTIME = 1_795_168_800  # 2026-11-20T10:00:00Z: the hand-written capsule's times come from it
# The files other tools share (CURRENT.md, PLAN.md, MEMORY.md, v1 mailboxes) have no upgrade.
KINDS_UPGRADED = {
    "capsule": 6,
    "task": 1,
    "epic": 1,
    "worker": 1,
    "team": 1,
    "proposal": 1,
    "project": 1,
    "insight": 1,
    "session": 1,
    "feedback": 1,
    "summary": 1,
    "agent-session": 1,
    "message": 3,
    "dead-letter": 1,
    "config": 1,
    "agent-policy": 1,
    "sleeves": 1,
}


def tree(base: Path) -> dict[str, bytes]:
    """Every file below `base` (dot files too), by path, outside .git."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [name for name in dirnames if name != ".git"]
        for name in filenames:
            path = Path(dirpath, name)
            found[path.relative_to(base).as_posix()] = path.read_bytes()
    return found


def artifacts(base: Path) -> dict[str, bytes]:
    """The tracked toolkit files below `base`: no lock files, temporaries or per-machine state."""
    skipped = (".moss/cache/", ".moss/run/", ".needlecast/.state/")
    return {relpath: data for relpath, data in tree(base).items() if not Path(relpath).name.startswith(".") and not relpath.startswith(skipped)}


def workspace(tmp_path: Path, name: str = "project") -> Path:
    """A git repository holding the format-1 fixtures, each file's mtime fixed."""
    root = tmp_path / name
    shutil.copytree(V1, root)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            os.utime(path, (MTIME, MTIME))
    return root


def two_sleeves(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An envoy of alice (the format-1 fixtures, her v2 outbox files removed: these tests are
    about outbox.md) and bob (a new mailbox): the envoy, alice, bob."""
    envoy = tmp_path / "envoy"
    alice = workspace(envoy, "alice")
    bob = envoy / "bob"
    bob.mkdir()
    done = run_cli("needlecast", "init", "--json", cwd=bob)
    assert done.returncode == 0, done.stderr
    (envoy / ".needlecast").mkdir()
    (envoy / ".needlecast" / "sleeves.toml").write_text('alice = "alice"\nbob = "bob"\n')
    shutil.rmtree(alice / ".needlecast" / "outbox")
    return envoy, alice, bob


def moss(root: Path, *args: str, code: int = 0, input: str | None = None) -> dict[str, Any]:
    done = run_cli("moss", *args, "--json", cwd=root, input=input)
    assert done.returncode == code, f"moss {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return json.loads(done.stdout if code == 0 else done.stderr) if (done.stdout if code == 0 else done.stderr).strip() else {}


def one(root: Path, pattern: str) -> Path:
    (found,) = sorted(root.glob(pattern))
    return found


# --------------------------------------------------------------------------- moss upgrade


def test_a_dry_run_reports_every_kind_and_writes_nothing_at_all(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    before = tree(root)
    report = moss(root, "upgrade", "--dry-run")
    assert report["dry_run"] is True and report["upgraded"] == 24 and report["unchanged"] == 6 and report["problems"] == []
    assert {kind: entry["upgraded"] for kind, entry in report["kinds"].items() if entry["upgraded"]} == {
        kind: {"1 -> 2": count} for kind, count in KINDS_UPGRADED.items()
    }
    assert {kind for kind, entry in report["kinds"].items() if not entry["upgraded"]} == {"current", "plan", "memory", "mailbox"}
    moved = {entry["path"]: entry["moved_to"] for entry in report["files"] if "moved_to" in entry}
    assert moved == {".moss/capsules/default/con.md": ".moss/capsules/default/%63on.md", ".moss/capsules/nul/plans.md": ".moss/capsules/%6Eul/plans.md"}
    assert tree(root) == before  # not a byte, not a lock file, not a cache


def test_an_upgrade_writes_each_file_as_expected_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    report = moss(root, "upgrade")
    assert report["dry_run"] is False and report["upgraded"] == 24
    assert artifacts(root) == {relpath: (V2 / relpath).read_bytes() for relpath in artifacts(V2)}
    # The old folder is left empty: the move's lock lives in .moss/.locks/ (never deleted; git ignores it).
    assert list((root / ".moss" / "capsules" / "nul").iterdir()) == []
    assert (root / ".moss/.locks/capsules/nul/.plans.md.lock").exists()
    after = tree(root)
    again = moss(root, "upgrade")
    assert again["upgraded"] == 0 and again["unchanged"] == 30 and again["files"] == []
    assert tree(root) == after


def test_the_human_report_names_each_kind_and_the_totals(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    done = run_cli("moss", "upgrade", "--dry-run", cwd=root)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "capsule        would upgrade 6 from format 1 to 2" in lines
    assert lines[-1] == "Would upgrade 24 files; 6 at the current version"


def test_kinds_can_be_chosen_and_logs_are_never_rewritten(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    report = moss(root, "upgrade", "--kind", "plan", "--kind", "capsule")
    assert set(report["kinds"]) == {"plan", "capsule"} and report["upgraded"] == 6  # PLAN.md, shared with cortical-stack, has no marker to gain
    assert report["kinds"]["plan"] == {"current": 1, "files": 1, "at_current": 1, "upgraded": {}, "problems": 0}
    assert artifacts(root)[".needlecast/inbox.md"] == (V1 / ".needlecast/inbox.md").read_bytes()
    assert moss(root, "upgrade", "--kind", "nonsense", code=2)["error"]["code"] == "INVALID_REQUEST"
    assert moss(root, "upgrade", "--kind", "activity", code=2)["error"]["code"] == "INVALID_REQUEST"


def test_a_failed_write_takes_back_every_file_written_before_it(tmp_path: Path) -> None:
    """All or nothing: a file standing where a moved capsule's folder must go makes the last
    write fail, and every file upgraded before it is as it was."""
    root = workspace(tmp_path)
    (root / ".moss" / "capsules" / "%6Eul").write_text("in the way\n")
    before = artifacts(root)
    order = [entry["path"] for entry in service.upgrade(Context(root), dry_run=True)["files"]]
    with pytest.raises(MossError) as caught:
        service.upgrade(Context(root))
    assert caught.value.details["rolled_back"] == order.index(".moss/capsules/nul/plans.md") > 10
    assert artifacts(root) == before
    (root / ".moss" / "capsules" / "%6Eul").unlink()
    assert moss(root, "upgrade")["upgraded"] == 24


def test_conflicted_linked_and_unreadable_files_are_reported_and_left_as_they_are(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    task = one(root, ".moss/board/tasks/*.md")
    task.write_text(task.read_text().replace("title: Card form", "<<<<<<< ours\ntitle: Card form\n=======\ntitle: Card\n>>>>>>> theirs"))
    insight = one(root, ".moss/insights/*.md")
    insight.write_text("---\nid: [unclosed\n---\nx\n")
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("---\ntitle: not ours\n---\n")
    (root / ".moss" / "feedback" / "FB-20990101-linked00.md").symlink_to(elsewhere)
    before = {path: path.read_bytes() for path in (task, insight)}
    report = moss(root, "upgrade")
    problems = {problem["path"]: problem["code"] for problem in report["problems"]}
    assert problems == {
        task.relative_to(root).as_posix(): "MERGE_CONFLICT",
        insight.relative_to(root).as_posix(): "FRONTMATTER_SYNTAX",
        ".moss/feedback/FB-20990101-linked00.md": "SYMLINK_REFUSED",
    }
    assert report["upgraded"] == 22
    assert {path: path.read_bytes() for path in (task, insight)} == before
    assert elsewhere.read_text() == "---\ntitle: not ours\n---\n"


def test_a_move_whose_place_is_taken_is_a_problem_and_both_files_stay(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    folder = root / ".moss" / "capsules" / "default"
    (folder / "%63on.md").write_bytes((folder / "con.md").read_bytes())
    report = moss(root, "upgrade")
    (problem,) = [p for p in report["problems"] if p["path"] == ".moss/capsules/default/con.md"]
    assert problem["code"] == "ALREADY_EXISTS"
    assert (folder / "con.md").read_bytes() == (V1 / ".moss/capsules/default/con.md").read_bytes()


# --------------------------------------------------------------------------- reads never rewrite


def test_reading_commands_leave_every_older_file_as_it_is(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    task = one(root, ".moss/board/tasks/*.md").stem
    insight = one(root, ".moss/insights/*.md").stem
    for tool, *args in [
        ("moss", "list"),
        ("moss", "inventory", "--include-deleted"),
        ("moss", "fetch", "auth"),
        ("moss", "fetch", "con"),
        ("moss", "fetch", "plans", "--workspace", "nul"),  # a workspace folder named before the escape
        ("moss", "list", "--workspace", "nul"),
        ("moss", "latest"),
        ("moss", "search", "login"),
        ("moss", "index", "rebuild"),
        ("moss", "expand", task),
        ("moss", "task", "list"),
        ("moss", "task", "context", task),
        ("moss", "board", "status"),
        ("moss", "board", "log"),
        ("moss", "epic", "list"),
        ("moss", "worker", "list"),
        ("moss", "team", "list"),
        ("moss", "board", "proposals"),
        ("moss", "insight", "list"),
        ("moss", "insight", "show", insight),
        ("moss", "session", "list"),
        ("moss", "feedback", "list"),
        ("moss", "agent", "sessions"),
        ("moss", "agent", "logs", "--session", "last"),
        ("cstack", "status"),
        ("cstack", "plan"),
        ("cstack", "memory"),
        ("cstack", "stats"),
        ("needlecast", "inbox"),
        ("needlecast", "outbox"),
        ("needlecast", "dead-letters"),
    ]:
        done = run_cli(tool, *args, "--json", cwd=root)
        assert done.returncode == 0, f"{tool} {' '.join(args)}: {done.stderr}"
    from moss_files.web import board, capsules, memory, messages

    ctx = Context(root)
    for page in (board.board_page(ctx, board.BoardQuery()), capsules.capsules_page(ctx), memory.memory_page(ctx), messages.messages_page(ctx)):
        assert page.title
    assert artifacts(root) == {relpath: (V1 / relpath).read_bytes() for relpath in artifacts(V1)}


def test_the_index_never_holds_the_marker_as_content(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    moss(root, "upgrade")
    assert moss(root, "search", "moss_format")["matches"] == []
    assert moss(root, "search", "Login flow")["matches"]  # CURRENT.md is indexed, without its marker line


# --------------------------------------------------------------------------- newer files


def test_a_newer_file_is_refused_by_every_read_and_write_and_left_untouched(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    moss(root, "upgrade")
    capsule = root / ".moss/capsules/default/auth.md"
    task = one(root, ".moss/board/tasks/*.md")
    insight = one(root, ".moss/insights/*.md")
    plan = root / ".cstack/PLAN.md"
    inbox = root / ".needlecast/inbox.md"
    for path in (capsule, task, insight):
        path.write_text(path.read_text().replace("moss_format: 2", "moss_format: 3\nwritten_by: a newer moss-files"))
    for path in (plan, inbox):
        path.write_text("<!-- moss_format: 3 -->\n" + path.read_text())  # as a newer moss-files that changed their format would
    newer = {path: path.read_bytes() for path in (capsule, task, insight, plan, inbox)}

    # Reads: the file is a problem with its code, file and line; the rest reads.
    listed = moss(root, "list")
    assert [(p["code"], p["path"], p["line"]) for p in listed["problems"]] == [("FORMAT_TOO_NEW", ".moss/capsules/default/auth.md", 12)]
    assert "auth" not in {item["name"] for item in listed["items"]}
    assert moss(root, "fetch", "auth", code=4)["error"]["code"] == "FORMAT_TOO_NEW"
    board = moss(root, "board", "status")
    assert [p["code"] for p in board["problems"]] == ["FORMAT_TOO_NEW"]
    assert [p["code"] for p in moss(root, "insight", "list")["problems"]] == ["FORMAT_TOO_NEW"]
    error = moss(root, "insight", "show", insight.stem, code=4)["error"]
    assert error["code"] == "FORMAT_TOO_NEW" and "upgrade moss-files" in error["hint"]
    done = run_cli("cstack", "status", "--json", cwd=root)
    assert done.returncode == 0  # CURRENT.md is current; PLAN.md is the newer one
    done = run_cli("cstack", "plan", "--json", cwd=root)
    assert done.returncode == 4 and json.loads(done.stderr)["error"]["code"] == "FORMAT_TOO_NEW"
    inbox_list = json.loads(run_cli("needlecast", "inbox", "--json", cwd=root).stdout)
    assert [p["problem"]["code"] for p in inbox_list["problems"]] == ["FORMAT_TOO_NEW"]

    # Writes: refused, nothing written.
    assert moss(root, "update", "auth", "--tags", "x", code=4)["error"]["code"] == "FORMAT_TOO_NEW"
    assert moss(root, "task", "edit", task.stem, "--title", "Renamed", code=4)["error"]["code"] == "FORMAT_TOO_NEW"
    assert moss(root, "insight", "update", insight.stem, "--status", "discussed", code=4)["error"]["code"] == "FORMAT_TOO_NEW"
    assert json.loads(run_cli("cstack", "add", "P2: More", "--json", cwd=root).stderr)["error"]["code"] == "FORMAT_TOO_NEW"
    assert moss(root, "doc", "set", str(insight), "status=discussed", code=4)["error"]["code"] == "FORMAT_TOO_NEW"

    # moss upgrade: problems, never touched.
    report = moss(root, "upgrade")
    assert sorted(p["path"] for p in report["problems"]) == sorted(path.relative_to(root).as_posix() for path in newer)
    assert {p["code"] for p in report["problems"]} == {"FORMAT_TOO_NEW"}
    assert {path: path.read_bytes() for path in newer} == newer


def test_log_lines_of_a_newer_format_are_reported_and_the_others_read(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    log = root / ".moss/board/activity.jsonl"
    with log.open("a") as handle:
        handle.write('{"moss_format":2,"id":"EVT-NEWER","timestamp":"2026-12-01T00:00:00Z","event":"SOMETHING_NEW","payload":{}}\n')
    shown = moss(root, "board", "log")
    assert [p["code"] for p in shown["problems"]] == ["FORMAT_TOO_NEW"]
    assert shown["events"] and all(event["id"] != "EVT-NEWER" for event in shown["events"])
    chat = root / ".moss/board/chat/general.jsonl"
    with chat.open("a") as handle:
        handle.write('{"moss_format":2,"id":"MSG-NEWER","channel":"general","sender":"x","content":"?","timestamp":"2026-12-01T00:00:00Z"}\n')
    from moss_files.board.store import BoardStore

    posts, problems = BoardStore(root, persist=False).read_channel("general")
    assert [p.code for p in problems] == ["FORMAT_TOO_NEW"] and [post.id for post in posts if post.id == "MSG-NEWER"] == [] and posts
    events = one(root, ".moss/agent/sessions/*.jsonl")
    with events.open("a") as handle:
        handle.write('{"moss_format":5,"id":"01NEWER","ts":"2026-12-01T00:00:00.000Z","kind":"run.started","session":null,"run":null,"data":{}}\n')
    logs = moss(root, "agent", "logs", "--session", "last")
    assert [p["code"] for p in logs["problems"]] == ["FORMAT_TOO_NEW"]
    read_log = root / ".needlecast/read.log"
    marked = json.loads(read_log.read_text().splitlines()[0])
    with read_log.open("a") as handle:  # a mark a newer toolkit wrote is not understood, so not counted
        handle.write(json.dumps({**marked, "id": "msg-01M8DEJTHWGHR7Y8237E52A4Q9-bounce-unknown_recipient", "moss_format": 2}) + "\n")
    inbox = json.loads(run_cli("needlecast", "inbox", "--json", cwd=root).stdout)
    assert [entry["read"] for entry in inbox["messages"]][:2] == [True, False]


# --------------------------------------------------------------------------- tool edits upgrade


def changed(expected: bytes, actual: bytes) -> list[str]:
    """The lines an edit added or removed, compared with the file at the current version."""
    diff = difflib.ndiff(expected.decode().splitlines(), actual.decode().splitlines())
    return [line for line in diff if line[:2] in ("- ", "+ ")]


def only(lines: list[str], *prefixes: str) -> bool:
    return bool(lines) and all(line[2:].lstrip().startswith(prefixes) for line in lines)


def test_a_tool_edit_writes_an_older_file_at_the_current_version_changing_only_what_it_changes(tmp_path: Path) -> None:
    """Each kind a tool edits: edited through its command, the file equals the expected
    format-2 file but for the lines of the edit."""
    root = workspace(tmp_path)
    expected = {relpath: (V2 / relpath).read_bytes() for relpath in artifacts(V2)}

    def edited(relpath: str, *prefixes: str) -> None:
        now = (root / relpath).read_bytes()
        spec = formats.kind_of(relpath)
        assert spec is not None and (b"moss_format: 2" in now) == (spec.current == 2), relpath  # no marker in a file cortical-stack shares
        lines = changed(expected[relpath], now)
        assert only(lines, *prefixes), f"{relpath}: {lines}"

    task = one(root, ".moss/board/tasks/*.md").relative_to(root).as_posix()
    epic = one(root, ".moss/board/epics/*.md").relative_to(root).as_posix()
    team = one(root, ".moss/board/teams/*.md").relative_to(root).as_posix()
    proposal = one(root, ".moss/board/proposals/*.md").relative_to(root).as_posix()
    insight = one(root, ".moss/insights/*.md").relative_to(root).as_posix()
    session = one(root, ".moss/sessions/*.md").relative_to(root).as_posix()
    feedback = one(root, ".moss/feedback/*.md").relative_to(root).as_posix()

    moss(root, "update", "auth", "--tags", "auth,web,login")
    edited(".moss/capsules/default/auth.md", "tags:", "- login", "updated_at:")
    moss(root, "update", "con", "--phase", "build")  # the edit moves it to its escaped name too
    assert not (root / ".moss/capsules/default/con.md").exists()
    edited(".moss/capsules/default/%63on.md", "phase:", "updated_at:")
    moss(root, "update", "notes", "--title", "Notes")
    edited(".moss/capsules/default/notes.md", "title:", "updated_at:")
    moss(root, "task", "edit", Path(task).stem, "--priority", "HIGH")
    edited(task, "priority:", "updated:")
    moss(root, "epic", "edit", Path(epic).stem, "--notes", "Two pages.")
    edited(epic, "architecture_notes:", "updated:")
    moss(root, "team", "join", Path(team).stem, "dev-1")
    edited(team, "members:", "- dev-1", "updated:")
    moss(root, "board", "resolve", Path(proposal).stem, "APPROVED")
    edited(proposal, "status:", "resolved_by:", "resolved:")
    edited(task, "priority:", "updated:", "task_rails:", "- validate on blur")
    moss(root, "worker", "heartbeat", "--worker", "dev-1")
    edited(".moss/board/workers/dev-1.md", "heartbeat:", "updated:", "status:")
    moss(root, "insight", "update", Path(insight).stem, "--status", "discussed")
    edited(insight, "status:", "updated:")
    moss(root, "session", "end", "--session", Path(session).stem, "--learnings", "Weights matter.")
    edited(session, "## Learnings", "Weights matter.", "")
    moss(root, "session", "summary", "--summary", "A shop that sells.")
    edited(".moss/summary.md", "updated:", "A shop")
    moss(root, "doc", "set", str(root / feedback), "status=reviewed")
    edited(feedback, "status:")
    for tool, *args in (("cstack", "add", "P2: Logout #auth"), ("cstack", "remember", "Gotcha: cookies need SameSite")):
        done = run_cli(tool, *args, "--json", cwd=root)
        assert done.returncode == 0, done.stderr
    edited(".cstack/PLAN.md", "- [ ] P2: Logout", "_No tasks", "")
    edited(".cstack/MEMORY.md", "- ", "")
    done = run_cli("cstack", "done", "--reason", "shipped", "--json", cwd=root, env={"MOSS_NOW": "2026-11-28"})
    assert done.returncode == 0, done.stderr
    edited(".cstack/CURRENT.md", "> **Last Updated:**", "**Task:**", "_Nothing", "")


def test_a_routing_pass_writes_an_older_mailbox_at_the_current_version(tmp_path: Path) -> None:
    envoy, alice, bob = two_sleeves(tmp_path)
    done = run_cli("needlecast", "route", "--once", "--json", cwd=envoy)
    assert done.returncode == 0, done.stderr
    outbox = (alice / ".needlecast/outbox.md").read_bytes()
    marked = (V2 / ".needlecast/outbox.md").read_bytes()
    assert outbox == marked[: marked.index(b"---\n")]  # routed: the marked preamble is all that is left
    assert b"Still waiting to be routed." in (bob / ".needlecast/inbox.md").read_bytes()


def test_a_newer_outbox_is_held_by_the_router_never_dead_lettered(tmp_path: Path) -> None:
    envoy, alice, bob = two_sleeves(tmp_path)
    outbox = alice / ".needlecast/outbox.md"
    outbox.write_text("<!-- moss_format: 3 -->\n" + outbox.read_text())
    before = outbox.read_bytes()
    dead_before = sorted((alice / ".needlecast/dead-letters").iterdir())
    report = json.loads(run_cli("needlecast", "route", "--once", "--json", cwd=envoy).stdout)
    assert outbox.read_bytes() == before and sorted((alice / ".needlecast/dead-letters").iterdir()) == dead_before
    assert b"Still waiting" not in (bob / ".needlecast/inbox.md").read_bytes()
    assert report is not None


def test_unknown_kinds_are_refused_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest):
        service.upgrade(Context(tmp_path), kinds=["bundle"])
    assert not (tmp_path / ".moss").exists()


def test_a_newer_inbox_is_never_delivered_into_and_the_message_waits(tmp_path: Path) -> None:
    envoy, alice, bob = two_sleeves(tmp_path)
    inbox = bob / ".needlecast/inbox.md"
    inbox.write_text("<!-- moss_format: 3 -->\n" + inbox.read_text())
    before = inbox.read_bytes()
    done = run_cli("needlecast", "route", "--once", "--json", cwd=envoy)
    report = json.loads(done.stdout)
    assert [(held["recipient"], held["code"], held["line"]) for held in report["held"]] == [("bob", "FORMAT_TOO_NEW", 1)] and report["delivered"] == 0
    assert inbox.read_bytes() == before
    assert b"Still waiting to be routed." in (alice / ".needlecast/outbox.md").read_bytes()  # it waits for a newer moss-files


def test_any_rewrite_of_a_capsule_named_before_the_windows_escape_moves_it(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    moss(root, "append", "con", "--section", "Open questions", "--content", "- is the console ready?")
    moss(
        root, "store", "--name", "plans", "--workspace", "nul", "--mode", "replace", input=(V1 / ".moss/capsules/nul/plans.md").read_text().split("---\n", 2)[2]
    )
    folder = root / ".moss" / "capsules"
    assert not (folder / "default/con.md").exists() and not (folder / "nul/plans.md").exists()
    assert b"moss_format: 2" in (folder / "default/%63on.md").read_bytes() and b"moss_format: 2" in (folder / "%6Eul/plans.md").read_bytes()
    assert moss(root, "upgrade", "--kind", "capsule")["kinds"]["capsule"]["at_current"] == 2  # the two rewritten


@pytest.mark.slow
def test_a_kill_in_the_middle_leaves_every_file_whole_and_the_next_run_finishes(tmp_path: Path) -> None:
    """kill -9 while files are written: each file holds its old bytes or its new ones, never a
    mix, every file reads, and a second run upgrades what is left."""
    root = tmp_path / "big"
    tasks = root / ".moss" / "board" / "tasks"
    tasks.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    old: dict[str, bytes] = {}
    for number in range(1500):
        ident = f"TASK-20260101-{number:08d}"
        text = f"---\nid: {ident}\ntitle: Task {number}\nstatus: BACKLOG\ncreated: 2026-01-01T00:00:00Z\n---\nNumber {number}.\n"
        (tasks / f"{ident}.md").write_text(text)
        old[f".moss/board/tasks/{ident}.md"] = text.encode()
    new = {relpath: formats.plan("task", data.decode(), formats.Facts(relpath)).text.encode() for relpath, data in old.items()}
    sample = list(old)[::50]
    wanted = random.Random(7).randint(3, 20)  # of the 30 sampled files: some written, most not yet
    process = subprocess.Popen([str(BIN / "moss"), "upgrade"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: process.poll() is not None or sum((root / relpath).read_bytes() == new[relpath] for relpath in sample) >= wanted, timeout=60)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    found = {relpath: data for relpath, data in artifacts(root).items() if relpath in old}
    assert found.keys() == old.keys()
    assert all(data in (old[relpath], new[relpath]) for relpath, data in found.items())
    written = sum(1 for relpath, data in found.items() if data == new[relpath])
    assert 0 < written < len(old), written  # killed in the middle
    listed = moss(root, "task", "list")
    assert len(listed["tasks"]) == 1500 and listed.get("problems", []) == []
    assert moss(root, "upgrade")["upgraded"] == len(old) - written
    assert artifacts(root) == new

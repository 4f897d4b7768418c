"""Links planted in a workspace (as a cloned repository can plant them) are never followed.

Each test makes a real artifact with the CLI, moves its file (or folder) outside the workspace
and leaves a symbolic link in its place: exactly what `ln -s /etc/passwd
.moss/capsules/default/pw.md` does. Every read and every write of that artifact must then
fail with SYMLINK_REFUSED (exit 4), print nothing of the outside file, and leave both the link
and the outside file as they were.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from conftest import run_cli
from mcp import Client
from mcp_support import CAPSULE, anyio_backend, anyio_workers_finish  # noqa: F401  (fixtures)

from moss_files.foundation import fs
from moss_files.foundation.context import AGENT, Context
from moss_files.foundation.errors import InvalidDocument
from moss_files.mcp.server import build_server

SECRET = "SECRET-do-not-leak"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    assert run_cli("moss", "init", str(root)).returncode == 0
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def relink(path: Path, outside: Path) -> tuple[Path, bytes]:
    """Move `path` (a file or folder) outside, mark it with SECRET, and link it back."""
    target = outside / path.name
    shutil.move(str(path), str(target))
    marked = target if target.is_file() else next(p for p in sorted(target.rglob("*")) if p.is_file() and p.suffix == ".md")
    marked.write_bytes(marked.read_bytes() + f"\n{SECRET}\n".encode())
    path.symlink_to(target, target_is_directory=target.is_dir())
    return target, snapshot(target)


def snapshot(target: Path) -> bytes:
    if target.is_file():
        return target.read_bytes()
    return b"\0".join(p.relative_to(target).as_posix().encode() + b"=" + p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file())


def refused(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 4, (result.returncode, result.stdout, result.stderr)
    assert json.loads(result.stderr)["error"]["code"] == "SYMLINK_REFUSED", result.stderr
    assert SECRET not in result.stdout and SECRET not in result.stderr


def moss(root: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("moss", *args, "--json", cwd=root, input=input)


def assert_untouched(link: Path, target: Path, before: bytes) -> None:
    assert link.is_symlink() and snapshot(target) == before
    leftovers = [p.name for p in target.parent.rglob("*") if p.name.startswith(".")]
    assert leftovers == [], leftovers  # no lock or temporary file was made out there either


# --------------------------------------------------------------------------- capsules


def test_a_capsule_file_that_is_a_link_is_neither_read_nor_written(project: Path, outside: Path) -> None:
    assert moss(project, "store", "--name", "pw", input=CAPSULE).returncode == 0
    link = project / ".moss/capsules/default/pw.md"
    target, before = relink(link, outside)
    refused(moss(project, "fetch", "pw"))
    refused(moss(project, "update", "pw", "--title", "x"))
    refused(moss(project, "delete", "pw"))
    refused(moss(project, "append", "pw", "--section", "Decisions", "--content", "more"))
    listing = moss(project, "list")
    assert SECRET not in listing.stdout + listing.stderr
    assert "SYMLINK_REFUSED" in listing.stdout + listing.stderr
    assert_untouched(link, target, before)


def test_a_capsule_folder_that_is_a_link_is_not_entered(project: Path, outside: Path) -> None:
    assert moss(project, "store", "--name", "pw", input=CAPSULE).returncode == 0
    link = project / ".moss/capsules/default"
    target, before = relink(link, outside)
    refused(moss(project, "fetch", "pw"))
    refused(moss(project, "store", "--name", "other", input=CAPSULE))
    assert_untouched(link, target, before)


def test_a_capsule_is_refused_over_mcp_too(project: Path, outside: Path) -> None:
    assert moss(project, "store", "--name", "pw", input=CAPSULE).returncode == 0
    link = project / ".moss/capsules/default/pw.md"
    target, before = relink(link, outside)

    async def fetch() -> dict:
        server = build_server(Context(project, home=project.parent / "home", actor=AGENT), ())
        async with Client(server) as client:
            result = await client.call_tool("moss.fetch", {"name": "pw"})
            assert result.is_error
            assert SECRET not in json.dumps(result.structured_content)
            return result.structured_content

    body = anyio.run(fetch)
    assert body["error"]["code"] == "SYMLINK_REFUSED"
    assert_untouched(link, target, before)


# --------------------------------------------------------------------------- board, insights, sessions


def test_a_board_task_that_is_a_link_is_reported_and_never_written(project: Path, outside: Path) -> None:
    epic = json.loads(moss(project, "epic", "new", "E").stdout)["epic"]["id"]
    task = json.loads(moss(project, "task", "new", "T", "--epic", epic).stdout)["task"]["id"]
    link = project / f".moss/board/tasks/{task}.md"
    target, before = relink(link, outside)
    refused(moss(project, "task", "show", task))
    refused(moss(project, "task", "edit", task, "--title", "x"))
    listing = moss(project, "task", "list")
    assert SECRET not in listing.stdout + listing.stderr
    assert "SYMLINK_REFUSED" in listing.stdout + listing.stderr
    assert_untouched(link, target, before)


def test_a_board_folder_that_is_a_link_is_not_listed(project: Path, outside: Path) -> None:
    epic = json.loads(moss(project, "epic", "new", "E").stdout)["epic"]["id"]
    moss(project, "task", "new", "T", "--epic", epic)
    link = project / ".moss/board/tasks"
    target, before = relink(link, outside)
    listing = moss(project, "task", "list")
    assert SECRET not in listing.stdout + listing.stderr and "SYMLINK_REFUSED" in listing.stdout + listing.stderr
    refused(moss(project, "task", "new", "U", "--epic", epic))
    assert_untouched(link, target, before)


def test_insights_and_sessions_that_are_links_are_refused(project: Path, outside: Path) -> None:
    insight = json.loads(moss(project, "insight", "add", "Caches lie about mtimes").stdout)["id"]
    session = json.loads(moss(project, "session", "start", "--task", "t").stdout)["session"]["id"]
    ins_link = project / f".moss/insights/{insight}.md"
    ins_target, ins_before = relink(ins_link, outside)
    ses_link = project / f".moss/sessions/{session}.md"
    ses_target, ses_before = relink(ses_link, outside)
    refused(moss(project, "insight", "show", insight))
    refused(moss(project, "insight", "update", insight, "--status", "archived"))
    refused(moss(project, "session", "show", session))
    for listing in (moss(project, "insight", "list"), moss(project, "session", "list"), moss(project, "search", "caches")):
        assert SECRET not in listing.stdout + listing.stderr
    status = json.loads(moss(project, "index", "status").stdout)
    codes = {(p["path"], p["code"]) for p in status["problems"]}
    assert (f".moss/insights/{insight}.md", "SYMLINK_REFUSED") in codes
    assert_untouched(ins_link, ins_target, ins_before)
    assert_untouched(ses_link, ses_target, ses_before)


# --------------------------------------------------------------------------- cstack, needlecast, config


def test_memory_files_that_are_links_are_refused(project: Path, outside: Path) -> None:
    assert run_cli("cstack", "add", "P1: a task", cwd=project).returncode == 0
    plan_link = project / ".cstack/PLAN.md"
    plan_target, plan_before = relink(plan_link, outside)
    current_link = project / ".cstack/CURRENT.md"
    current_target, current_before = relink(current_link, outside)
    for args in (("plan",), ("status",), ("stats",), ("add", "another"), ("start", "1")):
        refused(run_cli("cstack", *args, "--json", cwd=project))
    assert_untouched(plan_link, plan_target, plan_before)
    assert_untouched(current_link, current_target, current_before)


def test_mailboxes_that_are_links_are_refused(project: Path, outside: Path) -> None:
    for name in ("inbox.md", "outbox.md"):
        link = project / ".needlecast" / name
        target, before = relink(link, outside)
    refused(run_cli("needlecast", "inbox", "--json", cwd=project))
    refused(run_cli("needlecast", "outbox", "--json", cwd=project))
    refused(run_cli("needlecast", "send", "--to", "bob", "hello", "--json", cwd=project))
    for name in ("inbox.md", "outbox.md"):
        assert (project / ".needlecast" / name).is_symlink()
    assert snapshot(target) == before


def test_a_workspace_config_that_is_a_link_is_refused(project: Path, outside: Path) -> None:
    link = project / ".moss/config.toml"
    target, before = relink(link, outside)
    refused(moss(project, "list"))
    assert_untouched(link, target, before)


# --------------------------------------------------------------------------- the file layer itself


def test_every_file_operation_refuses_links_inside_toolkit_folders(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".moss" / "kind").mkdir(parents=True)
    secret = tmp_path / "secret.md"
    secret.write_text(SECRET)
    link = root / ".moss" / "kind" / "a.md"
    link.symlink_to(secret)
    folder_link = root / ".moss" / "linked"
    folder_link.symlink_to(tmp_path, target_is_directory=True)
    through = folder_link / "secret.md"
    operations = [
        lambda p: fs.read_snapshot(p),
        lambda p: fs.read_bytes(p),
        lambda p: fs.read_document(p),
        lambda p: fs.write_atomic(p, b"x"),
        lambda p: fs.append_line(p, b"x"),
        lambda p: fs.modify(p, lambda snap: b"x"),
    ]
    for path in (link, through):
        for operation in operations:
            with pytest.raises(InvalidDocument) as caught:
                operation(path)
            assert caught.value.code == "SYMLINK_REFUSED", (path, caught.value)
    with pytest.raises(InvalidDocument):
        fs.create_exclusive(folder_link / "new.md", b"x")
    assert not (tmp_path / "new.md").exists()
    assert not fs.create_exclusive(link, b"x")  # a link (even a dangling one) occupies its name
    assert secret.read_text() == SECRET
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.md", "ws"]


def test_the_workspace_root_itself_may_be_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / ".moss").mkdir(parents=True)
    alias = tmp_path / "alias"
    alias.symlink_to(real, target_is_directory=True)
    fs.write_atomic(alias / ".moss" / "a.md", b"hello")
    assert fs.read_bytes(alias / ".moss" / "a.md") == b"hello"
    assert (real / ".moss" / "a.md").read_bytes() == b"hello"


def test_outside_toolkit_folders_paths_are_opened_as_given(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("x")
    (tmp_path / "alias.md").symlink_to(tmp_path / "real.md")
    assert fs.read_bytes(tmp_path / "alias.md") == b"x"


def test_the_index_never_reads_through_a_linked_folder(project: Path, outside: Path) -> None:
    """`.moss/insights -> elsewhere` (or `.moss -> elsewhere`) must not pull files from outside
    the workspace into search results; `moss index status` names the link."""
    assert moss(project, "insight", "add", "Inside the workspace").returncode == 0
    elsewhere = outside / "notes"
    elsewhere.mkdir()
    (elsewhere / "INS-20260101-leakleak.md").write_text(f"---\nid: INS-20260101-leakleak\ntype: technical\n---\n{SECRET}\n")
    insights = project / ".moss/insights"
    shutil.move(str(insights), str(outside / "real-insights"))
    insights.symlink_to(elsewhere, target_is_directory=True)
    result = moss(project, "search", SECRET)
    assert result.returncode == 0 and json.loads(result.stdout)["matches"] == []
    status = json.loads(moss(project, "index", "status").stdout)
    assert {"path": ".moss/insights", "code": "SYMLINK_REFUSED"}.items() <= next(p for p in status["problems"] if p["path"] == ".moss/insights").items()
    whole = project / ".moss"
    shutil.move(str(whole), str(outside / "moss"))
    whole.symlink_to(outside / "moss", target_is_directory=True)
    (outside / "moss" / "insights").unlink()
    (outside / "moss" / "insights").mkdir()
    (outside / "moss" / "insights" / "INS-20260101-leakleak.md").write_text(f"---\nid: INS-20260101-leakleak\ntype: technical\n---\n{SECRET}\n")
    shutil.rmtree(outside / "moss" / "cache")
    refused(run_cli("moss", "search", SECRET, "--json", "--root", str(project)))
    assert not (outside / "moss" / "cache").exists()  # no cache was written out there either

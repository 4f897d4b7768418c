"""Git as the wide-area path: two clones of one bare remote, each with a sidecar running
`--git-sync`; changes travel, the merge driver merges mailboxes, and a conflict it cannot settle
is reported in /status (never hidden) until a person resolves it."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, run_cli
from helpers import wait_for

from needlecast.sidecar import read_runtime

pytestmark = pytest.mark.slow  # real clones, real pushes, two daemons


def git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True, text=True).stdout


class Syncing:
    """A sidecar with --git-sync on one clone."""

    def __init__(self, clone: Path) -> None:
        self.clone = clone
        self.log = clone.parent / f"{clone.name}-sidecar.log"
        with open(self.log, "ab") as stderr:
            self.process = subprocess.Popen(
                [str(BIN / "needlecast"), "sidecar", "--root", str(clone), "--port", "0", "--no-route", "--git-sync", "--git-sync-interval", "0.3"],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        wait_for(self._ready, timeout=30, message=f"sidecar of {clone.name}")
        self.url = (read_runtime(clone) or {})["url"]

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"sidecar exited with {self.process.returncode}: {self.log.read_text()}")
        return (read_runtime(self.clone) or {}).get("pid") == self.process.pid

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/status", timeout=10) as response:
            body: dict[str, Any] = json.loads(response.read())
            return body

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=30) == 0


@pytest.fixture
def clones(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    first = tmp_path / "first"
    subprocess.run(["git", "clone", "-q", str(remote), str(first)], check=True, capture_output=True)
    assert run_cli("needlecast", "init", "--root", str(first), "--json").returncode == 0
    (first / ".cstack").mkdir()
    (first / ".cstack" / "notes.md").write_text("shared line\n")
    git(first, "add", "-A")
    git(first, "commit", "-q", "-m", "start")
    git(first, "push", "-q", "origin", "HEAD:main")
    second = tmp_path / "second"
    subprocess.run(["git", "clone", "-q", str(remote), str(second)], check=True, capture_output=True)
    yield first, second


def text_of(path: Path) -> str:
    """A file's text, or "" while git replaces it (a checkout deletes a file, then writes it)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def block(ident: str, sender: str) -> str:
    return f"---\nid: {ident}\nfrom: {sender}\nto: [me]\ntype: task\n---\nfrom {sender}\n\n"


def test_changes_travel_and_mailboxes_merge_through_the_driver(clones: tuple[Path, Path]) -> None:
    first, second = clones
    a = Syncing(first)
    try:
        (first / ".cstack" / "fresh.md").write_text("written in the first clone\n")
        wait_for(lambda: a.status()["git_sync"]["pushed"] >= 1, timeout=15, message="first clone pushed")
        b = Syncing(second)
        try:
            wait_for(lambda: (second / ".cstack" / "fresh.md").exists(), timeout=15, message="second clone pulled")
            # The merge writes the file before the round ends (its push check): wait for the round.
            wait_for(lambda: b.status()["git_sync"]["state"] == "ok", timeout=15, message="second clone's round done")
            # The driver is what `moss merge setup` defines, set by the sidecar in this clone.
            assert "merge driver" in git(second, "config", "--get", "merge.moss.driver")
        finally:
            b.stop()
        # Both clones add a message to the same inbox while the second one is offline.
        with open(first / ".needlecast" / "inbox.md", "a") as handle:
            handle.write(block("m-first", "ann"))
        with open(second / ".needlecast" / "inbox.md", "a") as handle:
            handle.write(block("m-second", "ben"))
        wait_for(lambda: "m-first" in git(first, "log", "-p", "-1", "--", ".needlecast/inbox.md"), timeout=15, message="first clone committed")
        b = Syncing(second)
        try:
            both = ("m-first", "m-second")
            wait_for(lambda: all(i in text_of(second / ".needlecast" / "inbox.md") for i in both), timeout=20, message="merged in the second")
            wait_for(lambda: all(i in text_of(first / ".needlecast" / "inbox.md") for i in both), timeout=20, message="merged in the first")
            wait_for(lambda: b.status()["git_sync"]["state"] == "ok", timeout=15, message="second clone's round done")
            assert b.status()["conflicts"] == []
        finally:
            b.stop()
    finally:
        a.stop()
    assert "<<<<<<<" not in (first / ".needlecast" / "inbox.md").read_text()
    # Only the toolkit's folders are committed: a user's own work is left alone.
    assert git(first, "status", "--porcelain") == ""


def test_a_conflict_is_reported_in_status_until_it_is_resolved(clones: tuple[Path, Path]) -> None:
    first, second = clones
    (second / "my-code.py").write_text("print('not the toolkit's business')\n")
    a = Syncing(first)
    try:
        (first / ".cstack" / "notes.md").write_text("changed in the first clone\n")
        wait_for(lambda: a.status()["git_sync"]["pushed"] >= 1, timeout=15, message="first pushed")
        (second / ".cstack" / "notes.md").write_text("changed in the second clone\n")
        b = Syncing(second)
        try:
            wait_for(lambda: b.status()["git_sync"]["state"] == "conflicted", timeout=20, message="conflict reported")

            # The `conflicts` part is cached up to 5 s and forgotten when the round ends, a moment
            # after git_sync's state turns: wait for the round's end there too.
            def with_markers() -> dict[str, Any] | None:
                body = b.status()
                return body if body["conflicts"] else None

            status = wait_for(with_markers, timeout=20, message="markers reported")
            assert status["git_sync"]["conflicts"] == [".cstack/notes.md"]
            assert status["git_sync"]["error"]["code"] == "MERGE_CONFLICT"
            assert [c["path"] for c in status["conflicts"]] == [".cstack/notes.md"]
            assert "<<<<<<<" in (second / ".cstack" / "notes.md").read_text()  # left for a person, as git pull leaves it
            # A person resolves it; the next round pushes the resolution.
            (second / ".cstack" / "notes.md").write_text("resolved by hand\n")
            git(second, "add", ".cstack/notes.md")
            git(second, "commit", "-q", "--no-edit")
            wait_for(lambda: b.status()["git_sync"]["state"] == "ok", timeout=20, message="sync resumed")
            wait_for(lambda: text_of(first / ".cstack" / "notes.md") == "resolved by hand\n", timeout=20, message="resolution travelled")
        finally:
            b.stop()
    finally:
        a.stop()
    assert "my-code.py" in git(second, "status", "--porcelain")  # never committed by the sync
    assert "conflicted" in (second.parent / "second-sidecar.log").read_text()


def test_git_sync_outside_a_clone_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert run_cli("needlecast", "init", "--root", str(tmp_path / "plain"), "--json").returncode == 0
    result = run_cli("needlecast", "sidecar", "--root", str(tmp_path / "plain"), "--port", "0", "--git-sync", "--json")
    assert result.returncode == 6
    assert json.loads(result.stderr.strip().splitlines()[-1])["error"]["code"] == "GIT_SYNC_FAILED"


def test_a_round_commits_no_per_machine_file_even_where_gitignore_lacks_the_lines(clones: tuple[Path, Path]) -> None:
    """A clone set up by hand (no install.sh lines in .gitignore): locks, temporaries, a
    displaced outbox waiting for its messages to be routed, the router's state and the caches
    stay out of the commit; the artifacts go."""
    import os
    from datetime import UTC, datetime

    from needlecast.gitsync import GitSync, GitSyncSettings

    first, second = clones
    ignore = first / ".gitignore"
    if ignore.exists():
        ignore.write_text("")
    per_machine = [
        ".needlecast/.outbox.md.tmp-prev-4242-0a1b2c3d",
        ".needlecast/.state/journal.jsonl",
        ".cstack/.notes.md.lock",
        ".cstack/.notes.md.tmp-4242-0a1b2c3d",
        ".moss/run/index.sock.txt",
        ".moss/cache/index.db",
        ".moss/insights/.INS-1.md.lock",
    ]
    for name in per_machine:
        (first / name).parent.mkdir(parents=True, exist_ok=True)
        (first / name).write_text("this machine's\n")
    (first / ".cstack" / "notes.md").write_text("shared line\nan artifact's change\n")
    sync = GitSync(first, GitSyncSettings(), name="first", clock=lambda: datetime.now(UTC), environ=os.environ)
    sync.sync()
    assert sync.status()["state"] == "ok", sync.status()["error"]
    committed = set(git(first, "ls-files").splitlines())
    assert ".cstack/notes.md" in committed
    assert committed.isdisjoint(per_machine)
    git(second, "pull", "-q", "origin", "main")
    assert (second / ".cstack" / "notes.md").read_text().endswith("an artifact's change\n")
    assert not any((second / name).exists() for name in per_machine)

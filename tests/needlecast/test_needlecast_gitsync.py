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


def append_mail(clone: Path, *, outbox: str, inbox: str) -> None:
    """Append a hand-written block to a clone's v1 outbox and one to its inbox."""
    for name, text in (("outbox.md", outbox), ("inbox.md", inbox)):
        with open(clone / ".needlecast" / name, "a") as handle:
            handle.write(text)


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


def _mid_merge_writer(clone: Path, script: str) -> None:
    """Make the clone's merge driver run `script` (once) before merging: a write that lands
    while a sync round merges, deterministically (a real send, a real append)."""
    wrapper = clone.parent / f"{clone.name}-driver.sh"
    marker = clone.parent / f"{clone.name}-driver.done"
    moss = BIN / "moss"
    wrapper.write_text(f'#!/bin/sh\nif [ ! -e "{marker}" ]; then\n  touch "{marker}"\n{script}\nfi\nexec "{moss}" merge driver "$@"\n')
    wrapper.chmod(0o755)
    git(clone, "config", "merge.moss.driver", f"{wrapper} %O %A %B %P")


def test_a_write_landing_while_a_round_merges_is_never_overwritten(clones: tuple[Path, Path]) -> None:
    """Issue 24: a round merged in the work tree without the mailbox locks, so a `needlecast
    send` or an append landing while git merged was overwritten by git's merged file. Here both
    land while the merge driver runs, in the middle of the round's merge."""
    import os
    from datetime import UTC, datetime

    from needlecast.gitsync import GitSync, GitSyncSettings

    first, second = clones
    append_mail(first, outbox=block("out-first", "first"), inbox=block("in-first", "ann"))
    git(first, "commit", "-q", "-am", "first's messages")
    git(first, "push", "-q", "origin", "HEAD:main")
    append_mail(second, outbox=block("out-second", "second"), inbox=block("in-second", "ben"))
    sync = GitSync(second, GitSyncSettings(), name="second", clock=lambda: datetime.now(UTC), environ=os.environ)
    sync.setup()
    sent = second.parent / "sent-mid-merge"
    _mid_merge_writer(
        second,
        f'  (cd "{second}" && "{BIN / "needlecast"}" send --to bob "sent while the round merged" > "{sent}")\n'
        f"  printf -- '---\\nid: in-mid\\nfrom: cat\\nto: [me]\\n---\\ndelivered while the round merged\\n\\n' >> \"{second}/.needlecast/inbox.md\"",
    )
    sync.sync()
    assert sync.status()["state"] == "ok", sync.status()["error"]
    sent_id = sent.read_text().strip()
    assert sent_id.startswith("msg-")
    outbox = (second / ".needlecast" / "outbox.md").read_text()
    inbox = (second / ".needlecast" / "inbox.md").read_text()
    for ident in ("out-first", "out-second", sent_id):
        assert outbox.count(f"id: {ident}\n") == 1, ident
    for ident in ("in-first", "in-second", "in-mid"):
        assert inbox.count(f"id: {ident}\n") == 1, ident
    # The next round commits what was written meanwhile; the remote then has every message.
    sync.sync()
    assert sync.status()["state"] == "ok", sync.status()["error"]
    git(first, "pull", "-q", "--no-rebase", "origin", "main")
    assert sent_id in (first / ".needlecast" / "outbox.md").read_text()
    assert "in-mid" in (first / ".needlecast" / "inbox.md").read_text()


def test_a_write_landing_while_a_conflicted_merge_runs_in_the_work_tree_is_kept(clones: tuple[Path, Path]) -> None:
    """A merge that conflicts is left in the work tree for a person, as `git pull` leaves it:
    there the round holds the mailbox files' locks (a send waits for the merge to end) and
    puts back what an agent appended without the lock while git replaced the file."""
    import os
    from datetime import UTC, datetime

    from needlecast.gitsync import GitSync, GitSyncSettings

    first, second = clones
    (first / ".cstack" / "notes.md").write_text("changed in the first clone\n")
    append_mail(first, outbox=block("out-first", "first"), inbox=block("in-first", "ann"))
    git(first, "commit", "-q", "-am", "first's work")
    git(first, "push", "-q", "origin", "HEAD:main")
    (second / ".cstack" / "notes.md").write_text("changed in the second clone\n")
    append_mail(second, outbox=block("out-second", "second"), inbox=block("in-second", "ben"))
    sync = GitSync(second, GitSyncSettings(), name="second", clock=lambda: datetime.now(UTC), environ=os.environ)
    sync.setup()
    sent = second.parent / "sent-mid-merge"
    _mid_merge_writer(
        second,
        # The send runs beside the merge (it waits for the outbox's lock); the append does not wait.
        f'  (cd "{second}" && "{BIN / "needlecast"}" send --to bob "sent while the round merged" > "{sent}.part" && mv "{sent}.part" "{sent}") &\n'
        f"  printf -- '---\\nid: in-mid\\nfrom: cat\\nto: [me]\\n---\\ndelivered while the round merged\\n\\n' >> \"{second}/.needlecast/inbox.md\"",
    )
    sync.sync()
    assert sync.status()["state"] == "conflicted"
    assert sync.status()["conflicts"] == [".cstack/notes.md"]
    sent_id = wait_for(lambda: sent.exists() and sent.read_text().strip(), timeout=20, message="the send beside the merge")
    outbox = (second / ".needlecast" / "outbox.md").read_text()
    inbox = (second / ".needlecast" / "inbox.md").read_text()
    for ident in ("out-first", "out-second", sent_id):
        assert outbox.count(f"id: {ident}\n") == 1, ident
    for ident in ("in-first", "in-second", "in-mid"):
        assert inbox.count(f"id: {ident}\n") == 1, ident


def test_a_clone_with_nothing_new_fast_forwards_and_both_settle_on_one_commit(clones: tuple[Path, Path]) -> None:
    """A round with nothing of its own to merge moves the branch as `git merge` would, without
    a merge commit: two clones that sync in turn settle on one commit instead of making a new
    merge commit for each other forever."""
    import os
    from datetime import UTC, datetime

    from needlecast.gitsync import GitSync, GitSyncSettings

    first, second = clones
    syncs = [GitSync(clone, GitSyncSettings(), name=clone.name, clock=lambda: datetime.now(UTC), environ=os.environ) for clone in (first, second)]
    with open(first / ".needlecast" / "inbox.md", "a") as handle:
        handle.write(block("in-first", "ann"))
    with open(second / ".needlecast" / "inbox.md", "a") as handle:
        handle.write(block("in-second", "ben"))
    for _turn in range(2):
        for sync in syncs:
            sync.sync()
            assert sync.status()["state"] == "ok", sync.status()["error"]
    assert git(first, "rev-parse", "HEAD") == git(second, "rev-parse", "HEAD") == git(first, "rev-parse", "origin/main")
    assert len(git(first, "rev-list", "--merges", "HEAD").split()) == 1

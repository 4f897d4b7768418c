"""`moss history` read from the path-history record (`.moss/cache/history.db`) answers exactly as
it does from git alone: the same versions, ids, `removed` flags and limits, by name and by id."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
from pathlib import Path

from conftest import BIN, run_cli
from helpers import wait_for

FULL = (
    "## Objective\nShip auth.\n\n## Current status\nHalf.\n\n## Decisions\n- JWT.\n\n## Next actions\n- Tests.\n\n"
    "## Key locations\n- src/auth.py\n\n## Open questions\n- None.\n"
)


def moss(ws: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("moss", *args, cwd=ws, input=input)


def git(ws: Path, *args: str, input: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True, text=True, input=input).stdout.strip()


def commit(ws: Path, message: str) -> None:
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", message)


def answers(ws: Path, queries: list[list[str]]) -> list[dict[str, object]]:
    found = []
    for query in queries:
        result = moss(ws, "history", *query, "--json")
        assert result.returncode == 0, result.stderr
        found.append(json.loads(result.stdout))
    return found


def test_history_from_the_record_equals_history_from_git(repo: Path) -> None:
    ws = repo
    (ws / ".moss").mkdir()
    first_id = moss(ws, "store", "--name", "auth", input=FULL).stdout.strip()
    commit(ws, "auth")
    moss(ws, "update", "auth", "--text", "-", input=FULL.replace("Half.", "Done."))
    moss(ws, "store", "--name", "billing", input=FULL.replace("auth", "billing"))
    commit(ws, "auth done, billing")
    assert moss(ws, "delete", "auth").returncode == 0  # a soft delete moves the file
    commit(ws, "retire auth")
    second_id = moss(ws, "store", "--name", "auth", input=FULL.replace("Ship", "Rework")).stdout.strip()
    commit(ws, "a new auth")
    (ws / ".moss" / "capsules" / "default" / "billing.md").write_text("no frontmatter: unreadable as a capsule\n")
    commit(ws, "billing broken by hand")
    git(ws, "rm", "-q", ".moss/capsules/default/billing.md")
    commit(ws, "billing gone")
    queries = [["auth"], ["--id", first_id], ["--id", second_id], ["billing"], ["auth", "--limit", "2"], ["--id", first_id, "--limit", "1"]]

    from_record = answers(ws, queries)
    assert (ws / ".moss" / "cache" / "history.db").is_file()
    assert git(ws, "status", "--porcelain", "--ignored=no", "--", ".moss/cache") == ""  # never in git
    assert [v["summary"] for v in from_record[0]["versions"]] == ["a new auth", "retire auth", "auth done, billing", "auth"]
    # git follows the new auth.md back through a copy of the retired one (its file under deleted/)
    assert from_record[0]["versions"][1]["path"] == f".moss/capsules/default/deleted/{first_id}.md"
    assert [v["summary"] for v in from_record[1]["versions"]] == ["retire auth", "auth done, billing", "auth"]
    billing = from_record[3]["versions"]
    assert [(v["summary"], v["removed"]) for v in billing] == [
        ("billing gone", True),
        ("billing broken by hand", False),
        ("auth done, billing", False),
        ("auth", False),
    ]
    assert answers(ws, queries) == from_record  # a second time: every id kept by the record

    # A replacement ref makes the record step aside (parents could change under it): git answers.
    one = git(ws, "hash-object", "-w", "--stdin", input="one\n")
    two = git(ws, "hash-object", "-w", "--stdin", input="two\n")
    git(ws, "replace", one, two)
    assert answers(ws, queries) == from_record


def test_the_http_daemon_builds_the_record_when_it_starts(repo: Path, tmp_path: Path) -> None:
    ws = repo
    (ws / ".moss").mkdir()
    moss(ws, "store", "--name", "auth", input=FULL)
    commit(ws, "auth")
    head = git(ws, "rev-parse", "HEAD")
    database = ws / ".moss" / "cache" / "history.db"

    def recorded_head() -> str | None:
        if not database.exists():
            return None
        with contextlib.closing(sqlite3.connect(database)) as conn:
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'head'").fetchone()
            except sqlite3.OperationalError:
                return None  # the schema is being made
        return row[0] if row else None

    with (tmp_path / "daemon.log").open("wb") as log:
        daemon = subprocess.Popen(
            [str(BIN / "moss"), "serve", "--http", "127.0.0.1:0", "--no-index-watch"], cwd=ws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
        )
    line = f"history record up to commit {head[:12]}"
    try:
        wait_for(lambda: recorded_head() == head, timeout=60, message="the daemon's history record")
        # The thread commits the record and then logs its line: a SIGTERM sent in between
        # ends the process before the line is written, so the test waits for the line too.
        wait_for(lambda: line in (tmp_path / "daemon.log").read_text(), timeout=30, message="the daemon's log line for the record")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=10)

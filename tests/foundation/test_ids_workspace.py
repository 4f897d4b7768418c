"""Ids are deterministic under an injected clock and randomness; workspaces are found like git."""

from __future__ import annotations

import random
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import BIN

from moss_files.foundation import ids, workspace
from moss_files.foundation.errors import InvalidRequest, RepoError

MOMENT = datetime(2026, 1, 21, 10, 30, tzinfo=UTC)


def test_ulids_are_deterministic_and_time_ordered() -> None:
    first = ids.IdSource(ids.fixed_clock(MOMENT), ids.seeded_random(1)).ulid()
    again = ids.IdSource(ids.fixed_clock(MOMENT), ids.seeded_random(1)).ulid()
    later = ids.IdSource(ids.fixed_clock(MOMENT.replace(minute=31)), ids.seeded_random(1)).ulid()
    assert first == again and ids.is_ulid(first)
    assert first < later


def test_ulid_text_is_python_ulids() -> None:
    """The encoder gives, for any 16 bytes, the text python-ulid gives (the form every stored
    ULID has), including the extremes of the top 3 bits and of the random part."""
    from ulid import ULID

    rng = random.Random(29)
    samples = [bytes(16), b"\xff" * 16, b"\x80" + bytes(15), bytes(15) + b"\x01"] + [rng.randbytes(16) for _ in range(500)]
    for raw in samples:
        assert ids.encode_ulid(raw) == str(ULID.from_bytes(raw))
    made = ids.IdSource(ids.fixed_clock(MOMENT), ids.seeded_random(3)).ulid()
    assert ULID.from_str(made).datetime == MOMENT


def test_prefixed_ids_carry_the_date_and_do_not_collide() -> None:
    source = ids.IdSource(ids.fixed_clock(MOMENT))
    made = {source.prefixed("INS") for _ in range(2000)}
    assert len(made) == 2000
    assert all(ids.PREFIXED_RE.match(value) and value.startswith("INS-20260121-") for value in made)
    with pytest.raises(ValueError):
        source.prefixed("bad-prefix")


def test_time_formats() -> None:
    assert ids.format_time(MOMENT) == "2026-01-21T10:30:00Z"
    assert ids.format_date(MOMENT) == "2026-01-21"


def test_discovery_walks_up_to_the_nearest_workspace(tmp_path: Path) -> None:
    outer = tmp_path / "envoy"
    sleeve = outer / "alice"
    deep = sleeve / "src" / "pkg"
    deep.mkdir(parents=True)
    (outer / ".moss").mkdir()
    (sleeve / ".needlecast").mkdir()
    assert workspace.find_workspace(deep) == sleeve.resolve()
    assert workspace.find_workspace(outer) == outer.resolve()


def test_explicit_root_wins_and_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "w" / ".cstack").mkdir(parents=True)
    assert workspace.find_workspace(tmp_path, explicit=tmp_path / "w") == (tmp_path / "w").resolve()
    with pytest.raises(InvalidRequest):
        workspace.find_workspace(tmp_path, explicit=tmp_path / "missing")


def test_no_workspace_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RepoError) as caught:
        workspace.find_workspace(tmp_path)
    assert caught.value.code == "WORKSPACE_NOT_FOUND"


@pytest.mark.parametrize(
    "command", [["moss", "list"], ["moss", "init"], ["moss", "task", "list", "--json"], ["cstack", "status"], ["needlecast", "inbox"], ["needlecast", "init"]]
)
def test_a_removed_current_directory_is_a_clear_error(tmp_path: Path, command: list[str]) -> None:
    """A shell can stand in a folder removed since (a worktree or a temporary folder): every
    command says so, with WORKSPACE_NOT_FOUND's exit status, not a traceback."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    done = subprocess.run(["sh", "-c", script, "sh", str(gone), str(BIN / command[0]), *command[1:]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 6, done.stderr
    assert "current directory no longer exists" in done.stderr and "Traceback" not in done.stderr
    assert not gone.exists()


def test_init_root_prefers_the_git_top(repo: Path) -> None:
    sub = repo / "a" / "b"
    sub.mkdir(parents=True)
    assert workspace.init_root(sub) == repo.resolve()

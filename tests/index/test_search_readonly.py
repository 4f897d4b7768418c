"""Search where the cache cannot be written: read-only mounts, for real.

These tests run as root on CI, where chmod does not stop a write, so each makes a real
read-only mount: `unshare --user --map-root-user --mount` gives the command its own mount
namespace, in which a bind mount of the cache (or of one file, or of the whole checkout) is
remounted read-only. The search must still answer, from an index built in memory, say so on
stderr, and never exit INTERNAL.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, run_cli


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _namespaces_work(),
    reason="needs `unshare --user --map-root-user --mount` (util-linux, user namespaces enabled) to make a real read-only mount",
)


@pytest.fixture
def project(repo: Path) -> Path:
    assert run_cli("moss", "init", str(repo)).returncode == 0
    assert run_cli("moss", "insight", "add", "The cache lies about mtimes", cwd=repo).returncode == 0
    assert run_cli("moss", "search", "cache", cwd=repo).returncode == 0  # builds .moss/cache/index.db
    assert run_cli("moss", "insight", "add", "A second insight, about mirrors", cwd=repo).returncode == 0  # now stale
    return repo


def search_read_only(
    root: Path, *, read_only: list[Path], writable_over: list[tuple[Path, Path]] = (), args: tuple[str, ...] = ("search", "mirrors")
) -> subprocess.CompletedProcess[str]:
    """Run `moss ARGS --json` in a mount namespace where each of `read_only` is mounted
    read-only and each (source, target) of `writable_over` is bound, writable, on top."""
    steps = [f"mount --bind {shlex.quote(str(p))} {shlex.quote(str(p))} && mount -o remount,ro,bind {shlex.quote(str(p))}" for p in read_only]
    steps += [f"mount --bind {shlex.quote(str(src))} {shlex.quote(str(dst))}" for src, dst in writable_over]
    command = " ".join(shlex.quote(part) for part in (str(BIN / "moss"), *args, "--json"))
    script = " && ".join([*steps, f"exec {command}"])
    return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script], cwd=root, capture_output=True, text=True, timeout=120)


def found(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert "cannot be written" in result.stderr or "cannot write" in result.stderr  # it says why
    return [match["summary"] for match in json.loads(result.stdout)["matches"]]


def test_a_read_only_cache_folder_searches_in_memory(project: Path) -> None:
    cache = project / ".moss/cache"
    before = {p.name: p.read_bytes() for p in cache.iterdir()}
    summaries = found(search_read_only(project, read_only=[cache]))
    assert any("mirrors" in summary for summary in summaries)  # the stale index was not trusted
    assert {p.name: p.read_bytes() for p in cache.iterdir()} == before


def test_a_stale_read_only_index_file_searches_in_memory(project: Path) -> None:
    """The folder is writable but the database file is not: SQLite opens it read-only and
    the refresh's first write fails with 'attempt to write a readonly database'."""
    index = project / ".moss/cache/index.db"
    before = index.read_bytes()
    summaries = found(search_read_only(project, read_only=[index]))
    assert any("mirrors" in summary for summary in summaries)
    assert index.read_bytes() == before


def test_a_read_only_cache_folder_without_an_index_searches_in_memory(project: Path, tmp_path: Path) -> None:
    """The lock files can be opened (they are writable, bound over the read-only folder) but no
    index can be created beside them: once an unhandled sqlite3 error, exit 1 INTERNAL."""
    cache = project / ".moss/cache"
    for leftover in cache.glob("index.db*"):
        leftover.unlink()
    spare = tmp_path / "locks"
    spare.mkdir()
    overlays = []
    for lock in sorted(cache.glob("*.lock")):
        (spare / lock.name).touch()
        overlays.append((spare / lock.name, lock))
    assert overlays, "the first search should have left its lock files"
    summaries = found(search_read_only(project, read_only=[cache], writable_over=overlays))
    assert any("mirrors" in summary for summary in summaries)
    assert not list(cache.glob("index.db*"))


def test_a_read_only_checkout_without_a_cache_folder_searches_and_reports_status(project: Path) -> None:
    shutil.rmtree(project / ".moss/cache")
    summaries = found(search_read_only(project, read_only=[project]))
    assert any("mirrors" in summary for summary in summaries)
    status = search_read_only(project, read_only=[project], args=("index", "status"))
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["by_kind"]["insight"] == 2
    assert not (project / ".moss/cache").exists()

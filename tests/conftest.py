"""Shared fixtures: an isolated environment, real git repositories, CLI runners."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests run a few hundred examples by default; HYPOTHESIS_PROFILE=thorough runs many more.
settings.register_profile("default", max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.register_profile("thorough", max_examples=20000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep tests away from the developer's git config, home and workspace variables."""
    home = tmp_path_factory.mktemp("home")
    (home / "gitconfig").write_text("[user]\n\tname = Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in list(os.environ):
        if name.startswith(("MOSS_", "NEEDLECAST_", "CSTACK_", "MOE_")) or name == "LOG_LEVEL":
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def no_thread_leaks() -> None:
    """Fail a test that leaves threads running (observers, servers, workers)."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
    assert not leaked, f"threads left running: {leaked}"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh git repository (no commits) to act as a project."""
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    return root


def run_cli(tool: str, *args: str, cwd: Path | None = None, input: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of our console scripts (`moss`, `cstack`, `needlecast`) as a real process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [str(BIN / tool), *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )

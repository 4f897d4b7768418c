"""install.sh end to end: real bash, real venv and pip, real git projects in tmp_path.

The pip install is slow, so one module-scoped install (from a frozen copy of the checkout, so
concurrent edits to the working tree cannot change what a rerun sees) serves the tests that
need the tools; the error paths run the checkout's install.sh and stop before installing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_scaffold import snapshot

from moss_files import __version__, scaffold

pytestmark = pytest.mark.slow  # a real install: a virtualenv and pip

REPO = Path(__file__).resolve().parent.parent.parent
BASH = shutil.which("bash") or "/bin/bash"
TOOLS = ("moss", "cstack", "needlecast")
EXIT_USAGE, EXIT_PREREQ, EXIT_TARGET, EXIT_INSTALL, EXIT_SCAFFOLD = 2, 3, 4, 5, 6


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """The caller's environment minus anything that would point at a developer's setup."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOSS_", "CSTACK_", "NEEDLECAST_", "XDG_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    home.mkdir(parents=True, exist_ok=True)
    (home / "gitconfig").write_text("[user]\n\tname = Test\n\temail = test@example.invalid\n")
    env.update(HOME=str(home), GIT_CONFIG_GLOBAL=str(home / "gitconfig"), GIT_CONFIG_NOSYSTEM="1")
    env.update(extra)
    return env


def run_install(script: Path, *args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, str(script), *args], env=env, capture_output=True, text=True, timeout=timeout)


def git_init(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def copy_checkout(dest: Path) -> Path:
    """The files install.sh installs from, copied so the source is frozen for this module."""
    dest.mkdir(parents=True)
    for name in ("install.sh", "pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, dest / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in ("moss_files", "cstack", "needlecast", "templates"):
        shutil.copytree(REPO / folder, dest / folder, ignore=skip)
    return dest


@dataclass(frozen=True)
class Installed:
    src: Path
    moss_home: Path
    bin_dir: Path
    env: dict[str, str]
    project: Path
    first: subprocess.CompletedProcess[str]

    @property
    def script(self) -> Path:
        return self.src / "install.sh"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("install")
    src = copy_checkout(root / "src")
    env = base_env(root / "home", MOSS_HOME=str(root / "moss-home"), MOSS_BIN_DIR=str(root / "bin"))
    project = git_init(root / "project")
    first = run_install(src / "install.sh", "--agent", "claude", "--agent", "codex", str(project), env=env)
    yield Installed(src, root / "moss-home", root / "bin", env, project, first)


def test_fresh_project_gets_tools_and_scaffold(installed: Installed) -> None:
    assert installed.first.returncode == 0, installed.first.stderr
    assert installed.first.stdout == "", "progress and summary go to stderr"
    for tool in TOOLS:
        link = installed.bin_dir / tool
        assert link.is_symlink() and Path(os.readlink(link)) == installed.moss_home / "venv" / "bin" / tool
    version = subprocess.run([str(installed.bin_dir / "moss"), "version", "--json"], capture_output=True, text=True, env=installed.env)
    assert version.returncode == 0, version.stderr
    assert json.loads(version.stdout) == {"version": __version__}

    # The templates come from the installed wheel, not from the checkout it was built from.
    where = subprocess.run(
        [
            str(installed.moss_home / "venv" / "bin" / "python"),
            "-I",
            "-c",
            "import importlib.resources as r; print(r.files('moss_files.templates'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(installed.moss_home)
    for part in scaffold.PARTS:
        folder = installed.src / "templates" / part
        for template in (p for p in folder.rglob("*") if p.is_file()):
            placed = installed.project / f".{part}" / template.relative_to(folder)
            assert placed.read_bytes() == template.read_bytes()
            assert (Path(where) / part / template.relative_to(folder)).read_bytes() == template.read_bytes()

    ignore = (installed.project / ".gitignore").read_text().splitlines()
    assert {line for p in scaffold.PARTS for line in scaffold.GITIGNORE_LINES[p]} <= set(ignore)
    attributes = (installed.project / ".gitattributes").read_text().splitlines()
    assert {line for p in scaffold.PARTS for line in scaffold.GITATTRIBUTES_LINES[p]} <= set(attributes)
    for notes in ("CLAUDE.md", "AGENTS.md"):
        assert f'<!-- moss-files:begin version="{__version__}" -->' in (installed.project / notes).read_text()


def test_second_run_writes_nothing(installed: Installed) -> None:
    places = (installed.project, installed.moss_home, installed.bin_dir)
    before = [snapshot(place) for place in places]
    again = run_install(installed.script, "--agent", "claude", "--agent", "codex", str(installed.project), env=installed.env)
    assert again.returncode == 0, again.stderr
    assert [snapshot(place) for place in places] == before


def test_existing_user_files_are_kept(installed: Installed, tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    (project / ".cstack").mkdir()
    (project / ".cstack" / "PLAN.md").write_bytes(b"# my plan\n\n- [ ] keep me\n")
    (project / ".gitignore").write_bytes(b"node_modules/\n.moss/cache/")
    result = run_install(installed.script, str(project), env=installed.env)
    assert result.returncode == 0, result.stderr
    assert (project / ".cstack" / "PLAN.md").read_bytes() == b"# my plan\n\n- [ ] keep me\n"
    ignore = (project / ".gitignore").read_bytes()
    assert ignore.startswith(b"node_modules/\n.moss/cache/\n")
    lines = ignore.decode().splitlines()
    assert lines.count(".moss/cache/") == 1
    assert {line for p in scaffold.PARTS for line in scaffold.GITIGNORE_LINES[p]} <= set(lines)
    templates = installed.src / "templates" / "cstack"
    for other in (p.name for p in templates.iterdir() if p.name != "PLAN.md"):
        assert (project / ".cstack" / other).read_bytes() == (templates / other).read_bytes()


def test_dry_run_writes_nothing_anywhere(installed: Installed, tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    (project / "CLAUDE.md").write_text("mine\n")
    env = base_env(tmp_path / "home", MOSS_HOME=str(tmp_path / "moss-home"), MOSS_BIN_DIR=str(tmp_path / "bin"))
    before = (snapshot(project), snapshot(installed.src), snapshot(tmp_path / "home"))
    result = run_install(installed.script, "--dry-run", "--agent", "claude", str(project), env=env)
    assert result.returncode == 0, result.stderr
    assert (snapshot(project), snapshot(installed.src), snapshot(tmp_path / "home")) == before
    assert not (tmp_path / "moss-home").exists() and not (tmp_path / "bin").exists()
    for path in (".moss/config.toml", ".cstack", ".gitignore", ".gitattributes", "CLAUDE.md"):
        assert path in result.stderr


def test_no_tool_only_scaffolds(tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    env = base_env(tmp_path / "home", MOSS_HOME=str(tmp_path / "moss-home"), MOSS_BIN_DIR=str(tmp_path / "bin"))
    result = run_install(REPO / "install.sh", "--no-tool", str(project), env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (project / ".moss" / "config.toml").is_file() and (project / ".gitignore").is_file()
    assert not (tmp_path / "moss-home").exists() and not (tmp_path / "bin").exists()


# --- refusals ---------------------------------------------------------------------------------


def refuse(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = base_env(tmp_path / "home", MOSS_HOME=str(tmp_path / "moss-home"), MOSS_BIN_DIR=str(tmp_path / "bin"))
    env.update(extra)
    result = run_install(REPO / "install.sh", *args, env=env, timeout=120)
    assert not (tmp_path / "moss-home").exists(), "a refused run must not start installing"
    return result


@pytest.mark.parametrize(
    "args",
    [(), ("--frobnicate", "x"), ("a", "b"), ("--agent", "vim", "x"), ("--agent",)],
    ids=["no-target", "unknown-option", "two-targets", "unknown-agent", "agent-without-value"],
)
def test_usage_errors(tmp_path: Path, args: tuple[str, ...]) -> None:
    assert refuse(tmp_path, *args).returncode == EXIT_USAGE


def test_help_exits_zero(tmp_path: Path) -> None:
    result = refuse(tmp_path, "--help")
    assert result.returncode == 0 and "install.sh" in result.stdout


def test_missing_target(tmp_path: Path) -> None:
    assert refuse(tmp_path, str(tmp_path / "nowhere")).returncode == EXIT_TARGET


def test_target_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert refuse(tmp_path, str(tmp_path / "file")).returncode == EXIT_TARGET
    assert (tmp_path / "file").read_text() == "x"


def path_without(tmp_path: Path, *prefixes: str) -> str:
    """A PATH holding links to every program of the current PATH except names with `prefixes`."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not folder or not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            if entry.name.startswith(prefixes) or (fake / entry.name).exists():
                continue
            if entry.is_file() and os.access(entry.path, os.X_OK):
                (fake / entry.name).symlink_to(entry.path)
    return str(fake)


def test_missing_git(tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    result = refuse(tmp_path, "--no-tool", str(project), PATH=path_without(tmp_path, "git"))
    assert result.returncode == EXIT_PREREQ
    assert sorted(p.name for p in project.iterdir()) == [".git"]


def test_missing_python(tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    result = refuse(tmp_path, "--no-tool", str(project), PATH=path_without(tmp_path, "python3"))
    assert result.returncode == EXIT_PREREQ


def test_python_too_old(tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    old = tmp_path / "python3.9"
    # Stands in for an old interpreter: its version check fails like 3.9's would.
    old.write_text(f'#!{BASH}\n[ "$1" = -c ] && case "$2" in *version_info*) exit 1;; esac\nexit 1\n')
    old.chmod(0o755)
    assert refuse(tmp_path, "--no-tool", str(project), MOSS_PYTHON=str(old)).returncode == EXIT_PREREQ


def test_foreign_file_in_bin_dir_is_never_replaced(tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "cstack").write_text("someone else's\n")
    result = refuse(tmp_path, str(project))
    assert result.returncode == EXIT_INSTALL
    assert (tmp_path / "bin" / "cstack").read_text() == "someone else's\n"
    assert sorted(p.name for p in project.iterdir()) == [".git"]


def test_scaffold_failure_is_reported_and_damages_nothing(tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    (project / ".moss").write_text("a file where the folder goes\n")
    before = snapshot(project)
    result = refuse(tmp_path, "--no-tool", str(project))
    assert result.returncode == EXIT_SCAFFOLD
    assert snapshot(project) == before


def read_only(target: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run `command` while `target` is read-only: chmod for a normal user; for root, whom
    permission bits don't stop, a read-only bind mount in a private mount namespace."""
    if os.geteuid() != 0:
        target.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=120)
        finally:
            target.chmod(stat.S_IRWXU)
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root, where chmod does not stop writes, and no private mount namespace (unshare -m) for a read-only bind mount")
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" || exit 99; shift; exec "$@"'
    result = subprocess.run(
        [unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", str(target), *command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode == 99:
        pytest.skip(f"running as root and a read-only bind mount is not permitted here: {result.stderr.strip()}")
    return result


def test_read_only_target(tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    env = base_env(tmp_path / "home", MOSS_HOME=str(tmp_path / "moss-home"), MOSS_BIN_DIR=str(tmp_path / "bin"))
    command = ["env", *(f"{k}={v}" for k, v in env.items()), BASH, str(REPO / "install.sh"), "--no-tool", str(project)]
    result = read_only(project, command)
    assert result.returncode == EXIT_TARGET, result.stderr
    assert sorted(p.name for p in project.iterdir()) == [".git"]


def test_scaffold_reports_a_read_only_project_with_a_code(tmp_path: Path) -> None:
    project = git_init(tmp_path / "project")
    command = ["env", f"PYTHONPATH={REPO}", sys.executable, "-S", "-B", "-m", "moss_files.scaffold", "--json", str(project)]
    result = read_only(project, command)
    assert result.returncode == 6, result.stderr
    assert json.loads(result.stderr.strip().splitlines()[-1])["error"]["code"] == "NOT_WRITABLE"
    assert sorted(p.name for p in project.iterdir()) == [".git"]

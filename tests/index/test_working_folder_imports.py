"""The processes the toolkit starts with its own interpreter (a build's workers, the index
watcher, the web daemon, the agent's own MCP server) import this toolkit, never a
`moss_files` folder that happens to lie in the working folder: a project anyone may have
written is where these commands run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from moss_files.index import service

PACKAGES = ("moss_files", "cstack", "needlecast")
REPO = Path(__file__).resolve().parents[2]


def _hostile_folder(where: Path, marker: Path) -> None:
    """A working folder whose `moss_files` package leaves `marker` when anything imports it."""
    package = where / "moss_files"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\nraise SystemExit(9)\n", encoding="utf-8")


def test_a_parallel_builds_workers_ignore_a_moss_files_folder_in_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    insights = root / ".moss" / "insights"
    insights.mkdir(parents=True)
    for number in range(2100):  # three chunks of the build: two workers get work
        (insights / f"i{number:05d}.md").write_text(f"---\nid: i{number:05d}\ntitle: insight {number}\n---\nbody {number}\n", encoding="utf-8")
    marker = tmp_path / "imported-from-the-working-folder"
    hostile = tmp_path / "project"
    _hostile_folder(hostile, marker)
    monkeypatch.chdir(hostile)
    index = service.open_index(service.Context(root))
    index.build_workers = 2
    report = index.rebuild()
    assert report.files == 2100
    assert not marker.exists(), "a build worker imported the working folder's moss_files package"


def test_every_process_started_with_this_interpreter_keeps_the_working_folder_off_its_path() -> None:
    """`python -c` and `python -m` put the working folder first on the import path; every
    such start in the toolkit passes -P (Python 3.11) to keep it off."""
    unsafe = re.compile(r"sys\.executable\s*,\s*\(?\s*\"-[cm]\"")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if unsafe.search(line)
    ]
    assert found == []

"""The walk that vouches for the index without a watcher, while another process writes: a file
removed between the folder's listing and its stat is gone (never an error), and once the writer
stops, the index answers what the files say."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from moss_files.index import scan, service, sources
from tests.helpers import wait_for

FILES = 3000

# Another process saving files the way editors and scripts do that write no temp file: remove
# the file, then write it anew under the same name. Between the two the name is gone; a walk
# that listed the folder before the removal stats a name that no longer exists.
CHURN = """
import os, sys
folder, stop, started = sys.argv[1], sys.argv[2], sys.argv[3]
names = sorted(name for name in os.listdir(folder) if name.endswith(".md"))
step = 0
while not os.path.exists(stop):
    path = os.path.join(folder, names[step % len(names)])
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    os.unlink(path)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace("version", "version.", 1))
    step += 1
    if step == 50:
        open(started, "w").close()
"""


def insight(number: int) -> str:
    return f"---\nid: INS-{number:05d}\ntype: technical\n---\nThe quokka note, version {number}.\n"


def snapshot(root: Path, *, rebuild: bool = False) -> dict[str, object]:
    index = service.open_index(service.Context(root))
    index.ask_watcher = False  # the walking path, whatever runs on this machine
    if rebuild:
        index.rebuild()
    else:
        index.run(lambda view: None)
    return index.run(lambda view: view.snapshot(), refresh=False)


@pytest.mark.slow
def test_walks_beside_a_process_that_removes_and_rewrites_files_succeed_and_end_equal_to_the_files(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    folder = root / ".moss" / "insights"
    folder.mkdir(parents=True)
    for number in range(FILES):
        (folder / f"INS-{number:05d}.md").write_text(insight(number), encoding="utf-8")
    snapshot(root, rebuild=True)
    registry = sources.default_registry()
    stop, started = tmp_path / "stop", tmp_path / "started"
    writer = subprocess.Popen([sys.executable, "-c", CHURN, str(folder), str(stop), str(started)])
    try:
        wait_for(started.exists, timeout=30, message="the writer's first saves")
        walks = refreshes = 0
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline or walks < 20:
            tree = scan.walk(root, registry)  # raised FileNotFoundError before the fix
            assert len(tree.paths) == len(tree.sigs) <= FILES
            assert all(path.startswith(".moss/insights/INS-") for path in tree.paths)
            walks += 1
            if walks % 5 == 0:
                snapshot(root)  # a whole refresh, as `moss search` makes without a watcher
                refreshes += 1
        assert writer.poll() is None, "the writer stopped early: the walks raced nothing"
    finally:
        stop.touch()
        writer.wait(timeout=30)
    assert writer.returncode == 0
    # The writer is done: every file is back, and a walking refresh gives what a build from
    # the files gives.
    final = scan.walk(root, registry)
    assert sorted(final.paths) == [f".moss/insights/INS-{number:05d}.md" for number in range(FILES)]
    assert snapshot(root) == snapshot(root, rebuild=True)

"""The session-start orientation while another sleeve rewrites, archives and moves capsules: a
capsule (or a workspace folder) gone between its listing and its stat or read is left out, and
the newest capsule still present is shown; the part is never dropped over the race."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from moss_files.foundation.context import Context
from moss_files.hooks import events
from tests.helpers import wait_for

CAPSULES = 200

# Another process saving capsules by remove-then-write (the rewritten one becomes the newest,
# so the orientation reads exactly the name that keeps vanishing), and moving a second
# workspace's folder away and back, as an archive or a rename would.
CHURN = """
import os, sys
folder, spare, stop, started = sys.argv[1:5]
names = sorted(name for name in os.listdir(folder) if name.endswith(".md"))
step = 0
while not os.path.exists(stop):
    path = os.path.join(folder, names[step % len(names)])
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    os.unlink(path)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.rename(spare, spare + ".away")
    os.rename(spare + ".away", spare)
    step += 1
    if step == 50:
        open(started, "w").close()
"""


def capsule(number: int) -> str:
    return f"---\ntitle: Handoff {number}\nupdated_at: 2026-11-28T07:00:00Z\n---\n## Objective\nStep {number}.\n"


@pytest.mark.slow
def test_the_newest_capsule_is_shown_while_another_process_rewrites_and_moves_capsules(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    folder = root / ".moss" / "capsules" / "default"
    spare = root / ".moss" / "capsules" / "spare"
    folder.mkdir(parents=True)
    spare.mkdir()
    for number in range(CAPSULES):
        (folder / f"c{number:04d}.md").write_text(capsule(number), encoding="utf-8")
    (spare / "old.md").write_text(capsule(9999), encoding="utf-8")
    stop, started = tmp_path / "stop", tmp_path / "started"
    writer = subprocess.Popen([sys.executable, "-c", CHURN, str(folder), str(spare), str(stop), str(started)])
    try:
        wait_for(started.exists, timeout=30, message="the writer's first saves")
        ctx = Context(root)
        turns = 0
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline or turns < 50:
            facts, _ = events.gather_facts(ctx, source="startup", state=None, started=time.monotonic(), deadline=60.0)
            assert facts.skipped == ()  # said "capsules (FileNotFoundError)" or "(NOT_FOUND)" before the fix
            assert facts.capsule is not None
            assert facts.capsule["workspace"] in ("default", "spare")
            assert str(facts.capsule["title"]).startswith("Handoff") or facts.capsule["title"] is None
            turns += 1
        assert writer.poll() is None, "the writer stopped early: the orientation raced nothing"
    finally:
        stop.touch()
        writer.wait(timeout=30)
    assert writer.returncode == 0

"""The web view's file watcher (moss_files.web.watch): it stops quietly, also amid changes."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from moss_files.web.watch import Watcher

INACTIVE = "InotifyEmitter.queue_events() called when the thread is inactive"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".moss" / "capsules" / "default").mkdir(parents=True)
    (root / ".moss" / "run").mkdir()
    return root


def test_watchdogs_complaint_about_a_stopping_thread_is_not_shown(workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A clean SIGTERM of `moss serve --http` printed watchdog's `ERROR InotifyEmitter.
    queue_events() called when the thread is inactive` after `moss serve: stopped`: an event
    that arrives while the observer stops (the daemon's own record file is removed just then)
    makes watchdog log it. It means nothing lost; the watcher keeps it off the user's stderr."""
    watcher = Watcher(workspace, lambda kinds: None)
    watcher.start()
    try:
        with caplog.at_level(logging.DEBUG):
            logging.getLogger("watchdog.observers.inotify").error(INACTIVE)  # as watchdog logs it
            logging.getLogger("watchdog.observers.inotify").error("some other trouble")
    finally:
        watcher.stop()
    messages = [record.getMessage() for record in caplog.records]
    assert INACTIVE not in messages and "some other trouble" in messages


def test_stopping_amid_a_burst_of_changes_logs_nothing(workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = workspace / ".moss" / "capsules" / "default"
    with caplog.at_level(logging.DEBUG, logger="watchdog"):
        for _round in range(15):
            seen = threading.Event()
            watcher = Watcher(workspace, lambda kinds: seen.set())
            watcher.start()
            done = threading.Event()

            def churn() -> None:
                count = 0
                while not done.is_set():
                    (folder / f"c{count % 4}.md").write_text(str(count))
                    count += 1

            writers = [threading.Thread(target=churn) for _ in range(3)]
            for writer in writers:
                writer.start()
            try:
                assert seen.wait(10), "the watcher saw no change"
            finally:
                watcher.stop()  # while the writers still write
                done.set()
                for writer in writers:
                    writer.join()
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []

"""Test helpers: deadline-based waiting, and a run killed at a chosen system call."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.01, message: str = "condition") -> T:
    """Poll `predicate` until it returns a truthy value or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def killed_at(step: int, calls: tuple[str, ...], action: Callable[[], object]) -> bool:
    """Run `action` in a forked child that SIGKILLs itself just before its `step`-th call of
    any of the `os` functions named in `calls` (the durable steps of a write); True if it died
    there, False if `action` finished first. No timing is involved, so each step is reached.
    "renameat2" names moss-files' own renameat2 call (`fs.renameat2`, the C library's, which no
    `os` function reaches)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns to pytest
        counted = [0]

        def crashing(real):  # type: ignore[no-untyped-def]
            def call(*args, **kwargs):  # type: ignore[no-untyped-def]
                counted[0] += 1
                if counted[0] == step:
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(*args, **kwargs)

            return call

        try:
            for name in calls:
                if name == "renameat2":
                    from moss_files.foundation import fs

                    fs.renameat2 = crashing(fs.renameat2)  # type: ignore[method-assign]
                else:
                    setattr(os, name, crashing(getattr(os, name)))
            action()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)

"""Fixtures and helpers shared by the MCP server tests (imported by each test_mcp*.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from moss_files import scaffold

CAPSULE = """## Objective
Ship the login flow.

## Current status
Endpoints done; UI pending.

## Decisions
- Sessions in cookies.

## Next actions
- Build the form.

## Key locations
- src/auth/

## Open questions
- (none)
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def anyio_workers_finish() -> Iterator[None]:
    """Wait (with a deadline) for the SDK's worker threads to end after the event loop closed.

    The server runs sync tools on AnyIO worker threads; they are told to stop when the test's
    event loop ends but exit a moment later, after the thread-leak check would look.
    """
    yield
    for thread in threading.enumerate():
        if thread.name == "AnyIO worker thread":
            thread.join(timeout=5)


def make_workspace(root: Path) -> Path:
    """A project folder with .cstack/, .needlecast/ and .moss/ as `moss init` makes them."""
    root.mkdir(parents=True, exist_ok=True)
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    return root

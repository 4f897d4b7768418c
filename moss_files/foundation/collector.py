"""The interpreter's cyclic garbage collector, paused while bulk work runs. Edge layer: the
collector is the process's.

Bulk work (an import of capsules, a migration of a tracker's issues) makes a few objects per
item and keeps most of them to the end, almost none in reference cycles; yet every 700
allocations start a collection, and each full one walks every object alive, so their cost
grows with the work done: 7% of a capsule import's CPU at 100,000 capsules, 14% of a Beads
migration's. What reference counting cannot free waits until the work returns.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic collector (turned back on after, if it was on). The switch is the
    process's: in a server, other threads go without collections for that time too."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()

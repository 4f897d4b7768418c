"""The interpreter's cyclic garbage collector, paused while bulk work runs. Edge layer: the
collector is the process's.

Bulk work (an import of capsules, a migration of a tracker's issues) makes a few objects per
item and keeps most of them to the end, almost none in reference cycles; yet every 700
allocations start a collection, and each full one walks every object alive, so their cost
grows with the work done: 7% of a capsule import's CPU at 100,000 capsules, 14% of a Beads
migration's. What reference counting cannot free waits until the work returns.

Then what the work made is still alive, all of it in the youngest generation, which the first
collection after walks whole (0.4 s after 100,000 Beads issues, before their report is printed),
and the next ones again as it ages. So it joins the oldest generation instead, as if it had
survived those collections, without one walking it: still collected when a full collection
finds it is garbage.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic collector (turned back on after, if it was on, with the objects alive
    moved to the oldest generation). The switch is the process's: in a server, other threads
    go without collections for that time too, and their objects age with the work's."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            # freeze moves every tracked object to the permanent generation, unfreeze moves
            # them all to the oldest: two list splices, no object visited. (What was frozen
            # before goes to the oldest generation too; only an exit freezes, cli.streams.)
            gc.freeze()
            gc.unfreeze()
            gc.enable()

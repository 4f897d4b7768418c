"""The interpreter's cyclic garbage collector, paused while bulk work runs and kept off what a
server keeps. Edge layer: the collector is the process's.

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

A long-lived process that keeps a large structure (a server's board) retires it from the walks
altogether once it is built (`retire_alive`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic collector (turned back on after, if it was on, with the objects alive
    moved to the oldest generation; in a process that retired objects (`retire_alive`), left
    where they are, so that nothing retired comes back and nothing new is retired).
    The switch is the process's: in a server, other threads go without collections for that
    time too, and their objects age with the work's."""
    was_on = gc.isenabled()
    retired = gc.get_freeze_count() > 0
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            # freeze moves every tracked object to the permanent generation, unfreeze moves
            # them all to the oldest: two list splices, no object visited. In a process that
            # retired objects already (`retire_alive`), unfreezing would hand those back to
            # the collector's walks, and freezing alone would keep the work's garbage in
            # cycles for good: what the work made then ages as any new objects do.
            if not retired:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def retire_alive() -> None:
    """Take every object alive now out of the collector's walks for good (`gc.freeze`), for a
    long-lived process that has just built a large structure it keeps (a server's board: a few
    objects per file, tens of thousands of them). A full collection walks every tracked object
    alive; without this, each one in such a process costs in proportion to what it keeps, not
    to what it made since, and falls inside whatever request is running (70 ms at 20,000 board
    tasks on a slow machine, in the middle of a claim).

    What is retired is still freed by reference counting when dropped; only reference cycles
    among it are never collected, so a caller retires what it means to keep: the structure,
    built of plain values, just after it is built. The switch is the process's: garbage in
    cycles that is alive at that moment, anywhere in the process, is kept too."""
    gc.freeze()

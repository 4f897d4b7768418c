"""The cyclic collector paused for bulk work (foundation.collector)."""

from __future__ import annotations

import gc
import weakref

from moss_files.foundation import collector


class _Node:
    """An object that can hold itself: a reference cycle only the collector frees."""

    def __init__(self) -> None:
        self.itself = self


def test_what_bulk_work_leaves_alive_joins_the_oldest_generation_and_is_still_collected() -> None:
    """After a pause, what the work made is in the oldest generation (no collection has to walk
    it as young objects), not frozen: a cycle among it is collected once it is garbage."""
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        made = [[number] for number in range(1000)]
        node = _Node()
        gone = weakref.ref(node)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    young = {id(found) for generation in (0, 1) for found in gc.get_objects(generation=generation)}
    oldest = {id(found) for found in gc.get_objects(generation=2)}
    assert not any(id(item) in young for item in made) and all(id(item) in oldest for item in made)
    del node
    gc.collect()
    assert gone() is None


def test_a_pause_leaves_the_collector_off_where_the_caller_turned_it_off() -> None:
    gc.disable()
    try:
        with collector.paused():
            made = [[number] for number in range(10)]
        assert not gc.isenabled() and len(made) == 10
    finally:
        gc.enable()

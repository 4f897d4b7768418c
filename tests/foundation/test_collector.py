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


# In a child process: retiring is the process's, and pytest's own objects must not be retired.
RETIRING = r"""
import gc, json, weakref
from moss_files.foundation import collector

class Plain:
    pass

kept = [Plain() for _ in range(500)]
dropped = Plain()
gone = weakref.ref(dropped)
collector.retire_alive()
retired = gc.get_freeze_count()
del dropped
freed = gone() is None  # by reference counting: no collection ran
class Cycle:
    def __init__(self):
        self.itself = self

with collector.paused():
    made = [[n] for n in range(1000)]
    cycle = weakref.ref(Cycle())
after_pause = gc.get_freeze_count()
walked = {id(o) for g in (0, 1, 2) for o in gc.get_objects(generation=g)}
gc.collect()
print(json.dumps({"retired": retired, "freed": freed, "after_pause": after_pause, "made_walked": sum(id(m) in walked for m in made),
                  "kept_walked": sum(id(k) in walked for k in kept), "cycle_collected": cycle() is None}))
"""


def test_retired_objects_leave_every_walk_are_still_freed_and_a_later_pause_neither_returns_nor_adds_any() -> None:
    import json
    import subprocess
    import sys

    found = json.loads(subprocess.run([sys.executable, "-c", RETIRING], capture_output=True, text=True, check=True, timeout=120).stdout)
    assert found["retired"] > 500 and found["kept_walked"] == 0  # out of every generation's walks
    assert found["freed"], "a retired object is freed when dropped"
    # Bulk work after a retirement: nothing retired comes back, and nothing the work made is
    # retired (its garbage in cycles is still collected).
    assert found["after_pause"] == found["retired"] - 1
    assert found["made_walked"] == 1000 and found["cycle_collected"]

"""A full build of a big tree reads and extracts files in worker processes: the index it
makes equals the one a single process makes, on a generated workspace with every kind."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from moss_files.index import database, service

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
def test_a_parallel_build_equals_a_serial_one(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from corpus import generate_workspace
    finally:
        sys.path.remove(str(BENCH))
    root = tmp_path / "ws"
    generate_workspace(root, 2500, seed=7)
    (root / ".moss" / "insights" / "broken.md").write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    index = service.open_index(service.Context(root))
    index.build_workers = 1
    serial_report = index.rebuild()
    serial = index.run(lambda view: view.snapshot(), refresh=False)
    index.build_workers = 3
    parallel_report = index.rebuild()
    parallel = index.run(lambda view: view.snapshot(), refresh=False)
    assert parallel == serial
    assert (parallel_report.files, parallel_report.problems) == (serial_report.files, serial_report.problems) == (2504, 1)


def test_small_trees_build_in_one_process() -> None:
    assert database.build_workers(database.PARALLEL_MIN_FILES - 1) == 1
    assert database.build_workers(database.PARALLEL_MIN_FILES) >= 1


def test_workers_start_for_the_cores_nobody_else_uses_now() -> None:
    # Two cores: idle, one other task running, a machine at a load of 8.
    assert database.workers_for(2, 0) == 2
    assert database.workers_for(2, 1) == 1
    assert database.workers_for(2, 8) == 1
    assert (database.workers_for(2, 0.3), database.workers_for(2, 0.7)) == (2, 1)  # a load average is fractional
    assert database.workers_for(64, 0) == database.MAX_BUILD_WORKERS
    # The fewest runnable seen decides: a task that ran for one reading only holds no core.
    files = database.PARALLEL_MIN_FILES
    cpus = len(database.os.sched_getaffinity(0))
    assert database.build_workers(files, [cpus + 5, 0]) == database.workers_for(cpus, 0)
    assert database.build_workers(files, [cpus + 5, None, cpus + 6]) == 1


def test_the_runnable_count_comes_from_the_kernels_loadavg_line() -> None:
    # The 1-minute load says 1.0 (the previous command), but only this reader runs now.
    assert database.runnable_from(b"1.00 0.40 0.15 1/94 30314\n") == 0
    assert database.runnable_from(b"7.90 8.10 7.00 9/412 1200\n") == 8
    assert database.runnable_from(b"0.00 0.00 0.00\n") is None
    assert database.runnable_from(b"0.00 0.00 0.00 x/94 1\n") is None
    real = database.runnable_elsewhere()
    if Path("/proc/loadavg").exists():
        assert real is not None and real >= 0
    else:
        assert real is None

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

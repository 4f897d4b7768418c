"""bench/all.py, issue 29's umbrella: it finds the benches by their ROWS_ARGS, runs each, and
prints one table and the rows as JSON. Figures are not checked (speed is measured in bench/,
never asserted here): that every bench runs and each row is whole and consistent is."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
ROW_KEYS = {"measure", "size", "build", "value", "unit", "floor", "floor_name", "ratio", "over", "target", "met", "compare", "limit", "bench"}


def load_all() -> ModuleType:
    """bench/all.py as a module. It puts bench/ first on sys.path to import `rows`; left there,
    bench/mcp.py would shadow the MCP SDK for every later test, so the path is put back."""
    spec = importlib.util.spec_from_file_location("bench_all", BENCH / "all.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def test_discover_takes_a_script_by_its_rows_args_and_reads_it_without_importing(tmp_path: Path) -> None:
    (tmp_path / "joins.py").write_text('raise SystemExit("imported")\nROWS_ARGS = ["--rows-only", "--fast"]\n')
    (tmp_path / "typed.py").write_text("ROWS_ARGS: list[str] = []\n")
    (tmp_path / "other.py").write_text("ARGS = ['--rows-only']\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    found = load_all().discover(tmp_path)
    assert [(bench.name, bench.script.name, bench.rows_args) for bench in found] == [
        ("joins", "joins.py", ["--rows-only", "--fast"]),
        ("typed", "typed.py", []),
    ]


def test_discover_refuses_rows_args_that_are_not_a_list_of_strings(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("ROWS_ARGS = '--rows-only'\n")
    with pytest.raises(SystemExit, match="bad.py: ROWS_ARGS must be a list of strings"):
        load_all().discover(tmp_path)


def test_discover_refuses_a_keeps_its_files_that_is_not_a_boolean(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("ROWS_ARGS = []\nKEEPS_ITS_FILES = 'yes'\n")
    with pytest.raises(SystemExit, match="bad.py: KEEPS_ITS_FILES must be True or False"):
        load_all().discover(tmp_path)


def test_the_benches_that_settle_run_first_and_scratch_is_kept_for_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benches that keep their files to the end run first (they fill the settling minute),
    then those timing file creation (`--settle`), then the rest; and under all.py a bench's
    scratch folder outlives the bench (all.py removes it at the end): deleting thousands of
    files would slow the creates of the benches after it."""
    all_py = load_all()
    scripts = {
        "alpha": 'ROWS_ARGS = ["--rows-only"]',
        "beta": 'ROWS_ARGS = ["--rows-only", "--settle", "60"]',
        "delta": 'ROWS_ARGS = ["--rows-only"]\nKEEPS_ITS_FILES = True',
        "gamma": 'ROWS_ARGS = ["--rows-only"]\nKEEPS_ITS_FILES = False',
    }
    for name, text in scripts.items():
        (tmp_path / f"{name}.py").write_text(text + "\n")
    assert [bench.name for bench in all_py.run_order(all_py.discover(tmp_path))] == ["delta", "beta", "alpha", "gamma"]
    rows = all_py.shared  # bench/rows.py, as all.py imported it
    monkeypatch.delenv(rows.KEEP_ENV, raising=False)
    with rows.scratch("alone-") as alone:
        (alone / "file").write_text("x")
    assert not alone.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    monkeypatch.setenv(rows.KEEP_ENV, str(kept))
    with rows.scratch("under-all-") as inside:
        (inside / "file").write_text("x")
    assert inside.parent == kept and (inside / "file").exists()
    # How long the run has deleted nothing, for the settling rule: since all.py started.
    monkeypatch.setenv(rows.QUIET_SINCE_ENV, repr(time.time() - 30))
    assert 29 < time.monotonic() - rows.quiet_since() < 60
    monkeypatch.delenv(rows.QUIET_SINCE_ENV)
    assert abs(time.monotonic() - rows.quiet_since()) < 1


def test_the_benches_of_issue_29_take_part() -> None:
    names = {bench.name for bench in load_all().discover()}
    assert {"index", "capsules", "import", "migrate", "mcp", "startup", "board", "cstack", "history", "activity", "inbox", "chat"} <= names


def test_growth_exponent_of_a_time_and_of_a_rate() -> None:
    exponent = load_all().exponent
    assert exponent({"value": 10.0, "size": 10_000, "compare": "over"}, {"value": 100.0, "size": 100_000, "compare": "over"}) == pytest.approx(1.0)
    # 5,000 items/s at both sizes: the time grows as the corpus does.
    assert exponent({"value": 5000.0, "size": 10_000, "compare": "at_least"}, {"value": 5000.0, "size": 100_000, "compare": "at_least"}) == pytest.approx(1.0)
    assert exponent({"value": 10.0, "size": 0, "compare": "over"}, {"value": 10.0, "size": 0, "compare": "over"}) is None


@pytest.mark.slow
def test_all_quick_on_a_tiny_corpus_runs_every_bench_and_prints_one_table(tmp_path: Path) -> None:
    rows_file = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "all.py"), "--quick", "--size", "200", "--json", str(rows_file)], capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(rows_file.read_text(encoding="utf-8"))
    names = {bench.name for bench in load_all().discover()}
    assert {row["bench"] for row in rows} == names, "every bench writes rows"
    for row in rows:
        assert ROW_KEYS <= row.keys(), row
        assert row["size"] in (200, 0), row
        assert row["value"] > 0, row
        if row["floor"]:
            assert row["ratio"] == pytest.approx(row["value"] / row["floor"], rel=1e-2), row
    first, *_, last = (line for line in done.stdout.splitlines() if line.startswith(("bench/all.py:", "all rows,")))
    for line in (first, last):  # the machine's speed, at the start and the end of the run
        assert re.search(r"reference loop \(1,000,000 additions in Python\) [1-9][0-9]* ms", line), line
    table = done.stdout[done.stdout.index("\nmeasure ") :]
    header = table.splitlines()[1]
    for word in ("measure", "size", "figure", "floor", "ratio", "target", "met?"):
        assert word in header
    for row in rows:
        assert row["measure"] in table

"""Capsule store latency: store, fetch by name, list and inventory with 10 and 10,000 capsules
present, and `moss fetch <name>` as a whole process; then Moss's later operations: search
(through the index, warm, beside the index's own scan of the same query as the floor) and the
bulk operations on a tenth of the capsules (beside `inventory`, which reads every file as they
must).

Then `list`, `inventory` and `latest` in process at each size, in 10 workspaces, through the
index: each installation (this checkout's, and `--baseline`'s when given) measures its own copy
of the corpus in a child process with its own Python, walking (the index checks its freshness
by a walk) and with `moss index watch` running; beside the floor of the same run, the index's
own freshness check (a no-change `index refresh`), and the same calls reading every file.
Medians of wall and CPU time (`time.process_time`: the caller's own, not the watcher's).

Run: .venv/bin/python bench/capsules.py [--sizes 10,10000] [--repeat 20] [--baseline /work/main/.venv/bin/moss]
Builds its corpus in a temporary folder (files written directly, as a git checkout would) and
prints medians in milliseconds with the corpus size. Whole-process timings use a bytecode cache
in the temp folder (PYTHONPYCACHEPREFIX), as an installed package has; nothing outside the temp
folder is touched. "moss fetch" is the installed command; `moss version` and `python -c pass`
are printed as floors.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared

from moss_files.capsules import bulk, search
from moss_files.capsules import model as core
from moss_files.capsules import service as ops
from moss_files.capsules.model import Capsule
from moss_files.foundation.context import Context
from moss_files.foundation.ids import IdSource, seeded_random
from moss_files.index import service as index_service

# bench/all.py runs this script with these arguments for its rows of issue 29's table.
ROWS_ARGS = ["--rows-only"]
KEEPS_ITS_FILES = True  # what it writes stays in rows.scratch() folders until bench/all.py ends

TEXT = """## Objective
Keep the login flow working while sessions move to the new store.

## Current status
Token refresh works; logout still clears only the local cookie.

## Decisions
- Sessions live in Redis with a 14 day TTL.
- Refresh tokens rotate on every use.

## Next actions
- Make logout revoke the refresh token.
- Add a test for concurrent refreshes.

## Key locations
- src/auth/session.py
- tests/test_session.py

## Open questions
- Do we need device-bound tokens for the mobile app?
"""


def build_corpus(root: Path, count: int, workspaces: int = 1) -> None:
    """Write `count` capsule files in the workspace `default` (the worst case for `list`), or
    spread over `workspaces` workspaces `w0`, `w1`, ... (as an import of a Moss export is)."""
    ids = IdSource(random_bytes=seeded_random(count))
    base_ms = 1_768_816_800_000
    for index in range(count):
        capsule = Capsule(
            id=ids.ulid(),
            workspace="default" if workspaces == 1 else f"w{index % workspaces}",
            name=f"capsule-{index:05d}",
            text=TEXT,
            created_ms=base_ms + index * 1000,
            updated_ms=base_ms + index * 1000,
            tags=("bench", f"group{index % 10}"),
            source="bench",
            phase=("plan", "build", "review")[index % 3],
        )
        folder = root / ".moss" / "capsules" / core.workspace_dir(capsule.workspace_norm)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / core.slot_filename(core.normalize(capsule.name or ""))).write_text(core.render_capsule(capsule), encoding="utf-8")


def median_ms(action: Callable[[int], object], repeat: int) -> float:
    samples = []
    for index in range(repeat):
        start = time.perf_counter()
        action(index)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def whole_process_ms(command: list[str], cwd: Path, repeat: int, cache: Path) -> float:
    samples = []
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(MOSS_ROOT=str(cwd), PYTHONPYCACHEPREFIX=str(cache))
    subprocess.run(command, cwd=cwd, capture_output=True, env=env, check=False)  # fill the cache
    for _ in range(repeat):
        start = time.perf_counter()
        result = subprocess.run(command, cwd=cwd, capture_output=True, env=env, check=False)
        samples.append((time.perf_counter() - start) * 1000)
        if result.returncode != 0:
            raise SystemExit(f"{command} failed: {result.stderr.decode()}")
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared.add_common_arguments(parser, default_sizes=(10, 10000))
    parser.add_argument("--repeat", type=int, default=20, help="Runs per measurement (median reported).")
    parser.add_argument("--only-listing", action="store_true", help="only the in-process list/inventory/latest table")
    parser.add_argument("--rows-only", action="store_true", help="only list/inventory/latest as whole processes, issue 29's rows (as bench/all.py runs it)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # a corpus to measure in this process
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_listing(Path(args.child), args.repeat)))
        return
    sizes = shared.sizes(args.sizes, (10, 10000))
    args.sizes = ",".join(map(str, sizes))
    args.baseline = shared.baseline_moss(args.baseline)
    if args.rows_only:
        found = listing_processes(sizes, 3 if args.quick else min(args.repeat, 7), args.baseline)
        shared.print_rows(found)
        shared.write_rows(args.json, found)
        return
    if args.only_listing:
        listing_table(sizes, args.repeat, args.baseline)
        return
    bin_dir = Path(sys.executable).parent
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; medians of {args.repeat} runs, milliseconds")
    # list and inventory go through the search index from 300 capsules on; "(files)" is the
    # same call reading every file, the baseline of the same run.
    header = f"{'capsules':>9} {'store':>8} {'fetch':>8} {'list':>8} {'(files)':>8} {'inventory':>10} {'(files)':>8} {'moss fetch':>11}"
    print(header)
    cache = Path(tempfile.mkdtemp(prefix="moss-bench-pycache-"))
    for size in (int(part) for part in args.sizes.split(",")):
        folder = Path(tempfile.mkdtemp(prefix="moss-bench-"))
        try:
            start = time.perf_counter()
            build_corpus(folder, size)
            built = time.perf_counter() - start
            ctx = Context(folder)
            store = median_ms(lambda i: ops.store(ctx, capsule_text=TEXT, name=f"new-{i}"), args.repeat)
            fetch = median_ms(lambda i: ops.fetch(ctx, name=f"capsule-{i % size:05d}"), args.repeat)
            listing = median_ms(lambda i: ops.list_capsules(ctx), args.repeat)
            inventory = median_ms(lambda i: ops.inventory(ctx), args.repeat)
            list_files = median_ms(lambda i: ops.list_capsules(ctx, through_index=False), max(3, args.repeat // 4))
            inventory_files = median_ms(lambda i: ops.inventory(ctx, through_index=False), max(3, args.repeat // 4))
            runs = max(5, args.repeat // 2)
            process = whole_process_ms([str(bin_dir / "moss"), "fetch", "capsule-00000"], folder, runs, cache)
            print(
                f"{size:>9} {store:>8.2f} {fetch:>8.2f} {listing:>8.1f} {list_files:>8.1f} {inventory:>10.1f} {inventory_files:>8.1f} {process:>11.0f}"
                f"   (corpus built in {built:.1f}s)"
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    baseline = Path(tempfile.mkdtemp(prefix="moss-bench-"))
    try:
        (baseline / ".moss").mkdir()
        version = whole_process_ms([str(bin_dir / "moss"), "version"], baseline, 10, cache)
        bare = whole_process_ms([sys.executable, "-c", "pass"], baseline, 10, cache)
    finally:
        shutil.rmtree(baseline, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    print(f"for reference: `moss version` {version:.0f} ms, bare `python -c pass` {bare:.0f} ms")
    later_operations(sizes, args.repeat)
    listing_table(sizes, args.repeat, args.baseline)
    found = listing_processes([size for size in sizes if size >= 300], min(args.repeat, 7), args.baseline)
    shared.print_rows(found)
    shared.write_rows(args.json, found)


def later_operations(sizes: list[int], repeat: int) -> None:
    """Search and bulk figures, each beside its floor measured in the same run."""
    print(f"\nsearch and bulk operations; medians of {repeat} runs, milliseconds")
    print(
        f"{'capsules':>9} {'search 1 hit':>13} {'scan floor':>11} {'search all':>11} {'scan floor':>11}"
        f" {'bulk dry':>9} {'bulk update':>12} {'updates/s':>10} {'delete dry':>11} {'inventory':>10}"
    )
    for size in sizes:
        folder = Path(tempfile.mkdtemp(prefix="moss-bench-"))
        try:
            build_corpus(folder, size)
            ctx = Context(folder)
            index_service.index_rebuild(ctx)
            one = f"{size // 2:05d}"  # in one capsule's name (its title)
            everywhere = "mobile tokens"  # in every capsule's text
            hit = median_ms(lambda i: search.search(ctx, query=one), repeat)
            hit_floor = median_ms(lambda i: index_service.scan(ctx, one, kinds=["capsule"]), repeat)
            wide = median_ms(lambda i: search.search(ctx, query=everywhere), repeat)
            wide_floor = median_ms(lambda i: index_service.scan(ctx, everywhere, kinds=["capsule"], limit=20), repeat)
            dry = median_ms(lambda i: bulk.bulk_update(ctx, tag="group3", set_phase="qa", dry_run=True), repeat)
            # Alternate the value so every run rewrites its tenth of the capsules.
            real = median_ms(lambda i: bulk.bulk_update(ctx, tag="group3", set_phase=f"phase-{i % 2}"), repeat)
            delete_dry = median_ms(lambda i: bulk.bulk_delete(ctx, tag="group3", dry_run=True), repeat)
            inventory = median_ms(lambda i: ops.inventory(ctx, tag="group3"), repeat)
            print(
                f"{size:>9} {hit:>13.1f} {hit_floor:>11.1f} {wide:>11.1f} {wide_floor:>11.1f} {dry:>9.1f} {real:>12.1f} {size / 10 / (real / 1000):>10.0f} {delete_dry:>11.1f} {inventory:>10.1f}"
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)


# The calls of the listing table: (label, use case, keyword arguments); the same for every
# installation measured, so only parameters every version of them takes.
LISTING_CALLS: list[tuple[str, str, dict[str, object]]] = [
    ("list --workspace w3", "list_capsules", {"workspace": "w3"}),
    ("inventory", "inventory", {}),
    ("inventory --include-deleted", "inventory", {"include_deleted": True, "limit": 500}),
    ("inventory --phase plan", "inventory", {"phase": "plan"}),
    ("latest --workspace w3", "latest", {"workspace": "w3"}),
]


def timed_ms(action: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of `action` (this process's CPU)."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def measure_listing(root: Path, repeat: int) -> dict[str, object]:
    """In this process (with whichever moss_files this Python imports): the listing calls
    through the index and reading the files, and the index's no-change refresh, walking and
    then with `moss index watch` running."""
    ctx = Context(root)
    index_service.index_rebuild(ctx)
    results: dict[str, object] = {}
    for label, name, kwargs in LISTING_CALLS:
        call = getattr(ops, name)
        if call(ctx, **kwargs) != call(ctx, through_index=False, **kwargs):
            raise SystemExit(f"{label}: the index's answer differs from the file scan's")
        results[f"{label} (files)"] = timed_ms(lambda call=call, kwargs=kwargs: call(ctx, through_index=False, **kwargs), max(3, repeat // 4))
        results[label] = timed_ms(lambda call=call, kwargs=kwargs: call(ctx, **kwargs), repeat)
    results["floor: index refresh, no change"] = timed_ms(lambda: index_service.index_refresh(ctx), repeat)
    moss = str(Path(sys.executable).with_name("moss"))
    watcher = subprocess.Popen([moss, "index", "watch", "--root", str(root)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert watcher.stdout is not None
        if not watcher.stdout.readline().startswith("watching"):  # it says so once it serves
            raise SystemExit("moss index watch did not start")
        for label, name, kwargs in LISTING_CALLS:
            call = getattr(ops, name)
            results[f"{label} [watcher]"] = timed_ms(lambda call=call, kwargs=kwargs: call(ctx, **kwargs), repeat)
        results["floor: index refresh, no change [watcher]"] = timed_ms(lambda: index_service.index_refresh(ctx), repeat)
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)
    return results


def listing_table(sizes: list[int], repeat: int, baseline: str | None) -> None:
    """Each installation measures its own copy of one corpus per size, in a child process."""
    pythons = {"after": sys.executable}
    if baseline:
        pythons["before"] = str(Path(baseline).with_name("python"))
    print(f"\nlist, inventory, latest in process, 10 workspaces; medians of {repeat} calls, ms wall / ms CPU")
    for size in sizes:
        if size < 300:
            continue  # the index answers from 300 capsules on
        folder = Path(tempfile.mkdtemp(prefix="moss-bench-"))
        try:
            measured: dict[str, dict[str, list[float]]] = {}
            for label, python in pythons.items():
                root = folder / label
                build_corpus(root, size, workspaces=10)
                done = subprocess.run([python, __file__, "--child", str(root), "--repeat", str(repeat)], capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise SystemExit(f"{label}: {done.stderr[-800:]}")
                measured[label] = json.loads(done.stdout)
            labels = list(measured)
            print(f"corpus: {size} capsules" + "".join(f"   {label:>22}" for label in labels))
            for row in measured["after"]:
                cells = "".join(
                    f"   {measured[label][row][0]:>9.1f} / {measured[label][row][1]:>8.1f}" if row in measured[label] else f"   {'-':>22}" for label in labels
                )
                print(f"  {row:<44}{cells}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)


# The commands of issue 29's listing rows, as whole processes.
LISTING_COMMANDS: list[tuple[str, list[str]]] = [
    ("moss list --workspace w3", ["list", "--workspace", "w3"]),
    ("moss inventory", ["inventory"]),
    ("moss latest --workspace w3", ["latest", "--workspace", "w3"]),
]


def listing_processes(sizes: list[int], repeat: int, baseline: str | None) -> list[shared.Row]:
    """`moss list`, `inventory` and `latest` as whole processes, of this installation and the
    baseline's, each on its own copy of a corpus of `size` capsules in 10 workspaces (cached
    across runs), walking and with `moss index watch` running, beside the floor of the same
    run: `python -c "import sqlite3, yaml"`. Best wall time of `repeat` runs taken in turns."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from index import Watching, process_costs

    builds = {"this": str(Path(sys.executable).with_name("moss")), **({"baseline": baseline} if baseline else {})}
    found: list[shared.Row] = []
    floor_name = "python -c 'import sqlite3, yaml'"
    for size in sizes:
        corpus = shared.cached("capsules-10ws", size, 0, lambda folder, size=size: build_corpus(folder, size, workspaces=10), sources=[build_corpus])
        with shared.scratch("moss-bench-listing-") as tmp:
            env = shared.process_env(tmp / "pycache")
            roots = {name: shared.copy_of(corpus, tmp / name) for name in builds}
            time.sleep(2.1)  # files copied within the index's racy window are re-read until older
            for name, moss in builds.items():
                shared.run_process([moss, "index", "rebuild", "--root", str(roots[name])], env=env)
            print(f"\ncorpus: {size} capsules in 10 workspaces; {shared.load()}; best of {repeat} whole processes, ms wall / CPU")
            floor = {"floor": [sys.executable, "-c", "import sqlite3, yaml"]}
            commands = {f"{name} {label}": [moss, *words, "--root", str(roots[name])] for name, moss in builds.items() for label, words in LISTING_COMMANDS}
            walking = process_costs({**floor, **commands}, tmp, env, repeat)
            watched: dict[str, tuple[float, float, float]] = {}
            for name, moss in builds.items():
                watcher = Watching(moss, roots[name], env)
                try:
                    mine = {key: command for key, command in commands.items() if key.startswith(f"{name} ")}
                    measured = process_costs({**floor, **mine}, tmp, env, repeat)
                finally:
                    watcher.stop()
                walking["floor"] = min(walking["floor"], measured.pop("floor"))
                watched.update(measured)
            startup = walking["floor"]
            print(f"  floor {floor_name}: {startup[0]:.0f} / {startup[1]:.0f}")
            for key in commands:
                name, label = key.split(" ", 1)
                print(f"  {key:<40} walking {walking[key][0]:6.0f} / {walking[key][1]:4.0f}   watcher {watched[key][0]:6.0f} / {watched[key][1]:4.0f}")
                for how, costs in (("walking", walking), ("watcher", watched)):
                    found.append(
                        shared.Row(
                            f"{label} process, {how}",
                            size=size,
                            build=name,
                            value=costs[key][0],
                            cpu=costs[key][1],
                            unit="ms",
                            compare=shared.OVER,
                            limit=60,
                            floor=startup[0],
                            floor_name=floor_name,
                        )  # fmt: skip
                    )
    return found


if __name__ == "__main__":
    main()

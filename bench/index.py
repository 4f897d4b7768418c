"""Search index figures on a generated workspace, each printed next to the same run's floor.

Run: .venv/bin/python bench/index.py [--sizes 1000 10000 50000] [--seed 42] [--dense] [--baseline MOSS] [--repeat 5] [--rows-only] [--quick] [--json ROWS]

For each size, in a temporary folder, `corpus.generate_workspace` lays out insights, sessions,
capsules, messages, board tasks and cstack files; then it measures (best of several runs, as
the machine may be busy; the floors likewise):
- full rebuild, next to a bare build (walk + read + C YAML parse + one FTS5 insert per file);
- refresh with no change, next to a bare walk + stat of the same tree;
- refresh after one file changed, next to the no-change refresh;
- the search query mix in process (query only, and `search.scan` with its refresh), p50/p95;
- `moss search` as a whole process, next to `python -c pass` and `rg -l` for the same term;
- tokens (characters / 4) of scan's 20 results against expand of the same 20 ids;
- issue 18's table, as whole processes with a bytecode cache, wall time and CPU time (user +
  system, from wait4): `moss search`, `moss index refresh` (no change) and `moss index
  rebuild` of a baseline build of moss-files (`--baseline`: its `moss`) and of this one, walking and (Linux) with each build's own `moss index watch`
  running, beside the floors `python -c "import sqlite3, yaml"`, a bare scandir+stat walk
  process and a bare build process (walk + read + C YAML + FTS5, loading nothing else); the
  commands take turns, `--repeat` runs each, the best counts.
`--rows-only` measures only that table's whole processes (and the rebuild's peak memory), the
rows `bench/all.py` collects (`--json`); `--quick` runs fewer repetitions. The corpus is
generated once per size and seed and cached (bench/rows.py), then copied for each run.
`--dense` uses the 40-word bodies of `corpus.generate` (every word in most documents), the
worst case for ranking; by default bodies have a Zipf vocabulary, as real text does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared
from corpus import generate_workspace

from moss_files.index import query as search_query
from moss_files.index import service as search

# bench/all.py runs this script with these arguments for its rows of issue 29's table.
ROWS_ARGS = ["--rows-only"]
KEEPS_ITS_FILES = True  # what it writes stays in rows.scratch() folders until bench/all.py ends

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
RACY_SECONDS = 2.1
BIN = Path(sys.executable).parent
QUERY_MIX = {
    "rare term": "{rare}",
    "common term": "deploy",
    "two terms": "auth token",
    "phrase": '"{phrase}"',
    "prefix": "dep*",
    "filtered": "kind:insight status:unprocessed retry",
}


def best(run: Callable[[], object], repeats: int) -> float:
    """Fastest of `repeats` runs, in seconds."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def walk_stat(root: Path) -> int:
    """The floor of a refresh: visit every file of the tree and stat it."""
    count = 0
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    entry.stat(follow_symlinks=False)
                    count += 1
    return count


def bare_build(root: Path, db: Path) -> int:
    """The floor of a rebuild: walk, read, split, C YAML parse, insert into FTS5."""
    db.unlink(missing_ok=True)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(path, title, body)")
    conn.execute("BEGIN")
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "cache"]
        for name in files:
            if not name.endswith(".md"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            meta: dict = {}
            body = text
            if text.startswith("---\n"):
                end = text.find("\n---\n", 3)
                if end > 0:
                    meta = yaml.load(text[4:end], Loader=LOADER) or {}
                    body = text[end + 5 :]
            title = meta.get("title") if isinstance(meta, dict) else None
            conn.execute("INSERT INTO docs VALUES (?, ?, ?)", (path, str(title or ""), body))
            count += 1
    conn.execute("COMMIT")
    conn.close()
    return count


WALK_SCRIPT = """
import os, sys
stack = [sys.argv[1]]
while stack:
    with os.scandir(stack.pop()) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                entry.stat(follow_symlinks=False)
"""

# `bare_build` as a process of its own that loads nothing else (as the walk's floor does): the
# floor of a rebuild process, without this script's own imports.
BARE_BUILD_SCRIPT = """
import os, sqlite3, sys
import yaml
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
root, db = sys.argv[1], sys.argv[2]
if os.path.exists(db):
    os.unlink(db)
conn = sqlite3.connect(db, isolation_level=None)
conn.execute("PRAGMA journal_mode = OFF")
conn.execute("PRAGMA synchronous = OFF")
conn.execute("CREATE VIRTUAL TABLE docs USING fts5(path, title, body)")
conn.execute("BEGIN")
for folder, dirs, files in os.walk(root):
    dirs[:] = [d for d in dirs if d != "cache"]
    for name in files:
        if not name.endswith(".md"):
            continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        meta = {}
        body = text
        if text.startswith("---\\n"):
            end = text.find("\\n---\\n", 3)
            if end > 0:
                meta = yaml.load(text[4:end], Loader=LOADER) or {}
                body = text[end + 5 :]
        title = meta.get("title") if isinstance(meta, dict) else None
        conn.execute("INSERT INTO docs VALUES (?, ?, ?)", (path, str(title or ""), body))
conn.execute("COMMIT")
conn.close()
"""


Cost = tuple[float, float, float]  # (wall ms, CPU ms: user + system of the process, peak MB)


def run_process(command: list[str], cwd: Path, env: dict[str, str], *, peak: bool = False) -> Cost:
    """One run of a whole process: its wall time, its CPU time (user + system, from wait4;
    a process that starts helpers counts theirs as it waits for them) and, with `peak`, its
    peak memory."""
    done = shared.run_process(command, cwd=cwd, env=env, peak=peak)
    return done.wall, done.cpu, done.peak_mb


def process_costs(commands: dict[str, list[str]], cwd: Path, env: dict[str, str], repeats: int, *, warm: bool = True, peak: bool = False) -> dict[str, Cost]:
    """Best wall time, best CPU time and largest peak memory of `repeats` runs of each
    process, the commands taking turns (so a change in the machine's load hits all alike),
    after one warming run each (the bytecode cache, the page cache). On a shared machine the
    wall time also measures the wait for a core; the CPU time is the process's own work."""
    runs: dict[str, list[Cost]] = {name: [] for name in commands}
    if warm:
        for command in commands.values():
            run_process(command, cwd, env)
    for _ in range(repeats):
        for name, command in commands.items():
            runs[name].append(run_process(command, cwd, env, peak=peak))
    return {name: (min(r[0] for r in done), min(r[1] for r in done), max(r[2] for r in done)) for name, done in runs.items()}


def sample_of(root: Path, destination: Path, per_folder: int = 3) -> Path:
    """A copy of the first `per_folder` files of every folder of `root`, for warming runs: a
    build of it loads every reader the whole workspace needs, in a fraction of the time."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if os.path.join(folder, d) not in (str(root / ".moss" / "cache"), str(root / ".moss" / "run")))
        target = destination / Path(folder).relative_to(root)
        target.mkdir(parents=True, exist_ok=True)
        for name in sorted(files)[:per_folder]:
            shutil.copy2(os.path.join(folder, name), target / name)
    return destination


class Watching:
    """`moss index watch` of one build, running for the workspace until `stop`."""

    def __init__(self, moss: str, root: Path, env: dict[str, str]) -> None:
        from moss_files.index import watch

        # The watcher answers a sync only for its own build's kinds: ask that build for them
        # (from the workspace, so no checkout in the current folder comes first on the path).
        ask = "from moss_files.index import sources; print(sources.default_registry().fingerprint)"
        python = str(Path(moss).with_name("python"))
        fingerprint = subprocess.run([python, "-c", ask], cwd=root, check=True, capture_output=True, text=True, env=env).stdout.strip()
        self.process = subprocess.Popen([moss, "index", "watch"], cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600
        while watch.synced(root, fingerprint) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"{moss} index watch did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=60)


def process_table(root: Path, tmp: Path, baseline: str | None, repeats: int, size: int, rebuild_repeats: int = 2) -> list[shared.Row]:
    """Issue 18's and 29's table: whole processes of the baseline build and of this one,
    walking and with each build's own watcher running, beside the floors, all from this run;
    returns the rows of issue 29's table."""
    env = shared.process_env(tmp / "pycache")
    builds = {"this": str(BIN / "moss"), **({"baseline": str(baseline)} if baseline else {})}
    # Each build keeps its own index, on its own copy of the workspace: two builds that know
    # different kinds would otherwise rebuild the shared index on every alternate run.
    roots = {"this": root}
    if baseline:
        roots["baseline"] = tmp / "ws-baseline"
        shared.copy_of(root, roots["baseline"])
    floors = {
        "startup": [sys.executable, "-c", "import sqlite3, yaml"],
        "walk": [sys.executable, "-c", WALK_SCRIPT, str(root)],
    }
    build_floor = [sys.executable, "-c", BARE_BUILD_SCRIPT, str(root), str(tmp / "bare.db")]
    # The rebuilds run once each (they take seconds), so their own warming run is left out;
    # but their first run in this bytecode cache would compile every module it loads (a fifth
    # of a rebuild's CPU at 10,000 files), which an installed tool never does. Each command
    # builds a small sample of the workspace first: every reader it loads is compiled then.
    sample = sample_of(root, tmp / "ws-sample")
    shared.run_process([sys.executable, "-c", BARE_BUILD_SCRIPT, str(sample), str(tmp / "sample.db")], cwd=root, env=env)
    for moss in builds.values():
        shared.run_process([moss, "index", "rebuild", "--root", str(sample)], cwd=root, env=env)
    time.sleep(RACY_SECONDS)  # a file indexed within the racy window of its copy is re-read until older
    rebuilds = process_costs(
        {"floor": build_floor, **{name: [moss, "index", "rebuild", "--root", str(roots[name])] for name, moss in builds.items()}},
        root,
        env,
        rebuild_repeats,
        warm=False,  # each is seconds long: its own start-up is noise
        peak=True,
    )
    walking = process_costs(
        {
            **floors,
            **{f"{name} search": [moss, "search", "deploy", "--root", str(roots[name])] for name, moss in builds.items()},
            **{f"{name} refresh": [moss, "index", "refresh", "--root", str(roots[name])] for name, moss in builds.items()},
        },
        root,
        env,
        repeats,
    )
    warm: dict[str, Cost] = {}
    if sys.platform.startswith("linux"):
        for name, moss in builds.items():
            where = roots[name]
            watcher = Watching(moss, where, env)
            try:
                commands = {"search": [moss, "search", "deploy", "--root", str(where)], "refresh": [moss, "index", "refresh", "--root", str(where)]}
                found = process_costs({**commands, **floors}, root, env, repeats)
            finally:
                watcher.stop()
            warm[f"{name} search"], warm[f"{name} refresh"] = found["search"], found["refresh"]
            # The floors again, measured beside these runs: the least of both rounds.
            for floor in floors:
                walking[floor] = (min(walking[floor][0], found[floor][0]), min(walking[floor][1], found[floor][1]), walking[floor][2])

    def cell(value: Cost | None) -> str:
        return "-" if value is None else f"{value[0]:.0f} / {value[1]:.0f}"

    startup, walk, build = walking["startup"], walking["walk"], rebuilds["floor"]
    print("  whole processes, ms wall / ms CPU (best of runs)   baseline     baseline+watch   this         this+watch    floor")
    lines = (
        ("moss search deploy", "search", walking, f"import sqlite3, yaml {cell(startup)}; target floor + 60"),
        ("moss index refresh, no change", "refresh", walking, f"walk+stat process {cell(walk)}; target 1.3x"),
    )
    for label, what, table, floor in lines:
        cells = [table.get(f"baseline {what}"), warm.get(f"baseline {what}"), table.get(f"this {what}"), warm.get(f"this {what}")]
        print(f"  {label:<46} " + " ".join(f"{cell(value):>13}" for value in cells) + f"   {floor}")
    print(
        f"  {'moss index rebuild':<46} {cell(rebuilds.get('baseline')):>13} {'-':>13} {cell(rebuilds['this']):>13} {'-':>13}   bare build process {cell(build)}; target 1.3x"
    )
    peaks = "   ".join(f"{name} {rebuilds[name][2]:.0f} MB" for name in ("floor", *builds))
    print(f"  {'rebuild, peak memory':<46} {peaks}")

    def over(value: Cost | None) -> str:
        return "-" if value is None else f"+{value[0] - startup[0]:.0f} / +{value[1] - startup[1]:.0f} ms"

    def ratio(value: Cost | None, floor: Cost) -> str:
        return "-" if value is None else f"{value[0] / floor[0]:.2f} / {value[1] / floor[1]:.2f}x"

    for name in builds:
        print(
            f"  {name:<8} search {over(walking[f'{name} search'])} (watcher {over(warm.get(f'{name} search'))}) over the floor;"
            f" refresh {ratio(walking[f'{name} refresh'], walk)} (watcher {over(warm.get(f'{name} refresh'))} over the floor) the walk;"
            f" rebuild {ratio(rebuilds[name], build)} the bare build   (wall / CPU)"
        )
    found_rows: list[shared.Row] = []
    startup_name, walk_name = "python -c 'import sqlite3, yaml'", "scandir+stat walk process"
    for name in builds:
        row = {"size": size, "build": name, "unit": "ms"}
        found_rows.append(
            shared.Row(
                "moss search, walking",
                value=walking[f"{name} search"][0],
                cpu=walking[f"{name} search"][1],
                compare=shared.OVER,
                limit=60,
                floor=startup[0],
                floor_name=startup_name,
                **row,
            )  # fmt: skip
        )
        if f"{name} search" in warm:
            found_rows.append(
                shared.Row(
                    "moss search, watcher",
                    value=warm[f"{name} search"][0],
                    cpu=warm[f"{name} search"][1],
                    compare=shared.OVER,
                    limit=60,
                    floor=startup[0],
                    floor_name=startup_name,
                    **row,
                )  # fmt: skip
            )
        found_rows.append(
            shared.Row(
                "moss index refresh (no change), walking",
                value=walking[f"{name} refresh"][0],
                cpu=walking[f"{name} refresh"][1],
                compare=shared.RATIO,
                limit=1.3,
                floor=walk[0],
                floor_name=walk_name,
                **row,
            )  # fmt: skip
        )
        if f"{name} refresh" in warm:
            found_rows.append(
                shared.Row(
                    "moss index refresh (no change), watcher",
                    value=warm[f"{name} refresh"][0],
                    cpu=warm[f"{name} refresh"][1],
                    compare=shared.OVER,
                    limit=20,
                    floor=startup[0],
                    floor_name=startup_name,
                    **row,
                )  # fmt: skip
            )
        found_rows.append(
            shared.Row(
                "moss index rebuild",
                value=rebuilds[name][0],
                cpu=rebuilds[name][1],
                compare=shared.RATIO,
                limit=1.3,
                floor=build[0],
                floor_name="bare build process",
                **row,
            )  # fmt: skip
        )
        found_rows.append(
            shared.Row(
                "moss index rebuild, peak memory",
                value=rebuilds[name][2],
                compare=shared.AT_MOST,
                limit=300,
                floor=build[2],
                floor_name="bare build process",
                size=size,
                build=name,
                unit="MB",
            )  # fmt: skip
        )
    return found_rows


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def process_ms(command: list[str], cwd: Path, env: dict[str, str], repeats: int) -> float:
    def run() -> None:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}")

    run()  # warm the bytecode cache and the page cache
    return best(run, repeats) * 1000


def pick_words(root: Path) -> tuple[str, str]:
    """A rare word (in a handful of documents, and no prefix of other words) and a phrase of
    two words that occurs in the corpus, both drawn from the bodies of a sample of insights."""
    counts: dict[str, int] = {}
    phrase = ""
    for path in sorted((root / ".moss" / "insights").glob("*.md"))[:400]:
        words = [w.strip(".,").lower() for w in path.read_text(encoding="utf-8").split("---\n", 2)[2].split()]
        words = [w for w in words if w.isalpha()]
        phrase = phrase or " ".join(words[:2])
        for word in words:
            counts[word] = counts.get(word, 0) + 1
    vocabulary = set(counts)
    rare = [w for w, n in sorted(counts.items()) if n == 1 and len(w) >= 5 and not any(o != w and o.startswith(w) for o in vocabulary)]
    return (rare[len(rare) // 2] if rare else "zzzz"), phrase


def workspace_corpus(size: int, seed: int, dense: bool) -> Path:
    """The cached workspace corpus of this size (generated on first use)."""
    return shared.cached(f"workspace{'-dense' if dense else ''}", size, seed, lambda folder: generate_workspace(folder, size, seed, dense=dense))


def measure(size: int, seed: int, dense: bool, baseline: str | None, process_repeats: int, *, rows_only: bool, quick: bool) -> list[shared.Row]:
    with shared.scratch("moss-index-bench-") as tmp:
        root = tmp / "ws"
        started = time.perf_counter()
        shared.copy_of(workspace_corpus(size, seed, dense), root)
        made = time.perf_counter() - started
        if rows_only:
            print(f"\ncorpus: {size} artifacts{', dense 40-word bodies' if dense else ''}, seed {seed}, copied in {made:.1f}s; {shared.load()}")
            return process_table(root, tmp, baseline, process_repeats, size, rebuild_repeats=1 if quick or size > 50_000 else 2)
        ctx = search.Context(root)
        index = search.open_index(ctx)
        repeats = 3 if size <= 10_000 else 1
        # A workspace at rest: files older than the index's racy window (a file changed within
        # it is re-checked by content on every refresh until it is older).
        time.sleep(max(0.0, RACY_SECONDS - (time.perf_counter() - started - made)))

        floor_build = best(lambda: bare_build(root, tmp / "bare.db"), repeats)
        rebuild = best(index.rebuild, repeats)
        files = index.last_refresh.files
        items = index.run(lambda view: view.counts()["items"], refresh=False)

        index.run(lambda view: None)  # settles the signatures of files racy during the rebuild
        floor_walk = best(lambda: walk_stat(root), 9)
        refresh = best(lambda: index.run(lambda view: None), 9)

        targets = sorted((root / ".moss" / "insights").glob("*.md"))[:9]
        changed_times = []
        for number, target in enumerate(targets):
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(f"\nEdited for the bench, round {number}.\n")
            changed_times.append(best(lambda: index.run(lambda view: None), 1))
            assert index.last_refresh.changed == 1, index.last_refresh
        changed = min(changed_times)

        rare, phrase = pick_words(root)
        queries = {name: text.format(rare=rare, phrase=phrase) for name, text in QUERY_MIX.items()}
        now = datetime.now(UTC)
        per_query: dict[str, float] = {}
        samples: list[float] = []

        def query_work(view: object) -> None:
            for name, text in queries.items():
                parsed = search_query.parse_query(text)
                times = []
                for _ in range(15):
                    began = time.perf_counter()
                    view.search(parsed, now=now, limit=20)  # type: ignore[attr-defined]
                    times.append(time.perf_counter() - began)
                per_query[name] = statistics.median(times) * 1000
                samples.extend(t * 1000 for t in times)

        index.run(query_work)
        scan_samples = []
        for _ in range(3):
            for text in queries.values():
                began = time.perf_counter()
                search.scan(ctx, text, limit=20)
                scan_samples.append((time.perf_counter() - began) * 1000)

        # Run as an installed tool does: with a bytecode cache (this environment may disable
        # writing .pyc files, which would make every start-up recompile every module).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(root.parent / "pycache")
        python_floor = process_ms([sys.executable, "-c", "pass"], root, env, process_repeats)
        typer_ms = process_ms([str(BIN / "moss"), "search", "deploy"], root, env, process_repeats)
        rg = shutil.which("rg")
        rg_ms = process_ms([rg, "-l", "deploy", "."], root, env, process_repeats) if rg else None

        scanned = search.scan(ctx, "deploy", limit=20)
        ids = [match["id"] for match in scanned["matches"]]
        expanded = search.expand(ctx, ids)
        scan_tokens = len(json.dumps(scanned, ensure_ascii=False)) / 4
        expand_tokens = len(json.dumps(expanded, ensure_ascii=False)) / 4

        print(f"\ncorpus: {size} artifacts ({files} files, {items} items{', dense 40-word bodies' if dense else ''}), seed {seed}, copied in {made:.1f}s")
        print(f"  full rebuild            {rebuild:8.3f} s   floor (walk+read+C YAML+FTS5 insert) {floor_build:.3f} s   {files / rebuild:,.0f} files/s")
        print(
            f"  no-change refresh       {refresh * 1000:8.1f} ms  floor (walk+stat) {floor_walk * 1000:.1f} ms   ratio {refresh / floor_walk:.2f}  (target <= 1.3)"
        )
        print(f"  one changed file        {changed * 1000:8.1f} ms  no-change refresh {refresh * 1000:.1f} ms   ratio {changed / refresh:.2f}  (target <= 1.5)")
        mix = "  ".join(f"{name} {ms:.2f}" for name, ms in per_query.items())
        print(f"  search query, in process p50 {percentile(samples, 0.5):.2f} ms  p95 {percentile(samples, 0.95):.2f} ms  (medians: {mix})")
        print(
            f"  search.scan incl. refresh p50 {percentile(scan_samples, 0.5):.1f} ms  p95 {percentile(scan_samples, 0.95):.1f} ms  floor (walk+stat) {floor_walk * 1000:.1f} ms"
        )
        rg_text = f"   rg -l {rg_ms:.0f} ms" if rg_ms is not None else "   (rg not installed)"
        print(f"  moss search (process)   {typer_ms:.0f} ms   floor python -c pass {python_floor:.0f} ms{rg_text}")
        saving = 100 * (1 - scan_tokens / expand_tokens) if expand_tokens else 0.0
        print(f"  tokens, 20 results      scan {scan_tokens:,.0f}   expand {expand_tokens:,.0f}   saving {saving:.0f}% (spec: 60-80%)")
        return process_table(root, tmp, baseline, process_repeats, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared.add_common_arguments(parser, default_sizes=(1000, 10000, 50000))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dense", action="store_true", help="40-word bodies: every word in most documents")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each whole process in the table (the best counts)")
    parser.add_argument("--rows-only", action="store_true", help="only the whole processes of issue 29's rows (as bench/all.py runs it)")
    args = parser.parse_args()
    baseline = shared.baseline_moss(args.baseline)
    repeat = min(args.repeat, 3) if args.quick else args.repeat
    print(f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {shared.load()}")
    found: list[shared.Row] = []
    for size in shared.sizes(args.sizes, (1000, 10000, 50000)):
        found += measure(size, args.seed, args.dense, baseline, repeat, rows_only=args.rows_only, quick=args.quick)
    shared.print_rows(found)
    shared.write_rows(args.json, found)


if __name__ == "__main__":
    main()

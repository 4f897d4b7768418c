"""Migration speed: 10,000 Moss capsules (JSONL export and SQLite store) and 10,000 Moe tasks,
first run, dry run and the idempotent second run, beside `moss import` of the same capsules;
and, with `--rows-only`, issue 29's rows for Beads and Backlog.md: `moss migrate beads` and
`moss migrate backlog` as whole processes.

Run: .venv/bin/python bench/migrate.py [--count 10000]
     .venv/bin/python bench/migrate.py --rows-only [--sizes 10000 100000] [--beads-source FILE] [--backlog-source DIR] [--baseline MOSS] [--json ROWS]
Builds each source in a temporary folder in its own format (the JSONL export and `moss.db` as
Moss writes them, `.moe/` as Moe does, tasks spread over 20 epics, half with a plan step) and
migrates it into a fresh scaffolded workspace, in process. Prints seconds with the corpus size;
the baseline is the toolkit's own JSONL import (`moss import`, transfer.import_capsules) of the
same export in the same run. Nothing outside the temporary folders is touched.

The Beads row: a `.beads/issues.jsonl` of N issues made by copying a Beads file (default: the
test fixture, which has the record shapes of Beads' own published board; `--beads-source` takes
another, such as a real export) with each copy's ids, and its links' ids, given a suffix, so
links stay within a copy. Each build migrates it (`--include-deleted`: every record becomes a
file) into a fresh git project, alternating with the floor: a process writing as many files of
the same mean size, made durable with one syncfs. Projects are removed only once every run of
a size is done: on ext4 without a journal, creating files right after thousands were deleted
costs several times more system time (the allocator steps over recently freed inodes), and a
run must not pay for the one before it; `--settle` waits out the deletions of the bench before
(bench/import.py's docstring has the figures).

The Backlog.md row: a `backlog/` folder of N task files made by copying the task files of a
Backlog.md folder (default: the test fixture, written with the quirks of Backlog.md's own board;
`--backlog-source` takes another, such as that board itself) from `tasks/`, `completed/`,
`archive/tasks/`, `drafts/` and `archive/drafts/`, copy k's task numbers (in the file name and
in the frontmatter: its id, dependencies and parent) raised by k million, so links stay within
a copy; config.yml and the milestones are copied once, so copies share their milestones. It is
migrated as the Beads file is, with the same floor.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from moss_files import scaffold
from moss_files.foundation.context import Context
from moss_files.foundation.ids import IdSource, seeded_random

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rows as shared

# bench/all.py runs this script with these arguments for its row of issue 29's table.
ROWS_ARGS = ["--rows-only", "--settle", "60"]

BEADS_FIXTURE = shared.BENCH.parent / "tests" / "migrate" / "fixtures" / "beads" / ".beads" / "issues.jsonl"
BACKLOG_FIXTURE = shared.BENCH.parent / "tests" / "migrate" / "fixtures" / "backlog" / "backlog"
BACKLOG_TASK_FOLDERS = ("tasks", "completed", "archive/tasks", "drafts", "archive/drafts")

TEXT = """## Objective
Keep the login flow working while sessions move to the new store.

## Current status
Token refresh works; logout still clears only the local cookie.

## Decisions
- Sessions live in Redis with a 14 day TTL.

## Next actions
- Make logout revoke the refresh token.

## Key locations
- src/auth/session.py

## Open questions
- Do we need device-bound tokens for the mobile app?
"""
MOSS_SCHEMA = """CREATE TABLE capsules (id TEXT PRIMARY KEY, workspace_raw TEXT NOT NULL, workspace_norm TEXT NOT NULL,
name_raw TEXT, name_norm TEXT, title TEXT, capsule_text TEXT NOT NULL, capsule_chars INTEGER NOT NULL,
tokens_estimate INTEGER NOT NULL, tags_json TEXT, source TEXT, run_id TEXT, phase TEXT, role TEXT,
created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, deleted_at INTEGER);"""
COLUMNS = ("id", "workspace_raw", "workspace_norm", "name_raw", "name_norm", "title", "capsule_text", "capsule_chars", "tokens_estimate", "tags_json")
COLUMNS += ("source", "run_id", "phase", "role", "created_at", "updated_at", "deleted_at")


def moss_records(count: int) -> list[dict[str, Any]]:
    """`count` export records across 10 workspaces, every 50th soft-deleted."""
    ids = IdSource(random_bytes=seeded_random(count))
    records = []
    for index in range(count):
        workspace = f"team{index % 10}"
        records.append(
            {
                "id": ids.ulid(),
                "workspace_raw": workspace,
                "workspace_norm": workspace,
                "name_raw": f"capsule-{index:05d}",
                "name_norm": f"capsule-{index:05d}",
                "title": f"Capsule {index}",
                "capsule_text": TEXT,
                "capsule_chars": len(TEXT),
                "tokens_estimate": 100,
                "tags": ["bench", f"group{index % 7}"],
                "source": "bench",
                "run_id": None,
                "phase": None,
                "role": None,
                "created_at": 1_768_000_000 + index,
                "updated_at": 1_768_000_000 + index,
                "deleted_at": 1_768_100_000 if index % 50 == 0 else None,
            }
        )
    return records


def write_export(path: Path, records: list[dict[str, Any]]) -> None:
    lines = [json.dumps({"_moss_export": True, "schema_version": "1.0", "exported_at": 1_768_200_000})]
    lines += [json.dumps(record, separators=(",", ":")) for record in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_store(path: Path, records: list[dict[str, Any]]) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(MOSS_SCHEMA)
        rows = [tuple(json.dumps(r["tags"]) if column == "tags_json" else r[column] for column in COLUMNS) for r in records]
        connection.executemany(f"INSERT INTO capsules VALUES ({', '.join('?' for _ in COLUMNS)})", rows)
        connection.commit()
    finally:
        connection.close()


def write_moe(base: Path, count: int) -> None:
    """A `.moe/` folder with 20 epics and `count` tasks (32-hex ids, as current Moe writes)."""
    for folder in ("epics", "tasks"):
        (base / folder).mkdir(parents=True)
    (base / "project.json").write_text(json.dumps({"id": "proj-bench0001", "schemaVersion": 6, "name": "bench", "globalRails": {}, "settings": {}}))
    for epic in range(20):
        data = {"id": f"epic-{epic:032x}", "title": f"Epic {epic}", "description": "", "status": "ACTIVE", "order": epic, "createdAt": "2026-02-01T10:00:00Z"}
        (base / "epics" / f"epic-{epic:032x}.json").write_text(json.dumps(data, indent=2))
    statuses = ("BACKLOG", "PLANNING", "WORKING", "REVIEW", "DONE", "ARCHIVED")
    for index in range(count):
        task_id = f"task-{index:032x}"
        plan = [{"stepId": "step-1", "description": "Do it with error handling and a test", "status": "COMPLETED", "affectedFiles": ["src/a.ts"]}]
        data = {
            "id": task_id,
            "epicId": f"epic-{index % 20:032x}",
            "title": f"Task number {index}",
            "description": "Make the thing work.\n\nWith a second paragraph.",
            "definitionOfDone": ["it works", "it is tested"],
            "taskRails": [],
            "implementationPlan": plan if index % 2 else [],
            "status": statuses[index % len(statuses)],
            "assignedWorkerId": None,
            "priority": ("CRITICAL", "HIGH", "MEDIUM", "LOW")[index % 4],
            "order": index,
            "createdAt": "2026-02-06T22:05:35.439Z",
            "updatedAt": "2026-06-09T10:59:58.622Z",
            "dependsOn": [f"task-{index - 1:032x}"] if index % 10 == 9 else [],
        }
        (base / "tasks" / f"{task_id}.json").write_text(json.dumps(data, indent=2))


def fresh_workspace(parent: Path, name: str) -> Path:
    root = parent / name
    root.mkdir()
    scaffold.run(root, parts=scaffold.PARTS, agents=(), dry_run=False)
    return root


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def scaled_beads(source: Path, count: int) -> bytes:
    """`count` Beads records: the records of `source` again and again, copy k's ids (the
    issue's, its links' and its comments') ending in `-c<k>`; ids outside the file (such as
    `external:…`) are left as they are."""
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    known = {record.get("id") for record in records}
    out: list[str] = []
    copy = 0
    while len(out) < count:
        suffix = f"-c{copy}" if copy else ""
        for record in records[: count - len(out)]:
            record = json.loads(json.dumps(record))
            record["id"] = f"{record['id']}{suffix}"
            for link in record.get("dependencies") or []:
                for key in ("issue_id", "depends_on_id"):
                    if link.get(key) in known:
                        link[key] = f"{link[key]}{suffix}"
            for comment in record.get("comments") or []:
                if isinstance(comment, dict) and "issue_id" in comment:
                    comment["issue_id"] = record["id"]
            out.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        copy += 1
    return ("\n".join(out) + "\n").encode("utf-8")


def scaled_backlog(source: Path, count: int, target: Path) -> int:
    """A Backlog.md folder at `target` of `count` task files copied from the folder `source`
    (see the module's docstring); returns how many task files it has."""
    config = (source / "config.yml").read_text(encoding="utf-8")
    prefix = re.search(r"^task_prefix:\s*[\"']?([A-Za-z]+)", config, re.MULTILINE)
    task_id = re.compile(rf"\b({prefix.group(1) if prefix else 'task'}|task|draft)-(\d+)", re.IGNORECASE)
    files = [
        (folder, path)
        for folder in BACKLOG_TASK_FOLDERS
        if (source / folder).is_dir()
        for path in sorted((source / folder).glob("*.md"))
        if task_id.match(path.name)  # a readme.md is no task
    ]
    if not files:
        raise SystemExit(f"{source}: no Backlog.md task files")
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    (target / "config.yml").write_text(config, encoding="utf-8")
    for folder in ("milestones", "archive/milestones"):
        if (source / folder).is_dir():
            shutil.copytree(source / folder, target / folder)
    tasks = []  # (folder, file name, frontmatter, the rest): each source file read once
    for folder, path in files:
        text = path.read_text(encoding="utf-8")
        frontmatter = re.match(r"---\r?\n[\s\S]*?\r?\n---", text)
        end = frontmatter.end() if frontmatter else 0
        tasks.append((folder, path.name, text[:end], text[end:]))
        (target / folder).mkdir(parents=True, exist_ok=True)
    written = 0
    copy = 0
    while written < count:
        shift = copy * 1_000_000

        def shifted(text: str, shift: int = shift) -> str:
            return task_id.sub(lambda match: f"{match.group(1)}-{int(match.group(2)) + shift}", text)

        for folder, name, head, rest in tasks[: count - written]:
            (target / folder / shifted(name)).write_text(shifted(head) + rest, encoding="utf-8")
            written += 1
        copy += 1
    return written


def fresh_project(parent: Path, label: str, moss: str, env: dict[str, str]) -> Path:
    project = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=parent))
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run([moss, "init", str(project), "--json"], check=True, env=env, capture_output=True)
    return project


def board_file_bytes(project: Path) -> tuple[int, int]:
    """(files, bytes) under the project's `.moss/board/`."""
    files = size = 0
    for folder, _dirs, names in os.walk(project / ".moss" / "board"):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(folder, name))
    return files, size


def rows_main(args: argparse.Namespace) -> None:
    """Issue 29's migration rows: items/s and peak memory of `moss migrate beads` and `moss
    migrate backlog`, whole process, beside the write + one syncfs floor."""
    import importlib

    started = time.monotonic()
    floors = importlib.import_module("import")  # bench/import.py: the write + syncfs floor, and the settling rule
    ours = str(Path(sys.executable).with_name("moss"))
    baseline = shared.baseline_moss(args.baseline)
    commands = {"after": ours, **({"before": baseline} if baseline else {})}
    beads = Path(args.beads_source) if args.beads_source else BEADS_FIXTURE
    backlog = Path(args.backlog_source) if args.backlog_source else BACKLOG_FIXTURE
    found: list[shared.Row] = []
    with shared.scratch("bench-migrate-") as tmp:
        env = shared.process_env(tmp / "pycache")
        for size in shared.sizes(args.sizes, (1000, 10000)):
            repeat = 1 if args.quick or size >= 50_000 else args.repeat
            issues = tmp / f"beads-{size}.jsonl"
            issues.write_bytes(scaled_beads(beads, size))
            folder = tmp / f"backlog-{size}" / "backlog"
            scaled_backlog(backlog, size, folder)
            # kind: ((the source, the copy of `size` items), the run's options, what it is, its items)
            sources = {
                "beads": ((beads, issues), ["--include-deleted"], f"{size} Beads issues from {beads.name} ({issues.stat().st_size / 1e6:.1f} MB", "issues"),
                "backlog": ((backlog, folder), [], f"{size} Backlog.md task files from {backlog}", "tasks"),
            }
            for kind, (paths, options, what, items) in sources.items():
                found += migration_rows(args, floors, commands, env, tmp, started, size, repeat, kind, paths, options, what, items)
    shared.print_rows(found)
    shared.write_rows(args.json, found)


def migration_rows(
    args: argparse.Namespace,
    floors: Any,
    commands: dict[str, str],
    env: dict[str, str],
    tmp: Path,
    started: float,
    size: int,
    repeat: int,
    kind: str,
    paths: tuple[Path, Path],
    options: list[str],
    what: str,
    items: str,
) -> list[shared.Row]:
    """The rows of `moss migrate <kind> --from <copy> <options>` at `size` items, each build
    alternating with the floor: a process writing as many files of the mean size the first run
    made. `paths`: the source, 20 of whose items warm each build, and its copy of `size` items."""
    source, copied = paths
    runs: dict[str, Any] = {}
    made: list[Path] = []
    mean_bytes = 0
    for label, moss in commands.items():  # warm each build's bytecode cache
        warm = fresh_project(tmp, f"warm-{label}", moss, env)
        if kind == "beads":
            (warm / ".beads").mkdir()
            (warm / ".beads" / "issues.jsonl").write_bytes(scaled_beads(source, 20))
        else:
            scaled_backlog(source, 20, warm / "backlog")
        shared.run_process([moss, "migrate", kind, *options, "--json"], cwd=warm, env=env)
        made.append(warm)
    floors.settle(tmp, size, args.settle, started)
    steps = [*commands, "floor"]  # the floor last in the first round: it writes files of the mean size the first run made
    for round_number in range(repeat):
        for step in steps if round_number % 2 == 0 else reversed(steps):  # what ran just before hits all alike
            if step == "floor":
                folder = Path(tempfile.mkdtemp(prefix="floor-", dir=tmp))
                made.append(folder)
                floor_command = [sys.executable, "-c", floors.FLOOR, str(folder / "w"), str(size), str(mean_bytes), "once"]
                elapsed, usage, _out = floors.timed(floor_command, None, dict(os.environ))
                runs.setdefault("floor: write + one syncfs", floors.Runs()).add(elapsed, usage)
                continue
            moss = commands[step]
            project = fresh_project(tmp, step, moss, env)
            made.append(project)
            elapsed, usage, out = floors.timed([moss, "migrate", kind, "--from", str(copied), *options, "--json"], project, env)
            report = json.loads(out)
            if report["created"] + report["skipped"] < size:
                raise SystemExit(f"{step}: {kind}: created {report['created']} and skipped {report['skipped']} of {size}")
            runs.setdefault(f"moss migrate {kind} ({step})", floors.Runs()).add(elapsed, usage)
            if not mean_bytes:
                files, total = board_file_bytes(project)
                mean_bytes = max(1, total // max(1, files))
    print(f"corpus: {what}; board files of {mean_bytes} bytes on average); median of {repeat}; {shared.load()}")
    for label, measured in runs.items():
        print(measured.line(label, size))
    floor = statistics.median(runs["floor: write + one syncfs"].wall)
    rows: list[shared.Row] = []
    for label, build in (("after", "this"), ("before", "baseline")):
        if f"moss migrate {kind} ({label})" in runs:
            rows += runs[f"moss migrate {kind} ({label})"].rows(f"moss migrate {kind}", items, size, build, floor)
    for path in made:  # only now: see the module's docstring
        shutil.rmtree(path)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="Capsules and Moe tasks in each source.")
    parser.add_argument("--rows-only", action="store_true", help="issue 29's Beads row only: `moss migrate beads` as a whole process, with its floor")
    parser.add_argument("--beads-source", default=None, help="the Beads issues.jsonl to copy up to each size (default: the test fixture)")
    parser.add_argument(
        "--backlog-source", default=None, help="the Backlog.md backlog/ folder whose task files to copy up to each size (default: the test fixture)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds per size under --rows-only (one from 50,000 on, or with --quick)")
    parser.add_argument(
        "--settle", type=float, default=0.0, help="as bench/import.py's: on ext4 without a journal, time nothing until this many seconds after the start"
    )
    shared.add_common_arguments(parser, default_sizes=(1000, 10000))
    args = parser.parse_args()
    if args.rows_only:
        rows_main(args)
        return
    from moss_files.capsules import transfer
    from moss_files.migrate import service

    count = args.count
    work = Path(tempfile.mkdtemp(prefix="moss-bench-migrate-"))
    try:
        records = moss_records(count)
        export = work / "home" / ".moss" / "exports" / "bench.jsonl"  # where `moss import` may read
        export.parent.mkdir(parents=True)
        write_export(export, records)
        store = work / "home" / ".moss" / "moss.db"
        write_store(store, records)
        moe = work / "moe-source" / ".moe"
        write_moe(moe, count)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; {count} capsules, {count} Moe tasks; seconds")

        baseline_root = fresh_workspace(work, "baseline")
        ctx = Context(baseline_root, home=work / "home")
        seconds, result = timed(lambda: transfer.import_capsules(ctx, path=str(export)))
        print(f"{'baseline: moss import (JSONL)':<44} {seconds:>7.2f}   ({result['imported']} capsules)")

        for label, options in (("moss migrate moss --jsonl", {"jsonl": str(export)}), ("moss migrate moss (moss.db)", {})):
            root = fresh_workspace(work, label.replace(" ", "-").replace("(", "").replace(")", "").replace(".", ""))
            ctx = Context(root, home=work / "home")
            dry, result = timed(lambda options=options, ctx=ctx: service.migrate_moss(ctx, include_deleted=True, dry_run=True, **options))
            first, result = timed(lambda options=options, ctx=ctx: service.migrate_moss(ctx, include_deleted=True, **options))
            again, repeat = timed(lambda options=options, ctx=ctx: service.migrate_moss(ctx, include_deleted=True, **options))
            print(f"{label:<44} {first:>7.2f}   ({result['created']} created; dry run {dry:.2f}; second run {again:.2f}, {repeat['created']} created)")

        root = fresh_workspace(work, "moe")
        shutil.copytree(moe, root / ".moe")
        ctx = Context(root)
        dry, result = timed(lambda: service.migrate_moe(ctx, dry_run=True))
        first, result = timed(lambda: service.migrate_moe(ctx))
        again, repeat = timed(lambda: service.migrate_moe(ctx))
        label = "moss migrate moe"
        print(f"{label:<44} {first:>7.2f}   ({result['created']} created; dry run {dry:.2f}; second run {again:.2f}, {repeat['created']} created)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
